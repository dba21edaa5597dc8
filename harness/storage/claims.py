"""Claims on a spec: who is running a job now, so that two live sweeps never run it twice.

A job's run is its claim: created RUNNING with the launching host and process
(``HOST_TAG``, ``PID_TAG``) and a heartbeat tag (``HEARTBEAT_TAG``, epoch ms) that a
thread of the claiming process renews every ``HEARTBEAT_S`` while the run is open.  A
RUNNING run of the spec is *live* when its heartbeat is younger than ``STALE_S`` and, on this
host, its process still exists (and, for this process, it is one of its open runs); any
other RUNNING run is *stale*: left by a killed or crashed sweep, it is closed (KILLED) and
the job runs again.

On a SQLite store the check and the run's creation happen under :func:`store_lock` (a file
lock next to the database), which also serializes MLflow's creation of a new database; on a
server the claimer checks again after creating its run and withdraws (deletes) it when an
earlier live claim exists.
"""
from __future__ import annotations

import contextlib
import fcntl
import os
import socket
import threading
import time
from typing import Callable, Iterator

from harness.storage.probe import sqlite_path

HOST_TAG = "swizzlebench.host"
PID_TAG = "swizzlebench.pid"
HEARTBEAT_TAG = "swizzlebench.heartbeat_ms"
#: How often a claiming process renews its open runs' heartbeat, and when a heartbeat is old
#: enough that its claim has expired (s).
HEARTBEAT_S = 30.0
STALE_S = 120.0


@contextlib.contextmanager
def store_lock(uri: str) -> Iterator[None]:
    """An exclusive lock on the SQLite store at ``uri`` across processes (``.<name>.lock``
    next to the database, created as needed); nothing for other stores, nor where the lock
    file cannot be made (that store cannot be opened either: the caller finds out why)."""
    path = sqlite_path(uri)
    try:
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
        handle = None if path is None else open(path.with_name(f".{path.name}.lock"), "a")
    except OSError:
        handle = None
    if handle is None:
        yield
        return
    with handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def now_ms() -> int:
    return int(time.time() * 1000)


def owner_tags() -> dict[str, str]:
    """The tags that make a run a claim of this process."""
    return {HOST_TAG: socket.gethostname(), PID_TAG: str(os.getpid()), HEARTBEAT_TAG: str(now_ms())}


def process_alive(pid: int) -> bool:
    """Whether a process with this id exists on this host."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def is_live(tags: dict[str, str], open_here: set[str], run_id: str) -> bool:
    """Whether the RUNNING run with ``tags`` is a live claim (see the module docstring)."""
    beat, pid = tags.get(HEARTBEAT_TAG, ""), tags.get(PID_TAG, "")
    if not beat.isdigit() or now_ms() - int(beat) > STALE_S * 1000:
        return False
    if tags.get(HOST_TAG) != socket.gethostname():
        return True
    if not pid.isdigit():
        return False
    if int(pid) == os.getpid():
        return run_id in open_here
    return process_alive(int(pid))


class Heartbeat:
    """This process's open claims, and the daemon thread that renews their heartbeat."""

    def __init__(self) -> None:
        self.runs: dict[str, Callable[[str, str, str], None]] = {}   # run id -> set_tag of its store
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def open(self) -> set[str]:
        with self._lock:
            return set(self.runs)

    def add(self, run_id: str, set_tag: Callable[[str, str, str], None]) -> None:
        with self._lock:
            self.runs[run_id] = set_tag
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._beat, name="swizzlebench-heartbeat", daemon=True)
                self._thread.start()

    def remove(self, run_id: str) -> None:
        with self._lock:
            self.runs.pop(run_id, None)

    def _beat(self) -> None:
        while True:
            time.sleep(HEARTBEAT_S)
            with self._lock:
                runs = dict(self.runs)
            for run_id, set_tag in runs.items():
                try:
                    set_tag(run_id, HEARTBEAT_TAG, str(now_ms()))
                except Exception:   # the store is down: the job's own writes will spool
                    pass


#: The claims of this process.
HEARTBEAT = Heartbeat()
