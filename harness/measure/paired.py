"""A job's comparison with its baseline: paired timing rounds and paired L2 readings
turned into the metrics, tags and verdicts a run carries.

Metrics (candidate = the job's swizzle):
``speedup`` (baseline time / candidate time, > 1: candidate faster), ``speedup_ci_lo/hi``
(95 %), ``baseline_time_ms``, ``paired_rounds``, ``paired_time_s``; ``l2_delta_pts``
(candidate - baseline hit rate, % points), ``l2_delta_ci_lo/hi``, ``baseline_l2_hit_rate``,
``l2_pairs``; ``paired_placements`` (operand placements the rounds were spread over),
``speedup_placement_sd_pct`` (spread of the speedup between them, %); with ``timer=cupti``,
``event_time_ms_median`` / ``vendor_event_time_ms_median`` (the same launches by CUDA
events); ``vendor_time_ms`` and ``ratio_to_vendor`` against the faster of the vendor's
heuristic algorithm choice and its benchmark mode (``vendor_heuristic_time_ms``,
``vendor_benchmark_time_ms``; tag ``vendor.algo``).  Tags: ``timer``.  The verdicts
(:mod:`harness.measure.stats`) are set on the result (``result.verdict``, ``result.l2_verdict``)
and the job's :class:`~harness.job.result.Comparison` (role, same order) on its own; both are
logged (tags ``verdict``, ``l2_verdict``, ``compare.role``, ``compare.same_order``) by
:mod:`harness.storage.run_fields`.
"""
from __future__ import annotations

import json
import math
from dataclasses import replace
from typing import Callable

import numpy as np

from harness.job.result import JobResult
from harness.job.verdict import NO_GPU, TIME, Kind, Verdict
from harness.measure.roofline import place
from harness.job.spec import JobSpec
from harness.measure.stats import PairedEstimate, l2_verdict, paired_difference, time_verdict
from harness.measure.timing import RoundSamples, time_interleaved, tflops, vendor_conv
from harness.storage.field_names import Metric, Param, Tag
from kernels.base import Operands
from kernels.problem import ConvShape

#: How the job line and the ``timing`` tag name each timer.
TIMER_WORDS = {"events": "CUDA events around each launch", "cupti": "kernel durations from CUPTI"}
#: The time verdict of a compared job on a machine without a GPU.
NOT_TIMED = Verdict(TIME, Kind.NOT_TIMED, detail=NO_GPU)
CANDIDATE, BASELINE, VENDOR = "candidate", "baseline", "vendor"
#: The vendor call with its algorithm search on (``torch.backends.cudnn.benchmark``); VENDOR is
#: its heuristic choice.  The faster of the two is "the vendor" of the metrics.
VENDOR_BENCH = "vendor_bench"
#: How the ``vendor.algo`` tag names each vendor arm.
VENDOR_ALGOS = {VENDOR: "heuristic", VENDOR_BENCH: "benchmark"}


def vendor_arms(ops: Operands, shape: ConvShape) -> dict[str, Callable[[], None]]:
    """The vendor's two arms of the rounds: its heuristic algorithm choice and benchmark mode."""
    return {VENDOR: vendor_conv(ops, shape), VENDOR_BENCH: vendor_conv(ops, shape, benchmark=True)}


def measure_paired(result: JobResult, spec: JobSpec, placements: list[dict[str, Callable[[], None]]],
                   options) -> RoundSamples:
    """Time the candidate, its baseline (if any) and the vendor call in interleaved rounds
    over the operand ``placements`` (one dict of launches per placement, keys CANDIDATE,
    VENDOR and, when compared, BASELINE) and record everything on ``result``; ``options``
    is the job's JobOptions."""
    arms = placements[0]
    run_baseline = arms.get(BASELINE)
    tracked = (BASELINE, CANDIDATE) if run_baseline is not None else (CANDIDATE, VENDOR)
    samples = time_interleaved(placements, options.paired, seed=spec.input_seed, tracked=tracked)
    m = result.metrics
    median, p20, p80 = samples.quantiles(CANDIDATE)
    vendors = {arm: samples.quantiles(arm) for arm in VENDOR_ALGOS if arm in arms}
    best = min(vendors, key=lambda arm: vendors[arm][0])
    v_median, v_p20, v_p80 = vendors[best]
    vs_vendor = samples.ratio(CANDIDATE, best, options.paired.method)
    result.tags[Tag.VENDOR_ALGO] = VENDOR_ALGOS[best]
    m.update({Metric.vendor_time(VENDOR_ALGOS[arm]): q[0] for arm, q in vendors.items()})
    m.update({
        Metric.TIME_MS_MEDIAN: median, Metric.TIME_MS_P20: p20, Metric.TIME_MS_P80: p80,
        Metric.TFLOPS: tflops(spec.shape, median),
        Metric.VENDOR_TIME_MS: v_median, Metric.VENDOR_TIME_MS_P20: v_p20, Metric.VENDOR_TIME_MS_P80: v_p80,
        Metric.VENDOR_TFLOPS: tflops(spec.shape, v_median),
        # time / vendor time, paired per round (geometric mean): < 1 means faster than the vendor
        Metric.RATIO_TO_VENDOR: vs_vendor.estimate,
        Metric.PAIRED_ROUNDS: float(samples.rounds), Metric.PAIRED_TIME_S: samples.wall_s,
        Metric.PAIRED_DRAINED_BATCHES: float(samples.drained_batches),
        Metric.PAIRED_LAUNCHES_PER_ROUND: float(options.paired.launches_per_round),
        Metric.PAIRED_PLACEMENTS: float(len(set(samples.placements))),
    })
    roof = options.roofline
    if roof is not None:     # what bounds the candidate, and where it sits on the roofline
        reading = place(spec.shape, median, roof)
        m.update(reading.as_metrics())
        result.tags[Tag.BOUND] = reading.text
        result.params.update(roof.as_params())    # the ceilings the reading is against (report's figure)
    if samples.event_times_ms is not None:   # timer=cupti: what CUDA events saw of the same launches
        m[Metric.EVENT_TIME_MS_MEDIAN] = float(np.median(np.asarray(samples.event_times_ms[CANDIDATE], float)))
        m[Metric.VENDOR_EVENT_TIME_MS_MEDIAN] = float(np.median(np.asarray(samples.event_times_ms[best], float)))
    result.tags[Tag.TIMER] = options.paired.timer
    result.params.update({Param.PLACEMENTS: str(options.paired.placements), Param.TIMER: options.paired.timer})
    placed = len(set(samples.placements))
    result.tags[Tag.TIMING] = (f"measured: {samples.rounds} interleaved rounds of {', '.join(arms)} "
                             f"({options.paired.launches_per_round} launches each, L2 flushed before every launch"
                             f"{f', over {placed} operand placements' if placed > 1 else ''}; "
                             f"{TIMER_WORDS.get(options.paired.timer, 'stand-in timer ' + options.paired.timer)})")
    if run_baseline is not None:
        b_median, b_p20, b_p80 = samples.quantiles(BASELINE)
        speedup = samples.ratio(BASELINE, CANDIDATE, options.paired.method)
        m.update({Metric.BASELINE_TIME_MS: b_median, Metric.BASELINE_TIME_MS_P20: b_p20,
                  Metric.BASELINE_TIME_MS_P80: b_p80})
        spread = samples.placement_spread(BASELINE, CANDIDATE)
        if np.isfinite(spread):    # how much the speedup moved between operand placements, %
            m[Metric.SPEEDUP_PLACEMENT_SD_PCT] = spread
        record_speedup(result, speedup, options.min_effect)
    result.artifacts["paired_samples.json"] = json.dumps(samples.to_json())
    return samples


def record_speedup(result: JobResult, speedup: PairedEstimate, min_effect: float) -> None:
    """Log a paired speedup on ``result`` and set its verdict: faster / slower / no difference,
    marked ``same_order`` where the job launches its baseline's tile order
    (``result.comparison.same_order``: its speedup is the remap code's cost, a result)."""
    result.metrics.update(_finite({Metric.SPEEDUP: speedup.estimate, Metric.SPEEDUP_CI_LO: speedup.ci_lo,
                                   Metric.SPEEDUP_CI_HI: speedup.ci_hi}))
    result.verdict = replace(time_verdict(speedup, min_effect), same_order=bool(result.comparison.same_order))


def record_l2(result: JobResult, candidate: list[float], baseline: list[float], min_delta: float,
              source: str, deterministic: bool = False, error: float | None = None) -> PairedEstimate:
    """Log the paired L2 hit-rate difference (candidate - baseline, % points) of
    ``len(candidate)`` pairs read from ``source`` (``ncu``, ``rocprofv3``, ``sim``), with its
    verdict (higher / lower / no difference; marked ``same_order`` for a job that launches its
    baseline's tile order: a difference there is the remap code's or the counter's noise).  ``deterministic``: the
    source has no noise (the simulator), so one pair is the model's prediction; ``error``: the
    model's measured error of such a difference against hardware (% points, its band), which
    is then the interval the verdict is taken on.  A deterministic difference without an
    ``error`` has no interval: no ``l2_delta_ci_lo/hi``, and the verdict
    PREDICTED (:func:`~harness.measure.stats.unvalidated_l2_verdict`)."""
    delta = _difference(candidate, baseline, deterministic, error)
    result.metrics.update(_finite({Metric.L2_DELTA_PTS: delta.estimate, Metric.L2_DELTA_CI_LO: delta.ci_lo,
                                   Metric.L2_DELTA_CI_HI: delta.ci_hi,
                                   Metric.BASELINE_L2_HIT_RATE: float(np.mean(baseline)),
                                   Metric.L2_PAIRS: float(delta.n)}))
    result.l2_verdict = replace(l2_verdict(delta, min_delta), same_order=bool(result.comparison.same_order))
    result.tags[Tag.L2_SOURCE] = source
    return delta


def record_read_l2(result: JobResult, pairs: list[tuple[float, float]], deterministic: bool = False,
                   error: float | None = None) -> PairedEstimate | None:
    """Log the paired difference of the read-only hit rates (candidate - baseline, % points;
    ncu's tex read lookups, the simulator's loads) as ``l2_read_delta_pts`` with its CI and
    ``baseline_l2_read_hit_rate``; ``deterministic`` and ``error`` as in :func:`record_l2` (no
    ``l2_read_delta_ci_lo/hi`` for a prediction without a read-delta band).
    The verdict stays the all-traffic one's; None without pairs."""
    if not pairs:
        return None
    baseline = [b for _, b in pairs]
    delta = _difference([c for c, _ in pairs], baseline, deterministic, error)
    result.metrics.update(_finite({Metric.L2_READ_DELTA_PTS: delta.estimate, Metric.L2_READ_DELTA_CI_LO: delta.ci_lo,
                                   Metric.L2_READ_DELTA_CI_HI: delta.ci_hi,
                                   Metric.BASELINE_L2_READ_HIT_RATE: float(np.mean(baseline))}))
    return delta


def _difference(candidate, baseline, deterministic: bool, error: float | None) -> PairedEstimate:
    """The paired difference candidate - baseline (% points); from a noiseless source
    (``deterministic``) its interval is the source's measured ``error`` around it, and
    without one it has none (NaN bounds: a prediction with no band)."""
    delta = paired_difference(np.asarray(candidate), np.asarray(baseline))
    if deterministic:
        half = float(error) if error is not None else math.nan
        delta = PairedEstimate(delta.estimate, delta.estimate - half, delta.estimate + half, delta.n)
    return delta


def _finite(values: dict[str, float]) -> dict[str, float]:
    """Drop infinite bounds (a CI from one pair) and absent ones (NaN: a prediction with no
    band): MLflow stores finite numbers only, and an absent interval is no metric at all."""
    return {k: v for k, v in values.items() if np.isfinite(v)}
