"""harness.report with paired results (every job timed its baseline itself) and its views:
one sweep, several sweeps, the experiment view, single runs by id.  CPU only.

The store (``make_paired_store``), experiment ``paired``, has NO identity job:

* sweep A: group igemm · resnet-l03 · w8: xcd faster 1.25 [1.20, 1.30] (L2 +20 [18, 22]
  higher), seed_xcd slower 0.77 [0.75, 0.79] (L2 -5 lower), grouped no difference,
  xcd_grouped same tile order as its baseline; group resnet-l12: xcd and grouped no
  difference; group <hostile shape>: xcd whose baseline failed its gate (hostile text);
* sweep B, later: xcd on l03 again (same spec_hash): faster 1.30 [1.28, 1.32]; grouped on
  l03 again, FAILED; xcd on l22 (a new spec);
* single runs (``python -m harness`` without -m, logged through harness.storage.tracking.Tracker):
  two shapes (l30, l31) from one invocation, one (l40) from another.

Experiment ``cpu-paired``: a CPU-only sweep (verified, not timed; L2 from the simulator).
"""
from __future__ import annotations

import html
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pytest
from matplotlib.axes import Axes
from mlflow.tracking import MlflowClient

from harness import report
from harness.report import (FASTER, NO_COMPARISON, NO_DIFFERENCE, NOT_TIMED, SAME_ORDER, SLOWER,
                            Selection, build_report)
from harness.measure.stats import unvalidated_l2_verdict
from harness.storage.run_fields import verdict_text
from harness.report.cli import _parser
from harness.report.verdicts import L2_PREDICTED
from harness.report.views import load_runs
from harness.job.result import FINISHED, JobResult
from harness.storage.tracking import INVOCATION_TAG, Tracker
from tests.report.test_report import HOSTILE, HOSTILE_SHAPE, T0_MS, _job, job_params
from harness.job.verdict import Kind

EXPERIMENT = "paired"
CPU_EXPERIMENT = "cpu-paired"
HOSTILE_VERDICT = f"no comparison: baseline identity failed the permutation gate: {HOSTILE} & pid 3"
CPU_VERDICT = "not timed (no GPU: correctness checked under the Triton interpreter)"
HOUR_MS = 3_600_000


def no_difference(lo: float, hi: float) -> str:
    return f"{NO_DIFFERENCE} (CI [{lo:.4f}, {hi:.4f}])"


def paired_job(client: MlflowClient, exp_id: str, sweep_id: str | None, start_ms: int, swizzle: str, shape: str,
               speedup: tuple[float, float, float] | None, verdict: str, *,
               l2: tuple[float, float, float, str] | None = None, baseline: str = "identity",
               timed: bool = True, same_order: bool = False, status: str = FINISHED, role: str = "candidate",
               kernel: str = "igemm", preset: str = "resnet", warps: int = 8) -> str:
    """A job run that compared itself with ``baseline`` (paired), as the job pipeline logs it
    (``role="baseline"``: the job is its own baseline; ``verdict=""``: no verdict tag)."""
    metrics: dict[str, float] = {"max_rel_err": 1e-3}
    if timed:
        base_ms = 1.0
        median = base_ms / speedup[0] if speedup else 1.0
        metrics.update({"time_ms_median": median, "time_ms_p20": median * 0.99, "time_ms_p80": median * 1.01,
                        "tflops": 100.0 / median, "baseline_time_ms": base_ms, "paired_rounds": 40.0,
                        "paired_time_s": 2.5})
    if speedup:
        metrics.update(dict(zip(("speedup", "speedup_ci_lo", "speedup_ci_hi"), speedup)))
    tags = {"compare.role": role, "spec_hash": f"{kernel}/{swizzle}/{shape}",
            "compare.same_order": str(same_order).lower(), **({"verdict": verdict} if verdict else {})}
    if l2:
        delta, lo, hi, l2_verdict = l2
        metrics.update({"l2_hit_rate": 50.0 + delta, "l2_hit_rate_std": 0.5, "baseline_l2_hit_rate": 50.0,
                        "l2_delta_pts": delta, "l2_delta_ci_lo": lo, "l2_delta_ci_hi": hi, "l2_pairs": 6.0})
        tags.update({"l2_verdict": l2_verdict, "l2_source": "ncu" if timed else "sim",
                     "profiler": "ncu" if timed else "sim"})
    return _job(client, exp_id, sweep_id, start_ms, kernel=kernel, swizzle=swizzle, shape=shape, preset=preset,
                warps=warps, metrics=metrics, status=status, extra_tags=tags, timed=timed,
                extra_params={"compare.baseline": baseline},
                reason="verified" if status == FINISHED else "verify error: RuntimeError: boom")


def _sweep(client: MlflowClient, exp_id: str, name: str, start_ms: int) -> str:
    run = client.create_run(exp_id, run_name=name, start_time=start_ms, tags={"swizzlebench.kind": "sweep"})
    client.log_param(run.info.run_id, "sweep.overrides", name.removeprefix("sweep "))
    return run.info.run_id


def single_runs(uri: str, experiment: str, shapes: list[str]) -> list[str]:
    """The runs one ``python -m harness`` (no -m) logs: one Tracker, no sweep run, one per shape."""
    tracker = Tracker(uri, experiment)
    ids = []
    for shape in shapes:
        run_id = tracker.start_job(f"igemm/xcd/resnet-{shape}/w8", None, {"spec_hash": f"igemm/xcd/{shape}"})
        result = JobResult(run_name=f"igemm/xcd/resnet-{shape}/w8", status=FINISHED, reason="verified",
                           params={**job_params("igemm", "xcd", shape, "resnet", 8, "h100"),
                                   "compare.baseline": "identity"},
                           metrics={"time_ms_median": 0.5, "speedup": 1.1, "speedup_ci_lo": 1.05,
                                    "speedup_ci_hi": 1.15, "baseline_time_ms": 0.55},
                           tags={"compare.role": "candidate", "verdict": FASTER})
        tracker.finish_job(run_id, result)
        ids.append(run_id)
    return ids


@dataclass(frozen=True)
class PairedStore:
    uri: str
    sweep_a: str
    sweep_b: str
    xcd_l03_a: str          # superseded in the experiment view by ...
    xcd_l03_b: str          # ... this later FINISHED run of the same spec
    grouped_l03_a: str      # kept: its later run (sweep B) FAILED
    grouped_l03_b_failed: str
    single: list[str]       # l30, l31 (one invocation), l40 (another)


def make_paired_store(root: Path) -> PairedStore:
    root.mkdir(parents=True, exist_ok=True)
    uri = f"sqlite:///{root / 'mlflow.db'}"
    client = MlflowClient(tracking_uri=uri)
    exp = client.create_experiment(EXPERIMENT, artifact_location=(root / "artifacts").as_uri())

    a = _sweep(client, exp, "sweep swizzle=xcd,seed_xcd,grouped,xcd_grouped", T0_MS)
    t = T0_MS
    xcd_a = paired_job(client, exp, a, t + 1_000, "xcd", "l03", (1.25, 1.20, 1.30), FASTER,
                       l2=(20.0, 18.0, 22.0, "higher"))
    paired_job(client, exp, a, t + 2_000, "seed_xcd", "l03", (0.77, 0.75, 0.79), SLOWER,
               l2=(-5.0, -6.0, -4.0, "lower"))
    grouped_a = paired_job(client, exp, a, t + 3_000, "grouped", "l03", (1.002, 0.994, 1.010),
                           no_difference(0.994, 1.010), l2=(0.1, -0.2, 0.4, f"{Kind.NO_DIFFERENCE.word} (CI [-0.20, +0.40] pts)"))
    paired_job(client, exp, a, t + 4_000, "xcd_grouped", "l03", (1.001, 0.995, 1.007), no_difference(0.995, 1.007),
               same_order=True)
    paired_job(client, exp, a, t + 5_000, "xcd", "l12", (1.003, 0.990, 1.020), no_difference(0.990, 1.020))
    paired_job(client, exp, a, t + 6_000, "grouped", "l12", (0.998, 0.985, 1.011), no_difference(0.985, 1.011))
    paired_job(client, exp, a, t + 7_000, "xcd", HOSTILE_SHAPE, None, HOSTILE_VERDICT, preset=HOSTILE_SHAPE)
    client.set_terminated(a, "FINISHED", end_time=t + 20_000)

    b = _sweep(client, exp, "sweep swizzle=xcd,grouped", T0_MS + HOUR_MS)
    t = T0_MS + HOUR_MS
    xcd_b = paired_job(client, exp, b, t + 1_000, "xcd", "l03", (1.30, 1.28, 1.32), FASTER)
    grouped_b = paired_job(client, exp, b, t + 2_000, "grouped", "l03", None, "", status="FAILED")
    paired_job(client, exp, b, t + 3_000, "xcd", "l22", (0.999, 0.99, 1.01), no_difference(0.99, 1.01))
    client.set_terminated(b, "FINISHED", end_time=t + 20_000)

    single = single_runs(uri, EXPERIMENT, ["l30", "l31"]) + single_runs(uri, EXPERIMENT, ["l40"])
    return PairedStore(uri, a, b, xcd_a, xcd_b, grouped_a, grouped_b, single)


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> PairedStore:
    return make_paired_store(tmp_path_factory.mktemp("paired") / "store")


def _table(page: Path) -> pd.DataFrame:
    return pd.read_csv(page.parent / "table.csv")


def _cell(table: pd.DataFrame, shape: str, swizzle: str) -> pd.Series:
    rows = table[(table["shape"] == shape) & (table["swizzle"] == swizzle)]
    assert len(rows) == 1, rows
    return rows.iloc[0]


# --------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def sweep_a_page(store, tmp_path_factory) -> Path:
    return build_report(store.uri, EXPERIMENT, store.sweep_a, tmp_path_factory.mktemp("a") / "out")


def test_paired_results_need_no_identity_job(sweep_a_page):
    table = _table(sweep_a_page)
    assert "identity" not in set(table["swizzle"])
    assert table["id_run_id"].isna().all()                    # nothing joined to an identity run
    fast, slow, same = (_cell(table, "resnet-l03", s) for s in ("xcd", "seed_xcd", "xcd_grouped"))
    assert (fast["verdict"], fast["comparison"], fast["baseline"]) == (FASTER, "paired", "identity")
    assert (fast["speedup"], fast["speedup_lo"], fast["speedup_hi"]) == (1.25, 1.20, 1.30)
    assert (fast["l2_delta_pts"], fast["l2_delta_lo"], fast["l2_delta_hi"]) == (20.0, 18.0, 22.0)
    assert fast["l2_verdict"] == "higher" and fast["l2_source"] == "ncu" and fast["baseline_time_ms"] == 1.0
    assert bool(fast["best"])
    assert (slow["verdict"], slow["l2_verdict"]) == (SLOWER, "lower")
    assert same["verdict"] == SAME_ORDER                      # tagged compare.same_order=true
    noise = _cell(table, "resnet-l03", "grouped")
    assert noise["verdict"] == NO_DIFFERENCE
    assert noise["verdict_detail"] == no_difference(0.994, 1.010)
    assert _cell(table, HOSTILE_SHAPE, "xcd")["verdict"] == NO_COMPARISON

    text = sweep_a_page.read_text()
    assert "No identity run" not in text and "no identity baseline" not in text
    assert "7 cell(s) carry a paired comparison" in text
    assert f"xcd: 1 faster, 0 slower, 1 {NO_DIFFERENCE}, 1 no comparison (vs identity, 3 cells)" in text
    assert f"grouped: 0 faster, 0 slower, 2 {NO_DIFFERENCE} (vs identity, 2 cells)" in text
    assert "xcd_grouped: 0 faster, 0 slower, 1 same order as baseline" in text
    assert "xcd vs identity: speedup 1.250 [1.200, 1.300] (95 % CI), ΔL2 +20.00 points" in text
    assert "none beats identity beyond noise" in text           # group resnet-l12
    assert html.escape(no_difference(0.994, 1.010)) in text     # the job's own verdict text
    assert text.count('src="data:image/png;base64,') == 3       # heatmap, speedup, L2 vs speedup
    assert "the 95 % CI of the paired speedup (speedup_ci_lo, speedup_ci_hi)" in text
    assert "Runs without paired results" not in text            # the identity-run method is not in use


def test_speedup_error_bars_are_the_paired_ci(store, monkeypatch):
    bars: list[tuple[float, float, float]] = []
    original = Axes.errorbar

    def spy(self, x, y, *args, xerr=None, **kwargs):
        bars.extend(zip(x, xerr[0], xerr[1]))
        return original(self, x, y, *args, xerr=xerr, **kwargs)

    monkeypatch.setattr(Axes, "errorbar", spy)
    data = load_runs(MlflowClient(tracking_uri=store.uri), EXPERIMENT, Selection.sweep(store.sweep_a), store.uri)
    block = report.figure_speedup(report.build_comparison(data.runs))
    assert block.png_base64
    assert (1.25, pytest.approx(0.05), pytest.approx(0.05)) in [(x, lo, hi) for x, lo, hi in bars]
    assert (0.77, pytest.approx(0.02), pytest.approx(0.02)) in [(x, lo, hi) for x, lo, hi in bars]


def test_experiment_view_takes_the_latest_finished_run_per_spec(store, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert report.main(["--experiment", EXPERIMENT, "--experiment-view", "--tracking-uri", store.uri]) == 0
    page = Path(capsys.readouterr().out.strip())
    assert page == Path("reports", EXPERIMENT, "experiment", "index.html")
    table = _table(page)
    ids = set(table["run_id"])
    assert store.xcd_l03_b in ids and store.xcd_l03_a not in ids    # the later FINISHED run of the spec
    assert _cell(table, "resnet-l03", "xcd")["speedup"] == 1.30
    assert store.grouped_l03_a in ids                               # its later run FAILED: not "latest finished"
    assert store.grouped_l03_b_failed not in set(pd.read_csv(page.parent / "failed.csv")["run_id"])
    assert set(store.single) <= ids                                 # single runs, no sweep, included
    assert {"resnet-l12", "resnet-l22", "resnet-l30", "resnet-l40"} <= set(table["shape"])
    assert len(table) == 7 + 1 + 3                                  # sweep A's 7 specs, l22, three single runs
    text = page.read_text()
    assert "experiment view: the latest FINISHED run of each spec (spec_hash), over 13 job runs " \
           "(2 sweeps, 3 runs outside any sweep); 2 older or superseded runs left out" in text


def test_several_sweeps_by_id(store, tmp_path):
    page = report.build_report(store.uri, EXPERIMENT, out_dir=tmp_path / "ab",
                               selection=Selection("sweeps", (store.sweep_a, store.sweep_b)))
    table = _table(page)
    assert {"resnet-l12", "resnet-l22"} <= set(table["shape"])           # from A and from B
    assert not set(store.single) & set(table["run_id"])                 # single runs are in no sweep
    assert _cell(table, "resnet-l03", "xcd")["run_id"] == store.xcd_l03_b   # later run of the same cell
    failed = pd.read_csv(page.parent / "failed.csv")
    assert list(failed["run_id"]) == [store.grouped_l03_b_failed]
    text = page.read_text()
    assert f"Sweep run</th><td>{store.sweep_a} " in text and f"Sweep run</th><td>{store.sweep_b} " in text
    assert "1 finished run(s) were superseded by a later run" in text
    client = MlflowClient(tracking_uri=store.uri)
    assert not client.list_artifacts(store.sweep_b, "report")   # a report of two sweeps is attached to neither
    assert report.selection_from_args(_parser().parse_args(
        ["--experiment", "x", "--sweep", "a1", "--sweep", "b2"])) == Selection("sweeps", ("a1", "b2"))


def test_single_run_is_reported_by_its_own_id(store, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    first, second, other = store.single
    tags = MlflowClient(tracking_uri=store.uri).get_run(first).data.tags
    assert "mlflow.parentRunId" not in tags and tags[INVOCATION_TAG]   # how a single run is logged
    assert report.main(["--experiment", EXPERIMENT, "--run", first, "--tracking-uri", store.uri]) == 0
    page = Path(capsys.readouterr().out.strip())
    assert page == Path("reports", EXPERIMENT, f"run-{first}", "index.html")
    table = _table(page)
    assert set(table["run_id"]) == {first, second}          # its invocation's runs, not the other one's
    assert set(table["verdict"]) == {FASTER}
    assert f"{first} (igemm/xcd/resnet-l30/w8): job run, with the 2 run(s) of its Hydra job" in page.read_text()
    # A run logged without the invocation tag (a sweep's job) stands for itself.
    alone = build_report(store.uri, EXPERIMENT, out_dir=tmp_path / "alone",
                         selection=Selection("runs", (store.xcd_l03_a,)))
    assert list(_table(alone)["run_id"]) == [store.xcd_l03_a]


def test_unknown_or_wrong_ids_say_so_in_one_line(store, tmp_path, capsys):
    args = ["--experiment", EXPERIMENT, "--tracking-uri", store.uri, "--out", str(tmp_path)]
    assert report.main([*args, "--sweep", "0123abcd"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert err.startswith("error: no sweep run '0123abcd' in this tracking store; list the sweeps with: "
                          f"python -m harness.report --experiment {EXPERIMENT} --list-sweeps --tracking-uri ")
    assert report.main([*args, "--sweep", store.xcd_l03_a]) == 2
    err = capsys.readouterr().err
    assert f"is a job run, not a sweep run: report it with --run {store.xcd_l03_a}" in err
    assert report.main([*args, "--run", "nope"]) == 2
    assert "no run 'nope'" in capsys.readouterr().err
    assert report.main(["--experiment", "nope", "--tracking-uri", store.uri]) == 2
    assert "no MLflow experiment named 'nope' in this store; it has: " in capsys.readouterr().err
    assert report.main(["--experiment", EXPERIMENT, "--list-sweeps", "--tracking-uri", store.uri]) == 0
    listed = capsys.readouterr().out.splitlines()
    assert listed[0].startswith(store.sweep_b) and listed[1].startswith(store.sweep_a)   # newest first
    with pytest.raises(SystemExit):                                  # one view at a time
        _parser().parse_args(["--experiment", "x", "--sweep", "a", "--experiment-view"])


def test_hostile_text_is_escaped_in_paired_reports(sweep_a_page, tmp_path):
    text = sweep_a_page.read_text()
    assert HOSTILE not in text and "<script" not in text.lower()
    assert html.escape(HOSTILE_VERDICT) in text                       # the verdict tag, escaped
    # A baseline named with markup (compare.baseline is free text: a formula or a name).
    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path}/h.db")
    exp = client.create_experiment("hostile", artifact_location=(tmp_path / "art").as_uri())
    sweep = _sweep(client, exp, "sweep hostile", T0_MS)
    paired_job(client, exp, sweep, T0_MS + 1, "xcd", "l03", (1.2, 1.1, 1.3), FASTER, baseline=HOSTILE)
    page = build_report(f"sqlite:///{tmp_path}/h.db", "hostile", sweep, tmp_path / "out")
    text = page.read_text()
    assert HOSTILE not in text and "<script" not in text.lower()
    assert f"xcd vs {html.escape(HOSTILE)}: speedup 1.200" in text


# --------------------------------------------------------------------------------------
def test_cpu_only_says_not_timed_in_every_summary(tmp_path):
    uri = f"sqlite:///{tmp_path}/cpu.db"
    client = MlflowClient(tracking_uri=uri)
    exp = client.create_experiment(CPU_EXPERIMENT, artifact_location=(tmp_path / "art").as_uri())
    sweep = _sweep(client, exp, "sweep swizzle=identity,xcd,grouped shape=tiny", T0_MS)
    cpu = dict(kernel="direct", preset="tiny", warps=4, timed=False)
    # simulated deltas with no band, logged as runs before issue 51 logged them: zero-width
    # intervals, "higher" and "exact"; the report claims no effect for them
    for i, shape in enumerate(("t1", "t2")):
        paired_job(client, exp, sweep, T0_MS + 10 * i, "identity", shape, None, "", role="baseline", **cpu)
        paired_job(client, exp, sweep, T0_MS + 10 * i + 1, "xcd", shape, None, CPU_VERDICT,
                   l2=(3.0, 3.0, 3.0, "higher"), **cpu)
        paired_job(client, exp, sweep, T0_MS + 10 * i + 2, "grouped", shape, None, CPU_VERDICT,
                   l2=(0.0, 0.0, 0.0, f"{Kind.NO_DIFFERENCE.word} (exact: +0.00 pts)"), **cpu)
    page = build_report(uri, CPU_EXPERIMENT, sweep, tmp_path / "out")
    table = _table(page)
    assert set(table.loc[table["swizzle"] != "identity", "verdict"]) == {NOT_TIMED}
    assert set(table.loc[table["swizzle"] == "identity", "verdict"]) == {"baseline"}
    assert set(_cell(table, "tiny-t1", "xcd")[["l2_verdict", "l2_source"]]) == {L2_PREDICTED, "sim"}
    text = page.read_text()
    assert "Time verdicts over 4 compared cells: not timed." in text
    assert f"xcd: not timed (vs identity, 2 cells); L2: 0 higher, 0 lower, 2 {L2_PREDICTED}" in text
    assert f"grouped: not timed (vs identity, 2 cells); L2: 0 higher, 0 lower, 2 {L2_PREDICTED}" in text
    assert verdict_text(unvalidated_l2_verdict(3.0)) in text and "exact" not in text
    best = report.best_per_group(report.build_comparison(
        load_runs(client, CPU_EXPERIMENT, Selection.sweep(sweep), uri).runs))
    # nothing timed: the swizzles ranked by their predicted ΔL2, said to be a prediction, and L2 verdict counts
    assert list(best["best"]) == ["prediction, ΔL2 points vs identity (not validated on mi300x): xcd +3.00, "
                                  "grouped +0.00"] * 2, list(best["best"])
    assert list(best["verdicts"]) == [f"0 higher, 0 lower, 2 {L2_PREDICTED}"] * 2
    assert "timed its baseline" not in text and "95 % CI" not in text and "± 0.00" not in text
    assert "Skipped: not timed: no cell has a measured speedup" in text
    assert "none beats" not in text and "within noise" not in text and "No identity run" not in text
    assert text.count('src="data:image/png;base64,') == 1              # the simulated L2 delta heatmap
