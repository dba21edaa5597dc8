"""A real ``mlflow server`` over a store holding a sweep: the runs, metrics and reasons
are visible through its REST API, and harness.report works against the server's URI.

The server is a subprocess in its own session (process group), started on a free port
of 127.0.0.1 and killed (the whole group: the server and its workers) at the end.
"""
from __future__ import annotations

import re
import shutil
from typing import Iterator

import pandas as pd
import pytest
from mlflow.tracking import MlflowClient

from harness.report import FASTER, build_report
from harness.storage.tracking import (EXPERIMENT_KIND, EXPERIMENT_KIND_TAG, FIRST_VIEW_COLUMNS, FIRST_VIEW_KEY,
                                     ensure_experiment, mlflow_ui_url)
from tests.mlflow_server import rest_get, rest_post, running_mlflow_server
from tests.report.test_report import HOSTILE_REASON, SyntheticStore, make_store
from tests.report.test_browser import CHROMIUM, chromium



@pytest.fixture(scope="module")
def server(tmp_path_factory) -> Iterator[tuple[str, SyntheticStore]]:
    """(base URL, store) of a running ``mlflow server`` over the synthetic store."""
    root = tmp_path_factory.mktemp("server")
    store = make_store(root / "store")
    with running_mlflow_server(store.uri, root) as base:
        yield base, store


def _search(base: str, experiment_id: str, filter_string: str) -> list[dict]:
    """Every run matching the filter, following next_page_token."""
    runs, token = [], None
    while True:
        body = {"experiment_ids": [experiment_id], "filter": filter_string, "max_results": 1000}
        if token:
            body["page_token"] = token
        page = rest_post(base, "/api/2.0/mlflow/runs/search", body)
        runs.extend(page.get("runs", []))
        token = page.get("next_page_token")
        if not token:
            return runs


def _by_key(items: list[dict]) -> dict[str, object]:
    return {i["key"]: i["value"] for i in items}


def test_runs_and_metrics_through_rest(server):
    base, store = server
    exp = rest_get(base, "/api/2.0/mlflow/experiments/get-by-name", experiment_name=store.experiment)["experiment"]
    runs = _search(base, exp["experiment_id"], f"tags.`swizzlebench.sweep_run_id` = '{store.sweep_run_id}'")
    assert len(runs) == 10                                  # 8 finished, 1 failed, 1 left running

    by_name = {r["info"]["run_name"]: r for r in runs}
    fast = by_name["igemm/xcd/resnet-l03/w8"]
    metrics = _by_key(fast["data"]["metrics"])
    assert metrics["time_ms_median"] == pytest.approx(0.80)
    assert metrics["l2_hit_rate"] == pytest.approx(70.0)
    assert metrics["sim_l2_hit_rate"] == pytest.approx(73.0)
    assert _by_key(fast["data"]["params"])["swizzle"] == "xcd"
    assert _by_key(fast["data"]["tags"])["mlflow.parentRunId"] == store.sweep_run_id

    failed = by_name["igemm/seed_patch/resnet-l03/w8"]
    assert failed["info"]["status"] == "FAILED"
    assert _by_key(failed["data"]["tags"])["status_reason"] == HOSTILE_REASON
    assert by_name["igemm/xcd_grouped/resnet-l03/w8"]["info"]["status"] == "RUNNING"

    sweep = rest_get(base, "/api/2.0/mlflow/runs/get", run_id=store.sweep_run_id)["run"]
    assert _by_key(sweep["data"]["tags"])["swizzlebench.kind"] == "sweep"
    history = rest_get(base, "/api/2.0/mlflow/metrics/get-history", run_id=fast["info"]["run_id"],
                   metric_key="time_ms_median")["metrics"]
    assert [m["value"] for m in history] == [pytest.approx(0.80)]


def test_report_through_the_server(server, tmp_path):
    base, store = server
    page = build_report(base, store.experiment, out_dir=tmp_path / "out")
    table = pd.read_csv(page.parent / "table.csv")
    fast = table[(table["shape"] == "resnet-l03") & (table["swizzle"] == "xcd")].iloc[0]
    assert fast["verdict"] == FASTER
    listed = rest_get(base, "/api/2.0/mlflow/artifacts/list", run_id=store.sweep_run_id, path="report")
    assert {"report/index.html", "report/table.csv"} <= {f["path"] for f in listed.get("files", [])}


@pytest.mark.skipif(shutil.which(CHROMIUM) is None, reason=f"{CHROMIUM} not installed (apt-get install -y chromium)")
def test_ui_opens_the_runs_table(server, tmp_path):
    """The experiment's address (``mlflow_ui_url``) opens on the runs table in headless
    Chromium, not on MLflow 3's GenAI overview; the experiment carries MLflow 3's kind."""
    base, store = server
    experiment_id = ensure_experiment(MlflowClient(tracking_uri=store.uri), store.experiment)  # as the harness does
    tags = rest_get(base, "/api/2.0/mlflow/experiments/get", experiment_id=experiment_id)["experiment"]["tags"]
    assert {"key": EXPERIMENT_KIND_TAG, "value": EXPERIMENT_KIND} in tags
    result = chromium(mlflow_ui_url(base, experiment_id), tmp_path / "profile", "--virtual-time-budget=20000",
                      "--dump-dom")
    assert result.returncode == 0, result.stderr[-2000:]
    dom = result.stdout
    assert "<title>Runs - Experiment" in dom and 'class="ag-root' in dom, dom[-3000:]   # the runs table (ag-grid)
    assert "igemm/xcd/resnet-l03/w8" in dom                       # a job run: the first view lists them, sorted
    assert "sweep swizzle=identity,xcd,seed_xcd,grouped" not in dom   # by name, not folded under their sweep
    assert "Token Usage" not in dom                                                      # not the GenAI overview


def _column_ids(dom: str) -> list[str]:
    """The runs table's columns (ag-grid ``col-id``s), first seen first."""
    return list(dict.fromkeys(re.findall(r'col-id="([^"]+)"', dom)))


@pytest.mark.skipif(shutil.which(CHROMIUM) is None, reason=f"{CHROMIUM} not installed (apt-get install -y chromium)")
def test_ui_first_view_shows_verdict_speedup_and_l2(server, tmp_path):
    """What a user sees first at ``mlflow_ui_url``: the runs table with the verdict, speedup,
    L2 delta and hit-rate columns, from the view stored in the experiment (no column picked
    by hand); the same page without ``viewStateShareKey`` shows MLflow's default columns."""
    base, store = server
    client = MlflowClient(tracking_uri=store.uri)
    experiment_id = ensure_experiment(client, "first-view")
    run = client.create_run(experiment_id, run_name="xcd·resnet-l03·w8·igemm",
                            tags={"swizzlebench.kind": "job", "display.verdict": "faster", "display.speedup": "1.25x",
                                  "display.l2": "+20.0 pts (higher)"})
    client.set_terminated(run.info.run_id)
    url = mlflow_ui_url(base, experiment_id)
    columns = {}
    for name, address in (("first view", url), ("plain", url.replace(f"&viewStateShareKey={FIRST_VIEW_KEY}", ""))):
        result = chromium(address, tmp_path / name, "--virtual-time-budget=20000", "--window-size=2400,1000",
                          "--dump-dom")
        assert result.returncode == 0, result.stderr[-2000:]
        assert "xcd·resnet-l03·w8·igemm" in result.stdout, result.stdout[-3000:]    # the run's row
        columns[name] = _column_ids(result.stdout)
    assert set(FIRST_VIEW_COLUMNS) <= set(columns["first view"]), columns
    assert not set(FIRST_VIEW_COLUMNS) & set(columns["plain"]), columns
