"""Direct (non-GEMM) conv2d: the seed 000 algorithm, made correct.

Each program owns a 4-D output tile of BLOCK_N images x BLOCK_F filters x
BLOCK_H x BLOCK_W pixels (NCHW).  For every filter tap (r, s) and every block of
BLOCK_C input channels it multiplies an input block by a weight block and
reduces over the channel axis with ``tl.sum``: no tensor cores, which is the
point of the family.

What the seed got wrong and this version does not: it read only the first
BLOCK_C channels (here the channel loop covers all of C), it indexed the weights
with filter and channel offsets on the same axis (here weights are a
[BLOCK_C, BLOCK_F] block), and it had no stride or padding.

The N, H and W tile axes are flattened into one "pixel" axis so every tensor is
at most 3-D: [pixels, channels, filters].
"""
from __future__ import annotations

from typing import Mapping

import numpy as np
import triton
import triton.language as tl

from kernels.access import LoadPlan, OperandLoads, element_bytes, step_grid, tensor_bases
from kernels.base import ConvKernel, LaunchConfig, Operands, SwizzleBinding, TileGrid
from kernels.problem import ConvShape


@triton.jit
def direct_conv2d_kernel(
    x_ptr, w_ptr, y_ptr,
    N, C, H, W, F, R, S, P, Q, stride, padding,
    SWIZZLE: tl.constexpr, NUM_XCDS: tl.constexpr, GROUP_SIZE: tl.constexpr,
    BLOCK_N: tl.constexpr, BLOCK_F: tl.constexpr, BLOCK_H: tl.constexpr,
    BLOCK_W: tl.constexpr, BLOCK_C: tl.constexpr,
):
    # -----------------------------------------------------------
    # Tile ids: m runs over (image block, row block, column block), n over filter blocks.
    num_pid_w = tl.cdiv(Q, BLOCK_W)
    num_pid_h = tl.cdiv(P, BLOCK_H)
    num_pid_m = tl.cdiv(N, BLOCK_N) * num_pid_h * num_pid_w
    num_pid_n = tl.cdiv(F, BLOCK_F)
    tile = SWIZZLE(tl.program_id(0), num_pid_m, num_pid_n, NUM_XCDS, GROUP_SIZE)
    pid_m = tile // num_pid_n
    pid_f = tile % num_pid_n
    pid_w = pid_m % num_pid_w
    pid_h = (pid_m // num_pid_w) % num_pid_h
    pid_b = pid_m // (num_pid_w * num_pid_h)

    # -----------------------------------------------------------
    # The tile's pixels, flattened: pixel i is image i // (BH*BW), row (i // BW) % BH,
    # column i % BW inside the tile.
    BLOCK_PIX: tl.constexpr = BLOCK_N * BLOCK_H * BLOCK_W
    offs_pix = tl.arange(0, BLOCK_PIX)
    n = pid_b * BLOCK_N + offs_pix // (BLOCK_H * BLOCK_W)
    p = pid_h * BLOCK_H + (offs_pix // BLOCK_W) % BLOCK_H
    q = pid_w * BLOCK_W + offs_pix % BLOCK_W
    mask_pix = (n < N) & (p < P) & (q < Q)
    offs_f = pid_f * BLOCK_F + tl.arange(0, BLOCK_F)
    mask_f = offs_f < F
    offs_c = tl.arange(0, BLOCK_C)

    # -----------------------------------------------------------
    # Accumulate over taps and *all* channel blocks.
    acc = tl.zeros((BLOCK_PIX, BLOCK_F), dtype=tl.float32)
    for r in range(R):
        for s in range(S):
            ih = p * stride - padding + r
            iw = q * stride - padding + s
            in_image = mask_pix & (ih >= 0) & (ih < H) & (iw >= 0) & (iw < W)
            x_base = n * (C * H * W) + ih * W + iw          # NCHW offset of channel 0
            w_base = offs_f * (C * R * S) + r * S + s        # FCRS offset of channel 0
            for c0 in range(0, C, BLOCK_C):
                c = c0 + offs_c
                x = tl.load(x_ptr + x_base[:, None] + c[None, :] * (H * W),
                            mask=in_image[:, None] & (c[None, :] < C), other=0.0)
                w = tl.load(w_ptr + w_base[None, :] + c[:, None] * (R * S),
                            mask=(c[:, None] < C) & mask_f[None, :], other=0.0)
                prod = x.to(tl.float32)[:, :, None] * w.to(tl.float32)[None, :, :]
                acc += tl.sum(prod, axis=1)

    # -----------------------------------------------------------
    y_off = n[:, None] * (F * P * Q) + offs_f[None, :] * (P * Q) + p[:, None] * Q + q[:, None]
    tl.store(y_ptr + y_off, acc.to(y_ptr.dtype.element_ty), mask=mask_pix[:, None] & mask_f[None, :])


class DirectConv(ConvKernel):
    name = "direct"
    jit_kernel = direct_conv2d_kernel
    tile_names = ("BLOCK_N", "BLOCK_F", "BLOCK_H", "BLOCK_W", "BLOCK_C")

    def tile_grid(self, shape: ConvShape, tiles: Mapping[str, int]) -> TileGrid:
        num_pid_m = (triton.cdiv(shape.N, tiles["BLOCK_N"]) * triton.cdiv(shape.P, tiles["BLOCK_H"])
                     * triton.cdiv(shape.Q, tiles["BLOCK_W"]))
        return TileGrid(num_pid_m, triton.cdiv(shape.F, tiles["BLOCK_F"]))

    def to_layout(self, ops: Operands) -> tuple:
        return (ops.w.contiguous(),)

    def launch(self, operands, out, shape, tiles, swizzle: SwizzleBinding, launch: LaunchConfig) -> None:
        x, w = operands
        grid = (self.tile_grid(shape, tiles).num_pids,)
        direct_conv2d_kernel[grid](
            x, w, out,
            shape.N, shape.C, shape.H, shape.W, shape.F, shape.R, shape.S, shape.P, shape.Q,
            shape.stride, shape.padding,
            swizzle.fn, swizzle.num_xcds, swizzle.group_size,
            num_warps=launch.num_warps, num_stages=launch.num_stages, **tiles)

    def load_plan(self, shape: ConvShape, tiles: Mapping[str, int], elem_bytes: int | None = None) -> LoadPlan:
        """Step ``k`` is iteration ``(r, s, c0 = cb * BLOCK_C)`` of the kernel's loops,
        ``k = (r * S + s) * cdiv(C, BLOCK_C) + cb``.  At each step a tile loads

        * input: element (n, c, ih, iw) for each of its BLOCK_N*BLOCK_H*BLOCK_W pixels whose
          tap falls inside the image, times each channel ``c0 <= c < min(c0 + BLOCK_C, C)``
          (NCHW: channels are H*W elements apart, so every element is its own run);
        * weights: element (f, c, r, s) for each filter ``f < F`` of the tile and each such channel.

        The input table has a row per pixel tile ``pid_m`` (image block, row block, column
        block, decoded as the kernel does), the weight table one per filter tile.
        """
        tiles = self.check_tiles(tiles)
        bn, bf, bh, bw, bc = (tiles["BLOCK_N"], tiles["BLOCK_F"], tiles["BLOCK_H"], tiles["BLOCK_W"],
                              tiles["BLOCK_C"])
        eb = elem_bytes or element_bytes(shape)
        bases = tensor_bases(shape, with_bias=False, elem_bytes=eb)
        N, C, H, W, F, R, S, P, Q = (shape.N, shape.C, shape.H, shape.W, shape.F, shape.R, shape.S,
                                     shape.P, shape.Q)
        grid = self.tile_grid(shape, tiles)
        num_pid_w, num_pid_h = triton.cdiv(Q, bw), triton.cdiv(P, bh)
        num_cb = triton.cdiv(C, bc)
        r, s, cb = step_grid(R, S, num_cb)
        c = (cb * bc)[:, None] + np.arange(bc)                # (steps, BLOCK_C) channel index
        c_on = c < C

        def x_runs(pid_m: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            pid_w = pid_m % num_pid_w
            pid_h = (pid_m // num_pid_w) % num_pid_h
            pid_b = pid_m // (num_pid_w * num_pid_h)
            i = np.arange(bn * bh * bw)
            n = pid_b[:, None] * bn + i // (bh * bw)            # (rows, BLOCK_PIX)
            p = pid_h[:, None] * bh + (i // bw) % bh
            q = pid_w[:, None] * bw + i % bw
            ih = (p * shape.stride - shape.padding)[:, None, :] + r[None, :, None]   # (rows, steps, pix)
            iw = (q * shape.stride - shape.padding)[:, None, :] + s[None, :, None]
            on = (((n < N) & (p < P) & (q < Q))[:, None, :] & (ih >= 0) & (ih < H) & (iw >= 0) & (iw < W))
            base = n[:, None, :] * (C * H * W) + ih * W + iw
            start = bases["x"] + (base[..., None] + c[None, :, None, :] * (H * W)) * eb   # (rows, steps, pix, c)
            on = on[..., None] & c_on[None, :, None, :]
            rows = len(pid_m)
            return (np.where(on, start, 0).reshape(rows, len(r), -1),
                    np.where(on, eb, 0).reshape(rows, len(r), -1))

        def w_runs(pid_f: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            f = pid_f[:, None] * bf + np.arange(bf)             # (rows, BLOCK_F)
            base = f[:, None, :] * (C * R * S) + (r * S + s)[None, :, None]               # (rows, steps, f)
            start = bases["w"] + (base[..., None] + c[None, :, None, :] * (R * S)) * eb   # (rows, steps, f, c)
            on = (f < F)[:, None, :, None] & c_on[None, :, None, :]
            rows = len(pid_f)
            return (np.where(on, start, 0).reshape(rows, len(r), -1),
                    np.where(on, eb, 0).reshape(rows, len(r), -1))

        tile_ids = np.arange(grid.num_pids, dtype=np.int64)
        return LoadPlan(num_steps=R * S * num_cb, elem_bytes=eb, operands=(
            OperandLoads("x", grid.num_pid_m, tile_ids // grid.num_pid_n, bn * bh * bw * bc, x_runs),
            OperandLoads("w", grid.num_pid_n, tile_ids % grid.num_pid_n, bf * bc, w_runs),
        ))
