"""Concurrent sweeps are safe (issue 42, item 4): two identical sweeps started together in a
fresh folder (the default store ``./mlflow.db``, created by whichever opens it first, under
its lock; the default multirun folders) both end with a report, spool nothing, get a
multirun folder each, and never run a spec twice: each spec has one FINISHED run, and a
job the other sweep had already claimed (RUNNING, or FINISHED) is SKIPPED and reused.

Once in the default run; ``python -m pytest -m slow`` repeats it 4 more times (each
repetition is two CLI processes, forks of the warm CLI server: tests.cli_fork).  A ``cluster`` test starts the two
sweeps against an ``mlflow server`` over a real PostgreSQL."""
from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from tests.cli_fork import run_clis_together
from tests.faults import CLI_TIMEOUT_S, FAST, cli_env

SWEEP = ["-m", "swizzle=identity,xcd", "shape=tiny", "shape.select=[t1]", *FAST]


def _two_sweeps_together(folder: Path, *extra: str) -> list[subprocess.CompletedProcess]:
    """The same sweep twice, two processes started at once (forks of the warm CLI server)."""
    return run_clis_together([[*SWEEP, *extra]] * 2, folder, cli_env(), CLI_TIMEOUT_S)


@pytest.mark.parametrize("repetition", [0, *[pytest.param(i, marks=pytest.mark.slow) for i in range(1, 5)]])
def test_two_sweeps_started_together_in_a_fresh_folder(tmp_path, repetition):
    sweeps = _two_sweeps_together(tmp_path)
    for proc in sweeps:
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert "[spool]" not in proc.stdout, proc.stdout[-3000:]
        report, = [ln.split("Sweep report: ")[1].strip() for ln in proc.stdout.splitlines() if "Sweep report: " in ln]
        assert (tmp_path / report).is_file()
    assert not (tmp_path / "mlflow-spool").exists()
    folders = sorted(tmp_path.glob("multirun/*/*/sweep_run.json"))
    assert len(folders) == 2, folders
    with sqlite3.connect(tmp_path / "mlflow.db") as db:
        finished = Counter(h for h, in db.execute(
            "select t.value from runs r join tags t on t.run_uuid = r.run_uuid "
            "where t.key = 'spec_hash' and r.status = 'FINISHED'"))
        sweep_ids = {i for i, in db.execute("select r.run_uuid from runs r join tags t on t.run_uuid = r.run_uuid "
                                            "where t.key = 'swizzlebench.kind' and t.value = 'sweep'")}
        every = db.execute("select r.name, r.status, t.value from runs r left join tags t on t.run_uuid = r.run_uuid "
                           "and t.key = 'status_reason'").fetchall()
        assert db.execute("select count(*) from runs where status = 'RUNNING'").fetchone() == (0,), every
    assert len(finished) == 2 and set(finished.values()) == {1}, (finished, every, [p.stdout[-2000:] for p in sweeps])
    assert {json.loads(f.read_text())["run_id"] for f in folders} == sweep_ids
    lines = [ln for proc in sweeps for ln in proc.stdout.splitlines() if ln.startswith("[job ")]
    ran = [ln for ln in lines if ln.split()[5] == "FINISHED"]   # the others: SKIPPED, reused
    assert len(ran) == 2 and len(lines) == 4, (lines, every)


@pytest.mark.cluster   # a real PostgreSQL: python -m pytest -m cluster (.ci/run)
def test_two_sweeps_sharing_jobs_through_a_server_on_postgresql(tmp_path, postgres_mlflow_server):
    """The same two sweeps, started together, logging to an ``mlflow server`` over PostgreSQL:
    each spec has one FINISHED run, nothing is RUNNING or spooled, each sweep reports."""
    from mlflow.tracking import MlflowClient

    sweeps = _two_sweeps_together(tmp_path, f"tracking.uri={postgres_mlflow_server}", "experiment=shared-pg")
    for proc in sweeps:
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert "[spool]" not in proc.stdout and "Sweep report: " in proc.stdout, proc.stdout[-3000:]
    client = MlflowClient(tracking_uri=postgres_mlflow_server)
    runs = client.search_runs([client.get_experiment_by_name("shared-pg").experiment_id], max_results=1000)
    every = [(r.info.run_name, r.info.status, r.data.tags.get("status_reason")) for r in runs]
    assert not [r for r in runs if r.info.status == "RUNNING"], every
    finished = Counter(r.data.tags["spec_hash"] for r in runs
                       if r.info.status == "FINISHED" and r.data.tags.get("swizzlebench.kind") == "job")
    assert len(finished) == 2 and set(finished.values()) == {1}, every
    assert len([r for r in runs if r.data.tags.get("swizzlebench.kind") == "sweep"]) == 2, every
    lines = [ln for proc in sweeps for ln in proc.stdout.splitlines() if ln.startswith("[job ")]
    assert len([ln for ln in lines if ln.split()[5] == "FINISHED"]) == 2 and len(lines) == 4, (lines, every)
    assert not (tmp_path / "mlflow.db").exists() and not (tmp_path / "mlflow-spool").exists()


def test_a_claim_is_live_while_its_process_lives_and_its_heartbeat_is_fresh():
    """The rule by which a RUNNING run blocks its spec (harness.storage.claims.is_live): a
    claim of a process that is gone, or with a heartbeat over STALE_S old, has expired."""
    import os
    import socket

    from harness.storage.claims import HEARTBEAT_TAG, HOST_TAG, PID_TAG, STALE_S, is_live, now_ms

    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    here, fresh, old = socket.gethostname(), str(now_ms()), str(now_ms() - int(STALE_S * 1000) - 1000)

    def claim(host: str, pid: int, beat: str | None) -> dict[str, str]:
        return {HOST_TAG: host, PID_TAG: str(pid), **({HEARTBEAT_TAG: beat} if beat else {})}

    assert is_live(claim(here, os.getppid(), fresh), set(), "r")
    assert not is_live(claim(here, gone.pid, fresh), set(), "r")
    assert not is_live(claim(here, os.getppid(), old), set(), "r")
    assert not is_live(claim(here, os.getppid(), None), set(), "r")
    assert is_live(claim("elsewhere", 1, fresh), set(), "r")
    assert not is_live(claim("elsewhere", 1, old), set(), "r")
    assert is_live(claim(here, os.getpid(), fresh), {"r"}, "r")
    assert not is_live(claim(here, os.getpid(), fresh), set(), "r")   # this process's, but not open: left over


def test_a_report_beside_a_live_sweep_lists_its_cells_as_still_running_not_failed(tmp_path):
    """Sweep A hangs in its xcd job (RUNNING, a live claim) after its identity job FINISHED;
    sweep B, the same specs, reuses both.  B's report shows the one finished cell, lists xcd as
    ``still running (sweep <A>)`` and not in failed.csv, and its log line counts what it shows.
    A is then stopped (SIGTERM: its run KILLED)."""
    import os
    import signal
    import time

    import pandas as pd

    from tests.faults import harness, runs_of

    uri, experiment = f"sqlite:///{tmp_path}/store.db", "held-cells"
    args = [*SWEEP, "isolation.mode=process", f"tracking.uri={uri}", f"experiment={experiment}"]
    with open(tmp_path / "a.out", "w") as out:
        first = subprocess.Popen([sys.executable, "-m", "harness", *args, f"hydra.sweep.dir={tmp_path}/a",
                                  "fault.kind=hang", "fault.swizzle=xcd"], cwd=tmp_path, env=cli_env(), stdout=out,
                                 stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + CLI_TIMEOUT_S
        while True:
            assert first.poll() is None and time.monotonic() < deadline, (tmp_path / "a.out").read_text()[-3000:]
            if "MLflow sweep run" in (tmp_path / "a.out").read_text():
                states = {r.info.run_name: r.info.status for r in runs_of(uri, experiment)}
                if sorted(states.values()) == ["FINISHED", "RUNNING"]:
                    break
            time.sleep(0.3)
        held, = [r for r in runs_of(uri, experiment) if r.info.status == "RUNNING"]
        sweep_a = held.data.tags["swizzlebench.sweep_run_id"]
        second = harness([*args, f"hydra.sweep.dir={tmp_path}/b"], cwd=tmp_path)
    finally:
        os.killpg(first.pid, signal.SIGTERM)
        first.wait(60)
    assert second.returncode == 0, second.stderr[-3000:]
    log = second.stdout + second.stderr
    assert [ln.split()[5] for ln in log.splitlines() if ln.startswith("[job ")] == ["SKIPPED", "SKIPPED"]
    report, = [ln.split("Sweep report: ")[1].strip() for ln in log.splitlines() if "Sweep report: " in ln]
    folder = (tmp_path / report).parent
    table = pd.read_csv(folder / "table.csv", dtype=str, keep_default_na=False)
    failed = pd.read_csv(folder / "failed.csv", dtype=str, keep_default_na=False)
    assert len(table) == 1 and held.info.run_id not in set(table["run_id"]) and failed.empty, (table, failed)
    assert f"report of 1 cell(s), 0 failed run(s), 1 run(s) still running written to" in log, log[-3000:]
    assert f"{held.info.run_name} (still running (sweep {sweep_a}))" in (folder / "index.html").read_text()
    assert first.returncode == 128 + signal.SIGTERM
    assert {r.info.run_name: r.info.status for r in runs_of(uri, experiment)}[held.info.run_name] == "KILLED"
