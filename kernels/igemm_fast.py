"""Implicit-GEMM conv2d, fast: the matrix product of :mod:`kernels.igemm`, arranged so the
tensor cores stay fed on every layer of a CNN, with the launch choices left to the tuner over
the candidate space at the end of this module (:func:`igemm_fast_space`).

The product is the same as igemm's, never materialised:

* rows    M = N * P * Q   output pixels (n, p, q), NHWC input,
* columns   F             filters,
* depth   K               filter taps (r, s) times input channels c.

What changes, and why (what each change measured: the kernel notes of docs/benchmarks.md):

1. **One flat loop over K steps.**  igemm nests ``for r: for s: for c0``; Triton
   software-pipelines the innermost loop only, so where C = BLOCK_K (the 64-channel 3x3
   layers of a ResNet's first stage) that loop has one iteration and every step waits for
   its own loads.  Here step ``k`` decodes to a tap and a channel block with a few scalar
   operations, and the whole reduction is one loop that ``num_stages`` pipelines.
2. **Weights packed once** as a zero-padded ``[F_pad, K_pad]`` matrix (outside the timed
   closure: weights are constants of a layer).  B tiles then need no mask at all, and on
   Hopper they come through a tensor descriptor (TMA, ``TMA=1``).
3. **Two orders of K.**  ``PACK_K=0`` ("tap"): step = (tap, channel block), channels padded
   per tap up to BLOCK_K, so each pixel's slice of A is a contiguous run of channels (16-byte
   loads).  ``PACK_K=1`` ("packed"): k runs over (r, s, c) with no padding between taps.
   For the 3-channel stem that is 147 -> 160 columns of K instead of 49 x BLOCK_K: the tap
   order would spend 95% of its tensor-core work on zeros.  A is then a gather.
   ``PACK_K=2`` ("rows"): step = (filter row r, block of that row's S*C columns), padded per
   row.  In NHWC one row of a receptive field, all its (s, c), is a single contiguous run of
   S*C elements, so a pixel's slice of A is one contiguous load whose offsets the compiler
   sees as ``x_row + r*W*C + arange``: 7 x 32 = 224 columns for the stem (packed: 160), in
   exchange for loads that coalesce instead of per-element address arithmetic.
4. **Split-K** (``SPLIT_K > 1``): layers with fewer tiles than the GPU has SMs (the 7x7 and
   14x14 stages of a ResNet at batch 32) split the reduction; each split writes its fp32
   partial sums, and they are added in split order (deterministic) either by a second small
   kernel (``SPLIT_SUM=0``) or, with ``SPLIT_SUM=1``, by whichever of a tile's splits
   finishes last (a per-tile arrival counter): no second launch, and the partials it reads
   were written moments before, so they come from L2, but the sum then runs in series at
   the end of the last split; which way is faster depends on the layer, so the tuner tries
   both.
5. **Persistent grid** (``PERSISTENT=1``): one program per SM walks the work items
   ``pid, pid + num_programs, ...``.  The swizzle maps each item's launch-order tile index
   exactly as it maps a program id in the one-tile-per-program launch, so the permutation
   gate over ``tile_grid`` checks what the programs walk.
6. **1x1, stride 1, no padding**: the input *is* the M x C matrix; with ``TMA=1`` (and C a
   multiple of 8, the descriptor's 16-byte stride rule) A comes through a descriptor too, so
   that layer is a plain TMA GEMM.  Out-of-bounds rows and channels read as zeros.

7. **NCHW in** (``NCHW_IN=1``, 1x1 stride-1 layers): per image the NCHW input already *is*
   the matrix A^T (channels x pixels, contiguous along pixels), so the kernel reads it where
   it lies, pixel tiles never straddling two images, and skips the layout copy below.
8. **TMA store** (``TMA_STORE=1``): the output tile leaves through a tensor descriptor (one
   bulk copy from shared memory, rows past M clipped by the hardware) instead of masked
   stores from the accumulator's registers.  Most ResNet layers write more than they read
   (l04: 51 MB out, 13 MB in), so the epilogue is a large part of their time; the tile's
   trip through shared memory costs shared memory and a wait of its own, so the tuner
   decides per layer.
9. **Stride folding** (``FOLD=1``, strided layers with few channels: the stem): a stride-s
   conv is a stride-1 conv over the *space-to-depth* input, whose pixel (h', w') holds the
   s x s input pixels it covers as s*s*C channels, with ceil(R/s) x ceil(S/s) taps (weights
   re-packed once, zeros for the taps past R and S).  The stem's 3 channels become 12,
   padded to 16: every load is an aligned 32-byte run instead of a gather of 3-element
   pieces at 6-byte offsets.  The fold is a pass over the input that the vendor call does not
   need, so it runs inside the timed launch (:func:`fold_input_kernel`).

10. **Pixel rectangles** (``BOX_W > 0``, stride-1 layers in tap order, Hopper): a tile's
   BLOCK_M output rows are a ``(BLOCK_M // BOX_W) x BOX_W`` rectangle of one image's pixels,
   so at tap (r, s) its A tile is the input rectangle shifted by ``(r - padding, s -
   padding)``: one 4-D box ``[1, BLOCK_M // BOX_W, BOX_W, BLOCK_K]`` of the NHWC input,
   loaded by a tensor descriptor (TMA) in one bulk copy.  Coordinates may be negative or run
   past the image: the hardware fills zeros there, which is the zero padding.  Hopper has no
   im2col mode in Triton, and this is the layout that needs none; the price is the
   rectangle's rows past the image's edge, computed and dropped (none where BOX_W divides Q
   and the height divides P).

The input is otherwise NHWC.  Like every family's input transform it runs *inside* the
timed launcher (:meth:`kernels.base.ConvKernel.input_view`): the harness hands this kernel
and the vendor call the same input tensor (channels_last by default, ``input_layout``), so
the NHWC view is free there, and with ``input_layout=nchw`` the copy is charged to us.

Length: one family, read top to bottom: the jit kernel and its A-tile loaders, the host-side
weight packing and the address model all encode the same three K orders (and the fold) and
must agree; split, a change to one order would have to be made in three files.
"""
from __future__ import annotations

from typing import Callable, Mapping

import numpy as np
import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

from kernels.access import (Epilogue, LaunchPlan, LoadPlan, OperandLoads, Schedule, element_bytes, launched_programs,
                            place_tensors)
from kernels.base import Bound, LaunchConfig, Operands, SwizzleBinding, TileGrid
from kernels.gemm_parts import dot_in_fp32, mma, output_pixels
from kernels.igemm import ImplicitGemmConv, input_runs, nhwc, output_tile_runs, tile_pixels
from kernels.problem import ConvShape
from kernels.tuning import Config, DeviceTraits, filter_tiles, pow2_at_least, stages_for, warps_for


@triton.jit
def _a_tile_tap(x_ptr, step, x_row, ih0, iw0, mask_m, offs_k, C, H, W, S, BLOCK_K: tl.constexpr):
    """A for step = (tap, channel block): each pixel's in-image tap reads BLOCK_K channels."""
    num_cb = tl.cdiv(C, BLOCK_K)
    tap = step // num_cb
    c = (step - tap * num_cb) * BLOCK_K + offs_k
    r = tap // S
    s = tap - r * S
    ih = ih0 + r
    iw = iw0 + s
    in_image = mask_m & (ih >= 0) & (ih < H) & (iw >= 0) & (iw < W)
    # x_row is channel 0 of the receptive field's top-left corner; the tap moves it by (r, s).
    ptrs = x_ptr + (x_row + (r * W + s) * C)[:, None] + c[None, :]
    return tl.load(ptrs, mask=in_image[:, None] & (c < C)[None, :], other=0.0)


@triton.jit
def _a_tile_packed(x_ptr, step, x_row, ih0, iw0, mask_m, offs_k, C, H, W, R, S, BLOCK_K: tl.constexpr):
    """A for step = BLOCK_K consecutive columns of K = (r, s, c) with no padding between taps:
    every column has its own tap, so every element is its own gather."""
    k = step * BLOCK_K + offs_k
    tap = k // C
    c = k - tap * C
    r = tap // S
    s = tap - r * S
    ih = ih0[:, None] + r[None, :]
    iw = iw0[:, None] + s[None, :]
    ok = (mask_m[:, None] & (tap < R * S)[None, :]
          & (ih >= 0) & (ih < H) & (iw >= 0) & (iw < W))
    return tl.load(x_ptr + x_row[:, None] + ((r * W + s) * C + c)[None, :], mask=ok, other=0.0)


@triton.jit
def _a_tile_rows(x_ptr, step, x_row, ih0, iw0, mask_m, offs_k, C, H, W, S, BLOCK_K: tl.constexpr,
                 PADDED: tl.constexpr):
    """A for step = (filter row r, BLOCK_K of its S*C columns j = s*C + c): the receptive
    field's row is contiguous in NHWC, so the columns are consecutive addresses.  Without
    padding every tap of a valid pixel is in the image, and the mask (whole rows and whole
    16-column groups) lets the compiler issue 16-byte loads; with it, each column has its
    own horizontal bound."""
    steps_per_row = tl.cdiv(S * C, BLOCK_K)
    r = step // steps_per_row
    j = (step - r * steps_per_row) * BLOCK_K + offs_k
    if PADDED:
        ih = ih0 + r
        iw = iw0[:, None] + (j // C)[None, :]
        ok = ((mask_m & (ih >= 0) & (ih < H))[:, None] & (j < S * C)[None, :] & (iw >= 0) & (iw < W))
    else:
        ok = mask_m[:, None] & (j < S * C)[None, :]
    return tl.load(x_ptr + (x_row + r * W * C)[:, None] + j[None, :], mask=ok, other=0.0)


@triton.jit
def _a_tile_nchw(x_ptr, step, x_img, offs_hw, mask_m, offs_k, C, PQ, BLOCK_K: tl.constexpr):
    """A for a 1x1, stride-1 layer read straight from NCHW: per image the input is the
    C x (P*Q) matrix A^T, contiguous along pixels.  Load a BLOCK_K x BLOCK_M slab and
    transpose it (the tensor cores take either major order from shared memory)."""
    c = step * BLOCK_K + offs_k
    a_t = tl.load(x_ptr + x_img + c[:, None] * PQ + offs_hw[None, :],
                  mask=(c < C)[:, None] & mask_m[None, :], other=0.0)
    return tl.trans(a_t)


@triton.jit
def _a_tile_box(x_desc, step, n_img, p0, q0, C, S, padding, BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr):
    """A for step = (tap, channel block) of a rectangle of pixels (BOX_W): the input box at the
    rectangle's corner shifted by the tap, through the tensor descriptor, as BLOCK_M rows."""
    num_cb = tl.cdiv(C, BLOCK_K)
    tap = step // num_cb
    r = tap // S
    s = tap - r * S
    box = x_desc.load([n_img, p0 + r - padding, q0 + s - padding, (step - tap * num_cb) * BLOCK_K])
    return box.reshape(BLOCK_M, BLOCK_K)


@triton.jit
def _store_tile(acc, y_ptr, ws_ptr, count_ptr, y_desc, offs_m, mask_m, offs_f, pid_m, pid_n, tile, split, M, F,
                BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, SPLIT_K: tl.constexpr, TMA_STORE: tl.constexpr,
                SPLIT_SUM: tl.constexpr):
    """The epilogue: a finished tile's fp32 sums ``acc`` (rows ``offs_m`` of the output matrix,
    ``mask_m`` those inside it; columns ``offs_f``) to the output, the row-major M x F matrix
    (NHWC); split ``split`` of a split-K tile writes fp32 partials to its own slice of the
    workspace instead, and with SPLIT_SUM the last split to arrive adds them."""
    mask = mask_m[:, None] & (offs_f < F)[None, :]
    if TMA_STORE:
        y_desc.store([pid_m * BLOCK_M, pid_n * BLOCK_N], acc.to(y_ptr.dtype.element_ty))
    elif SPLIT_K == 1:
        tl.store(y_ptr + offs_m[:, None] * F + offs_f[None, :], acc.to(y_ptr.dtype.element_ty), mask=mask)
    else:
        ws_tile = ws_ptr + offs_m[:, None] * F + offs_f[None, :]
        tl.store(ws_tile + split * M * F, acc, mask=mask)
        if SPLIT_SUM:
            # Count this split in (after every thread's partial is stored: the barrier,
            # then a release at GPU scope); the last of the SPLIT_K to arrive adds all
            # partials in split order, bypassing L1 (.cg), and resets the counter for
            # the next launch.
            tl.debug_barrier()
            arrived = tl.atomic_add(count_ptr + tile, 1, sem="acq_rel", scope="gpu")
            if arrived == SPLIT_K - 1:
                total = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
                for s in range(SPLIT_K):
                    total += tl.load(ws_tile + s * M * F, mask=mask, other=0.0, cache_modifier=".cg")
                tl.store(y_ptr + offs_m[:, None] * F + offs_f[None, :], total.to(y_ptr.dtype.element_ty),
                         mask=mask)
                tl.atomic_xchg(count_ptr + tile, 0, sem="relaxed", scope="gpu")


@triton.jit(do_not_specialize=["N", "H", "W", "P", "Q", "R", "S", "stride", "padding", "num_programs"])
def igemm_fast_kernel(
    x_ptr, w_ptr, y_ptr, ws_ptr, count_ptr, x_desc, w_desc, y_desc,
    N, C, H, W, F, P, Q, PQ, R, S, stride, padding, K_PAD, num_programs,
    SWIZZLE: tl.constexpr, NUM_XCDS: tl.constexpr, GROUP_SIZE: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    SPLIT_K: tl.constexpr, PACK_K: tl.constexpr, NCHW_IN: tl.constexpr, TMA: tl.constexpr,
    A_TMA: tl.constexpr, TMA_STORE: tl.constexpr, SPLIT_SUM: tl.constexpr, PADDED: tl.constexpr,
    BOX_W: tl.constexpr = 0, DOT_IN_FP32: tl.constexpr = False,
):
    # -----------------------------------------------------------
    # The work: num_pid_m x num_pid_n output tiles (the grid the swizzle sees), each
    # reduced in SPLIT_K slices of the K steps.  Work item w is slice w // num_tiles of
    # launch-order tile w % num_tiles.  Without PERSISTENT the launch has one program per
    # work item and the loop below runs once; with it, num_programs programs share them.
    # With NCHW_IN, pixel tiles never straddle two images (each image is its own matrix);
    # with BOX_W each is a rectangle of BOX_H x BOX_W pixels of one image.
    M = N * PQ
    tiles_per_image = tl.cdiv(PQ, BLOCK_M)
    BOX_H: tl.constexpr = BLOCK_M // BOX_W if BOX_W else 1
    rects_w = tl.cdiv(Q, BOX_W) if BOX_W else 1
    rects_per_image = tl.cdiv(P, BOX_H) * rects_w
    if NCHW_IN:
        num_pid_m = N * tiles_per_image
    elif BOX_W:
        num_pid_m = N * rects_per_image
    else:
        num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(F, BLOCK_N)
    num_tiles = num_pid_m * num_pid_n
    num_steps = K_PAD // BLOCK_K
    steps_per_split = tl.cdiv(num_steps, SPLIT_K)
    offs_k = tl.arange(0, BLOCK_K)

    # Tensor descriptors (Hopper's TMA unit), built on the host and passed by value
    # (:func:`descriptors`; None where the flag is off).  The weights are padded to whole
    # tiles, so their boxes never leave the matrix; the input matrix of a 1x1 layer and the
    # output are not: loads past them read zeros, stores past them are dropped.

    for work in range(tl.program_id(0), num_tiles * SPLIT_K, num_programs):
        # ---------------------------------------------------------
        # Which tile and which slice of K.  The swizzle maps the launch-order tile index to
        # the tile computed; tiles are numbered row-major over (pixel tile, filter tile).
        split = work // num_tiles
        tile = SWIZZLE(work - split * num_tiles, num_pid_m, num_pid_n, NUM_XCDS, GROUP_SIZE)
        pid_m = tile // num_pid_n
        pid_n = tile % num_pid_n

        # Rows -> output pixels and the top-left input position of each receptive field
        # (NCHW_IN: image n_img and its pixels offs_hw).
        offs_f = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        if NCHW_IN:
            n_img = pid_m // tiles_per_image
            offs_hw = (pid_m - n_img * tiles_per_image) * BLOCK_M + tl.arange(0, BLOCK_M)
            mask_m = offs_hw < PQ
            offs_m = n_img * PQ + offs_hw
            x_img = n_img * C * PQ
        elif BOX_W:
            n_img = pid_m // rects_per_image
            rect = pid_m - n_img * rects_per_image
            p0 = (rect // rects_w) * BOX_H
            q0 = (rect - (rect // rects_w) * rects_w) * BOX_W
            rows = tl.arange(0, BLOCK_M)
            p = p0 + rows // BOX_W
            q = q0 + rows % BOX_W
            mask_m = (p < P) & (q < Q)
            offs_m = (n_img * P + p) * Q + q
        else:
            offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
            mask_m = offs_m < M
            n, ih0, iw0 = output_pixels(offs_m, P, Q, stride, padding)
            x_row = ((n * H + ih0) * W + iw0) * C

        # ---------------------------------------------------------
        # The reduction: one flat, pipelined loop over this slice's K steps.  Out-of-image
        # taps load zeros, which is exactly what zero padding means.
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        first = split * steps_per_split
        for step in range(first, tl.minimum(first + steps_per_split, num_steps)):
            if A_TMA:
                a = x_desc.load([pid_m * BLOCK_M, step * BLOCK_K])
            elif BOX_W:
                a = _a_tile_box(x_desc, step, n_img, p0, q0, C, S, padding, BLOCK_M, BLOCK_K)
            elif NCHW_IN:
                a = _a_tile_nchw(x_ptr, step, x_img, offs_hw, mask_m, offs_k, C, PQ, BLOCK_K)
            elif PACK_K == 2:
                a = _a_tile_rows(x_ptr, step, x_row, ih0, iw0, mask_m, offs_k, C, H, W, S, BLOCK_K, PADDED)
            elif PACK_K:
                a = _a_tile_packed(x_ptr, step, x_row, ih0, iw0, mask_m, offs_k, C, H, W, R, S, BLOCK_K)
            else:
                a = _a_tile_tap(x_ptr, step, x_row, ih0, iw0, mask_m, offs_k, C, H, W, S, BLOCK_K)
            if TMA:
                b = w_desc.load([pid_n * BLOCK_N, step * BLOCK_K])
            else:
                b = tl.load(w_ptr + offs_f[:, None] * K_PAD + (step * BLOCK_K + offs_k)[None, :])
            acc = mma(a, tl.trans(b), acc, DOT_IN_FP32)

        _store_tile(acc, y_ptr, ws_ptr, count_ptr, y_desc, offs_m, mask_m, offs_f, pid_m, pid_n, tile, split, M, F,
                    BLOCK_M, BLOCK_N, SPLIT_K, TMA_STORE, SPLIT_SUM)


@triton.jit
def split_k_sum_kernel(ws_ptr, y_ptr, numel, SPLIT_K: tl.constexpr, BLOCK: tl.constexpr):
    """y = sum of the SPLIT_K fp32 partial outputs, added in split order, cast to y's dtype."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < numel
    total = tl.zeros((BLOCK,), dtype=tl.float32)
    for split in range(SPLIT_K):
        total += tl.load(ws_ptr + split * numel + offs, mask=mask, other=0.0)
    tl.store(y_ptr + offs, total.to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def fold_input_kernel(x_ptr, y_ptr, num_pixels, C, H, W, HF, WF, CF, stride, padding,
                      BLOCK_P: tl.constexpr, BLOCK_C: tl.constexpr):
    """Space-to-depth: ``y[n, h', w', (dh*stride + dw)*C + c] = x[n, h'*stride + dh - padding,
    w'*stride + dw - padding, c]`` (both NHWC), zero outside the input and in the channels
    ``>= stride*stride*C`` that pad CF to a 16-byte multiple."""
    offs_p = tl.program_id(0) * BLOCK_P + tl.arange(0, BLOCK_P)     # folded pixel (n, h', w')
    cf = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)          # folded channel
    wf = offs_p % WF
    hf = (offs_p // WF) % HF
    n = offs_p // (WF * HF)
    phase = cf // C                                                   # dh * stride + dw
    c = cf - phase * C
    ih = (hf * stride - padding)[:, None] + (phase // stride)[None, :]
    iw = (wf * stride - padding)[:, None] + (phase % stride)[None, :]
    pixel = (offs_p < num_pixels)[:, None]
    ok = pixel & (phase < stride * stride)[None, :] & (ih >= 0) & (ih < H) & (iw >= 0) & (iw < W)
    v = tl.load(x_ptr + ((n[:, None] * H + ih) * W + iw) * C + c[None, :], mask=ok, other=0.0)
    tl.store(y_ptr + offs_p[:, None] * CF + cf[None, :], v, mask=pixel & (cf < CF)[None, :])


#: The config knobs beside the three tile sizes, and the values each may take.
FLAGS = ("PACK_K", "NCHW_IN", "PERSISTENT", "TMA", "TMA_STORE", "FOLD", "SPLIT_SUM")
#: The AMD backend's own knobs, as optional config entries (0, the default: the compiler
#: decides), passed to the launch as Triton's HIP options: ``waves_per_eu`` (an occupancy
#: hint: waves per SIMD the register allocator aims for), ``matrix_instr_nonkdim`` (16 or
#: 32: the MFMA instruction's M = N size) and ``kpack`` (1 or 2: K elements packed per
#: LDS read of an MFMA operand; deprecated from gfx950 on).  Triton 3.9's
#: ``backends/amd/compiler.py`` HIPOptions.  An NVIDIA target refuses them (check_target).
AMD_OPTIONS = {"WAVES_PER_EU": "waves_per_eu", "MATRIX_INSTR_NONKDIM": "matrix_instr_nonkdim", "KPACK": "kpack"}
_AMD_VALUES = {"WAVES_PER_EU": range(0, 9), "MATRIX_INSTR_NONKDIM": (0, 16, 32), "KPACK": (0, 1, 2)}
#: Optional config entries (0 when left out): the AMD knobs.
OPTIONAL = tuple(AMD_OPTIONS) + ("BOX_W",)
#: Programs of a persistent launch on the CPU interpreter (no SMs to count): a small odd
#: number, so every program walks several tiles and the walk is tested.
INTERPRETER_PROGRAMS = 3
#: Elements of the output each program of the split-K sum pass (split_k_sum_kernel) adds up.
SUM_BLOCK = 1024


def is_matrix_layer(shape: ConvShape) -> bool:
    """1x1, stride 1, no padding: the NHWC input is the M x C matrix of the product."""
    return shape.R == 1 and shape.S == 1 and shape.stride == 1 and shape.padding == 0


def folded(shape: ConvShape) -> ConvShape:
    """The stride-1, unpadded conv that stride folding runs instead of ``shape``: input pixel
    (h', w') holds the stride x stride pixels it covers (``stride*stride*C`` channels, padded
    to a multiple of 8 for 16-byte rows), ceil(R/stride) x ceil(S/stride) taps, the same
    output size P x Q."""
    s = shape.stride
    R, S = -(-shape.R // s), -(-shape.S // s)
    return ConvShape(f"{shape.name}/fold", N=shape.N, C=-(-s * s * shape.C // 8) * 8, H=shape.P + R - 1,
                     W=shape.Q + S - 1, F=shape.F, R=R, S=S, stride=1, padding=0, dtype=shape.dtype)


def fold_weights(w: torch.Tensor, shape: ConvShape) -> torch.Tensor:
    """F,C,R,S weights -> the folded layer's F,C',R',S': tap (r, s) = (r'*stride + dh,
    s'*stride + dw) becomes channel (dh*stride + dw)*C + c of tap (r', s'); taps past R, S
    and the padding channels are zeros."""
    st, fold = shape.stride, folded(shape)
    F, C = shape.F, shape.C
    grown = w.new_zeros((F, C, fold.R * st, fold.S * st))
    grown[:, :, :shape.R, :shape.S] = w
    phases = grown.view(F, C, fold.R, st, fold.S, st).permute(0, 3, 5, 1, 2, 4)   # F, dh, dw, C, R', S'
    out = w.new_zeros((F, fold.C, fold.R, fold.S))
    out[:, :st * st * C] = phases.reshape(F, st * st * C, fold.R, fold.S)
    return out


def fold_blocks(fold: ConvShape) -> tuple[int, int]:
    """``(BLOCK_P, BLOCK_C)`` of the fold pass over the folded layer ``fold``: up to 64
    folded channels and 4096 elements per program."""
    block_c = min(64, triton.next_power_of_2(fold.C))
    return max(16, 4096 // block_c), block_c


def fold_input(x: torch.Tensor, shape: ConvShape, out: torch.Tensor) -> torch.Tensor:
    """Write the space-to-depth input of NHWC ``x`` into ``out`` (the folded layer's NHWC input)."""
    fold = folded(shape)
    pixels = fold.N * fold.H * fold.W
    block_p, block_c = fold_blocks(fold)
    fold_input_kernel[(triton.cdiv(pixels, block_p), triton.cdiv(fold.C, block_c))](
        x, out, pixels, shape.C, shape.H, shape.W, fold.H, fold.W, fold.C, shape.stride, shape.padding,
        BLOCK_P=block_p, BLOCK_C=block_c, num_warps=4)
    return out


def k_pad(shape: ConvShape, tiles: Mapping[str, int]) -> int:
    """Columns of the packed weights: whole BLOCK_K steps over (tap, padded channels), over
    each filter row's (s, c) run (PACK_K=2), or over the packed (r, s, c) run."""
    bk = tiles["BLOCK_K"]
    if tiles["PACK_K"] == 2:
        return shape.R * triton.cdiv(shape.S * shape.C, bk) * bk
    if tiles["PACK_K"]:
        return triton.cdiv(shape.R * shape.S * shape.C, bk) * bk
    return shape.R * shape.S * triton.cdiv(shape.C, bk) * bk


def pack_weights(w: torch.Tensor, shape: ConvShape, tiles: Mapping[str, int]) -> torch.Tensor:
    """F,C,R,S weights -> the zero-padded ``[F_pad, K_pad]`` matrix the kernel reads: rows are
    filters (padded to whole BLOCK_N tiles), columns follow the kernel's K order."""
    F, C, R, S = shape.F, shape.C, shape.R, shape.S
    bk, bn = tiles["BLOCK_K"], tiles["BLOCK_N"]
    ohwi = w.permute(0, 2, 3, 1)                                   # F, R, S, C
    packed = torch.zeros((triton.cdiv(F, bn) * bn, k_pad(shape, tiles)), dtype=w.dtype, device=w.device)
    if tiles["PACK_K"] == 2:
        row_pad = triton.cdiv(S * C, bk) * bk
        packed[:F].view(F, R, row_pad)[..., :S * C] = ohwi.reshape(F, R, S * C)
    elif tiles["PACK_K"]:
        packed[:F, :R * S * C] = ohwi.reshape(F, R * S * C)
    else:
        c_pad = triton.cdiv(C, bk) * bk
        packed[:F].view(F, R, S, c_pad)[..., :C] = ohwi
    return packed


def derived_flags(conv: ConvShape, tiles: Mapping[str, int]) -> dict[str, bool]:
    """The kernel's constexprs that follow from the conv it runs (``conv_shape``) and the
    tiles: A through a descriptor (a 1x1 stride-1 layer in tap order, rows of 16-byte
    multiples), the last split adding the partials (only where there are splits), and
    whether taps can fall in the padding."""
    return {"A_TMA": bool(tiles["TMA"] and is_matrix_layer(conv) and conv.C % 8 == 0
                          and not tiles["PACK_K"] and not tiles["NCHW_IN"] and not tiles.get("BOX_W")),
            "SPLIT_SUM": bool(tiles["SPLIT_K"] > 1 and tiles["SPLIT_SUM"]),
            "PADDED": conv.padding > 0}


def descriptors(x: torch.Tensor, w_packed: torch.Tensor, out: torch.Tensor, shape: ConvShape,
                tiles: Mapping[str, int], a_tma: bool) -> tuple:
    """The kernel's (x, w, y) tensor descriptors, None for each one its flags leave off.
    Built on the host (a few microseconds of CPU per launch, no GPU work) and passed by
    value: a descriptor built inside the kernel (``tl.make_tensor_descriptor``) costs every
    program a global write and a fence before its first load."""
    bm, bn, bk = tiles["BLOCK_M"], tiles["BLOCK_N"], tiles["BLOCK_K"]
    M = shape.N * shape.P * shape.Q
    if tiles.get("BOX_W"):                       # NHWC as 4-D, one rectangle of pixels per box
        hw = shape.H * shape.W
        x_desc = TensorDescriptor(x, [shape.N, shape.H, shape.W, shape.C], [hw * shape.C, shape.W * shape.C, shape.C, 1],
                                  [1, bm // tiles["BOX_W"], tiles["BOX_W"], bk])
    else:
        x_desc = TensorDescriptor(x, [M, shape.C], [shape.C, 1], [bm, bk]) if a_tma else None
    return (x_desc,
            TensorDescriptor.from_tensor(w_packed, [bn, bk]) if tiles["TMA"] else None,
            TensorDescriptor(out, [M, shape.F], [shape.F, 1], [bm, bn]) if tiles["TMA_STORE"] else None)


def amd_options(tiles: Mapping[str, int], device: torch.device) -> dict[str, int]:
    """The HIP compiler options the config sets (:data:`AMD_OPTIONS`), for a launch on an
    AMD GPU or an ahead-of-time compile (meta tensors); elsewhere none: the interpreter
    has no compiler, and an NVIDIA target refuses them first (check_target)."""
    if device.type != "meta" and torch.version.hip is None:
        return {}
    return {option: tiles[key] for key, option in AMD_OPTIONS.items() if tiles.get(key)}


def check_tma_supported(device: torch.device) -> None:
    """TMA=1 needs tensor descriptors: a Hopper-or-newer NVIDIA GPU, or the CPU interpreter
    (which emulates them).  Anywhere else, say so instead of failing inside the compiler."""
    if device.type in ("cpu", "meta"):   # meta: an ahead-of-time compile, which checks its target's
        return                            # arch instead (FastImplicitGemmConv.check_target)
    if torch.version.hip is not None:
        raise ValueError("kernel 'igemm_fast': TMA=1 needs NVIDIA tensor descriptors (compute capability >= 9.0, "
                         "Hopper); this is an AMD GPU: use TMA=0")
    cap = torch.cuda.get_device_capability(device)
    if cap < (9, 0):
        raise ValueError(f"kernel 'igemm_fast': TMA=1 needs compute capability >= 9.0 (Hopper); "
                         f"{torch.cuda.get_device_name(device)} is {cap[0]}.{cap[1]}: use TMA=0")


def packed_weight_runs(w_base: int, block_n: int, block_k: int, k_pad_cols: int, eb: int):
    """Loads of the packed ``[F_pad, K_pad]`` weights (:func:`pack_weights`), as an
    :class:`~kernels.access.OperandLoads` runs function over filter tiles: at step ``k`` each
    of the tile's BLOCK_N rows (padding included) reads BLOCK_K contiguous elements."""
    steps = np.arange(k_pad_cols // block_k, dtype=np.int64)

    def runs(pid_n: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        f = pid_n[:, None] * block_n + np.arange(block_n)        # (rows, BLOCK_N) packed row
        start = w_base + (f[:, None, :] * k_pad_cols + steps[None, :, None] * block_k) * eb
        return start, np.full(start.shape, block_k * eb, dtype=np.int64)

    return runs


def _nchw_input_runs(shape: ConvShape, block_m: int, block_k: int, x_base: int, eb: int):
    """NCHW_IN loads: at step k, pixel tile (n, hw0) reads, for each channel of the block,
    one run of its in-image pixels ``hw0 .. min(hw0 + BLOCK_M, P*Q)``."""
    pq, C = shape.P * shape.Q, shape.C
    per_image = triton.cdiv(pq, block_m)
    num_steps = triton.cdiv(C, block_k)

    def runs(pid_m: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        n, hw0 = pid_m // per_image, (pid_m % per_image) * block_m          # (rows,)
        c = np.arange(num_steps)[:, None] * block_k + np.arange(block_k)   # (steps, BLOCK_K)
        start = x_base + ((n[:, None, None] * C + c[None]) * pq + hw0[:, None, None]) * eb
        length = np.broadcast_to((np.minimum(block_m, pq - hw0) * eb)[:, None, None], start.shape)
        on = np.broadcast_to((c < C)[None], start.shape)
        return np.where(on, start, 0), np.where(on, length, 0)

    return runs


class FastImplicitGemmConv(ImplicitGemmConv):
    """igemm's product, tuned: see the module docstring.  Output layout (NHWC) and the
    ``num_pid_m x num_pid_n`` tile grid are igemm's."""

    name = "igemm_fast"
    jit_kernel = igemm_fast_kernel
    tile_names = ("BLOCK_M", "BLOCK_N", "BLOCK_K", "SPLIT_K") + FLAGS + OPTIONAL
    tile_defaults = dict.fromkeys(OPTIONAL, 0)

    def tune_space(self, shape: ConvShape, traits: DeviceTraits) -> list[Config]:
        return igemm_fast_space(shape, traits)

    def check_tiles(self, tiles: Mapping[str, int]) -> dict[str, int]:
        """Tile sizes: powers of two, >= 16 (the tensor-core minimum on every axis of
        ``tl.dot``); SPLIT_K a power of two; flags 0 or 1; AMD knobs as :data:`AMD_OPTIONS`."""
        given = self.tile_entries(tiles)
        for key, value in given.items():
            if not isinstance(value, int) or isinstance(value, bool):
                raise ValueError(f"kernel {self.name!r}: tile {key}={value!r} must be an integer")
            if key in _AMD_VALUES:
                ok, rule = value in _AMD_VALUES[key], "one of " + ", ".join(map(str, _AMD_VALUES[key]))
            elif key == "BOX_W":
                bm = given.get("BLOCK_M", 0)
                ok = value == 0 or (value > 0 and not value & (value - 1) and value <= bm and bm // value <= 256
                                    and value <= 256)
                rule = "0 (off) or a power of two <= BLOCK_M, with BLOCK_M // BOX_W <= 256"
            elif key == "PACK_K":
                ok, rule = value in (0, 1, 2), "0 (tap order), 1 (packed) or 2 (rows)"
            elif key in FLAGS:
                ok, rule = value in (0, 1), "0 or 1"
            elif key == "SPLIT_K":
                ok, rule = value >= 1 and not value & (value - 1), "a power of two >= 1"
            else:
                ok, rule = value >= 16 and not value & (value - 1), "a power of two >= 16"
            if not ok:
                raise ValueError(f"kernel {self.name!r}: tile {key}={value!r} must be {rule}")
        return {t: int(given[t]) for t in self.tile_names}

    def tile_grid(self, shape: ConvShape, tiles: Mapping[str, int]) -> TileGrid:
        """igemm's grid, except with NCHW_IN: pixel tiles per image, ``N * cdiv(P*Q, BLOCK_M)``,
        and with BOX_W: pixel rectangles per image, ``N * cdiv(P, BOX_H) * cdiv(Q, BOX_W)``."""
        if tiles.get("BOX_W"):
            rects_h, rects_w = box_rects(shape, tiles["BLOCK_M"], tiles["BOX_W"])
            return TileGrid(shape.N * rects_h * rects_w, triton.cdiv(shape.F, tiles["BLOCK_N"]))
        if not tiles.get("NCHW_IN"):
            return super().tile_grid(shape, tiles)
        if not is_matrix_layer(shape):
            raise ValueError(f"kernel {self.name!r}: NCHW_IN=1 needs a 1x1, stride-1, unpadded layer; "
                             f"{shape.name!r} is {shape.R}x{shape.S} stride {shape.stride} padding {shape.padding}")
        return TileGrid(shape.N * triton.cdiv(shape.P * shape.Q, tiles["BLOCK_M"]),
                        triton.cdiv(shape.F, tiles["BLOCK_N"]))

    def input_view(self, x: torch.Tensor, tiles: Mapping[str, int]) -> torch.Tensor:
        """NHWC (a view of a channels_last ``x``), or with NCHW_IN the NCHW tensor itself."""
        return x.contiguous() if tiles["NCHW_IN"] else nhwc(x)

    @staticmethod
    def conv_shape(shape: ConvShape, tiles: Mapping[str, int]) -> ConvShape:
        """The conv the jit kernel runs: ``shape`` itself, or with FOLD its folded twin."""
        return folded(shape) if tiles["FOLD"] else shape

    def prepare(self, ops: Operands, shape: ConvShape, tiles: Mapping[str, int]) -> Bound:
        """Packed weights (once: they are constants of the layer; with FOLD, folded first),
        the split-K workspace and (SPLIT_SUM) per-tile arrival counters, the folded input's
        buffer (FOLD) and the output."""
        out = self.empty_output(shape, ops.x.device)
        split = tiles["SPLIT_K"]
        workspace = (torch.empty((split, shape.N * shape.P * shape.Q, shape.F), dtype=torch.float32,
                                 device=ops.x.device) if split > 1 else out)
        conv = self.conv_shape(shape, tiles)
        w = fold_weights(ops.w, shape) if tiles["FOLD"] else ops.w
        x_fold = (torch.empty((conv.N, conv.H, conv.W, conv.C), dtype=ops.x.dtype, device=ops.x.device)
                  if tiles["FOLD"] else None)
        counts = (torch.zeros(self.tile_grid(shape, tiles).num_pids, dtype=torch.int32, device=ops.x.device)
                  if derived_flags(conv, tiles)["SPLIT_SUM"] else None)
        return Bound((pack_weights(w, conv, tiles), workspace, x_fold, counts), out)

    def check_flags(self, shape: ConvShape, tiles: Mapping[str, int], device: torch.device) -> None:
        """Say now, in one sentence, what a flag needs of the layer or the device."""
        self.tile_grid(shape, tiles)                     # NCHW_IN on a layer it cannot read
        if tiles["TMA"] or tiles["TMA_STORE"]:
            check_tma_supported(device)
        if tiles["TMA_STORE"]:
            bad = [why for why, no in ((f"SPLIT_K={tiles['SPLIT_K']} (partials go to an fp32 workspace)",
                                        tiles["SPLIT_K"] > 1),
                                       ("NCHW_IN=1 (pixel tiles end at each image, not at a box edge)",
                                        tiles["NCHW_IN"]),
                                       (f"F={shape.F} (rows must be a multiple of 16 bytes: F % 8 == 0)",
                                        shape.F % 8)) if no]
            if bad:
                raise ValueError(f"kernel {self.name!r}: TMA_STORE=1 needs SPLIT_K=1, NCHW_IN=0 and F % 8 == 0; "
                                 f"got {'; '.join(bad)}")
        if tiles.get("BOX_W"):
            bad = [why for why, no in ((f"stride {shape.stride}", shape.stride != 1),
                                       ("TMA=0 (the box is a tensor-descriptor load)", not tiles["TMA"]),
                                       (f"PACK_K={tiles['PACK_K']}", tiles["PACK_K"]), ("NCHW_IN=1", tiles["NCHW_IN"]),
                                       ("FOLD=1", tiles["FOLD"]), ("TMA_STORE=1 (a rectangle is not a row range)",
                                                                   tiles["TMA_STORE"]),
                                       (f"C={shape.C} (rows must be a multiple of 16 bytes: C % 8 == 0)", shape.C % 8))
                   if no]
            if bad:
                raise ValueError(f"kernel {self.name!r}: BOX_W={tiles['BOX_W']} needs a stride-1 layer, TMA=1, "
                                 f"PACK_K=0, NCHW_IN=0, FOLD=0, TMA_STORE=0 and C % 8 == 0; got {'; '.join(bad)}")
        if tiles["FOLD"] and (shape.stride == 1 or tiles["NCHW_IN"]):
            raise ValueError(f"kernel {self.name!r}: FOLD=1 folds a stride > 1 into channels and reads NHWC; "
                             f"{shape.name!r} has stride {shape.stride}" + (", NCHW_IN=1" if tiles["NCHW_IN"] else ""))

    def check_target(self, shape: ConvShape, tiles: Mapping[str, int], vendor: str, arch: str) -> None:
        """Say now, in one sentence, what a config needs of the compile target: TMA and the
        TMA store are NVIDIA Hopper (sm_90+) tensor descriptors; the AMD knobs are AMD's.
        ``shape`` None: the shape-free rules only (checked once for a whole sweep)."""
        if shape is not None:
            self.check_flags(shape, tiles, torch.device("meta"))
        hopper = vendor == "nvidia" and arch.startswith("sm_") and int(arch[3:5]) >= 9
        for flag in ("TMA", "TMA_STORE"):
            if tiles[flag] and not hopper:
                raise ValueError(f"kernel {self.name!r}: {flag}=1 needs NVIDIA tensor descriptors (Hopper, sm_90 "
                                 f"or newer); target arch {arch} ({vendor}) has none: use {flag}=0")
        for key, option in AMD_OPTIONS.items():
            if tiles[key] and vendor != "amd":
                raise ValueError(f"kernel {self.name!r}: {key}={tiles[key]} is an AMD backend option ({option}); "
                                 f"target arch {arch} is {vendor}: use {key}=0")

    def bind(self, ops: Operands, shape: ConvShape, tiles: Mapping[str, int], swizzle: SwizzleBinding,
             launch: LaunchConfig, share: Bound | None = None) -> tuple[Callable[[], None], torch.Tensor]:
        """As :meth:`ConvKernel.bind`, after checking what the config needs of the device."""
        tiles = self.check_tiles(tiles)
        self.check_flags(shape, tiles, ops.x.device)
        return super().bind(ops, shape, tiles, swizzle, launch, share=share)

    def num_programs(self, shape: ConvShape, tiles: Mapping[str, int], device: torch.device) -> int:
        """Programs launched: one per work item, or (PERSISTENT) at most one per SM."""
        work = self.tile_grid(shape, tiles).num_pids * tiles["SPLIT_K"]
        slots = (torch.cuda.get_device_properties(device).multi_processor_count if device.type == "cuda"
                 else INTERPRETER_PROGRAMS)   # the CPU, or an ahead-of-time compile (meta tensors)
        return launched_programs(work, bool(tiles["PERSISTENT"]), slots)

    def launch(self, operands, out, shape, tiles, swizzle: SwizzleBinding, launch: LaunchConfig) -> None:
        x, w_packed, workspace, x_fold, counts = operands
        if tiles["FOLD"]:                                # the fold pass: timed, like any input transform
            x = fold_input(x, shape, x_fold)
        shape = self.conv_shape(shape, tiles)
        split = tiles["SPLIT_K"]
        if split > 1 and split * out.numel() >= 2**31:
            raise ValueError(f"kernel {self.name!r}: SPLIT_K={split} workspace of {split * out.numel()} "
                             "elements exceeds int32 offsets; use a smaller SPLIT_K")
        programs = self.num_programs(shape, tiles, x.device)
        derived = derived_flags(shape, tiles)
        igemm_fast_kernel[(programs,)](
            x, w_packed, out, workspace, counts, *descriptors(x, w_packed, out, shape, tiles, derived["A_TMA"]),
            shape.N, shape.C, shape.H, shape.W, shape.F, shape.P, shape.Q, shape.P * shape.Q, shape.R, shape.S,
            shape.stride, shape.padding, w_packed.shape[1], programs,
            swizzle.fn, swizzle.num_xcds, swizzle.group_size,
            BLOCK_M=tiles["BLOCK_M"], BLOCK_N=tiles["BLOCK_N"], BLOCK_K=tiles["BLOCK_K"],
            SPLIT_K=split, PACK_K=tiles["PACK_K"], NCHW_IN=tiles["NCHW_IN"], TMA=tiles["TMA"],
            TMA_STORE=tiles["TMA_STORE"], **derived, BOX_W=tiles["BOX_W"], DOT_IN_FP32=dot_in_fp32(x, shape.dtype),
            num_warps=launch.num_warps, num_stages=launch.num_stages, **amd_options(tiles, x.device))
        if split > 1 and not derived["SPLIT_SUM"]:
            split_k_sum_kernel[(triton.cdiv(out.numel(), SUM_BLOCK),)](workspace, out, out.numel(),
                                                                      SPLIT_K=split, BLOCK=SUM_BLOCK, num_warps=4)

    def load_plan(self, shape: ConvShape, tiles: Mapping[str, int], elem_bytes: int | None = None) -> LoadPlan:
        """Step ``k`` is iteration ``k`` of the kernel's flat K loop.  In tap order that is
        igemm's ``(r, s, channel block)``, and a pixel reads one run of channels; in packed
        order a step's BLOCK_K columns are each their own (r, s, c), one element each.  The
        weights are the packed matrix: every one of a tile's BLOCK_N rows (padding included)
        reads BLOCK_K contiguous elements.

        These are all K steps of a tile; with ``SPLIT_K`` each split runs its own range of
        them (:class:`kernels.access.Schedule`, :meth:`launch_plans`).  The TMA flags change
        no address: a descriptor load reads the same box of elements as the masked pointer
        load (rows and channels past the matrix read as zeros without a memory access, as
        masked-off elements do).  With FOLD the model is the folded conv's: its input is
        the folded tensor (the fold pass is a launch of its own, see :meth:`launch_plans`)."""
        tiles = self.check_tiles(tiles)
        eb = elem_bytes or element_bytes(shape)
        bases = self.buffer_bases(shape, tiles, eb)
        shape = self.conv_shape(shape, tiles)
        bm, bn, bk = tiles["BLOCK_M"], tiles["BLOCK_N"], tiles["BLOCK_K"]
        C, S = shape.C, shape.S
        kp = k_pad(shape, tiles)
        steps = np.arange(kp // bk, dtype=np.int64)
        if tiles["NCHW_IN"]:
            x_runs = _nchw_input_runs(shape, bm, bk, bases["x"], eb)
            x_runs_per_step = bk
        elif tiles["BOX_W"]:
            num_cb = triton.cdiv(C, bk)
            tap, c0 = steps // num_cb, (steps % num_cb) * bk
            x_runs = input_runs(shape, bm, bases["x"], eb, (tap // S)[:, None], (tap % S)[:, None], c0[:, None],
                                (np.minimum(bk, C - c0) * eb)[:, None], rows=_box_rows(shape, bm, tiles["BOX_W"]))
            x_runs_per_step = bm
        elif tiles["PACK_K"]:
            if tiles["PACK_K"] == 2:                                 # (row r, j = s * C + c) per column
                per_row = triton.cdiv(S * C, bk)
                j = (steps % per_row)[:, None] * bk + np.arange(bk)
                tap, c = (steps // per_row)[:, None] * S + j // C, j % C
                nbytes = np.where(j < S * C, eb, 0)
            else:                                                    # (r, s, c) packed
                k = steps[:, None] * bk + np.arange(bk)              # (steps, BLOCK_K) column of K
                tap, c = k // C, k % C
                nbytes = np.where(tap < shape.R * S, eb, 0)
            x_runs = input_runs(shape, bm, bases["x"], eb, tap // S, tap % S, np.minimum(c, C - 1), nbytes)
            x_runs_per_step = bm * bk
        else:
            num_cb = triton.cdiv(C, bk)
            tap, c0 = steps // num_cb, (steps % num_cb) * bk
            x_runs = input_runs(shape, bm, bases["x"], eb, (tap // S)[:, None], (tap % S)[:, None],
                                c0[:, None], (np.minimum(bk, C - c0) * eb)[:, None])
            x_runs_per_step = bm

        w_runs = packed_weight_runs(bases["w"], bn, bk, kp, eb)
        grid = self.tile_grid(shape, tiles)
        tile_ids = np.arange(grid.num_pids, dtype=np.int64)
        return LoadPlan(num_steps=len(steps), elem_bytes=eb, operands=(
            OperandLoads("x", grid.num_pid_m, tile_ids // grid.num_pid_n, x_runs_per_step, x_runs,
                         bulk=derived_flags(shape, tiles)["A_TMA"] or bool(tiles["BOX_W"])),
            OperandLoads("w", grid.num_pid_n, tile_ids % grid.num_pid_n, bn, w_runs, bulk=bool(tiles["TMA"])),
        ))

    # -----------------------------------------------------------
    # The whole timed run for the simulated L2: the fold pass (FOLD), the conv with its
    # schedule and epilogue, the split-K sum pass (SPLIT_K > 1, SPLIT_SUM=0).

    def buffer_bases(self, shape: ConvShape, tiles: Mapping[str, int], elem_bytes: int | None = None) -> dict[str, int]:
        """Where each buffer of the timed run lies in the simulated address space, in this
        order: the conv's input ``x`` (with FOLD the folded copy), the packed weights ``w``
        (``F_pad x K_pad``), the output ``y``, then what the flags add: the fp32 split-K
        workspace ``ws`` (``SPLIT_K x M x F``), the int32 arrival counters ``counts`` (one per
        tile, SPLIT_SUM) and the caller's NHWC input ``x_src`` (FOLD).  ``x`` and ``w`` lie
        where :func:`kernels.access.tensor_bases` puts them for the conv the kernel runs."""
        tiles = self.check_tiles(tiles)
        eb = elem_bytes or element_bytes(shape)
        conv = self.conv_shape(shape, tiles)
        M, split = conv.N * conv.P * conv.Q, tiles["SPLIT_K"]
        sizes = {"x": conv.N * conv.H * conv.W * conv.C * eb,
                 "w": triton.cdiv(conv.F, tiles["BLOCK_N"]) * tiles["BLOCK_N"] * k_pad(conv, tiles) * eb,
                 "y": M * conv.F * eb}
        if split > 1:
            sizes["ws"] = split * M * conv.F * 4
        if derived_flags(conv, tiles)["SPLIT_SUM"]:
            sizes["counts"] = self.tile_grid(shape, tiles).num_pids * 4
        if tiles["FOLD"]:
            sizes["x_src"] = shape.N * shape.H * shape.W * shape.C * eb
        return place_tensors(sizes)

    def launch_plans(self, shape: ConvShape, tiles: Mapping[str, int],
                     elem_bytes: int | None = None) -> tuple[LaunchPlan, ...]:
        """The launches of :meth:`launch`, in order:

        * FOLD: the fold pass (:func:`fold_input_kernel`, a 2-D grid, linear program id
          ``x + y * grid_x``): each program loads its block of the caller's input, element
          by element (a gather), and stores BLOCK_P rows of its folded channels;
        * the conv: :meth:`load_plan`'s loads under a :class:`~kernels.access.Schedule`
          (``PERSISTENT``: ``min(work, SMs)`` programs walking ``pid, pid + P, ...``;
          ``SPLIT_K``: work item = (split, tile), split ``s`` running its K steps).  After its
          last step a work item stores its tile: the output (SPLIT_K=1), or its fp32 partial
          to workspace slice ``s`` and, with SPLIT_SUM, an atomic add on the tile's counter;
          the split of a tile that arrives last then reads all SPLIT_K partials back, stores
          the output and resets the counter (an atomic exchange);
        * SPLIT_K > 1 without SPLIT_SUM: the sum pass (:func:`split_k_sum_kernel`): program
          ``b`` reads SUM_BLOCK fp32 of each workspace slice, one slice per step, and stores
          SUM_BLOCK outputs.

        Atomics are counted as writes (lookups that are not reads).  Only the conv is
        ``profiled``: the hardware profilers are filtered to its kernel name."""
        tiles = self.check_tiles(tiles)
        eb = elem_bytes or element_bytes(shape)
        bases = self.buffer_bases(shape, tiles, eb)
        conv = self.conv_shape(shape, tiles)
        loads = self.load_plan(shape, tiles, eb)
        split = tiles["SPLIT_K"]
        schedule = Schedule(loads.num_tiles, loads.num_steps, split, bool(tiles["PERSISTENT"]))
        epilogue, last = self._conv_epilogue(shape, tiles, bases, eb)
        plans = [LaunchPlan("conv", schedule, loads, epilogue, last)]
        if tiles["FOLD"]:
            plans.insert(0, fold_pass_plan(shape, bases, eb))
        if split > 1 and last is None:
            plans.append(sum_pass_plan(conv.N * conv.P * conv.Q * conv.F, split, bases, eb))
        return tuple(plans)

    def _conv_epilogue(self, shape: ConvShape, tiles: Mapping[str, int], bases: Mapping[str, int],
                       eb: int) -> tuple[Epilogue, Epilogue | None]:
        """The conv's epilogue (keyed by ``tile * SPLIT_K + split``) and, with SPLIT_SUM, what
        the last split of a tile does besides (keyed by tile); see :meth:`launch_plans`."""
        conv = self.conv_shape(shape, tiles)
        grid = self.tile_grid(shape, tiles)
        split, bm, bn = tiles["SPLIT_K"], tiles["BLOCK_M"], tiles["BLOCK_N"]
        M, F = conv.N * conv.P * conv.Q, conv.F
        if tiles["NCHW_IN"]:
            pixels = _image_tile_pixels(bm, conv.P * conv.Q)
        elif tiles["BOX_W"]:
            pixels = _box_tile_pixels(conv, bm, tiles["BOX_W"])
        else:
            pixels = tile_pixels(bm, M)
        tile_ids = np.arange(grid.num_pids, dtype=np.int64)
        y = OperandLoads("y", grid.num_pids, tile_ids, bm,
                         output_tile_runs(pixels, grid.num_pid_n, F, bn, bases["y"], eb))
        if split == 1:
            return Epilogue(((y, True),)), None
        work_ids = np.arange(grid.num_pids * split, dtype=np.int64)
        ws_runs = output_tile_runs(pixels, grid.num_pid_n, F, bn, bases["ws"], 4, split, M * F * 4)
        partial = OperandLoads("ws", len(work_ids), work_ids, bm, ws_runs)
        if not derived_flags(conv, tiles)["SPLIT_SUM"]:
            return Epilogue(((partial, True),)), None

        def counter(tile: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            start = (bases["counts"] + tile * 4)[:, None, None]
            return start, np.full(start.shape, 4, dtype=np.int64)

        def every_partial(tile: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            parts = [ws_runs(tile * split + s) for s in range(split)]
            return tuple(np.concatenate(p, axis=2) for p in zip(*parts))

        arrive = OperandLoads("counts", grid.num_pids, work_ids // split, 1, counter)
        reset = OperandLoads("counts", grid.num_pids, tile_ids, 1, counter)
        read_back = OperandLoads("ws", grid.num_pids, tile_ids, bm * split, every_partial)
        return Epilogue(((partial, True), (arrive, True))), Epilogue(((read_back, False), (y, True), (reset, True)))


def _image_tile_pixels(block_m: int, pq: int):
    """NCHW_IN's pixel tiles: tile ``pid_m`` covers pixels ``hw0 .. hw0 + BLOCK_M`` of image
    ``pid_m // cdiv(P*Q, BLOCK_M)``, valid below P*Q (see :func:`kernels.igemm.tile_pixels`)."""
    per_image = triton.cdiv(pq, block_m)

    def pixels(pid_m: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        hw = (pid_m % per_image)[:, None] * block_m + np.arange(block_m)
        return (pid_m // per_image)[:, None] * pq + hw, hw < pq

    return pixels


def box_rects(shape: ConvShape, block_m: int, box_w: int) -> tuple[int, int]:
    """BOX_W's tiles per image: rows of rectangles, and rectangles per row (each rectangle
    ``BLOCK_M // BOX_W`` pixels tall, ``BOX_W`` wide)."""
    return triton.cdiv(shape.P, block_m // box_w), triton.cdiv(shape.Q, box_w)


def _box_rect(shape: ConvShape, block_m: int, box_w: int, pid_m: np.ndarray):
    """BOX_W's pixel rectangles: ``(n, p, q)`` of each of tile ``pid_m``'s BLOCK_M rows, all
    ``(len(pid_m), BLOCK_M)``; rows past the image (p >= P or q >= Q) included."""
    box_h = block_m // box_w
    rects_h, rects_w = box_rects(shape, block_m, box_w)
    per_image = rects_h * rects_w
    rect = pid_m % per_image
    i = np.arange(block_m)
    p = ((rect // rects_w) * box_h)[:, None] + i // box_w
    q = ((rect % rects_w) * box_w)[:, None] + i % box_w
    return np.broadcast_to((pid_m // per_image)[:, None], p.shape), p, q


def _box_tile_pixels(shape: ConvShape, block_m: int, box_w: int):
    """Output rows of BOX_W's rectangles (see :func:`kernels.igemm.tile_pixels`): valid inside the image."""
    def pixels(pid_m: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        n, p, q = _box_rect(shape, block_m, box_w, pid_m)
        return (n * shape.P + p) * shape.Q + q, (p < shape.P) & (q < shape.Q)

    return pixels


def _box_rows(shape: ConvShape, block_m: int, box_w: int):
    """BOX_W's rows for :func:`kernels.igemm.input_runs`: every row of the rectangle loads,
    those past the image's edge included (the box's elements outside the input are
    zero-filled by the hardware, with no memory access: input_runs drops them)."""
    def rows(pid_m: np.ndarray) -> tuple[np.ndarray, ...]:
        n, p, q = _box_rect(shape, block_m, box_w, pid_m)
        return n, p, q, np.ones(p.shape, dtype=bool)

    return rows


def fold_pass_plan(shape: ConvShape, bases: Mapping[str, int], eb: int) -> LaunchPlan:
    """The fold pass (:func:`fold_input_kernel`) as a launch: program ``x + y * grid_x``
    loads, in one step, every in-image element of its (BLOCK_P folded pixels) x (BLOCK_C
    folded channels) block from ``x_src`` (one run per element: the channels of a folded
    pixel come from stride x stride different input pixels), then stores one run of
    ``min(BLOCK_C, CF - c0)`` channels per valid folded pixel into ``x``."""
    fold = folded(shape)
    block_p, block_c = fold_blocks(fold)
    num_pixels, st, C = fold.N * fold.H * fold.W, shape.stride, shape.C
    grid_x = triton.cdiv(num_pixels, block_p)
    programs = grid_x * triton.cdiv(fold.C, block_c)

    def block(ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return (ids % grid_x)[:, None] * block_p + np.arange(block_p), (ids // grid_x)[:, None] * block_c + np.arange(block_c)

    def x_runs(ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        p, cf = block(ids)                                              # (rows, BLOCK_P), (rows, BLOCK_C)
        wf, hf, n = p % fold.W, (p // fold.W) % fold.H, p // (fold.W * fold.H)
        phase, c = cf // C, cf % C
        ih = (hf * st - shape.padding)[:, :, None] + (phase // st)[:, None, :]
        iw = (wf * st - shape.padding)[:, :, None] + (phase % st)[:, None, :]
        ok = ((p < num_pixels)[:, :, None] & (phase < st * st)[:, None, :]
              & (ih >= 0) & (ih < shape.H) & (iw >= 0) & (iw < shape.W))
        start = bases["x_src"] + (((n[:, :, None] * shape.H + ih) * shape.W + iw) * C + c[:, None, :]) * eb
        return np.where(ok, start, 0).reshape(len(ids), 1, -1), np.where(ok, eb, 0).reshape(len(ids), 1, -1)

    def y_runs(ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        p, cf = block(ids)
        c0 = cf[:, 0]
        start = bases["x"] + (p * fold.C + c0[:, None]) * eb
        length = np.broadcast_to((np.minimum(block_c, fold.C - c0) * eb)[:, None], start.shape)
        ok = p < num_pixels
        return np.where(ok, start, 0)[:, None, :], np.where(ok, length, 0)[:, None, :]

    ids = np.arange(programs, dtype=np.int64)
    loads = LoadPlan(num_steps=1, elem_bytes=eb, operands=(OperandLoads("x_src", programs, ids, block_p * block_c, x_runs),))
    return LaunchPlan("fold", Schedule(programs, 1), loads,
                      Epilogue(((OperandLoads("x", programs, ids, block_p, y_runs), True),)),
                      swizzled=False, profiled=False)


def sum_pass_plan(numel: int, split: int, bases: Mapping[str, int], eb: int) -> LaunchPlan:
    """The split-K sum pass (:func:`split_k_sum_kernel`) as a launch: program ``b`` loads, at
    step ``s``, the fp32 elements ``b * SUM_BLOCK ..`` of workspace slice ``s`` (one run),
    then stores as many outputs of ``eb`` bytes (one run)."""
    programs = triton.cdiv(numel, SUM_BLOCK)
    ids = np.arange(programs, dtype=np.int64)

    def chunk(b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return b * SUM_BLOCK, np.minimum(SUM_BLOCK, numel - b * SUM_BLOCK)

    def ws_runs(b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        lo, n = chunk(b)
        start = bases["ws"] + (np.arange(split)[None, :] * numel + lo[:, None]) * 4
        return start[:, :, None], np.broadcast_to((n * 4)[:, None, None], start.shape + (1,))

    def y_runs(b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        lo, n = chunk(b)
        return (bases["y"] + lo * eb)[:, None, None], (n * eb)[:, None, None]

    loads = LoadPlan(num_steps=split, elem_bytes=4, operands=(OperandLoads("ws", programs, ids, 1, ws_runs),))
    return LaunchPlan("split_k_sum", Schedule(programs, split), loads,
                      Epilogue(((OperandLoads("y", programs, ids, 1, y_runs), True),)),
                      swizzled=False, profiled=False)


def box_widths(shape: ConvShape, block_m: int, keep: int = 2) -> list[int]:
    """BOX_W values worth trying for BLOCK_M-row pixel rectangles on ``shape``: the ``keep``
    widths (8 to 64, at most BLOCK_M, rectangles at least 2 rows tall) that waste the fewest
    rows past the image's edges, wider first among equals."""
    def waste(bw: int) -> float:
        rects_h, rects_w = box_rects(shape, block_m, bw)
        return rects_h * rects_w * block_m / (shape.P * shape.Q)

    widths = [bw for bw in (8, 16, 32, 64) if bw <= block_m // 2]
    return sorted(widths, key=lambda bw: (waste(bw), -bw))[:keep]


#: Shared memory a Hopper block may use (bytes): 227 KB; deeper pipelines than fit are not tried.
HOPPER_SMEM_BYTES = 227 * 1024


def igemm_fast_space(shape: ConvShape, traits: DeviceTraits, stages_options: tuple[int, ...] = (3, 4),
                     k_options: int = 2) -> list[Config]:
    """igemm_fast: tiles x warps x stages around wgmma-friendly shapes, with

    * the packed and the row-packed K orders only where the channels are few (C <= 32: the
      tap order's zero padding would cost more than the gather), with 256-row tiles too (their
      K is short), and the tap order only where C >= 16;
    * on 1x1 stride-1 layers, the NCHW input read in place (no layout copy) beside both;
    * on strided layers with few channels, the folded layer (stride into channels) in tap
      and row order;
    * split-K only where a tile size leaves SMs idle (fewer tiles than SMs), up to 4 slices
      of at least 4 K steps each, the partials added by a second kernel or by the last split
      (compute-bound layers: at every K width);
    * TMA on where the device has it, plus a TMA-off, a TMA-store and a persistent twin of
      each base tile shape, so that the measurements, not a guess, decide;
    * on compute-bound stride-1 layers with TMA, pixel-rectangle twins (``BOX_W``: the input
      as TMA boxes) at the two least wasteful rectangle widths;
    * on AMD (``traits.vendor == "amd"``, gfx942): no TMA, two pipeline stages (Triton's AMD
      stream pipeliner keeps one stage in LDS, 64 KB per CU), and twins of each base tile
      shape with the AMD backend's knobs (kernels.igemm_fast.AMD_OPTIONS): an occupancy hint
      ``WAVES_PER_EU=2``, 16x16 MFMA instructions, ``KPACK=2``.
    """
    amd = traits.vendor == "amd"
    M = shape.N * shape.P * shape.Q
    matrix = shape.R == shape.S == shape.stride == 1 and shape.padding == 0
    # (PACK_K, NCHW_IN, FOLD): tap order, packed order, row-packed order, (1x1 stride 1) the
    # NCHW input read in place, and (strided, few channels) the folded layer in tap or row order
    fold = folded(shape) if shape.stride > 1 else None
    orders = [o for o, ok in (((0, 0, 0), shape.C >= 16), ((1, 0, 0), shape.C <= 32),
                              ((2, 0, 0), shape.C <= 32 and shape.S > 1), ((0, 1, 0), matrix and shape.C >= 16),
                              ((0, 0, 1), fold is not None and shape.C <= 32),
                              ((2, 0, 1), fold is not None and shape.C <= 32 and fold.S > 1))
              if ok]
    tma = 1 if traits.tma else 0
    seen, out = set(), []

    def add(tiles: dict, warps: int, stages: int) -> None:
        cfg = Config.make(tiles, warps, stages)
        if cfg not in seen:
            seen.add(cfg)
            out.append(cfg)

    for pack, nchw, fold_on in orders:
        conv = fold if fold_on else shape                  # the conv the kernel runs
        # Compute-bound layers (a filter window over >= 128 channels, on NVIDIA) also try
        # BLOCK_K 128 (half the K steps, each with its tap decode and masks), 256-row tiles
        # and a 5-deep pipeline where shared memory allows.
        heavy = not amd and not pack and conv.R * conv.S > 1 and conv.C >= 128
        widest = 128 if heavy else 64
        ks = ((32, 64) if pack else tuple(k for k in (16, 32, 64, 128) if k <= min(widest, max(16, pow2_at_least(conv.C)))))
        ks = ks[-k_options:]
        steps_of = (lambda bk: -(-conv.R * conv.S * conv.C // bk)) if pack else (
            lambda bk: conv.R * conv.S * -(-conv.C // bk))
        few = pack or fold_on                              # few channels: short K, so taller tiles
        for bm in (64, 128, 256) if few or heavy else (64, 128):
            for bn in filter_tiles(shape.F):
                rows = shape.N * -(-shape.P * shape.Q // bm) if nchw else -(-M // bm)
                tiles_mn = rows * -(-shape.F // bn)
                if bm == 256 and (bn > 128 or not few and tiles_mn < 2 * traits.num_sms):
                    continue                                   # 256-row tiles: 256x64 / 256x128 on big grids
                # Compute-bound layers also try two warpgroups on 128x64 / 64x128 tiles (each
                # warpgroup then owns a 64-row or 64-column half, as cuDNN's sm90 kernels split them).
                for warps in (4, 8) if heavy and bm * bn == 8192 else warps_for(bm, bn):
                    for bk in ks:
                        base = {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "SPLIT_K": 1,
                                "PACK_K": pack, "NCHW_IN": nchw, "PERSISTENT": 0, "TMA": tma,
                                "TMA_STORE": 0, "FOLD": fold_on, "SPLIT_SUM": 0}
                        stages_here = (2,) if amd else tuple(
                            s for s in stages_for(steps_of(bk), stages_options + ((5,) if heavy else ()))
                            if s * (bm + bn) * bk * element_bytes(conv) <= HOPPER_SMEM_BYTES) or (2,)
                        for stages in stages_here:
                            add(base, warps, stages)
                        deep, shallow = stages_here[-1], stages_here[0]
                        if heavy and tiles_mn <= traits.num_sms:
                            # A compute-bound layer on a small grid: split-K at every K width
                            # (narrower K steps leave room for two programs per SM).
                            for split in (2, 4):
                                if steps_of(bk) >= 4 * split:
                                    for split_sum in (0, 1):
                                        add({**base, "SPLIT_K": split, "SPLIT_SUM": split_sum}, warps, deep)
                        if tma and heavy and conv.stride == 1 and conv.C % 8 == 0 and warps == 4 and not fold_on:
                            # Pixel rectangles with the input as TMA boxes, one warpgroup only: with
                            # two, Triton 3.6 computed wrong outputs from the reshaped box on an H100
                            # (the kernel notes of docs/benchmarks.md); the gate would refuse them anyway.
                            for bw in box_widths(conv, bm):
                                for stages in stages_here[:2]:
                                    add({**base, "BOX_W": bw}, warps, stages)
                        if bk != ks[-1]:
                            continue
                        # Twins of the deepest-K base: TMA off, TMA store, persistent (with and
                        # without TMA store), split-K.  The TMA store's output tile takes shared
                        # memory too, so its twins get the shallowest pipeline.
                        if amd:
                            for knob, value in (("WAVES_PER_EU", 2), ("MATRIX_INSTR_NONKDIM", 16), ("KPACK", 2)):
                                add({**base, knob: value}, warps, deep)
                        store = tma and not nchw and shape.F % 8 == 0
                        if tma:
                            add({**base, "TMA": 0}, warps, deep)
                        if store:
                            add({**base, "TMA_STORE": 1}, warps, shallow)
                        if tiles_mn > traits.num_sms:
                            add({**base, "PERSISTENT": 1}, warps, deep)
                            if store:
                                add({**base, "PERSISTENT": 1, "TMA_STORE": 1}, warps, shallow)
                        else:
                            for split in (2, 4):
                                if steps_of(bk) >= 4 * split:
                                    for split_sum in (0, 1):        # a second kernel, or the last split
                                        add({**base, "SPLIT_K": split, "SPLIT_SUM": split_sum}, warps, deep)
    return out
