"""Stopping on SIGTERM (what SLURM, ``timeout`` and ``kill`` send) and SIGINT (Ctrl-C).

While :func:`stop_on_signals` is open, either signal raises :class:`Interrupted` in the main
thread, wherever it is.  It is a BaseException, so that no ``except Exception`` of the
pipeline, Hydra's or a library's, takes it for a failing job: it unwinds the job, whose
worker and profiler processes are killed on the way (harness.run.isolation,
harness.hardware.processes) and whose open runs are ended KILLED with :meth:`Interrupted.reason`
(harness.app), up to ``python -m harness``, where ``on_stop`` ends the sweep's run KILLED,
lists its runs and writes its report (harness.callbacks.end_interrupted_sweep); then the
command prints one line and exits with 128 + the signal's number (143, 130), as a shell
reports a process ended by it.  A second signal while that happens ends the process at once.
"""
from __future__ import annotations

import atexit
import os
import signal
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager

SIGNALS = (signal.SIGTERM, signal.SIGINT)


class Interrupted(BaseException):
    """The command received ``signum`` (SIGTERM or SIGINT) and is stopping."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum

    @property
    def name(self) -> str:
        return signal.Signals(self.signum).name

    @property
    def exit_status(self) -> int:
        return 128 + self.signum

    def reason(self, what: str) -> str:
        """The status_reason of a run it ended: ``killed: SIGTERM received <what>; re-run ...``."""
        return f"killed: {self.name} received {what}; re-run the same command to resume (FINISHED runs are skipped)"


def _raise(signum: int, frame) -> None:
    for each in SIGNALS:   # a second signal, while the first one's cleanup runs, ends the process
        signal.signal(each, _die)
    raise Interrupted(signum)


def _die(signum: int, frame) -> None:
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


@contextmanager
def stop_on_signals(on_stop: Callable[[Interrupted], None]) -> Iterator[None]:
    """Turn SIGTERM and SIGINT into :class:`Interrupted` in the ``with`` block; when one
    arrives, call ``on_stop`` with it, print one line and exit with its status."""
    saved = {each: signal.signal(each, _raise) for each in SIGNALS}
    try:
        yield
    except Interrupted as stop:
        on_stop(stop)
        print(f"stopped by {stop.name}: its open runs are KILLED; re-run the same command to resume "
              f"(exit {stop.exit_status})", file=sys.stderr, flush=True)
        _exit_now(stop.exit_status)
    finally:
        for each, handler in saved.items():
            signal.signal(each, handler)


def _exit_now(status: int) -> None:
    """Run the exit handlers (atexit: helper processes closed, logs flushed), then end the
    process without the interpreter's teardown of torch, Triton and MLflow (1-2 s of a
    stop's few seconds)."""
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)
