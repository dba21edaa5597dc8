"""Running jobs so that one job's crash cannot take the sweep down.

``IsolatedRunner`` keeps one worker process (started with ``spawn``: CUDA does not survive
``fork``) and sends it jobs one at a time.  If the worker dies (a signal such as SIGSEGV,
an abort in the compiler) or a job overruns its timeout (a hang), that job becomes a
FAILED result saying so, the worker is replaced, and the sweep goes on.  After any
failure past the permutation gate the worker is also replaced, because a CUDA error
(an illegal memory access, say) leaves the process's GPU context unusable.

The worker's stderr goes to a temporary file from its first instruction on (an import
error in spawn's bootstrap included): it is copied to the sweep's stderr after each job,
and a failed worker's reason ends with its last lines.  A worker that fails to start is
started once more before its job fails.

The worker runs in a session of its own, SIGINT blocked: a terminal's Ctrl-C reaches the
sweep alone, which kills the worker with every process it started (harness.hardware.processes).  Closed while a
job runs (the sweep interrupted: harness.run.interrupt), the runner kills it at once.

This module imports neither torch nor Triton (the pipeline, ``harness.run.steps``, is imported
where a job runs: ``_serve``, ``InProcessRunner.run``): a spawned worker imports it to find its
entry point, so it is in its own session and bound to its parent (``_in_own_session``) within
a fraction of a second of its start, and only then spends seconds importing the pipeline; a
stand-in worker (tests) imports nothing of it.

``InProcessRunner`` runs jobs in the calling process (the CPU default: no GPU context
to lose, and the interpreter's start-up is not paid again).

Given a :class:`~harness.hardware.pinning.DevicePin` (config ``devices``), ``IsolatedRunner`` starts
its worker with the pin's visibility variables, holds the pin's GPU lock while it has a
worker, and tags every result with ``visible_devices``.
"""
from __future__ import annotations

import codecs
import contextlib
import dataclasses
import fcntl
import logging
import multiprocessing as mp
import os
import signal
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import TYPE_CHECKING

from harness.hardware.device import DeviceInfo, describe_device, select_execution_mode
from harness.hardware.environment import temporary_environment
from harness.hardware.pinning import VISIBLE_DEVICES_TAG, DevicePin, visible_devices
from harness.hardware.processes import kill_group
from harness.job.result import FAILED, JobResult
from harness.job.spec import JobSpec
from harness.storage.field_names import Tag

if TYPE_CHECKING:
    from harness.run.options import JobOptions


@dataclass
class InProcessRunner:
    device: DeviceInfo

    def run(self, spec: JobSpec, options: JobOptions) -> JobResult:
        from harness.run.steps import run_job

        return run_job(spec, self.device, options)

    def close(self) -> None:
        pass


#: Limit for a fresh worker to import torch and triton and find its GPU, in s.
STARTUP_TIMEOUT_S = 300.0
#: How long, in s, a job whose worker SIGTERM killed waits for its own SIGTERM (_await_own_sigterm).
SIGTERM_GRACE_S = 1.0
#: How much of a failed worker's stderr a FAILED reason quotes: its last lines, at most chars.
STDERR_TAIL_LINES = 15
STDERR_TAIL_CHARS = 2000

log = logging.getLogger("swizzlebench")


class IsolatedRunner:
    """Runs each job in a long-lived child process, replaced whenever a job kills it.
    With ``pin``, the child sees only the pinned GPU and the GPU's lock is held from the
    first job until ``close``.

    ``worker`` (tests only) replaces the child's entry point :func:`_serve`: a picklable
    module-level callable taking the child's end of the pipe, e.g. a stand-in that fails to
    start."""

    def __init__(self, timeout_s: float, pin: DevicePin | None = None,
                 worker: Callable[[Connection], None] | None = None):
        self.timeout_s = timeout_s
        self.pin = pin
        self._worker = worker or _serve
        self._lock = pin.lock() if pin is not None else None
        self._child_env = pin.environment() if pin is not None else {}
        self._visible = visible_devices({**os.environ, **self._child_env})
        self._proc = None
        self._conn = None
        self._stderr: _WorkerStderr | None = None
        self._idle = False   # the worker is waiting for a job (started, and any job's result received)

    def run(self, spec: JobSpec, options: JobOptions) -> JobResult:
        result = self._run(spec, options)
        if self._visible is not None:  # the worker tags what it saw; this covers a dead worker
            result.tags.setdefault(VISIBLE_DEVICES_TAG, self._visible)
        return result

    def _run(self, spec: JobSpec, options: JobOptions) -> JobResult:
        if self._proc is None or not self._proc.is_alive():
            self._stop()  # a worker that died between jobs: pass on what it wrote
            problem = self._start()
            if problem:
                return _failed(spec, f"isolation: {problem}", "startup")
        start = time.monotonic()
        self._idle = False
        self._conn.send((spec, dataclasses.replace(options, isolated=True)))
        if not self._conn.poll(self.timeout_s):
            _, tail = self._stop()
            return _failed(spec, f"isolation: job timed out after {self.timeout_s:.0f} s (hang?); "
                                 f"worker killed, sweep continues{_quoted(tail)}", "timeout")
        try:
            result: JobResult = self._conn.recv()
            self._idle = True
        except (EOFError, ConnectionError):
            code, tail = self._stop(wait_s=5)
            if code == -signal.SIGTERM:
                _await_own_sigterm()
            return _failed(spec, f"isolation: worker process {_exit_text(code)} after "
                                 f"{time.monotonic() - start:.1f} s while running this job (crash in the "
                                 f"kernel, driver or compiler); sweep continues{_quoted(tail)}", "crash")
        self._stderr.forward()  # the job's warnings, now rather than when the worker ends
        if result.status == FAILED and result.failed_gate not in ("permutation", "shape"):
            self._stop()  # a GPU error may have poisoned the context: start clean
        return result

    def close(self) -> None:
        """Ask an idle worker to exit; kill one still starting or running a job (the sweep
        was interrupted) at once."""
        if self._proc is not None and self._proc.is_alive() and self._idle:
            try:
                self._conn.send(None)
                self._proc.join(10)
            except (BrokenPipeError, OSError):
                pass
        self._stop()
        if self._lock is not None:
            self._lock.release()

    def _start(self) -> str | None:
        """Start the worker, once more if the first start fails; returns why it could not
        start (each attempt's outcome and the last one's stderr), or None."""
        if self._lock is not None:
            self._lock.acquire()  # waits while another job of this host uses the GPU
        outcomes, tail = [], ""
        for attempt in (1, 2):
            problem = self._start_once()
            if problem is None:
                return None
            outcome, tail = problem
            outcomes.append(f"attempt {attempt} {outcome}")
            if attempt == 1:
                log.warning("isolation: worker process failed to start (%s); starting it once more", outcome)
        return f"worker process failed to start twice ({', '.join(outcomes)}); sweep continues{_quoted(tail)}"

    def _start_once(self) -> tuple[str, str] | None:
        """Start one worker and wait for its "ready"; returns (what went wrong, its stderr
        tail) or None."""
        ctx = mp.get_context("spawn")
        self._conn, child = ctx.Pipe()
        self._proc = ctx.Process(target=_in_own_session, args=(self._worker, child, os.getpid()), daemon=True,
                                 name="swizzlebench-job")
        self._stderr = _WorkerStderr()
        # A spawned child copies the environment when it is exec'd and must see the GPU
        # visibility variables before it imports torch; the job process itself is unchanged.
        with (temporary_environment(self._child_env), _stdlib_start_method(), self._stderr.as_fd2(),
              _ctrl_c_held()):
            self._proc.start()
        child.close()
        # Wait for the worker's "ready" (torch/triton imported, GPU found) under its own
        # limit, so that start-up time never counts against a job's isolation.timeout_s.
        if not self._conn.poll(STARTUP_TIMEOUT_S):
            _, tail = self._stop()
            return f"sent no ready within {STARTUP_TIMEOUT_S:g} s", tail
        try:
            self._conn.recv()
        except (EOFError, ConnectionError):
            code, tail = self._stop(wait_s=5)
            return _exit_text(code), tail
        self._stderr.forward()
        self._idle = True
        return None

    def _stop(self, wait_s: float = 0) -> tuple[int | None, str]:
        """End the worker: give it ``wait_s`` to exit on its own, then kill it, with every
        process it started (its process group).  Passes what it wrote to stderr on to ours;
        returns its exit code (None: still running after wait_s) and the tail of that stderr."""
        code = None
        if self._proc is not None:
            self._proc.join(wait_s)
            code = self._proc.exitcode
            kill_group(self._proc.pid)   # what it started, and itself when still running
            if code is None:
                self._proc.kill()   # killed while starting, before it had a session of its own
            self._proc.join(5)
        self._proc = None
        self._idle = False
        tail = ""
        if self._stderr is not None:
            tail = self._stderr.tail()
            self._stderr.forward()
            self._stderr.close()
            self._stderr = None
        return code, tail


class _WorkerStderr:
    """A worker's stderr: an unlinked temporary file that the child inherits as its fd 2,
    so it holds everything the child wrote from exec on (spawn's bootstrap included).  The
    child appends (``O_APPEND``) and this process reads with ``pread``, so neither moves the
    other's file offset; ``forward`` copies new text to this process's stderr in chunks."""

    CHUNK = 1 << 16

    def __init__(self) -> None:
        self._fd, path = tempfile.mkstemp(prefix="swizzlebench-worker-", suffix=".stderr")
        os.unlink(path)
        fcntl.fcntl(self._fd, fcntl.F_SETFL, fcntl.fcntl(self._fd, fcntl.F_GETFL) | os.O_APPEND)
        self._forwarded = 0  # bytes already copied to our stderr
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    @contextlib.contextmanager
    def as_fd2(self) -> Iterator[None]:
        """Make this file this process's fd 2 while a child is started (the exec'd child keeps
        it), then restore ours.  Whatever another thread of ours writes to fd 2 during the
        start (milliseconds) lands in the worker's file, and is forwarded with it."""
        sys.stderr.flush()
        saved = os.dup(2)
        os.dup2(self._fd, 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)

    def tail(self) -> str:
        """The last lines of what the worker wrote since the last ``forward``, on one line."""
        end = os.fstat(self._fd).st_size
        start = max(self._forwarded, end - 2 * STDERR_TAIL_CHARS)  # bounded, and enough
        text = os.pread(self._fd, end - start, start).decode(errors="replace")
        lines = [line.strip() for line in text.splitlines() if line.strip()]
        return " | ".join(lines[-STDERR_TAIL_LINES:])[-STDERR_TAIL_CHARS:]

    def forward(self) -> None:
        """Copy what the worker wrote since the last call to this process's stderr."""
        end = os.fstat(self._fd).st_size
        while self._forwarded < end:
            chunk = os.pread(self._fd, min(self.CHUNK, end - self._forwarded), self._forwarded)
            if not chunk:
                break
            self._forwarded += len(chunk)
            sys.stderr.write(self._decoder.decode(chunk))
        sys.stderr.flush()

    def close(self) -> None:
        os.close(self._fd)


def _exit_text(code: int | None) -> str:
    """How a worker process ended, from its exit code: ``killed by signal SIGSEGV``."""
    if code is None:
        return "stopped answering (killed; it had not exited)"
    if code < 0:
        try:
            return f"killed by signal {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exited with code {code}"


def _await_own_sigterm() -> None:
    """Wait :data:`SIGTERM_GRACE_S` for a SIGTERM to this process.  A worker killed by SIGTERM
    is most often one of the processes a job-wide stop signals together (``scancel``, a SLURM
    time limit: every process of the job): when this one's own SIGTERM comes, its handler
    (harness.run.interrupt) stops the job, whose run then ends KILLED, not FAILED as a crash."""
    time.sleep(SIGTERM_GRACE_S)


def _quoted(tail: str) -> str:
    """A reason's closing clause quoting a worker's stderr tail."""
    return f"; its stderr ended with: {tail}" if tail else "; its stderr was empty"


@contextlib.contextmanager
def _ctrl_c_held() -> Iterator[None]:
    """Block SIGINT while a worker starts: the worker inherits the block, so a terminal's
    Ctrl-C never reaches it (not even before it has a session of its own: the sweep stops it),
    and one that comes meanwhile reaches this process when the block ends."""
    held = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, held)


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


def _in_own_session(worker: Callable[[Connection], None], conn: Connection, parent: int) -> None:
    """The worker process's entry point: in a session of its own (harness.hardware.processes),
    bound to die with its ``parent`` (:func:`_die_with_parent`), then ``worker``."""
    os.setsid()
    _die_with_parent(parent)
    worker(conn)


def _die_with_parent(parent: int) -> None:
    """On Linux, ask the kernel to SIGKILL this process when the thread that started it ends,
    however it ends (``kill -9`` of the sweep included): a worker in a session of its own is
    out of reach of its sweep's process group, and would otherwise live on, holding its memory
    and, on a GPU node, the GPU.  Exits at once if ``parent`` is already gone."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    pr_set_pdeathsig = 1
    ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, int(signal.SIGKILL), 0, 0, 0)
    if os.getppid() != parent:   # it died before the request took effect
        os._exit(1)


def _serve(conn: Connection) -> None:
    """The child's loop: receive (spec, options), send back a JobResult (tagged with the
    GPU visibility this process really has)."""
    from harness.run.steps import run_job   # the pipeline: torch, Triton (see the module's docstring)

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
    from harness.storage.run_fields import spec_params

    result = JobResult(run_name=spec.run_name, params=spec_params(spec))
    result.tags.update({Tag.SPEC_HASH: spec.spec_hash, Tag.ISOLATION: kind})
    return result.fail(reason, gate="isolation")
