"""Profilers that wrap a worker process (ncu, rocprofv3): shared launch, attribution and
aggregation.  A backend only says how to build its command line and how to read its
output; everything else (batching, dispatch-order attribution, repeats -> mean ± std,
raw files kept) is here, once."""
from __future__ import annotations

import os
import subprocess
import sys
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path

from harness.hardware.environment import child_pythonpath
from harness.errors import UserError
from harness.hardware.pinning import DevicePin
from harness.hardware.processes import run_in_own_group
from harness.job.result import ProfilerReport
from harness.profilers.base import DispatchCounters, L2Reading
from harness.profilers.worker import BASELINE, CANDIDATE, ProfileRequest, launch_schedule, write_requests


class ProfilerUnavailable(UserError, RuntimeError):
    """The chosen profiler cannot run here; the message says how to get it or what to use instead."""


@dataclass
class ProfileOutcome:
    """What profiling one job gave: a reading, or the reason there is none, plus raw files."""

    reading: L2Reading | None = None
    error: str | None = None
    raw_files: list[Path] = field(default_factory=list)
    baseline_reading: L2Reading | None = None   # the baseline's, profiled in pairs with the job
    pairs: list[tuple[float, float]] = field(default_factory=list)  # (candidate, baseline) hit rate %, per pair
    #: (candidate, baseline) hit rate of the reads alone, %, per pair (ncu's tex read lookups;
    #: the simulator's loads), where the source has it
    read_pairs: list[tuple[float, float]] = field(default_factory=list)
    artifacts: dict[str, str] = field(default_factory=dict)  # extra text artifacts (e.g. per-XCD table)
    metrics: dict[str, float] = field(default_factory=dict)  # extra metrics beyond the reading's
    tags: dict[str, str] = field(default_factory=dict)       # extra tags (e.g. what a prediction was validated on)
    delta_error: float | None = None   # a noiseless source's measured error of the paired difference, % points
    read_delta_error: float | None = None   # the same for the read-only difference
    report: ProfilerReport | None = None    # the tool's report file holding this job's results (ncu's .ncu-rep)


@dataclass(frozen=True)
class LaunchStats:
    """Cost of one profiler launch (for the benchmarks): wall time in s, jobs and dispatches."""

    wall_s: float
    jobs: int
    dispatches: int


class Profiler(ABC):
    """A source of L2 readings for verified jobs."""

    name: str
    #: True when a reading has no noise (the simulator): one pair is then the whole difference.
    deterministic: bool = False
    #: True when readings come from a process of its own (ncu, rocprofv3), whose start-up a
    #: batch of the job's shapes shares; False (the simulator): each shape is profiled, logged
    #: and printed as soon as it is verified.
    batched: bool = True

    @abstractmethod
    def tags(self) -> dict[str, str]:
        """Tags logged on every profiled run: ``profiler``, ``profiler_version``, ``cache_control``..."""

    @abstractmethod
    def profile(self, requests: list[ProfileRequest], workdir: Path) -> dict[str, ProfileOutcome]:
        """Profile every request; the result maps each request key to its outcome."""

    def pin_to(self, pin: DevicePin) -> None:
        """Run this job's profiling GPU work on the pinned GPU (config ``devices``).  Profilers
        that start no GPU child process (the simulator) have nothing to pin."""


class ProcessWrappingProfiler(Profiler):
    """Runs ``python -m harness.profilers.worker`` under a vendor profiler."""

    #: True where the tool's hits and misses count reads alone (ncu's tex read lookups), so a
    #: paired read-only hit-rate difference can be taken; rocprofv3's TCC_HIT / MISS count all.
    reads_counted = False

    _pin: DevicePin | None = None  # set by pin_to: the worker's GPU, locked while it runs

    def __init__(self, executable: str, timeout_s: float = 1800.0):
        self.executable = executable
        self.timeout_s = timeout_s
        self.launches: list[LaunchStats] = []
        self._version: str | None = None

    @abstractmethod
    def read_version(self) -> str:
        """Ask the tool for its version (may raise RuntimeError / OSError)."""

    def version(self) -> str:
        """The tool's version, asked once; ``unknown (why)`` if it would not say."""
        if self._version is None:
            try:
                self._version = self.read_version()
            except (RuntimeError, OSError) as exc:
                self._version = f"unknown ({exc})"
        return self._version

    @abstractmethod
    def command(self, worker_cmd: list[str], workdir: Path, kernel_regex: str) -> list[str]:
        """The full command line that runs ``worker_cmd`` under the profiler."""

    @abstractmethod
    def read_dispatches(self, workdir: Path, stdout: str) -> list[DispatchCounters]:
        """Parse the profiler's output for this launch, dispatches in launch order."""

    @abstractmethod
    def raw_files(self, workdir: Path) -> list[Path]:
        """The profiler's raw output files to keep as artifacts."""

    def report_file(self, workdir: Path) -> Path | None:
        """The tool's own report of this launch, for its viewer (one of :meth:`raw_files`),
        whose results are numbered in launch order; None where the tool keeps none."""
        return None

    def profile(self, requests: list[ProfileRequest], workdir: Path) -> dict[str, ProfileOutcome]:
        workdir.mkdir(parents=True, exist_ok=True)
        request_file = workdir / "requests.json"
        write_requests(request_file, requests)
        names = sorted({name for r in requests for name in _kernel_function_names(r)})
        kernel_regex = "^(" + "|".join(names) + ")$"
        worker_cmd = [sys.executable, "-m", "harness.profilers.worker", str(request_file)]
        cmd = self.command(worker_cmd, workdir, kernel_regex)
        (workdir / "command.txt").write_text(" ".join(cmd) + "\n")

        start = time.perf_counter()
        try:
            proc = self._run_worker(cmd, workdir)
        except subprocess.TimeoutExpired:
            return _all_failed(requests, f"{self.name} timed out after {self.timeout_s:.0f} s")
        (workdir / "profiler_stdout.txt").write_text(proc.stdout)
        (workdir / "profiler_stderr.txt").write_text(proc.stderr)

        def raw() -> list[Path]:   # as they are now: reading the output may write files (ncu.csv)
            return self.raw_files(workdir) + [workdir / "profiler_stdout.txt", workdir / "profiler_stderr.txt"]

        if proc.returncode != 0:
            tail = " | ".join((proc.stderr or proc.stdout).strip().splitlines()[-3:])
            return _all_failed(requests, f"{self.name} exited with code {proc.returncode}: {tail}", raw())
        try:
            dispatches = self.read_dispatches(workdir, proc.stdout)
        except (ValueError, OSError) as exc:
            return _all_failed(requests, f"{self.name} output unreadable: {exc}", raw())
        self.launches.append(LaunchStats(time.perf_counter() - start, len(requests), len(dispatches)))
        report = self.report_file(workdir)
        return attribute_by_dispatch_order(requests, dispatches, raw(), self.reads_counted,
                                           report if report is not None and report.exists() else None)

    def pin_to(self, pin: DevicePin) -> None:
        self._pin = pin

    def _run_worker(self, cmd: list[str], workdir: Path) -> subprocess.CompletedProcess:
        """Run the profiler command in ``workdir``, importing what this process imports (a
        user's kernel or swizzle included: :func:`child_pythonpath`); when pinned, with the
        GPU's visibility variables and holding its lock (waiting while another job of this
        host uses that GPU).  The command runs in its own process group, killed whole on its
        timeout or an interruption (harness.hardware.processes)."""
        env = {**os.environ, **child_pythonpath()}
        if self._pin is None:
            return run_in_own_group(cmd, self.timeout_s, cwd=workdir, env=env)
        with self._pin.lock():
            return run_in_own_group(cmd, self.timeout_s, cwd=workdir, env={**env, **self._pin.environment()})


def attribute_by_dispatch_order(requests: list[ProfileRequest], dispatches: list[DispatchCounters],
                                raw_files: list[Path], reads_counted: bool = False,
                                report: Path | None = None) -> dict[str, ProfileOutcome]:
    """Give every dispatch to the (job, arm) the worker's :func:`launch_schedule` launched
    at that position, after checking the profiler saw exactly as many dispatches as the
    worker launched.  A paired job's i-th candidate and i-th baseline dispatch form pair i.
    ``reads_counted``: the dispatches' hits and misses are of reads alone (ncu), so pair i's
    read hit rates are ``read_pairs[i]``.  ``report``: the tool's report file, whose results
    are numbered in launch order: each outcome names it with its job's first and last result."""
    schedule = launch_schedule(requests)
    if len(dispatches) != len(schedule):
        return _all_failed(requests, f"profiler reported {len(dispatches)} conv dispatches, the worker "
                                     f"launched {len(schedule)} ({len(requests)} jobs x repeats, baselines "
                                     "included): cannot attribute", raw_files)
    mine: dict[tuple[str, str], list[DispatchCounters]] = {}
    positions: dict[str, list[int]] = {}
    for position, ((key, arm), dispatch) in enumerate(zip(schedule, dispatches)):
        mine.setdefault((key, arm), []).append(dispatch)
        positions.setdefault(key, []).append(position)
    outcomes = {}
    for req in requests:
        try:
            outcome = ProfileOutcome(L2Reading.from_dispatches(mine[(req.key, CANDIDATE)]), None, raw_files)
            if req.paired:
                base = mine[(req.key, BASELINE)]
                outcome.baseline_reading = L2Reading.from_dispatches(base)
                pairs = list(zip(mine[(req.key, CANDIDATE)], base))
                outcome.pairs = [(c.l2_hit_rate, b.l2_hit_rate) for c, b in pairs
                                 if c.l2_hit_rate is not None and b.l2_hit_rate is not None]
                if reads_counted:
                    rates = [(_read_rate(c), _read_rate(b)) for c, b in pairs]
                    outcome.read_pairs = [(c, b) for c, b in rates if c is not None and b is not None]
            if report is not None:
                outcome.report = ProfilerReport(report, min(positions[req.key]), max(positions[req.key]))
            outcomes[req.key] = outcome
        except ValueError as exc:
            outcomes[req.key] = ProfileOutcome(None, str(exc), raw_files)
    return outcomes


def _read_rate(d: DispatchCounters) -> float | None:
    """A dispatch's hit rate from its read hits and misses (%), None without them."""
    if d.l2_hits is None or d.l2_misses is None or d.l2_hits + d.l2_misses <= 0:
        return None
    return 100.0 * d.l2_hits / (d.l2_hits + d.l2_misses)


def _kernel_function_names(req: ProfileRequest) -> set[str]:
    """The main jit kernels the request's arms launch (two where the arms' configs run
    different kernels: igemm_best's WS in best-vs-best mode)."""
    return {req.plan.kernel.jit_kernel_for(arm.tiles).__name__ for arm in req.arms.values()}


def _all_failed(requests, reason: str, raw: list[Path] | None = None) -> dict[str, ProfileOutcome]:
    return {r.key: ProfileOutcome(None, reason, raw or []) for r in requests}
