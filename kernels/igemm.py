"""Implicit-GEMM conv2d with ``tl.dot``: the portable form of seed 002's design.

The convolution is a matrix product that is never materialised:

* rows    M = N * P * Q   output pixels (n, p, q),
* columns   F             filters,
* depth   K = R * S * C   one filter tap (r, s) times every input channel.

Input is NHWC and weights OHWI, so for a fixed tap (r, s) a BLOCK_K slice of the
reduction is a contiguous run of channels in both operands: each K-step is two
coalesced 2-D loads and one ``tl.dot``.  The output is NHWC, i.e. a row-major
M x F matrix.
"""
from __future__ import annotations

from typing import Mapping

import numpy as np
import torch
import triton
import triton.language as tl

from kernels.access import Epilogue, LoadPlan, OperandLoads, element_bytes, place_tensors, step_grid, tensor_bases
from kernels.base import ConvKernel, LaunchConfig, Operands, SwizzleBinding, TileGrid
from kernels.gemm_parts import dot_in_fp32, mma, output_pixels
from kernels.problem import ConvShape
from kernels.tuning import Config, DeviceTraits, filter_tiles, warps_for


def input_runs(shape: ConvShape, block_m: int, x_base: int, eb: int, r: np.ndarray, s: np.ndarray,
               c: np.ndarray, nbytes: np.ndarray, rows=None):
    """The input loads of an NHWC implicit GEMM, as a :class:`~kernels.access.OperandLoads` runs
    function over pixel tiles.  ``r, s, c, nbytes`` are ``(steps, runs)`` arrays: at each step
    every output pixel of the tile reads, for each run, ``nbytes`` bytes starting at channel
    ``c`` of its tap ``(r, s)`` (nothing where the tap falls in the padding, or ``nbytes`` is 0).
    ``rows(pid_m)`` -> ``(n, p, q, loads)`` says which pixel each of a tile's BLOCK_M rows is,
    and whether it loads at all; by default row ``i`` is pixel ``pid_m * BLOCK_M + i`` of the
    M = N*P*Q output pixels, loading below M."""
    N, C, H, W, P, Q = shape.N, shape.C, shape.H, shape.W, shape.P, shape.Q

    def pixel_rows(pid_m: np.ndarray) -> tuple[np.ndarray, ...]:
        m = pid_m[:, None] * block_m + np.arange(block_m)  # (rows, BLOCK_M) output pixel index
        return m // (P * Q), (m // Q) % P, m % Q, m < N * P * Q

    def runs(pid_m: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        n, p, q, loads = (rows or pixel_rows)(pid_m)
        # axes: (rows, steps, pixels, runs)
        ih = (p * shape.stride - shape.padding)[:, None, :, None] + r[None, :, None, :]
        iw = (q * shape.stride - shape.padding)[:, None, :, None] + s[None, :, None, :]
        on = (loads[:, None, :, None] & (ih >= 0) & (ih < H) & (iw >= 0) & (iw < W)
              & (nbytes > 0)[None, :, None, :])
        start = x_base + (((n[:, None, :, None] * H + ih) * W + iw) * C + c[None, :, None, :]) * eb
        length = np.broadcast_to(nbytes[None, :, None, :], on.shape)
        shape_out = (len(pid_m), r.shape[0], -1)
        return np.where(on, start, 0).reshape(shape_out), np.where(on, length, 0).reshape(shape_out)

    return runs


def tile_pixels(block_m: int, num_pixels: int):
    """Output pixels (rows of the M x F matrix) of pixel tiles: ``pixels(pid_m)`` -> ``(m,
    valid)``, both ``(len(pid_m), BLOCK_M)``: rows ``pid_m * BLOCK_M + i``, valid below M."""
    def pixels(pid_m: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        m = pid_m[:, None] * block_m + np.arange(block_m)
        return m, m < num_pixels

    return pixels


def output_tile_runs(pixels, num_pid_n: int, F: int, block_n: int, base: int, eb: int,
                     splits: int = 1, slice_bytes: int = 0):
    """The stores of a tile's block of a row-major M x F matrix (NHWC output, or an fp32
    split-K partial), as an :class:`~kernels.access.OperandLoads` runs function over keys
    ``tile * splits + split``: each valid row ``m`` of the tile (``pixels``, see
    :func:`tile_pixels`) writes one run of ``min(BLOCK_N, F - f0)`` elements of ``eb`` bytes
    at ``base + split * slice_bytes + (m * F + f0) * eb``, ``f0 = pid_n * BLOCK_N``."""
    def runs(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        tile, split = keys // splits, keys % splits
        m, valid = pixels(tile // num_pid_n)                             # (keys, BLOCK_M)
        f0 = (tile % num_pid_n) * block_n
        start = base + (split * slice_bytes)[:, None] + (m * F + f0[:, None]) * eb
        length = np.broadcast_to((np.minimum(block_n, F - f0) * eb)[:, None], start.shape)
        return np.where(valid, start, 0)[:, None, :], np.where(valid, length, 0)[:, None, :]

    return runs


@triton.jit
def igemm_conv2d_kernel(
    x_ptr, w_ptr, y_ptr,
    N, C, H, W, F, R, S, P, Q, stride, padding,
    SWIZZLE: tl.constexpr, NUM_XCDS: tl.constexpr, GROUP_SIZE: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    DOT_IN_FP32: tl.constexpr = False,
):
    # -----------------------------------------------------------
    # Which output tile this program computes.  The swizzle maps the launch-order
    # pid to a tile id; tiles are numbered row-major over (pixel tile, filter tile).
    num_pid_m = tl.cdiv(N * P * Q, BLOCK_M)
    num_pid_n = tl.cdiv(F, BLOCK_N)
    tile = SWIZZLE(tl.program_id(0), num_pid_m, num_pid_n, NUM_XCDS, GROUP_SIZE)
    pid_m = tile // num_pid_n
    pid_n = tile % num_pid_n

    # -----------------------------------------------------------
    # Decode the tile's rows into output pixels (n, p, q) and the top-left input
    # position of each pixel's receptive field (may be negative inside the padding).
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_f = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    mask_m = offs_m < N * P * Q
    mask_f = offs_f < F
    n, ih0, iw0 = output_pixels(offs_m, P, Q, stride, padding)
    offs_k = tl.arange(0, BLOCK_K)

    # -----------------------------------------------------------
    # Reduce over every tap (r, s) and every channel block.  Out-of-image taps load
    # zeros, which is exactly what zero padding means.
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for r in range(R):
        for s in range(S):
            ih = ih0 + r
            iw = iw0 + s
            in_image = mask_m & (ih >= 0) & (ih < H) & (iw >= 0) & (iw < W)
            x_row = ((n * H + ih) * W + iw) * C          # NHWC offset of channel 0
            w_col = offs_f * (R * S * C) + (r * S + s) * C  # OHWI offset of channel 0
            for c0 in range(0, C, BLOCK_K):
                c = c0 + offs_k
                a = tl.load(x_ptr + x_row[:, None] + c[None, :],
                            mask=in_image[:, None] & (c[None, :] < C), other=0.0)
                b = tl.load(w_ptr + w_col[None, :] + c[:, None],
                            mask=(c[:, None] < C) & mask_f[None, :], other=0.0)
                acc = mma(a, b, acc, DOT_IN_FP32)  # DOT_IN_FP32: CPU interpreter only (gemm_parts.mma)

    # -----------------------------------------------------------
    # The output is the row-major M x F matrix (NHWC).
    y = acc.to(y_ptr.dtype.element_ty)
    tl.store(y_ptr + offs_m[:, None] * F + offs_f[None, :], y,
             mask=mask_m[:, None] & mask_f[None, :])


def nhwc(x: torch.Tensor) -> torch.Tensor:
    """N,C,H,W -> contiguous NHWC (N, H, W, C); free (a view) when ``x`` is already channels_last."""
    return x.permute(0, 2, 3, 1).contiguous()


class ImplicitGemmConv(ConvKernel):
    name = "igemm"
    jit_kernel = igemm_conv2d_kernel
    tile_names = ("BLOCK_M", "BLOCK_N", "BLOCK_K")
    dot_tiles = ("BLOCK_M", "BLOCK_N", "BLOCK_K")

    def tune_space(self, shape: ConvShape, traits: DeviceTraits) -> list[Config]:
        return igemm_space(shape, traits)

    def tile_grid(self, shape: ConvShape, tiles: Mapping[str, int]) -> TileGrid:
        return TileGrid(triton.cdiv(shape.N * shape.P * shape.Q, tiles["BLOCK_M"]),
                        triton.cdiv(shape.F, tiles["BLOCK_N"]))

    def to_layout(self, ops: Operands) -> tuple:
        return (ops.w.permute(0, 2, 3, 1).contiguous(),)          # F, R, S, C

    def input_view(self, x: torch.Tensor, tiles: Mapping[str, int]) -> torch.Tensor:
        """NHWC: a view, no copy, when the caller's ``x`` is channels_last (the harness default)."""
        return nhwc(x)

    def empty_output(self, shape: ConvShape, device: torch.device) -> torch.Tensor:
        return torch.empty((shape.N, shape.P, shape.Q, shape.F), dtype=getattr(torch, shape.dtype),
                           device=device)

    def output_as_nchw(self, out: torch.Tensor) -> torch.Tensor:
        return out.permute(0, 3, 1, 2)

    def launch(self, operands, out, shape, tiles, swizzle: SwizzleBinding, launch: LaunchConfig) -> None:
        x, w = operands
        grid = (self.tile_grid(shape, tiles).num_pids,)
        igemm_conv2d_kernel[grid](
            x, w, out,
            shape.N, shape.C, shape.H, shape.W, shape.F, shape.R, shape.S, shape.P, shape.Q,
            shape.stride, shape.padding,
            swizzle.fn, swizzle.num_xcds, swizzle.group_size,
            DOT_IN_FP32=dot_in_fp32(x, shape.dtype),
            num_warps=launch.num_warps, num_stages=launch.num_stages, **tiles)

    def load_plan(self, shape: ConvShape, tiles: Mapping[str, int], elem_bytes: int | None = None) -> LoadPlan:
        """Step ``k`` is iteration ``(r, s, c0 = cb * BLOCK_K)`` of the kernel's loops,
        ``k = (r * S + s) * cdiv(C, BLOCK_K) + cb``.  At each step a tile loads

        * input: for each of its BLOCK_M output pixels whose tap (r, s) falls inside the
          image, one run of ``min(BLOCK_K, C - c0)`` channels (NHWC keeps them contiguous);
        * weights: for each of its BLOCK_N filters ``< F``, one run of as many channels (OHWI).

        The input table has a row per pixel tile ``pid_m``, the weight table one per
        filter tile ``pid_n``; tile ``t`` is ``(t // num_pid_n, t % num_pid_n)``.
        """
        tiles = self.check_tiles(tiles)
        bm, bn, bk = tiles["BLOCK_M"], tiles["BLOCK_N"], tiles["BLOCK_K"]
        eb = elem_bytes or element_bytes(shape)
        bases = tensor_bases(shape, with_bias=False, elem_bytes=eb)
        N, C, H, W, F, R, S, P, Q = (shape.N, shape.C, shape.H, shape.W, shape.F, shape.R, shape.S,
                                     shape.P, shape.Q)
        grid = self.tile_grid(shape, tiles)
        num_cb = triton.cdiv(C, bk)
        r, s, cb = step_grid(R, S, num_cb)
        c0 = cb * bk
        run_bytes = np.minimum(bk, C - c0) * eb            # (steps,) channels in this block
        x_runs = input_runs(shape, bm, bases["x"], eb, r[:, None], s[:, None], c0[:, None], run_bytes[:, None])

        def w_runs(pid_n: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            f = pid_n[:, None] * bn + np.arange(bn)         # (rows, BLOCK_N) filter index
            start = bases["w"] + (f[:, None, :] * (R * S * C) + ((r * S + s) * C + c0)[None, :, None]) * eb
            on = np.broadcast_to((f < F)[:, None, :], start.shape)
            return np.where(on, start, 0), np.where(on, run_bytes[None, :, None], 0)

        tile_ids = np.arange(grid.num_pids, dtype=np.int64)
        return LoadPlan(num_steps=R * S * num_cb, elem_bytes=eb, operands=(
            OperandLoads("x", grid.num_pid_m, tile_ids // grid.num_pid_n, bm, x_runs),
            OperandLoads("w", grid.num_pid_n, tile_ids % grid.num_pid_n, bn, w_runs),
        ))

    def store_plan(self, shape: ConvShape, tiles: Mapping[str, int], elem_bytes: int | None = None) -> Epilogue:
        """After its last step a tile stores its block of the M x F output (NHWC): one run
        of ``min(BLOCK_N, F - f0)`` elements per valid pixel row.  The output sits after the
        weights (:func:`kernels.access.place_tensors`)."""
        tiles = self.check_tiles(tiles)
        eb = elem_bytes or element_bytes(shape)
        bases = place_tensors({"x": shape.N * shape.C * shape.H * shape.W * eb,
                               "w": shape.F * shape.C * shape.R * shape.S * eb, "y": 0})
        grid = self.tile_grid(shape, tiles)
        pixels = tile_pixels(tiles["BLOCK_M"], shape.N * shape.P * shape.Q)
        runs = output_tile_runs(pixels, grid.num_pid_n, shape.F, tiles["BLOCK_N"], bases["y"], eb)
        keys = np.arange(grid.num_pids, dtype=np.int64)
        return Epilogue(((OperandLoads("y", grid.num_pids, keys, tiles["BLOCK_M"], runs), True),))


def igemm_space(shape: ConvShape, traits: DeviceTraits) -> list[Config]:
    """igemm: the tile sizes and launch settings it takes today."""
    out = []
    for bm in (64, 128):
        for bn in filter_tiles(shape.F):
            for bk in (32, 64):
                for warps in warps_for(bm, bn):
                    for stages in (2, 3, 4):
                        out.append(Config.make({"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk}, warps, stages))
    return out
