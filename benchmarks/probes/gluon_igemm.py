"""Probe: a warp-specialized implicit-GEMM conv in Gluon, shaped like cuDNN's Hopper kernel.

cuDNN's fastest kernel on ResNet-50's compute-bound 3x3 layers
(``sm90_xmma_fprop_implicit_gemm_..._tilesize128x64x64``) runs 384 threads: one *producer*
warpgroup that only issues bulk tensor copies (TMA) and two *consumer* warpgroups that only
issue tensor-core instructions (wgmma).  Our Triton kernel (``kernels/igemm_fast.py``) runs one
warpgroup that does both, software-pipelined by the compiler: on l23 it keeps 17 % of the
issue slots busy.  Triton 3.6 does not compile ``tl.range(..., warp_specialize=True)`` for that
kernel, so this probe writes the producer/consumer split by hand in Gluon, Triton's
lower-level dialect where layouts, shared buffers, barriers and partitions are explicit.

The product is igemm_fast's (module docstring there), for NHWC fp16 stride-1 convs:

* rows    M = N * P * Q   output pixels,
* columns   F             filters,
* depth   K               taps (r, s) times input channels, in *tap order*: step
  ``k = tap * num_cb + cb`` reads channels ``[cb * BLOCK_K, (cb + 1) * BLOCK_K)`` of tap
  ``(r, s) = divmod(tap, S)``.

**Pixel boxes, no im2col.**  A tile's BLOCK_M rows are a ``BOX_N x BOX_H x BOX_W`` block of
output pixels (BOX_N images, a BOX_H x BOX_W rectangle of each; igemm_fast's ``BOX_W`` option
is the case BOX_N = 1).  At tap (r, s) the tile's A operand is then the input block at the
same corner shifted by ``(r - padding, s - padding)``: one 4-D TMA box
``[BOX_N, BOX_H, BOX_W, BLOCK_K]`` of the NHWC input.  Coordinates may be negative or run
past the image: TMA fills zeros there, which *is* the conv's zero padding, and costs no
memory traffic.  In shared memory the box is ``BLOCK_M`` rows of ``BLOCK_K`` channels, each
row 128 bytes, 128-byte swizzled: exactly the layout wgmma reads for a ``[BLOCK_M, BLOCK_K]``
operand, so the 4-D buffer is *reshaped* (a view, no copy) into the matrix.  The output
leaves the same way, a 4-D box ``[BOX_N, BOX_H, BOX_W, BLOCK_N]`` of the NHWC output whose
pixels past the image the TMA unit drops.  The price is the rows of a box past the image,
computed and dropped (:func:`pick_box` chooses the box with the fewest).

**Partitions** (``gl.warp_specialize``):

* the *load* partition, one warp (24 registers): for each K step, wait until a ring slot is
  free, then issue the two TMA copies (A box and the ``[BLOCK_N, BLOCK_K]`` weight tile of
  the K-major packed weights) that complete on the slot's *ready* barrier;
* the *MMA* partition, the kernel's ``num_warps`` warps (4: one warpgroup owns all BLOCK_M
  rows; 8: two warpgroups, 64 rows each, as in cuDNN): for each K step, wait for the slot,
  issue an asynchronous wgmma into fp32 registers, wait until at most one wgmma is in flight
  (the previous step's is then done) and free *that* step's slot, so the tensor core always
  has the next step queued behind the current one.  After the last step it writes the tile
  (fp16) into shared memory and sends it out with a TMA store, or stores from registers.

The producer never waits on the consumer except for a free slot, so with a persistent grid
(``Config.persistent``: one program per SM, or ``occupancy`` per SM, walking tiles ``pid,
pid + grid, ...``) the loads of the next tile run during the previous tile's epilogue.

**Small grids.**  A 7 x 7 layer at batch 32 has 1568 output pixels: 13 to 14 pixel tiles of
128 rows, 56 programs at BLOCK_N = 128 on a GPU of 132 SMs.  Three ways to fill the GPU are
in :data:`CONFIGS`: BLOCK_N = 64 (cuDNN's tile) with registers capped (``maxnreg``) so that
two programs fit on an SM; 64-row tiles, where the two wgmma warpgroups sit side by side
along N; and split-K, each work item reducing a slice of the K steps into an fp32 workspace
(a 5-D TMA box ``[1, BOX_N, BOX_H, BOX_W, BLOCK_N]``), summed in split order by igemm_fast's
``split_k_sum_kernel``.

    python benchmarks/probes/gluon_igemm.py compile               # sm_90a build, no GPU needed
    python benchmarks/probes/gluon_igemm.py check --shapes l17,l23 --presets resnet   # GPU
    python benchmarks/probes/gluon_igemm.py time --shapes l17,l23 --presets resnet    # GPU
    ncu --profile-from-start off --section SpeedOfLight ... \
        python benchmarks/probes/gluon_igemm.py once --shapes l23 --configs 0,15        # GPU

``compile`` needs only Triton 3.6 (no torch); ``check`` and ``time`` need the project
(``. benchmarks/gpu_setup.sh``) and a Hopper GPU.
"""
from __future__ import annotations

import argparse
import dataclasses
import itertools
import re
import sys
from pathlib import Path

import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (fence_async_shared, mbarrier, tma, warpgroup_mma,
                                                              warpgroup_mma_wait)

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kernels.problem import ConvShape  # noqa: E402  (light: no torch)


# -----------------------------------------------------------
# Where a tile lies, and what a K step reads.  Both partitions walk the same tiles and steps,
# so both call these.

@gluon.jit
def _tile_origin(tile, num_pid_n, rects_h, rects_w,
                 BOX_N: gl.constexpr, BOX_H: gl.constexpr, BOX_W: gl.constexpr, BLOCK_N: gl.constexpr):
    """Tile -> (first image, first output row, first output column, first filter).  Tiles are
    numbered row-major over (pixel box, filter block): the BLOCK_N-wide filter blocks of one
    pixel box are neighbours in launch order, so they read the same input boxes from L2."""
    pid_m = tile // num_pid_n
    pid_n = tile - pid_m * num_pid_n
    rects = rects_h * rects_w
    group = pid_m // rects
    rect = pid_m - group * rects
    row = rect // rects_w
    return group * BOX_N, row * BOX_H, (rect - row * rects_w) * BOX_W, pid_n * BLOCK_N


@gluon.jit
def _work_item(work, num_tiles, num_steps, SPLIT_K: gl.constexpr):
    """Work item -> (tile, split, first K step, end K step).  With SPLIT_K > 1 each tile's K
    steps are cut into SPLIT_K slices, work item ``split * num_tiles + tile`` reducing one."""
    split = work // num_tiles
    per_split = gl.cdiv(num_steps, SPLIT_K)
    first = split * per_split
    return work - split * num_tiles, split, first, gl.minimum(first + per_split, num_steps)


@gluon.jit
def _step_tap(step, num_cb, S, padding):
    """K step -> (row offset r - padding, column offset s - padding, channel block)."""
    tap = step // num_cb
    r = tap // S
    return r - padding, tap - r * S - padding, step - tap * num_cb


# -----------------------------------------------------------
# The load partition: one warp that only issues TMA copies.

@gluon.jit
def _load_partition(x_desc, w_desc, a_bufs, b_bufs, ready, empty,
                    num_tiles, num_pid_n, rects_h, rects_w, num_steps, num_cb, S, padding,
                    NUM_STAGES: gl.constexpr, SPLIT_K: gl.constexpr):
    BOX_N: gl.constexpr = x_desc.block_type.shape[0]
    BOX_H: gl.constexpr = x_desc.block_type.shape[1]
    BOX_W: gl.constexpr = x_desc.block_type.shape[2]
    BLOCK_K: gl.constexpr = x_desc.block_type.shape[3]
    BLOCK_N: gl.constexpr = w_desc.block_type.shape[0]
    nbytes: gl.constexpr = x_desc.block_type.nbytes + w_desc.block_type.nbytes
    it = 0          # K steps issued by this program so far, over all its tiles: the ring position
    for work in range(gl.program_id(0), num_tiles * SPLIT_K, gl.num_programs(0)):
        tile, split, k0, k1 = _work_item(work, num_tiles, num_steps, SPLIT_K)
        n0, p0, q0, f0 = _tile_origin(tile, num_pid_n, rects_h, rects_w, BOX_N, BOX_H, BOX_W, BLOCK_N)
        for step in range(k0, k1):
            dh, dw, cb = _step_tap(step, num_cb, S, padding)
            slot = it % NUM_STAGES
            # A fresh mbarrier counts as having completed the phase before its first, so the
            # first lap over the ring (phase 0) waits for parity 1 and passes at once.
            mbarrier.wait(empty.index(slot), ((it // NUM_STAGES) & 1) ^ 1)
            bar = ready.index(slot)
            # The transaction count is the whole boxes' bytes, zero-filled elements included.
            mbarrier.expect(bar, nbytes)
            tma.async_copy_global_to_shared(x_desc, [n0, p0 + dh, q0 + dw, cb * BLOCK_K], bar, a_bufs.index(slot))
            # Weights are packed [F_pad, R*S*C_pad], C padded per tap to whole BLOCK_K: the K
            # column of step `step` is step * BLOCK_K.
            tma.async_copy_global_to_shared(w_desc, [f0, step * BLOCK_K], bar, b_bufs.index(slot))
            it += 1


# -----------------------------------------------------------
# The MMA partition (the kernel's num_warps warps, the default partition): wgmma and the epilogue.

@gluon.jit
def _mma_partition(y_desc, y_ptr, a_bufs, b_bufs, ready, empty, c_smem,
                   num_tiles, num_pid_n, rects_h, rects_w, num_steps, P, Q, F,
                   NUM_STAGES: gl.constexpr, TMA_STORE: gl.constexpr, SPLIT_K: gl.constexpr):
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
    acc_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[WARPS_M, num_warps // WARPS_M],
                                                         instr_shape=[16, BLOCK_N // (num_warps // WARPS_M), 16])
    it = 0
    for work in range(gl.program_id(0), num_tiles * SPLIT_K, gl.num_programs(0)):
        tile, split, k0, k1 = _work_item(work, num_tiles, num_steps, SPLIT_K)
        n0, p0, q0, f0 = _tile_origin(tile, num_pid_n, rects_h, rects_w, BOX_N, BOX_H, BOX_W, BLOCK_N)
        acc = gl.zeros([BLOCK_M, BLOCK_N], gl.float32, acc_layout)
        prev = 0
        for step in range(k0, k1):
            slot = it % NUM_STAGES
            mbarrier.wait(ready.index(slot), (it // NUM_STAGES) & 1)
            a = a_bufs.index(slot).reshape([BLOCK_M, BLOCK_K])      # the 4-D box as the A matrix
            b = b_bufs.index(slot).permute((1, 0))                  # [BLOCK_K, BLOCK_N], K-major
            acc = warpgroup_mma(a, b, acc, is_async=True)
            # At most one wgmma in flight: the previous step's has finished reading its slot.
            acc = warpgroup_mma_wait(num_outstanding=1, deps=[acc])
            mbarrier.arrive(empty.index(prev), count=1, pred=step > k0)
            prev = slot
            it += 1
        acc = warpgroup_mma_wait(num_outstanding=0, deps=[acc])
        mbarrier.arrive(empty.index(prev), count=1)

        # fp16 output, or with SPLIT_K > 1 this split's fp32 partial sums (a slice of the
        # workspace, added up by a second kernel).
        out = acc.to(y_desc.dtype)
        if TMA_STORE:
            # The previous tile's store must have left c_smem before it is overwritten; waiting
            # here, not after issuing, lets that store overlap this tile's main loop.
            tma.store_wait(pendings=0)
            c_smem.reshape([BLOCK_M, BLOCK_N]).store(out)
            fence_async_shared()      # order the generic-proxy writes before the TMA (async proxy) read
            if SPLIT_K == 1:
                tma.async_copy_shared_to_global(y_desc, [n0, p0, q0, f0], c_smem)
            else:
                tma.async_copy_shared_to_global(y_desc, [split, n0, p0, q0, f0], c_smem)
        else:
            # Plain stores, 16 bytes per thread along the filters, masked to the image.
            store_layout: gl.constexpr = gl.BlockedLayout([1, 8], [32 * 8 // BLOCK_N, BLOCK_N // 8],
                                                          [num_warps, 1], [1, 0])
            out = gl.convert_layout(out, store_layout)
            rows = gl.arange(0, BLOCK_M, layout=gl.SliceLayout(1, store_layout))
            cols = f0 + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, store_layout))
            n = n0 + rows // (BOX_H * BOX_W)
            p = p0 + (rows // BOX_W) % BOX_H
            q = q0 + rows % BOX_W
            ok = (p < P) & (q < Q) & (n < y_desc.shape[0])
            offs = ((n * P + p) * Q + q).to(gl.int64) * F
            gl.store(y_ptr + offs[:, None] + cols[None, :], out, mask=ok[:, None] & (cols < F)[None, :])
    if TMA_STORE:
        tma.store_wait(pendings=0)


# -----------------------------------------------------------
# The kernel: allocate the ring and its barriers, then fork.

@gluon.jit
def gluon_igemm_kernel(x_desc, w_desc, y_desc, y_ptr,
                       num_tiles, num_pid_n, rects_h, rects_w, num_steps, num_cb, S, padding, P, Q, F,
                       NUM_STAGES: gl.constexpr, TMA_STORE: gl.constexpr, SPLIT_K: gl.constexpr):
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
    if TMA_STORE:
        c_smem = gl.allocate_shared_memory(y_desc.dtype, y_desc.block_type.shape, y_desc.layout)
    else:
        c_smem = a_bufs.index(0)      # unused: a placeholder of the right kind
    gl.warp_specialize([
        (_mma_partition, (y_desc, y_ptr, a_bufs, b_bufs, ready, empty, c_smem, num_tiles, num_pid_n, rects_h,
                          rects_w, num_steps, P, Q, F, NUM_STAGES, TMA_STORE, SPLIT_K)),
        (_load_partition, (x_desc, w_desc, a_bufs, b_bufs, ready, empty, num_tiles, num_pid_n, rects_h, rects_w,
                           num_steps, num_cb, S, padding, NUM_STAGES, SPLIT_K)),
    ], [1], [24])


# -----------------------------------------------------------
# Host side: configs, boxes, descriptors.

@dataclasses.dataclass(frozen=True)
class Config:
    """One launch choice: tile BLOCK_M x BLOCK_N x BLOCK_K, ring depth, the MMA partition's
    warps (4 = one warpgroup, 8 = two), epilogue through TMA or plain stores, persistent grid,
    split-K (fp32 partials through TMA, then a summing kernel)."""
    block_m: int
    block_n: int
    block_k: int
    stages: int
    warps: int
    tma_store: bool = True
    persistent: bool = False
    maxnreg: int | None = None
    occupancy: int = 1        # programs per SM the persistent grid assumes (a maxnreg low enough for it)
    split_k: int = 1

    def __post_init__(self):
        assert self.tma_store or self.split_k == 1, "split-K partials leave through TMA"

    @property
    def label(self) -> str:
        return (f"{self.block_m}x{self.block_n}x{self.block_k} s{self.stages} w{self.warps}"
                f"{' tmaC' if self.tma_store else ' stC'}{' pers' if self.persistent else ''}"
                f"{f' r{self.maxnreg}' if self.maxnreg else ''}{f' sk{self.split_k}' if self.split_k > 1 else ''}")


CONFIGS = [
    Config(128, 128, 64, 4, 8),                      # two consumer warpgroups, 64 x 128 each
    Config(128, 128, 64, 3, 8),
    Config(128, 128, 64, 4, 8, persistent=True),
    Config(128, 128, 64, 4, 8, tma_store=False),
    Config(128, 128, 64, 4, 4),                      # one consumer warpgroup, 128 x 128
    Config(128, 64, 64, 4, 8),                       # cuDNN's tile: 64 x 64 per warpgroup
    Config(128, 64, 64, 6, 8, persistent=True),
    Config(128, 64, 64, 4, 4),
    Config(128, 256, 64, 3, 8),                      # 64 x 256 per warpgroup
    # Two programs per SM: registers capped so that 2 x 384 threads fit (the load warp's
    # warpgroup gives its registers back to the wgmma warpgroups).
    Config(128, 64, 64, 4, 8, maxnreg=80),
    Config(128, 64, 64, 4, 8, persistent=True, maxnreg=80, occupancy=2),
    # Small grids (7 x 7 and 14 x 14 layers): 64-row tiles, the two warpgroups side by side.
    Config(64, 128, 64, 4, 8),
    Config(64, 128, 64, 4, 8, maxnreg=80),
    # ... or split-K: twice the work items, each half of K.
    Config(128, 128, 64, 4, 8, split_k=2),
    Config(128, 64, 64, 4, 8, split_k=2),
    # ... both: 224 work items of l23 in one wave of two programs per SM.
    Config(128, 64, 64, 3, 8, maxnreg=80, split_k=2),
    Config(64, 128, 64, 3, 8, maxnreg=80, split_k=2),
]


@dataclasses.dataclass(frozen=True)
class Geometry:
    """A layer and the pixel box its tiles take (images x output rows x output columns)."""
    shape: ConvShape
    box: tuple[int, int, int]

    def rects(self) -> tuple[int, int, int]:
        """Boxes along images, output rows, output columns."""
        bn, bh, bw = self.box
        return triton.cdiv(self.shape.N, bn), triton.cdiv(self.shape.P, bh), triton.cdiv(self.shape.Q, bw)

    @classmethod
    def of(cls, shape: ConvShape, block_m: int) -> Geometry:
        assert shape.stride == 1, "stride-1 layers only"
        return cls(shape, pick_box(shape.N, shape.P, shape.Q, block_m))


def pick_box(N: int, P: int, Q: int, block_m: int) -> tuple[int, int, int]:
    """The (BOX_N, BOX_H, BOX_W), powers of two with product BLOCK_M, that computes the fewest
    rows: boxes x BLOCK_M, the rows past the images included; ties go to the widest box (longer
    contiguous runs per TMA row).  E.g. 56 x 56 with 128 rows: 2 x 8 x 8, no waste; 14 x 14:
    32 x 2 x 2, none either (a 16 x 8 rectangle wastes 24 %)."""
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


def y_block(cfg: Config, box: tuple[int, int, int]) -> tuple[list[int], str]:
    """The output box and its element type: ``[BOX_N, BOX_H, BOX_W, BLOCK_N]`` fp16 of the NHWC
    output, or with split-K ``[1, BOX_N, BOX_H, BOX_W, BLOCK_N]`` fp32 of the [SPLIT_K, N, P, Q, F]
    workspace."""
    if cfg.split_k > 1:
        return [1, *box, cfg.block_n], "fp32"
    return [*box, cfg.block_n], "fp16"


def layouts(cfg: Config, box: tuple[int, int, int]):
    """Shared-memory layouts of the three TMA boxes: 128-byte swizzle over the innermost
    BLOCK_K (or BLOCK_N) elements, what wgmma and the TMA unit both read."""
    x_layout = gl.NVMMASharedLayout.get_default_for([*box, cfg.block_k], gl.float16)
    w_layout = gl.NVMMASharedLayout.get_default_for([cfg.block_n, cfg.block_k], gl.float16)
    shape, dtype = y_block(cfg, box)
    y_layout = gl.NVMMASharedLayout.get_default_for(shape, {"fp16": gl.float16, "fp32": gl.float32}[dtype])
    return x_layout, w_layout, y_layout


def launch_args(geo: Geometry, cfg: Config, num_sms: int) -> tuple[tuple[int, ...], dict, int]:
    """The scalar arguments after the descriptors and y_ptr, the constexprs and launch options,
    and the grid size."""
    shape = geo.shape
    num_cb = triton.cdiv(shape.C, cfg.block_k)
    images, rows, cols = geo.rects()
    num_pid_n = triton.cdiv(shape.F, cfg.block_n)
    num_tiles = images * rows * cols * num_pid_n
    num_steps = shape.R * shape.S * num_cb
    per_split = triton.cdiv(num_steps, cfg.split_k)
    assert (cfg.split_k - 1) * per_split < num_steps, "every split needs at least one K step"
    scalars = (num_tiles, num_pid_n, rows, cols, num_steps, num_cb, shape.S, shape.padding,
               shape.P, shape.Q, shape.F)
    consts = dict(NUM_STAGES=cfg.stages, TMA_STORE=cfg.tma_store, SPLIT_K=cfg.split_k, num_warps=cfg.warps)
    if cfg.maxnreg:
        consts["maxnreg"] = cfg.maxnreg
    work = num_tiles * cfg.split_k
    grid = min(work, num_sms * cfg.occupancy) if cfg.persistent else work
    return scalars, consts, grid


# -----------------------------------------------------------
# compile: the sm_90a build without a GPU (Triton only).

SIG_SCALARS = ("num_tiles", "num_pid_n", "rects_h", "rects_w", "num_steps", "num_cb", "S", "padding", "P", "Q", "F")


def compile_one(geo: Geometry, cfg: Config):
    """Compile for sm_90a (GPUTarget("cuda", 90, 32)) from the signature the launcher would build."""
    from triton.backends.compiler import GPUTarget
    from triton.experimental.gluon._runtime import GluonASTSource

    x_layout, w_layout, y_layout = layouts(cfg, geo.box)
    y_shape, y_type = y_block(cfg, geo.box)

    def desc(shape, layout, ty="fp16") -> str:     # the type string Triton's binder gives a descriptor
        return f"tensordesc<{ty}[{','.join(map(str, shape))}],{layout!r}>"

    sig = {"x_desc": desc([*geo.box, cfg.block_k], x_layout), "w_desc": desc([cfg.block_n, cfg.block_k], w_layout),
           "y_desc": desc(y_shape, y_layout, y_type), "y_ptr": "*fp16"}
    sig.update({name: "i32" for name in SIG_SCALARS})
    _, consts, _ = launch_args(geo, cfg, 132)
    options = {"num_warps": consts.pop("num_warps")}
    if "maxnreg" in consts:
        options["maxnreg"] = consts.pop("maxnreg")
    for name in consts:
        sig[name] = "constexpr"
    constexprs = {(list(sig).index(k),): v for k, v in consts.items()}
    src = GluonASTSource(gluon_igemm_kernel, sig, constexprs, {})
    return triton.compile(src, target=GPUTarget("cuda", 90, 32), options=options)


def ptx_facts(compiled) -> dict:
    """What the build holds: wgmma and TMA instructions and setmaxnreg (PTX), the target, and
    from the cubin (cuobjdump, shipped with Triton) registers, spills and HGMMA in SASS."""
    import os
    import subprocess
    import tempfile

    ptx = compiled.asm["ptx"]
    facts = {
        "target": re.search(r"\.target (\S+)", ptx).group(1),
        "wgmma": len(re.findall(r"wgmma\.mma_async", ptx)),
        "tma_loads": len(re.findall(r"cp\.async\.bulk\.tensor\.\dd\.shared::cluster\.global", ptx)),
        "tma_stores": len(re.findall(r"cp\.async\.bulk\.tensor\.\dd\.global\.shared", ptx)),
        "setmaxnreg": sorted(set(re.findall(r"setmaxnreg\.(inc|dec)\.sync\.aligned\.u32\s+(\d+)", ptx))),
        "shared": compiled.metadata.shared,
    }
    tool = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"
    with tempfile.TemporaryDirectory() as tmp:
        cubin = os.path.join(tmp, "k.cubin")
        Path(cubin).write_bytes(compiled.asm["cubin"])
        res = subprocess.run([str(tool), "--dump-resource-usage", cubin], capture_output=True, text=True).stdout
        sass = subprocess.run([str(tool), "-sass", cubin], capture_output=True, text=True).stdout
    m = re.search(r"REG:(\d+) STACK:(\d+) SHARED:(\d+) LOCAL:(\d+)", res)
    if m:
        facts.update(regs=int(m.group(1)), stack=int(m.group(2)), local=int(m.group(4)))
    maxreg = re.findall(r"USETMAXREG\.(?:DEALLOC|TRY_ALLOC)\.CTAPOOL (?:UP\d, )?(0x[0-9a-f]+)", sass)
    facts.update(HGMMA=sass.count("HGMMA"), LDL_STL=len(re.findall(r"\b(?:LDL|STL)\b", sass)),
                 USETMAXREG=sorted({int(v, 16) for v in maxreg}))
    return facts


def compile_check(args) -> None:
    """Build each config for sm_90a on an l17-sized layer (then l23- and l08-sized ones) and
    print what the build holds."""
    shapes = [ConvShape("l17", 32, 256, 14, 14, 256, 3, 3, 1, 1), ConvShape("l23", 32, 512, 7, 7, 512, 3, 3, 1, 1),
              ConvShape("l08", 32, 128, 28, 28, 512, 1, 1, 1, 0)]
    for shape in shapes[:args.layers]:
        for i, cfg in _configs(args):
            geo = Geometry.of(shape, cfg.block_m)
            try:
                facts = ptx_facts(compile_one(geo, cfg))
                print(f"{shape.name} box {geo.box} [{i}] {cfg.label}: {facts}", flush=True)
            except Exception as exc:  # noqa: BLE001 (a probe: report and go on)
                print(f"{shape.name} box {geo.box} [{i}] {cfg.label}: FAILED {type(exc).__name__}: {exc}", flush=True)
                if args.verbose:
                    raise


# -----------------------------------------------------------
# check and time: GPU.

def bind(x, w, shape: ConvShape, cfg: Config):
    """The launch closure for channels_last ``x`` (N, C, H, W) and weights (F, C, R, S) of a
    stride-1 layer.  Returns (run, out, geometry) with ``out`` (N, P, Q, F), NHWC.  With
    split-K, ``run`` is two launches: the conv into the fp32 workspace, then igemm_fast's
    split_k_sum_kernel (the partials added in split order, cast to fp16)."""
    import torch
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

    geo = Geometry.of(shape, cfg.block_m)
    N, C, P, Q, Fo, R, S = shape.N, shape.C, shape.P, shape.Q, shape.F, shape.R, shape.S
    bk, bn = cfg.block_k, cfg.block_n
    c_pad = triton.cdiv(C, bk) * bk
    f_pad = triton.cdiv(Fo, bn) * bn
    # Weights once, as the K-major [F_pad, R*S*C_pad] matrix, zeros in the padding (a layer's constant).
    w_packed = torch.zeros((f_pad, R, S, c_pad), dtype=w.dtype, device=w.device)
    w_packed[:Fo, :, :, :C] = w.permute(0, 2, 3, 1)
    w_packed = w_packed.reshape(f_pad, R * S * c_pad)
    x_nhwc = x.permute(0, 2, 3, 1)               # a view: channels_last memory is NHWC
    assert x_nhwc.is_contiguous() and C % 8 == 0 and Fo % 8 == 0, "16-byte rows in and out (C, F multiples of 8)"
    out = torch.empty((N, P, Q, Fo), dtype=x.dtype, device=x.device)
    x_layout, w_layout, y_layout = layouts(cfg, geo.box)
    x_desc = TensorDescriptor.from_tensor(x_nhwc, [*geo.box, bk], x_layout)
    w_desc = TensorDescriptor.from_tensor(w_packed, [bn, bk], w_layout)
    num_sms = torch.cuda.get_device_properties(x.device).multi_processor_count
    scalars, consts, grid = launch_args(geo, cfg, num_sms)
    if cfg.split_k == 1:
        y_desc = TensorDescriptor.from_tensor(out, y_block(cfg, geo.box)[0], y_layout)

        def run():
            gluon_igemm_kernel[(grid,)](x_desc, w_desc, y_desc, out, *scalars, **consts)
        return run, out, geo

    from kernels.igemm_fast import split_k_sum_kernel

    ws = torch.empty((cfg.split_k, N, P, Q, Fo), dtype=torch.float32, device=x.device)
    y_desc = TensorDescriptor.from_tensor(ws, y_block(cfg, geo.box)[0], y_layout)
    block = 1024

    def run_split():
        gluon_igemm_kernel[(grid,)](x_desc, w_desc, y_desc, out, *scalars, **consts)
        split_k_sum_kernel[(triton.cdiv(out.numel(), block),)](ws, out, out.numel(), SPLIT_K=cfg.split_k, BLOCK=block)
    return run_split, out, geo


def _layers(args):
    from conv_speed import preset_shapes

    keep = args.shapes.split(",")
    shapes = [s for s in preset_shapes(args.presets.split(",")) if s.name.split("/")[1] in keep]
    for shape in shapes:
        if shape.stride != 1:
            print(f"{shape.name}: stride {shape.stride}, skipped (stride-1 layers only)", flush=True)
            continue
        yield shape


def _operands(shape):
    import torch

    g = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn(shape.N, shape.C, shape.H, shape.W, device="cuda", dtype=torch.float16, generator=g).contiguous(
        memory_format=torch.channels_last)
    w = torch.randn(shape.F, shape.C, shape.R, shape.S, device="cuda", dtype=torch.float16, generator=g)
    return x, w / (shape.C * shape.R * shape.S) ** 0.5


TOLERANCE = 1e-2      # max |ours - fp32 reference| over max |reference|; fp16 rounding is ~1e-3


def _rel_err(out, ref) -> float:
    """Largest error of ``out`` relative to the reference's largest magnitude (NaN if any NaN)."""
    return ((out.float() - ref).abs().max() / ref.abs().max()).item()


def _first_run(run, name: str, limit_s: float = 20.0) -> None:
    """Launch once and wait at most ``limit_s`` seconds: a barrier bug shows as a kernel that
    never ends, and this exits the process naming the config instead of hanging the GPU call
    (the driver ends the kernel with the process)."""
    import os
    import time

    import torch

    run()
    done = torch.cuda.Event()
    done.record()
    start = time.monotonic()
    while not done.query():
        if time.monotonic() - start > limit_s:
            print(f"{name}: HANG (no completion after {limit_s:.0f} s); exiting. Rerun without it (--configs).",
                  flush=True)
            os._exit(3)
        time.sleep(0.01)


def _configs(args):
    keep = set(args.configs.split(",")) if args.configs else None
    return [(i, c) for i, c in enumerate(CONFIGS) if keep is None or str(i) in keep]


def check(args) -> None:
    """Every config on every layer: compile, run, and compare with torch's fp32 conv (max
    error relative to the output's largest magnitude)."""
    import torch
    import torch.nn.functional as F

    torch.backends.cudnn.allow_tf32 = False       # an fp32 reference, not TF32
    for shape in _layers(args):
        x, w = _operands(shape)
        ref = F.conv2d(x.float(), w.float(), None, padding=shape.padding).permute(0, 2, 3, 1)
        for i, cfg in _configs(args):
            try:
                run, out, geo = bind(x, w, shape, cfg)
                out.fill_(float("nan"))
                _first_run(run, f"{shape.name} [{i}] {cfg.label}")
                err = _rel_err(out, ref)
                verdict = "ok" if err < TOLERANCE else "WRONG"     # NaN (rows never written) is WRONG
                print(f"{shape.name:14s} [{i}] {cfg.label:34s} box {geo.box}: max rel err {err:.2e} {verdict}",
                      flush=True)
            except Exception as exc:  # noqa: BLE001 (a probe: report and go on)
                print(f"{shape.name:14s} [{i}] {cfg.label:34s}: {type(exc).__name__} {str(exc)[:300]}", flush=True)


def time_layers(args) -> None:
    """Ours (each correct config) vs cuDNN in benchmark mode: CUPTI kernel durations with the L2
    flushed before each launch, interleaved rounds (conv_speed's CuptiRounds)."""
    import torch
    import torch.nn.functional as F
    from conv_speed import CuptiRounds

    torch.backends.cudnn.benchmark = True
    torch.backends.cudnn.allow_tf32 = False
    timer = CuptiRounds()
    print(f"{'layer':14s} {'contender':36s} {'ms':>9s} {'cudnn ms':>9s} {'cudnn/ours':>10s} {'TFLOP/s':>8s}")
    for shape in _layers(args):
        x, w = _operands(shape)
        wc = w.contiguous(memory_format=torch.channels_last)
        ref = F.conv2d(x.float(), w.float(), None, padding=shape.padding).permute(0, 2, 3, 1)
        fns = {"cudnn": lambda: F.conv2d(x, wc, None, padding=shape.padding)}
        for i, cfg in _configs(args):
            try:
                run, out, geo = bind(x, w, shape, cfg)
                _first_run(run, f"{shape.name} [{i}] {cfg.label}")
                if not _rel_err(out, ref) < TOLERANCE:
                    print(f"{shape.name:14s} [{i}] {cfg.label}: WRONG, not timed", flush=True)
                    continue
                fns[f"[{i}] {cfg.label}"] = run
            except Exception as exc:  # noqa: BLE001
                print(f"{shape.name:14s} [{i}] {cfg.label}: {type(exc).__name__} {str(exc)[:200]}", flush=True)
        ms = timer.medians(fns, rounds=args.rounds, launches=args.launches)
        for name in sorted(ms, key=ms.get):
            print(f"{shape.name:14s} {name:36s} {ms[name]:9.4f} {ms['cudnn']:9.4f} {ms['cudnn'] / ms[name]:10.3f} "
                  f"{shape.flops / ms[name] / 1e9:8.1f}", flush=True)
        ours = [k for k in ms if k != "cudnn"]
        if ours:
            best = min(ours, key=ms.get)
            print(f"{shape.name:14s} BEST {best}: cudnn/ours {ms['cudnn'] / ms[best]:.3f}", flush=True)


def once(args) -> None:
    """For ncu (``--profile-from-start off``): warm each config and cuDNN, then one launch of
    each inside a CUDA profiler range, in the order printed."""
    import torch
    import torch.nn.functional as F

    torch.backends.cudnn.benchmark = True
    runs = []
    for shape in _layers(args):
        x, w = _operands(shape)
        wc = w.contiguous(memory_format=torch.channels_last)
        runs.append((f"{shape.name} cudnn", lambda x=x, wc=wc, p=shape.padding: F.conv2d(x, wc, None, padding=p)))
        for i, cfg in _configs(args):
            runs.append((f"{shape.name} [{i}] {cfg.label}", bind(x, w, shape, cfg)[0]))
    for _, fn in runs:
        for _ in range(3):
            fn()
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStart()
    for name, fn in runs:
        print(f"profiled: {name}", flush=True)
        fn()
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("mode", choices=("compile", "check", "time", "once"))
    ap.add_argument("--presets", default="resnet,holdout")
    ap.add_argument("--shapes", default="l17,l23,l11,l03,l08,vgg3,big")
    ap.add_argument("--configs", default="", help="indices into CONFIGS, comma-separated (default: all)")
    ap.add_argument("--layers", type=int, default=1, help="compile: how many of the built-in layers")
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--launches", type=int, default=10)
    ap.add_argument("--verbose", action="store_true")
    args = ap.parse_args()
    {"compile": compile_check, "check": check, "time": time_layers, "once": once}[args.mode](args)


if __name__ == "__main__":
    main()
