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

A job that a launcher runs in a process of its own (``hydra/launcher=submitit_slurm``: a
SLURM task; ``joblib``: a worker of its pool) is stopped by SIGTERM alone, sent to that process:
by SLURM on ``scancel`` or at the job's time limit (then SIGKILL after the cluster's
``KillWait``), or by the launching sweep when it stops.  There :func:`stop_job_on_sigterm`
turns SIGTERM into :class:`Interrupted` (submitit's own handler only logs it), the job's open
runs end KILLED with the reason, and the task returns what it has, so that its launcher
and the sweep go on; a SIGTERM repeated meanwhile (``srun`` forwards the one it gets) is ignored.
"""
from __future__ import annotations

import atexit
import logging
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

SIGNALS = (signal.SIGTERM, signal.SIGINT)
#: Who sends a SLURM task SIGTERM, for the reason of the runs it stops.
SLURM_SENDER = "scancel or the SLURM job's time limit"
log = logging.getLogger("swizzlebench")


class Interrupted(BaseException):
    """The command (or, in a launcher's worker process, the job) received ``signum``
    (SIGTERM or SIGINT) and is stopping; ``sender``, when known, says who sends it."""

    def __init__(self, signum: int, sender: str | None = None):
        super().__init__(signum)
        self.signum = signum
        self.sender = sender

    @property
    def name(self) -> str:
        return signal.Signals(self.signum).name

    @property
    def exit_status(self) -> int:
        return 128 + self.signum

    def reason(self, what: str) -> str:
        """The status_reason of a run it ended: ``killed: SIGTERM received <what> (<sender>); re-run ...``."""
        sender = f" ({self.sender})" if self.sender else ""
        return (f"killed: {self.name} received {what}{sender}; re-run the same command to resume "
                f"(FINISHED runs are skipped)")


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


def signal_sender(environ: dict[str, str] | os._Environ = os.environ) -> str:
    """Who sends SIGTERM to a job run in a launcher's worker process: SLURM for a SLURM task
    (``SLURM_JOB_ID`` set), else the sweep that launched it."""
    return SLURM_SENDER if environ.get("SLURM_JOB_ID") else "the launching sweep stopping"


@contextmanager
def stop_job_on_sigterm(sender: str | None = None) -> Iterator[None]:
    """In a launcher's worker process, turn the first SIGTERM into :class:`Interrupted` in
    the ``with`` block (``sender``: who sends it; by default :func:`signal_sender`) and ignore
    any later one; the previous handler (submitit's) is restored after.  The block swallows
    the Interrupted, after logging it, and the code after it runs.  Nothing changes in the
    launching process, where :func:`stop_on_signals` already handles SIGTERM (it stops the
    sweep), nor off the main thread, where no handler can be set."""
    current = signal.getsignal(signal.SIGTERM)
    if current in (_raise, _die) or threading.current_thread() is not threading.main_thread():
        yield
        return
    sender = sender or signal_sender()

    def raise_once(signum: int, frame) -> None:
        signal.signal(signum, _ignore)   # the job's runs are being ended: a second SIGTERM must not cut that short
        raise Interrupted(signum, sender)

    signal.signal(signal.SIGTERM, raise_once)
    try:
        yield
    except Interrupted as stop:
        log.warning("job stopped by %s (%s): its open runs are KILLED; re-run the same command to resume",
                    stop.name, sender)
    finally:
        signal.signal(signal.SIGTERM, current)


def _ignore(signum: int, frame) -> None:
    log.warning("%s received again while the job stops: ignored", signal.Signals(signum).name)


def _exit_now(status: int) -> None:
    """Run the exit handlers (atexit: helper processes closed, logs flushed), then end the
    process without the interpreter's teardown of torch, Triton and MLflow (1-2 s of a
    stop's few seconds)."""
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)
