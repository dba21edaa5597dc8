"""Full pipeline with stand-in profilers on PATH: a CPU sweep with profiler=ncu /
profiler=rocprofv3 logs L2 hit rates end to end, attributed to the right jobs."""
import os
import sys
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from harness.errors import USER_ERROR_EXIT
from tests.standin_workload import expected_counters
from tests.cli_fork import run_cli

STANDINS = Path(__file__).parents[1] / "standins"
SMALL_TILES = ["kernel.tiles.BLOCK_M=16", "kernel.tiles.BLOCK_N=16", "kernel.tiles.BLOCK_K=16"]


def _sweep(tmp, profiler, extra=(), path_prefix=str(STANDINS)):
    uri = f"sqlite:///{tmp}/store.db"
    env = {**os.environ, "TRITON_INTERPRET": "1", "PATH": f"{path_prefix}{os.pathsep}{os.environ['PATH']}"}
    args = ["-m", "swizzle=identity,seed_xcd", "shape=tiny", *SMALL_TILES, f"profiler={profiler}",
            "profiler.repeats=3", f"tracking.uri={uri}", "experiment=prof", f"hydra.sweep.dir={tmp}/multirun", *extra]
    proc = run_cli(args, tmp, env, timeout=600)
    return proc, MlflowClient(tracking_uri=uri)


def _jobs(client):
    exp = client.get_experiment_by_name("prof")
    runs = client.search_runs([exp.experiment_id], max_results=1000)
    return [r for r in runs if r.data.tags.get("swizzlebench.kind") == "job"]


def _expected_rate(run):
    """The stand-ins' documented counters for this job's launch (tests/standin_workload.py)."""
    c = expected_counters([int(run.data.params["grid.num_pids"]), 1, 1], run.info.run_id)
    return c["l2_hits"], c["l2_misses"], 100 * c["l2_hits"] / (c["l2_hits"] + c["l2_misses"])


@pytest.mark.parametrize("profiler", ["ncu", "rocprofv3"])
def test_sweep_logs_hit_rates_through_standin(tmp_path, profiler):
    """With ``profiler=ncu`` the sweep also asks for the simulator's prediction beside the
    measured rate (``profiler.simulate=true``)."""
    simulate = profiler == "ncu"
    proc, client = _sweep(tmp_path, profiler, extra=["profiler.simulate=true"] if simulate else [])
    assert proc.returncode == 0, proc.stderr[-3000:]
    jobs = _jobs(client)
    assert len(jobs) == 6
    for run in jobs:
        m, tags = run.data.metrics, run.data.tags
        if run.data.params["swizzle"] == "seed_xcd":      # rejected before profiling: nothing measured
            assert run.info.status == "FAILED" and "l2_hit_rate" not in m
            continue
        assert run.info.status == "FINISHED", tags.get("status_reason")
        hits, misses, rate = _expected_rate(run)
        assert m["l2_hit_rate"] == pytest.approx(rate, abs=0.006)  # right counters for the right job
        assert m["l2_hit_rate_std"] == pytest.approx(0.0, abs=1e-9)
        assert m["l2_hits"] == hits and m["l2_misses"] == misses and m["l2_samples"] == 3
        assert m["profiled_time_ms"] > 0
        assert (0 <= m["sim_l2_hit_rate"] <= 100) if simulate else "sim_l2_hit_rate" not in m
        if profiler == "rocprofv3":   # FETCH_SIZE's terms: the stand-in's EA0 read requests, none of 32 B
            assert m["dram_read_bytes"] == 64 * misses
        assert tags["profiler"] == profiler and tags["profiler_version"] and tags["cache_control"]
        files = [a.path for a in client.list_artifacts(run.info.run_id, "profiler")]
        assert any(f.endswith(".csv") for f in files), files
    # batch=true: one profiler launch per Hydra job with verified shapes (seed_xcd has none)
    launches = list((tmp_path / "multirun").rglob("command.txt"))
    assert len(launches) == 1


def test_unbatched_mode_launches_the_profiler_once_per_shape(tmp_path):
    proc, client = _sweep(tmp_path, "ncu", extra=["profiler.batch=false", "swizzle=identity", "shape.select=[t1,t2]"])
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert len(list((tmp_path / "multirun").rglob("command.txt"))) == 2
    jobs = _jobs(client)
    assert len(jobs) == 2 and all("l2_hit_rate" in r.data.metrics for r in jobs)


def test_missing_profiler_fails_fast_with_advice(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    env = {**os.environ, "TRITON_INTERPRET": "1", "PATH": str(Path(sys.executable).parent)}
    proc = run_cli(["shape=tiny", "profiler=rocprofv3", f"tracking.uri=sqlite:///{tmp_path}/s.db"], tmp_path, env,
                   timeout=300)
    assert proc.returncode == USER_ERROR_EXIT
    error, = proc.stderr.splitlines()         # one line, no traceback, no store opened
    assert error.startswith("error: ") and "rocprofv3` was not found on PATH" in error and "profiler=none" in error
