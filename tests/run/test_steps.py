"""Every kernel and every swizzle through the real job pipeline (CPU, Triton interpreter)."""
import dataclasses
import itertools

import pytest

from harness.hardware.device import describe_device
from harness.run.steps import JobOptions, run_job
from harness.job.result import FAILED, FINISHED
from harness.job.spec import JobSpec
from kernels import KERNELS
from kernels.base import LaunchConfig, SwizzleBinding
from kernels.problem import ConvShape
from harness.measure.correctness import compare, make_operands, reference
from harness.storage.run_fields import run_tags
from swizzles import SWIZZLES, get_swizzle
from swizzles.permutation import check_permutation, remap_table

CPU = describe_device("interpreter")

# Small tiles so the full-size grids of tiny shapes are neither trivial nor multiples of 8.
TILES = {
    "igemm": {"BLOCK_M": 16, "BLOCK_N": 16, "BLOCK_K": 16},
    "igemm_fast": {"BLOCK_M": 16, "BLOCK_N": 16, "BLOCK_K": 16, "SPLIT_K": 2, "PACK_K": 0, "NCHW_IN": 0, "PERSISTENT": 1, "TMA": 0, "TMA_STORE": 0, "FOLD": 0, "SPLIT_SUM": 0},
    "direct": {"BLOCK_N": 1, "BLOCK_F": 4, "BLOCK_H": 4, "BLOCK_W": 4, "BLOCK_C": 4},
    "patch": {"BLOCK_Q": 4, "BLOCK_C": 4},
}
#: igemm_best on the CPU runs its igemm_fast member (WS=0; igemm_ws's own tiles are filled in as 0)
TILES["igemm_best"] = {"WS": 0, **TILES["igemm_fast"]}
SHAPES = {
    # padding, odd sizes (C and F not multiples of their tiles); grids: igemm 5x2=10, direct 6x3=18,
    # patch 5x3=15 (none a multiple of 8)
    "igemm": ConvShape("odd", N=2, C=20, H=6, W=6, F=20, R=3, S=3, stride=1, padding=1),
    "igemm_fast": ConvShape("odd", N=2, C=20, H=6, W=6, F=20, R=3, S=3, stride=1, padding=1),
    "igemm_best": ConvShape("odd", N=2, C=20, H=6, W=6, F=20, R=3, S=3, stride=1, padding=1),
    "direct": ConvShape("odd", N=1, C=5, H=9, W=6, F=10, R=3, S=3, stride=1, padding=1),
    "patch": ConvShape("odd", N=1, C=5, H=9, W=9, F=3, R=3, S=3, stride=2, padding=1),
}


def _spec(kernel, swizzle, shape):
    return JobSpec(kernel=kernel, tiles=tuple(TILES[kernel].items()), swizzle=swizzle, num_xcds=8,
                   group_size=2, shape=shape, shape_preset="test", num_warps=4, num_stages=2,
                   target="mi300x", seed=0)


#: Families the interpreter cannot run: igemm_ws is Gluon for Hopper only (it refuses the CPU;
#: tests/kernels/test_igemm_ws.py, tests/test_gpu_families.py).
GPU_ONLY = {"igemm_ws"}


#: Every CPU kernel through a whole job under the identity and a swizzle that scrambles both
#: grid axes; every other swizzle (the seeds too: most fail the permutation gate) under one
#: kernel each, in turn.  A kernel sees a swizzle only as a permutation of its program ids
#: (tests/kernels/test_igemm_fast.py says why that suffices); identity_copy is the identity
#: function object itself, nothing new to verify.
CPU_KERNELS = sorted(set(KERNELS) - GPU_ONLY)
OTHERS = sorted(set(SWIZZLES) - {"identity", "xcd_grouped", "identity_copy"})
JOB_CASES = ([(kernel, swizzle) for kernel in CPU_KERNELS for swizzle in ("identity", "xcd_grouped")]
             + list(zip(itertools.cycle(CPU_KERNELS), OTHERS)))


def test_job_cases_cover_every_kernel_and_swizzle():
    assert {k for k, _ in JOB_CASES} == set(CPU_KERNELS)
    assert {s for _, s in JOB_CASES} == set(SWIZZLES) - {"identity_copy"}


@pytest.mark.parametrize("kernel, swizzle", JOB_CASES)
def test_every_kernel_every_swizzle(kernel, swizzle):
    shape = SHAPES[kernel]
    grid = KERNELS[kernel].tile_grid(shape, TILES[kernel])
    assert grid.num_pids % 8 != 0
    is_perm = check_permutation(remap_table(get_swizzle(swizzle), grid.num_pid_m, grid.num_pid_n, 8, 2)).ok
    result = run_job(_spec(kernel, swizzle, shape), CPU, JobOptions(interpret_tiles=TILES[kernel]))
    if is_perm:
        assert result.status == FINISHED, result.reason
        assert result.metrics["max_rel_err"] < 5e-3
        assert "not measured" in run_tags(result)["timing"]
        assert "time_ms_median" not in result.metrics  # never a fake 0
    else:
        assert result.status == FAILED
        assert result.failed_gate == "permutation"
        assert result.reason.startswith(f"swizzle {swizzle}: not a permutation of {grid.num_pids} pids")
        assert "max_rel_err" not in result.metrics  # nothing measured past a failed gate


def test_wrong_kernel_is_caught_by_correctness_gate():
    """Seed 000 reads only the first BLOCK_SIZE_C channels: with C > BLOCK_SIZE_C it is wrong."""
    from tests.seed_kernels import Seed000Conv

    shape = ConvShape("seed-small", N=1, C=24, H=6, W=6, F=8, R=3, S=3)
    tiles = {"BLOCK_SIZE_N": 1, "BLOCK_SIZE_F": 8, "BLOCK_SIZE_H": 4, "BLOCK_SIZE_W": 4, "BLOCK_SIZE_C": 8}
    kernel = Seed000Conv()
    ops = make_operands(shape, False, seed=1, device="cpu")
    run, out = kernel.bind(ops, shape, tiles, SwizzleBinding(get_swizzle("identity"), 8, 1), LaunchConfig())
    run()
    verdict = compare(kernel.output_as_nchw(out), reference(ops, shape), shape.dtype)
    assert not verdict.ok
    assert "output wrong: max relative error" in verdict.reason and verdict.max_rel_err > 0.1


def test_unwritten_output_is_caught():
    """A kernel that skips tiles leaves NaN poison behind; the gate names it."""
    shape = ConvShape("s", N=1, C=4, H=5, W=5, F=4, R=3, S=3, padding=1)
    kernel = KERNELS["igemm"]
    ops = make_operands(shape, False, 0, "cpu")
    _, out = kernel.bind(ops, shape, TILES["igemm"], SwizzleBinding(get_swizzle("identity"), 8, 1), LaunchConfig())
    verdict = compare(kernel.output_as_nchw(out), reference(ops, shape), shape.dtype)  # never launched
    assert not verdict.ok and verdict.unwritten == out.numel() and "never written" in verdict.reason


def test_bf16_igemm_is_verified_on_cpu():
    shape = dataclasses.replace(SHAPES["igemm"], dtype="bfloat16")
    result = run_job(_spec("igemm", "xcd_grouped", shape), CPU, JobOptions(interpret_tiles=TILES["igemm"]))
    assert result.status == FINISHED, result.reason


def test_cpu_check_uses_downscaled_shape_but_full_grid():
    shape = ConvShape("big", N=32, C=256, H=56, W=56, F=256, R=3, S=3, padding=1)
    spec = dataclasses.replace(_spec("igemm", "xcd", shape), tiles=(("BLOCK_M", 128), ("BLOCK_N", 128), ("BLOCK_K", 64)))
    result = run_job(spec, CPU, JobOptions(interpret_tiles=TILES["igemm"]))
    assert result.status == FINISHED, result.reason
    assert result.params["grid.num_pids"] == str((32 * 56 * 56 // 128) * 2)
    assert result.params["verified_shape"] == "N2 C20 H6 W6 F20"  # P, Q capped at 6: H = 5*1 + 3 - 2


def test_seed_xcd_valid_on_full_grid_but_unverifiable_on_cpu_is_failed():
    shape = ConvShape("s", N=1, C=4, H=10, W=10, F=16, R=3, S=3)  # 64 pixels -> 4x1 grid with BLOCK_M 16
    spec = dataclasses.replace(_spec("igemm", "seed_xcd", shape), tiles=(("BLOCK_M", 8), ("BLOCK_N", 16), ("BLOCK_K", 16)))
    result = run_job(spec, CPU, JobOptions(interpret_tiles=TILES["igemm"]))
    assert result.status == FAILED
    assert result.reason.startswith("unverifiable on CPU: swizzle seed_xcd is a permutation of the full grid (8 pids)")


def test_job_error_becomes_failed_run_not_exception():
    shape = ConvShape("s", N=1, C=4, H=5, W=5, F=4, R=3, S=3)
    spec = dataclasses.replace(_spec("igemm", "identity", shape), tiles=(("BLOCK_M", 16), ("BLOCK_N", 16)))
    result = run_job(spec, CPU, JobOptions(interpret_tiles=TILES["igemm"]))
    assert result.status == FAILED and result.reason.startswith("plan error: ValueError: kernel 'igemm': tiles must be")
    assert "traceback.txt" in result.artifacts
