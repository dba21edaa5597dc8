"""No lost runs under concurrency: 16 processes log runs at the same instant (a barrier)
through ``harness.storage.tracking.Tracker`` to (a) one SQLite store, (b) a local ``mlflow
server`` (SQLite backend) and (c), a ``cluster`` test, a local ``mlflow server`` over a real
PostgreSQL (tests/services/postgres.py), and every run arrives whole: status, params, metrics, tags,
parent run and a text artifact; none lost, none duplicated, none spooled.

Each store has its own module fixture (the default run checks only the SQLite one, so it starts
no server); its 16 worker processes are forked from one process that imported MLflow (importing
it 16 times was the slow part on a small machine).  Each phase's wall time, from the barrier's
release to the last worker's last run, is printed.
"""
from __future__ import annotations

import multiprocessing as mp
import queue
import threading
import time
import traceback
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from tests.mlflow_server import running_mlflow_server

PROCESSES = 16
RUNS_EACH = 5
EXPERIMENT = "concurrency"
BARRIER_TIMEOUT_S = 120.0


def _expected(process: int, index: int):
    """The JobResult worker ``process`` logs as its ``index``-th run."""
    from harness.job.result import FINISHED, JobResult

    result = JobResult(run_name=f"conc/p{process:02d}/r{index}", status=FINISHED,
                       reason=f"verified: process {process} run {index}")
    result.params = {"process": str(process), "index": str(index),
                     **{f"shape.k{j}": str(process * 100 + index * 10 + j) for j in range(20)}}
    result.metrics = {"time_ms_median": process + index / 10, "max_rel_err": 1e-4 * (index + 1), "tflops": 1.5}
    result.tags = {"spec_hash": f"conc{process:02d}{index:02d}", "device": "cpu", "mode": "test"}
    result.artifacts = {"note.txt": f"process {process} run {index}\n" * 50}
    return result


def _worker(process: int, phases: list[tuple[str, str]], parents, barrier, errors) -> None:
    """Log RUNS_EACH runs per phase; the barrier starts and ends each phase together."""
    try:
        from harness.storage.tracking import Tracker

        for uri, spool_dir in phases:
            barrier.wait(BARRIER_TIMEOUT_S)            # everyone imported (or the previous phase done)
            parent = parents.get(timeout=BARRIER_TIMEOUT_S)
            tracker = Tracker(uri, EXPERIMENT, spool_dir=spool_dir)
            barrier.wait(BARRIER_TIMEOUT_S)            # start together
            for index in range(RUNS_EACH):
                result = _expected(process, index)
                run_id = tracker.start_job(result.run_name, parent, {"git_commit": "test"})
                tracker.finish_job(run_id, result)
            barrier.wait(BARRIER_TIMEOUT_S)            # all runs of this phase logged
    except Exception:
        errors.put(f"process {process}: {traceback.format_exc()}")
        barrier.abort()


def _drain(errors) -> list[str]:
    out = []
    while True:
        try:
            out.append(errors.get(timeout=1))
        except queue.Empty:
            return out


@dataclass
class Phase:
    name: str
    uri: str
    spool_dir: Path
    parent_run_id: str = ""
    wall_s: float = 0.0


def _prepare(phase: Phase, artifact_root: Path | None = None) -> None:
    """Create the experiment and the sweep's parent run once, as the sweep callback does."""
    from harness.storage.tracking import Tracker

    client = MlflowClient(tracking_uri=phase.uri)
    if artifact_root is not None and client.get_experiment_by_name(EXPERIMENT) is None:
        client.create_experiment(EXPERIMENT, artifact_location=artifact_root.as_uri())
    tracker = Tracker(phase.uri, EXPERIMENT, spool_dir=phase.spool_dir)
    assert not tracker.offline, tracker.offline_reason
    phase.parent_run_id = tracker.start_sweep("concurrency sweep", {"processes": str(PROCESSES)}, {})


def _log_concurrently(phases: list[Phase]) -> None:
    """PROCESSES workers log RUNS_EACH runs into each phase's store in turn (the first phase's
    experiment created under ``artifact_root``: SQLite stores have no server to hold artifacts)."""
    # A fork server that has imported the tracking store (MLflow, SQLAlchemy) once forks the
    # workers: each starts with it imported and no thread of this process.
    ctx = mp.get_context("forkserver")
    ctx.set_forkserver_preload(["harness.storage.tracking"])
    barrier, parents, errors = ctx.Barrier(PROCESSES + 1), ctx.Queue(), ctx.Queue()
    workers = [ctx.Process(target=_worker, args=(p, [(ph.uri, str(ph.spool_dir)) for ph in phases], parents, barrier,
                                                 errors), daemon=True) for p in range(PROCESSES)]
    try:
        for w in workers:
            w.start()
        for phase in phases:
            for _ in workers:
                parents.put(phase.parent_run_id)
            try:
                barrier.wait(BARRIER_TIMEOUT_S)    # workers ready
                barrier.wait(BARRIER_TIMEOUT_S)    # go
                start = time.monotonic()
                barrier.wait(BARRIER_TIMEOUT_S)    # done
                phase.wall_s = time.monotonic() - start
            except threading.BrokenBarrierError:
                pytest.fail(f"phase {phase.name} broke: " + "\n".join(_drain(errors) or ["a worker hung or died"]))
        for w in workers:
            w.join(30)
        assert [w.exitcode for w in workers] == [0] * PROCESSES
    finally:
        for w in workers:
            if w.is_alive():
                w.kill()


@pytest.fixture(scope="module")
def sqlite_phase(tmp_path_factory):
    """The 16 writers into one SQLite store."""
    root = tmp_path_factory.mktemp("concurrency")
    phase = Phase("sqlite", f"sqlite:///{root}/store.db", root / "spool")
    _prepare(phase, artifact_root=root / "artifacts")
    _log_concurrently([phase])
    return phase


@pytest.fixture(scope="module")
def server_phase(tmp_path_factory):
    """The 16 writers through a local ``mlflow server`` (SQLite backend), kept running for the checks."""
    root = tmp_path_factory.mktemp("concurrency-server")
    with running_mlflow_server(f"sqlite:///{root}/server.db", root / "server") as base:
        phase = Phase("server", base, root / "spool")
        _prepare(phase)
        _log_concurrently([phase])
        yield phase


@pytest.fixture(scope="module")
def postgres_phase(postgres_mlflow_server, tmp_path_factory):
    """The same 16 writers through an ``mlflow server`` whose store is PostgreSQL."""
    phase = Phase("postgres", postgres_mlflow_server, tmp_path_factory.mktemp("concurrency-pg") / "spool")
    _prepare(phase)
    _log_concurrently([phase])
    return phase


def _check_store(phase: Phase) -> None:
    client = MlflowClient(tracking_uri=phase.uri)
    exp = client.get_experiment_by_name(EXPERIMENT)
    runs = client.search_runs([exp.experiment_id], "tags.`swizzlebench.kind` = 'job'", max_results=1000)
    names = [r.info.run_name for r in runs]
    expected = {(p, i): _expected(p, i) for p in range(PROCESSES) for i in range(RUNS_EACH)}
    assert len(runs) == PROCESSES * RUNS_EACH, f"{len(runs)} runs, expected {PROCESSES * RUNS_EACH}"
    assert sorted(names) == sorted(r.run_name for r in expected.values()), "lost or duplicated runs"
    with ThreadPoolExecutor(8) as pool:   # artifact downloads are one round trip each
        notes = pool.map(lambda r: Path(client.download_artifacts(r.info.run_id, "note.txt")).read_text(), runs)
    for run, note in zip(runs, notes):
        want = expected[(int(run.data.params["process"]), int(run.data.params["index"]))]
        assert run.info.status == "FINISHED"
        assert run.data.params == want.params
        assert run.data.metrics == pytest.approx(want.metrics)
        assert {k: run.data.tags[k] for k in want.tags} == want.tags
        assert run.data.tags["status_reason"] == want.reason
        assert run.data.tags["mlflow.parentRunId"] == phase.parent_run_id
        assert note == want.artifacts["note.txt"]
    assert not phase.spool_dir.exists() or not list(phase.spool_dir.glob("*.json")), "runs were spooled"


def test_sixteen_processes_lose_no_runs_in_one_sqlite_store(sqlite_phase, capsys):
    _check_store(sqlite_phase)
    _report(sqlite_phase, capsys)


@pytest.mark.slow   # starts an mlflow server: run with python -m pytest -m slow
def test_sixteen_processes_lose_no_runs_through_a_local_mlflow_server(server_phase, capsys):
    _check_store(server_phase)
    _report(server_phase, capsys)


@pytest.mark.cluster   # a real PostgreSQL: python -m pytest -m cluster (.ci/run)
def test_sixteen_processes_lose_no_runs_through_a_server_on_postgresql(postgres_phase, capsys):
    _check_store(postgres_phase)
    _report(postgres_phase, capsys)


def _report(phase: Phase, capsys) -> None:
    runs = PROCESSES * RUNS_EACH
    with capsys.disabled():
        print(f"\nconcurrency [{phase.name}]: {PROCESSES} processes x {RUNS_EACH} runs = {runs} runs logged at once "
              f"in {phase.wall_s:.2f} s wall ({runs / phase.wall_s:.1f} runs/s); none lost, none duplicated")
