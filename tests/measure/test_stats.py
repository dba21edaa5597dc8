"""The paired statistics on synthetic samples with known answers."""
import math

import numpy as np
import pytest

from harness.job.verdict import Kind
from harness.measure.stats import PairedEstimate, l2_verdict, paired_difference, paired_ratio, time_verdict
from harness.storage.run_fields import verdict_text

FASTER, SLOWER, HIGHER, LOWER, NO_DIFFERENCE = Kind.FASTER, Kind.SLOWER, Kind.HIGHER, Kind.LOWER, Kind.NO_DIFFERENCE


def _rounds(rng, n, shift=0.0, drift=True):
    """Paired per-round times (ms) of a ~50 us kernel: 2 % lognormal noise per launch and
    a slow drift shared by both arms of a round (what pairing must cancel)."""
    common = 0.05 * (1 + (0.03 * np.sin(np.arange(n) / 7.0) if drift else 0))
    base = common * rng.lognormal(0, 0.02, n)
    cand = common * (1 + shift) * rng.lognormal(0, 0.02, n)
    return base, cand


@pytest.mark.parametrize("method", ["t", "bootstrap"])
def test_equal_distributions_give_no_verdict_in_95_percent_of_seeds(method):
    seeds = range(200 if method == "t" else 60)
    verdicts = [time_verdict(paired_ratio(*_rounds(np.random.default_rng(s), 40), method=method, seed=s), 0.0)
                for s in seeds]
    false = sum(v.kind != NO_DIFFERENCE for v in verdicts)
    assert false / len(verdicts) <= 0.08, f"{false} of {len(verdicts)} A/A comparisons gave a verdict"
    # min_effect=0 isolates the interval: about 5 % must still cross (the CI is not vacuous)
    if method == "t":
        assert false >= 2


def test_min_effect_removes_tiny_significant_effects():
    rng = np.random.default_rng(1)
    base, cand = _rounds(rng, 2000, shift=0.004, drift=False)   # 0.4 % slower, precisely measured
    est = paired_ratio(base, cand)
    assert est.ci_hi < 1.0                                       # statistically significant...
    assert time_verdict(est, 0.01).kind == NO_DIFFERENCE     # ...but below the 1 % practical bar
    assert time_verdict(est, 0.0).kind == SLOWER


@pytest.mark.parametrize("seed", range(20))
def test_three_percent_shift_is_slower_and_faster_mirrored(seed):
    base, cand = _rounds(np.random.default_rng(seed), 40, shift=0.03)
    slow = paired_ratio(base, cand)
    assert time_verdict(slow, 0.01).kind == SLOWER
    assert abs(slow.estimate - 1 / 1.03) < 0.015      # within ~3 standard errors
    assert time_verdict(paired_ratio(cand, base), 0.01).kind == FASTER


def test_pairing_cancels_shared_drift():
    """Drift of ±15 % shared by both arms: the paired CI stays narrow, as unpaired it would not."""
    rng = np.random.default_rng(3)
    n = 60
    drift = 1 + 0.15 * np.sin(np.arange(n) / 5.0)
    base = 0.05 * drift * rng.lognormal(0, 0.01, n)
    cand = 0.05 * drift * rng.lognormal(0, 0.01, n)
    est = paired_ratio(base, cand)
    assert est.relative_half_width < 0.005
    assert time_verdict(est, 0.01).kind == NO_DIFFERENCE


def test_l2_difference_verdicts():
    rng = np.random.default_rng(0)
    base = 90 + rng.normal(0, 1, 20)
    assert l2_verdict(paired_difference(base - 4 + rng.normal(0, 1, 20), base), 0.5).kind == LOWER
    assert l2_verdict(paired_difference(base + 2 + rng.normal(0, 1, 20), base), 0.5).kind == HIGHER
    same = l2_verdict(paired_difference(base + rng.normal(0, 1, 20), base), 0.5)
    assert same.kind == NO_DIFFERENCE and "pts" in verdict_text(same)
    # a noiseless (simulated) difference is judged on its band, the interval around it
    assert l2_verdict(PairedEstimate(-3.0, -4.0, -2.0, 1), 0.5).kind == LOWER
    assert verdict_text(l2_verdict(PairedEstimate(3.0, -1.5, 7.5, 1), 0.5)) == \
        f"{Kind.NO_DIFFERENCE.word} (CI [-1.50, +7.50] pts)"


def test_a_prediction_without_a_band_claims_no_effect():
    # no interval at all (NaN bounds): the number, said to be an unvalidated prediction, however large
    for estimate in (-3.0, 0.2, 12.0):
        unbanded = PairedEstimate(estimate, math.nan, math.nan, 1)
        assert not unbanded.has_interval
        verdict = l2_verdict(unbanded, 0.5)
        assert verdict.kind == Kind.PREDICTED and verdict.estimate == estimate
        assert verdict_text(verdict) == f"predicted, not validated ({estimate:+.2f} pts)"
    assert PairedEstimate(0.2, 0.2, 0.2, 1).has_interval and paired_difference([91.0], [90.0]).has_interval


def test_one_pair_has_no_interval_and_no_verdict():
    est = paired_difference(np.array([91.0]), np.array([90.0]))
    assert est.ci_lo == -math.inf and est.ci_hi == math.inf
    assert l2_verdict(est, 0.5).kind == NO_DIFFERENCE


def test_bad_samples_are_rejected_clearly():
    with pytest.raises(ValueError, match="equal, non-empty"):
        paired_ratio(np.ones(3), np.ones(4))
    with pytest.raises(ValueError, match="positive"):
        paired_ratio(np.array([1.0, 0.0]), np.ones(2))
    with pytest.raises(ValueError, match="unknown CI method 'z'; valid: t, bootstrap"):
        paired_ratio(np.ones(3), np.ones(3) * 1.1 + np.arange(3) * 0.01, method="z")
