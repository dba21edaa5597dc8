"""Parametric families compiled for a real GPU (not the interpreter): each generated remap's
table, computed on the GPU, equals the Python oracle on many grids, and a job with it
passes both gates and is timed; and the GPU-only kernel family igemm_ws (Hopper) under
every swizzle.  Skipped on CPU."""
import pytest

from harness.hardware.device import describe_device
from harness.run.steps import JobOptions, run_job
from harness.job.result import FAILED, FINISHED
from harness.job.spec import JobSpec
from harness.measure.timing import PairedSettings
from kernels.problem import ConvShape
from swizzles import SWIZZLES, get_swizzle
from swizzles.families import parse_label
from swizzles.permutation import check_permutation, remap_table
from tests.swizzles.test_families import GRIDS, _oracle

pytestmark = pytest.mark.gpu

LABELS = ["grouped_m[num_xcds=8,chunk=3,group_size=4]", "grouped_n[num_xcds=1,chunk=0,group_size=8]",
          "tiled[num_xcds=8,chunk=0,tile_m=4,tile_n=2]", "hilbert[num_xcds=8,chunk=16,order=3]",
          "morton[num_xcds=1,chunk=0,order=2]"]
TILES = {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32}


@pytest.mark.parametrize("label", LABELS)
def test_family_table_on_gpu_equals_oracle(label):
    instance = parse_label(label)
    for m, n in GRIDS:
        table = remap_table(get_swizzle(label), m, n, num_xcds=8, group_size=8, device="cuda")
        assert check_permutation(table).ok
        assert table.tolist() == _oracle(instance.family, instance.params, m, n), f"{label} on {m}x{n}"


@pytest.mark.parametrize("label", LABELS)
def test_family_job_on_gpu(label):
    shape = ConvShape("pad", N=4, C=40, H=29, W=27, F=150, R=3, S=3, stride=1, padding=1)
    spec = JobSpec(kernel="igemm", tiles=tuple(TILES.items()), swizzle=label, num_xcds=8, group_size=4,
                   shape=shape, shape_preset="gpu", num_warps=4, num_stages=2, target="gpu", seed=0)
    result = run_job(spec, describe_device("gpu"), JobOptions(
        interpret_tiles=TILES, paired=PairedSettings(min_rounds=10, max_time_s=0.3, warmup_ms=5)))
    assert result.status == FINISHED, result.reason
    assert result.metrics["max_rel_err"] < 5e-3 and result.metrics["time_ms_median"] > 0


# -----------------------------------------------------------
# igemm_ws (Gluon, Hopper only): outputs under every built-in swizzle and the parametric
# families, on a persistent split-K launch (each program walks several work items, both
# partitions remap each one); the other code paths under two swizzles.  Each job passes the
# permutation gate (or fails it, for a swizzle that is no permutation of the grid), the
# output check against conv2d, and is timed against the vendor and its baseline.

#: variant -> (tiles, num_warps, num_stages, shape)
WS_VARIANTS = {
    # boxes over images (7 x 7: 16 x 1 x 8 pixels), 2 K slices: 28 x 5 tiles x 2 = 280 work
    # items, more than the 2 programs per SM of an H100 or H200 (MAXNREG): some walk two
    "persistent_split": ({"BLOCK_M": 128, "BLOCK_N": 64, "BLOCK_K": 64, "SPLIT_K": 2, "PERSISTENT": 1,
                          "TMA_STORE": 1, "MAXNREG": 80}, 8, 3,
                         ConvShape("l23ish", N=64, C=72, H=7, W=7, F=264, R=3, S=3, stride=1, padding=1)),
    # one warpgroup, TMA store, boxes past the image's edges, C past one BLOCK_K; bf16
    "one_warpgroup": ({"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "SPLIT_K": 1, "PERSISTENT": 0,
                       "TMA_STORE": 1, "MAXNREG": 0}, 4, 4,
                      ConvShape("pad8", N=3, C=40, H=17, W=15, F=72, R=3, S=3, stride=1, padding=1, dtype="bfloat16")),
    # 64-row tiles (the two warpgroups side by side along N), plain stores, a 1x1 layer
    "rows64_stores": ({"BLOCK_M": 64, "BLOCK_N": 128, "BLOCK_K": 64, "SPLIT_K": 1, "PERSISTENT": 1,
                       "TMA_STORE": 0, "MAXNREG": 0}, 8, 4,
                      ConvShape("one", N=5, C=200, H=9, W=11, F=264, R=1, S=1, stride=1, padding=0)),
    # 64-row tiles of one warpgroup (l22's table config), deep ring, a 1x1 layer with F off
    # BLOCK_N; and two programs per SM (registers capped), a 3x3 layer past the image's edges
    "rows64_one_warpgroup": ({"BLOCK_M": 64, "BLOCK_N": 128, "BLOCK_K": 64, "SPLIT_K": 1, "PERSISTENT": 0,
                              "TMA_STORE": 1, "MAXNREG": 0}, 4, 8,
                             ConvShape("pw", N=8, C=520, H=7, W=7, F=200, R=1, S=1, stride=1, padding=0)),
    "rows64_two_per_sm": ({"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 64, "SPLIT_K": 1, "PERSISTENT": 0,
                           "TMA_STORE": 1, "MAXNREG": 128}, 4, 6,
                          ConvShape("pad64", N=3, C=72, H=13, W=11, F=96, R=3, S=3, stride=1, padding=1)),
    # stride 2 through the phase grids: two channel blocks per phase, boxes past the edge
    "stride2": ({"BLOCK_M": 128, "BLOCK_N": 64, "BLOCK_K": 64, "SPLIT_K": 1, "PERSISTENT": 0,
                 "TMA_STORE": 1, "MAXNREG": 0}, 8, 4,
                ConvShape("s2", N=6, C=128, H=14, W=18, F=72, R=3, S=3, stride=2, padding=1)),
    # a 1x1 stride-2 downsample, split-K over its two channel blocks
    "stride2_1x1": ({"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "SPLIT_K": 2, "PERSISTENT": 1,
                     "TMA_STORE": 1, "MAXNREG": 0}, 8, 4,
                    ConvShape("s2ds", N=4, C=128, H=28, W=28, F=256, R=1, S=1, stride=2, padding=0)),
    # odd sides (phase grids of unequal sizes), C off BLOCK_K, unpadded: Inception's 35 x 35
    # reduction, smaller; and a padded one on a persistent grid
    "stride2_odd": ({"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "SPLIT_K": 1, "PERSISTENT": 0,
                     "TMA_STORE": 1, "MAXNREG": 0}, 8, 4,
                    ConvShape("m6a", N=4, C=288, H=35, W=35, F=136, R=3, S=3, stride=2, padding=0)),
    "stride2_odd_pad": ({"BLOCK_M": 128, "BLOCK_N": 64, "BLOCK_K": 64, "SPLIT_K": 2, "PERSISTENT": 1,
                         "TMA_STORE": 1, "MAXNREG": 0}, 8, 4,
                        ConvShape("odd", N=3, C=40, H=17, W=15, F=64, R=3, S=3, stride=2, padding=1)),
    # 32-channel K steps (64-byte swizzle): C = 96 in three whole blocks, stride 2, odd sides
    "bk32_stride2": ({"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 32, "SPLIT_K": 1, "PERSISTENT": 1,
                      "TMA_STORE": 1, "MAXNREG": 0}, 8, 8,
                     ConvShape("m6a96", N=4, C=96, H=35, W=35, F=136, R=3, S=3, stride=2, padding=0)),
    # split-K added in the kernel (SPLIT_ADD): on a persistent grid of two programs per SM with
    # more work items than programs (split 1 of a tile waits on a split 0 that another
    # program reaches first), and on a grid of one program per item, several waves deep
    "split_add_persistent": ({"BLOCK_M": 128, "BLOCK_N": 64, "BLOCK_K": 64, "SPLIT_K": 2, "PERSISTENT": 1,
                              "TMA_STORE": 0, "MAXNREG": 80, "SPLIT_ADD": 2}, 8, 3,
                             ConvShape("l23ish", N=64, C=72, H=7, W=7, F=264, R=3, S=3, stride=1, padding=1)),
    "split_add_waves": ({"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "SPLIT_K": 2, "PERSISTENT": 0,
                         "TMA_STORE": 0, "MAXNREG": 0, "SPLIT_ADD": 4}, 8, 6,
                        ConvShape("wide", N=16, C=136, H=28, W=28, F=256, R=3, S=3, stride=1, padding=1,
                                  dtype="bfloat16")),
    # tiles of two filter blocks (BLOCK_N2): 64 + 32 filters with F = 200 (the last tile's
    # second block wholly past F, its first partly), a 1x1 layer; 64 + 16 on two warpgroups
    # side by side, plain stores; 128 x (64 + 32) on a persistent 3x3 with 32-channel steps, F = 96
    "two_blocks_1x1": ({"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 64, "SPLIT_K": 1, "PERSISTENT": 0,
                        "TMA_STORE": 1, "MAXNREG": 0, "BLOCK_N2": 32}, 4, 8,
                       ConvShape("pw", N=8, C=520, H=7, W=7, F=200, R=1, S=1, stride=1, padding=0)),
    "two_blocks_stores": ({"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 64, "SPLIT_K": 1, "PERSISTENT": 1,
                           "TMA_STORE": 0, "MAXNREG": 0, "BLOCK_N2": 16}, 8, 4,
                          ConvShape("one", N=5, C=200, H=9, W=11, F=264, R=1, S=1, stride=1, padding=0)),
    "two_blocks_3x3": ({"BLOCK_M": 128, "BLOCK_N": 64, "BLOCK_K": 32, "SPLIT_K": 1, "PERSISTENT": 1,
                        "TMA_STORE": 1, "MAXNREG": 0, "BLOCK_N2": 32}, 8, 8,
                       ConvShape("c96ish", N=3, C=96, H=17, W=15, F=96, R=3, S=3, stride=1, padding=1)),
    # the input copied into whole channel blocks (PAD_C): C = 24 in 32-channel steps, boxes past
    # the image's edges, on a persistent grid of two programs per SM; and stride 2 (phase grids
    # of the padded copy)
    "pad_c": ({"BLOCK_M": 128, "BLOCK_N": 32, "BLOCK_K": 32, "SPLIT_K": 1, "PERSISTENT": 1,
               "TMA_STORE": 1, "MAXNREG": 80, "PAD_C": 1}, 8, 8,
              ConvShape("c24ish", N=3, C=24, H=17, W=15, F=24, R=3, S=3, stride=1, padding=1)),
    "pad_c_stride2": ({"BLOCK_M": 64, "BLOCK_N": 32, "BLOCK_K": 32, "SPLIT_K": 1, "PERSISTENT": 0,
                       "TMA_STORE": 1, "MAXNREG": 0, "PAD_C": 1}, 4, 9,
                      ConvShape("c40s2", N=2, C=40, H=13, W=11, F=32, R=3, S=3, stride=2, padding=1)),
    # 256-row tiles: a persistent 1x1 layer whose last pixel box runs past the pixels and whose
    # last filter block past F; a 3x3 layer in 16 x 16 boxes past the image's edges, plain stores
    "rows256_1x1": ({"BLOCK_M": 256, "BLOCK_N": 128, "BLOCK_K": 64, "SPLIT_K": 1, "PERSISTENT": 1,
                     "TMA_STORE": 1, "MAXNREG": 0}, 8, 3,
                    ConvShape("pw256", N=3, C=136, H=19, W=21, F=200, R=1, S=1, stride=1, padding=0)),
    "rows256_3x3": ({"BLOCK_M": 256, "BLOCK_N": 64, "BLOCK_K": 64, "SPLIT_K": 1, "PERSISTENT": 0,
                     "TMA_STORE": 0, "MAXNREG": 0}, 8, 4,
                    ConvShape("c3x3", N=2, C=72, H=18, W=20, F=64, R=3, S=3, stride=1, padding=1)),
}
WS_CASES = ([("persistent_split", name) for name in sorted(SWIZZLES) + LABELS]
            + [(variant, name) for variant in WS_VARIANTS if variant != "persistent_split"
               for name in ("identity", "xcd_grouped")])


@pytest.mark.parametrize("variant, swizzle", WS_CASES)
def test_igemm_ws_gates_and_timing(variant, swizzle):
    from kernels import KERNELS

    tiles, warps, stages, shape = WS_VARIANTS[variant]
    grid = KERNELS["igemm_ws"].tile_grid(shape, tiles)
    is_perm = check_permutation(remap_table(get_swizzle(swizzle), grid.num_pid_m, grid.num_pid_n, 8, 4, device="cuda")).ok
    spec = JobSpec(kernel="igemm_ws", tiles=tuple(tiles.items()), swizzle=swizzle, num_xcds=8, group_size=4,
                   shape=shape, shape_preset="gpu", num_warps=warps, num_stages=stages, target="gpu", seed=0,
                   baseline="identity")
    result = run_job(spec, describe_device("gpu"), JobOptions(
        interpret_tiles=tiles, paired=PairedSettings(min_rounds=10, max_time_s=0.3, warmup_ms=5)))
    if not is_perm:
        assert result.status == FAILED and result.failed_gate == "permutation", result.reason
        return
    assert result.status == FINISHED, result.reason
    m = result.metrics
    assert m["max_rel_err"] < 3e-2 and 0 < m["time_ms_p20"] <= m["time_ms_median"] <= m["time_ms_p80"]
    assert m["vendor_time_ms"] > 0 and m["paired_rounds"] >= 10


@pytest.mark.parametrize("variant", ["split_add_persistent", "split_add_waves"])
def test_igemm_ws_split_add_leaves_its_flags_for_the_next_launch(variant):
    """SPLIT_ADD's tile flags (split 0's "my partial is stored") must be back at zero after a
    launch, or the next launch's split 1 adds before split 0 stores: three launches in a row on
    a zeroed output, each checked against conv2d, then the flags."""
    import torch
    import torch.nn.functional as F

    from harness.measure.correctness import TOLERANCE, make_operands
    from kernels import KERNELS
    from kernels.base import LaunchConfig, SwizzleBinding

    tiles, warps, stages, shape = WS_VARIANTS[variant]
    kernel = KERNELS["igemm_ws"]
    ops = make_operands(shape, False, 0, "cuda", "channels_last")
    want = F.conv2d(ops.x.float(), ops.w.float(), None, stride=shape.stride, padding=shape.padding)
    bound = kernel.prepare(ops, shape, kernel.check_tiles(tiles))
    fn, out = kernel.bind(ops, shape, tiles, SwizzleBinding(SWIZZLES["xcd_grouped"], 8, 4),
                          LaunchConfig(warps, stages), share=bound)
    for launch in range(3):
        out.zero_()
        fn()
        torch.cuda.synchronize()
        err = float((kernel.output_as_nchw(out).float() - want).abs().max() / want.abs().max())
        assert err < TOLERANCE[shape.dtype], (launch, err)
    flags = bound.operands[1]
    assert flags.dtype == torch.int32 and int(flags.abs().sum()) == 0
