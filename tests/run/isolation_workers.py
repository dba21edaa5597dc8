"""Stand-in workers for ``IsolatedRunner(worker=...)`` (tests/run/test_isolation.py).  A spawned
child imports the module of its entry point; this one imports only the standard library (and
``_serve`` where a stand-in serves jobs), so a stand-in starts in a fraction of a second, not
after the seconds of torch's import that a real worker spends."""
from __future__ import annotations

import os
import sys
from multiprocessing.connection import Connection
from pathlib import Path

BOOM = "boom: cannot import foo"


def _count_start(starts: str) -> int:
    """Note one start of a stand-in worker in the file ``starts``; returns which start it is."""
    with open(starts, "a") as f:
        f.write("start\n")
    return len(Path(starts).read_text().splitlines())


def _exits_255(starts: str, conn: Connection) -> None:
    """Stand-in worker: an import error before "ready"."""
    _count_start(starts)
    print(BOOM, file=sys.stderr)
    sys.exit(255)


def _fails_first_start(starts: str, conn: Connection) -> None:
    """Stand-in worker: the first start fails, the second serves jobs (with a warning)."""
    if _count_start(starts) == 1:
        print("boom: first start only", file=sys.stderr)
        sys.exit(255)
    print("warning: second start, serving", file=sys.stderr)
    from harness.run.isolation import _serve

    _serve(conn)


def _never_ready(starts: str, conn: Connection) -> None:
    """Stand-in worker: hangs during start-up."""
    _count_start(starts)
    os.read(conn.fileno(), 1)  # blocks until the parent kills it


def _aborts_in_job(conn: Connection) -> None:
    """Stand-in worker: starts, then dies of SIGABRT on its first job after a last word."""
    conn.send("ready")
    conn.recv()
    print("dying: bad kernel", file=sys.stderr, flush=True)
    os.abort()


class _FailsToUnpickle:
    """An argument whose unpickling raises, so that the child dies inside spawn's bootstrap,
    before any worker code runs."""

    def __reduce__(self):
        return _raise_import_error, (BOOM,)


def _raise_import_error(message: str) -> None:
    raise ImportError(message)


def _unreachable(arg: object, conn: Connection) -> None:
    raise AssertionError("the child was expected to die while unpickling its arguments")


def _terminated_with_the_job(conn: Connection) -> None:
    """Stand-in worker: on its first job, a job-wide SIGTERM as SLURM's scancel sends it, to
    every process of the job one after another: this worker first, its parent 0.3 s later."""
    import signal
    import subprocess

    conn.send("ready")
    conn.recv()
    subprocess.Popen(["sh", "-c", f"sleep 0.3; kill -TERM {os.getppid()}"], start_new_session=True)
    os.kill(os.getpid(), signal.SIGTERM)


def _hangs(conn: Connection) -> None:
    """Stand-in worker: ready, then hangs as a job can (not reading its pipe: the parent's
    end closing would not wake it)."""
    import time

    conn.send("ready")
    time.sleep(600)
