"""GPU timing: paired, interleaved rounds with the L2 flushed before every launch.

Why paired rounds
-----------------
Two numbers taken minutes apart (in two worker processes, say) differ by about 1 % on
the same GPU even for a 14 ms kernel whose own [p20, p80] band is 0.1 % wide: clocks,
temperature and neighbours drift.  A comparison must therefore be *paired*: the
candidate, its baseline (and the vendor call) are launched alternately, round after
round, in one process, each round in a fresh random order, so a drift hits all arms of a
round alike and cancels in the per-round ratio (:mod:`harness.pipeline.stats`).

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
counted as kernel time.  Measured on an H100 (2026-11-23, ResNet-50 1x1 layers of
20-40 µs): without a hold, rounds of ~170 µs of CPU per launch drained the queue and
timed igemm_fast at 2-4x what ``do_bench`` (which queues launches back to back) saw.  So
every batch of rounds is enqueued behind a GPU *hold* (``torch.cuda._sleep``) sized to
1.5x the CPU time the previous batch took to enqueue: the whole batch sits queued before
the GPU reaches it.  A batch whose hold ran out before its last launch was queued is
counted (``paired_drained_batches``) and the next hold doubles.

When to stop
------------
Rounds run in batches of ``check_every``; after ``min_rounds`` the harness stops as soon
as the CI of the tracked ratio is narrower than ``target_precision`` (relative half-width)
or ``max_time_s`` is spent.  The rule looks at the interval's *width*, never at whether
it excludes 1, so stopping early cannot manufacture a verdict.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import torch
import torch.nn.functional as F

from harness.pipeline.stats import paired_ratio
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
    method: str = "t"                 # CI method, see harness.pipeline.stats

    def __post_init__(self) -> None:
        for name in ("launches_per_round", "min_rounds", "max_rounds", "check_every"):
            if int(getattr(self, name)) < 1:
                raise ValueError(f"compare.{name}={getattr(self, name)!r} must be a whole number >= 1")
        if not 0 < self.target_precision < 1:
            raise ValueError(f"compare.target_precision={self.target_precision!r} must be a fraction in (0, 1), "
                             "e.g. 0.005 for ±0.5 %")
        if self.max_time_s <= 0:
            raise ValueError(f"compare.max_time_s={self.max_time_s!r} must be > 0 (seconds per shape)")


@dataclass
class RoundSamples:
    """Kernel times of interleaved rounds, in ms: ``times_ms[arm][round][launch]``,
    the order the arms ran in each round, and the rounds' wall time in s."""

    times_ms: dict[str, list[list[float]]]
    orders: list[list[str]] = field(default_factory=list)
    wall_s: float = 0.0
    drained_batches: int = 0     # batches whose GPU hold ended before they were fully queued

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

    def to_json(self) -> dict:
        return {"times_ms": self.times_ms, "orders": self.orders, "wall_s": self.wall_s,
                "drained_batches": self.drained_batches}


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


def time_interleaved(arms: dict[str, Callable[[], None]], settings: PairedSettings, seed: int,
                     tracked: tuple[str, str] | None = None) -> RoundSamples:
    """Time every arm in interleaved rounds (see the module doc).  ``tracked`` =
    (baseline arm, candidate arm) whose speedup CI decides when to stop; None: run
    ``min_rounds`` rounds."""
    names = list(arms)
    flush = torch.empty(FLUSH_BYTES // 4, dtype=torch.int32, device="cuda")
    rng = np.random.default_rng(seed)
    for fn in arms.values():
        _warm_up(fn, settings.warmup_ms)
    samples = RoundSamples(times_ms={name: [] for name in names})
    k = int(settings.launches_per_round)
    cycles_per_s = _sm_cycles_per_s()
    hold_s = 0.02                  # first batch: 20 ms; then 1.5x the last batch's enqueue time
    start = time.perf_counter()
    while True:
        orders = [[names[i] for i in rng.permutation(len(names))] for _ in range(int(settings.check_every))]
        batch = [(name, [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
                         for _ in range(k)]) for order in orders for name in order]
        torch.cuda._sleep(int(hold_s * cycles_per_s))     # hold the stream while the batch is queued
        held = torch.cuda.Event()
        held.record()
        enqueue_start = time.perf_counter()
        for name, events in batch:
            for begin, end in events:
                flush.zero_()
                begin.record()
                arms[name]()
                end.record()
        enqueue_s = time.perf_counter() - enqueue_start
        drained = held.query()                            # the hold ended before the last launch was queued
        samples.drained_batches += int(drained)
        hold_s = min(0.5, max(1.5 * enqueue_s, 2 * hold_s if drained else 0.0))
        samples.orders.extend(orders)
        torch.cuda.synchronize()
        for name, events in batch:
            samples.times_ms[name].append([begin.elapsed_time(end) for begin, end in events])
        samples.wall_s = time.perf_counter() - start
        if samples.rounds >= settings.min_rounds:
            if samples.wall_s >= settings.max_time_s or samples.rounds >= settings.max_rounds:
                break
            if tracked is None:
                break
            est = paired_ratio(samples.per_round(tracked[0]), samples.per_round(tracked[1]), settings.method)
            if est.relative_half_width <= settings.target_precision:
                break
    return samples


def _sm_cycles_per_s() -> float:
    """SM clock cycles per second, for sizing ``torch.cuda._sleep`` (max boost clock: a
    slower clock only makes the hold longer)."""
    khz = getattr(torch.cuda.get_device_properties(torch.cuda.current_device()), "clock_rate", 0) or 2_000_000
    return float(khz) * 1e3


def vendor_conv(ops: Operands, shape: ConvShape) -> Callable[[], None]:
    """The vendor baseline: ``torch.nn.functional.conv2d`` (cuDNN / MIOpen pick their own
    algorithm) on the job's input tensor as it is, the same one our kernels get
    (``input_layout``, channels_last by default); weights packed once in the input's format."""
    x = ops.x
    fmt = torch.channels_last if x.dim() == 4 and x.is_contiguous(memory_format=torch.channels_last) \
        else torch.contiguous_format
    w = ops.w.contiguous(memory_format=fmt)
    bias = ops.bias

    def run() -> None:
        F.conv2d(x, w, bias, stride=shape.stride, padding=shape.padding)

    return run


def tflops(shape: ConvShape, ms: float) -> float:
    """Throughput of one conv of ``shape`` taking ``ms`` milliseconds, in TFLOP/s."""
    return shape.flops / (ms * 1e-3) / 1e12
