"""Child processes that never outlive the work they do: a job's worker, a profiler and the
kernels it launches each run in their own process group, and are ended as a whole group.

A process group of its own (a new session) keeps a terminal's Ctrl-C, sent to the sweep's
process group, from reaching the child directly: the sweep alone receives it and stops its
children itself (harness.run.interrupt), every process under them included (ncu's target
process, a worker's compile helper), so that none is left holding the GPU's memory."""
from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Sequence
from pathlib import Path


def kill_group(pid: int) -> None:
    """SIGKILL every process of the process group led by ``pid`` (a child started in its own
    session); nothing when the group is gone already."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def run_in_own_group(cmd: Sequence[str], timeout_s: float, **popen_args) -> subprocess.CompletedProcess:
    """``subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, ...)`` with the
    command in its own session: on its timeout, or when this process is interrupted while it
    runs (harness.run.interrupt), its whole process group is killed before the exception
    goes on (``subprocess.run`` would kill the command alone, leaving what it started)."""
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          start_new_session=True, **popen_args) as proc:
        try:
            stdout, stderr = proc.communicate(timeout=timeout_s)
        except BaseException:
            kill_group(proc.pid)
            raise
    return subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)


def descendants(pid: int) -> set[int]:
    """The processes under ``pid`` now (its children, theirs, ...: in a session of their own
    too), from /proc; empty where there is no /proc."""
    parents: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, IndexError, ValueError):
            parents[int(stat.parent.name)] = int(stat.read_text().rsplit(")", 1)[1].split()[1])
    found, frontier = set(), {pid}
    while frontier:
        frontier = {child for child, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


def kill_tree(pid: int) -> None:
    """SIGKILL ``pid`` and every process under it (found before any is killed, so that none
    is orphaned first); nothing for those already gone."""
    for each in (pid, *descendants(pid)):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(each, signal.SIGKILL)
