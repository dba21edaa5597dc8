"""``IsolatedRunner`` when its worker process fails: a start that fails is retried once, and
the FAILED reason carries the exit code and the tail of the worker's stderr (captured from
spawn's bootstrap on), for start failures and for crashes during a job.  The stand-in
workers replace ``_serve`` through ``IsolatedRunner(worker=...)``; each runs in a
spawned child, so they are module-level (tests/run/isolation_workers.py, which imports no
more than they need) and take their files as arguments."""
from __future__ import annotations

import functools
import os
import sys
from pathlib import Path

import pytest

import harness.run.isolation as isolation
from harness.run.isolation import IsolatedRunner
from harness.run.steps import JobOptions
from harness.job.result import FAILED, FINISHED, JobResult
from tests.run.isolation_workers import (BOOM, _aborts_in_job, _exits_255, _fails_first_start, _FailsToUnpickle,
                                         _never_ready, _terminated_with_the_job, _unreachable)
from tests.run.test_steps import SHAPES, TILES, _spec


def _run_once(worker, options: JobOptions | None = None) -> JobResult:
    """One igemm job through an IsolatedRunner with ``worker`` as the child's entry point."""
    runner = IsolatedRunner(timeout_s=120, worker=worker)
    try:
        return runner.run(_spec("igemm", "identity", SHAPES["igemm"]),
                          options or JobOptions(interpret_tiles=TILES["igemm"]))
    finally:
        runner.close()


def test_a_worker_that_exits_at_start_is_retried_once_and_the_reason_has_its_stderr(tmp_path, capfd):
    starts = tmp_path / "starts"
    result = _run_once(functools.partial(_exits_255, str(starts)))
    assert result.status == FAILED
    assert starts.read_text().splitlines() == ["start", "start"]
    assert result.reason.startswith("isolation: worker process failed to start twice (attempt 1 exited with "
                                    "code 255, attempt 2 exited with code 255); sweep continues"), result.reason
    assert result.reason.endswith(f"; its stderr ended with: {BOOM}"), result.reason
    assert result.tags["isolation"] == "startup" and result.failed_gate == "isolation"
    assert capfd.readouterr().err.count(BOOM) == 2  # both attempts' stderr reach the sweep's


def test_an_import_error_in_spawns_bootstrap_is_in_the_reason():
    result = _run_once(functools.partial(_unreachable, _FailsToUnpickle()))
    assert result.status == FAILED
    assert "failed to start twice (attempt 1 exited with code 1, attempt 2 exited with code 1)" in result.reason
    assert f"ImportError: {BOOM}" in result.reason, result.reason
    assert "Traceback (most recent call last):" in result.reason


def test_a_worker_that_fails_its_first_start_runs_the_job_on_the_second(tmp_path, capfd, caplog):
    starts = tmp_path / "starts"
    result = _run_once(functools.partial(_fails_first_start, str(starts)))
    assert result.status == FINISHED, result.reason
    assert len(starts.read_text().splitlines()) == 2
    err = capfd.readouterr().err
    assert "boom: first start only" in err
    assert "failed to start (exited with code 255); starting it once more" in caplog.text
    assert "warning: second start, serving" in err  # a healthy worker's stderr is forwarded too


def test_a_worker_that_never_says_ready_is_retried_then_fails(tmp_path, monkeypatch):
    monkeypatch.setattr(isolation, "STARTUP_TIMEOUT_S", 0.5)
    starts = tmp_path / "starts"
    result = _run_once(functools.partial(_never_ready, str(starts)))
    assert result.status == FAILED
    assert ("failed to start twice (attempt 1 sent no ready within 0.5 s, attempt 2 sent no ready within 0.5 s)"
            in result.reason), result.reason


def test_a_crash_during_a_job_names_the_signal_and_quotes_the_stderr():
    result = _run_once(_aborts_in_job)
    assert result.status == FAILED and result.tags["isolation"] == "crash"
    assert result.reason.startswith("isolation: worker process killed by signal SIGABRT after "), result.reason
    assert result.reason.endswith("; its stderr ended with: dying: bad kernel"), result.reason


def test_the_stderr_tail_is_the_last_lines_within_the_character_limit(capfd):
    stderr = isolation._WorkerStderr()
    try:
        os.write(stderr._fd, b"".join(b"line %d\n" % i for i in range(40)))
        assert stderr.tail() == " | ".join(f"line {i}" for i in range(25, 40))
        stderr.forward()
        assert stderr.tail() == ""  # only what was not forwarded yet
        os.write(stderr._fd, b"x" * 5000 + b"\n")
        assert stderr.tail() == "x" * isolation.STDERR_TAIL_CHARS
    finally:
        stderr.close()
    assert capfd.readouterr().err.startswith("line 0\nline 1\n")


@pytest.mark.parametrize("code, text", [(255, "exited with code 255"), (-11, "killed by signal SIGSEGV"),
                                        (None, "stopped answering (killed; it had not exited)")])
def test_exit_text(code, text):
    assert isolation._exit_text(code) == text


def test_a_worker_killed_by_a_job_wide_sigterm_stops_the_job_not_a_crash():
    """The worker dies first; the job's own SIGTERM, within the grace, stops the job
    (harness.run.interrupt) rather than a FAILED 'crash' result being returned."""
    from harness.run.interrupt import Interrupted, stop_job_on_sigterm

    results: list[JobResult] = []
    stops: list[Interrupted] = []
    with stop_job_on_sigterm("a test"):
        try:
            results.append(_run_once(_terminated_with_the_job))
        except Interrupted as stop:
            stops.append(stop)
            raise
    assert results == [] and len(stops) == 1
    assert stops[0].reason("mid-job").startswith("killed: SIGTERM received mid-job (a test); re-run"), stops[0]


def test_a_worker_dies_with_its_sweep_even_by_kill_9():
    """The worker has a session of its own (out of reach of its sweep's process group), so
    the kernel ends it when the sweep's process dies however it dies: after ``kill -9`` of
    the sweep no worker hung in a job is left holding memory (or, on a GPU node, the GPU)."""
    import signal
    import subprocess
    import time

    from tests.faults.test_signals import alive

    parent = ("import sys, time\nfrom harness.run.isolation import IsolatedRunner\n"
              "from tests.run.isolation_workers import _hangs\n"
              "runner = IsolatedRunner(timeout_s=60, worker=_hangs)\n"
              "assert runner._start() is None\nprint(runner._proc.pid, flush=True)\ntime.sleep(600)\n")
    proc = subprocess.Popen([sys.executable, "-c", parent], cwd=Path(__file__).resolve().parents[2],
                            stdout=subprocess.PIPE, text=True)
    try:
        worker = int(proc.stdout.readline())
        os.kill(worker, 0)                          # alive beside its parent
        proc.kill()
        proc.wait(10)
        deadline = time.monotonic() + 10
        while alive({worker}) and time.monotonic() < deadline:
            time.sleep(0.05)
        if alive({worker}):
            os.kill(worker, signal.SIGKILL)
            pytest.fail(f"worker {worker} outlived its killed parent by 10 s")
    finally:
        proc.kill()


def test_the_workers_entry_module_imports_no_torch():
    """A spawned worker imports harness.run.isolation to find its entry point: without torch and
    Triton (the pipeline is imported in ``_serve``), it is in its own session and bound to its
    parent before the seconds of those imports, and a stand-in worker starts in a fraction of one."""
    import subprocess

    probe = ("import sys\nimport harness.run.isolation\n"
             "print(sorted(m for m in ('torch', 'triton', 'harness.run.steps') if m in sys.modules))")
    proc = subprocess.run([sys.executable, "-c", probe], cwd=Path(__file__).resolve().parents[2],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == "[]", proc.stdout
