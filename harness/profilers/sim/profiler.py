"""``profiler=sim`` (and ``profiler=auto`` with no GPU): each verified job's L2 figures
predicted in process by the simulated L2, with no worker and no repeats (the simulation is
deterministic).  Rates in %, error bands in % points.
"""
from __future__ import annotations

from typing import Any, Mapping

from harness.profilers.sim.bands import ORDER_BLIND_NOTE, prediction_error
from harness.profilers.sim.budget import DEFAULT_MEMORY_GIB, GIB
from harness.profilers.sim.job import Remap, simulate_job
from harness.profilers.sim.lru import ENGINE
from harness.profilers.sim.result import SimResult
from harness.profilers.sim.target import SimTarget
from harness.profilers.wrapped import Profiler
from harness.storage.field_names import Metric, Tag


class SimProfiler(Profiler):
    """Predicted L2 hit rates from the trace-driven model of the target's L2s."""

    name = "sim"
    deterministic = True
    batched = False   # in-process: nothing to share, so each shape's line comes as it finishes

    def __init__(self, target: Mapping[str, Any], occupancy: int | None = None, line_bytes: int | None = None,
                 memory_gib: float = DEFAULT_MEMORY_GIB):
        """``memory_gib``: the most host memory one simulation may take (config
        ``profiler.sim_memory_gib``; :mod:`harness.profilers.sim.budget`), GiB."""
        self.target = dict(target)
        self.occupancy = occupancy
        self.line_bytes = line_bytes
        self.budget_bytes = int(memory_gib * GIB)
        SimTarget.from_target(self.target, occupancy, line_bytes)  # validate now: fail fast

    def tags(self) -> dict[str, str]:
        return {Tag.PROFILER: self.name, Tag.PROFILER_VERSION: f"swizzlebench-sim/{ENGINE}",
                Tag.CACHE_CONTROL: "all", Tag.SIM_TARGET: str(self.target.get("name", "?"))}

    def profile(self, requests, workdir) -> dict:
        from harness.profilers.wrapped import ProfileOutcome

        outcomes = {}
        for req in requests:
            kernel, arm = req.plan.kernel, req.plan.candidate
            try:
                occupancy = self.occupancy or req.occupancy   # compiled for the target
                spills = req.spill_bytes or 0                 # ... and its spills
                result = self._simulate(kernel, arm, occupancy, spills)
                # The baseline's own spills are not known here: it is taken to spill as much.
                baseline = self._simulate(kernel, req.plan.baseline, occupancy, spills) if req.paired else None
            except NotImplementedError as exc:   # a kernel with no address model: its message says what to use
                outcomes[req.key] = ProfileOutcome(None, str(exc))
                continue
            except (ValueError, MemoryError) as exc:
                outcomes[req.key] = ProfileOutcome(None, f"simulation failed: {exc}")
                continue
            rows = ["xcd,hits,misses,hit_rate_pct"] + [
                f"{x},{h},{m},{r:.4f}" for x, (h, m, r) in
                enumerate(zip(result.xcd_hits, result.xcd_misses, result.xcd_hit_rates))]
            outcome = ProfileOutcome(result.as_reading(), None, [],
                                     artifacts={"sim_per_xcd.csv": "\n".join(rows) + "\n"},
                                     metrics={**result.as_metrics(prefix=Metric.SIM_PREFIX),
                                              Metric.SIM_PROGRAMS_PER_CU: float(self._residency(occupancy))})
            err = prediction_error(self.target, kernel.validation_scope(arm.tiles), result.layer_class,
                                   result.order_blind)
            outcome.tags[Tag.SIM_LAYER_CLASS] = result.layer_class
            if result.order_blind:   # the model cannot tell this grid's orders apart
                outcome.tags[Tag.SIM_ORDER_BLIND] = ORDER_BLIND_NOTE
            outcome.tags[Tag.SIM_VALIDATION] = err.validated
            if err.published:   # the public record checked, and why it gives no band
                outcome.tags[Tag.SIM_PUBLISHED] = err.published
            outcome.metrics[Metric.L2_READ_HIT_RATE] = result.read_hit_rate
            if err.hit_rate is not None:
                outcome.metrics[Metric.L2_HIT_RATE_ERR] = err.hit_rate
            if err.read_hit_rate is not None:
                outcome.metrics[Metric.L2_READ_HIT_RATE_ERR] = err.read_hit_rate
            if err.coverage is not None:   # the ± are bands that held this share of unfitted cells (%)
                outcome.metrics[Metric.L2_ERR_COVERAGE] = 100.0 * err.coverage
            outcome.delta_error, outcome.read_delta_error = err.delta, err.read_delta
            if baseline is not None:   # deterministic: one pair is the model's whole difference
                outcome.baseline_reading = baseline.as_reading()
                outcome.pairs = [(outcome.reading.l2_hit_rate, outcome.baseline_reading.l2_hit_rate)]
                outcome.read_pairs = [(result.read_hit_rate, baseline.read_hit_rate)]
            outcomes[req.key] = outcome
        return outcomes

    def _residency(self, occupancy: int | None) -> int:
        """Programs per CU the simulation used."""
        return SimTarget.from_target(self.target, occupancy, self.line_bytes).occupancy

    def _simulate(self, kernel, arm, occupancy: int | None = None, spill_bytes: int = 0) -> SimResult:
        """One arm of a planned job (:class:`harness.job.plan.Arm`) launched by ``kernel``.
        ``occupancy``: programs per CU, from the kernel compiled for the target (the compile
        stage) when the job has one, else the target's or DEFAULT_OCCUPANCY; ``spill_bytes``:
        what one program of it spills (bytes), from the same compile."""
        spec = arm.spec
        return simulate_job(kernel, spec.shape, arm.tiles, Remap(arm.remap, spec.num_xcds, spec.group_size),
                            self.target, occupancy,
                            line_bytes=self.line_bytes, spill_bytes=spill_bytes, budget_bytes=self.budget_bytes)
