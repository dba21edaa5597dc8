"""Patch conv2d with bias: the seed 003 algorithm on a 1-D grid.

One program computes one output row of one filter for one image, walking the row
BLOCK_Q columns at a time and the input channels BLOCK_C at a time, then adds the
filter's bias: the seed's structure.  Two things change:

* the seed launched a 3-D grid (batch, filter, row); a swizzle needs one pid to
  remap, so the grid is 1-D with ``num_pid_m = N * P`` (image, row) and
  ``num_pid_n = F`` (filter), and the kernel decodes exactly that launch.  (The
  seed's rewrite decoded a 1-D pid while still launching 3-D: most programs
  computed the same tile.)
* the seed assumed stride == kernel size and no padding; any stride and padding
  work here, non-overlapping windows being the case stride == R == S.
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
def patch_conv2d_kernel(
    x_ptr, w_ptr, b_ptr, y_ptr,
    N, C, H, W, F, R, S, P, Q, stride, padding,
    SWIZZLE: tl.constexpr, NUM_XCDS: tl.constexpr, GROUP_SIZE: tl.constexpr,
    BLOCK_Q: tl.constexpr, BLOCK_C: tl.constexpr,
):
    # -----------------------------------------------------------
    # Decode the (swizzled) pid exactly as the launcher laid out the grid.
    num_pid_m = N * P
    num_pid_n = F
    tile = SWIZZLE(tl.program_id(0), num_pid_m, num_pid_n, NUM_XCDS, GROUP_SIZE)
    row = tile // num_pid_n          # (image, output row)
    f = tile % num_pid_n             # filter
    n = row // P
    p = row % P

    bias = tl.load(b_ptr + f).to(tl.float32)
    offs_c = tl.arange(0, BLOCK_C)

    # -----------------------------------------------------------
    # Walk the output row BLOCK_Q columns at a time.
    for q0 in range(0, Q, BLOCK_Q):
        q = q0 + tl.arange(0, BLOCK_Q)
        mask_q = q < Q
        acc = tl.zeros((BLOCK_Q,), dtype=tl.float32)
        for r in range(R):
            # The input row is the same for the whole block; it is kept as a vector so
            # every mask is a boolean tensor (the interpreter mis-types scalar & vector).
            ih = tl.full((BLOCK_Q,), p * stride - padding + r, tl.int32)
            for s in range(S):
                iw = q * stride - padding + s
                in_image = mask_q & (ih >= 0) & (ih < H) & (iw >= 0) & (iw < W)
                for c0 in range(0, C, BLOCK_C):
                    c = c0 + offs_c
                    x = tl.load(x_ptr + n * (C * H * W) + c[None, :] * (H * W) + ih[:, None] * W + iw[:, None],
                                mask=in_image[:, None] & (c[None, :] < C), other=0.0)
                    w = tl.load(w_ptr + f * (C * R * S) + c * (R * S) + r * S + s, mask=c < C, other=0.0)
                    acc += tl.sum(x.to(tl.float32) * w.to(tl.float32)[None, :], axis=1)
        y_off = n * (F * P * Q) + f * (P * Q) + p * Q + q
        tl.store(y_ptr + y_off, (acc + bias).to(y_ptr.dtype.element_ty), mask=mask_q)


class PatchConv(ConvKernel):
    name = "patch"
    jit_kernel = patch_conv2d_kernel
    tile_names = ("BLOCK_Q", "BLOCK_C")
    has_bias = True

    def tile_grid(self, shape: ConvShape, tiles: Mapping[str, int]) -> TileGrid:
        return TileGrid(shape.N * shape.P, shape.F)

    def to_layout(self, ops: Operands) -> tuple:
        return ops.w.contiguous(), ops.bias.contiguous()

    def launch(self, operands, out, shape, tiles, swizzle: SwizzleBinding, launch: LaunchConfig) -> None:
        x, w, b = operands
        grid = (self.tile_grid(shape, tiles).num_pids,)
        patch_conv2d_kernel[grid](
            x, w, b, out,
            shape.N, shape.C, shape.H, shape.W, shape.F, shape.R, shape.S, shape.P, shape.Q,
            shape.stride, shape.padding,
            swizzle.fn, swizzle.num_xcds, swizzle.group_size,
            num_warps=launch.num_warps, num_stages=launch.num_stages, **tiles)

    def load_plan(self, shape: ConvShape, tiles: Mapping[str, int], elem_bytes: int | None = None) -> LoadPlan:
        """Step ``k`` is iteration ``(q0 = qb * BLOCK_Q, r, s, c0 = cb * BLOCK_C)`` of the
        kernel's loops, ``k = ((qb * R + r) * S + s) * cdiv(C, BLOCK_C) + cb``.  At each step
        the program for (image n, output row p, filter f) loads

        * input: element (n, c, ih, iw) for each column ``q0 <= q < min(q0 + BLOCK_Q, Q)``
          whose tap falls inside the image and each channel ``c0 <= c < min(c0 + BLOCK_C, C)``;
        * weights: element (f, c, r, s) for each such channel (reloaded for every column block);
        * bias: element f, at step 0 only (it is loaded once, before the loops).

        The input table has a row per (image, output row) ``= tile // F``; the weight and
        bias tables one per filter ``= tile % F``.  Every element is its own run.
        """
        tiles = self.check_tiles(tiles)
        bq, bc = tiles["BLOCK_Q"], tiles["BLOCK_C"]
        eb = elem_bytes or element_bytes(shape)
        bases = tensor_bases(shape, with_bias=True, elem_bytes=eb)
        N, C, H, W, F, R, S, P, Q = (shape.N, shape.C, shape.H, shape.W, shape.F, shape.R, shape.S,
                                     shape.P, shape.Q)
        num_qb, num_cb = triton.cdiv(Q, bq), triton.cdiv(C, bc)
        qb, r, s, cb = step_grid(num_qb, R, S, num_cb)
        num_steps = len(qb)
        q = (qb * bq)[:, None] + np.arange(bq)                  # (steps, BLOCK_Q) output column
        c = (cb * bc)[:, None] + np.arange(bc)                  # (steps, BLOCK_C) channel
        iw = q * shape.stride - shape.padding + s[:, None]
        q_on = (q < Q) & (iw >= 0) & (iw < W)
        c_on = c < C

        def x_runs(row: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            n, p = row // P, row % P
            ih = (p * shape.stride - shape.padding)[:, None] + r[None, :]               # (rows, steps)
            on_q = q_on[None] & ((ih >= 0) & (ih < H))[..., None]                         # (rows, steps, q)
            base = (n * (C * H * W))[:, None, None] + ih[..., None] * W + iw[None]        # (rows, steps, q)
            start = bases["x"] + (base[..., None] + c[None, :, None, :] * (H * W)) * eb   # (rows, steps, q, c)
            on = on_q[..., None] & c_on[None, :, None, :]
            rows = len(row)
            return (np.where(on, start, 0).reshape(rows, num_steps, -1),
                    np.where(on, eb, 0).reshape(rows, num_steps, -1))

        def w_runs(f: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            start = bases["w"] + (f[:, None, None] * (C * R * S) + c[None] * (R * S)
                                  + (r * S + s)[None, :, None]) * eb                       # (rows, steps, c)
            on = np.broadcast_to(c_on[None], start.shape)
            return np.where(on, start, 0), np.where(on, eb, 0)

        def b_runs(f: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            start = np.zeros((len(f), num_steps, 1), dtype=np.int64)
            length = np.zeros_like(start)
            start[:, 0, 0] = bases["b"] + f * eb
            length[:, 0, 0] = eb
            return start, length

        tile_ids = np.arange(N * P * F, dtype=np.int64)
        return LoadPlan(num_steps=num_steps, elem_bytes=eb, operands=(
            OperandLoads("x", N * P, tile_ids // F, bq * bc, x_runs),
            OperandLoads("w", F, tile_ids % F, bc, w_runs),
            OperandLoads("b", F, tile_ids % F, 1, b_runs),
        ))
