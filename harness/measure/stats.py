"""Paired comparisons: an estimate, its 95 % confidence interval, and a verdict.

Both of the harness's comparisons are *paired*: the candidate and its baseline are
measured alternately in the same process (timing rounds; profiler launches in ABBA
order), so that whatever drifts (clocks, temperature, a neighbour on the GPU) hits both
alike and cancels in the per-pair difference.

* Time: per round ``speedup_i = t_baseline_i / t_candidate_i``.  The estimate is the
  geometric mean of the per-round ratios, i.e. ``exp(mean(log speedup_i))``, and the CI
  is Student's t interval on the log ratios, mapped back with ``exp`` (or a BCa
  bootstrap of the same mean, ``method="bootstrap"``).  Working in logs makes 1.05 and
  1/1.05 equally far from 1.
* L2 hit rate: per pair ``delta_i = hit_candidate_i - hit_baseline_i`` in percentage
  points; mean with a t interval.

A verdict (:class:`harness.job.verdict.Verdict`) needs *both* statistical and practical
significance: the CI excludes "no effect" **and** the estimate is at least ``min_effect``
away from it.  Anything else is NO_DIFFERENCE, with the interval: the detection limit the
user can read.  A difference with no interval at all (a simulated one on a target whose
model was never validated on hardware: no band) claims no effect either way: its verdict
is PREDICTED, with its number (:func:`unvalidated_l2_verdict`).  The words are
:class:`harness.job.verdict.Kind`'s.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from harness.job.verdict import L2, TIME, Kind, Verdict

CONFIDENCE = 0.95
METHODS = ("t", "bootstrap")


@dataclass(frozen=True)
class PairedEstimate:
    """A paired effect: ``estimate`` with its CI ``[ci_lo, ci_hi]`` over ``n`` pairs.
    For time it is a ratio (speedup, no unit); for L2 a difference in % points.  NaN bounds:
    the effect has no interval (:attr:`has_interval`)."""

    estimate: float
    ci_lo: float
    ci_hi: float
    n: int

    @property
    def has_interval(self) -> bool:
        """False for a prediction with no measured error (NaN bounds): no interval, and no
        verdict beyond ``Kind.PREDICTED`` can be taken on it."""
        return not (math.isnan(self.ci_lo) or math.isnan(self.ci_hi))

    @property
    def half_width(self) -> float:
        """Half the CI's width, in the estimate's unit."""
        return (self.ci_hi - self.ci_lo) / 2

    @property
    def relative_half_width(self) -> float:
        """Half-width over the estimate (for ratios): 0.01 = the CI is ±1 %."""
        return self.half_width / self.estimate if self.estimate else math.inf


def _mean_ci(values: np.ndarray, method: str, confidence: float, seed: int) -> tuple[float, float, float]:
    """(mean, lo, hi) of ``values``: t interval, or BCa bootstrap of the mean."""
    if method not in METHODS:
        raise ValueError(f"unknown CI method {method!r}; valid: {', '.join(METHODS)}")
    mean = float(np.mean(values))
    if len(values) < 2:
        return mean, -math.inf, math.inf
    if float(np.ptp(values)) == 0.0:   # no spread at all (deterministic source): the interval is a point
        return mean, mean, mean
    from scipy import stats as _scipy_stats   # here: a job that times nothing (the CPU path) never loads scipy

    if method == "t":
        lo, hi = _scipy_stats.ttest_1samp(values, 0.0).confidence_interval(confidence)
    else:
        res = _scipy_stats.bootstrap((values,), np.mean, confidence_level=confidence, method="BCa",
                                     n_resamples=2000, random_state=np.random.default_rng(seed))
        lo, hi = res.confidence_interval
    return mean, float(lo), float(hi)


def paired_ratio(baseline: np.ndarray, candidate: np.ndarray, method: str = "t",
                 confidence: float = CONFIDENCE, seed: int = 0) -> PairedEstimate:
    """Speedup of ``candidate`` over ``baseline`` from paired times (same length, any
    positive unit): geometric mean of ``baseline_i / candidate_i`` with its CI."""
    baseline, candidate = np.asarray(baseline, float), np.asarray(candidate, float)
    if baseline.shape != candidate.shape or baseline.size == 0:
        raise ValueError(f"paired times need two equal, non-empty samples; got {baseline.shape} and {candidate.shape}")
    if (baseline <= 0).any() or (candidate <= 0).any():
        raise ValueError("paired times must be positive")
    mean, lo, hi = _mean_ci(np.log(baseline) - np.log(candidate), method, confidence, seed)
    return PairedEstimate(math.exp(mean), math.exp(lo), math.exp(hi), int(baseline.size))


def clustered_ratio(baseline: np.ndarray, candidate: np.ndarray, clusters: np.ndarray,
                    confidence: float = CONFIDENCE) -> PairedEstimate:
    """Speedup of ``candidate`` over ``baseline`` when the rounds come in clusters (operand
    placements): the log ratio is averaged within each cluster, and the estimate and its
    Student's t interval are taken over the cluster means (clusters - 1 degrees of freedom).
    The interval then covers the spread *between* clusters, which rounds within one cluster
    cannot see.  One cluster: :func:`paired_ratio` over the rounds (today's interval)."""
    baseline, candidate = np.asarray(baseline, float), np.asarray(candidate, float)
    clusters = np.asarray(clusters)
    if clusters.shape != baseline.shape:
        raise ValueError(f"one cluster label per round needed; got {clusters.shape} for {baseline.shape}")
    labels = np.unique(clusters)
    if len(labels) < 2:
        return paired_ratio(baseline, candidate, "t", confidence)
    means = cluster_means(np.log(baseline) - np.log(candidate), clusters)
    mean, lo, hi = _mean_ci(means, "t", confidence, 0)
    return PairedEstimate(math.exp(mean), math.exp(lo), math.exp(hi), int(baseline.size))


def cluster_means(values: np.ndarray, clusters: np.ndarray) -> np.ndarray:
    """The mean of ``values`` within each distinct label of ``clusters`` (sorted by label)."""
    values, clusters = np.asarray(values, float), np.asarray(clusters)
    return np.array([values[clusters == c].mean() for c in np.unique(clusters)])


def paired_difference(candidate: np.ndarray, baseline: np.ndarray, method: str = "t",
                      confidence: float = CONFIDENCE, seed: int = 0) -> PairedEstimate:
    """Mean of ``candidate_i - baseline_i`` (e.g. L2 hit rate, % points) with its CI."""
    candidate, baseline = np.asarray(candidate, float), np.asarray(baseline, float)
    if baseline.shape != candidate.shape or baseline.size == 0:
        raise ValueError(f"paired values need two equal, non-empty samples; got {candidate.shape} and {baseline.shape}")
    mean, lo, hi = _mean_ci(candidate - baseline, method, confidence, seed)
    return PairedEstimate(mean, lo, hi, int(baseline.size))


def time_verdict(speedup: PairedEstimate, min_effect: float) -> Verdict:
    """FASTER / SLOWER when the CI excludes 1 and the speedup is at least ``min_effect``
    (a fraction: 0.01 = 1 %) away from 1, on the log scale; else NO_DIFFERENCE."""
    bound = math.log1p(min_effect)
    effect = math.log(speedup.estimate)
    kind = Kind.NO_DIFFERENCE
    if speedup.ci_lo > 1.0 and effect >= bound:
        kind = Kind.FASTER
    elif speedup.ci_hi < 1.0 and -effect >= bound:
        kind = Kind.SLOWER
    return Verdict(TIME, kind, speedup.estimate, speedup.ci_lo, speedup.ci_hi)


def l2_verdict(delta: PairedEstimate, min_delta: float) -> Verdict:
    """HIGHER / LOWER when the CI of the hit-rate difference excludes 0 and the difference
    is at least ``min_delta`` % points; else NO_DIFFERENCE; a difference with no interval (a
    prediction with no band): :func:`unvalidated_l2_verdict`."""
    if not delta.has_interval:
        return unvalidated_l2_verdict(delta.estimate)
    kind = Kind.NO_DIFFERENCE
    if delta.ci_lo > 0.0 and delta.estimate >= min_delta:
        kind = Kind.HIGHER
    elif delta.ci_hi < 0.0 and -delta.estimate >= min_delta:
        kind = Kind.LOWER
    return Verdict(L2, kind, delta.estimate, delta.ci_lo, delta.ci_hi)


def unvalidated_l2_verdict(estimate: float) -> Verdict:
    """The verdict on a predicted hit-rate difference (``estimate``, % points) that has no
    validated band: PREDICTED, its number, and no effect claimed."""
    return Verdict(L2, Kind.PREDICTED, estimate)
