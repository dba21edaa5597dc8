"""Disk faults keep the store consistent (issue 54, item 3): with TMPDIR on a full disk,
MLflow cannot stage a job's text artifacts (``MlflowClient.log_text`` writes each to a
temporary folder first), so the job's result goes to the spool; its run, created in the
store when the job began, is then ended KILLED with the reason and the spool record, not
left RUNNING under the FINISHED sweep; the sweep's report names what is only in the spool;
``python -m harness.storage.sync`` completes the same runs, and a report built after it
lists every cell."""
from __future__ import annotations

import csv
import os
from pathlib import Path

from tests.cli_fork import run_cli
from tests.faults import CLI_TIMEOUT_S, FAST, cli_env, reason, runs_of, spool_sync

#: Holds the sitecustomize that makes writes under $TMPDIR fail with ENOSPC.
FULL_TMPDIR_SITE = Path(__file__).resolve().parents[1] / "fixtures" / "full_tmpdir"
EXPERIMENT = "full-tmpdir"
ONLY_IN_SPOOL = "still only in the spool"


def _rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def test_a_full_tmpdir_leaves_no_run_running_and_sync_completes_the_report(seeded_store, tmp_path):
    (tmp_path / "tmpdir").mkdir()
    env = cli_env(TMPDIR=str(tmp_path / "tmpdir"),
                  PYTHONPATH=os.pathsep.join(p for p in (str(FULL_TMPDIR_SITE), os.environ.get("PYTHONPATH")) if p))
    spool = tmp_path / "spool"
    args = ["-m", "swizzle=identity,xcd", "shape=tiny", "shape.select=[t1]", *FAST,
            f"tracking.uri={seeded_store.uri}", f"experiment={EXPERIMENT}", f"tracking.spool_dir={spool}",
            f"hydra.sweep.dir={tmp_path}/sweep"]
    proc = run_cli(args, tmp_path, env, CLI_TIMEOUT_S)   # a fork that imports the sitecustomize (tests.cli_fork)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    lines = proc.stdout.splitlines()
    assert sum("No space left on device" in ln and "kept on local disk at" in ln for ln in lines) == 2, lines[-20:]
    assert sum("ended KILLED in the store until sync logs its result" in ln for ln in lines) == 2, lines[-20:]
    assert any("2 result(s) of this sweep are only in the spool" in ln for ln in lines), lines[-20:]

    sweep, = runs_of(seeded_store.uri, EXPERIMENT, kind="sweep")
    sweep_id = sweep.info.run_id
    jobs = {r.info.run_id: r for r in runs_of(seeded_store.uri, EXPERIMENT)}
    assert sweep.info.status == "FINISHED" and len(jobs) == 2
    for run in jobs.values():   # none RUNNING: each says why and where its result is
        assert run.info.status == "KILLED", run.info.status
        record = run.data.tags["swizzlebench.spool_pending"]
        assert f"spool record {record}" in reason(run) and "No space left on device" in reason(run)
        assert f"python -m harness.storage.sync --spool {spool}" in reason(run)
    report = tmp_path / "reports" / EXPERIMENT / sweep_id
    assert _rows(report / "table.csv") == []
    assert sorted(r["status"] for r in _rows(report / "failed.csv")) == ["KILLED", "KILLED"]
    assert ONLY_IN_SPOOL in (report / "index.html").read_text()

    synced = spool_sync(["--spool", str(spool)], cwd=tmp_path)
    assert synced.returncode == 0 and "2 record(s): 2 logged" in synced.stdout, synced.stdout + synced.stderr
    after = {r.info.run_id: r for r in runs_of(seeded_store.uri, EXPERIMENT)}
    assert after.keys() == jobs.keys()   # the same runs, completed
    for run in after.values():
        assert run.info.status == "FINISHED" and reason(run).startswith("verified")
        assert "swizzlebench.spool_pending" not in run.data.tags and run.data.params["shape.N"]

    rebuilt = run_cli(["--experiment", EXPERIMENT, "--sweep", sweep_id, "--tracking-uri", seeded_store.uri,
                       "--out", str(tmp_path / "after-sync")], tmp_path, cli_env(), CLI_TIMEOUT_S,
                      module="harness.report")
    assert rebuilt.returncode == 0, rebuilt.stderr[-3000:]
    assert sorted(r["swizzle"] for r in _rows(tmp_path / "after-sync" / "table.csv")) == ["identity", "xcd"]
    assert _rows(tmp_path / "after-sync" / "failed.csv") == []
    assert ONLY_IN_SPOOL not in (tmp_path / "after-sync" / "index.html").read_text()
