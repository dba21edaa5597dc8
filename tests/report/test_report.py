"""harness.report on a synthetic MLflow store with known numbers (CPU only, no GPU).

The store (``make_store``) holds two sweeps of experiment ``synthetic``; the latest one has:

* group igemm · resnet-l03 · w8, timed and profiled:
  identity 1.00 ms [0.98, 1.02], L2 50 ± 1 %;
  xcd      0.80 ms [0.79, 0.81], L2 70 ± 1 %  -> speedup 1.25 [1.210, 1.291] faster, L2 +20 higher;
  seed_xcd 1.30 ms [1.28, 1.32], L2 45 ± 2 %  -> speedup 0.769 [0.742, 0.797] slower, L2 -5 lower;
  grouped  0.99 ms [0.95, 1.03], L2 51 ± 1 %  -> speedup 1.010 [0.951, 1.074] within noise, L2 +1 noise;
* group igemm · <hostile shape name> · w8: identity and xcd, xcd within noise;
* group direct · tiny-t1 · w4, CPU-only (verified, not timed);
* a FAILED run with a hostile reason, and a run left RUNNING (crashed job).

``make_store`` is reused by tests/report/test_browser.py, tests/report/test_views.py and
tests/storage/test_mlflow_server.py.
"""
from __future__ import annotations

import html
import logging
import os
import math
import re
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pytest
from mlflow.entities import Metric, Param, RunTag
from mlflow.tracking import MlflowClient

from harness import report
from harness.report import FASTER, NOISE, NOT_TIMED, SLOWER, build_report
from harness.storage.new_store import seed_new_store

HOSTILE = "<script>alert(1)</script>"
HOSTILE_SHAPE = HOSTILE + " $\\frac{"        # also an unbalanced mathtext for the figures
HOSTILE_REASON = f'permutation gate: "{HOSTILE}" & pid 7 maps twice'
EXPERIMENT = "synthetic"
T0_MS = 1_700_000_000_000                     # fixed epoch start of the synthetic sweep (ms)


@dataclass(frozen=True)
class SyntheticStore:
    """Where the synthetic store is, and the ids a test needs."""

    uri: str
    experiment: str
    sweep_run_id: str
    older_sweep_run_id: str
    failed_run_id: str
    running_run_id: str


def job_params(kernel: str, swizzle: str, shape: str, preset: str, warps: int, target: str) -> dict[str, str]:
    """The spec params of a job run (as ``JobSpec.as_params``, fewer shape fields)."""
    return {"kernel": kernel, "swizzle": swizzle, "num_warps": str(warps), "num_stages": "3",
            "shape_preset": preset, "shape.name": shape, "shape.N": "1", "shape.dtype": "float16",
            "group_size": "8", "num_xcds": "1", "target": target, "seed": "0",
            "tile.BLOCK_M": "128", "tile.BLOCK_N": "128", "tile.BLOCK_K": "64"}


def _job(client: MlflowClient, exp_id: str, sweep_id: str | None, start_ms: int, *, kernel: str, swizzle: str,
         shape: str, preset: str, warps: int, metrics: dict[str, float], status: str = "FINISHED",
         reason: str = "verified: permutation; max_rel_err ok", extra_tags: dict[str, str] | None = None,
         timed: bool = True, extra_params: dict[str, str] | None = None) -> str:
    """One job run as harness.storage.tracking logs it (a child of ``sweep_id``, or a single run
    when it is None); returns its run id."""
    shape_label = shape if shape == preset else f"{preset}-{shape}"
    parent = {"mlflow.parentRunId": sweep_id, "swizzlebench.sweep_run_id": sweep_id} if sweep_id else {}
    tags = {"swizzlebench.kind": "job", **parent,
            "git_commit": "abc123", "torch_version": "2.9.0", "triton_version": "3.5.0",
            "target": "h100" if timed else "mi300x", "device": "NVIDIA H100 80GB HBM3" if timed else
            "cpu (Triton interpreter)", "mode": "gpu" if timed else "interpreter",
            "timing": "measured: triton.testing.do_bench, L2 flushed between reps" if timed else
            "not measured: no GPU", **(extra_tags or {})}
    run = client.create_run(exp_id, run_name=f"{kernel}/{swizzle}/{shape_label}/w{warps}", start_time=start_ms,
                            tags=tags)
    params = {**job_params(kernel, swizzle, shape, preset, warps, tags["target"]), **(extra_params or {})}
    client.log_batch(run.info.run_id, params=[Param(k, v) for k, v in params.items()],
                     metrics=[Metric(k, float(v), start_ms, 0) for k, v in metrics.items()],
                     tags=[RunTag("status_reason", reason)] if status != "RUNNING" else [])
    if status != "RUNNING":
        client.set_terminated(run.info.run_id, status, end_time=start_ms + 5_000)
    return run.info.run_id


def _timed(median: float, p20: float, p80: float, l2: float | None = None, l2_std: float | None = None,
           vendor: float = 0.9, sim: float | None = None) -> dict[str, float]:
    m = {"time_ms_median": median, "time_ms_p20": p20, "time_ms_p80": p80, "tflops": 100.0 / median,
         "vendor_time_ms": vendor, "ratio_to_vendor": median / vendor, "max_rel_err": 1e-3}
    if l2 is not None:
        m.update({"l2_hit_rate": l2, "l2_hit_rate_std": l2_std or 0.0, "l2_hits": l2 * 10, "l2_misses": 1000 - l2 * 10})
    if sim is not None:
        m["sim_l2_hit_rate"] = sim
    return m


def store_client(uri: str) -> MlflowClient:
    """A client of the new SQLite store at ``uri``, made as the harness makes one (a copy of
    the migrated empty store, harness.storage.new_store: no migrations run here)."""
    seed_new_store(uri)
    return MlflowClient(tracking_uri=uri)


def new_store(root: Path, experiment: str) -> tuple[str, MlflowClient, str]:
    """A new SQLite store with local artifacts under ``root`` holding ``experiment``:
    its URI, a client and the experiment's id."""
    root.mkdir(parents=True, exist_ok=True)
    uri = f"sqlite:///{root / 'mlflow.db'}"
    client = store_client(uri)
    return uri, client, client.create_experiment(experiment, artifact_location=(root / "artifacts").as_uri())


def make_store(root: Path) -> SyntheticStore:
    """Write the synthetic store under ``root`` (SQLite + local artifacts)."""
    uri, client, exp_id = new_store(root, EXPERIMENT)
    sweep_tags = {"swizzlebench.kind": "sweep", "git_commit": "abc123"}

    older = client.create_run(exp_id, run_name="sweep older", start_time=T0_MS - 86_400_000, tags=sweep_tags)
    _job(client, exp_id, older.info.run_id, T0_MS - 86_000_000, kernel="igemm", swizzle="identity",
         shape="old-shape", preset="old-shape", warps=8, metrics=_timed(2.0, 1.9, 2.1))
    client.set_terminated(older.info.run_id, "FINISHED", end_time=T0_MS - 85_000_000)

    sweep = client.create_run(exp_id, run_name="sweep swizzle=identity,xcd,seed_xcd,grouped",
                              start_time=T0_MS, tags=sweep_tags)
    client.log_param(sweep.info.run_id, "sweep.overrides", "swizzle=identity,xcd,seed_xcd,grouped")
    sid = sweep.info.run_id
    prof = {"profiler": "ncu", "profiler_version": "2025.1", "cache_control": "all"}
    t = T0_MS
    common = dict(kernel="igemm", shape="l03", preset="resnet", warps=8, extra_tags=prof)
    _job(client, exp_id, sid, t + 1_000, swizzle="identity", metrics=_timed(1.00, 0.98, 1.02, 50.0, 1.0, sim=48.0), **common)
    _job(client, exp_id, sid, t + 2_000, swizzle="xcd", metrics=_timed(0.80, 0.79, 0.81, 70.0, 1.0, sim=73.0), **common)
    _job(client, exp_id, sid, t + 3_000, swizzle="seed_xcd", metrics=_timed(1.30, 1.28, 1.32, 45.0, 2.0), **common)
    _job(client, exp_id, sid, t + 4_000, swizzle="grouped", metrics=_timed(0.99, 0.95, 1.03, 51.0, 1.0), **common)
    hostile = dict(kernel="igemm", shape=HOSTILE_SHAPE, preset=HOSTILE_SHAPE, warps=8, extra_tags=prof)
    _job(client, exp_id, sid, t + 5_000, swizzle="identity", metrics=_timed(2.0, 1.9, 2.1, 30.0, 0.5), **hostile)
    _job(client, exp_id, sid, t + 6_000, swizzle="xcd", metrics=_timed(1.95, 1.85, 2.05, 30.2, 0.5), **hostile)
    cpu = dict(kernel="direct", shape="t1", preset="tiny", warps=4, timed=False)
    _job(client, exp_id, sid, t + 7_000, swizzle="identity", metrics={"max_rel_err": 2e-3}, **cpu)
    _job(client, exp_id, sid, t + 8_000, swizzle="xcd", metrics={"max_rel_err": 2e-3}, **cpu)
    failed = _job(client, exp_id, sid, t + 9_000, kernel="igemm", swizzle="seed_patch", shape="l03",
                  preset="resnet", warps=8, metrics={}, status="FAILED", reason=HOSTILE_REASON,
                  extra_tags={"failed_gate": "permutation"})
    running = _job(client, exp_id, sid, t + 10_000, kernel="igemm", swizzle="xcd_grouped", shape="l03",
                   preset="resnet", warps=8, metrics={}, status="RUNNING")
    client.set_terminated(sid, "FINISHED", end_time=t + 20_000)
    return SyntheticStore(uri, EXPERIMENT, sid, older.info.run_id, failed, running)


# --------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def built(tmp_path_factory) -> tuple[SyntheticStore, Path]:
    """The store and its report (default sweep = the latest), built once per module."""
    root = tmp_path_factory.mktemp("report")
    store = make_store(root / "store")
    return store, build_report(store.uri, store.experiment, out_dir=root / "out")


def _cell(table: pd.DataFrame, shape: str, swizzle: str) -> pd.Series:
    rows = table[(table["shape"] == shape) & (table["swizzle"] == swizzle)]
    assert len(rows) == 1, rows
    return rows.iloc[0]


def test_known_verdicts_and_deltas(built):
    _, page = built
    table = pd.read_csv(page.parent / "table.csv", keep_default_na=True)
    fast, slow, noise = (_cell(table, "resnet-l03", s) for s in ("xcd", "seed_xcd", "grouped"))

    assert fast["verdict"] == FASTER
    assert fast["speedup"] == pytest.approx(1.25)
    assert fast["speedup_lo"] == pytest.approx(0.98 / 0.81)
    assert fast["speedup_hi"] == pytest.approx(1.02 / 0.79)
    assert fast["l2_delta_pts"] == pytest.approx(20.0)
    assert fast["l2_band_pts"] == pytest.approx(2 * math.sqrt(2))
    assert fast["l2_verdict"] == "higher"
    assert fast["ratio_to_vendor"] == pytest.approx(0.8 / 0.9)
    assert bool(fast["best"]) is True

    assert slow["verdict"] == SLOWER
    assert slow["speedup"] == pytest.approx(1.0 / 1.3)
    assert slow["speedup_hi"] == pytest.approx(1.02 / 1.28)
    assert slow["l2_delta_pts"] == pytest.approx(-5.0)
    assert slow["l2_verdict"] == "lower"

    assert noise["verdict"] == NOISE
    assert noise["speedup_lo"] < 1 < noise["speedup_hi"]
    assert noise["l2_delta_pts"] == pytest.approx(1.0)
    assert noise["l2_verdict"] == NOISE
    assert not bool(noise["best"]) and not bool(slow["best"])

    ident = _cell(table, "resnet-l03", "identity")
    assert ident["verdict"] == "baseline"

    hostile = _cell(table, HOSTILE_SHAPE, "xcd")
    assert hostile["verdict"] == NOISE            # 2.0/1.95 = 1.026 but interval [0.93, 1.14]
    assert hostile["l2_delta_pts"] == pytest.approx(0.2)
    assert hostile["l2_verdict"] == NOISE         # band 2*sqrt(0.5) = 1.41 points

    cpu = _cell(table, "tiny-t1", "xcd")
    assert cpu["verdict"] == NOT_TIMED
    assert cpu["l2_verdict"] == "not profiled"
    assert math.isnan(cpu["speedup"])


def test_csv_holds_latest_sweep_only(built):
    store, page = built
    table = pd.read_csv(page.parent / "table.csv")
    assert len(table) == 8                                        # 4 + 2 + 2 finished cells
    assert "old-shape" not in set(table["shape"])                 # the older sweep is not mixed in
    assert set(table["swizzle"]) == {"identity", "xcd", "seed_xcd", "grouped"}
    assert list(table.columns) == report.TABLE_COLUMNS
    assert table["id_run_id"].notna().all()


def test_failed_runs_listed_with_reasons(built):
    store, page = built
    failed = pd.read_csv(page.parent / "failed.csv").set_index("run_id")
    assert set(failed.index) == {store.failed_run_id, store.running_run_id}
    assert failed.loc[store.failed_run_id, "reason"] == HOSTILE_REASON
    assert failed.loc[store.failed_run_id, "gate"] == "permutation"
    assert "never finished (status RUNNING)" in failed.loc[store.running_run_id, "reason"]
    text = page.read_text()
    assert html.escape(HOSTILE_REASON) in text
    assert "never finished (status RUNNING)" in text


def test_hostile_text_is_escaped(built):
    _, page = built
    text = page.read_text()
    assert HOSTILE not in text
    assert "<script" not in text.lower()                          # the page has no script at all
    assert html.escape(HOSTILE_SHAPE) in text


def test_page_is_self_contained(built):
    _, page = built
    text = page.read_text()
    assert "http://" not in text and "https://" not in text
    assert " href=" not in text
    assert text.count('<img alt="') == text.count('src="data:image/png;base64,') == 4   # all four figures
    assert "Best swizzle per group" in text
    assert "none beats identity beyond noise" in text               # the hostile-shape group
    assert "not timed: no comparison of speed possible" in text      # the CPU group
    assert "NVIDIA H100 80GB HBM3" in text and "MIXED" in text       # CPU runs sit in the same sweep
    assert "ncu 2025.1" in text
    # Time taken: first job start (t + 1 s) to last job end (t + 9 s + 5 s); one run never ended.
    assert "0 min 13 s" in text and "1 run(s) without an end time" in text


def test_report_attached_to_sweep(built):
    store, _ = built
    client = MlflowClient(tracking_uri=store.uri)
    names = {a.path for a in client.list_artifacts(store.sweep_run_id, "report")}
    assert {"report/index.html", "report/table.csv", "report/results.json", "report/failed.csv"} <= names


def test_results_json_holds_the_table_s_cells_and_fields(built):
    """results.json is table.csv as one JSON object per cell: the same cells, the same fields,
    the same values (a missing one null)."""
    import json

    _, page = built
    table = pd.read_csv(page.parent / "table.csv")
    cells = json.loads((page.parent / "results.json").read_text())
    assert len(cells) == len(table) and all(list(c) == list(table.columns) for c in cells)
    for cell, (_, row) in zip(cells, table.iterrows()):
        for key, value in cell.items():
            if value is None or value == "":   # CSV reads an empty field back as NaN
                assert pd.isna(row[key]), key
            elif isinstance(value, float):
                assert row[key] == pytest.approx(value), key
            else:
                assert str(row[key]) == str(value) or row[key] == value, key


def test_explicit_older_sweep(built, tmp_path):
    store, _ = built
    page = build_report(store.uri, store.experiment, store.older_sweep_run_id, tmp_path / "old")
    table = pd.read_csv(page.parent / "table.csv")
    assert list(table["shape"]) == ["old-shape"]
    assert "only identity ran in this group" in page.read_text()


def test_no_sweep_falls_back_to_the_experiment_view(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = store_client(uri)
    exp_id = client.create_experiment("loose", artifact_location=(tmp_path / "art").as_uri())
    for swizzle in ("identity", "xcd"):
        run = client.create_run(exp_id, run_name=swizzle, tags={"swizzlebench.kind": "job", "device": "cpu"})
        client.log_batch(run.info.run_id, params=[Param("kernel", "direct"), Param("swizzle", swizzle),
                                                  Param("num_warps", "4"), Param("shape.name", "t1"),
                                                  Param("shape_preset", "tiny")],
                         metrics=[Metric("max_rel_err", 1e-3, 0, 0)])
        client.set_terminated(run.info.run_id, "FINISHED")
    page = build_report(uri, "loose")
    assert page == Path("reports/loose/experiment/index.html")
    text = page.read_text()
    assert "none in this experiment: the report is the experiment view" in text
    # CPU only: every figure is skipped with a sentence saying why.
    assert "data:image/png" not in text
    assert text.count("Skipped:") == 4
    assert set(pd.read_csv(page.parent / "table.csv")["verdict"]) == {"baseline", NOT_TIMED}


def test_unknown_experiment_and_bad_run_id(built, tmp_path):
    store, _ = built
    with pytest.raises(LookupError):
        build_report(store.uri, "no-such-experiment", out_dir=tmp_path)
    with pytest.raises(ValueError):
        build_report(store.uri, store.experiment, "x' OR '1'='1", out_dir=tmp_path)


def test_cli(built, tmp_path, capsys):
    store, _ = built
    out = tmp_path / "cli"
    rc = report.main(["--experiment", store.experiment, "--sweep", store.sweep_run_id,
                      "--out", str(out), "--tracking-uri", store.uri])
    assert rc == 0
    assert capsys.readouterr().out.strip() == str(out / "index.html")
    assert (out / "table.csv").is_file()
    assert report.main(["--experiment", "nope", "--tracking-uri", store.uri, "--out", str(out)]) == 2


def test_verdict_rules_at_the_edges():
    assert report.identity_time_verdict(1.2, 1.0, 1.4) == NOISE          # touching 1 is not "above 1"
    assert report.identity_time_verdict(1.2, 1.0001, 1.4) == FASTER
    assert report.identity_time_verdict(0.8, 0.7, 1.0) == NOISE
    assert report.identity_time_verdict(0.8, 0.7, 0.9999) == SLOWER
    assert report.identity_time_verdict(float("nan"), float("nan"), float("nan")) == NOT_TIMED
    band = report.l2_band(pd.Series([0.0, 3.0]), pd.Series([0.0, 4.0]))
    assert list(band) == [report.L2_BAND_FLOOR_POINTS, 10.0]      # floor; 2 * 5 points
    assert report.identity_l2_verdict(0.4, 0.5) == NOISE
    assert report.identity_l2_verdict(-0.6, 0.5) == "lower"


# -- the Hydra callback hook -------------------------------------------------------------
def _callback_config(uri: str, experiment: str):
    from omegaconf import OmegaConf

    # What Hydra hands the callback: the task config plus the hydra node (the launch dir).
    return OmegaConf.create({"tracking": {"uri": uri}, "experiment": experiment,
                             "hydra": {"runtime": {"cwd": os.getcwd()}}})


def test_callback_builds_report_at_multirun_end(tmp_path, monkeypatch, caplog):
    from harness.callbacks import SWEEP_ENV, MlflowSweepCallback

    store = make_store(tmp_path / "store")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(SWEEP_ENV, store.sweep_run_id)
    with caplog.at_level(logging.INFO, logger="harness.callbacks"):
        MlflowSweepCallback().on_multirun_end(_callback_config(store.uri, store.experiment))
    page = tmp_path / "reports" / store.experiment / store.sweep_run_id / "index.html"
    assert page.is_file()
    assert str(Path("reports") / store.experiment / store.sweep_run_id / "index.html") in caplog.text


def test_callback_logs_report_failure_without_raising(tmp_path, monkeypatch, caplog):
    from harness.callbacks import SWEEP_ENV, MlflowSweepCallback

    def broken(*args, **kwargs):
        raise RuntimeError("report exploded")

    store = make_store(tmp_path / "store")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(SWEEP_ENV, store.sweep_run_id)
    monkeypatch.setattr(report, "build_report", broken)
    with caplog.at_level(logging.INFO, logger="harness.callbacks"):
        MlflowSweepCallback().on_multirun_end(_callback_config(store.uri, store.experiment))
    assert "report exploded" in caplog.text
    assert MlflowClient(tracking_uri=store.uri).get_run(store.sweep_run_id).info.status == "FINISHED"


def test_same_tile_order_as_identity_is_never_a_speedup(tmp_path):
    """xcd with num_xcds=1 launches identity's order: a 'faster' time there is noise (seen on an H200)."""
    client = store_client(f"sqlite:///{tmp_path}/s.db")
    exp = client.create_experiment("same")
    sweep = client.create_run(exp, run_name="sweep", tags={"swizzlebench.kind": "sweep"}).info.run_id
    for i, (swizzle, t, h) in enumerate([("identity", 0.0332, "aaaa"), ("xcd", 0.0199, "aaaa"),
                                          ("grouped", 0.0150, "bbbb")]):
        rid = _job(client, exp, sweep, 1_000 + i, kernel="igemm", swizzle=swizzle, shape="l08", preset="resnet",
                   warps=8, metrics={"time_ms_median": t, "time_ms_p20": t * 0.99, "time_ms_p80": t * 1.01})
        client.log_param(rid, "remap.hash", h)
    client.set_terminated(sweep, "FINISHED")
    out = report.build_report(f"sqlite:///{tmp_path}/s.db", "same", sweep, tmp_path / "r")
    table = pd.read_csv(out.parent / "table.csv")
    verdicts = dict(zip(table["swizzle"], table["verdict"]))
    assert verdicts["xcd"] == report.SAME_ORDER and verdicts["grouped"] == report.FASTER
    assert "run-to-run noise between separate runs" in out.read_text()


def test_same_order_cells_read_the_same_in_the_job_line_and_the_report(tmp_path):
    """A paired cell whose candidate launches its baseline's tile order: the job records its
    measured speedup as the remap code's own cost, and the report shows that very text."""
    from harness.measure.paired import record_speedup
    from harness.run.progress import progress_line
    from harness.job.result import FINISHED, Comparison, JobResult
    from harness.storage.run_fields import run_tags
    from harness.measure.stats import PairedEstimate

    client = store_client(f"sqlite:///{tmp_path}/s.db")
    exp = client.create_experiment("same-paired")
    sweep = client.create_run(exp, run_name="sweep", tags={"swizzlebench.kind": "sweep"}).info.run_id
    lines = {}
    for i, (swizzle, same, est) in enumerate([("grouped", "true", PairedEstimate(0.9849, 0.9801, 0.9897, 30)),
                                               ("scatter", "false", PairedEstimate(0.80, 0.79, 0.81, 30))]):
        result = JobResult(run_name=f"igemm/{swizzle}/resnet-l02/w8", params={"compare.baseline": "identity"},
                           status=FINISHED)
        result.comparison = Comparison(role="candidate", same_order=same == "true")
        result.metrics.update({"time_ms_median": 0.0176, "time_ms_p20": 0.0173, "time_ms_p80": 0.0182,
                               "tflops": 46.8, "vendor_time_ms": 0.0139, "max_rel_err": 3e-4,
                               "baseline_time_ms": 0.0173})
        record_speedup(result, est, 0.01)
        lines[swizzle] = progress_line("[job 0 | 1/1]", result)
        _job(client, exp, sweep, 1_000 + i, kernel="igemm", swizzle=swizzle, shape="l02", preset="resnet", warps=8,
             metrics=result.metrics, extra_tags=run_tags(result), extra_params={"compare.baseline": "identity"})
    client.set_terminated(sweep, "FINISHED")
    out = report.build_report(f"sqlite:///{tmp_path}/s.db", "same-paired", sweep, tmp_path / "r")
    table = pd.read_csv(out.parent / "table.csv").set_index("swizzle")
    same_text = "same tile order; code cost x0.985 [0.980, 0.990] (slower)"
    assert same_text in lines["grouped"]
    assert table.loc["grouped", "verdict"] == report.SAME_ORDER
    assert table.loc["grouped", "verdict_detail"] == same_text
    assert same_text in html.unescape(out.read_text())
    assert table.loc["scatter", "verdict"] == SLOWER and "code cost" not in lines["scatter"]


def test_timing_row_summarises_round_counts():
    from harness.report.summary import _timing

    texts = [f"measured: {n} interleaved rounds of candidate, baseline, vendor (3 launches each, median), "
             "L2 flushed before every launch" for n in (20, 40, 40, 90, 5000)]
    row = _timing(pd.DataFrame({"tags.timing": texts}))
    assert row.count("interleaved rounds") == 1
    assert row.endswith("(N = rounds per job: min 20, median 40, max 5000 over 5 jobs)")
    assert _timing(pd.DataFrame({"tags.timing": ["not measured: no GPU"] * 3})) == "not measured: no GPU"


def test_cells_name_their_config_and_flag_near_tie_choices(tmp_path):
    """Every cell says which config it was measured on (tune mode's choice, or the configured
    tiles); a tuned config chosen among near-equal candidates (tag tune.near_tie=true) is
    flagged in its row and counted in a note; the labels are text, escaped."""
    from tests.report.pages import cell_rows, section

    client = store_client(f"sqlite:///{tmp_path}/t.db")
    exp = client.create_experiment("tuned")
    sweep = client.create_run(exp, run_name="sweep", tags={"swizzlebench.kind": "sweep"}).info.run_id
    hostile_config = f"M128 N64 K64 {HOSTILE} w4 s3"
    tuned = {"l03": (hostile_config, "true", f"M64 N64 K64 w4 s3 +0.30 % [-0.20, +0.80] tied; {HOSTILE}"),
             "l12": ("M64 N128 K32 w8 s4", "false", "M64 N64 K32 w4 s3 +4.10 % [+3.90, +4.30]")}
    t = 1_000
    for shape, (label, near, runner_ups) in tuned.items():
        for swizzle, ms in (("identity", 1.0), ("xcd", 0.8)):
            t += 1
            _job(client, exp, sweep, t, kernel="igemm_fast", swizzle=swizzle, shape=shape, preset="resnet", warps=8,
                 metrics=_timed(ms, ms * 0.99, ms * 1.01), extra_tags={"tune.near_tie": near, "tune.rule": "r"},
                 extra_params={"tune.config": label, "tune.runner_ups": runner_ups})
    for swizzle, ms in (("identity", 1.0), ("xcd", 0.9)):   # not tuned: the configured config
        t += 1
        _job(client, exp, sweep, t, kernel="igemm", swizzle=swizzle, shape="l20", preset="resnet", warps=8,
             metrics=_timed(ms, ms * 0.99, ms * 1.01))
    client.set_terminated(sweep, "FINISHED")
    out = report.build_report(f"sqlite:///{tmp_path}/t.db", "tuned", sweep, tmp_path / "r")

    table = pd.read_csv(out.parent / "table.csv").set_index(["shape", "swizzle"])
    assert table.loc[("resnet-l03", "xcd"), "config"] == hostile_config
    assert table.loc[("resnet-l12", "xcd"), "config"] == "M64 N128 K32 w8 s4"
    assert table.loc[("resnet-l20", "xcd"), "config"] == "M128 N128 K64 w8 s3"       # tile.* params, warps, stages
    assert set(table.index[table["tune_near_tie"]]) == {("resnet-l03", "identity"), ("resnet-l03", "xcd")}
    assert table.loc[("resnet-l03", "xcd"), "tune_runner_ups"].endswith(HOSTILE)

    text = out.read_text()
    assert HOSTILE not in text and "<script" not in text.lower()
    part = section(text, "<h2>All cells</h2>", "<h2>Failed")
    rows = {(r["Shape"], r["Swizzle"]): r for r in cell_rows(part)}
    col = "Config measured on"
    assert rows[("resnet-l03", "xcd")][col] == f"{hostile_config} [near-tie config]"
    assert rows[("resnet-l03", "identity")][col] == f"{hostile_config} [near-tie config]"
    assert rows[("resnet-l12", "xcd")][col] == "M64 N128 K32 w8 s4"
    assert rows[("resnet-l20", "xcd")][col] == "M128 N128 K64 w8 s3"
    assert part.count('<dd class="cfg near-tie">') == 2
    assert f'<dd class="cfg near-tie">{html.escape(hostile_config)} [near-tie config]</dd>' in part
    assert "1 compared cell(s) were measured on a near-tie config" in text


def test_cells_say_what_bounds_them_when_the_target_has_a_roofline(tmp_path):
    """A run tagged ``bound`` (harness.measure.roofline) shows it in a "What bounds it" column
    and table.csv; a report of runs without the tag has no such column."""
    from tests.report.pages import cell_rows, section

    client = store_client(f"sqlite:///{tmp_path}/t.db")
    exp = client.create_experiment("roof")
    sweep = client.create_run(exp, run_name="sweep", tags={"swizzlebench.kind": "sweep"}).info.run_id
    for t, (swizzle, ms, bound) in enumerate((("identity", 1.0, "compute-bound, at 64 % of peak"),
                                              ("xcd", 0.9, f"memory-bound, at 40 % of its roofline {HOSTILE}")), 1):
        _job(client, exp, sweep, 1000 + t, kernel="igemm", swizzle=swizzle, shape="l03", preset="resnet", warps=8,
             metrics={**_timed(ms, ms * 0.99, ms * 1.01), "pct_of_peak": 64.0 / ms}, extra_tags={"bound": bound})
    client.set_terminated(sweep, "FINISHED")
    out = report.build_report(f"sqlite:///{tmp_path}/t.db", "roof", sweep, tmp_path / "r")
    table = pd.read_csv(out.parent / "table.csv").set_index(["shape", "swizzle"])
    assert table.loc[("resnet-l03", "identity"), "bound"] == "compute-bound, at 64 % of peak"
    assert table.loc[("resnet-l03", "identity"), "pct_of_peak"] == 64.0
    text = out.read_text()
    assert HOSTILE not in text
    part = section(text, "<h2>All cells</h2>", "<h2>Failed")
    col = "What bounds it (roofline)"
    rows = {r["Swizzle"]: r for r in cell_rows(part)}
    assert rows["identity"][col] == "compute-bound, at 64 % of peak"
    assert rows["xcd"][col].startswith("memory-bound, at 40 % of its roofline")


ROOFLINE_TITLE = "Roofline: each cell from its baseline (open circle) to its swizzle (dot)"


def _roofline_store(tmp_path: Path, with_readings: bool, logged_ceilings: bool = True) -> Path:
    """A sweep of two paired cells (xcd faster, grouped slower, vs identity) on one layer,
    with or without roofline readings; returns its report page."""
    client = store_client(f"sqlite:///{tmp_path}/t.db")
    exp = client.create_experiment("roof")
    sweep = client.create_run(exp, run_name="sweep", tags={"swizzlebench.kind": "sweep"}).info.run_id
    for t, (swizzle, ms, verdict, bound) in enumerate((("xcd", 0.8, "faster", "memory-bound, at 62 % of its roofline"),
                                                       ("grouped", 1.2, "slower", "compute-bound, at 21 % of peak")), 1):
        metrics = {**_timed(ms, ms * 0.99, ms * 1.01), "baseline_time_ms": 1.0, "speedup": 1.0 / ms,
                   "speedup_ci_lo": 0.99 / ms, "speedup_ci_hi": 1.01 / ms}
        tags = {"compare.role": "candidate", "verdict": verdict}
        params = {"compare.baseline": "identity"}
        if with_readings:   # 100 / ms TFLOP/s (as _timed), peak 400 TFLOP/s, 2e12 B/s: ridge 200 FLOP/byte
            intensity = 100.0 * t * t          # xcd 100 FLOP/byte (memory-bound), grouped 400 (compute-bound)
            metrics.update({"arith_intensity": intensity, "pct_of_peak": 25.0 / ms,
                            "pct_of_roofline": 100 * (100 / ms) / min(400.0, intensity * 2.0)})
            tags["bound"] = bound
            if logged_ceilings:
                params.update({"roofline.peak_tflops": "400", "roofline.dram_bytes_per_s": "2e+12"})
        _job(client, exp, sweep, 1000 + t, kernel="igemm", swizzle=swizzle, shape="l03", preset="resnet", warps=8,
             metrics=metrics, extra_tags=tags, extra_params=params)
    client.set_terminated(sweep, "FINISHED")
    return report.build_report(f"sqlite:///{tmp_path}/t.db", "roof", sweep, tmp_path / "r")


def test_roofline_figure_only_when_the_runs_have_roofline_readings(tmp_path):
    """Runs with roofline readings get a roofline figure (one more image, its caption); runs
    without get no figure and no 'Skipped' block for it."""
    with_page = _roofline_store(tmp_path / "with", with_readings=True)
    without_page = _roofline_store(tmp_path / "without", with_readings=False)
    with_text, without_text = with_page.read_text(), without_page.read_text()
    assert ROOFLINE_TITLE in with_text and "2 cells." in with_text
    assert ROOFLINE_TITLE not in without_text
    images = with_text.count('src="data:image/png;base64,')
    assert images == without_text.count('src="data:image/png;base64,') + 1
    assert with_text.count("Skipped:") == without_text.count("Skipped:")


def test_roofline_figure_draws_ceilings_and_one_arrow_per_cell(tmp_path):
    """The figure's ceilings are the logged ones, or, for runs that did not log them, what the
    readings imply (peak from pct_of_peak, bandwidth from the memory-bound cells); each cell's
    arrow runs from its baseline's TFLOP/s (same FLOP in the baseline's time) to its candidate's."""
    from harness.report.compare import build_comparison
    from harness.report.figures import _ceilings, figure_roofline, roofline_points
    from harness.report.views import Selection, load_runs

    for logged in (True, False):
        root = tmp_path / f"logged{logged}"
        page = _roofline_store(root, with_readings=True, logged_ceilings=logged)
        assert ROOFLINE_TITLE in page.read_text()
        client = MlflowClient(tracking_uri=f"sqlite:///{root}/t.db")
        data = load_runs(client, "roof", Selection.sweep(None), f"sqlite:///{root}/t.db")
        comparison = build_comparison(data.runs)
        peak, bw = _ceilings(comparison.candidates)
        assert peak == pytest.approx(400.0) and bw == pytest.approx(2e12)
        block = figure_roofline(comparison)
        assert block is not None and block.png_base64
    points = roofline_points(comparison).set_index("swizzle")
    assert points.loc["xcd", "tflops"] == pytest.approx(125.0) and points.loc["grouped", "tflops"] == pytest.approx(100 / 1.2)
    assert points["base_tflops"].to_list() == pytest.approx([100.0, 100.0])     # identity: 1.0 ms
    assert (points.loc["xcd", "arith_intensity"], points.loc["grouped", "arith_intensity"]) == (100.0, 400.0)


def test_a_same_order_cells_l2_difference_is_not_called_the_orders(tmp_path):
    """A cell in its baseline's own tile order (hilbert on a grid of one column): a measured L2
    difference there is the swizzle's code or the counter's noise (on an H100, l05's hilbert read
    +1.56 points, CI excluding 0, in identity's very order).  The job line says so instead of
    "higher", and the report counts the cell as the same order, not as an effect."""
    from harness.job.verdict import SAME_ORDER_L2 as SAME_ORDER_L2_VERDICT
    from harness.measure.paired import record_l2
    from harness.run.progress import progress_line
    from harness.job.result import FINISHED, Comparison, JobResult
    from harness.storage.run_fields import run_tags

    client = store_client(f"sqlite:///{tmp_path}/s.db")
    exp = client.create_experiment("same-l2")
    sweep = client.create_run(exp, run_name="sweep", tags={"swizzlebench.kind": "sweep"}).info.run_id
    lines = {}
    for i, (swizzle, same) in enumerate([("hilbert", "true"), ("scatter", "false")]):
        result = JobResult(run_name=f"igemm/{swizzle}/resnet-l05/w8", params={"compare.baseline": "identity"},
                           status=FINISHED)
        result.comparison = Comparison(role="candidate", same_order=same == "true")
        result.metrics.update({"time_ms_median": 0.0316, "time_ms_p20": 0.0313, "time_ms_p80": 0.0322,
                               "tflops": 104.0, "vendor_time_ms": 0.0279, "max_rel_err": 3e-4,
                               "l2_hit_rate": 30.61, "l2_hit_rate_std": 0.3})
        record_l2(result, [30.9, 30.6, 30.7, 30.8], [29.6, 29.7, 29.5, 29.8], 1.0, "ncu")
        lines[swizzle] = progress_line("[job 0 | 1/1]", result)
        _job(client, exp, sweep, 2_000 + i, kernel="igemm", swizzle=swizzle, shape="l05", preset="resnet", warps=8,
             metrics=result.metrics, extra_tags=run_tags(result), extra_params={"compare.baseline": "identity"})
    client.set_terminated(sweep, "FINISHED")
    assert f"L2 +1.10 pts {SAME_ORDER_L2_VERDICT} (higher)" in lines["hilbert"]
    assert lines["scatter"].endswith("L2 +1.10 pts higher")
    out = report.build_report(f"sqlite:///{tmp_path}/s.db", "same-l2", sweep, tmp_path / "r")
    table = pd.read_csv(out.parent / "table.csv").set_index("swizzle")
    assert table.loc["hilbert", "l2_verdict"] == report.SAME_ORDER
    assert table.loc["scatter", "l2_verdict"] == "higher"


def test_kernel_vs_vendor_spans_a_kernel_whose_config_follows_the_shape(tmp_path):
    """tune=table / tune=fastest launch one config per shape: "Kernel vs vendor" is one row per
    kernel and swizzle over all its shapes (geomean of time / best vendor time), not one row
    per config; a launch knob swept on one shape still splits the rows."""
    client = store_client(f"sqlite:///{tmp_path}/t.db")
    exp = client.create_experiment("table")
    sweep = client.create_run(exp, run_name="sweep", tags={"swizzlebench.kind": "sweep"}).info.run_id
    t = 1_000
    for shape, warps, ratio in (("l03", 4, 1.25), ("l12", 8, 0.8), ("l19", 4, 1.0)):
        for swizzle in ("identity", "xcd"):
            t += 1
            _job(client, exp, sweep, t, kernel="igemm_fast", swizzle=swizzle, shape=shape, preset="resnet",
                 warps=warps, metrics=_timed(0.9 * ratio, 0.9 * ratio, 0.9 * ratio))
    client.set_terminated(sweep, "FINISHED")
    out = report.build_report(f"sqlite:///{tmp_path}/t.db", "table", sweep, tmp_path / "r")
    vendor = pd.read_csv(out.parent / "vendor.csv")
    assert len(vendor) == 2 and set(vendor["swizzle"]) == {"identity", "xcd"}
    row = vendor[vendor["swizzle"] == "xcd"].iloc[0]
    assert row["timed_shapes"] == 3 and row["geomean_ratio"] == pytest.approx(1.0)
    assert row["worst_shape"] == "resnet-l03" and row["worst_ratio"] == pytest.approx(1.25)
