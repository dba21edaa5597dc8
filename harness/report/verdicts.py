"""The report's verdict words (:class:`harness.job.verdict.Kind`'s, under the names the report
uses) and the rules that give them to older runs.

Paired runs carry their own verdict (tags ``verdict`` / ``l2_verdict``, :mod:`harness.measure.stats`),
read back by :func:`harness.storage.run_fields.parse_verdict`.  Older runs without paired results are
judged here against the identity run of their group: a speedup interval from the two
[p20, p80] noise bands, an L2 delta against a noise band of combined standard deviations.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from harness.job.verdict import Kind, Verdict

IDENTITY = "identity"

# Verdicts on time.  Paired runs: their ``verdict`` tag's kind; identity-run comparisons:
# speedup interval vs 1.
FASTER, SLOWER, NOISE = Kind.FASTER.word, Kind.SLOWER.word, Kind.NOISE.word
NO_DIFFERENCE = Kind.NO_DIFFERENCE.word
NOT_TIMED, NO_BASELINE, BASELINE = Kind.NOT_TIMED.word, Kind.NO_BASELINE.word, Kind.BASELINE.word
#: A paired job whose baseline failed a gate.
NO_COMPARISON = Kind.NO_COMPARISON.word
#: A paired run that carries no verdict tag, or one this report does not know.
NO_VERDICT, OTHER = Kind.NO_VERDICT.word, Kind.OTHER.word
#: The swizzle's remap table equals its baseline's (e.g. ``xcd`` with num_xcds=1): same
#: kernel, same order, so any measured difference is noise, never a result.
SAME_ORDER = Kind.SAME_ORDER.word
# Verdicts on the L2 hit rate.
L2_HIGHER, L2_LOWER, NOT_PROFILED = Kind.HIGHER.word, Kind.LOWER.word, Kind.NOT_PROFILED.word
#: A simulated L2 change with no validated band: a prediction, no effect claimed.
L2_PREDICTED = Kind.PREDICTED.word

#: The kinds a paired ``verdict`` / ``l2_verdict`` tag can say.
TIME_VERDICT_KINDS = (Kind.FASTER, Kind.SLOWER, Kind.NO_DIFFERENCE, Kind.NOT_TIMED, Kind.NO_COMPARISON)
L2_VERDICT_KINDS = (Kind.HIGHER, Kind.LOWER, Kind.NO_DIFFERENCE, Kind.PREDICTED, Kind.NOT_PROFILED)
#: Order of the words in verdict counts.
COUNT_ORDER = (FASTER, L2_HIGHER, SLOWER, L2_LOWER, NO_DIFFERENCE, NOISE, L2_PREDICTED, SAME_ORDER, NO_COMPARISON,
               NO_BASELINE, NOT_TIMED, NOT_PROFILED, NO_VERDICT, OTHER)

# Paired runs (tag ``compare.role``, param ``compare.baseline``).
ROLE_TAG, CANDIDATE = "compare.role", "candidate"
PAIRED, BY_IDENTITY_RUN = "paired", "identity run"

#: The L2 noise band is this many combined standard deviations of the hit rate ...
L2_BAND_SIGMAS = 2.0
#: ... and never narrower than this, in percentage points (a single profiled repeat or a
#: deterministic simulator reports std 0, which is no evidence of zero noise).
L2_BAND_FLOOR_POINTS = 0.5


def speedup_interval(id_p20: pd.Series, id_p80: pd.Series, sw_p20: pd.Series,
                     sw_p80: pd.Series) -> tuple[pd.Series, pd.Series]:
    """Conservative speedup interval from the two [p20, p80] noise bands (times in ms):
    ``[id_p20 / sw_p80, id_p80 / sw_p20]`` (dimensionless)."""
    return id_p20 / sw_p80, id_p80 / sw_p20


def identity_time_verdict(speedup: float, lo: float, hi: float) -> str:
    """faster / slower only when the whole interval is beyond 1, else within noise (also
    when the interval is unknown because p20/p80 are missing); not timed without a speedup."""
    if not np.isfinite(speedup):
        return NOT_TIMED
    if np.isfinite(lo) and lo > 1.0:
        return FASTER
    if np.isfinite(hi) and hi < 1.0:
        return SLOWER
    return NOISE


def l2_band(std_swizzle: pd.Series, std_identity: pd.Series) -> pd.Series:
    """Noise band of an L2 hit-rate delta, in percentage points."""
    combined = np.sqrt(std_swizzle.fillna(0.0) ** 2 + std_identity.fillna(0.0) ** 2)
    return np.maximum(L2_BAND_SIGMAS * combined, L2_BAND_FLOOR_POINTS)


def identity_l2_verdict(delta: float, band: float) -> str:
    """higher / lower only when the delta (points) is beyond its band (points)."""
    if not np.isfinite(delta):
        return NOT_PROFILED
    if delta > band:
        return L2_HIGHER
    if delta < -band:
        return L2_LOWER
    return NOISE


def paired_verdict(verdict: Verdict | None, kinds: tuple[Kind, ...], absent: str) -> str:
    """The word of a paired run's verdict (read from its tag): SAME_ORDER for one taken in its
    baseline's tile order, OTHER for a kind not among ``kinds``, ``absent`` when it has none."""
    if verdict is None:
        return absent
    if verdict.same_order:
        return SAME_ORDER
    return verdict.word if verdict.kind in kinds else OTHER


def ordered(verdicts: pd.Series) -> list[str]:
    """The distinct verdict words of ``verdicts`` in COUNT_ORDER (unknown ones last)."""
    present = list(dict.fromkeys(verdicts))
    return [v for v in COUNT_ORDER if v in present] + [v for v in present if v not in COUNT_ORDER]


def verdict_counts(verdicts: pd.Series, always: tuple[str, str] = (FASTER, SLOWER),
                   nothing: str = NOT_TIMED) -> str:
    """``0 faster, 0 slower, 6 no difference detected``; just ``not timed`` when every verdict
    is ``nothing`` (for L2: ``(L2_HIGHER, L2_LOWER)`` and NOT_PROFILED)."""
    if len(verdicts) and (verdicts == nothing).all():
        return nothing
    counts = verdicts.value_counts()
    return ", ".join(f"{counts.get(v, 0)} {v}" for v in dict.fromkeys([*always, *ordered(verdicts)]))
