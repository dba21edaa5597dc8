"""A conv2d kernel family of your own, benchmarked by swizzlebench without editing it.

``PixelConv`` is a plain direct conv: each program computes BLOCK_M output pixels (the
N x P x Q output positions, flattened) for BLOCK_F filters, accumulating one input channel
of one filter tap at a time as an outer product.  Input N, C, H, W and output N, F, P, Q
are NCHW, weights F, C, R, S: the reference layouts.  ``to_layout`` hands over the constant
operands (the weights, made once, untimed); the input comes through ``input_view`` inside the
timed launch (the default makes it NCHW-contiguous: a copy when the harness's input is
channels_last, and that copy is charged to this kernel, as it should be).

What swizzlebench needs from a family (kernels/base.py, ConvKernel):
``tile_names``, ``jit_kernel``, ``tile_grid``, ``to_layout``, ``launch``, and a jit kernel
that takes the swizzle as a ``tl.constexpr`` and decodes its tile row-major from the
swizzle's result.  There is no ``load_plan`` (address model) here, so ``profiler=sim``
fails this family's jobs with a one-line reason: use ``profiler=none`` or a GPU profiler.

Selected by ``conf/kernel/mykernel.yaml`` (``_target_: mykernels:PixelConv``).
"""
from __future__ import annotations

from typing import Mapping

import triton
import triton.language as tl

from kernels.base import ConvKernel, LaunchConfig, Operands, SwizzleBinding, TileGrid
from kernels.problem import ConvShape


@triton.jit
def pixel_conv2d_kernel(
    x_ptr, w_ptr, y_ptr,
    N, C, H, W, F, R, S, P, Q, stride, padding,
    SWIZZLE: tl.constexpr, NUM_XCDS: tl.constexpr, GROUP_SIZE: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_F: tl.constexpr,
):
    # The swizzle picks this program's tile; tiles are numbered row-major over
    # (pixel blocks) x (filter blocks).
    num_pid_m = tl.cdiv(N * P * Q, BLOCK_M)
    num_pid_n = tl.cdiv(F, BLOCK_F)
    tile = SWIZZLE(tl.program_id(0), num_pid_m, num_pid_n, NUM_XCDS, GROUP_SIZE)
    pid_m = tile // num_pid_n
    pid_n = tile % num_pid_n

    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)     # output pixel (n, p, q), flattened
    offs_f = pid_n * BLOCK_F + tl.arange(0, BLOCK_F)     # filter
    n = offs_m // (P * Q)
    p = (offs_m // Q) % P
    q = offs_m % Q
    mask_m = offs_m < N * P * Q
    mask_f = offs_f < F

    acc = tl.zeros((BLOCK_M, BLOCK_F), dtype=tl.float32)
    for r in range(R):
        for s in range(S):
            ih = p * stride - padding + r
            iw = q * stride - padding + s
            in_image = mask_m & (ih >= 0) & (ih < H) & (iw >= 0) & (iw < W)
            for c in range(C):
                x = tl.load(x_ptr + ((n * C + c) * H + ih) * W + iw, mask=in_image, other=0.0)
                w = tl.load(w_ptr + ((offs_f * C + c) * R + r) * S + s, mask=mask_f, other=0.0)
                acc += x.to(tl.float32)[:, None] * w.to(tl.float32)[None, :]

    y_off = ((n[:, None] * F + offs_f[None, :]) * P + p[:, None]) * Q + q[:, None]
    tl.store(y_ptr + y_off, acc.to(y_ptr.dtype.element_ty), mask=mask_m[:, None] & mask_f[None, :])


class PixelConv(ConvKernel):
    """Direct conv over (BLOCK_M output pixels) x (BLOCK_F filters) tiles, NCHW."""

    jit_kernel = pixel_conv2d_kernel
    tile_names = ("BLOCK_M", "BLOCK_F")

    def tile_grid(self, shape: ConvShape, tiles: Mapping[str, int]) -> TileGrid:
        """num_pid_m pixel blocks x num_pid_n filter blocks; the kernel computes the same."""
        return TileGrid(triton.cdiv(shape.N * shape.P * shape.Q, tiles["BLOCK_M"]),
                        triton.cdiv(shape.F, tiles["BLOCK_F"]))

    def to_layout(self, ops: Operands) -> tuple:
        """The weights F, C, R, S, contiguous (the input is ``input_view``'s, at launch)."""
        return (ops.w.contiguous(),)

    def launch(self, operands: tuple, out, shape: ConvShape, tiles: Mapping[str, int],
               swizzle: SwizzleBinding, launch: LaunchConfig) -> None:
        """One program per tile of a 1-D grid."""
        x, w = operands
        pixel_conv2d_kernel[(self.tile_grid(shape, tiles).num_pids,)](
            x, w, out,
            shape.N, shape.C, shape.H, shape.W, shape.F, shape.R, shape.S, shape.P, shape.Q,
            shape.stride, shape.padding,
            swizzle.fn, swizzle.num_xcds, swizzle.group_size,
            num_warps=launch.num_warps, num_stages=launch.num_stages, **tiles)
