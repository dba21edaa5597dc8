"""GPU timing: paired, interleaved rounds with the L2 flushed before every launch.

Why paired rounds
-----------------
Two numbers taken minutes apart (in two worker processes, say) differ by about 1 % on
the same GPU even for a 14 ms kernel whose own [p20, p80] band is 0.1 % wide: clocks,
temperature and neighbours drift.  A comparison must therefore be *paired*: the
candidate, its baseline (and the vendor call) are launched alternately, round after
round, in one process, each round in a fresh random order, so a drift hits all arms of a
round alike and cancels in the per-round ratio (:mod:`harness.measure.stats`).

One round launches every arm ``launches_per_round`` times; each launch is preceded by a
256 MiB clear (a cold L2, as ``triton.testing.do_bench`` does) and timed alone with CUDA
events around the kernel only, so the clear is never counted.  The round's value for an
arm is the median of its launches (one stray slow launch cannot move it).  Warm-up
launches (compilation, autotuning of the vendor library, first-touch) are excluded.

Keeping the CPU out of the numbers
----------------------------------
A launch's events bracket the kernel on the GPU's clock, but if the GPU runs out of queued
work the ``begin`` event fires before the CPU has finished launching the kernel, and the
launch overhead (Python, Triton's argument binding, cuDNN's heuristics: tens of µs) is
counted as kernel time, which on kernels of tens of µs is a multiple of their own.  So
every batch of rounds is enqueued behind a GPU *hold* (``torch.cuda._sleep``) sized to
1.5x the CPU time the previous batch took to enqueue: the whole batch sits queued before
the GPU reaches it.  A batch whose hold ran out before its last launch was queued is
counted (``paired_drained_batches``) and the next hold doubles.

Placements
----------
Sharing one set of buffers between the arms removes the bias *inside* a job, not the
dependence on where those buffers landed, which differs from one process to the next (two
processes can give CIs that exclude each other).  So a job spreads its rounds over
``placements`` fresh copies of its operands at other addresses
(:func:`harness.run.rounds.placements_of`; both arms share each copy): batches of ``check_every`` rounds take the
placements in turn, and the speedup's CI is Student's t over the per-placement means
(:func:`harness.measure.stats.clustered_ratio`), so it covers the between-placement spread
(logged: ``speedup_placement_sd_pct``).  Every placement gets a batch before the CI may end
the rounds.

Kernel time
-----------
CUDA events bracket more than the kernel: the GPU's own launch latency (a few µs) sits
between the ``begin`` event and the first block.  On 10-30 µs kernels that dilutes every
ratio toward 1.  ``timer=cupti`` runs the rounds under torch.profiler and times each launch
by the summed durations of the kernels it ran (CUPTI activity records), keeping the event
times beside them (``event_time_ms_median``).

When to stop
------------
Rounds run in batches of ``check_every``; after ``min_rounds`` the harness stops as soon
as the CI of the tracked ratio is narrower than ``target_precision`` (relative half-width)
or ``max_time_s`` is spent.  The rule looks at the interval's *width*, never at whether
it excludes 1, so stopping early cannot manufacture a verdict.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np
import torch
import torch.nn.functional as F

from harness.quiet import PROFILER_CLEARS_EVENTS, quiet
from harness.measure.cupti import LAUNCH_RANGE, gc_paused, kineto_launch_kernel_ms
from harness.measure.stats import PairedEstimate, cluster_means, clustered_ratio, paired_ratio
from harness.job.spec_config import TIMERS
from kernels.base import Operands
from kernels.problem import ConvShape

#: Bytes cleared before every timed launch: well above the largest L2 in use (MI300X 4 MB
#: per XCD + 256 MB Infinity Cache is the exception: its MALL is only partly flushed).
FLUSH_BYTES = 256 * 1024 * 1024


@dataclass(frozen=True)
class PairedSettings:
    """How paired timing runs (config ``compare``)."""

    launches_per_round: int = 3
    min_rounds: int = 20
    max_rounds: int = 5000
    check_every: int = 10
    target_precision: float = 0.005   # relative CI half-width of the tracked ratio that ends the rounds
    max_time_s: float = 3.0           # per shape, rounds only (warm-up excluded), s
    warmup_ms: float = 25.0           # per arm, before the first round, ms
    method: str = "t"                 # CI method, see harness.measure.stats
    placements: int = 1               # operand placements the rounds are spread over (1: one set of buffers)
    timer: str = "events"             # TIMERS, or a stand-in timer's import path

    def __post_init__(self) -> None:
        for name in ("launches_per_round", "min_rounds", "max_rounds", "check_every", "placements"):
            if int(getattr(self, name)) < 1:
                raise ValueError(f"compare.{name}={getattr(self, name)!r} must be a whole number >= 1")
        if not 0 < self.target_precision < 1:
            raise ValueError(f"compare.target_precision={self.target_precision!r} must be a fraction in (0, 1), "
                             "e.g. 0.005 for ±0.5 %")
        if self.max_time_s <= 0:
            raise ValueError(f"compare.max_time_s={self.max_time_s!r} must be > 0 (seconds per shape)")
        if self.timer not in TIMERS and ":" not in self.timer:
            raise ValueError(f"compare.timer={self.timer!r} is invalid; valid: {', '.join(TIMERS)}, "
                             "or a stand-in timer 'module:function'")

    @property
    def standin(self) -> bool:
        """True when ``timer`` names a stand-in timer rather than the GPU."""
        return self.timer not in TIMERS


@dataclass
class RoundSamples:
    """Kernel times of interleaved rounds, in ms: ``times_ms[arm][round][launch]``,
    the order the arms ran in each round, the operand placement of each round, and the
    rounds' wall time in s.  ``event_times_ms``: with ``timer=cupti``, the same launches
    timed by CUDA events (for comparison; the verdicts use ``times_ms``)."""

    times_ms: dict[str, list[list[float]]]
    orders: list[list[str]] = field(default_factory=list)
    wall_s: float = 0.0
    drained_batches: int = 0     # batches whose GPU hold ended before they were fully queued
    placements: list[int] = field(default_factory=list)
    timer: str = "events"
    event_times_ms: dict[str, list[list[float]]] | None = None

    @property
    def rounds(self) -> int:
        return len(self.orders)

    def per_round(self, arm: str) -> np.ndarray:
        """Each round's value for ``arm``: the median of its launches, ms."""
        return np.median(np.asarray(self.times_ms[arm], dtype=float), axis=1)

    def launches(self, arm: str) -> np.ndarray:
        """Every timed launch of ``arm``, ms."""
        return np.asarray(self.times_ms[arm], dtype=float).ravel()

    def quantiles(self, arm: str) -> tuple[float, float, float]:
        """(median, p20, p80) over every launch of ``arm``, ms."""
        median, p20, p80 = np.quantile(self.launches(arm), [0.5, 0.2, 0.8])
        return float(median), float(p20), float(p80)

    def ratio(self, baseline: str, candidate: str, method: str = "t") -> PairedEstimate:
        """Speedup of ``candidate`` over ``baseline``: over placements when the rounds used
        several (:func:`clustered_ratio`), else over rounds (:func:`paired_ratio`)."""
        b, c = self.per_round(baseline), self.per_round(candidate)
        if len(set(self.placements)) > 1:
            return clustered_ratio(b, c, np.asarray(self.placements))
        return paired_ratio(b, c, method)

    def placement_spread(self, baseline: str, candidate: str) -> float:
        """Standard deviation of the per-placement speedups, % (NaN with fewer than 2)."""
        if len(set(self.placements)) < 2:
            return math.nan
        logs = np.log(self.per_round(baseline)) - np.log(self.per_round(candidate))
        return float(np.std(cluster_means(logs, np.asarray(self.placements)), ddof=1) * 100)

    def to_json(self) -> dict:
        out = {"times_ms": self.times_ms, "orders": self.orders, "wall_s": self.wall_s,
               "drained_batches": self.drained_batches, "placements": self.placements, "timer": self.timer}
        if self.event_times_ms is not None:
            out["event_times_ms"] = self.event_times_ms
        return out


Arms = dict[str, Callable[[], None]]


def _warm_up(fn: Callable[[], None], warmup_ms: float) -> None:
    """Launch ``fn`` until ``warmup_ms`` of GPU time has passed (at least 3 launches)."""
    fn()
    torch.cuda.synchronize()
    start = time.perf_counter()
    launches = 0
    while launches < 3 or (time.perf_counter() - start) * 1e3 < warmup_ms:
        fn()
        launches += 1
        if launches % 8 == 0:
            torch.cuda.synchronize()
    torch.cuda.synchronize()


def time_interleaved(arms: Arms | Sequence[Arms], settings: PairedSettings, seed: int,
                     tracked: tuple[str, str] | None = None) -> RoundSamples:
    """Time every arm in interleaved rounds (see the module doc).  ``arms``: one dict of
    launches, or one per operand placement (the same arm names, other buffers): batches of
    ``check_every`` rounds take the placements in turn.  ``tracked`` = (baseline arm,
    candidate arm) whose speedup CI decides when to stop; None: run ``min_rounds`` rounds."""
    placements = [arms] if isinstance(arms, dict) else list(arms)
    names = list(placements[0])
    if any(list(p) != names for p in placements):
        raise ValueError(f"every placement needs the same arms {names}")
    rng = np.random.default_rng(seed)
    if settings.standin:
        timer: _Timer = _StandinTimer(load_standin_timer(settings.timer), rng)
    else:
        timer = GpuTimer(cupti=settings.timer == "cupti")
        for i, placement in enumerate(placements):
            for fn in placement.values():   # the first placement warms up; the others touch their buffers
                _warm_up(fn, settings.warmup_ms if i == 0 else 0.0)
    samples = RoundSamples(times_ms={name: [] for name in names}, timer=settings.timer)
    # every placement gets a batch before the CI may end the rounds (max_time_s still may)
    all_placed = len(placements) * int(settings.check_every)
    batch_index = 0
    with timer:
        start = time.perf_counter()      # after the profiler started (CUPTI's set-up is not rounds' time)
        while True:
            which = batch_index % len(placements)
            orders = [[names[i] for i in rng.permutation(len(names))] for _ in range(int(settings.check_every))]
            times = timer.run_batch(placements[which], which, orders, int(settings.launches_per_round),
                                    samples.rounds)
            for name, launches in times:
                samples.times_ms[name].append(launches)
            samples.orders.extend(orders)
            samples.placements.extend([which] * len(orders))
            batch_index += 1
            samples.wall_s = time.perf_counter() - start
            if samples.rounds >= settings.min_rounds:
                if samples.wall_s >= settings.max_time_s or samples.rounds >= settings.max_rounds:
                    break
                if samples.rounds >= all_placed and (
                        tracked is None or
                        samples.ratio(*tracked, settings.method).relative_half_width <= settings.target_precision):
                    break
    samples.drained_batches = timer.drained_batches
    if settings.timer == "cupti":
        samples.event_times_ms = samples.times_ms
        samples.times_ms = timer.kernel_times(samples.times_ms, samples.orders)
    return samples


class _Timer:
    """Times one batch of rounds: ``run_batch`` returns ``[(arm, [ms per launch]), ...]`` in
    launch order, one entry per (round, arm)."""

    drained_batches = 0

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        return None

    def run_batch(self, arms: Arms, placement: int, orders: list[list[str]], k: int, first_round: int
                  ) -> list[tuple[str, list[float]]]:
        raise NotImplementedError


class GpuTimer(_Timer):
    """CUDA events around every launch, the L2 cleared before each; batches queued behind a GPU
    hold (module doc).  ``cupti``: the whole loop also runs under torch.profiler, every
    launch inside a ``record_function`` range, and :meth:`kernel_times` reads the GPU's own
    duration of the kernels each launch ran (CUPTI activity records, launch latency excluded)."""

    def __init__(self, cupti: bool = False) -> None:
        self.flush = torch.empty(FLUSH_BYTES // 4, dtype=torch.int32, device="cuda")
        self.cycles_per_s = _sm_cycles_per_s()
        self.hold_s = 0.02                 # first batch: 20 ms; then 1.5x the last batch's enqueue time
        self.cupti = cupti
        self.profile = None
        self.launches = 0

    def __enter__(self):
        if self.cupti:
            from torch.profiler import ProfilerActivity, profile

            with quiet(PROFILER_CLEARS_EVENTS, UserWarning):   # one session per job, its own events read
                self.profile = profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA])
                self.profile.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        if self.profile is not None:
            with quiet(PROFILER_CLEARS_EVENTS, UserWarning):
                self.profile.__exit__(*exc)

    def run_batch(self, arms, placement, orders, k, first_round):
        batch = [(name, [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
                         for _ in range(k)]) for order in orders for name in order]
        torch.cuda._sleep(int(self.hold_s * self.cycles_per_s))    # hold the stream while the batch is queued
        held = torch.cuda.Event()
        held.record()
        enqueue_start = time.perf_counter()
        for name, events in batch:
            fn = arms[name]
            for begin, end in events:
                self.flush.zero_()
                begin.record()
                if self.cupti:
                    with torch.profiler.record_function(f"{LAUNCH_RANGE}{self.launches}"):
                        fn()
                    self.launches += 1
                else:
                    fn()
                end.record()
        enqueue_s = time.perf_counter() - enqueue_start
        drained = held.query()                             # the hold ended before the last launch was queued
        self.drained_batches += int(drained)
        self.hold_s = min(0.5, max(1.5 * enqueue_s, 2 * self.hold_s if drained else 0.0))
        torch.cuda.synchronize()
        return [(name, [begin.elapsed_time(end) for begin, end in events]) for name, events in batch]

    def kernel_times(self, event_times: dict[str, list[list[float]]], orders: list[list[str]]
                     ) -> dict[str, list[list[float]]]:
        """The launches of ``event_times`` (same layout; ``orders``: the arms of each round in
        launch order) timed by their kernels' durations on the GPU, ms."""
        with gc_paused():    # tens of thousands of records: a collection would cost more than the reading
            durations = iter(kineto_launch_kernel_ms(self.profile.profiler.kineto_results.events(), self.launches))
        out: dict[str, list[list[float]]] = {arm: [] for arm in event_times}
        for r, order in enumerate(orders):
            for arm in order:
                out[arm].append([next(durations) for _ in event_times[arm][r]])
        return out


class _StandinTimer(_Timer):
    """A stand-in for the GPU (tests, and trying the statistics without one): never launches
    anything; ``fn(arm, placement, round_index, rng) -> ms`` gives each launch's time."""

    def __init__(self, fn: Callable[..., float], rng: np.random.Generator) -> None:
        self.fn, self.rng = fn, rng

    def run_batch(self, arms, placement, orders, k, first_round):
        return [(name, [float(self.fn(name, placement, first_round + r, self.rng)) for _ in range(k)])
                for r, order in enumerate(orders) for name in order]


def load_standin_timer(path: str) -> Callable[..., float]:
    """The stand-in timer ``module:function`` (``compare.timer``), imported (never eval'ed)."""
    from harness.job.user_code import locate

    fn = locate(path, "compare.timer", "a stand-in timer function(arm, placement, round_index, rng) -> ms")
    if not callable(fn):
        raise ValueError(f"compare.timer={path!r} is not a function")
    return fn


def _sm_cycles_per_s() -> float:
    """SM clock cycles per second, for sizing ``torch.cuda._sleep`` (max boost clock: a
    slower clock only makes the hold longer)."""
    khz = getattr(torch.cuda.get_device_properties(torch.cuda.current_device()), "clock_rate", 0) or 2_000_000
    return float(khz) * 1e3


def vendor_conv(ops: Operands, shape: ConvShape, benchmark: bool = False) -> Callable[[], None]:
    """The vendor baseline: ``torch.nn.functional.conv2d`` on the job's input tensor as it is,
    the same one our kernels get (``input_layout``, channels_last by default); weights packed
    once in the input's format.  ``benchmark``: with ``torch.backends.cudnn.benchmark`` on
    (cuDNN / MIOpen time their algorithms on the first call, which the warm-up before the
    timed rounds makes, and keep the fastest); off: their heuristic choice."""
    x = ops.x
    fmt = torch.channels_last if x.dim() == 4 and x.is_contiguous(memory_format=torch.channels_last) \
        else torch.contiguous_format
    w = ops.w.contiguous(memory_format=fmt)
    bias = ops.bias

    def run() -> None:
        torch.backends.cudnn.benchmark = benchmark
        F.conv2d(x, w, bias, stride=shape.stride, padding=shape.padding)

    return run


def tflops(shape: ConvShape, ms: float) -> float:
    """Throughput of one conv of ``shape`` taking ``ms`` milliseconds, in TFLOP/s."""
    return shape.flops / (ms * 1e-3) / 1e12
