"""A real ``mlflow server`` for tests: started on a free port of 127.0.0.1 over a given
backend store, waited for (``/health``), and stopped (its whole process group) after."""
from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Iterator

import pytest

STARTUP_TIMEOUT_S = 120.0


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def running_mlflow_server(backend_uri: str, workdir: Path, *extra_args: str, command: str = "server") -> Iterator[str]:
    """Yield the base URL of an ``mlflow server`` (``command="ui"``: ``mlflow ui``, as a user
    starts it) over ``backend_uri`` (logs in ``workdir``)."""
    proc, base = start_mlflow_server(backend_uri, workdir, *extra_args, command=command)
    try:
        yield base
    finally:
        stop(proc)


def start_mlflow_server(backend_uri: str, workdir: Path, *extra_args: str,
                        command: str = "server") -> tuple[subprocess.Popen, str]:
    """(the server's process, its base URL) once it answers ``/health``; the caller stops it
    (:func:`stop`, or ``os.killpg`` to kill it as a crash would)."""
    workdir.mkdir(parents=True, exist_ok=True)
    port = free_port()
    log_path = workdir / "server.log"
    # no job-execution consumers (huey, for MLflow's GenAI jobs): the tests use none, each costs a process
    env = {**os.environ, "MLFLOW_DISABLE_TELEMETRY": "true", "DO_NOT_TRACK": "true",
           "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}
    with open(log_path, "ab") as log:
        proc = subprocess.Popen([sys.executable, "-m", "mlflow", command,
                                 "--backend-store-uri", backend_uri, "--host", "127.0.0.1",
                                 "--port", str(port), "--workers", "1", *extra_args],
                                cwd=workdir, stdout=log, stderr=subprocess.STDOUT, env=env,
                                start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        _wait_until_healthy(proc, base, log_path)
    except BaseException:
        stop(proc)
        raise
    return proc, base


def _wait_until_healthy(proc: subprocess.Popen, base: str, log_path: Path) -> None:
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while True:
        if proc.poll() is not None:
            pytest.fail(f"mlflow server exited with {proc.returncode}:\n{log_path.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(f"{base}/health", timeout=2) as resp:
                if resp.status == 200:
                    return
        except OSError:
            pass
        if time.monotonic() > deadline:
            pytest.fail(f"mlflow server not up after {STARTUP_TIMEOUT_S} s:\n{log_path.read_text()[-3000:]}")
        time.sleep(0.25)


def stop(proc: subprocess.Popen) -> None:
    """SIGTERM the server's process group, SIGKILL it if it lingers."""
    if proc.poll() is not None:
        return
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=15)


def rest_get(base: str, endpoint: str, **query: str) -> dict:
    """GET an MLflow REST endpoint, e.g. ``/api/2.0/mlflow/experiments/get-by-name``."""
    url = f"{base}{endpoint}?{urllib.parse.urlencode(query)}" if query else f"{base}{endpoint}"
    with urllib.request.urlopen(url, timeout=30) as resp:
        return json.loads(resp.read())


def rest_post(base: str, endpoint: str, body: dict) -> dict:
    """POST a JSON body to an MLflow REST endpoint, e.g. ``/api/2.0/mlflow/runs/search``."""
    req = urllib.request.Request(f"{base}{endpoint}", data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as resp:
        return json.loads(resp.read())
