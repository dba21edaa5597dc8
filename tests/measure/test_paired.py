"""The paired comparison end to end on the CPU: launch schedule and attribution, the
baseline in every job, paired L2 through a stand-in ncu, and bad compare settings."""
import re

import pytest

from harness.profilers.base import DispatchCounters
from harness.profilers.worker import ProfileRequest, launch_schedule
from harness.profilers.wrapped import attribute_by_dispatch_order
from tests.standin_workload import expected_counters
from tests.profilers.test_profiler_pipeline import _jobs as profiler_jobs
from tests.profilers.test_profiler_pipeline import _sweep as profiler_sweep


def test_schedule_is_abba_and_attribution_pairs_the_arms():
    reqs = [ProfileRequest("a", None, 2), ProfileRequest("b", None, 4, paired=True)]   # the schedule reads no plan
    sched = launch_schedule(reqs)
    assert sched == [("a", "candidate")] * 2 + [
        ("b", "candidate"), ("b", "baseline"), ("b", "baseline"), ("b", "candidate"),
        ("b", "candidate"), ("b", "baseline"), ("b", "baseline"), ("b", "candidate")]
    # hit rate = 10 * position: candidate of b at 2, 5, 6, 9; baseline at 3, 4, 7, 8
    dispatches = [DispatchCounters("k", i, l2_hit_rate=10.0 * i) for i in range(len(sched))]
    out = attribute_by_dispatch_order(reqs, dispatches, [])
    assert out["a"].reading.l2_hit_rate == pytest.approx(5.0) and out["a"].pairs == []
    assert out["b"].pairs == [(20.0, 30.0), (50.0, 40.0), (60.0, 70.0), (90.0, 80.0)]
    assert out["b"].baseline_reading.l2_hit_rate == pytest.approx(55.0)
    short = attribute_by_dispatch_order(reqs, dispatches[:-1], [])
    assert "the worker launched 10" in short["b"].error


def _sweep(tmp, *args, profiler="ncu"):
    """The stand-in profiler sweep of test_profiler_pipeline on two tiny shapes; later
    overrides (``args``) win over its swizzle list."""
    proc, client = profiler_sweep(tmp, profiler, extra=["shape.select=[t1,t3]", *args])
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc, profiler_jobs(client)


def test_every_job_carries_its_baseline_and_paired_l2(tmp_path):
    proc, runs = _sweep(tmp_path, "swizzle=identity,grouped")
    assert len(runs) == 4
    for run in runs:
        p, m, t = run.data.params, run.data.metrics, run.data.tags
        assert run.info.status == "FINISHED", t.get("status_reason")
        assert p["compare.baseline"] == "identity"
        if p["swizzle"] == "identity":           # the baseline itself: never compared with itself
            assert t["compare.role"] == "baseline" and "l2_delta_pts" not in m and "verdict" not in t
            continue
        assert t["compare.role"] == "candidate"
        assert t["verdict"].startswith("not timed")
        # the stand-in's documented counters: candidate keyed by run id, baseline by run id/baseline
        grid = [int(p["grid.num_pids"]), 1, 1]
        cand = expected_counters(grid, run.info.run_id)["l2_hit_rate"]
        base = expected_counters(grid, run.info.run_id + "/baseline")["l2_hit_rate"]
        assert m["l2_pairs"] == 3 and m["baseline_l2_hit_rate"] == pytest.approx(base, abs=0.006)
        assert m["l2_delta_pts"] == pytest.approx(cand - base, abs=0.01)
        word = t["l2_verdict"]
        if t["compare.same_order"] == "true":    # grouped on a grid this small is identity's order
            assert word.startswith("same tile order: the swizzle's code, not its order (")
            word = word.split("(")[1].rstrip(")")
        assert t["l2_source"] == "ncu" and word.split()[0] in ("higher", "lower", "no")
    assert not re.search(r"vs identity: x\d", proc.stdout)   # no speedup on the CPU (the L2 change only)
    assert "vs identity: L2 " in proc.stdout


def test_a_formula_as_baseline(tmp_path):
    _, runs = _sweep(tmp_path, "swizzle=grouped", 'compare.baseline="pid"', profiler="sim")
    assert {r.data.params["compare.baseline"].strip() for r in runs} == {"new_pid = pid"}  # normalized
    assert all(r.data.tags["compare.role"] == "candidate" and "l2_delta_pts" in r.data.metrics for r in runs)


def test_unknown_baseline_is_refused_with_what_is_valid():
    from harness.job.spec_config import baseline_choice

    with pytest.raises(ValueError, match=r"compare.baseline='zigzag' is neither a built-in swizzle \(colmajor, "
                                         r"grouped.*nor a valid formula: "):
        baseline_choice("zigzag")
    assert baseline_choice(None) == (None, None)
    assert baseline_choice("scatter") == ("scatter", None)
