"""igemm_ws (the warp-specialized Gluon kernel, Hopper only) on a CPU: the host-side index
math against numpy and conv2d, the config space, the refusals (through the real CLI too),
the address model, and (Triton 3.6 only) every config x every swizzle compiled for sm_90.
Outputs on a GPU: tests/test_gpu_families.py."""
from __future__ import annotations

import dataclasses
import itertools
import re
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
import triton
import yaml
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import mbarrier, tma

from harness.errors import USER_ERROR_EXIT
from kernels import KERNELS
from kernels.igemm_ws import (CONFIGS, GLUON_VERSIONS, HOPPER_SMEM_BYTES, box_pixels, check_gluon_version,
                              igemm_ws_space, packing, phase_grids, pick_box, smem_bytes, step_phases, step_taps,
                              split_len, tile_width, tiled_shape)
from kernels.igemm_fast import pack_weights
from kernels.problem import ConvShape
from kernels.tuning import DeviceTraits
from swizzles import SWIZZLES, get_swizzle
from swizzles.permutation import remap_table
from tests.cli_fork import run_cli
from tests.faults import cli_env

KERNEL = KERNELS["igemm_ws"]
ROOT = Path(__file__).resolve().parents[2]
H100 = DeviceTraits("NVIDIA H100 80GB HBM3", 132, True)
TILES = {"BLOCK_M": 64, "BLOCK_N": 32, "BLOCK_K": 64, "SPLIT_K": 1, "PERSISTENT": 0, "TMA_STORE": 1, "MAXNREG": 0}
#: The parametric families as the GPU family tests instantiate them (tests/test_gpu_families.py).
FAMILY_LABELS = ["grouped_m[num_xcds=8,chunk=3,group_size=4]", "grouped_n[num_xcds=1,chunk=0,group_size=8]",
                 "tiled[num_xcds=8,chunk=0,tile_m=4,tile_n=2]", "hilbert[num_xcds=8,chunk=16,order=3]",
                 "morton[num_xcds=1,chunk=0,order=2]"]


def _preset_layers(*names: str) -> list[ConvShape]:
    out = []
    for name in names:
        preset = yaml.safe_load((ROOT / "conf" / "shape" / f"{name}.yaml").read_text())
        for e in preset["shapes"]:
            dims = {k: v for k, v in e.items() if k in ("N", "C", "H", "W", "F", "R", "S", "stride", "padding")}
            out.append(ConvShape(f"{name}/{e['name']}", **dims))
    return out


# -----------------------------------------------------------
# The kernel's index math, in numpy, against conv2d.

def _oracle(x: torch.Tensor, w: torch.Tensor, shape: ConvShape, tiles: dict, table: np.ndarray) -> np.ndarray:
    """What the kernel computes, work item by work item, as its two partitions index it: item
    ``w`` = split ``w // num_tiles`` of launch-order tile ``w % num_tiles``, remapped by
    ``table``, decoded row-major into (pixel box, filter block); at each K step of the split
    the A box is the step's phase grid (:func:`phase_grids`, made here as views of the
    tensor) at the box's pixels shifted by the step's (dh, dw), its channel block (zero
    outside the grid and past C, as TMA fills it), B the packed weights' ``[BLOCK_N + BLOCK_N2,
    BLOCK_K]`` rows (:func:`tile_width`: both filter blocks of the tile); rows outside the output
    are dropped, splits summed.  The pixels are those of the layer as the kernel tiles it
    (:func:`tiled_shape`: a pointwise layer as one row).  Returns NHWC float64; asserts each
    output is written once per split."""
    t = tiled_shape(shape)
    N, C, H, W, Fo, P, Q = t.N, t.C, t.H, t.W, t.F, t.P, t.Q
    bm, bn, bk, split = tiles["BLOCK_M"], tile_width(tiles), tiles["BLOCK_K"], tiles["SPLIT_K"]
    u = shape.stride
    grids = [g.numpy() for g in phase_grids(x.double().permute(0, 2, 3, 1).contiguous().view(N, H, W, C), u)]
    wp = pack_weights(w.double(), shape, packing(tiles)).numpy()     # F_pad, K_pad
    box = pick_box(N, P, Q, bm)
    grid = KERNEL.tile_grid(shape, tiles)
    dh, ph, dw, pw, c0 = step_phases(shape, bk)
    per_split = split_len(len(dh), split, tiles["SPLIT_ADD"])
    out = np.zeros((split, N, P, Q, Fo))
    writes = np.zeros((split, N, P, Q, Fo), dtype=int)
    for work in range(grid.num_pids * split):
        sp, tile = divmod(work, grid.num_pids)
        pid_m, pid_n = divmod(int(table[tile]), grid.num_pid_n)
        n, p, q = (a[0] for a in box_pixels(t, box, np.array([pid_m])))
        f = pid_n * bn + np.arange(bn)
        acc = np.zeros((bm, bn))
        for k in range(sp * per_split, len(dh) if sp == split - 1 else (sp + 1) * per_split):
            g = grids[ph[k] * u + pw[k]]         # N, rows of the phase, columns of the phase, C
            ih, iw, c = p + dh[k], q + dw[k], c0[k] + np.arange(bk)
            inside = (n < N) & (ih >= 0) & (ih < g.shape[1]) & (iw >= 0) & (iw < g.shape[2])
            a = np.zeros((bm, bk))
            a[np.ix_(inside, c < C)] = g[n[inside], ih[inside], iw[inside]][:, c[c < C]]
            acc += a @ wp[f, k * bk:(k + 1) * bk].T
        rows, cols = (n < N) & (p < P) & (q < Q), f < Fo
        idx = (sp, n[rows][:, None], p[rows][:, None], q[rows][:, None], f[cols][None, :])
        out[idx] = acc[np.ix_(rows, cols)]
        writes[idx] += 1
    assert (writes == 1).all(), "every output element written exactly once per split"
    return out.sum(axis=0).reshape(shape.N, shape.P, shape.Q, Fo)


ORACLE_CASES = {
    # 3x3 padded, C past one BLOCK_K (the second block half zeros), boxes over images and
    # past the image edge, F not a multiple of BLOCK_N
    "pad_3x3": (ConvShape("a", N=3, C=72, H=9, W=7, F=40, R=3, S=3, stride=1, padding=1), {}),
    # unpadded: P, Q smaller than H, W; 128-row boxes; split-K of 3 steps into 2 and into 4
    "valid_3x3_split": (ConvShape("b", N=2, C=16, H=10, W=12, F=24, R=3, S=3, stride=1, padding=0),
                        {"BLOCK_M": 128, "SPLIT_K": 2}),
    "split4": (ConvShape("b", N=2, C=16, H=10, W=12, F=24, R=3, S=3, stride=1, padding=0), {"SPLIT_K": 4}),
    # two splits that add in the kernel: 9 steps as 3 + 6 (SPLIT_ADD 2: the last 2 or 3 longer)
    "split_add": (ConvShape("b", N=2, C=16, H=10, W=12, F=24, R=3, S=3, stride=1, padding=1),
                  {"SPLIT_K": 2, "SPLIT_ADD": 2, "TMA_STORE": 0}),
    # 1x1 and a 5x5 with padding 2 (taps far outside the image), a wide image
    "one_by_one": (ConvShape("c", N=5, C=8, H=3, W=5, F=16, R=1, S=1, stride=1, padding=0), {"BLOCK_N": 16}),
    # pointwise 7 x 7 in 128-pixel runs over images (one row: 196 pixels, the last box past the end)
    "pointwise_7x7": (ConvShape("c7", N=4, C=16, H=7, W=7, F=16, R=1, S=1, stride=1, padding=0),
                      {"BLOCK_M": 128, "BLOCK_N": 16}),
    "five_by_five": (ConvShape("d", N=1, C=8, H=6, W=37, F=8, R=5, S=5, stride=1, padding=2), {"BLOCK_N": 16}),
    # stride 2 through the phase grids: 3x3 padded (taps at phases 1, 0, 1), two channel
    # blocks per phase, boxes past the edge; a 1x1 downsample; a 7x7 stem-like layer
    # (padding 3: offsets down to -2 whole strides); odd H and W (phase
    # grids of unequal sizes) with C not a multiple of BLOCK_K, unpadded as Inception's
    # 35 x 35 reduction
    "stride2_odd": (ConvShape("i", N=2, C=40, H=9, W=7, F=24, R=3, S=3, stride=2, padding=0), {}),
    "stride2_odd_pad": (ConvShape("j", N=3, C=72, H=11, W=9, F=16, R=3, S=3, stride=2, padding=1), {"BLOCK_N": 16}),
    # 32-channel K steps: C = 96 in three whole blocks (no zero half block), and C = 40 in two
    "bk32_stride2_odd": (ConvShape("k", N=2, C=96, H=9, W=7, F=24, R=3, S=3, stride=2, padding=0), {"BLOCK_K": 32}),
    "bk32_pad": (ConvShape("a", N=3, C=40, H=9, W=7, F=40, R=3, S=3, stride=1, padding=1), {"BLOCK_K": 32}),

    # tiles of two filter blocks (BLOCK_N2): 32 + 16 filters over F = 40 (one tile column, past
    # F), 64 + 32 over F = 100 (the second column's second block wholly past F)
    "two_blocks": (ConvShape("a", N=3, C=72, H=9, W=7, F=40, R=3, S=3, stride=1, padding=1),
                   {"BLOCK_N": 32, "BLOCK_N2": 16}),
    "two_blocks_1x1": (ConvShape("c", N=5, C=8, H=3, W=5, F=100, R=1, S=1, stride=1, padding=0),
                       {"BLOCK_N": 64, "BLOCK_N2": 32}),

    # 256-row tiles: a 3x3 in 16 x 16 boxes past the image's edges; a pointwise run past the pixels
    "rows256_3x3": (ConvShape("a", N=2, C=40, H=18, W=20, F=40, R=3, S=3, stride=1, padding=1), {"BLOCK_M": 256}),
    "rows256_1x1": (ConvShape("c", N=3, C=24, H=11, W=9, F=48, R=1, S=1, stride=1, padding=0),
                    {"BLOCK_M": 256, "BLOCK_N": 32}),

    "stride2_3x3": (ConvShape("e", N=3, C=128, H=10, W=14, F=24, R=3, S=3, stride=2, padding=1), {}),
    "stride2_1x1": (ConvShape("f", N=4, C=64, H=6, W=8, F=16, R=1, S=1, stride=2, padding=0), {"BLOCK_N": 16}),
    "stride2_7x7": (ConvShape("g", N=1, C=64, H=16, W=12, F=8, R=7, S=7, stride=2, padding=3),
                    {"BLOCK_N": 16, "SPLIT_K": 2}),
}


@pytest.mark.parametrize("swizzle", ["identity", "xcd_grouped", "colmajor"])
@pytest.mark.parametrize("case", sorted(ORACLE_CASES))
def test_index_math_matches_conv2d(case, swizzle):
    shape, extra = ORACLE_CASES[case]
    tiles = KERNEL.check_tiles({**TILES, **extra})
    g = torch.Generator().manual_seed(0)
    x = torch.randn(shape.N, shape.C, shape.H, shape.W, generator=g)
    w = torch.randn(shape.F, shape.C, shape.R, shape.S, generator=g)
    grid = KERNEL.tile_grid(shape, tiles)
    table = remap_table(SWIZZLES[swizzle], grid.num_pid_m, grid.num_pid_n, num_xcds=8, group_size=2)
    ours = _oracle(x, w, shape, tiles, table)
    ref = F.conv2d(x.double(), w.double(), stride=shape.stride, padding=shape.padding).permute(0, 2, 3, 1).numpy()
    assert np.abs(ours - ref).max() <= 1e-9 * np.abs(ref).max()


# -----------------------------------------------------------
# The box rule.

@pytest.mark.parametrize("shape, box, num_pid_m", [
    # pointwise: runs of BLOCK_M consecutive pixels over images (7 x 7: 13 boxes for 1568
    # pixels, where 32 x 4 x 1 boxes over images would take 14 and compute 1792 rows)
    (ConvShape("l20", N=32, C=512, H=7, W=7, F=2048, R=1, S=1), (1, 1, 128), 13),
    (ConvShape("l08", N=32, C=128, H=28, W=28, F=512, R=1, S=1), (1, 1, 128), 196),
    (ConvShape("l08", N=32, C=128, H=28, W=28, F=512, R=1, S=1), (1, 1, 256), 98),
    # not pointwise: a 3x3, a padded 1x1 and a strided 1x1 keep boxes over images
    (ConvShape("l23", N=32, C=512, H=7, W=7, F=512, R=3, S=3, padding=1), (16, 1, 8), 14),
    (ConvShape("p1", N=32, C=64, H=7, W=7, F=64, R=1, S=1, padding=1), (32, 2, 2), 25),
    (ConvShape("l09", N=32, C=256, H=56, W=56, F=512, R=1, S=1, stride=2), (8, 4, 4), 196),
])
def test_pointwise_layers_tile_as_one_row(shape, box, num_pid_m):
    tiles = {**TILES, "BLOCK_M": box[0] * box[1] * box[2]}
    assert KERNEL.box(shape, tiles) == box
    assert KERNEL.tile_grid(shape, tiles).num_pid_m == num_pid_m
    assert tiled_shape(shape).N * tiled_shape(shape).P * tiled_shape(shape).Q == shape.N * shape.P * shape.Q

@pytest.mark.parametrize("n, p, q, block_m, box", [
    (32, 56, 56, 128, (2, 8, 8)),      # no waste
    (32, 14, 14, 128, (32, 2, 2)),     # no waste (a 16 x 8 rectangle wastes 24 %)
    (32, 7, 7, 128, (16, 1, 8)),       # 87.5 % of rows used
    (1, 9, 7, 64, (1, 8, 8)),          # one image: rectangles only
])
def test_pick_box_known_layers(n, p, q, block_m, box):
    assert pick_box(n, p, q, block_m) == box


@pytest.mark.parametrize("n, p, q, block_m", [(3, 9, 7, 64), (32, 28, 28, 128), (5, 17, 3, 128), (2, 300, 1, 64)])
def test_pick_box_computes_the_fewest_rows(n, p, q, block_m):
    """Against every power-of-two split of BLOCK_M with sides <= 256 and BOX_N <= N."""
    def rows(b):
        return triton.cdiv(n, b[0]) * triton.cdiv(p, b[1]) * triton.cdiv(q, b[2]) * block_m

    pow2 = [1 << i for i in range(8)]
    boxes = [(a, b, block_m // (a * b)) for a, b in itertools.product(pow2, pow2)
             if a * b <= block_m and a <= n and block_m // (a * b) <= 256]
    box = pick_box(n, p, q, block_m)
    assert box[0] * box[1] * box[2] == block_m and box[0] <= n
    assert rows(box) == min(rows(b) for b in boxes)
    # a padded 3x3 (P = H, Q = W): a pointwise layer would tile as one row (tiled_shape)
    assert KERNEL.tile_grid(ConvShape("s", N=n, C=8, H=p, W=q, F=8, R=3, S=3, padding=1), {**TILES, "BLOCK_M": block_m}
                            ).num_pid_m * block_m == rows(box)


# -----------------------------------------------------------
# The config space.

STRIDE_1 = [s for s in _preset_layers("resnet", "holdout") if s.stride == 1 and s.C % 8 == 0 and s.F % 8 == 0]


def test_configs_are_valid_tiles():
    for cfg in CONFIGS:
        assert KERNEL.check_tiles(cfg.tiles_dict) == cfg.tiles_dict
        assert cfg.num_warps in (4, 8) and cfg.num_stages >= 2
    assert len(set(CONFIGS)) == len(CONFIGS) == 61


@pytest.mark.parametrize("shape", STRIDE_1, ids=lambda s: s.name)
def test_space_fits_shared_memory(shape):
    space = igemm_ws_space(shape, H100)
    assert space, shape
    steps = len(step_taps(shape, 64)[0])
    for cfg in space:
        tiles = cfg.tiles_dict
        assert smem_bytes(tiles, cfg.num_stages) <= HOPPER_SMEM_BYTES, cfg.label
        per = split_len(steps, tiles["SPLIT_K"], tiles["SPLIT_ADD"])
        assert per >= 1 and (tiles["SPLIT_K"] - 1) * per < steps, cfg.label
    # All 33 fit (the largest: [8], 3 x 48 KB ring + a 64 KB output tile; [21], 5 x 32 KB + a
    # 64 KB fp32 tile); only split-K configs go, where a split would get no K step (1x1 with
    # C = 64: one step; 3x3 with C = 64: nine steps, no four slices of three; SPLIT_ADD 4 over
    # 4 steps: none for the first); and PAD_C where C is whole channel blocks already.
    for cfg in CONFIGS:
        split, add = cfg.tiles_dict["SPLIT_K"], cfg.tiles_dict["SPLIT_ADD"]
        fits = (split - 1) * triton.cdiv(steps, split) < steps and (not add or steps - add >= 2)
        useful = not cfg.tiles_dict["PAD_C"] or shape.C % cfg.tiles_dict["BLOCK_K"] != 0
        assert (cfg in space) == (fits and useful), cfg.label


def test_space_empty_where_the_family_cannot_run():
    amd = DeviceTraits("AMD Instinct MI300X", 304, False, "amd")
    l17 = ConvShape("l17", N=32, C=256, H=14, W=14, F=256, R=3, S=3, stride=1, padding=1)
    assert igemm_ws_space(l17, amd) == []
    assert igemm_ws_space(ConvShape("s2", N=32, C=64, H=56, W=56, F=64, R=3, S=3, stride=2, padding=1), H100) != []
    # odd sides and C off BLOCK_K run through the phase grids (Inception's 35 x 35 reduction)
    assert igemm_ws_space(ConvShape("m6a", N=32, C=288, H=35, W=35, F=384, R=3, S=3, stride=2, padding=0), H100) != []
    assert igemm_ws_space(ConvShape("one", N=32, C=64, H=1, W=8, F=64, R=1, S=1, stride=2, padding=0), H100) == []
    assert igemm_ws_space(ConvShape("stem", N=32, C=3, H=224, W=224, F=64, R=7, S=7, stride=2, padding=3),
                          H100) == []


def test_smem_bytes_prunes_a_ring_too_deep():
    tiles = {**TILES, "BLOCK_M": 128, "BLOCK_N": 256}
    assert smem_bytes(tiles, 3) <= HOPPER_SMEM_BYTES < smem_bytes(tiles, 4)
    # plain stores need the layout conversion's scratch: 7 slots of 128 x 128 do not fit
    plain = {**TILES, "BLOCK_M": 128, "BLOCK_N": 128, "TMA_STORE": 0}
    assert smem_bytes(plain, 6) <= HOPPER_SMEM_BYTES < smem_bytes(plain, 7)


# -----------------------------------------------------------
# Refusals.

L17 = ConvShape("l17", N=32, C=256, H=14, W=14, F=256, R=3, S=3, stride=1, padding=1)


@pytest.mark.parametrize("vendor, arch", [("amd", "gfx942"), ("nvidia", "sm_80"), ("nvidia", "sm_100")])
def test_refuses_other_targets(vendor, arch):
    with pytest.raises(ValueError) as exc:
        KERNEL.check_target(None, TILES, vendor, arch)
    assert str(exc.value) == (f"kernel 'igemm_ws' is a Gluon kernel for Hopper (sm_90); on {arch} ({vendor}) "
                              "use kernel=igemm_fast")


@pytest.mark.parametrize("shape, words", [
    (ConvShape("s2", N=2, C=64, H=1, W=8, F=64, R=1, S=1, stride=2, padding=0),
     "stride 2 with H=1, W=8 (a phase grid would be empty; valid: H >= 2 and W >= 2)"),
    (ConvShape("s3", N=2, C=64, H=9, W=9, F=64, R=3, S=3, stride=3, padding=0),
     "stride 3 (four phase grids at most, one kernel argument each; valid: stride 1 or 2)"),
    (ConvShape("c3", N=2, C=3, H=8, W=8, F=64, R=3, S=3, stride=1, padding=1), "C=3 (TMA rows are whole 16 bytes; valid: C % 8 == 0)"),
    (ConvShape("f70", N=2, C=64, H=8, W=8, F=70, R=3, S=3, stride=1, padding=1), "F=70 (the output's rows likewise; valid: F % 8 == 0)"),
    (ConvShape("one", N=2, C=64, H=8, W=8, F=64, R=1, S=1), "SPLIT_K=2 over 1 K steps (a split with none; valid: SPLIT_K <= 1)"),
    (ConvShape("one", N=2, C=192, H=8, W=8, F=64, R=1, S=1), "SPLIT_K=4 over 3 K steps (a split with none; valid: SPLIT_K <= 2)"),
    (ConvShape("one", N=2, C=256, H=8, W=8, F=64, R=1, S=1), "SPLIT_ADD=3 over 4 K steps (the first split would get "
                                                              "none; valid: SPLIT_ADD <= 2)"),
])
def test_refuses_layers_it_cannot_run(shape, words):
    split = int(words[8]) if words.startswith("SPLIT_K=") else 2 if words.startswith("SPLIT_ADD=") else 1
    add = int(words[10]) if words.startswith("SPLIT_ADD=") else 0
    with pytest.raises(ValueError) as exc:
        KERNEL.check_flags(shape, {**TILES, "SPLIT_K": split, "SPLIT_ADD": add, "TMA_STORE": int(not add)},
                           torch.device("meta"))
    line = str(exc.value)
    assert line.startswith(f"kernel 'igemm_ws' cannot run layer {shape.name!r}: ") and words in line
    assert line.endswith("use kernel=igemm_fast") and "\n" not in line


def test_every_layer_dtype_is_one_the_kernel_runs():
    """TMA boxes of 2-byte elements: fp16 and bf16 have layouts; any other dtype a layer
    cannot have (the shape refuses it)."""
    from kernels.igemm_ws import DTYPES

    assert set(DTYPES) == {"float16", "bfloat16"}
    with pytest.raises(ValueError, match="dtype='float32' is invalid; valid dtypes: float16, bfloat16"):
        ConvShape("fp32", N=2, C=64, H=8, W=8, F=64, R=3, S=3, dtype="float32")


def test_refuses_the_cpu_interpreter():
    with pytest.raises(ValueError, match=r"^kernel 'igemm_ws' is a Gluon kernel for Hopper \(sm_90\); on the CPU "
                                         r"\(Triton interpreter, which runs no Gluon\) use kernel=igemm_fast$"):
        KERNEL.check_flags(L17, TILES, torch.device("cpu"))


def test_refuses_other_gluon_apis():
    check_gluon_version("3.6.0")
    check_gluon_version("3.6.1")
    for version in ("3.5.1", "3.9.0", "3.10.0"):
        with pytest.raises(ValueError, match=rf"^kernel 'igemm_ws' is written against the Gluon API of Triton 3\.6; "
                                             rf"Triton {version} is installed .* use kernel=igemm_fast$"):
            check_gluon_version(version)


def test_only_this_triton_is_a_toolchain_refusal_and_it_comes_last(monkeypatch):
    """check_target raises ToolchainError (this machine's Triton, not the target) only once
    the target's and the layer's rules passed: a caller may then take the config as one the
    target launches (harness.tune.per_job.table_job)."""
    from kernels.base import ToolchainError

    monkeypatch.setattr(triton, "__version__", "3.9.0")
    tiles = KERNEL.check_tiles(TILES)
    with pytest.raises(ToolchainError, match=r"Triton 3\.9\.0 is installed"):
        KERNEL.check_target(L17, tiles, "nvidia", "sm_90")
    bad_layer = ConvShape("c3", N=2, C=3, H=8, W=8, F=64, R=3, S=3, stride=1, padding=1)
    for shape, arch in ((bad_layer, "sm_90"), (L17, "gfx942")):
        with pytest.raises(ValueError) as exc:
            KERNEL.check_target(shape, tiles, "amd" if arch.startswith("gfx") else "nvidia", arch)
        assert not isinstance(exc.value, ToolchainError), exc.value


@pytest.mark.parametrize("tiles, words", [
    ({"BLOCK_K": 16}, "tile BLOCK_K=16 must be 32 or 64"),
    ({"BLOCK_M": 512}, "tile BLOCK_M=512 must be 64, 128 or 256"),
    ({"MAXNREG": 81}, "tile MAXNREG=81 must be 0 (off) or a multiple of 8 from 24 to 256"),
    ({"SPLIT_K": 2, "TMA_STORE": 0}, "SPLIT_K=2 needs TMA_STORE=1"),
    ({"SPLIT_ADD": 9}, "tile SPLIT_ADD=9 must be 0 (off) or 1 to 8 (K steps)"),
    ({"SPLIT_K": 4, "SPLIT_ADD": 2, "TMA_STORE": 0}, "SPLIT_ADD=2 needs SPLIT_K=2 and TMA_STORE=0 (got SPLIT_K=4, "
                                                     "TMA_STORE=0)"),
    ({"SPLIT_K": 2, "SPLIT_ADD": 2}, "SPLIT_ADD=2 needs SPLIT_K=2 and TMA_STORE=0 (got SPLIT_K=2, TMA_STORE=1)"),
    ({"BLOCK_N2": 24}, "tile BLOCK_N2=24 must be 0 (off) or a power of two, 16 to 64"),
    ({"BLOCK_N2": 32}, "BLOCK_N2=32 needs BLOCK_N2 < BLOCK_N and SPLIT_K=1 (got BLOCK_N=32, SPLIT_K=1)"),
    ({"BLOCK_N": 64, "BLOCK_N2": 32, "SPLIT_K": 2}, "BLOCK_N2=32 needs BLOCK_N2 < BLOCK_N and SPLIT_K=1 "
                                                    "(got BLOCK_N=64, SPLIT_K=2)"),
])
def test_refuses_bad_tiles(tiles, words):
    with pytest.raises(ValueError, match=re.escape(words)):
        KERNEL.check_tiles({**TILES, **tiles})


def test_cli_on_a_cpu_refuses_in_one_line(tmp_path):
    """``python -m harness kernel=igemm_ws shape=tiny`` on a CPU (target auto: the MI300X)."""
    proc = run_cli(["kernel=igemm_ws", "shape=tiny", f"tracking.uri=sqlite:///{tmp_path}/s.db"], tmp_path, cli_env(),
                   timeout=240)
    assert proc.returncode == USER_ERROR_EXIT, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines() == [
        "error: kernel.tiles: kernel 'igemm_ws' is a Gluon kernel for Hopper (sm_90); on gfx942 (amd) "
        "use kernel=igemm_fast (target mi300x)"]
    assert not (tmp_path / "s.db").exists()


# -----------------------------------------------------------
# The address model (profiler=sim).

def test_load_plan_reads_each_box_row_once_per_step():
    """The first tile of a padded 3x3 layer whose boxes tile the image exactly (4 x 16 pixels,
    at the image's corner): the centre tap reads BLOCK_M runs of C channels, tap (0, 0) none
    for the box's first row and first column (the padding, TMA's zeros); the weights BLOCK_N
    runs of BLOCK_K at every step."""
    shape = ConvShape("e", N=2, C=64, H=16, W=16, F=64, R=3, S=3, stride=1, padding=1)
    tiles = {**TILES, "BLOCK_N": 64}
    assert pick_box(shape.N, shape.P, shape.Q, 64) == (1, 4, 16)
    plan = KERNEL.load_plan(shape, tiles)
    assert plan.num_steps == 9 and plan.num_tiles == KERNEL.tile_grid(shape, tiles).num_pids == 8
    x, w = plan.operands
    assert x.bulk and w.bulk
    starts, lengths = x.runs(np.array([0]))
    assert lengths.shape == (1, 9, 64)
    assert (lengths[0, 4] == 64 * 2).all()
    assert (lengths[0, 0] > 0).sum() == 3 * 15
    assert starts[0, 4, 0] == starts[0, 4, 1] - 64 * 2           # row i + 1 is the next pixel
    ws, wl = w.runs(np.array([0]))
    assert (wl == 64 * 2).all() and ws.shape == (1, 9, 64)


def test_load_plan_of_two_filter_blocks_reads_both_as_one_tile():
    """BLOCK_N 64 + BLOCK_N2 32: 96-filter tiles (two over F = 100), each step reading the 96
    packed weight rows of its tile, the second tile from row 96; the tile's stores cover both
    blocks (the 4 filters inside F of the second tile)."""
    shape = ConvShape("c", N=5, C=8, H=3, W=5, F=100, R=1, S=1, stride=1, padding=0)
    tiles = KERNEL.check_tiles({**TILES, "BLOCK_N": 64, "BLOCK_N2": 32})
    grid = KERNEL.tile_grid(shape, tiles)
    assert grid.num_pid_n == 2
    plan = KERNEL.load_plan(shape, tiles)
    _, w = plan.operands
    starts, lengths = w.runs(np.array([0, 1]))
    assert starts.shape == (2, plan.num_steps, 96)
    row_bytes = 64 * 2                                          # K_pad = one BLOCK_K of 64
    assert starts[1, 0, 0] - starts[0, 0, 0] == 96 * row_bytes
    assert KERNEL.buffer_bases(shape, tiles)["y"] - KERNEL.buffer_bases(shape, tiles)["w"] >= 192 * row_bytes
    _, yl = KERNEL.store_plan(shape, tiles).parts[0][0].runs(np.array([1]))       # tile (0, 1)
    assert (yl[yl > 0] == 4 * 2).all()


def test_pad_c_copies_the_input_then_reads_whole_channel_blocks():
    """PAD_C on a C = 24 layer with 32-channel steps: a copy pass first (24 channels per pixel
    from the given input, into whole rows of 32, zeros included), then the conv, whose centre tap reads a whole
    32-channel run of the padded copy for every pixel; without PAD_C the same tap reads 24."""
    shape = ConvShape("c24", N=2, C=24, H=16, W=16, F=32, R=3, S=3, stride=1, padding=1)
    tiles = KERNEL.check_tiles({**TILES, "BLOCK_K": 32, "PAD_C": 1})
    plans = KERNEL.launch_plans(shape, tiles)
    assert [p.name for p in plans] == ["pad", "conv"] and not plans[0].swizzled
    bases = KERNEL.buffer_bases(shape, tiles)
    assert list(bases)[:2] == ["x_src", "x"] and bases["x"] - bases["x_src"] >= 2 * 16 * 16 * 24 * 2
    (src,) = plans[0].loads.operands
    starts, lengths = src.runs(np.array([0]))
    assert (lengths == 24 * 2).all() and (np.diff(starts[0, 0]) == 24 * 2).all()
    (dst, writes), = plans[0].epilogue.parts
    starts, lengths = dst.runs(np.array([0]))
    assert writes and (lengths == 32 * 2).all() and (np.diff(starts[0, 0]) == 32 * 2).all()
    centre = 4                                                   # tap (1, 1), the only channel block
    x, _ = plans[1].loads.operands
    _, lengths = x.runs(np.array([0]))
    assert (lengths[0, centre] == 32 * 2).all()
    _, lengths = KERNEL.load_plan(shape, {**tiles, "PAD_C": 0}).operands[0].runs(np.array([0]))
    assert (lengths[0, centre] == 24 * 2).all()
    assert KERNEL.validation_scope(tiles) == "igemm_ws (input channels padded)"
    assert KERNEL.validation_scope({**tiles, "BLOCK_M": 256}) == "igemm_ws (input channels padded, 256-row tiles)"
    assert KERNEL.validation_scope({**tiles, "PAD_C": 0}) == "igemm_ws"
    assert [c for c in igemm_ws_space(shape, H100) if c.tiles_dict["PAD_C"]]
    assert not [c for c in igemm_ws_space(dataclasses.replace(shape, C=32), H100) if c.tiles_dict["PAD_C"]]


def test_launch_plans_split_and_persistent():
    shape = ConvShape("e", N=2, C=64, H=16, W=16, F=64, R=3, S=3, stride=1, padding=1)
    plans = KERNEL.launch_plans(shape, {**TILES, "SPLIT_K": 2, "PERSISTENT": 1})
    assert [p.name for p in plans] == ["conv", "split_k_sum"]
    assert plans[0].schedule.splits == 2 and plans[0].schedule.persistent
    assert KERNEL.launch_models(shape, TILES, 128)[0] is not None


def test_launch_plans_split_add_is_one_launch_whose_last_split_is_longer():
    """SPLIT_ADD: no sum pass and no workspace; the simulator's schedule gives split 0
    (9 - 4) // 2 = 2 of the 9 K steps and the last split the other 7, as the kernel does."""
    shape = ConvShape("e", N=2, C=64, H=16, W=16, F=64, R=3, S=3, stride=1, padding=1)
    tiles = {**TILES, "SPLIT_K": 2, "SPLIT_ADD": 4, "TMA_STORE": 0}
    plans = KERNEL.launch_plans(shape, tiles)
    assert [p.name for p in plans] == ["conv"] and "ws" not in KERNEL.buffer_bases(shape, KERNEL.check_tiles(tiles))
    schedule = plans[0].schedule
    assert (schedule.split_steps(0), schedule.split_steps(1)) == (range(0, 2), range(2, 9))
    assert KERNEL.launch_models(shape, tiles, 128)[0] is not None


def test_simulated_split_add_reads_every_k_step_once():
    """On the simulated H100 the conv's reads (hits, misses and merged requests) are the same
    however its K steps are split: without split-K, in halves, and 2 + 7 with SPLIT_ADD."""
    from omegaconf import OmegaConf

    from harness.profilers.sim.job import Remap, simulate_job
    from swizzles import resolve_swizzle
    from tests.compile.test_build import CONF

    target = OmegaConf.to_container(OmegaConf.load(CONF / "target" / "h100.yaml"))
    shape = ConvShape("e", N=8, C=64, H=16, W=16, F=128, R=3, S=3, stride=1, padding=1)
    reads = []
    for extra in ({}, {"SPLIT_K": 2}, {"SPLIT_K": 2, "SPLIT_ADD": 4, "TMA_STORE": 0}):
        r = simulate_job(KERNEL, shape, {**TILES, "BLOCK_M": 128, "BLOCK_N": 64, **extra},
                         Remap(resolve_swizzle("identity", None), 8, 8), target)
        reads.append(r.read_hits + r.read_misses + r.merged_reads)
    assert reads[0] > 0 and reads == [reads[0]] * 3, reads


# -----------------------------------------------------------
# Compiled for sm_90 (Triton 3.6 only: the Gluon API it is written against).

ON_TRITON_36 = tuple(int(v) for v in triton.__version__.split(".")[:2]) in GLUON_VERSIONS


@pytest.mark.skipif(not ON_TRITON_36, reason=f"igemm_ws is written against Triton 3.6's Gluon API; "
                                             f"Triton {triton.__version__} is installed")
@pytest.mark.parametrize("index", range(len(CONFIGS)))
def test_every_config_compiles_with_every_swizzle(compiler, index):
    """Each config on an l23-sized layer (7 x 7: boxes over 16 images) with every built-in
    swizzle and the parametric families: builds for sm_90 through the compile stage (a worker
    process where the tests run the interpreter), with wgmma and TMA instructions and no
    spills, its shared memory what :func:`smem_bytes` counts (barriers aside); with split-K,
    the sum pass too."""
    from harness.job.spec import JobSpec

    cfg = CONFIGS[index]
    shape = ConvShape("l23", N=32, C=512, H=7, W=7, F=512, R=3, S=3, stride=1, padding=1)
    for name in sorted(SWIZZLES) + FAMILY_LABELS:
        spec = JobSpec(kernel="igemm_ws", tiles=cfg.tiles, swizzle=name, num_xcds=8, group_size=4, shape=shape,
                       shape_preset="test", num_warps=cfg.num_warps, num_stages=cfg.num_stages, target="h100", seed=0)
        report = compiler.compile(spec, "sm_90")
        build = report.main
        assert build.name == "igemm_ws_kernel" and build.spills == 0, (name, build)
        assert 0 <= build.shared_bytes - smem_bytes(cfg.tiles_dict, cfg.num_stages) < 1024, (name, build)
        assert build.counts["mma"] > 0 and build.counts["tma_loads"] == 2, (name, build)
        assert build.counts["tma_stores"] == cfg.tiles_dict["TMA_STORE"], (name, build)
        sum_pass = cfg.tiles_dict["SPLIT_K"] > 1 and not cfg.tiles_dict["SPLIT_ADD"]
        assert len(report.kernels) == (2 if sum_pass else 1)


@pytest.mark.skipif(not ON_TRITON_36, reason=f"igemm_ws is written against Triton 3.6's Gluon API; "
                                             f"Triton {triton.__version__} is installed")
def test_a_strided_layer_compiles_with_one_copy_per_phase_grid(compiler):
    """Inception's 35 x 35 stride-2 reduction (odd sides, C = 288 off BLOCK_K): four phase
    grids, so four predicated input copies beside the weights' one."""
    from harness.job.spec import JobSpec

    cfg = CONFIGS[2]
    shape = ConvShape("incv3m6a", N=32, C=288, H=35, W=35, F=384, R=3, S=3, stride=2, padding=0)
    spec = JobSpec(kernel="igemm_ws", tiles=cfg.tiles, swizzle="xcd", num_xcds=8, group_size=4, shape=shape,
                   shape_preset="test", num_warps=cfg.num_warps, num_stages=cfg.num_stages, target="h100", seed=0)
    build = compiler.compile(spec, "sm_90").main
    assert build.spills == 0 and build.counts["tma_loads"] == 5, build


@gluon.jit
def _copy_two(descs, out):
    """Copies one box of ``descs[0]`` and ``descs[1]`` into shared memory (a signature probe)."""
    a = descs[0]
    buf = gl.allocate_shared_memory(a.dtype, a.block_type.shape, a.layout)
    bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    mbarrier.init(bar, count=1)
    mbarrier.expect(bar, a.block_type.nbytes)
    tma.async_copy_global_to_shared(descs[1], [0, 0], bar, buf)
    mbarrier.wait(bar, 0)


@pytest.mark.skipif(not ON_TRITON_36, reason=f"igemm_ws is written against Triton 3.6's Gluon API; "
                                             f"Triton {triton.__version__} is installed")
def test_compile_stage_refuses_what_triton_cannot_launch():
    """Descriptors inside a tuple argument compile for sm_90 but Triton 3.6's launcher cannot
    take them (every launch fails on the GPU): the compile stage says so before any GPU time."""
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

    from harness.compile.build import CompileFailed, Launch, compile_launch
    from harness.hardware.arch import arch_limits
    from kernels.igemm_ws import _smem_layout

    x = torch.empty((64, 64), dtype=torch.float16, device="meta")
    desc = TensorDescriptor.from_tensor(x, [64, 64], _smem_layout((64, 64), "float16"))
    with pytest.raises(CompileFailed, match="cannot build its launcher"):
        compile_launch(Launch(_copy_two, ((desc, desc), x), {"num_warps": 4}), arch_limits("sm_90"))


def test_the_gpu_variants_are_runnable_configs():
    """tests/test_gpu_families.py's igemm_ws variants pass every check short of the GPU, and the
    persistent one makes programs walk more than one work item on a 132-SM GPU."""
    from tests.test_gpu_families import WS_VARIANTS

    for tiles, warps, stages, shape in WS_VARIANTS.values():
        checked = KERNEL.check_tiles(tiles)
        KERNEL.check_flags(shape, checked, torch.device("meta"))
        assert warps in (4, 8) and smem_bytes(checked, stages) <= HOPPER_SMEM_BYTES
    tiles, _, _, shape = WS_VARIANTS["persistent_split"]
    work = KERNEL.tile_grid(shape, tiles).num_pids * tiles["SPLIT_K"]
    assert work > KERNEL.num_programs(shape, tiles, torch.device("meta")) == 132 * 2
