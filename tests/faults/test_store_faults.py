"""Stores that fail cost seconds, loudly (issue 42, item 3): a store that cannot be opened is
found in at most 5 s, once per sweep, with one line saying where the results go (the spool);
a 2-job sweep against an unreachable SQLite store ends at most 30 s later than against a
working one, and ``python -m harness.storage.sync`` logs every run it spooled; with no
writable spool either, the job prints its result as one JSON line and exits non-zero."""
from __future__ import annotations

import json
import re
import socket
import time
from pathlib import Path

import pytest

from tests.faults import FAST, harness, job_lines, runs_of, spool_sync

DETECT_S = 5.0
SLOWER_AT_MOST_S = 30.0
SWEEP = ["-m", "swizzle=identity,xcd", "shape=tiny", "shape.select=[t1]", *FAST]


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _unreachable_stores(tmp_path: Path, silent: socket.socket) -> dict[str, str]:
    """kind -> a tracking URI that cannot be opened."""
    (tmp_path / "folder.db").mkdir()
    (tmp_path / "a_file").write_text("")
    (tmp_path / "not_sqlite.db").write_text("these are not the bytes of a SQLite database\n")
    return {"folder": f"sqlite:///{tmp_path}/folder.db", "under_a_file": f"sqlite:///{tmp_path}/a_file/store.db",
            "not_sqlite": f"sqlite:///{tmp_path}/not_sqlite.db", "refused": f"http://127.0.0.1:{_closed_port()}",
            "silent": "http://127.0.0.1:%d" % silent.getsockname()[1]}


def test_a_store_that_cannot_be_opened_is_found_in_seconds(tmp_path):
    """In process, each kind of unreachable store: the tracker is offline in <= 5 s, saying why."""
    from harness.storage.tracking import Tracker

    with socket.socket() as silent:   # accepts connections (backlog) and never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        for kind, uri in _unreachable_stores(tmp_path, silent).items():
            start = time.monotonic()
            tracker = Tracker(uri, "probe", spool_dir=tmp_path / "spool")
            took = time.monotonic() - start
            assert tracker.offline and took <= DETECT_S, (kind, took, tracker.offline_reason)
            print(f"store {kind}: offline after {took:.2f} s ({tracker.offline_reason})")
            words = {"folder": "is a folder", "under_a_file": "is a file, not a folder",
                     "not_sqlite": "is not a SQLite database", "refused": "Connection refused",
                     "silent": "no answer within"}[kind]
            assert words in tracker.offline_reason, (kind, tracker.offline_reason)


@pytest.fixture(scope="module")
def unreachable_sweep(seeded_store):
    """The same 2-job sweep against a working store and against a SQLite path that is a
    folder, timed; then the spool synced into the working store."""
    root = seeded_store.root / "store-faults"
    root.mkdir()
    (root / "folder.db").mkdir()
    start = time.monotonic()
    working = harness([*SWEEP, f"tracking.uri={seeded_store.uri}", "experiment=store-working",
                       f"hydra.sweep.dir={root}/working"], cwd=root)
    working_s = time.monotonic() - start
    start = time.monotonic()
    down = harness([*SWEEP, f"tracking.uri=sqlite:///{root}/folder.db", f"tracking.spool_dir={root}/spool",
                    "experiment=store-down", f"hydra.sweep.dir={root}/down"], cwd=root)
    down_s = time.monotonic() - start
    synced = spool_sync(["--spool", str(root / "spool"), "--tracking-uri", seeded_store.uri], cwd=root)
    return working, working_s, down, down_s, synced


def test_unreachable_sqlite_store_costs_seconds_and_says_where_results_went(unreachable_sweep):
    working, working_s, down, down_s, _ = unreachable_sweep
    assert working.returncode == 0, working.stderr[-3000:]
    assert down.returncode == 0, down.stderr[-3000:]
    assert down_s <= working_s + SLOWER_AT_MOST_S, (down_s, working_s)
    print(f"2-job sweep: {working_s:.1f} s with a working store, {down_s:.1f} s with an unreachable one")
    where = [ln for ln in down.stdout.splitlines() if "the sweep's runs are kept on local disk under" in ln]
    assert len(where) == 1 and "is a folder, not a database file" in where[0], down.stdout[-3000:]
    spooled = [ln for ln in down.stdout.splitlines() if ln.startswith("[spool] run ")]
    assert len(spooled) == 2 and all("kept on local disk at" in ln for ln in spooled)
    assert [ln.split()[5] for ln in job_lines(down)] == ["FINISHED", "FINISHED"]
    assert "SQLAlchemy engine could not be created" not in down.stdout + down.stderr   # MLflow's retry loop


def test_sync_logs_every_spooled_run(unreachable_sweep, seeded_store):
    synced = unreachable_sweep[4]
    assert synced.returncode == 0, synced.stdout + synced.stderr[-2000:]
    assert "3 record(s): 3 logged" in synced.stdout
    assert len(re.findall(r"^  LOGGED ", synced.stdout, re.M)) == 3
    jobs = runs_of(seeded_store.uri, "store-down")
    assert sorted(r.info.status for r in jobs) == ["FINISHED", "FINISHED"]


def test_no_writable_spool_either_prints_the_result_and_exits_non_zero(seeded_store, tmp_path):
    (tmp_path / "a_file").write_text("")   # neither a store nor a spool can be made under it
    proc = harness(["swizzle=xcd", "shape=tiny", "shape.select=[t1]", *FAST,
                    f"tracking.uri=sqlite:///{tmp_path}/a_file/store.db", f"tracking.spool_dir={tmp_path}/a_file/spool",
                    f"hydra.run.dir={tmp_path}/run"], cwd=tmp_path)
    assert proc.returncode != 0
    records = [json.loads(ln) for ln in proc.stdout.splitlines() if ln.startswith("{")]
    assert len(records) == 1, proc.stdout[-3000:]
    record, = records
    assert record["run_name"] == "igemm/xcd/tiny-t1/w8" and record["status"] == "FINISHED"
    assert record["tags"]["status_reason"].startswith("verified") and record["params"]["shape.N"]
    errors = [ln for ln in proc.stderr.splitlines() if ln.startswith("error: ")]
    assert len(errors) == 1 and "JSON line" in errors[0], proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    assert "[lost] job run igemm/xcd/tiny-t1/w8 (FINISHED)" in proc.stderr


class DyingServer:
    """A stand-in MLflow tracking server on 127.0.0.1 that answers what a job asks while it
    claims its spec (``/health``, the experiment, run searches, the run's creation and the
    search after it), then *dies*: every later request is accepted and never answered (a hung
    server, the slowest death to detect).  ``died_at``: when the first request after death
    arrived (time.time(), the clock of file times)."""

    EXPERIMENT = {"experiment_id": "1", "name": "store-dies", "artifact_location": "file:///nonexistent",
                  "lifecycle_stage": "active", "tags": []}

    def __init__(self) -> None:
        import http.server
        import threading

        from harness.storage.tracking import EXPERIMENT_KIND, EXPERIMENT_KIND_TAG, FIRST_VIEW, FIRST_VIEW_TAG

        self.EXPERIMENT = {**self.EXPERIMENT, "tags": [{"key": EXPERIMENT_KIND_TAG, "value": EXPERIMENT_KIND},
                                                       {"key": FIRST_VIEW_TAG, "value": FIRST_VIEW}]}
        self.dead, self.grace, self.died_at, self.unknown = False, 1, None, []
        self.release = threading.Event()
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def _answer(self, body: dict | str, code: int = 200) -> None:
                data = (body if isinstance(body, str) else json.dumps(body)).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _handle(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                if server.dead and server.grace == 0:
                    server.died_at = server.died_at or time.time()
                    server.release.wait()
                    return
                server.grace -= server.dead
                path = self.path.split("?")[0]
                if path == "/health":
                    self._answer("OK")
                elif path.endswith("/experiments/get-by-name"):
                    self._answer({"experiment": server.EXPERIMENT})
                elif path.endswith("/runs/search"):
                    self._answer({"runs": []})
                elif path.endswith("/runs/create"):
                    info = {"run_id": "0" * 32, "run_uuid": "0" * 32, "experiment_id": "1", "user_id": "test",
                            "run_name": body.get("run_name", ""), "status": "RUNNING",
                            "start_time": body.get("start_time", 0), "artifact_uri": "file:///nonexistent",
                            "lifecycle_stage": "active"}
                    self._answer({"run": {"info": info, "data": {"tags": body.get("tags", [])}}})
                    server.dead = True
                else:
                    server.unknown.append(self.path)
                    self._answer({"error_code": "ENDPOINT_NOT_FOUND", "message": self.path}, 404)

            do_GET = do_POST = _handle

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.uri = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.release.set()
        self.httpd.shutdown()
        self.httpd.server_close()


MID_JOB_SPOOL_S = 10.0


def test_a_store_dying_mid_job_spools_within_seconds(seeded_store, tmp_path):
    """The server answers until the job's run is created, then hangs: the job's result is
    spooled, with its line, at most 10 s after its first unanswered request (the spool file's
    modification time, which the line follows at once)."""
    server = DyingServer()
    try:
        proc = harness(["swizzle=xcd", "shape=tiny", "shape.select=[t1]", *FAST, f"tracking.uri={server.uri}",
                        f"tracking.spool_dir={tmp_path}/spool", "experiment=store-dies",
                        f"hydra.run.dir={tmp_path}/run"], cwd=tmp_path, timeout=60)
    finally:
        server.close()
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0 and not server.unknown, (server.unknown, output[-3000:])
    spooled_files = list((tmp_path / "spool").glob("job-*.json"))
    assert server.died_at is not None and len(spooled_files) == 1, output[-3000:]
    spooled_at = spooled_files[0].stat().st_mtime
    assert spooled_at - server.died_at <= MID_JOB_SPOOL_S, (spooled_at - server.died_at, output[-3000:])
    print(f"store died mid-job: result spooled {spooled_at - server.died_at:.1f} s after its first unanswered request")
    spooled, = [ln for ln in proc.stdout.splitlines()
                if ln.startswith("[spool] run igemm/xcd/tiny-t1/w8 (FINISHED) kept on local disk")]
    assert "tracking store" in spooled


@pytest.mark.cluster   # a real PostgreSQL: python -m pytest -m cluster (.ci/run)
def test_a_real_server_on_postgresql_killed_mid_job_loses_nothing(seeded_store, postgres, tmp_path):
    """A real ``mlflow server`` over PostgreSQL is killed (SIGKILL, its whole process group)
    while a job's run is RUNNING in it: the sweep goes on, both jobs' results and the sweep
    are spooled; the server restarted over the same database, ``sync`` completes the very run
    that was RUNNING (with its reason) and logs the rest: nothing RUNNING, nothing lost, one
    run per spec."""
    import os
    import signal
    import subprocess
    import sys

    from mlflow.tracking import MlflowClient

    from tests.faults import cli_env
    from tests.mlflow_server import running_mlflow_server, start_mlflow_server, stop

    database = postgres.create_database(f"killed_{tmp_path.name}".lower())
    server, base = start_mlflow_server(database, tmp_path / "server")
    hung = "igemm/identity/tiny-t1/w8"
    try:
        sweep = subprocess.Popen([sys.executable, "-m", "harness", *SWEEP, "isolation.mode=process",
                                  "isolation.timeout_s=8", "fault.kind=hang", "fault.swizzle=identity",
                                  f"tracking.uri={base}", f"tracking.spool_dir={tmp_path}/spool", "experiment=pg-killed",
                                  f"hydra.sweep.dir={tmp_path}/multirun"], cwd=tmp_path, env=cli_env(),
                                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        try:
            deadline = time.monotonic() + 180
            while not [r for r in runs_of(base, "pg-killed")
                       if r.data.tags.get("job") == hung and r.info.status == "RUNNING"]:
                assert sweep.poll() is None and time.monotonic() < deadline, "no RUNNING run to kill the server under"
                time.sleep(0.5)
            running_id, = [r.info.run_id for r in runs_of(base, "pg-killed") if r.data.tags.get("job") == hung]
            os.killpg(server.pid, signal.SIGKILL)
            output, _ = sweep.communicate(timeout=180)
        finally:
            if sweep.poll() is None:
                sweep.kill()
                sweep.communicate()
    finally:
        stop(server)
    assert sweep.returncode == 0, output[-3000:]
    spooled = [ln for ln in output.splitlines() if ln.startswith("[spool] run ")]
    assert len(spooled) == 2 and all("kept on local disk at" in ln for ln in spooled), output[-3000:]
    with running_mlflow_server(database, tmp_path / "server") as restarted:
        synced = spool_sync(["--spool", str(tmp_path / "spool"), "--tracking-uri", restarted], cwd=tmp_path)
        assert synced.returncode == 0, synced.stdout + synced.stderr[-2000:]
        assert "3 record(s): 3 logged" in synced.stdout, synced.stdout
        runs = runs_of(restarted, "pg-killed", kind=None)
        client = MlflowClient(tracking_uri=restarted)
        again = client.get_run(running_id)
    every = [(r.info.run_name, r.info.status, r.data.tags.get("status_reason")) for r in runs]
    assert not [r for r in runs if r.info.status == "RUNNING"], every
    assert again.info.status == "FAILED" and again.data.tags.get("status_reason"), every   # the hang's timeout
    assert sorted(r.data.tags["job"] for r in runs if r.data.tags.get("swizzlebench.kind") == "job") == [
        hung, "igemm/xcd/tiny-t1/w8"], every
    assert [r.info.status for r in runs if r.data.tags.get("swizzlebench.kind") == "sweep"] == ["FINISHED"], every
