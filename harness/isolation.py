"""Running jobs so that one job's crash cannot take the sweep down.

``IsolatedRunner`` keeps one worker process (started with ``spawn``: CUDA does not survive
``fork``) and sends it jobs one at a time.  If the worker dies (a signal such as SIGSEGV,
an abort in the compiler) or a job overruns its timeout (a hang), that job becomes a
FAILED result saying so, the worker is replaced, and the sweep goes on.  After any
failure past the permutation gate the worker is also replaced, because a CUDA error
(an illegal memory access, say) leaves the process's GPU context unusable.

``InProcessRunner`` runs jobs in the calling process (the CPU default: no GPU context
to lose, and the interpreter's start-up is not paid again).
"""
from __future__ import annotations

import dataclasses
import multiprocessing as mp
import signal
import time
from dataclasses import dataclass

from harness.device import DeviceInfo, describe_device, select_execution_mode
from harness.job import JobOptions, run_job
from harness.result import FAILED, JobResult
from harness.spec import JobSpec


@dataclass
class InProcessRunner:
    device: DeviceInfo

    def run(self, spec: JobSpec, options: JobOptions) -> JobResult:
        return run_job(spec, self.device, options)

    def close(self) -> None:
        pass


class IsolatedRunner:
    """Runs each job in a long-lived child process, replaced whenever a job kills it."""

    def __init__(self, timeout_s: float):
        self.timeout_s = timeout_s
        self._proc = None
        self._conn = None

    def run(self, spec: JobSpec, options: JobOptions) -> JobResult:
        if self._proc is None or not self._proc.is_alive():
            self._start()
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

    def _start(self) -> None:
        ctx = mp.get_context("spawn")
        self._conn, child = ctx.Pipe()
        self._proc = ctx.Process(target=_serve, args=(child,), daemon=True, name="swizzlebench-job")
        self._proc.start()
        child.close()

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


def _serve(conn) -> None:
    """The child's loop: receive (spec, options), send back a JobResult."""
    device = describe_device(select_execution_mode())
    while True:
        msg = conn.recv()
        if msg is None:
            return
        spec, options = msg
        conn.send(run_job(spec, device, options))


def _failed(spec: JobSpec, reason: str, kind: str) -> JobResult:
    result = JobResult(run_name=spec.run_name, params=spec.as_params())
    result.tags.update({"spec_hash": spec.spec_hash, "isolation": kind})
    return result.fail(reason, gate="isolation")
