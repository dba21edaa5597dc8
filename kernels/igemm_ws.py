"""Implicit-GEMM conv2d, warp-specialized: igemm_fast's product as cuDNN's Hopper kernels run
it, written in Gluon (Triton's lower-level dialect, where layouts, shared buffers, barriers
and warp partitions are explicit).  NVIDIA Hopper (sm_90) only.

Why a second fast family.  cuDNN's fastest kernel on ResNet-50's compute-bound 3x3 layers
(``sm90_xmma_fprop_implicit_gemm_..._tilesize128x64x64``) runs 384 threads: one *producer*
warpgroup that only issues bulk tensor copies (TMA) and two *consumer* warpgroups that only
issue tensor-core instructions (wgmma).  :mod:`kernels.igemm_fast` runs one warpgroup that
does both, software-pipelined by the compiler, and Triton 3.6 does not compile
``tl.range(..., warp_specialize=True)`` for it.  This family writes the producer/consumer
split by hand.  Its speed against cuDNN: docs/benchmarks.md, "Kernel speed"; what each idea
below measured: the kernel notes of docs/benchmarks.md.

The product is igemm_fast's (its module docstring), for NHWC fp16/bf16 convs:

* rows    M = N * P * Q   output pixels,
* columns   F             filters,
* depth   K               taps (r, s) times input channels, in *tap order*: step
  ``k = tap * num_cb + cb`` reads channels ``[cb * BLOCK_K, (cb + 1) * BLOCK_K)`` of tap
  ``(r, s) = divmod(tap, S)``; the weights are igemm_fast's packed ``[F_pad, R*S*C_pad]``
  matrix (C padded per tap to whole BLOCK_K), made once outside the timed launch.

**Pixel boxes, no im2col.**  A tile's BLOCK_M rows are a ``BOX_N x BOX_H x BOX_W`` block of
output pixels (BOX_N images, a BOX_H x BOX_W rectangle of each; igemm_fast's ``BOX_W`` option
is the case BOX_N = 1).  At tap (r, s) of a stride-1 layer the tile's A operand is then the
input block at the same corner shifted by ``(r - padding, s - padding)``: one TMA box of
``BOX_N x BOX_H x BOX_W`` pixels by BLOCK_K channels of the NHWC input.  Coordinates may be
negative or run past the image: TMA fills zeros there, which *is* the conv's zero padding, and costs no memory
traffic.  In shared memory the box is BLOCK_M rows of BLOCK_K channels, each row 128 (or 64)
bytes, swizzled over its width: exactly the layout wgmma reads for a ``[BLOCK_M, BLOCK_K]`` operand, so
the box's buffer is *reshaped* (a view, no copy) into the matrix.  The output leaves the same
way, a 4-D box of the NHWC output whose pixels past the image the TMA unit drops.  The price
is the rows of a box past the image, computed and dropped; the box is not a tile size but a
rule (:func:`pick_box`: the fewest such rows), so the tile grid the swizzle sees follows
from BLOCK_M and the layer alone.

**Pointwise layers: one row of pixels.**  A 1x1 conv of stride 1 without padding is a
plain GEMM over the N * H * W pixels of the NHWC input, whose memory is the same as that of
one image of one row of N * H * W pixels.  The kernel tiles it so (:func:`tiled_shape`):
a pixel box is then BLOCK_M consecutive pixels, one contiguous run of memory, and only the
last box has rows past the end, where boxes over images, rows and columns of a 7 x 7 layer
compute 14 % rows they drop (1792 for 1568 pixels at batch 32), and those of a 14 x 14 or
28 x 28 layer gather 2 x 2 pixels from each of 32 images.

**Strided layers: phase grids.**  With stride ``u`` the box's pixels read input rows
``u * p + r - padding``: every u-th row, which no TMA box over the input spans.  But the
rows ``ph, ph + u, ph + 2u, ...`` of the NHWC input, and likewise its columns ``pw, pw + u,
...``, are a strided *view* ``x[:, ph::u, pw::u, :]`` (:func:`phase_grids`: ``u * u`` of
them, one per phase pair, each its own TMA descriptor with its own bounds; stride 1 or 2, so
at most four, each a kernel argument of its own: Triton 3.6 launches no descriptors in tuples).
Writing the tap's offset ``r - padding = u * dh + ph`` (``0 <= ph < u``), the rows ``u * p +
r - padding`` for ``p`` in ``[p0, p0 + BOX_H)`` are rows ``p0 + dh ...`` of phase ``ph``'s
grid: one 4-D box ``[BOX_N, BOX_H, BOX_W, BLOCK_K]`` at ``[n0, p0 + dh, q0 + dw, c0]`` of grid
``(ph, pw)``, with the same zero fill where the grid ends, which is where the image ends
(any H, W and C: a channel block past C reads zeros).  Stride 1 is the case ``u = 1``: one
grid, the input itself, so one kernel runs both.

**Partitions** (``gl.warp_specialize``):

* the *load* partition, one warp (24 registers): for each K step, wait until a ring slot is
  free, then issue the two TMA copies (A box and the ``[BLOCK_N, BLOCK_K]`` weight tile; a
  third, the second filter block's, with ``BLOCK_N2``) that complete on the slot's *ready*
  barrier;
* the *MMA* partition, the launch's ``num_warps`` warps (4: one warpgroup owns all BLOCK_M
  rows; 8: two warpgroups, 64 rows each as in cuDNN, or 128 each of a 256-row tile as in
  cuDNN's nvJet GEMMs): for each K step, wait for the slot, issue an asynchronous wgmma into
  fp32 registers, wait until at most one wgmma is in flight (the previous step's is then done)
  and free *that* step's slot, so the tensor core always has the next step queued behind the
  current one.  After the last step it writes the tile through shared memory and a TMA store
  (``TMA_STORE=1``), or from registers.

``num_stages`` is the ring's depth.  The producer never waits on the consumer except for a
free slot, so with a persistent grid (``PERSISTENT=1``: one program per SM, two with
``MAXNREG``, walking work items ``pid, pid + grid, ...``) the loads of the next tile run
during the previous tile's epilogue.

**Small grids.**  A 7 x 7 layer at batch 32 has 1568 output pixels: 13 pixel boxes of 128
rows, 52 programs at BLOCK_N = 128 on a GPU of 132 SMs.  Three ways to fill the GPU are in
the space (:func:`igemm_ws_space`): BLOCK_N = 64 (cuDNN's tile) with registers capped
(``MAXNREG``, Triton's ``maxnreg``) so that two programs fit on an SM; 64-row tiles, where the
two wgmma warpgroups sit side by side along N, or one warpgroup owns the tile (l22: 100
programs of 64 x 128 beat 104 of 128 x 64); and split-K, each work item reducing a slice
of the K steps into an fp32 workspace (a 5-D TMA box ``[1, BOX_N, BOX_H, BOX_W, BLOCK_N]``),
summed in split order by igemm_fast's ``split_k_sum_kernel``.  That second launch is a
launch and a pass over the partials on top of a small layer's short conv, so two
splits can also add in the kernel (``SPLIT_ADD``): split 0 stores its partial sums *as the
output* (fp16 or bf16, plain stores), then sets its tile's flag (a release at GPU scope);
the last split takes the flag (an acquire, resetting it for the next launch) and adds its
own partial to the output with 16-byte atomic additions in L2 (``atom.add.noftz.v8.f16``),
whose results it never reads.  The last split runs ``SPLIT_ADD`` more K steps (:func:`split_len`),
so that split 0's stores are done when it arrives and it rarely waits.  The price is one
rounding more: the output is ``round(round(p0) + round(p1))``, within the check's tolerance,
and the same on every launch (two addends: the order cannot change the sum).  Waiting is
safe because split 0 never waits: a grid starts its work items in order, split 0's first,
and a persistent program reaches its split-0 items before its split-1 ones.

**Tiles of two filter blocks.**  A Gluon tensor's sides are powers of two, and so is every
accumulator, but a tile need not be: with ``BLOCK_N2 > 0`` a tile is ``BLOCK_N + BLOCK_N2``
filters wide (64 + 32 = 96, 64 + 16 = 80, 128 + 64 = 192), held as two accumulators that
read the same A box.  Each K step then copies two weight tiles into the slot (one TMA
descriptor per width) and issues two wgmmas, and the epilogue stores two output boxes.  What
it buys is a tile count that fits the SMs: GoogLeNet's 7 x 7 layer with F = 384 has 25 pixel
boxes of 64, so 100 tiles of 64 x 96 or 125 of 64 x 80 where 64 x 128 tiles leave 57 of 132
SMs idle; F = 96 (Inception) with no padded columns; and on a 3x3 layer with F = 384,
192-filter tiles read each input box for half the filters instead of a third.  The tiles
stay whole wgmma shapes, which is why this is two blocks and not one block of an odd width.

**Channels in whole blocks.**  Where C is not a multiple of BLOCK_K, a tap's last A box reads
channels past C, which TMA fills with zeros, and its rows in global memory no longer meet: on
c24 (C = 24, 32-channel steps) each pixel's 48 bytes start mid-sector and the box is fetched
a sector per request, 2.4 times the requests of the same layer with C = 32 and 5 us more
(the kernel notes of docs/benchmarks.md).  With ``PAD_C`` the launch first copies the input
into a buffer of whole BLOCK_K channel blocks, zero past C (allocated once, the copy timed:
the vendor call needs none), and the boxes read that: on c24, 14.6 against 15.4 us, the copy
taking most of what it saves.

**Swizzles.**  Work item ``w`` is split ``w // num_tiles`` of launch-order tile ``w %
num_tiles`` (igemm_fast's numbering); both partitions map that tile through the job's
swizzle (a ``@triton.jit`` function, compiled with Gluon semantics when a Gluon function
calls it) and decode the result row-major over ``num_pid_m x num_pid_n`` (pixel box, filter
block).  The two partitions walk the same items in the same order, so they agree on every
tile without talking.

**What it does not do**, and the refusals that say so (:meth:`IgemmWsConv.check_flags`,
:meth:`IgemmWsConv.check_target`): other GPUs than sm_90 (TMA boxes, wgmma, ``setmaxnreg``)
and the CPU interpreter (Gluon has none), strides above 2 and strided layers with H or W below
the stride (an empty phase grid), C or F not a multiple of 8 (TMA rows are whole 16-byte
units), dtypes other than fp16/bf16, and Triton versions whose Gluon API differs from 3.6's
(:data:`GLUON_VERSIONS`).

Length: one family, read top to bottom: the Gluon partitions, their numpy twins (the box rule,
the tile origins, the K steps: what the tests check against conv2d and the address model
reads) and the host side that sizes the descriptors must agree on the same box and step
order; split, a change to the box would have to be made in three files.
"""
from __future__ import annotations

import dataclasses
import functools
import itertools
from typing import Callable, Mapping

import numpy as np
import torch
import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (fence_async_shared, mbarrier, tma, warpgroup_mma,
                                                              warpgroup_mma_wait)

from kernels.access import (Epilogue, LaunchPlan, LoadPlan, OperandLoads, Schedule, element_bytes, launched_programs,
                            place_tensors)
from kernels.base import Bound, ConvKernel, LaunchConfig, Operands, SwizzleBinding, TileGrid, ToolchainError
from kernels.igemm import input_runs, nhwc
from kernels.igemm_fast import (HOPPER_SMEM_BYTES, SUM_BLOCK, fold_blocks, fold_input_kernel, k_pad, pack_weights,
                                 packed_weight_runs, split_k_sum_kernel, sum_pass_plan)
from kernels.problem import ConvShape
from kernels.tuning import Config, DeviceTraits


# -----------------------------------------------------------
# Where a tile lies, and what a K step reads.  Both partitions walk the same work items and
# steps, so both call these.

@gluon.jit
def _work_item(work, num_pid_m, num_pid_n, num_steps, split_len, SWIZZLE: gl.constexpr, NUM_XCDS: gl.constexpr,
               GROUP_SIZE: gl.constexpr, SPLIT_K: gl.constexpr, SPLIT_ADD: gl.constexpr):
    """Work item -> (tile, split, first K step, end K step).  Item ``split * num_tiles + t``
    reduces slice ``split`` of the K steps of launch-order tile ``t``, which the swizzle maps
    to the tile computed: ``split_len`` steps, the last split the rest (:func:`split_len`)."""
    num_tiles = num_pid_m * num_pid_n
    split = work // num_tiles
    tile = SWIZZLE(work - split * num_tiles, num_pid_m, num_pid_n, NUM_XCDS, GROUP_SIZE)
    if SPLIT_ADD:       # two splits, the second the longer: it ends at num_steps
        first = split * split_len
        end = first + split_len + split * (num_steps - 2 * split_len)
    else:               # split_len is this, which the compiler folds where SPLIT_K is 1
        per_split = gl.cdiv(num_steps, SPLIT_K)
        first = split * per_split
        end = gl.minimum(first + per_split, num_steps)
    return tile, split, first, end


@gluon.jit
def _tile_origin(tile, num_pid_n, rects_h, rects_w,
                 BOX_N: gl.constexpr, BOX_H: gl.constexpr, BOX_W: gl.constexpr, BLOCK_N: gl.constexpr):
    """Tile -> (first image, first output row, first output column, first filter), row-major
    over (pixel box, filter block); pixel boxes run over images, then rows, then columns of
    boxes (:func:`box_origins` is the same map in numpy)."""
    pid_m = tile // num_pid_n
    pid_n = tile - pid_m * num_pid_n
    rects = rects_h * rects_w
    group = pid_m // rects
    rect = pid_m - group * rects
    row = rect // rects_w
    return group * BOX_N, row * BOX_H, (rect - row * rects_w) * BOX_W, pid_n * BLOCK_N


@gluon.jit
def _step_tap(step, num_cb, S, padding, stride: gl.constexpr):
    """K step -> where its A box lies (module docstring, "Strided layers"): (row offset, row
    phase, column offset, column phase, channel block), the tap's offset
    ``r - padding = stride * row offset + row phase`` with ``0 <= phase < stride`` (likewise
    for ``s``).  ``t = r + (stride - 1) * padding`` is that offset plus ``stride * padding``,
    never negative, so ``//`` and ``%`` floor as the split needs."""
    tap = step // num_cb
    r = tap // S
    t_r = r + (stride - 1) * padding
    t_s = tap - r * S + (stride - 1) * padding
    return (t_r // stride - padding, t_r % stride, t_s // stride - padding, t_s % stride,
            step - tap * num_cb)


# -----------------------------------------------------------
# The load partition: one warp that only issues TMA copies.

@gluon.jit
def _load_partition(x0, x1, x2, x3, w_desc, w2_desc, a_bufs, b_bufs, b2_bufs, ready, empty,
                    num_pid_m, num_pid_n, rects_h, rects_w, num_steps, split_len, num_cb, S, padding,
                    STRIDE: gl.constexpr, SWIZZLE: gl.constexpr, NUM_XCDS: gl.constexpr, GROUP_SIZE: gl.constexpr,
                    NUM_STAGES: gl.constexpr, SPLIT_K: gl.constexpr, SPLIT_ADD: gl.constexpr,
                    BLOCK_N2: gl.constexpr):
    BOX_N: gl.constexpr = x0.block_type.shape[0]
    BOX_H: gl.constexpr = x0.block_type.shape[1]
    BOX_W: gl.constexpr = x0.block_type.shape[2]
    BLOCK_K: gl.constexpr = x0.block_type.shape[3]
    BLOCK_N: gl.constexpr = w_desc.block_type.shape[0]
    if BLOCK_N2:
        nbytes: gl.constexpr = x0.block_type.nbytes + w_desc.block_type.nbytes + w2_desc.block_type.nbytes
    else:
        nbytes: gl.constexpr = x0.block_type.nbytes + w_desc.block_type.nbytes
    it = 0          # K steps issued by this program so far, over all its tiles: the ring position
    for work in range(gl.program_id(0), num_pid_m * num_pid_n * SPLIT_K, gl.num_programs(0)):
        tile, split, k0, k1 = _work_item(work, num_pid_m, num_pid_n, num_steps, split_len, SWIZZLE, NUM_XCDS,
                                         GROUP_SIZE, SPLIT_K, SPLIT_ADD)
        n0, p0, q0, f0 = _tile_origin(tile, num_pid_n, rects_h, rects_w, BOX_N, BOX_H, BOX_W, BLOCK_N + BLOCK_N2)
        for step in range(k0, k1):
            dh, ph, dw, pw, cb = _step_tap(step, num_cb, S, padding, STRIDE)
            slot = it % NUM_STAGES
            # A fresh mbarrier counts as having completed the phase before its first, so the
            # first lap over the ring (phase 0) waits for parity 1 and passes at once.
            mbarrier.wait(empty.index(slot), ((it // NUM_STAGES) & 1) ^ 1)
            bar = ready.index(slot)
            # The transaction count is the whole boxes' bytes, zero-filled elements included.
            mbarrier.expect(bar, nbytes)
            # The A box from the step's phase grid (stride 2: one copy per grid, all but one
            # predicated off).
            at = [n0, p0 + dh, q0 + dw, cb * BLOCK_K]
            if STRIDE == 1:
                tma.async_copy_global_to_shared(x0, at, bar, a_bufs.index(slot))
            else:
                grid = ph * 2 + pw
                tma.async_copy_global_to_shared(x0, at, bar, a_bufs.index(slot), pred=grid == 0)
                tma.async_copy_global_to_shared(x1, at, bar, a_bufs.index(slot), pred=grid == 1)
                tma.async_copy_global_to_shared(x2, at, bar, a_bufs.index(slot), pred=grid == 2)
                tma.async_copy_global_to_shared(x3, at, bar, a_bufs.index(slot), pred=grid == 3)
            tma.async_copy_global_to_shared(w_desc, [f0, step * BLOCK_K], bar, b_bufs.index(slot))
            if BLOCK_N2:    # the tile's second filter block, beside the first
                tma.async_copy_global_to_shared(w2_desc, [f0 + BLOCK_N, step * BLOCK_K], bar, b2_bufs.index(slot))
            it += 1


# -----------------------------------------------------------
# The MMA partition (the launch's num_warps warps, the default partition): wgmma and the epilogue.

@gluon.jit
def _mma_partition(y_desc, y2_desc, y_ptr, flag_ptr, a_bufs, b_bufs, b2_bufs, ready, empty, c_smem, c2_smem,
                   num_pid_m, num_pid_n, rects_h, rects_w, num_steps, split_len, P, Q, F,
                   SWIZZLE: gl.constexpr, NUM_XCDS: gl.constexpr, GROUP_SIZE: gl.constexpr,
                   NUM_STAGES: gl.constexpr, TMA_STORE: gl.constexpr, SPLIT_K: gl.constexpr,
                   SPLIT_ADD: gl.constexpr, BLOCK_N2: gl.constexpr):
    BOX_N: gl.constexpr = a_bufs.type.shape[1]
    BOX_H: gl.constexpr = a_bufs.type.shape[2]
    BOX_W: gl.constexpr = a_bufs.type.shape[3]
    BLOCK_K: gl.constexpr = a_bufs.type.shape[4]
    BLOCK_N: gl.constexpr = b_bufs.type.shape[1]
    BLOCK_M: gl.constexpr = BOX_N * BOX_H * BOX_W
    num_warps: gl.constexpr = gl.num_warps()          # this partition's: the launch's num_warps
    # The wgmma accumulator layout: warpgroups stacked along M (each owns 64 or more rows),
    # and where BLOCK_M = 64 leaves a second warpgroup nothing to stack on, side by side
    # along N (each owns BLOCK_N // 2 columns).
    WARPS_M: gl.constexpr = num_warps if BLOCK_M >= 16 * num_warps else BLOCK_M // 16
    WARPS_N: gl.constexpr = num_warps // WARPS_M
    acc_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[WARPS_M, WARPS_N],
                                                         instr_shape=[16, BLOCK_N // WARPS_N, 16])
    # The second filter block's accumulator (BLOCK_N2 > 0, module docstring, "Tiles of two
    # filter blocks"), split over the warpgroups the same way.
    acc2_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[WARPS_M, WARPS_N],
                                                          instr_shape=[16, max(BLOCK_N2, 8 * WARPS_N) // WARPS_N, 16])
    it = 0
    for work in range(gl.program_id(0), num_pid_m * num_pid_n * SPLIT_K, gl.num_programs(0)):
        tile, split, k0, k1 = _work_item(work, num_pid_m, num_pid_n, num_steps, split_len, SWIZZLE, NUM_XCDS,
                                         GROUP_SIZE, SPLIT_K, SPLIT_ADD)
        n0, p0, q0, f0 = _tile_origin(tile, num_pid_n, rects_h, rects_w, BOX_N, BOX_H, BOX_W, BLOCK_N + BLOCK_N2)
        acc = gl.zeros([BLOCK_M, BLOCK_N], gl.float32, acc_layout)
        if BLOCK_N2:
            acc2 = gl.zeros([BLOCK_M, BLOCK_N2], gl.float32, acc2_layout)
        prev = 0
        for step in range(k0, k1):
            slot = it % NUM_STAGES
            mbarrier.wait(ready.index(slot), (it // NUM_STAGES) & 1)
            a = a_bufs.index(slot).reshape([BLOCK_M, BLOCK_K])      # the 4-D box as the A matrix
            b = b_bufs.index(slot).permute((1, 0))                  # [BLOCK_K, BLOCK_N], K-major
            acc = warpgroup_mma(a, b, acc, is_async=True)
            # At most one step's wgmmas in flight: the previous step's have finished reading its slot.
            if BLOCK_N2:
                acc2 = warpgroup_mma(a, b2_bufs.index(slot).permute((1, 0)), acc2, is_async=True)
                acc, acc2 = warpgroup_mma_wait(num_outstanding=2, deps=[acc, acc2])
            else:
                acc = warpgroup_mma_wait(num_outstanding=1, deps=[acc])
            mbarrier.arrive(empty.index(prev), count=1, pred=step > k0)
            prev = slot
            it += 1
        if BLOCK_N2:
            acc, acc2 = warpgroup_mma_wait(num_outstanding=0, deps=[acc, acc2])
        else:
            acc = warpgroup_mma_wait(num_outstanding=0, deps=[acc])
        mbarrier.arrive(empty.index(prev), count=1)

        _store_tile(acc, y_desc, y_ptr, flag_ptr, c_smem, tile, split, n0, p0, q0, f0, P, Q, F, BOX_H, BOX_W,
                    TMA_STORE, SPLIT_K, SPLIT_ADD)
        if BLOCK_N2:
            _store_tile(acc2, y2_desc, y_ptr, flag_ptr, c2_smem, tile, split, n0, p0, q0, f0 + BLOCK_N, P, Q, F,
                        BOX_H, BOX_W, TMA_STORE, SPLIT_K, SPLIT_ADD, 1)
    if TMA_STORE:
        tma.store_wait(pendings=0)


@gluon.jit
def _store_tile(acc, y_desc, y_ptr, flag_ptr, c_smem, tile, split, n0, p0, q0, f0, P, Q, F,
                BOX_H: gl.constexpr, BOX_W: gl.constexpr, TMA_STORE: gl.constexpr, SPLIT_K: gl.constexpr,
                SPLIT_ADD: gl.constexpr, STORES_IN_FLIGHT: gl.constexpr = 0):
    """The epilogue: a finished tile's fp32 sums ``acc`` (split ``split`` of tile ``tile``, the
    swizzled index its SPLIT_ADD flag is kept under, whose pixel box starts at (n0, p0, q0) and
    filter block at f0) to the output, by
    one of three paths: added in L2 by the last split (SPLIT_ADD), a TMA store from shared
    memory, or plain stores from registers.  ``STORES_IN_FLIGHT``: TMA stores of this tile
    (its other filter block's, from another buffer) that may stay in flight."""
    BLOCK_M: gl.constexpr = acc.shape[0]
    BLOCK_N: gl.constexpr = acc.shape[1]
    out = acc.to(y_desc.dtype)
    if SPLIT_ADD:
        # Split-K without a second launch (module docstring, "Small grids"): split 0 stores
        # its partial as the output, the last split adds its own to it in L2.
        ptrs, ok, out = _direct(out, y_ptr, n0, p0, q0, f0, P, Q, F, y_desc.shape[0], BOX_H, BOX_W)
        if split == 0:
            gl.store(ptrs, out, mask=ok)
            gl.thread_barrier()          # every thread's stores before the one release below
            gl.atomic_xchg(flag_ptr + tile, 1, sem="release", scope="gpu")
        else:
            # Take the flag (1 -> 0, which also leaves it ready for the next launch); the
            # acquire orders split 0's stores before these additions.
            seen = gl.atomic_cas(flag_ptr + tile, 1, 0, sem="acquire", scope="gpu")
            while seen != 1:
                seen = gl.atomic_cas(flag_ptr + tile, 1, 0, sem="acquire", scope="gpu")
            gl.atomic_add(ptrs, out, mask=ok, sem="relaxed", scope="gpu")
    elif TMA_STORE:
        # The output, or with SPLIT_K > 1 this split's fp32 partial sums (a slice of the
        # workspace, added up by a second kernel).  The previous tile's store must have left
        # c_smem before it is overwritten; waiting here, not after issuing, lets that store
        # overlap this tile's main loop.
        tma.store_wait(pendings=STORES_IN_FLIGHT)
        c_smem.reshape([BLOCK_M, BLOCK_N]).store(out)
        fence_async_shared()      # order the generic-proxy writes before the TMA (async proxy) read
        if SPLIT_K == 1:
            tma.async_copy_shared_to_global(y_desc, [n0, p0, q0, f0], c_smem)
        else:
            tma.async_copy_shared_to_global(y_desc, [split, n0, p0, q0, f0], c_smem)
    else:
        ptrs, ok, out = _direct(out, y_ptr, n0, p0, q0, f0, P, Q, F, y_desc.shape[0], BOX_H, BOX_W)
        gl.store(ptrs, out, mask=ok)


@gluon.jit
def _direct(out, y_ptr, n0, p0, q0, f0, P, Q, F, N, BOX_H: gl.constexpr, BOX_W: gl.constexpr):
    """The output tile ``out`` (the pixel box at (n0, p0, q0) by BLOCK_N filters from f0) for
    plain stores or atomics from registers: in a layout of 16 bytes per thread along the
    filters, with its NHWC addresses and the mask of the pixels inside the images."""
    BLOCK_M: gl.constexpr = out.shape[0]
    BLOCK_N: gl.constexpr = out.shape[1]
    layout: gl.constexpr = gl.BlockedLayout([1, 8], [32 * 8 // BLOCK_N, BLOCK_N // 8], [gl.num_warps(), 1], [1, 0])
    out = gl.convert_layout(out, layout)
    rows = gl.arange(0, BLOCK_M, layout=gl.SliceLayout(1, layout))
    cols = f0 + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, layout))
    n = n0 + rows // (BOX_H * BOX_W)
    p = p0 + (rows // BOX_W) % BOX_H
    q = q0 + rows % BOX_W
    ok = (p < P) & (q < Q) & (n < N)
    offs = ((n * P + p) * Q + q).to(gl.int64) * F
    return y_ptr + offs[:, None] + cols[None, :], ok[:, None] & (cols < F)[None, :], out


# -----------------------------------------------------------
# The kernel: allocate the ring and its barriers, then fork.

@gluon.jit
def igemm_ws_kernel(x0, x1, x2, x3, w_desc, w2_desc, y_desc, y2_desc, y_ptr, flag_ptr,
                    num_pid_m, num_pid_n, rects_h, rects_w, num_steps, split_len, num_cb, S, padding, P, Q, F,
                    STRIDE: gl.constexpr, SWIZZLE: gl.constexpr, NUM_XCDS: gl.constexpr, GROUP_SIZE: gl.constexpr,
                    NUM_STAGES: gl.constexpr, TMA_STORE: gl.constexpr, SPLIT_K: gl.constexpr,
                    SPLIT_ADD: gl.constexpr, BLOCK_N2: gl.constexpr):
    x_desc = x0       # the phase grids share their box, dtype and layout
    dtype: gl.constexpr = x_desc.dtype
    # The ring: NUM_STAGES A boxes and weight tiles, each slot with a *ready* barrier (the TMA
    # copies landed; armed by expect, completed by the copies' bytes) and an *empty* barrier
    # (the wgmma reading it finished; one arrive by the MMA partition).
    a_bufs = gl.allocate_shared_memory(dtype, [NUM_STAGES] + x_desc.block_type.shape, x_desc.layout)
    b_bufs = gl.allocate_shared_memory(dtype, [NUM_STAGES] + w_desc.block_type.shape, w_desc.layout)
    ready = gl.allocate_shared_memory(gl.int64, [NUM_STAGES, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [NUM_STAGES, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(NUM_STAGES):
        mbarrier.init(ready.index(i), count=1)
        mbarrier.init(empty.index(i), count=1)
    if BLOCK_N2:      # the second filter block's weight tiles, a slot each
        b2_bufs = gl.allocate_shared_memory(dtype, [NUM_STAGES] + w2_desc.block_type.shape, w2_desc.layout)
    else:
        b2_bufs = b_bufs              # unused: a placeholder of the right kind
    if TMA_STORE:
        c_smem = gl.allocate_shared_memory(y_desc.dtype, y_desc.block_type.shape, y_desc.layout)
        if BLOCK_N2:
            c2_smem = gl.allocate_shared_memory(y2_desc.dtype, y2_desc.block_type.shape, y2_desc.layout)
        else:
            c2_smem = c_smem
    else:
        c_smem = a_bufs.index(0)      # unused: placeholders of the right kind
        c2_smem = c_smem
    gl.warp_specialize([
        (_mma_partition, (y_desc, y2_desc, y_ptr, flag_ptr, a_bufs, b_bufs, b2_bufs, ready, empty, c_smem, c2_smem,
                          num_pid_m, num_pid_n, rects_h, rects_w, num_steps, split_len, P, Q, F, SWIZZLE, NUM_XCDS,
                          GROUP_SIZE, NUM_STAGES, TMA_STORE, SPLIT_K, SPLIT_ADD, BLOCK_N2)),
        (_load_partition, (x0, x1, x2, x3, w_desc, w2_desc, a_bufs, b_bufs, b2_bufs, ready, empty, num_pid_m,
                           num_pid_n, rects_h, rects_w, num_steps, split_len, num_cb, S, padding, STRIDE, SWIZZLE,
                           NUM_XCDS, GROUP_SIZE, NUM_STAGES, SPLIT_K, SPLIT_ADD, BLOCK_N2)),
    ], [1], [24])


# -----------------------------------------------------------
# Host side: the box rule, the grid, the K steps (numpy twins of the jit helpers above).

#: Triton versions (major, minor) whose Gluon API this module was checked against: 3.6.0
#: compiles it for sm_90a and ran it on an H100; 3.9.0 does not compile it
#: (``tma.async_copy_shared_to_global`` was removed for ``tma.async_store``).
GLUON_VERSIONS = ((3, 6),)
#: Layer dtypes the kernel runs (TMA boxes of 2-byte elements, wgmma with fp32 accumulators).
DTYPES = {"float16": gl.float16, "bfloat16": gl.bfloat16}


@functools.cache
def pick_box(N: int, P: int, Q: int, block_m: int) -> tuple[int, int, int]:
    """The (BOX_N, BOX_H, BOX_W), powers of two with product BLOCK_M, that computes the fewest
    rows: boxes x BLOCK_M, the rows past the images included; ties go to the widest box (longer
    contiguous runs per TMA row).  E.g. 56 x 56 with 128 rows: 2 x 8 x 8, no waste; 14 x 14:
    32 x 2 x 2, none either (a 16 x 8 rectangle wastes 24 %).  No side above 256 (a TMA box's
    limit)."""
    best = None
    pow2 = [1 << i for i in range(block_m.bit_length())]
    for bn, bh in itertools.product(pow2, pow2):
        if block_m % (bn * bh) or bn > N:
            continue
        bw = block_m // (bn * bh)
        if bw > 256 or bh > 256:
            continue
        rows = triton.cdiv(N, bn) * triton.cdiv(P, bh) * triton.cdiv(Q, bw) * block_m
        key = (rows, -bw)
        if best is None or key < best[0]:
            best = (key, (bn, bh, bw))
    return best[1]


@functools.cache
def tiled_shape(shape: ConvShape) -> ConvShape:
    """The layer as the kernel tiles it: a pointwise layer (1x1, stride 1, no padding) as one
    image of one row of ``N * H * W`` pixels (module docstring, "Pointwise layers"), any other
    as it is.  The NHWC input and output are the same memory either way."""
    if (shape.R, shape.S, shape.stride, shape.padding) == (1, 1, 1, 0):
        return dataclasses.replace(shape, N=1, H=1, W=shape.N * shape.H * shape.W)
    return shape


def box_counts(shape: ConvShape, box: tuple[int, int, int]) -> tuple[int, int, int]:
    """Pixel boxes along images, output rows and output columns."""
    bn, bh, bw = box
    return triton.cdiv(shape.N, bn), triton.cdiv(shape.P, bh), triton.cdiv(shape.Q, bw)


def box_origins(shape: ConvShape, box: tuple[int, int, int], pid_m: np.ndarray) -> tuple[np.ndarray, ...]:
    """``(n0, p0, q0)`` of pixel boxes ``pid_m`` (the kernel's :func:`_tile_origin`)."""
    _, rows, cols = box_counts(shape, box)
    group, rect = pid_m // (rows * cols), pid_m % (rows * cols)
    return group * box[0], (rect // cols) * box[1], (rect % cols) * box[2]


def box_pixels(shape: ConvShape, box: tuple[int, int, int], pid_m: np.ndarray) -> tuple[np.ndarray, ...]:
    """``(n, p, q)`` of each of pixel box ``pid_m``'s BLOCK_M rows, all ``(len(pid_m),
    BLOCK_M)``: row ``i`` is ``(i // (BOX_H*BOX_W), i // BOX_W % BOX_H, i % BOX_W)`` from the
    box's corner (the order of the 4-D box in shared memory); rows past the images included."""
    n0, p0, q0 = box_origins(shape, box, pid_m)
    i = np.arange(box[0] * box[1] * box[2])
    return (n0[:, None] + i // (box[1] * box[2]), p0[:, None] + (i // box[2]) % box[1],
            q0[:, None] + i % box[2])


def phase_grids(x: torch.Tensor, stride: int) -> list[torch.Tensor]:
    """The NHWC input ``[N, H, W, C]``'s ``stride * stride`` phase grids ``x[:, ph::stride,
    pw::stride, :]`` in the kernel's order (``ph * stride + pw``; module docstring, "Strided
    layers"): views, no copy."""
    return [x[:, ph::stride, pw::stride, :] for ph in range(stride) for pw in range(stride)]


def step_phases(shape: ConvShape, block_k: int) -> tuple[np.ndarray, ...]:
    """``(dh, ph, dw, pw, c0)`` of every K step in order (the kernel's :func:`_step_tap`):
    the tap's offsets split into whole strides and phases, and the step's first channel."""
    r, s, c0 = step_taps(shape, block_k)
    u, pad = shape.stride, shape.padding
    t_r, t_s = r + (u - 1) * pad, s + (u - 1) * pad
    return t_r // u - pad, t_r % u, t_s // u - pad, t_s % u, c0


def phase_problems(shape: ConvShape) -> list[str]:
    """Why the phase grids cannot carry this layer's stride (empty: they can)."""
    u = shape.stride
    if u > 2:
        return [f"stride {u} (four phase grids at most, one kernel argument each; valid: stride 1 or 2)"]
    if min(shape.H, shape.W) >= u:
        return []
    return [f"stride {u} with H={shape.H}, W={shape.W} (a phase grid would be empty; valid: H >= {u} and W >= {u})"]


def step_taps(shape: ConvShape, block_k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(r, s, c0)`` of every K step in order (the kernel's :func:`_step_tap`, before the
    padding offset): tap-major, then channel blocks of BLOCK_K."""
    num_cb = triton.cdiv(shape.C, block_k)
    steps = np.arange(shape.R * shape.S * num_cb, dtype=np.int64)
    tap = steps // num_cb
    return tap // shape.S, tap % shape.S, (steps % num_cb) * block_k


def tile_width(tiles: Mapping[str, int]) -> int:
    """Filters per tile: BLOCK_N, plus the second filter block's BLOCK_N2 where there is one."""
    return tiles["BLOCK_N"] + tiles.get("BLOCK_N2", 0)


def padded_channels(shape: ConvShape, tiles: Mapping[str, int]) -> int:
    """Channels of the input buffer the kernel reads: C, or with ``PAD_C`` C rounded up to
    whole BLOCK_K blocks."""
    return triton.cdiv(shape.C, tiles["BLOCK_K"]) * tiles["BLOCK_K"] if tiles.get("PAD_C") else shape.C


def packing(tiles: Mapping[str, int]) -> dict[str, int]:
    """The tiles as igemm_fast's weight packing reads them (tap order; filters padded to whole
    tiles of :func:`tile_width`)."""
    return {"BLOCK_N": tile_width(tiles), "BLOCK_K": tiles["BLOCK_K"], "PACK_K": 0}


#: Shared memory Triton 3.6 sets aside to convert a plain-store epilogue's tile between layouts:
#: 32 KB for both 128 x 128 and 128 x 256 fp16 tiles (compiled for sm_90; it converts a larger
#: tile in rounds), the tile itself where smaller.
CONVERT_SCRATCH_BYTES = 32 * 1024


def smem_bytes(tiles: Mapping[str, int], num_stages: int, eb: int = 2) -> int:
    """Shared memory of one program: the ring (A box and weight tile per slot) and the output:
    with ``TMA_STORE`` the tile the TMA store reads (fp32 partials with split-K), else the
    compiler's scratch for the epilogue's layout conversion (:func:`_direct`), at most
    :data:`CONVERT_SCRATCH_BYTES`; barriers not counted."""
    bm, bn, bk = tiles["BLOCK_M"], tile_width(tiles), tiles["BLOCK_K"]
    if tiles["TMA_STORE"]:
        out = bm * bn * (4 if tiles["SPLIT_K"] > 1 else eb)
    else:
        out = min(bm * bn * eb, CONVERT_SCRATCH_BYTES)
    return num_stages * (bm + bn) * bk * eb + out


def occupancy(tiles: Mapping[str, int]) -> int:
    """Programs per SM a persistent grid is sized for: two where registers are capped
    (``MAXNREG``: 2 x 384 threads then fit the register file), else one."""
    return 2 if tiles["MAXNREG"] else 1


# -----------------------------------------------------------
# The config space: the configs of the probe that preceded this family, then the ones tried
# since (the kernel notes of docs/benchmarks.md); kept where shared memory holds them.

def _cfg(bm: int, bn: int, stages: int, warps: int, tma_store: int = 1, persistent: int = 0, maxnreg: int = 0,
         split_k: int = 1, split_add: int = 0, bk: int = 64, bn2: int = 0, pad_c: int = 0) -> Config:
    return Config.make({"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "SPLIT_K": split_k, "PERSISTENT": persistent,
                        "TMA_STORE": tma_store, "MAXNREG": maxnreg, "SPLIT_ADD": split_add, "BLOCK_N2": bn2,
                        "PAD_C": pad_c}, warps, stages)


#: Every config tried, in the probe's order (the bracketed indices below name them).
CONFIGS = (
    _cfg(128, 128, 4, 8),                                    # [0] two consumer warpgroups, 64 x 128 each
    _cfg(128, 128, 3, 8),
    _cfg(128, 128, 4, 8, persistent=1),                      # [2]
    _cfg(128, 128, 4, 8, tma_store=0),                       # [3]
    _cfg(128, 128, 4, 4),                                    # one consumer warpgroup, 128 x 128
    _cfg(128, 64, 4, 8),                                     # cuDNN's tile: 64 x 64 per warpgroup
    _cfg(128, 64, 6, 8, persistent=1),
    _cfg(128, 64, 4, 4),
    _cfg(128, 256, 3, 8),                                    # 64 x 256 per warpgroup
    # Two programs per SM: registers capped so that 2 x 384 threads fit (the load warp's
    # warpgroup gives its registers back to the wgmma warpgroups).
    _cfg(128, 64, 4, 8, maxnreg=80),
    _cfg(128, 64, 4, 8, persistent=1, maxnreg=80),           # [10]
    # Small grids (7 x 7 and 14 x 14 layers): 64-row tiles, the two warpgroups side by side.
    _cfg(64, 128, 4, 8),
    _cfg(64, 128, 4, 8, maxnreg=80),
    # ... or split-K: twice the work items, each half of K.
    _cfg(128, 128, 4, 8, split_k=2),                         # [13]
    _cfg(128, 64, 4, 8, split_k=2),
    # ... both: on l23, 224 work items in one wave of two programs per SM.
    _cfg(128, 64, 3, 8, maxnreg=80, split_k=2),
    _cfg(64, 128, 3, 8, maxnreg=80, split_k=2),
    # Wide filter blocks on a persistent grid (cuDNN's nvJet GEMMs run 128 x 256 and 128 x 192
    # tiles on the 1x1 layers): the input box read once per 256 filters, not per 64 or 128.
    _cfg(128, 256, 3, 8, persistent=1),
    _cfg(128, 256, 4, 8, persistent=1, tma_store=0),
    # Deeper rings for the small grids of 7 x 7 layers (cuDNN runs l23 as one 128 x 64 tile per
    # CTA, 104 CTAs, no split-K): 8 slots of 128 x 64, and 5 for the split-K 128 x 128 tile.
    _cfg(128, 64, 8, 8),
    _cfg(128, 64, 8, 4),
    _cfg(128, 128, 5, 8, split_k=2),
    # cuDNN's tile in two K slices with a deeper ring (ResNet-18's last stage at batch 16).
    _cfg(128, 64, 6, 8, split_k=2),
    # Split-K without the sum launch (SPLIT_ADD: the last split 2, 4 or 6 K steps longer, adding
    # to the first's output in L2); no output tile in shared memory, so deeper rings.
    _cfg(128, 128, 6, 8, tma_store=0, split_k=2, split_add=2),
    _cfg(128, 128, 6, 8, tma_store=0, split_k=2, split_add=4),
    _cfg(128, 64, 8, 8, tma_store=0, split_k=2, split_add=2),
    _cfg(128, 64, 8, 8, tma_store=0, split_k=2, split_add=4),
    _cfg(128, 128, 6, 8, tma_store=0, split_k=2, split_add=6),
    _cfg(64, 128, 8, 8, tma_store=0, split_k=2, split_add=4),
    _cfg(128, 64, 4, 8, tma_store=0, maxnreg=80, split_k=2, split_add=4),
    # 32-channel K steps (64-byte rows, 64-byte swizzle) for C an odd multiple of 32, where
    # 64-channel steps read a half block of zeros: C = 96 or 288 (Inception), 24 padded to 32.
    _cfg(128, 128, 8, 8, persistent=1, bk=32),
    _cfg(128, 128, 8, 8, bk=32),
    _cfg(128, 64, 8, 8, persistent=1, maxnreg=80, bk=32),
    # Deeper rings for the 128 x 128 tile without split-K (cuDNN's kernel on Inception's 35 x 35
    # reduction keeps 231 KB of shared memory per CTA, about 7 slots, where [2] keeps 4 and
    # its output tile): 6 slots and the output tile (7 do not fit beside either epilogue).
    _cfg(128, 128, 6, 8, persistent=1),
    _cfg(128, 128, 6, 8),
    # 32-filter blocks for small or odd F (24, 96: a 64-wide block pads 40 of 64 columns, or
    # leaves a half block), all but the last with 32-channel steps: the wgmma is 32 wide, the
    # ring's slots small enough for all nine taps of a 3x3 in flight, and two to four programs
    # per SM.
    _cfg(128, 32, 9, 4, bk=32),
    _cfg(128, 32, 4, 4, bk=32),
    _cfg(128, 32, 8, 8, persistent=1, maxnreg=80, bk=32),
    _cfg(64, 32, 9, 4, bk=32),
    # Tiles of two filter blocks (BLOCK_N2: 64 + 32 = 96 or 64 + 16 = 80 filters), so that the
    # tile count fits the SMs where a power-of-two width leaves a second round or idle SMs:
    # Inception's 8 x 8 and GoogLeNet's 7 x 7 pointwise layers (F = 320, 384: 128 or 100 tiles
    # of 64 x 96 or 64 x 80 against 80 or 75 of 64 x 128), and F = 96 with no padded columns.
    _cfg(64, 64, 8, 4, bn2=32),
    _cfg(64, 64, 8, 4, bn2=16),
    _cfg(64, 64, 8, 8, bn2=32),
    _cfg(128, 64, 8, 8, persistent=1, bk=32, bn2=32),
    _cfg(128, 64, 6, 8, persistent=1, bn2=32),
    _cfg(128, 64, 8, 8, bk=32, bn2=32),
    # ... and 128 + 64 = 192 or 128 + 32 = 160 filters (F = 192 or 384: 98 tiles of 64 x 192 on a
    # 14 x 14 layer at batch 32, where 64 x 128 tiles make 196; F = 152 in one block and a half).
    _cfg(64, 128, 5, 4, bn2=64),
    _cfg(64, 128, 5, 4, bn2=32),
    _cfg(128, 128, 4, 8, persistent=1, bn2=64),
    # The input copied into whole channel blocks first (PAD_C), for C not a multiple of BLOCK_K
    # (c24: every box of 32 channels would be 24 and a zero fill, fetched a sector per pixel
    # row): three of the 32-filter configs above and a 128 x 64 one, with it.
    _cfg(128, 32, 8, 8, persistent=1, maxnreg=80, bk=32, pad_c=1),
    _cfg(128, 32, 9, 4, bk=32, pad_c=1),
    _cfg(64, 32, 9, 4, bk=32, pad_c=1),
    _cfg(128, 64, 8, 8, persistent=1, maxnreg=80, bk=32, pad_c=1),
    _cfg(128, 32, 6, 4),
    # One warpgroup on 64-row tiles (the small grids of 7 x 7 and 14 x 14 pointwise layers):
    # deep rings, or shallow ones that let two programs share an SM.
    _cfg(64, 128, 8, 4),
    _cfg(64, 128, 4, 4, maxnreg=128),
    _cfg(64, 256, 4, 4),
    _cfg(64, 64, 6, 4, maxnreg=128),
    # 256-row tiles on two warpgroups (128 rows and 128 fp32 registers of sums per thread
    # each; cuDNN's nvJet GEMM on ResNet-50's 28 x 28 pointwise layer runs 256 x 128): a
    # quarter less operand traffic per output row than 128-row tiles, and half the tiles of
    # the large pointwise layers, on three or four slots.
    _cfg(256, 128, 3, 8, persistent=1),
    _cfg(256, 128, 3, 8),
    _cfg(256, 64, 4, 8, persistent=1),
    _cfg(256, 64, 4, 8),
)


def igemm_ws_space(shape: ConvShape, traits: DeviceTraits) -> list[Config]:
    """:data:`CONFIGS` that fit a Hopper block's shared memory and give every split at least
    one K step; none where the family cannot run the layer (not NVIDIA with TMA, a stride the
    phase grids cannot carry, C or F not a multiple of 8)."""
    if traits.vendor != "nvidia" or not traits.tma or shape.C % 8 or shape.F % 8 or phase_problems(shape):
        return []
    eb = element_bytes(shape)
    return [cfg for cfg in CONFIGS if smem_bytes(cfg.tiles_dict, cfg.num_stages, eb) <= HOPPER_SMEM_BYTES
            and _splits_fit(len(step_taps(shape, cfg.tiles_dict["BLOCK_K"])[0]), cfg.tiles_dict["SPLIT_K"],
                            cfg.tiles_dict["SPLIT_ADD"])
            and not (cfg.tiles_dict["PAD_C"] and shape.C % cfg.tiles_dict["BLOCK_K"] == 0)]


def split_len(num_steps: int, split_k: int, split_add: int = 0) -> int:
    """K steps of every split but the last, which runs the rest: ``ceil(num_steps / split_k)``,
    or with ``split_add`` (two splits) ``(num_steps - split_add) // 2``, so that the last split,
    the one that adds, runs ``split_add`` or ``split_add + 1`` steps more."""
    return (num_steps - split_add) // 2 if split_add else triton.cdiv(num_steps, split_k)


def _splits_fit(num_steps: int, split_k: int, split_add: int = 0) -> bool:
    """Every one of ``split_k`` slices of ``num_steps`` K steps gets at least one step (a
    split with none would release a ring slot it never filled)."""
    per = split_len(num_steps, split_k, split_add)
    return per >= 1 and (split_k - 1) * per < num_steps


# -----------------------------------------------------------
# The family.

class IgemmWsConv(ConvKernel):
    """The warp-specialized implicit GEMM (module docstring).  Tiles: BLOCK_M x BLOCK_N x
    BLOCK_K, SPLIT_K, PERSISTENT, TMA_STORE, MAXNREG (0: the compiler's register budget);
    ``launch.num_warps`` is the MMA partition's warps (4 or 8), ``launch.num_stages`` the
    ring's depth.  The pixel box follows from BLOCK_M and the layer (:func:`pick_box`)."""

    name = "igemm_ws"
    jit_kernel = igemm_ws_kernel
    tile_names = ("BLOCK_M", "BLOCK_N", "BLOCK_K", "SPLIT_K", "PERSISTENT", "TMA_STORE", "MAXNREG", "SPLIT_ADD",
                  "BLOCK_N2", "PAD_C")
    # 0: split-K's sum launch; one filter block per tile; the input read where it lies (as
    # before each tile existed)
    tile_defaults = {"SPLIT_ADD": 0, "BLOCK_N2": 0, "PAD_C": 0}
    dot_tiles = ("BLOCK_M", "BLOCK_N", "BLOCK_K")

    def tune_space(self, shape: ConvShape, traits: DeviceTraits) -> list[Config]:
        return igemm_ws_space(shape, traits)

    def validation_scope(self, tiles: Mapping[str, int]) -> str:
        """The family's name, but not for tiles of two filter blocks (``BLOCK_N2``) or a padded
        input copy (``PAD_C``): the H200's validation sets (docs/simulator.md) predate them, so
        their figures carry no band.  Nor for 256-row tiles (``BLOCK_M`` 256), which missed the
        goals of a held-out set of their own (docs/simulator.md, set H4)."""
        paths = [why for taken, why in ((tiles.get("BLOCK_N2"), "two filter blocks"),
                                        (tiles.get("PAD_C"), "input channels padded"),
                                        (tiles.get("BLOCK_M") == 256, "256-row tiles")) if taken]
        return f"{self.name} ({', '.join(paths)})" if paths else self.name

    def check_tiles(self, tiles: Mapping[str, int]) -> dict[str, int]:
        """BLOCK_M 64, 128 or 256 (one wgmma warpgroup takes 64 rows at a time), BLOCK_N a power
        of two from 16 to 256 (a wgmma's N), BLOCK_K 32 or 64 (64- or 128-byte rows: the box's
        swizzle is the matrix's); SPLIT_K 1, 2 or 4; flags 0 or 1; MAXNREG 0 or a multiple of 8
        from 24 to 256; SPLIT_ADD 0 or the lead, 1 to 8 K steps, of a two-way split that adds in
        the kernel; BLOCK_N2 0 or a second filter block of 16 to 64 filters, narrower than BLOCK_N,
        without split-K; PAD_C 0 or 1 (the input copied into whole BLOCK_K channel blocks first)."""
        given = self.tile_entries(tiles)
        rules = {"BLOCK_M": ((64, 128, 256), "64, 128 or 256"),
                 "BLOCK_N": ((16, 32, 64, 128, 256), "a power of two, 16 to 256"),
                 "BLOCK_K": ((32, 64), "32 or 64 (64- or 128-byte rows of 2-byte elements)"),
                 "SPLIT_K": ((1, 2, 4), "1, 2 or 4"),
                 "PERSISTENT": ((0, 1), "0 or 1"), "TMA_STORE": ((0, 1), "0 or 1"),
                 "MAXNREG": ((0, *range(24, 257, 8)), "0 (off) or a multiple of 8 from 24 to 256"),
                 "SPLIT_ADD": (tuple(range(9)), "0 (off) or 1 to 8 (K steps)"),
                 "BLOCK_N2": ((0, 16, 32, 64), "0 (off) or a power of two, 16 to 64"),
                 "PAD_C": ((0, 1), "0 or 1")}
        for key, value in given.items():
            valid, rule = rules[key]
            if isinstance(value, bool) or value not in valid:
                raise ValueError(f"kernel {self.name!r}: tile {key}={value!r} must be {rule}")
        if given["SPLIT_ADD"] and (given["SPLIT_K"] != 2 or given["TMA_STORE"]):
            raise ValueError(f"kernel {self.name!r}: SPLIT_ADD={given['SPLIT_ADD']} needs SPLIT_K=2 and TMA_STORE=0 "
                             f"(got SPLIT_K={given['SPLIT_K']}, TMA_STORE={given['TMA_STORE']}): the two splits "
                             "store and add from registers")
        if given["BLOCK_N2"] and (given["BLOCK_N2"] >= given["BLOCK_N"] or given["SPLIT_K"] > 1):
            raise ValueError(f"kernel {self.name!r}: BLOCK_N2={given['BLOCK_N2']} needs BLOCK_N2 < BLOCK_N and "
                             f"SPLIT_K=1 (got BLOCK_N={given['BLOCK_N']}, SPLIT_K={given['SPLIT_K']}): the "
                             "second filter block is the narrower, and its sums leave as the output")
        if given["SPLIT_K"] > 1 and not given["SPLIT_ADD"] and not given["TMA_STORE"]:
            raise ValueError(f"kernel {self.name!r}: SPLIT_K={given['SPLIT_K']} needs TMA_STORE=1 "
                             "(the fp32 partials leave through a TMA box) or SPLIT_ADD > 0")
        return {t: int(given[t]) for t in self.tile_names}

    # -----------------------------------------------------------
    # Refusals: one line each, naming the value and what is valid.

    def check_target(self, shape: ConvShape | None, tiles: Mapping[str, int], vendor: str, arch: str) -> None:
        """Hopper only: NVIDIA sm_90 (TMA boxes, wgmma and ``setmaxnreg`` are sm_90a
        instructions; Blackwell's tensor cores are another API); the layer's own rules
        (:meth:`check_flags`); last, a Triton whose Gluon API is 3.6's (a ToolchainError)."""
        if vendor != "nvidia" or arch not in ("sm_90", "sm_90a"):
            raise ValueError(f"kernel {self.name!r} is a Gluon kernel for Hopper (sm_90); on {arch} ({vendor}) "
                             "use kernel=igemm_fast")
        if shape is not None:
            self.check_flags(shape, tiles, torch.device("meta"))
        check_gluon_version()

    def check_flags(self, shape: ConvShape, tiles: Mapping[str, int], device: torch.device) -> None:
        """What the layer and the device must be: a Hopper GPU (or an ahead-of-time compile,
        ``meta``), a stride the phase grids carry (:func:`phase_problems`), C and F multiples
        of 8.  (The dtype, fp16 or bf16, every :class:`~kernels.problem.ConvShape` already is:
        :data:`DTYPES`.)"""
        if device.type == "cpu":
            raise ValueError(f"kernel {self.name!r} is a Gluon kernel for Hopper (sm_90); on the CPU (Triton "
                             "interpreter, which runs no Gluon) use kernel=igemm_fast")
        if device.type == "cuda":
            cap = torch.cuda.get_device_capability(device)
            if torch.version.hip or cap != (9, 0):
                where = torch.cuda.get_device_name(device) + ("" if torch.version.hip else f" (sm_{cap[0]}{cap[1]})")
                raise ValueError(f"kernel {self.name!r} is a Gluon kernel for Hopper (sm_90); on {where} "
                                 "use kernel=igemm_fast")
            check_gluon_version()
        steps = len(step_taps(shape, tiles["BLOCK_K"])[0])
        bad = phase_problems(shape) + [why for why, no in (
            (f"C={shape.C} (TMA rows are whole 16 bytes; valid: C % 8 == 0)", shape.C % 8),
            (f"F={shape.F} (the output's rows likewise; valid: F % 8 == 0)", shape.F % 8),
            (f"SPLIT_K={tiles['SPLIT_K']} over {steps} K steps (a split with none; valid: SPLIT_K <= "
             f"{max(k for k in (1, 2, 4) if _splits_fit(steps, k))})", not _splits_fit(steps, tiles["SPLIT_K"])),
            (f"SPLIT_ADD={tiles['SPLIT_ADD']} over {steps} K steps (the first split would get none; valid: "
             f"SPLIT_ADD <= {steps - 2})", tiles["SPLIT_ADD"] and not _splits_fit(steps, 2, tiles["SPLIT_ADD"])))
            if no]
        if bad:
            raise ValueError(f"kernel {self.name!r} cannot run layer {shape.name!r}: {'; '.join(bad)}; "
                             "use kernel=igemm_fast")

    # -----------------------------------------------------------
    # Grid, layouts, launch.

    def box(self, shape: ConvShape, tiles: Mapping[str, int]) -> tuple[int, int, int]:
        """The pixel box of the layer's tiles (:func:`pick_box` on :func:`tiled_shape`)."""
        t = tiled_shape(shape)
        return pick_box(t.N, t.P, t.Q, tiles["BLOCK_M"])

    def tile_grid(self, shape: ConvShape, tiles: Mapping[str, int]) -> TileGrid:
        """Pixel boxes x filter blocks: ``num_pid_m`` = boxes along images x rows x columns
        (of :func:`tiled_shape`)."""
        images, rows, cols = box_counts(tiled_shape(shape), self.box(shape, tiles))
        return TileGrid(images * rows * cols, triton.cdiv(shape.F, tile_width(tiles)))

    def to_layout(self, ops: Operands) -> tuple:
        """Not used: the packed weights depend on the tiles, so :meth:`prepare` makes them."""
        raise NotImplementedError("igemm_ws packs its weights per tile size in prepare()")

    def input_view(self, x: torch.Tensor, tiles: Mapping[str, int]) -> torch.Tensor:
        """NHWC: a view of a channels_last ``x`` (a copy, timed, otherwise)."""
        return nhwc(x)

    def empty_output(self, shape: ConvShape, device: torch.device) -> torch.Tensor:
        """NHWC (N, P, Q, F), as igemm's."""
        return torch.empty((shape.N, shape.P, shape.Q, shape.F), dtype=getattr(torch, shape.dtype), device=device)

    def output_as_nchw(self, out: torch.Tensor) -> torch.Tensor:
        return out.permute(0, 3, 1, 2)

    def prepare(self, ops: Operands, shape: ConvShape, tiles: Mapping[str, int]) -> Bound:
        """The packed ``[F_pad, R*S*C_pad]`` weights (once: constants of the layer), the split-K
        workspace ``[SPLIT_K, N, P, Q, F]`` fp32 (the output itself without split-K; with
        SPLIT_ADD the tiles' flags, int32 zeros that the kernel leaves at zero), with PAD_C the
        NHWC input buffer ``[N, H, W, C_pad]`` (:func:`padded_channels`; each launch writes
        it: :func:`pad_channels`) and the output."""
        out = self.empty_output(shape, ops.x.device)
        split = tiles["SPLIT_K"]
        if tiles["SPLIT_ADD"]:
            ws = torch.zeros(self.tile_grid(shape, tiles).num_pids, dtype=torch.int32, device=ops.x.device)
        elif split > 1:
            ws = torch.empty((split, shape.N, shape.P, shape.Q, shape.F), dtype=torch.float32, device=ops.x.device)
        else:
            ws = out
        padded = ()
        if tiles["PAD_C"]:
            padded = (torch.empty((shape.N, shape.H, shape.W, padded_channels(shape, tiles)), dtype=ops.x.dtype,
                                  device=ops.x.device),)
        return Bound((pack_weights(ops.w, shape, packing(tiles)), ws, *padded), out)

    def bind(self, ops: Operands, shape: ConvShape, tiles: Mapping[str, int], swizzle: SwizzleBinding,
             launch: LaunchConfig, share: Bound | None = None) -> tuple[Callable[[], None], torch.Tensor]:
        """As :meth:`ConvKernel.bind`, after checking the layer, the device and the launch."""
        tiles = self.check_tiles(tiles)
        self.check_flags(shape, tiles, ops.x.device)
        if launch.num_warps not in (4, 8) or launch.num_stages < 2:
            raise ValueError(f"kernel {self.name!r}: num_warps={launch.num_warps}, num_stages={launch.num_stages}; "
                             "valid: num_warps 4 or 8 (one or two wgmma warpgroups), num_stages >= 2 (ring slots)")
        return super().bind(ops, shape, tiles, swizzle, launch, share=share)

    def num_programs(self, shape: ConvShape, tiles: Mapping[str, int], device: torch.device) -> int:
        """One per work item, or (PERSISTENT) at most :func:`occupancy` per SM (132 on an
        ahead-of-time compile: the grid is a launch argument, not part of the build)."""
        work = self.tile_grid(shape, tiles).num_pids * tiles["SPLIT_K"]
        sms = torch.cuda.get_device_properties(device).multi_processor_count if device.type == "cuda" else 132
        return launched_programs(work, bool(tiles["PERSISTENT"]), sms * occupancy(tiles))

    def descriptors(self, x: torch.Tensor, w_packed: torch.Tensor, y: torch.Tensor, shape: ConvShape,
                    tiles: Mapping[str, int]) -> tuple:
        """The (x0, x1, x2, x3, w, y) TMA descriptors: the NHWC input's phase grids (stride 1: the
        input, four times over) in 4-D boxes ``[BOX_N, BOX_H, BOX_W, BLOCK_K]``, the packed
        weights in ``[BLOCK_N, BLOCK_K]`` tiles, ``y``, the output (or split-K's fp32 workspace
        ``[SPLIT_K, N, P, Q, F]``) in boxes of the pixel box by BLOCK_N filters; each in the
        swizzled shared layout wgmma and TMA both read.  Built on the host per launch (microseconds of CPU)."""
        from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

        box, bn, bn2, bk = self.box(shape, tiles), tiles["BLOCK_N"], tiles["BLOCK_N2"], tiles["BLOCK_K"]
        partials = tiles["SPLIT_K"] > 1 and not tiles["SPLIT_ADD"]
        y_box = (1, *box, bn) if partials else (*box, bn)
        y_dtype = "float32" if partials else shape.dtype
        x_box = (*box, bk)
        t = tiled_shape(shape)          # the same memory, as the kernel tiles it
        grids = phase_grids(x.view(t.N, t.H, t.W, x.shape[-1]), shape.stride)
        xs = [TensorDescriptor.from_tensor(g, list(x_box), _smem_layout(x_box, shape.dtype)) for g in grids]
        y = y.view(*y.shape[:-4], t.N, t.P, t.Q, t.F)
        w_desc = TensorDescriptor.from_tensor(w_packed, [bn, bk], _smem_layout((bn, bk), shape.dtype))
        y_desc = TensorDescriptor.from_tensor(y, list(y_box), _smem_layout(y_box, y_dtype))
        if not bn2:             # no second filter block: the first's descriptors stand in, unused
            return (*(xs * 4)[:4], w_desc, w_desc, y_desc, y_desc)
        y2_box = (*box, bn2)
        return (*(xs * 4)[:4], w_desc,
                TensorDescriptor.from_tensor(w_packed, [bn2, bk], _smem_layout((bn2, bk), shape.dtype)), y_desc,
                TensorDescriptor.from_tensor(y, list(y2_box), _smem_layout(y2_box, y_dtype)))

    def launch(self, operands, out, shape, tiles, swizzle: SwizzleBinding, launch: LaunchConfig) -> None:
        x, w_packed, ws, *padded = operands
        if padded:          # PAD_C: the input into whole channel blocks (timed: ours to pay)
            x = pad_channels(x, shape, padded[0])
        split, t = tiles["SPLIT_K"], tiled_shape(shape)
        _, rows, cols = box_counts(t, self.box(shape, tiles))
        grid = self.tile_grid(shape, tiles)
        num_cb = triton.cdiv(shape.C, tiles["BLOCK_K"])
        options = {"maxnreg": tiles["MAXNREG"]} if tiles["MAXNREG"] else {}
        add = tiles["SPLIT_ADD"]        # ws: the tiles' flags (SPLIT_ADD), the fp32 partials, or out
        num_steps = shape.R * shape.S * num_cb
        igemm_ws_kernel[(self.num_programs(shape, tiles, x.device),)](
            *self.descriptors(x, w_packed, out if add else ws, shape, tiles), out, ws,
            grid.num_pid_m, grid.num_pid_n, rows, cols, num_steps, split_len(num_steps, split, add), num_cb,
            shape.S, shape.padding, t.P, t.Q, shape.F, STRIDE=shape.stride,
            SWIZZLE=swizzle.fn, NUM_XCDS=swizzle.num_xcds, GROUP_SIZE=swizzle.group_size,
            NUM_STAGES=launch.num_stages, TMA_STORE=tiles["TMA_STORE"], SPLIT_K=split, SPLIT_ADD=bool(add),
            BLOCK_N2=tiles["BLOCK_N2"], num_warps=launch.num_warps, **options)
        if split > 1 and not add:
            split_k_sum_kernel[(triton.cdiv(out.numel(), SUM_BLOCK),)](ws, out, out.numel(), SPLIT_K=split,
                                                                      BLOCK=SUM_BLOCK, num_warps=4)

    # -----------------------------------------------------------
    # The address model (profiler=sim): igemm_fast's BOX_W model with boxes over images.

    def load_plan(self, shape: ConvShape, tiles: Mapping[str, int], elem_bytes: int | None = None) -> LoadPlan:
        """Step ``k`` is the kernel's K step ``k`` (tap, channel block).  Every row of a pixel
        box loads its run of channels at the tap, rows past the image's edge included (the TMA
        box covers them); rows of images past N and taps outside the input read TMA's zeros,
        no memory (:func:`kernels.igemm.input_runs` drops them).  The weights are the packed
        matrix, one run of BLOCK_K elements per filter row of the tile.  Both bulk (TMA).  With
        PAD_C the input is the padded copy, whose every channel block is whole."""
        tiles = self.check_tiles(tiles)
        eb = elem_bytes or element_bytes(shape)
        bases = self.buffer_bases(shape, tiles, eb)
        bm, bn, bk = tiles["BLOCK_M"], tile_width(tiles), tiles["BLOCK_K"]
        box = self.box(shape, tiles)
        t = dataclasses.replace(tiled_shape(shape), C=padded_channels(shape, tiles))
        r, s, c0 = step_taps(shape, bk)

        def rows(pid_m: np.ndarray) -> tuple[np.ndarray, ...]:
            n, p, q = box_pixels(t, box, pid_m)
            return n, p, q, n < t.N

        x_runs = input_runs(t, bm, bases["x"], eb, r[:, None], s[:, None], c0[:, None],
                            (np.minimum(bk, t.C - c0) * eb)[:, None], rows=rows)

        grid = self.tile_grid(shape, tiles)
        tile_ids = np.arange(grid.num_pids, dtype=np.int64)
        return LoadPlan(num_steps=len(r), elem_bytes=eb, operands=(
            OperandLoads("x", grid.num_pid_m, tile_ids // grid.num_pid_n, bm, x_runs, bulk=True),
            OperandLoads("w", grid.num_pid_n, tile_ids % grid.num_pid_n, bn,
                         packed_weight_runs(bases["w"], bn, bk, k_pad(shape, packing(tiles)), eb), bulk=True)))

    def buffer_bases(self, shape: ConvShape, tiles: Mapping[str, int], elem_bytes: int | None = None) -> dict[str, int]:
        """Where the input (with PAD_C: the given one ``x_src`` and the padded copy ``x`` the conv
        reads; else ``x``), the packed weights ``w``, the output ``y`` and (SPLIT_K > 1 without
        SPLIT_ADD) the fp32 workspace ``ws`` lie in the simulated address space, in that order."""
        eb = elem_bytes or element_bytes(shape)
        M = shape.N * shape.P * shape.Q
        pixels = shape.N * shape.H * shape.W
        sizes = {"x_src": pixels * shape.C * eb} if tiles["PAD_C"] else {}
        sizes |= {"x": pixels * padded_channels(shape, tiles) * eb,
                 "w": triton.cdiv(shape.F, tile_width(tiles)) * tile_width(tiles) * k_pad(shape, packing(tiles)) * eb,
                 "y": M * shape.F * eb}
        if tiles["SPLIT_K"] > 1 and not tiles["SPLIT_ADD"]:
            sizes["ws"] = tiles["SPLIT_K"] * M * shape.F * 4
        return place_tensors(sizes)

    def store_plan(self, shape: ConvShape, tiles: Mapping[str, int], elem_bytes: int | None = None) -> Epilogue:
        """What work item ``tile * SPLIT_K + split`` writes after its last step: one run of
        ``min(BLOCK_N, F - f0)`` elements per pixel of its box inside the images, at the NHWC
        output (``SPLIT_K`` 1, or ``SPLIT_ADD``: split 0 stores, the others add in L2, each an
        access of the same lines) or, split-K into a workspace, at this split's fp32 slice of it.
        A TMA store writes the box's rows as the L1 would (one request per row); rows past the
        images are clipped by the descriptor and write nothing."""
        tiles = self.check_tiles(tiles)
        eb = elem_bytes or element_bytes(shape)
        bases = self.buffer_bases(shape, tiles, eb)
        box, t, grid = self.box(shape, tiles), tiled_shape(shape), self.tile_grid(shape, tiles)
        splits, bn = tiles["SPLIT_K"], tile_width(tiles)
        to_ws = splits > 1 and not tiles["SPLIT_ADD"]
        out_eb, base = (4, bases["ws"]) if to_ws else (eb, bases["y"])
        slice_bytes = t.N * t.P * t.Q * shape.F * out_eb if to_ws else 0

        def runs(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            tile, split = keys // splits, keys % splits
            n, p, q = box_pixels(t, box, tile // grid.num_pid_n)                   # (keys, BLOCK_M)
            valid = (n < t.N) & (p < t.P) & (q < t.Q)
            f0 = (tile % grid.num_pid_n) * bn
            start = base + (split * slice_bytes)[:, None] + (((n * t.P + p) * t.Q + q) * shape.F + f0[:, None]) * out_eb
            length = np.broadcast_to((np.minimum(bn, shape.F - f0) * out_eb)[:, None], start.shape)
            return np.where(valid, start, 0)[:, None, :], np.where(valid, length, 0)[:, None, :]

        keys = np.arange(grid.num_pids * splits, dtype=np.int64)
        return Epilogue(((OperandLoads("y", len(keys), keys, box[0] * box[1] * box[2], runs), True),))

    def launch_plans(self, shape: ConvShape, tiles: Mapping[str, int],
                     elem_bytes: int | None = None) -> tuple[LaunchPlan, ...]:
        """With PAD_C the input's copy into whole channel blocks (:func:`pad_pass_plan`), then
        the conv (its loads under the persistent / split-K schedule, then each work item's
        stores: :meth:`store_plan`) and, with SPLIT_K > 1 without SPLIT_ADD, igemm_fast's sum
        pass.  A persistent grid is modelled with one program per SM also where ``MAXNREG``
        sizes it for two."""
        tiles = self.check_tiles(tiles)
        eb = elem_bytes or element_bytes(shape)
        loads = self.load_plan(shape, tiles, eb)
        split, add = tiles["SPLIT_K"], tiles["SPLIT_ADD"]
        schedule = Schedule(loads.num_tiles, loads.num_steps, split, bool(tiles["PERSISTENT"]),
                            split_len(loads.num_steps, split, add))
        bases = self.buffer_bases(shape, tiles, eb)
        plans = [pad_pass_plan(shape, padded_channels(shape, tiles), bases, eb)] if tiles["PAD_C"] else []
        plans.append(LaunchPlan("conv", schedule, loads, epilogue=self.store_plan(shape, tiles, eb)))
        if split > 1 and not add:
            plans.append(sum_pass_plan(shape.N * shape.P * shape.Q * shape.F, split, bases, eb))
        return tuple(plans)


def pad_channels(x: torch.Tensor, shape: ConvShape, out: torch.Tensor) -> torch.Tensor:
    """PAD_C: the NHWC input ``x`` into ``out``, NHWC with ``out.shape[-1]`` channels, zero
    past C: igemm_fast's fold pass at stride 1 (one "phase", the rest of each row zeros),
    every element of ``out`` written."""
    c_pad, pixels = out.shape[-1], shape.N * shape.H * shape.W
    block_p, block_c = fold_blocks(dataclasses.replace(shape, C=c_pad))
    fold_input_kernel[(triton.cdiv(pixels, block_p), triton.cdiv(c_pad, block_c))](
        x, out, pixels, shape.C, shape.H, shape.W, shape.H, shape.W, c_pad, 1, 0,
        BLOCK_P=block_p, BLOCK_C=block_c, num_warps=4)
    return out


def pad_pass_plan(shape: ConvShape, c_pad: int, bases: Mapping[str, int], eb: int) -> LaunchPlan:
    """The PAD_C copy (:func:`pad_channels`) as a launch: program ``i`` reads the C channels of
    each of pixels ``[i * BLOCK_P, (i + 1) * BLOCK_P)`` of ``x_src`` (back to back) and writes
    their whole rows of ``c_pad`` channels of ``x``; a pixel block's channel blocks (one where
    ``c_pad <= 64``) as one program."""
    pixels = shape.N * shape.H * shape.W
    block_p, _ = fold_blocks(dataclasses.replace(shape, C=c_pad))
    programs = triton.cdiv(pixels, block_p)

    def runs(base: int, pitch: int, length: int):
        def per_program(ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            p = ids[:, None] * block_p + np.arange(block_p)
            ok = p < pixels
            return np.where(ok, base + p * pitch * eb, 0)[:, None, :], np.where(ok, length * eb, 0)[:, None, :]
        return per_program

    ids = np.arange(programs, dtype=np.int64)
    loads = LoadPlan(num_steps=1, elem_bytes=eb, operands=(
        OperandLoads("x_src", programs, ids, block_p, runs(bases["x_src"], shape.C, shape.C)),))
    return LaunchPlan("pad", Schedule(programs, 1), loads, Epilogue(((
        OperandLoads("x", programs, ids, block_p, runs(bases["x"], c_pad, c_pad)), True),)),
        swizzled=False, profiled=False)


@functools.cache
def _smem_layout(block: tuple[int, ...], dtype: str):
    """The shared layout of a TMA box of ``block`` elements of ``dtype``: a swizzle over the
    innermost BLOCK_K (or BLOCK_N) elements as wide as their row (128 or 64 bytes), what wgmma
    and the TMA unit both read.  Cached: the timed launcher builds its descriptors on every launch."""
    return gl.NVMMASharedLayout.get_default_for(list(block), {**DTYPES, "float32": gl.float32}[dtype])


def check_gluon_version(version: str | None = None) -> None:
    """Raise a one-line :class:`~kernels.base.ToolchainError` (a ValueError) unless Triton's
    (major, minor) is in :data:`GLUON_VERSIONS`."""
    version = version or triton.__version__
    major_minor = tuple(int(v) for v in version.split(".")[:2])
    if major_minor not in GLUON_VERSIONS:
        checked = ", ".join(f"{a}.{b}" for a, b in GLUON_VERSIONS)
        raise ToolchainError(f"kernel 'igemm_ws' is written against the Gluon API of Triton {checked}; "
                         f"Triton {version} is installed (3.9 removed tma.async_copy_shared_to_global): "
                         f"install triton=={checked}.* or use kernel=igemm_fast")
