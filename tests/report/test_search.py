"""The search section: from the sweeper's records, from MLflow runs, and in the sweep report
of a search sweep (a synthetic store; a real CPU search: tests/search/test_search.py).

The store's search sweep (tagged with its objective, as the sweeper tags it) has, on group
igemm/resnet-l03/mi300x, built-ins identity (L2 50 %) and xcd (90 %), trials grouped_m
(88 %), tiled (80.5 %), hilbert (91.25 %) and a hostile custom label (10 %), and a
confirmation of hilbert; a second, ordinary sweep has no search section.
"""
from __future__ import annotations

import pandas as pd
import pytest
from mlflow.tracking import MlflowClient

from harness.report import build_report
from harness.report.search import search_section, summary_table, trial_frame, trials_from_runs
from harness.storage.search_trials import SEARCH_DIRECTION_TAG, SEARCH_OBJECTIVE_TAG, TrialRecord
from tests.report.pages import section, table_rows
from tests.report.test_report import HOSTILE, T0_MS, _job, new_store

EXPERIMENT = "searched"
HILBERT = "hilbert[num_xcds=8,chunk=0,order=2]"
#: (swizzle, family, L2 hit rate %) in start order; the last run confirms the best trial.
RUNS = [("identity", "", 50.0), ("xcd", "", 90.0), ("grouped_m[num_xcds=8,chunk=0,group_size=4]", "grouped_m", 88.0),
        ("tiled[num_xcds=1,chunk=0,tile_m=2,tile_n=2]", "tiled", 80.5), (HILBERT, "hilbert", 91.25),
        (HOSTILE, "formula:x", 10.0), (HILBERT, "hilbert", 91.25)]


def _sweep(client: MlflowClient, exp: str, name: str, start_ms: int, tags: dict[str, str]) -> str:
    return client.create_run(exp, run_name=name, start_time=start_ms,
                             tags={"swizzlebench.kind": "sweep", **tags}).info.run_id


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    root = tmp_path_factory.mktemp("searched")
    uri, client, exp = new_store(root, EXPERIMENT)
    search = _sweep(client, exp, "sweep search", T0_MS,
                    {SEARCH_OBJECTIVE_TAG: "l2_hit_rate", SEARCH_DIRECTION_TAG: "maximize"})
    for i, (swizzle, family, l2) in enumerate(RUNS):
        _job(client, exp, search, T0_MS + 10 * (i + 1), kernel="igemm", swizzle=swizzle, shape="l03", preset="resnet",
             warps=8, metrics={"max_rel_err": 1e-3, "l2_hit_rate": l2}, timed=False,
             extra_params={"swizzle.family": family} if family else None)
    plain = _sweep(client, exp, "sweep plain", T0_MS + 10_000, {})
    _job(client, exp, plain, T0_MS + 10_001, kernel="igemm", swizzle="xcd", shape="l03", preset="resnet", warps=8,
         metrics={"max_rel_err": 1e-3, "l2_hit_rate": 90.0}, timed=False)
    return uri, search, plain, root


def test_sweep_report_has_the_search_section(store):
    uri, search, _, root = store
    text = build_report(uri, EXPERIMENT, search, root / "search").read_text()
    part = section(text, '<section id="search"', "</section>")
    (row,) = table_rows(part)
    assert row[:8] == ["igemm/resnet-l03/mi300x", "50.000", "xcd", "90.000", HILBERT, "91.250", "1.250", "4"]
    assert row[-1] == "not timed"                                    # the confirmation ran on the CPU
    assert "Objective <code>l2_hit_rate</code> (maximize)" in part
    assert 'src="data:image/png;base64,' in part
    assert HOSTILE not in text and "<script" not in text.lower()


def test_no_search_section_without_a_search(store, tmp_path):
    uri, _, plain, _ = store
    text = build_report(uri, EXPERIMENT, plain, tmp_path).read_text()
    assert "<h2>Search</h2>" not in text


def test_report_section_from_records():
    records = [TrialRecord("g", "builtin", -1, "identity", "identity", "{}", 50.0, "COMPLETE"),
               TrialRecord("g", "builtin", -1, "xcd", "xcd", "{}", 90.0, "COMPLETE"),
               TrialRecord("g", "trial", 0, "tiled[...]", "tiled", "{}", 80.0, "COMPLETE"),
               TrialRecord("g", "trial", 1, "hilbert[...]", "hilbert", "{}", 91.0, "COMPLETE")]
    html, fig = search_section(trial_frame(records), "l2_hit_rate")
    assert "hilbert[...]" in html and "91.000" in html and "1.000" in html   # found - built-in = 1 point
    assert fig.axes


def test_trials_from_an_mlflow_runs_frame():
    runs = pd.DataFrame({
        "run_id": ["a", "b", "c"], "status": ["FINISHED", "FINISHED", "FAILED"],
        "start_time": pd.to_datetime([1, 2, 3], unit="s"),
        "params.kernel": "igemm", "params.shape_preset": "resnet", "params.shape.name": "l03", "params.target": "mi300x",
        "params.swizzle": ["xcd", "hilbert[num_xcds=8,chunk=4,order=3]", "tiled[num_xcds=1,chunk=0,tile_m=2,tile_n=2]"],
        "metrics.l2_hit_rate": [92.0, 93.5, float("nan")]})
    trials = trials_from_runs(runs)
    assert list(trials["kind"]) == ["builtin", "trial", "trial"] and list(trials["number"]) == [-1, 0, 1]
    row = summary_table(trials).iloc[0]
    assert row["group"] == "igemm/resnet-l03/mi300x" and row["best_builtin"] == "xcd"
    assert row["best_found"].startswith("hilbert[") and row["found_minus_builtin"] == pytest.approx(1.5)
