"""SIGTERM in a launcher's worker process (a SLURM task, a joblib worker): the first one
stops the job (:class:`Interrupted`, its reason naming the sender), a repeated one is
ignored, the block's code after it runs, and the handler found before is restored; in the
launching process (under ``stop_on_signals``) nothing changes.  Signals go to this test's
own process, so each case keeps them inside the handlers it installs."""
from __future__ import annotations

import os
import signal
import time

import pytest

from harness.run.interrupt import (SLURM_SENDER, Interrupted, signal_sender, stop_job_on_sigterm,
                                   stop_on_signals)


@pytest.fixture
def submitit_like_handler():
    """A SIGTERM handler that only notes the signal, as submitit's ``bypass`` logs it."""
    noted: list[int] = []
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: noted.append(signum))
    yield noted
    signal.signal(signal.SIGTERM, previous)


def test_the_first_sigterm_stops_the_job_and_a_repeated_one_is_ignored(submitit_like_handler):
    stopped: list[Interrupted] = []
    after = []
    with stop_job_on_sigterm("scancel"):
        try:
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)
            pytest.fail("SIGTERM did not stop the job")
        except Interrupted as stop:
            stopped.append(stop)
            os.kill(os.getpid(), signal.SIGTERM)   # srun forwards the one it got: ignored while the job stops
            time.sleep(0.05)
            raise
    after.append("the code after the block ran")
    assert after and len(stopped) == 1 and submitit_like_handler == []
    assert stopped[0].reason("mid-job") == ("killed: SIGTERM received mid-job (scancel); re-run the same command "
                                            "to resume (FINISHED runs are skipped)")
    os.kill(os.getpid(), signal.SIGTERM)   # the handler found before is back
    time.sleep(0.05)
    assert submitit_like_handler == [signal.SIGTERM]


def test_in_the_launching_process_the_sweeps_handler_stays():
    with stop_on_signals(on_stop=lambda stop: None):
        sweeps = signal.getsignal(signal.SIGTERM)
        with stop_job_on_sigterm("scancel"):
            assert signal.getsignal(signal.SIGTERM) is sweeps


def test_the_sender_is_slurm_in_a_slurm_task():
    assert signal_sender({"SLURM_JOB_ID": "12"}) == SLURM_SENDER
    assert signal_sender({}) == "the launching sweep stopping"
