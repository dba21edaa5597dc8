"""On a GPU with Nsight Compute: a ``profiler=ncu`` sweep through the real CLI keeps each job's
``.ncu-rep`` as an artifact of its run, the run's hit rate is the one in that file, and NVIDIA's
``ncu_report`` module reads the same counters as ``ncu --import``'s CSV.  Skipped on CPU; run
on a GPU node with ``python -m pytest -o addopts="" -m gpu tests/test_gpu_ncu_report.py``."""
from __future__ import annotations

import os
import statistics
import subprocess
import sys
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from harness.profilers.ncu import find_ncu, parse_ncu_csv, read_ncu_report
from harness.profilers.ncu_rep import import_csv

pytestmark = pytest.mark.gpu

ROOT = Path(__file__).resolve().parents[1]
REPEATS = 2


def _candidate_rates(block: list, paired: bool) -> list[float]:
    """The candidate arm's hit rates among one job's results (the worker's launch order:
    harness.profilers.worker.launch_schedule; paired: ABBA, candidate first in even pairs)."""
    if not paired:
        return [d.l2_hit_rate for d in block]
    return [block[2 * i + (i % 2)].l2_hit_rate for i in range(len(block) // 2)]


def test_ncu_sweep_keeps_each_jobs_report_and_both_readers_agree(tmp_path):
    exe = find_ncu()
    if exe is None:
        pytest.skip("ncu not installed")
    uri = f"sqlite:///{tmp_path}/store.db"
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    proc = subprocess.run(
        [sys.executable, "-m", "harness", "-m", "swizzle=grouped", "shape=tiny", "kernel=igemm", "tune=none",
         "profiler=ncu", f"profiler.executable={exe}", f"profiler.repeats={REPEATS}", "compare.max_time_s=0.3",
         "compare.min_rounds=10", f"tracking.uri={uri}", "experiment=ncurep", f"hydra.sweep.dir={tmp_path}/multirun"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]

    client = MlflowClient(tracking_uri=uri)
    experiment = client.get_experiment_by_name("ncurep")
    jobs = [r for r in client.search_runs([experiment.experiment_id]) if r.data.tags.get("swizzlebench.kind") == "job"]
    assert len(jobs) == 3
    covered = []
    for run in jobs:
        tags = run.data.tags
        assert run.info.status == "FINISHED", tags.get("status_reason")
        assert tags["profiler_report"] == "profiler/ncu.ncu-rep" and tags["ncu_reader"] == "ncu_report"
        report = Path(client.download_artifacts(run.info.run_id, tags["profiler_report"], str(tmp_path / run.info.run_id)))
        size = report.stat().st_size
        assert size > 0
        via_csv = parse_ncu_csv(import_csv(report, exe, 300))
        via_module = read_ncu_report(report, exe)   # NVIDIA's module, in a child Python
        assert via_module is not None, f"NVIDIA's ncu_report was not found for {exe} (extras/python)"
        # The same measurement both ways: the lookups are integer sector counts, exact in the CSV too.
        assert [(d.l2_hits, d.l2_misses, d.duration_ns) for d in via_module] == \
               [(d.l2_hits, d.l2_misses, d.duration_ns) for d in via_csv]
        assert [d.l2_hit_rate for d in via_module] == pytest.approx([d.l2_hit_rate for d in via_csv], abs=1e-9)
        # ... and the run's hit rate is its own results' in the file it keeps.
        first, _, last = tags["profiler_report.results"].partition("-")
        block = via_csv[int(first):int(last or first) + 1]
        paired = tags.get("compare.role") == "candidate"
        assert len(block) == REPEATS * (2 if paired else 1)
        assert run.data.metrics["l2_hit_rate"] == pytest.approx(statistics.fmean(_candidate_rates(block, paired)),
                                                                abs=1e-6)
        covered += range(int(first), int(last or first) + 1)
        print(f"{run.info.run_name}: ncu.ncu-rep of {len(via_csv)} results, {size} bytes")
    assert sorted(covered) == list(range(len(via_csv)))   # one launch's report: every result is a job's
