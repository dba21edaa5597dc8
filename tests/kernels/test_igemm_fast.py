"""igemm_fast under the interpreter: every variant and every swizzle on odd grids, through the
same two gates as a job (permutation of the grid the kernel walks, output against conv2d)."""
import dataclasses
import itertools

import pytest
import torch

from harness.measure.correctness import compare, make_operands, reference
from kernels import KERNELS
from kernels.base import LaunchConfig, SwizzleBinding
from kernels.igemm_fast import check_tma_supported, pack_weights
from kernels.problem import ConvShape
from swizzles import SWIZZLES
from swizzles.permutation import check_permutation, remap_table

KERNEL = KERNELS["igemm_fast"]
BASE = {"BLOCK_M": 16, "BLOCK_N": 16, "BLOCK_K": 16, "SPLIT_K": 1, "PACK_K": 0, "NCHW_IN": 0, "PERSISTENT": 0, "TMA": 0, "TMA_STORE": 0, "FOLD": 0, "SPLIT_SUM": 0}
# Each variant on a shape that exercises it; every grid is odd (not a multiple of 8 or of
# the 3 persistent programs' stride pattern).
VARIANTS = {
    # 3x3 with padding, C and F not multiples of BLOCK: grid 5 x 2
    "tap": (ConvShape("odd3", N=2, C=20, H=6, W=6, F=20, R=3, S=3, stride=1, padding=1), {}),
    # a stem-like layer: 3 channels, 7x7, stride 2: grid 5 x 2 (packed K order)
    "packed": (ConvShape("stem", N=2, C=3, H=11, W=11, F=20, R=7, S=7, stride=2, padding=3), {"PACK_K": 1}),
    # the same with each filter row's (s, c) run as one contiguous load (row-packed K order)
    "rows": (ConvShape("stem", N=2, C=3, H=11, W=11, F=20, R=7, S=7, stride=2, padding=3), {"PACK_K": 2}),
    # split-K over a persistent grid: grid 5 x 2, 2 slices, 3 programs
    "split_persistent": (ConvShape("odd3", N=2, C=20, H=6, W=6, F=20, R=3, S=3, stride=1, padding=1),
                         {"SPLIT_K": 2, "PERSISTENT": 1}),
    # 1x1 stride 1: the input is the M x C matrix, read through a tensor descriptor: grid 7 x 2
    "tma_matrix": (ConvShape("mat", N=2, C=24, H=7, W=7, F=20, R=1, S=1), {"TMA": 1}),
    # 1x1 stride 1 read from NCHW in place (tiles never straddle images): grid 5 x cdiv(25, 16)
    # = 10 x 2; then with split-K over a persistent grid
    "nchw_in": (ConvShape("nchw", N=5, C=24, H=5, W=5, F=20, R=1, S=1), {"NCHW_IN": 1, "TMA": 1}),
    "nchw_in_split": (ConvShape("nchw", N=5, C=40, H=5, W=5, F=20, R=1, S=1),
                      {"NCHW_IN": 1, "SPLIT_K": 2, "PERSISTENT": 1}),
    # split-K whose last split to arrive adds the partials: one program per work item, then
    # on a persistent grid (3 programs walk 10 tiles x 4 splits)
    "split_sum": (ConvShape("odd3", N=2, C=20, H=6, W=6, F=20, R=3, S=3, stride=1, padding=1),
                  {"SPLIT_K": 2, "SPLIT_SUM": 1}),
    "split_sum_persistent": (ConvShape("odd3", N=2, C=40, H=6, W=6, F=20, R=3, S=3, stride=1, padding=1),
                             {"SPLIT_K": 4, "SPLIT_SUM": 1, "PERSISTENT": 1}),
    # tensor descriptor for the weights of a strided 1x1, packed order: grid 5 x 2
    "tma_packed_s2": (ConvShape("s2", N=3, C=8, H=9, W=9, F=20, R=1, S=1, stride=2), {"TMA": 1, "PACK_K": 1}),
    # the output through a tensor descriptor (rows past M and filters past F clipped): grid
    # 5 x 2; then on a persistent grid
    "tma_store": (ConvShape("odd3", N=2, C=20, H=6, W=6, F=24, R=3, S=3, stride=1, padding=1), {"TMA_STORE": 1}),
    "tma_store_persistent": (ConvShape("mat", N=2, C=24, H=7, W=7, F=24, R=1, S=1),
                             {"TMA": 1, "TMA_STORE": 1, "PERSISTENT": 1}),
    # the stem folded: 3 channels x 2 x 2 phases = 12 (padded to 16), 4x4 taps, stride 1: grid
    # 5 x 2, in tap order and in row order (one 64-column run per filter row)
    "fold": (ConvShape("stem", N=2, C=3, H=11, W=11, F=20, R=7, S=7, stride=2, padding=3), {"FOLD": 1}),
    "fold_rows": (ConvShape("stem", N=2, C=3, H=11, W=11, F=20, R=7, S=7, stride=2, padding=3),
                  {"FOLD": 1, "PACK_K": 2}),
    # 3x3 stride 2: 2x2 taps, the second row and column of which are half zeros; 5 channels
    # x 4 phases = 20 (padded to 24): grid 5 x 2
    "fold_3x3": (ConvShape("s2", N=2, C=5, H=11, W=12, F=20, R=3, S=3, stride=2, padding=1), {"FOLD": 1}),
    # a 3x3 stride-3 layer folds into a 1x1 over 3 channels x 9 phases = 27 (padded to 32)
    # channels, here read through a tensor descriptor: grid 5 x 2
    "fold_s3": (ConvShape("s3", N=2, C=3, H=17, W=16, F=20, R=3, S=3, stride=3, padding=1), {"FOLD": 1, "TMA": 1}),
    # output tiles as 2 x 8 rectangles of pixels, the input of each tap one 4-D box through a
    # tensor descriptor (negative and past-the-edge coordinates read zeros; C = 24: the second
    # channel block half past C): 9 x 7 output, rectangles past both edges, grid 5 x 2; then
    # split-K over a persistent grid
    "box": (ConvShape("box", N=1, C=24, H=9, W=7, F=20, R=3, S=3, stride=1, padding=1), {"TMA": 1, "BOX_W": 8}),
    "box_split_persistent": (ConvShape("box", N=1, C=40, H=9, W=7, F=20, R=3, S=3, stride=1, padding=1),
                             {"TMA": 1, "BOX_W": 8, "SPLIT_K": 2, "PERSISTENT": 1}),
}


def _run(shape, tiles, swizzle, num_xcds=8, group_size=2, dtype_shape=None):
    ops = make_operands(shape, False, seed=3, device="cpu")
    run, out = KERNEL.bind(ops, shape, tiles, SwizzleBinding(SWIZZLES[swizzle], num_xcds, group_size),
                           LaunchConfig(4, 3))
    run()
    return compare(KERNEL.output_as_nchw(out), reference(ops, shape), shape.dtype)


#: A kernel sees a swizzle only as a permutation of its program ids, so a variant that decodes
#: one permutation scrambling both grid axes (xcd_grouped) right decodes any; the formulas
#: themselves are checked against their definitions in tests/swizzles.  So every variant runs
#: under the identity and xcd_grouped, and every other swizzle under two variants (in turn),
#: not the full product (19 x 11 interpreted launches, 80 s of the suite).
SCRAMBLE = ("identity", "xcd_grouped")
CASES = ([(variant, swizzle) for variant in sorted(VARIANTS) for swizzle in SCRAMBLE]
         + [(variant, swizzle) for swizzle, variant in zip(
             sorted(set(SWIZZLES) - set(SCRAMBLE)) * 2, itertools.cycle(sorted(VARIANTS)))])


def test_cases_cover_every_variant_and_every_swizzle():
    assert {v for v, _ in CASES} == set(VARIANTS) and {s for _, s in CASES} == set(SWIZZLES)
    assert all(sum(s == name for _, s in CASES) >= 2 for name in SWIZZLES)


@pytest.mark.parametrize("variant, swizzle", CASES)
def test_every_variant_every_swizzle(variant, swizzle):
    shape, flags = VARIANTS[variant]
    tiles = {**BASE, **flags}
    grid = KERNEL.tile_grid(shape, tiles)
    assert grid.num_pids % 8 and grid.num_pids % 3, "grids are meant to be odd"
    table = remap_table(SWIZZLES[swizzle], grid.num_pid_m, grid.num_pid_n, 8, 2)
    verdict = check_permutation(table)
    if not verdict.ok:
        # The gate stops it before any launch; seed formulas are the ones expected here.
        assert swizzle.startswith("seed_"), verdict.reason
        assert verdict.reason.startswith(f"not a permutation of {grid.num_pids} pids")
        return
    check = _run(shape, tiles, swizzle)
    assert check.ok, f"{variant}/{swizzle}: {check.reason}"


def test_seed_swizzles_fail_the_gate_somewhere():
    """At least one seed formula is not a permutation of the odd grids above: the test
    above really exercises the rejection branch."""
    shape, flags = VARIANTS["tap"]
    grid = KERNEL.tile_grid(shape, {**BASE, **flags})
    rejected = [s for s in SWIZZLES if s.startswith("seed_")
                and not check_permutation(remap_table(SWIZZLES[s], grid.num_pid_m, grid.num_pid_n, 8, 2)).ok]
    assert rejected


def test_bf16_is_verified():
    shape, flags = VARIANTS["packed"]
    assert _run(dataclasses.replace(shape, dtype="bfloat16"), {**BASE, **flags}, "grouped").ok


def test_tile_grid_is_what_the_swizzle_sees():
    """Split-K and persistence change the launch, not the tile grid: the permutation gate
    checks num_pid_m x num_pid_n tiles, which every work item's remap indexes."""
    shape, _ = VARIANTS["tap"]
    plain = KERNEL.tile_grid(shape, BASE)
    assert plain == KERNEL.tile_grid(shape, {**BASE, "SPLIT_K": 4, "PERSISTENT": 1})
    assert (plain.num_pid_m, plain.num_pid_n) == (5, 2)   # cdiv(2*6*6, 16), cdiv(20, 16)
    cpu = torch.device("cpu")
    assert KERNEL.num_programs(shape, BASE, cpu) == 10
    assert KERNEL.num_programs(shape, {**BASE, "SPLIT_K": 2, "PERSISTENT": 1}, cpu) == 3


def test_nchw_in_needs_a_matrix_layer():
    shape, _ = VARIANTS["tap"]
    with pytest.raises(ValueError, match="NCHW_IN=1 needs a 1x1, stride-1, unpadded layer"):
        KERNEL.tile_grid(shape, {**BASE, "NCHW_IN": 1})
    nchw, _ = VARIANTS["nchw_in"]
    assert KERNEL.tile_grid(nchw, {**BASE, "NCHW_IN": 1}).num_pid_m == 5 * 2   # per image: cdiv(25, 16)
    assert KERNEL.tile_grid(nchw, BASE).num_pid_m == 8                          # cdiv(125, 16)


def test_input_copy_is_inside_the_timed_call():
    """The NCHW -> NHWC copy is part of run(): changing the input after bind changes the output."""
    shape, _ = VARIANTS["tap"]
    ops = make_operands(shape, False, seed=1, device="cpu")
    run, out = KERNEL.bind(ops, shape, BASE, SwizzleBinding(SWIZZLES["identity"], 8, 1), LaunchConfig())
    ops.x.copy_(make_operands(shape, False, seed=2, device="cpu").x)
    run()
    assert compare(KERNEL.output_as_nchw(out), reference(ops, shape), shape.dtype).ok


def test_packed_weights_layout():
    shape = ConvShape("w", N=1, C=3, H=5, W=5, F=5, R=2, S=2)
    w = torch.randn(5, 3, 2, 2)
    tap = pack_weights(w, shape, {**BASE, "BLOCK_K": 16})
    assert tap.shape == (16, 2 * 2 * 16)                       # F padded to BLOCK_N, C to BLOCK_K per tap
    assert torch.equal(tap[:5].view(5, 2, 2, 16)[..., :3], w.permute(0, 2, 3, 1))
    assert not tap[:5].view(5, 2, 2, 16)[..., 3:].any() and not tap[5:].any()
    packed = pack_weights(w, shape, {**BASE, "BLOCK_K": 16, "PACK_K": 1})
    assert packed.shape == (16, 16)                            # 12 = R*S*C columns padded to 16
    assert torch.equal(packed[:5, :12], w.permute(0, 2, 3, 1).reshape(5, 12))
    rows = pack_weights(w, shape, {**BASE, "BLOCK_K": 16, "PACK_K": 2})
    assert rows.shape == (16, 2 * 16)                          # per filter row: S*C = 6 columns padded to 16
    assert torch.equal(rows[:5].view(5, 2, 16)[..., :6], w.permute(0, 2, 3, 1).reshape(5, 2, 6))
    assert not rows[:5].view(5, 2, 16)[..., 6:].any()


@pytest.mark.parametrize("bad, message", [
    ({"BLOCK_M": 8}, "BLOCK_M=8 must be a power of two >= 16"),
    ({"SPLIT_K": 3}, "SPLIT_K=3 must be a power of two >= 1"),
    ({"TMA": 2}, "TMA=2 must be 0 or 1"),
    ({"PACK_K": 3}, r"PACK_K=3 must be 0 \(tap order\), 1 \(packed\) or 2 \(rows\)"),
])
def test_check_tiles_names_the_bad_entry(bad, message):
    with pytest.raises(ValueError, match=message):
        KERNEL.check_tiles({**BASE, **bad})


def test_tma_fails_clearly_before_hopper(monkeypatch):
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (8, 0))
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "NVIDIA A100")
    monkeypatch.setattr(torch.version, "hip", None)
    with pytest.raises(ValueError, match=r"TMA=1 needs compute capability >= 9.0 \(Hopper\); NVIDIA A100 is 8.0"):
        check_tma_supported(torch.device("cuda"))
    check_tma_supported(torch.device("cpu"))   # the interpreter emulates descriptors


def test_sim_models_every_schedule():
    """Every schedule has an address model: the launches of the timed run, in order."""
    shape, _ = VARIANTS["tap"]
    strided = ConvShape("st", N=1, C=3, H=8, W=8, F=16, R=3, S=3, stride=2, padding=1)

    def launches(s, **flags):
        return [(p.name, p.schedule.splits, p.schedule.persistent, p.profiled)
                for p in KERNEL.launch_plans(s, {**BASE, **flags})]

    assert launches(shape, PERSISTENT=1) == [("conv", 1, True, True)]
    assert launches(shape, SPLIT_K=2) == [("conv", 2, False, True), ("split_k_sum", 1, False, False)]
    assert launches(shape, SPLIT_K=2, SPLIT_SUM=1) == [("conv", 2, False, True)]
    assert launches(strided, FOLD=1) == [("fold", 1, False, False), ("conv", 1, False, True)]


def test_flags_say_what_they_need():
    """TMA_STORE and FOLD refuse, in one sentence naming the value, what they cannot do."""
    cpu = torch.device("cpu")
    tap, _ = VARIANTS["tap"]
    with pytest.raises(ValueError, match=r"TMA_STORE=1 needs .* got F=20"):
        KERNEL.check_flags(tap, {**BASE, "TMA_STORE": 1}, cpu)
    store, _ = VARIANTS["tma_store"]
    with pytest.raises(ValueError, match=r"got SPLIT_K=2"):
        KERNEL.check_flags(store, {**BASE, "TMA_STORE": 1, "SPLIT_K": 2}, cpu)
    with pytest.raises(ValueError, match=r"FOLD=1 folds a stride > 1 .* 'odd3' has stride 1"):
        KERNEL.check_flags(tap, {**BASE, "FOLD": 1}, cpu)
    KERNEL.check_flags(store, {**BASE, "TMA_STORE": 1}, cpu)      # what it can do passes
    strided, _ = VARIANTS["fold_3x3"]
    with pytest.raises(ValueError, match=r"BOX_W=8 needs a stride-1 layer.* got stride 2; TMA=0"):
        KERNEL.check_flags(strided, {**BASE, "BOX_W": 8}, cpu)
    with pytest.raises(ValueError, match=r"tile BOX_W=32 must be 0 \(off\) or a power of two <= BLOCK_M"):
        KERNEL.check_tiles({**BASE, "BOX_W": 32})


def test_folded_layer_is_the_same_conv():
    """The fold's arithmetic on its own: conv2d of the folded input with the folded weights
    (stride 1, no padding) is the strided layer's output, in float64."""
    from kernels.igemm_fast import fold_weights, folded

    for shape in (VARIANTS["fold"][0], VARIANTS["fold_3x3"][0], VARIANTS["fold_s3"][0]):
        x = torch.randn(shape.N, shape.C, shape.H, shape.W, dtype=torch.float64)
        w = torch.randn(shape.F, shape.C, shape.R, shape.S, dtype=torch.float64)
        fold, st = folded(shape), shape.stride
        padded = torch.nn.functional.pad(x, (shape.padding,) * 4)
        grown = padded.new_zeros(shape.N, shape.C, fold.H * st, fold.W * st)
        h, w_ = min(grown.shape[2], padded.shape[2]), min(grown.shape[3], padded.shape[3])
        grown[:, :, :h, :w_] = padded[:, :, :h, :w_]
        xf = grown.view(shape.N, shape.C, fold.H, st, fold.W, st).permute(0, 3, 5, 1, 2, 4)
        xf = xf.reshape(shape.N, st * st * shape.C, fold.H, fold.W)
        xf = torch.nn.functional.pad(xf, (0, 0, 0, 0, 0, fold.C - st * st * shape.C))
        got = torch.nn.functional.conv2d(xf, fold_weights(w, shape))
        want = torch.nn.functional.conv2d(x, w, stride=st, padding=shape.padding)
        assert got.shape == want.shape and torch.allclose(got, want), shape.name


def test_split_sum_counters_reset_between_launches():
    """SPLIT_SUM=1: each tile's arrival counter is back at 0 after a launch, so a second launch
    on the same buffers (as timing does) adds its partials again, and correctly."""
    shape, flags = VARIANTS["split_sum"]
    tiles = {**BASE, **flags}
    ops = make_operands(shape, False, seed=5, device="cpu")
    run, out = KERNEL.bind(ops, shape, tiles, SwizzleBinding(SWIZZLES["grouped"], 8, 2), LaunchConfig(4, 3))
    counts = run.bound.operands[3]
    for _ in range(2):
        out.fill_(float("nan"))
        run()
        assert not counts.any()
        assert compare(KERNEL.output_as_nchw(out), reference(ops, shape), shape.dtype).ok
