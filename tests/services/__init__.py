"""Real services for the ``cluster`` tests (``python -m pytest -m cluster``): a one-node SLURM
cluster (:mod:`tests.services.slurm`) and a throwaway PostgreSQL cluster
(:mod:`tests.services.postgres`), each started under a temporary folder by a fixture and
stopped by it, leaving no daemon behind.

This module holds what both share: the Debian binaries they need (a missing one skips the
test, naming the package), waiting for a daemon with a deadline, the daemons' own log tails
in every failure, and stopping a daemon's whole process group."""
from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Callable, Iterable

import pytest

#: Seconds a daemon has to come up (or a cluster to answer) before the fixture fails.
STARTUP_TIMEOUT_S = 60.0
#: Seconds a daemon has to exit after SIGTERM before it is sent SIGKILL.
STOP_TIMEOUT_S = 15.0
LOG_TAIL_CHARS = 3000


def require(binaries: Iterable[str], package: str) -> dict[str, str]:
    """name -> path of each binary (``/usr/sbin`` included), or skip naming the Debian package."""
    found = {b: shutil.which(b, path=f"{os.environ.get('PATH', '')}:/usr/sbin:/sbin") for b in binaries}
    missing = sorted(b for b, path in found.items() if path is None)
    if missing:
        pytest.skip(f"needs {', '.join(missing)} (Debian package {package}: apt-get install -y {package}; "
                    ".ci/run installs it)")
    return found  # type: ignore[return-value]


def log_tails(logs: Iterable[Path]) -> str:
    """The last LOG_TAIL_CHARS characters of each log that exists, under its name."""
    parts = []
    for log in logs:
        text = log.read_text(errors="replace") if log.is_file() else "(no log written)"
        parts.append(f"--- {log.name} ({log}) ---\n{text[-LOG_TAIL_CHARS:]}")
    return "\n".join(parts)


def wait_until(ready: Callable[[], bool], what: str, logs: Iterable[Path],
               procs: Iterable[subprocess.Popen] = (), timeout_s: float = STARTUP_TIMEOUT_S) -> None:
    """Poll ``ready`` every 0.2 s; fail with the logs' tails if a daemon of ``procs`` exits
    first or ``timeout_s`` passes."""
    logs, procs = list(logs), list(procs)
    deadline = time.monotonic() + timeout_s
    while not ready():
        for proc in procs:
            if proc.poll() is not None:
                pytest.fail(f"{what}: {Path(str(proc.args[0])).name} exited with {proc.returncode} "
                            f"before it was ready\n{log_tails(logs)}")
        if time.monotonic() > deadline:
            pytest.fail(f"{what}: not ready after {timeout_s:.0f} s\n{log_tails(logs)}")
        time.sleep(0.2)


def start_daemon(args: list[str], log: Path, **kwargs) -> subprocess.Popen:
    """Start a daemon in the foreground, in its own session (process group), its output to ``log``."""
    with open(log, "ab") as out:
        return subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True, **kwargs)


def stop_daemon(proc: subprocess.Popen) -> None:
    """SIGTERM the daemon's process group; SIGKILL it after STOP_TIMEOUT_S."""
    if proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(STOP_TIMEOUT_S)

