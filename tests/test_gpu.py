"""The same gates on a real GPU (compiled Triton, not the interpreter).  Skipped on CPU."""
import dataclasses
import json

import pytest

from harness.hardware.device import describe_device
from harness.run.steps import JobOptions, run_job
from harness.job.result import FAILED, FINISHED
from harness.job.spec import JobSpec
from harness.measure.timing import PairedSettings
from harness.storage.run_fields import run_tags
from kernels.problem import ConvShape

pytestmark = pytest.mark.gpu

TILES = {
    "igemm": {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32},
    "direct": {"BLOCK_N": 1, "BLOCK_F": 16, "BLOCK_H": 4, "BLOCK_W": 8, "BLOCK_C": 8},
    "patch": {"BLOCK_Q": 16, "BLOCK_C": 16},
    # persistent walk, split-K and TMA weights at once: every swizzle maps the walked tiles
    "igemm_fast": {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32, "SPLIT_K": 2, "PACK_K": 0, "NCHW_IN": 0,
                   "PERSISTENT": 1, "TMA": 1, "TMA_STORE": 0, "FOLD": 0, "SPLIT_SUM": 0},
}
#: igemm_fast's other paths on a real GPU: the output through a TMA store on a persistent
#: grid, and stride folding in row order (the fold pass and the folded conv, both compiled).
FAST_VARIANTS = {
    "tma_store": {**TILES["igemm_fast"], "SPLIT_K": 1, "TMA_STORE": 1},
    "fold_rows": {**TILES["igemm_fast"], "SPLIT_K": 1, "PERSISTENT": 0, "PACK_K": 2, "FOLD": 1, "BLOCK_K": 64},
}
SHAPES = [
    ConvShape("pad", N=3, C=40, H=17, W=15, F=70, R=3, S=3, stride=1, padding=1),
    ConvShape("s2", N=2, C=24, H=20, W=20, F=33, R=3, S=3, stride=2, padding=1, dtype="bfloat16"),
    ConvShape("stem", N=2, C=3, H=30, W=30, F=16, R=7, S=7, stride=2, padding=3),
]


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: s.name)
@pytest.mark.parametrize("kernel", sorted(TILES))
@pytest.mark.parametrize("swizzle", ["identity", "grouped", "xcd", "xcd_grouped", "seed_patch"])
def test_gpu_gates_and_timing(kernel, swizzle, shape):
    spec = JobSpec(kernel=kernel, tiles=tuple(TILES[kernel].items()), swizzle=swizzle, num_xcds=8,
                   group_size=4, shape=shape, shape_preset="gpu", num_warps=4, num_stages=2,
                   target="gpu", seed=0, baseline="identity")
    result = run_job(spec, describe_device("gpu"), JobOptions(
        interpret_tiles=TILES[kernel], paired=PairedSettings(min_rounds=10, max_time_s=0.3, warmup_ms=5)))
    if swizzle == "seed_patch":
        assert result.status == FAILED and result.failed_gate == "permutation"
        return
    assert result.status == FINISHED, result.reason
    m = result.metrics
    assert 0 < m["time_ms_p20"] <= m["time_ms_median"] <= m["time_ms_p80"]
    assert m["vendor_time_ms"] > 0 and m["max_rel_err"] < 3e-2
    assert m["paired_rounds"] >= 10
    if swizzle == "identity":   # the job is its own baseline: timed, not compared with itself
        assert result.comparison.role == "baseline" and "speedup" not in m
    else:
        assert result.comparison.role == "candidate" and m["baseline_time_ms"] > 0
        assert m["speedup_ci_lo"] <= m["speedup"] <= m["speedup_ci_hi"]
        assert run_tags(result)["verdict"].split()[0] in ("faster", "slower", "no", "same")


def test_ncu_profiles_real_dispatches(tmp_path):
    """The real ncu around the real worker: one reading per job, attributed by dispatch order."""
    from harness.profilers.ncu import NcuProfiler, find_ncu
    from harness.job.plan import plan_job
    from harness.profilers.worker import ProfileRequest

    exe = find_ncu()
    if exe is None:
        pytest.skip("ncu not installed")
    specs = [JobSpec(kernel="igemm", tiles=tuple(TILES["igemm"].items()), swizzle=sw, num_xcds=8, group_size=4,
                     shape=SHAPES[0], shape_preset="gpu", num_warps=4, num_stages=2, target="gpu", seed=0)
             for sw in ("identity", "grouped")]
    profiler = NcuProfiler(exe, cache_control="all", clock_control="base", timeout_s=300)
    requests = [ProfileRequest(key=s.swizzle, plan=plan_job(s), repeats=3) for s in specs]
    # the third job is profiled in ABBA pairs with its baseline (identity) in the same session
    paired = dataclasses.replace(specs[1], baseline=specs[0].swizzle)
    requests.append(ProfileRequest(key="paired", plan=plan_job(paired), repeats=4, paired=True))
    outcomes = profiler.profile(requests, tmp_path)
    for key in ("identity", "grouped", "paired"):
        reading = outcomes[key].reading
        assert reading is not None, outcomes[key].error
        assert 0 <= reading.l2_hit_rate <= 100 and reading.l2_hit_rate_std >= 0
        assert reading.samples == (4 if key == "paired" else 3)
        assert reading.profiled_time_ms > 0 and reading.l2_hits + reading.l2_misses > 0
    paired = outcomes["paired"]
    assert paired.baseline_reading is not None and paired.baseline_reading.samples == 4
    assert len(paired.pairs) == 4
    assert profiler.version()[0].isdigit() and (tmp_path / "ncu.csv").exists()
    # The all-traffic rate is the lookups' hit / (hit + miss), ncu's percentage kept beside it.
    from harness.profilers.ncu import METRIC_L2_HIT_RATE, METRIC_L2_LOOKUP_HITS, METRIC_L2_LOOKUP_MISSES, parse_ncu_csv

    first = parse_ncu_csv((tmp_path / "ncu.csv").read_text())[0]
    hits, misses = first.extra[METRIC_L2_LOOKUP_HITS], first.extra[METRIC_L2_LOOKUP_MISSES]
    assert first.l2_hit_rate == pytest.approx(100 * hits / (hits + misses)) and METRIC_L2_HIT_RATE in first.extra


def test_tune_mode_on_gpu(tmp_path):
    """tune=fastest on a real GPU: the chosen config comes from the candidate space, is what
    the job launched and logged (with the tie rule's paired re-measurement of the finalists),
    and a second job takes it from the cache."""
    from harness.tune.search import TuneOptions
    from harness.tune.ties import RULE_PAIRED

    base = {**TILES["igemm_fast"], "SPLIT_K": 1, "PERSISTENT": 0, "TMA": 0, "TMA_STORE": 0, "FOLD": 0, "SPLIT_SUM": 0}
    spec = JobSpec(kernel="igemm_fast", tiles=tuple(base.items()), swizzle="grouped", num_xcds=8, group_size=4,
                   shape=SHAPES[0], shape_preset="gpu", num_warps=4, num_stages=2, target="gpu", seed=0,
                   baseline="identity", tune="fastest")
    options = JobOptions(interpret_tiles=base, paired=PairedSettings(min_rounds=10, max_time_s=0.3, warmup_ms=5),
                         tune=TuneOptions(mode="fastest", cache_dir=str(tmp_path), warmup_ms=1, rounds=5,
                                          final_rounds=10, final_placements=2, max_final_rounds=10))
    first = run_job(spec, describe_device("gpu"), options)
    assert first.status == FINISHED, first.reason
    assert first.params["tune.from_cache"] == "False" and int(first.params["tune.trials"]) > 1
    launched = first.launched
    assert first.params["num_warps"] == str(launched.num_warps)
    assert all(first.params[f"tile.{k}"] == str(v) for k, v in launched.tiles)
    assert first.metrics["speedup"] > 0 and first.metrics["vendor_time_ms"] > 0
    assert first.tags["tune.rule"] == RULE_PAIRED and first.tags["tune.near_tie"] in ("true", "false")
    finalists = json.loads(first.artifacts["tune_finalists.json"])["finalists"]
    assert first.params["tune.final_rounds"] == ("10" if len(finalists) > 1 else "0")   # one pass over 2 placements
    assert len(finalists) == 1 or first.params["tune.final_measurement"].startswith("10 rounds (1 pass) over 2 ")
    assert all(f["ci_lo"] is not None for f in finalists) or len(finalists) == 1
    again = run_job(spec, describe_device("gpu"), options)
    assert again.params["tune.from_cache"] == "True" and again.params["tune.config"] == first.params["tune.config"]
    assert again.tags["tune.near_tie"] == first.tags["tune.near_tie"]


@pytest.mark.parametrize("swizzle", ["identity", "xcd_grouped"])
@pytest.mark.parametrize("variant", sorted(FAST_VARIANTS))
def test_gpu_fast_variants(variant, swizzle):
    tiles = FAST_VARIANTS[variant]
    shape = (ConvShape("stem", N=2, C=3, H=30, W=30, F=16, R=7, S=7, stride=2, padding=3) if tiles["FOLD"]
             else ConvShape("pad8", N=3, C=40, H=17, W=15, F=72, R=3, S=3, stride=1, padding=1))
    spec = JobSpec(kernel="igemm_fast", tiles=tuple(tiles.items()), swizzle=swizzle, num_xcds=8, group_size=4,
                   shape=shape, shape_preset="gpu", num_warps=4, num_stages=2, target="gpu", seed=0,
                   baseline="identity")
    result = run_job(spec, describe_device("gpu"), JobOptions(
        interpret_tiles=tiles, paired=PairedSettings(min_rounds=10, max_time_s=0.3, warmup_ms=5)))
    assert result.status == FINISHED, result.reason
    assert result.metrics["max_rel_err"] < 3e-2


#: Run in a fresh process, from a file (Triton compiles only functions defined in one): a kernel that stores 4 TB past its buffer (an illegal address, which
#: leaves that process's CUDA context unusable), then a harmless config, through
#: ``conv_speed.py``'s compile worker.
_FAULTING_WORKER = """
import json, sys
sys.path[:0] = [".", "benchmarks"]
import torch, triton, triton.language as tl
import conv_speed
from kernels import KERNELS
from kernels.problem import ConvShape
from kernels.tuning import Config

@triton.jit
def _store_far(ptr):
    tl.store(ptr + (1 << 40), 1.0)

class Faulting:
    def bind(self, ops, shape, tiles, swizzle, launch):
        buf = torch.empty(1, device="cuda")
        return (lambda: _store_far[(1,)](buf)), buf

KERNELS["faulting"] = Faulting()
shape = ConvShape("tiny", N=1, C=8, H=4, W=4, F=8, R=1, S=1)
configs = [Config.make({"BAD": 1}, 4, 2), Config.make({"BAD": 0}, 4, 2)]
print(json.dumps(conv_speed._compile_worker(("faulting", shape, configs))))
"""


def test_the_kernel_benchmark_names_a_config_that_faults_and_the_ones_it_kept_from_running(tmp_path):
    """``conv_speed.py``'s compile workers return a config whose launch faults with its reason,
    and the later configs of its chunk as not tried, for the timing to leave out, rather than
    the tune dying on the first illegal address (as it did on 2026-11-27)."""
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    script = tmp_path / "faulting_worker.py"
    script.write_text(_FAULTING_WORKER)
    proc = subprocess.run([sys.executable, str(script)], cwd=root, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (bad, skipped) = json.loads(proc.stdout.strip().splitlines()[-1])
    assert bad[:2] == ["tiny", "BAD1 w4 s2"] and "illegal memory access" in bad[2], bad
    assert skipped == ["tiny", "BAD0 w4 s2", "not tried: the CUDA context died at BAD1 w4 s2"], skipped
