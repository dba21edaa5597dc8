"""Records every profiler backend produces, and the aggregation over repeats."""
from __future__ import annotations

import statistics
from dataclasses import dataclass, field

from harness.storage.field_names import Metric


def lookup_hit_rate(hits: float | None, misses: float | None) -> float | None:
    """100 * hits / (hits + misses), in %; None when either count is missing or both are 0."""
    if hits is None or misses is None or hits + misses <= 0:
        return None
    return 100.0 * hits / (hits + misses)


@dataclass(frozen=True)
class DispatchCounters:
    """Counters of one kernel dispatch, as one profiler reported them.

    ``l2_hits`` / ``l2_misses`` are in the profiler's own unit (ncu: 32 B sectors of
    reads; rocprofv3: TCC requests); ``l2_hit_rate`` is in %, of all traffic (ncu: from its
    all-traffic lookup hits and misses, else its own percentage; rocprofv3: ``100 * hits /
    (hits + misses)``);
    ``duration_ns`` in ns, ``dram_read_bytes`` in bytes.  Missing values are None.
    """

    kernel_name: str
    dispatch_index: int                 # order of the dispatch within the profiled process
    l2_hit_rate: float | None = None
    l2_hits: float | None = None
    l2_misses: float | None = None
    duration_ns: float | None = None
    dram_read_bytes: float | None = None
    extra: dict[str, float] = field(default_factory=dict)  # any other counter, by its name


@dataclass(frozen=True)
class L2Reading:
    """One job's L2 figures over k profiled repeats: means, with the hit rate's spread."""

    l2_hit_rate: float          # mean, %
    l2_hit_rate_std: float      # sample standard deviation over repeats, % points (0 if k == 1)
    l2_hits: float | None       # mean per dispatch
    l2_misses: float | None
    profiled_time_ms: float | None   # median dispatch duration under the profiler, ms
    dram_read_bytes: float | None    # mean per dispatch, bytes
    samples: int

    @classmethod
    def from_dispatches(cls, dispatches: list[DispatchCounters]) -> "L2Reading":
        if not dispatches:
            raise ValueError("no dispatches to aggregate")
        rates = [d.l2_hit_rate for d in dispatches if d.l2_hit_rate is not None]
        if not rates:
            raise ValueError(f"none of {len(dispatches)} dispatches of {dispatches[0].kernel_name!r} "
                             "carries an L2 hit rate (counters missing from the profiler output)")

        def mean(values):
            values = [v for v in values if v is not None]
            return statistics.fmean(values) if values else None

        durations = [d.duration_ns for d in dispatches if d.duration_ns is not None]
        return cls(
            l2_hit_rate=statistics.fmean(rates),
            l2_hit_rate_std=statistics.stdev(rates) if len(rates) > 1 else 0.0,
            l2_hits=mean(d.l2_hits for d in dispatches),
            l2_misses=mean(d.l2_misses for d in dispatches),
            profiled_time_ms=statistics.median(durations) / 1e6 if durations else None,
            dram_read_bytes=mean(d.dram_read_bytes for d in dispatches),
            samples=len(dispatches),
        )

    def as_metrics(self) -> dict[str, float]:
        out = {Metric.L2_HIT_RATE: self.l2_hit_rate, Metric.L2_HIT_RATE_STD: self.l2_hit_rate_std,
               Metric.L2_SAMPLES: float(self.samples)}
        means = {Metric.L2_HITS: self.l2_hits, Metric.L2_MISSES: self.l2_misses,
                 Metric.PROFILED_TIME_MS: self.profiled_time_ms, Metric.DRAM_READ_BYTES: self.dram_read_bytes}
        out.update({key: float(value) for key, value in means.items() if value is not None})
        return out
