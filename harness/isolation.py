"""Running jobs so that one job's crash cannot take the sweep down.

``IsolatedRunner`` keeps one worker process (started with ``spawn``: CUDA does not survive
``fork``) and sends it jobs one at a time.  If the worker dies (a signal such as SIGSEGV,
an abort in the compiler) or a job overruns its timeout (a hang), that job becomes a
FAILED result saying so, the worker is replaced, and the sweep goes on.  After any
failure past the permutation gate the worker is also replaced, because a CUDA error
(an illegal memory access, say) leaves the process's GPU context unusable.

``InProcessRunner`` runs jobs in the calling process (the CPU default: no GPU context
to lose, and the interpreter's start-up is not paid again).

Given a :class:`~harness.pinning.DevicePin` (config ``devices``), ``IsolatedRunner`` starts
its worker with the pin's visibility variables, holds the pin's GPU lock while it has a
worker, and tags every result with ``visible_devices``.
"""
from __future__ import annotations

import contextlib
import dataclasses
import multiprocessing as mp
import os
import signal
import time
from collections.abc import Iterator
from dataclasses import dataclass

from harness.device import DeviceInfo, describe_device, select_execution_mode
from harness.environment import temporary_environment
from harness.job import JobOptions, run_job
from harness.pinning import VISIBLE_DEVICES_TAG, DevicePin, visible_devices
from harness.result import FAILED, JobResult
from harness.spec import JobSpec


@dataclass
class InProcessRunner:
    device: DeviceInfo

    def run(self, spec: JobSpec, options: JobOptions) -> JobResult:
        return run_job(spec, self.device, options)

    def close(self) -> None:
        pass


#: Limit for a fresh worker to import torch and triton and find its GPU, in s.
STARTUP_TIMEOUT_S = 300.0


class IsolatedRunner:
    """Runs each job in a long-lived child process, replaced whenever a job kills it.
    With ``pin``, the child sees only the pinned GPU and the GPU's lock is held from the
    first job until ``close``."""

    def __init__(self, timeout_s: float, pin: DevicePin | None = None):
        self.timeout_s = timeout_s
        self.pin = pin
        self._lock = pin.lock() if pin is not None else None
        self._child_env = pin.environment() if pin is not None else {}
        self._visible = visible_devices({**os.environ, **self._child_env})
        self._proc = None
        self._conn = None

    def run(self, spec: JobSpec, options: JobOptions) -> JobResult:
        result = self._run(spec, options)
        if self._visible is not None:  # the worker tags what it saw; this covers a dead worker
            result.tags.setdefault(VISIBLE_DEVICES_TAG, self._visible)
        return result

    def _run(self, spec: JobSpec, options: JobOptions) -> JobResult:
        if self._proc is None or not self._proc.is_alive():
            problem = self._start()
            if problem:
                return _failed(spec, f"isolation: {problem}; sweep continues", "startup")
        start = time.monotonic()
        self._conn.send((spec, dataclasses.replace(options, isolated=True)))
        if not self._conn.poll(self.timeout_s):
            self._kill()
            return _failed(spec, f"isolation: job timed out after {self.timeout_s:.0f} s (hang?); "
                                 "worker killed, sweep continues", "timeout")
        try:
            result: JobResult = self._conn.recv()
        except (EOFError, ConnectionError):
            code = self._reap()
            what = (f"killed by signal {signal.Signals(-code).name}" if code is not None and code < 0
                    else f"exited with code {code}")
            return _failed(spec, f"isolation: worker process {what} after {time.monotonic() - start:.1f} s "
                                 "while running this job (crash in the kernel, driver or compiler); "
                                 "sweep continues", "crash")
        if result.status == FAILED and result.tags.get("failed_gate") not in ("permutation", "shape"):
            self._kill()  # a GPU error may have poisoned the context: start clean
        return result

    def close(self) -> None:
        if self._proc is not None and self._proc.is_alive():
            try:
                self._conn.send(None)
                self._proc.join(10)
            except (BrokenPipeError, OSError):
                pass
        self._kill()
        if self._lock is not None:
            self._lock.release()

    def _start(self) -> str | None:
        """Start the worker; returns why it could not start, or None."""
        if self._lock is not None:
            self._lock.acquire()  # waits while another job of this host uses the GPU
        ctx = mp.get_context("spawn")
        self._conn, child = ctx.Pipe()
        self._proc = ctx.Process(target=_serve, args=(child,), daemon=True, name="swizzlebench-job")
        # A spawned child copies the environment when it is exec'd and must see the GPU
        # visibility variables before it imports torch; the job process itself is unchanged.
        with temporary_environment(self._child_env), _stdlib_start_method():
            self._proc.start()
        child.close()
        # Wait for the worker's "ready" (torch/triton imported, GPU found) under its own
        # limit, so that start-up time never counts against a job's isolation.timeout_s.
        if not self._conn.poll(STARTUP_TIMEOUT_S):
            self._kill()
            return f"worker process did not start within {STARTUP_TIMEOUT_S:.0f} s"
        try:
            self._conn.recv()
        except (EOFError, ConnectionError):
            code = self._reap()
            return f"worker process failed to start (exit code {code})"
        return None

    def _reap(self) -> int | None:
        self._proc.join(5)
        code = self._proc.exitcode
        self._proc = None
        return code

    def _kill(self) -> None:
        if self._proc is not None:
            if self._proc.is_alive():
                self._proc.kill()
            self._proc.join(5)
        self._proc = None


@contextlib.contextmanager
def _stdlib_start_method() -> Iterator[None]:
    """Make the process-wide default start method a standard one while a child starts.

    A spawned child first calls ``set_start_method`` with its parent's default.  Inside a
    joblib (loky) worker, as under ``hydra/launcher=joblib``, that default is ``loky``, which
    a fresh interpreter does not know, so the child would die at once ("cannot find context
    for 'loky'").  The default is restored afterwards."""
    current = mp.get_start_method(allow_none=True)
    if current in (None, "fork", "spawn", "forkserver"):
        yield
        return
    mp.set_start_method("spawn", force=True)
    try:
        yield
    finally:
        mp.set_start_method(current, force=True)


def _serve(conn) -> None:
    """The child's loop: receive (spec, options), send back a JobResult (tagged with the
    GPU visibility this process really has)."""
    device = describe_device(select_execution_mode())
    visible = visible_devices(os.environ)
    conn.send("ready")
    while True:
        msg = conn.recv()
        if msg is None:
            return
        spec, options = msg
        result = run_job(spec, device, options)
        if visible is not None:
            result.tags[VISIBLE_DEVICES_TAG] = visible
        conn.send(result)


def _failed(spec: JobSpec, reason: str, kind: str) -> JobResult:
    result = JobResult(run_name=spec.run_name, params=spec.as_params())
    result.tags.update({"spec_hash": spec.spec_hash, "isolation": kind})
    return result.fail(reason, gate="isolation")
