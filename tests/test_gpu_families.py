"""Parametric families compiled for a real GPU (not the interpreter): each generated remap's
table, computed on the GPU, equals the Python oracle on many grids, and a job with it
passes both gates and is timed.  Skipped on CPU."""
import pytest

from harness.hardware.device import describe_device
from harness.run.steps import JobOptions, run_job
from harness.job.result import FINISHED
from harness.job.spec import JobSpec
from harness.measure.timing import PairedSettings
from kernels.problem import ConvShape
from swizzles import get_swizzle
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
