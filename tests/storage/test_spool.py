"""The offline spool (harness.storage.spool) and the tracker's fallbacks to it, in process: an
unreachable server fails in seconds, a store that fails mid-run loses nothing, SQLite's
``database is locked`` is retried, and sync replays records once, with their parent run,
file artifacts and no duplicate of a spec already FINISHED: into SQLite and, as ``cluster``
tests, through an ``mlflow server`` over a real PostgreSQL."""
from __future__ import annotations

import json
import socket
import tempfile
import time
from pathlib import Path

import pytest
from mlflow.exceptions import MlflowException
from mlflow.tracking import MlflowClient

from harness.storage import sync as sync_module
from harness.storage import tracking
from harness.job.result import FAILED, FINISHED, JobResult
from harness.storage.spool import SYNCED_DIR, Spool, is_spool_id, take_unkept
from harness.storage.sync import sync
from harness.storage.tracking import SPOOL_PENDING_TAG, SPOOL_TAG, Tracker


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _result(name: str, spec_hash: str, tmp_path: Path, status: str = FINISHED) -> JobResult:
    raw = tmp_path / f"{spec_hash}.csv"
    raw.write_text("counter,value\nhits,7\n")
    result = JobResult(run_name=name, status=status, reason=f"verified {name}",
                       params={"kernel": "igemm", "shape.N": "2"}, metrics={"max_rel_err": 1e-4},
                       tags={"spec_hash": spec_hash}, artifacts={"config.yaml": "kernel: igemm\n"},
                       files=[("profiler", raw)])
    return result


def _runs(uri: str, experiment: str):
    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name(experiment)
    return client, ([] if exp is None else client.search_runs([exp.experiment_id], max_results=1000))


@pytest.fixture(autouse=True)
def in_tmp_path(tmp_path, monkeypatch):
    """SQLite stores put artifacts under ./mlruns of the working directory: keep it in tmp_path."""
    monkeypatch.chdir(tmp_path)


@pytest.fixture
def sqlite_uri(tmp_path) -> str:
    return f"sqlite:///{tmp_path}/store.db"


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.cluster)])
def store_uri(request, tmp_path) -> str:
    """The store sync logs into: SQLite, or (``cluster``) a server over PostgreSQL."""
    return f"sqlite:///{tmp_path}/store.db" if request.param == "sqlite" else request.getfixturevalue("postgres_mlflow_server")


def test_unreachable_server_fails_in_seconds_and_spools_the_whole_run(tmp_path, capsys):
    uri = f"http://127.0.0.1:{_closed_port()}"
    start = time.monotonic()
    tracker = Tracker(uri, "offline", spool_dir=tmp_path / "spool")
    assert time.monotonic() - start < 10
    assert tracker.offline and "Connection refused" in tracker.offline_reason
    sweep = tracker.start_sweep("sweep a", {"sweep.overrides": "a"}, {"git_commit": "x"})
    run_id = tracker.start_job("igemm/xcd/t1/w8", sweep, {"git_commit": "x"})
    assert is_spool_id(sweep) and is_spool_id(run_id)
    path = tracker.finish_job(run_id, _result("igemm/xcd/t1/w8", "h1", tmp_path))
    tracker.end_sweep(sweep)
    out = capsys.readouterr().out
    assert f"kept on local disk at {path}" in out and "the sweep goes on" in out
    assert "python -m harness.storage.sync --spool" in out
    record = json.loads(path.read_text())
    assert record["run_name"] == "igemm/xcd/t1/w8" and record["parent_run_id"] == sweep
    assert record["status"] == FINISHED and record["params"]["shape.N"] == "2"
    assert record["metrics"] == {"max_rel_err": 1e-4} and record["tags"]["status_reason"] == "verified igemm/xcd/t1/w8"
    assert record["artifacts"] == {"config.yaml": "kernel: igemm\n"}
    (folder, copied), = record["files"]
    assert folder == "profiler" and (tmp_path / "spool" / copied).read_text().startswith("counter")
    sweep_record = Spool(tmp_path / "spool").find(sweep)[1]
    assert sweep_record.status == FINISHED and sweep_record.end_time_ms


def test_sync_replays_with_parent_and_files_once(tmp_path, store_uri):
    tracker = Tracker(f"http://127.0.0.1:{_closed_port()}", "offline", spool_dir=tmp_path / "spool")
    sweep = tracker.start_sweep("sweep a", {"sweep.overrides": "a"}, {})
    for i, status in enumerate([FINISHED, FAILED]):
        tracker.finish_job(tracker.start_job(f"job{i}", sweep, {}), _result(f"job{i}", f"h{i}", tmp_path, status))
    tracker.end_sweep(sweep)

    summary = sync(tmp_path / "spool", store_uri)
    assert (len(summary.logged), len(summary.failed)) == (3, 0), summary.text()
    client, runs = _runs(store_uri, "offline")
    by_name = {r.info.run_name: r for r in runs}
    parent = by_name["sweep a"]
    assert parent.info.status == FINISHED and parent.data.params == {"sweep.overrides": "a"}
    for i, status in enumerate([FINISHED, FAILED]):
        run = by_name[f"job{i}"]
        assert run.info.status == status
        assert run.data.tags["mlflow.parentRunId"] == parent.info.run_id
        assert run.data.params == {"kernel": "igemm", "shape.N": "2"}
        assert run.data.metrics == {"max_rel_err": 1e-4}
        assert {a.path for a in client.list_artifacts(run.info.run_id)} == {"config.yaml", "profiler"}
        assert [a.path for a in client.list_artifacts(run.info.run_id, "profiler")] == [f"profiler/h{i}.csv"]
    assert not list((tmp_path / "spool").glob("*.json"))
    assert len(list((tmp_path / "spool" / SYNCED_DIR).glob("*.json"))) == 3

    # Idempotent: nothing pending; a record put back (a crash before the move) is not re-logged.
    assert sync(tmp_path / "spool", store_uri).total == 0
    synced = next((tmp_path / "spool" / SYNCED_DIR).glob("job-*.json"))
    (tmp_path / "spool" / synced.name).write_text(synced.read_text())
    again = sync(tmp_path / "spool", store_uri)
    assert len(again.already_logged) == 1 and not again.logged
    assert len(_runs(store_uri, "offline")[1]) == 3


def test_a_spec_already_finished_in_the_store_is_not_duplicated(tmp_path, store_uri):
    online = Tracker(store_uri, "dedup", spool_dir=tmp_path / "spool")
    online.finish_job(online.start_job("job", None, {}), _result("job", "same", tmp_path))
    offline = Tracker(f"http://127.0.0.1:{_closed_port()}", "dedup", spool_dir=tmp_path / "spool")
    offline.finish_job(offline.start_job("job", None, {}), _result("job", "same", tmp_path))
    summary = sync(tmp_path / "spool", store_uri)
    assert len(summary.duplicates) == 1 and "SKIPPED" in summary.text()
    assert len(_runs(store_uri, "dedup")[1]) == 1


def test_a_store_failing_mid_run_loses_nothing_and_sync_completes_the_same_run(tmp_path, store_uri, monkeypatch):
    tracker = Tracker(store_uri, "midrun", spool_dir=tmp_path / "spool")
    run_id = tracker.start_job("job", None, {"git_commit": "x"})     # created in the store: RUNNING

    def broken(*args, **kwargs):
        raise MlflowException("API request to http://store/api/2.0/mlflow/runs/log-batch failed with exception "
                              "HTTPConnectionPool(host='store', port=80): Max retries exceeded "
                              "(Caused by NewConnectionError('[Errno 111] Connection refused'))")

    monkeypatch.setattr(tracker.client, "log_batch", broken)
    path = tracker.finish_job(run_id, _result("job", "h", tmp_path))
    assert path is not None and tracker.offline and "Connection refused" in tracker.offline_reason
    assert json.loads(path.read_text())["run_id"] == run_id
    # Offline now: later runs go straight to the spool, without touching the store.
    assert is_spool_id(tracker.start_job("job2", None, {}))

    assert len(sync(tmp_path / "spool", store_uri).logged) == 1
    client, runs = _runs(store_uri, "midrun")
    assert [r.info.run_id for r in runs] == [run_id]                 # the same run, completed
    assert runs[0].info.status == FINISHED and runs[0].data.params["kernel"] == "igemm"
    assert runs[0].data.tags[SPOOL_TAG] and runs[0].data.tags["git_commit"] == "x"


def test_database_locked_is_retried_then_spooled(tmp_path, sqlite_uri, monkeypatch):
    monkeypatch.setattr(tracking, "LOCK_BACKOFF_S", 0.001)
    tracker = Tracker(sqlite_uri, "locked", spool_dir=tmp_path / "spool")
    real_create = tracker.client.create_run
    failures = iter([True, True])

    def flaky(*args, **kwargs):
        if next(failures, False):
            raise MlflowException("(sqlite3.OperationalError) database is locked")
        return real_create(*args, **kwargs)

    monkeypatch.setattr(tracker.client, "create_run", flaky)
    run_id = tracker.start_job("job", None, {})
    assert not is_spool_id(run_id) and not tracker.offline           # two locks, then it went through

    calls = []

    def always_locked(*args, **kwargs):
        calls.append(1)
        raise MlflowException("(sqlite3.OperationalError) database is locked")

    monkeypatch.setattr(tracker.client, "set_terminated", always_locked)
    path = tracker.finish_job(run_id, _result("job", "h", tmp_path))
    assert len(calls) == tracking.LOCK_RETRIES + 1 and path is not None
    assert "database is locked" in json.loads(path.read_text())["reason"]


def test_sync_against_an_unreachable_store_keeps_the_records(tmp_path, capsys):
    tracker = Tracker(f"http://127.0.0.1:{_closed_port()}", "offline", spool_dir=tmp_path / "spool")
    tracker.finish_job(tracker.start_job("job", None, {}), _result("job", "h", tmp_path))
    assert sync_module.main(["--spool", str(tmp_path / "spool")]) == 1
    out = capsys.readouterr().out
    assert "1 failed" in out and "unreachable" in out and "run sync again" in out
    assert len(list((tmp_path / "spool").glob("*.json"))) == 1


def _held(run) -> bool:
    return run.info.status == "KILLED" and SPOOL_PENDING_TAG in run.data.tags


def test_a_full_tmpdir_ends_the_run_killed_awaiting_sync_which_completes_it(tmp_path, sqlite_uri, monkeypatch,
                                                                            capsys):
    """MLflow stages log_text artifacts in a temporary folder: with TMPDIR unusable (here a
    file, so the folder cannot be made: an OSError, as ENOSPC on a full disk) the result is
    spooled and the run, already in the store, ends KILLED naming its spool record."""
    tracker = Tracker(sqlite_uri, "fulltmp", spool_dir=tmp_path / "spool")
    run_id = tracker.start_job("job", None, {"git_commit": "x"})
    (tmp_path / "a_file").write_text("")
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "a_file"))
    path = tracker.finish_job(run_id, _result("job", "h", tmp_path))
    monkeypatch.setattr(tempfile, "tempdir", None)   # usable again: tempfile finds TMPDIR anew
    record_id = json.loads(path.read_text())["record_id"]
    client, (run,) = _runs(sqlite_uri, "fulltmp")
    assert run.info.run_id == run_id and _held(run) and run.data.tags[SPOOL_PENDING_TAG] == record_id
    assert f"spool record {record_id}" in run.data.tags["status_reason"] and "--spool" in run.data.tags["status_reason"]
    out = capsys.readouterr().out
    assert f"ended KILLED in the store until sync logs its result (spool record {record_id})" in out
    assert "could not take it: NotADirectoryError" in out and "(on this machine's disk)" in out
    # The store still answers: the tracker's next run goes there, not to the spool.
    later = tracker.start_job("job2", None, {})
    assert not tracker.offline and not is_spool_id(later)
    assert tracker.finish_job(later, _result("job2", "h2", tmp_path)) is None

    assert len(sync(tmp_path / "spool", sqlite_uri).logged) == 1
    client, runs = _runs(sqlite_uri, "fulltmp")
    run, = [r for r in runs if r.info.run_id == run_id]
    assert {r.info.status for r in runs} == {FINISHED} and SPOOL_PENDING_TAG not in run.data.tags
    assert run.data.tags["status_reason"] == "verified job" and run.data.params["kernel"] == "igemm"
    assert {a.path for a in client.list_artifacts(run_id)} == {"config.yaml", "profiler"}


def _store_dies_mid_job(tracker: Tracker, monkeypatch) -> None:
    def broken(*args, **kwargs):
        raise MlflowException("API request to http://store/api/2.0/mlflow/runs/log-batch failed with exception "
                              "HTTPConnectionPool(host='store', port=80): Max retries exceeded "
                              "(Caused by NewConnectionError('[Errno 111] Connection refused'))")

    monkeypatch.setattr(tracker.client, "log_batch", broken)


def test_the_sweeps_end_ends_its_runs_whose_results_are_only_in_the_spool(tmp_path, sqlite_uri, monkeypatch):
    """A store that failed mid-job (not reachable: the run stays RUNNING then); the sweep's
    end, with the store back, ends it KILLED awaiting its spool record; sync completes it."""
    tracker = Tracker(sqlite_uri, "sweepend", spool_dir=tmp_path / "spool")
    sweep = tracker.start_sweep("sweep a", {}, {})
    run_id = tracker.start_job("job", sweep, {})
    _store_dies_mid_job(tracker, monkeypatch)
    tracker.finish_job(run_id, _result("job", "h", tmp_path))
    assert [r.info.status for r in _runs(sqlite_uri, "sweepend")[1] if r.info.run_id == run_id] == ["RUNNING"]

    records = Tracker(sqlite_uri, "sweepend", spool_dir=tmp_path / "spool").hold_spooled_runs(sweep)
    assert [r.run_id for r in records] == [run_id]
    held, = [r for r in _runs(sqlite_uri, "sweepend")[1] if r.info.run_id == run_id]
    assert _held(held) and held.data.tags[SPOOL_PENDING_TAG] == records[0].record_id
    assert len(sync(tmp_path / "spool", sqlite_uri).logged) == 1
    done, = [r for r in _runs(sqlite_uri, "sweepend")[1] if r.info.run_id == run_id]
    assert done.info.status == FINISHED and SPOOL_PENDING_TAG not in done.data.tags


def test_a_held_run_whose_spec_finished_meanwhile_is_superseded_not_duplicated(tmp_path, sqlite_uri, monkeypatch):
    tracker = Tracker(sqlite_uri, "held-dup", spool_dir=tmp_path / "spool")
    sweep = tracker.start_sweep("sweep a", {}, {})
    run_id = tracker.start_job("job", sweep, {})
    _store_dies_mid_job(tracker, monkeypatch)
    tracker.finish_job(run_id, _result("job", "same", tmp_path))
    Tracker(sqlite_uri, "held-dup", spool_dir=tmp_path / "spool").hold_spooled_runs(sweep)
    rerun = Tracker(sqlite_uri, "held-dup", spool_dir=tmp_path / "other-spool")
    finished = rerun.start_job("job", None, {})
    rerun.finish_job(finished, _result("job", "same", tmp_path))

    assert len(sync(tmp_path / "spool", sqlite_uri).duplicates) == 1
    by_id = {r.info.run_id: r for r in _runs(sqlite_uri, "held-dup")[1]}
    assert by_id[finished].info.status == FINISHED
    assert by_id[run_id].info.status == "KILLED" and SPOOL_PENDING_TAG not in by_id[run_id].data.tags
    assert by_id[run_id].data.tags["status_reason"] == f"superseded by FINISHED run {finished} of the same spec"


def test_a_full_tmpdir_and_no_spool_either_ends_the_run_failed_saying_so(tmp_path, sqlite_uri, monkeypatch, capsys):
    (tmp_path / "a_file").write_text("")
    tracker = Tracker(sqlite_uri, "nowhere", spool_dir=tmp_path / "a_file" / "spool")
    run_id = tracker.start_job("job", None, {})
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "a_file"))
    assert tracker.finish_job(run_id, _result("job", "h", tmp_path)) is None
    monkeypatch.setattr(tempfile, "tempdir", None)
    assert take_unkept() == ["job"]   # the job then ends non-zero (harness.callbacks)
    assert json.loads(capsys.readouterr().out.splitlines()[-1])["run_name"] == "job"   # the record, on stdout
    (run,) = _runs(sqlite_uri, "nowhere")[1]
    assert run.info.status == FAILED and "printed on stdout as one JSON line" in run.data.tags["status_reason"]
