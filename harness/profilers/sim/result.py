"""What one simulated launch did to the caches (:class:`SimResult`).

Counts are line lookups (a line: the L2's line or, with ``line_bytes`` 32, NVIDIA's sector);
rates are percentages; bytes are bytes.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from harness.profilers.base import L2Reading
from harness.storage.field_names import Metric, sub_name


@dataclass(frozen=True)
class SimResult:
    """What one simulated launch did to the caches.  Counts are line lookups, reads and
    writes (stores and atomics) together unless the name says ``read``; rates in % (NaN
    for an XCD or domain that received no program)."""

    hit_rate: float                       # 100 * hits / (hits + misses), all lookups, all L2 domains
    hits: int
    misses: int
    read_hits: int                        # the loads' lookups alone
    read_misses: int
    xcd_hits: tuple[int, ...]             # per XCD, all lookups
    xcd_misses: tuple[int, ...]
    domain_hits: tuple[int, ...]          # per L2 domain (== per XCD on MI300X)
    domain_misses: tuple[int, ...]
    line_bytes: int
    l2_miss_bytes: int                    # read misses x line_bytes: bytes the L2s fetched from below
    mall_hits: int | None                 # None without a MALL
    mall_misses: int | None
    dram_read_bytes: int                  # bytes read from memory (after the MALL, if any)
    num_programs: int
    slots_per_xcd: int
    replay_s: float                       # wall time of the replay loop, s
    engine: str                           # "numba" or "python"
    name: str = "conv"                    # which launch of the timed run (kernels.access.LaunchPlan)
    merged_reads: int = 0                 # reads merged with an earlier request of their cluster (no lookup)
    fabric_hits: int = 0                  # read misses looked up again in a far home partition: hits there
    fabric_misses: int = 0                # ... and misses there (fetched from memory)
    #: The job's whole timed run, when it is more than this launch: (launch name, result) in
    #: launch order, simulated one after the other with the caches carried over.
    timed_run: tuple[tuple[str, "SimResult"], ...] = ()
    #: The job's :func:`harness.profilers.sim.bands.layer_class` (which error band its figures carry); "" outside a job.
    layer_class: str = ""
    #: The job's grid is :func:`harness.profilers.sim.bands.order_blind`: every order of its tiles reads the same blocks in
    #: the model, so a simulated delta is about 0 whatever the GPU does (False outside a job).
    order_blind: bool = False

    @property
    def accesses(self) -> int:
        return self.hits + self.misses

    @property
    def read_hit_rate(self) -> float:
        """Hit rate of the loads' lookups in the partition they read through (ncu: the tex unit's
        read lookups, ``lts__t_sectors_srcunit_tex_op_read_lookup_hit / (hit + miss)``), %."""
        return rate(self.read_hits, self.read_misses)

    @property
    def write_hits(self) -> int:
        return self.hits - self.read_hits - self.fabric_hits

    @property
    def write_misses(self) -> int:
        return self.misses - self.read_misses - self.fabric_misses

    @property
    def xcd_hit_rates(self) -> tuple[float, ...]:
        return tuple(rate(h, m) for h, m in zip(self.xcd_hits, self.xcd_misses))

    @property
    def domain_hit_rates(self) -> tuple[float, ...]:
        return tuple(rate(h, m) for h, m in zip(self.domain_hits, self.domain_misses))

    @property
    def mall_hit_rate(self) -> float | None:
        return None if self.mall_hits is None else rate(self.mall_hits, self.mall_misses)

    def as_reading(self) -> L2Reading:
        """The result as a profiler reading: one noiseless sample, no spread.  The hit rate is
        over all lookups, stores included, as ncu's all-traffic lookup counters and
        rocprofv3's TCC_HIT / (TCC_HIT + TCC_MISS) count them."""
        return L2Reading(l2_hit_rate=self.hit_rate, l2_hit_rate_std=0.0, l2_hits=float(self.hits),
                         l2_misses=float(self.misses), profiled_time_ms=None,
                         dram_read_bytes=float(self.dram_read_bytes), samples=1)

    def as_metrics(self, prefix: str = Metric.SIM_PREFIX) -> dict[str, float]:
        """The figures, flat, for logging: hit rates over all lookups (``l2_hit_rate``) and
        over loads alone (``l2_read_hit_rate``), %; lookups that wrote; per-XCD and MALL hit
        rates (%); bytes the L2s fetched (bytes); NaN rates of idle XCDs are left out.  With
        a timed run of several launches, each launch's two hit rates and those of the whole
        run (``timed.``) too."""
        M = Metric
        out = {M.L2_HIT_RATE: self.hit_rate, M.L2_READ_HIT_RATE: self.read_hit_rate,
               M.L2_WRITE_LOOKUPS: float(self.write_hits + self.write_misses),
               M.L2_MERGED_READS: float(self.merged_reads),
               M.L2_FABRIC_LOOKUPS: float(self.fabric_hits + self.fabric_misses),
               M.L2_MISS_BYTES: float(self.l2_miss_bytes), M.SLOTS_PER_XCD: float(self.slots_per_xcd)}
        out.update({M.xcd_hit_rate(x): r for x, r in enumerate(self.xcd_hit_rates) if not math.isnan(r)})
        if self.mall_hit_rate is not None and not math.isnan(self.mall_hit_rate):
            out[M.MALL_HIT_RATE] = self.mall_hit_rate
        for name, part in self.timed_run:
            out[sub_name(name, M.L2_HIT_RATE)] = part.hit_rate
            out[sub_name(name, M.L2_READ_HIT_RATE)] = part.read_hit_rate
        if self.timed_run:
            runs = [r for _, r in self.timed_run]
            out[sub_name(M.TIMED, M.L2_HIT_RATE)] = rate(sum(r.hits for r in runs), sum(r.misses for r in runs))
            out[sub_name(M.TIMED, M.L2_READ_HIT_RATE)] = rate(sum(r.read_hits for r in runs),
                                                               sum(r.read_misses for r in runs))
        return {prefix + k: v for k, v in out.items() if not math.isnan(v)}


def rate(hits: int, misses: int) -> float:
    """100 * hits / (hits + misses), %; NaN when there were no lookups."""
    return 100.0 * hits / (hits + misses) if hits + misses else math.nan
