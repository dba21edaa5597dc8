"""Tune mode's tie rule: which of several nearly equally fast configs is chosen, so that two
machines that time the same candidates choose the same one.

The single-shot trial times of a layer's best candidates often lie within 1 % of each other:
plain argmin then picks by noise, two GPUs pick different configs, and a swizzle's measured
effect, which depends on the config, differs with them.  The rule (:data:`RULE_PAIRED`):

1. *finalists*: the verified candidates within ``tie_band`` (default 3 %) of the fastest
   single-shot time, at most ``finalists`` (6) of them, fastest first; and at least
   ``min_finalists`` (4; never more than ``finalists``): where fewer lie within the band, the
   next fastest single-shot candidates fill up to that many, however far behind (single
   shots are taken seconds apart and drift by a few %: with one finalist, two runs could
   each keep a different one and never time the two against each other).
2. on a GPU the finalists are re-measured together in ``final_rounds`` (30) paired,
   interleaved rounds (L2 flushed before every launch,
   :func:`harness.measure.timing.time_interleaved`), spread over ``final_placements`` (6)
   copies of the operands at other addresses: a kernel's speed depends on where its buffers
   lie (:mod:`kernels.base`), and where they lie differs from one
   process to the next.  Each finalist's time ratio to the fastest finalist gets a 95 % CI,
   Student's t over the per-placement means (:func:`harness.measure.stats.clustered_ratio`;
   one placement: over the rounds, :func:`harness.measure.stats.paired_ratio`), so the CI
   covers the spread between placements that rounds on one set of buffers cannot see;
3. *settling*: while some finalist's CI contains ``1 + tie_tolerance`` (the rounds cannot yet
   say on which side of the tolerance it lies), the finalists are re-measured once more
   (another pass of ``final_rounds`` on the same placements), as long as the total stays
   within ``max_final_rounds`` (90); every estimate is then taken over all rounds;
4. the *tied set*: the finalists within ``tie_tolerance`` (2 %) of the fastest, or whose CI
   includes the fastest's time (ratio 1);
5. the choice: the member of the tied set that comes first in :func:`preference_key`, a fixed
   order of the candidate space (simplest first), never "whichever timed fastest".

Why settle: step 4 ties a finalist whose CI includes 1, so with few or noisy rounds a config
1.5 % behind is tied in one run (wide CI) and not in the next (narrow CI), and the two runs
choose differently.  A settled mark is the one a longer measurement would most likely give
(a CI wholly within ``1 + tie_tolerance``: tied; wholly beyond: not tied).  One still
unsettled at the round cap is marked by step 4 as it stands; ``tune.final_measurement`` says
how many were.

Without a re-measurement (the CPU interpreter, or a caller that gives none) step 4 compares
the single-shot times, without a CI (:data:`RULE_SINGLE`); ``tune.finalists=1`` is plain
argmin (:data:`RULE_ARGMIN`).  Everything here is a pure function of times: tested on the CPU
with stand-in timings.
"""
from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

import numpy as np

from harness.errors import UserError
from harness.measure.stats import PairedEstimate, clustered_ratio, paired_ratio
from kernels.tuning import Config

#: Rule names, logged as tag ``tune.rule``.
RULE_PAIRED = "paired-ties-simplest-first/v2"    # finalists (at least min_finalists) re-measured over placements
RULE_SINGLE = "single-shot-ties-simplest-first"  # no re-measurement: ties by single-shot times
RULE_ARGMIN = "fastest-single-shot"              # tune.finalists=1: plain argmin
#: ``tune.rule`` of a cache entry written before the tie rule existed (its choice was argmin).
RULE_LEGACY = "fastest-single-shot (cache entry from before the tie rule)"


@dataclass(frozen=True)
class Remeasured:
    """One re-measurement of the finalists: every finalist timed in the same interleaved rounds,
    so the i-th values of two finalists form a pair."""

    times: Mapping[Config, Sequence[float]]   # per-round times, ms
    placements: Sequence[int] | None = None    # each round's operand placement (None: one set of buffers)
    drained: int = 0                           # batches whose GPU hold ran out before they were queued


#: ``remeasure(finalists) -> Remeasured`` (or just ``{config: per-round times, ms}``): one more
#: set of paired rounds of the finalists each time it is called (step 3 may call it again).
Remeasure = Callable[[Sequence[Config]], "Remeasured | Mapping[Config, Sequence[float]]"]


def _number(name: str, value: object, ok: Callable[[float], bool], valid: str, whole: bool = False) -> float:
    """``value`` as a number if it is one (a whole one with ``whole``) and ``ok(value)``, else a
    UserError naming the key, the value and what is valid."""
    number = isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value)
    if not number or (whole and value != int(value)) or not ok(value):
        raise UserError(f"tune.{name}={value!r} is invalid; valid: {valid}")
    return int(value) if whole else float(value)


@dataclass(frozen=True)
class TieRule:
    """The knobs of the tie rule (config ``tune.tie_band``, ``tune.finalists``,
    ``tune.final_rounds``, ``tune.tie_tolerance``, ``tune.min_finalists``,
    ``tune.max_final_rounds``, ``tune.final_placements``); fractions, not %."""

    band: float = 0.03        # finalists: within this fraction of the fastest single-shot time
    finalists: int = 6        # at most this many finalists (1: plain argmin)
    rounds: int = 30          # paired rounds re-measuring the finalists, per pass (GPU)
    tolerance: float = 0.02   # tied: within this fraction of the fastest finalist, or CI includes it
    min_finalists: int = 4    # at least this many finalists (never more than ``finalists``), the next fastest
    max_rounds: int = 90      # more passes of ``rounds`` while a finalist is unsettled, up to this many in all
    placements: int = 6       # operand placements the rounds are spread over (1: one set of buffers)

    def __post_init__(self) -> None:
        checked = {
            "band": _number("tie_band", self.band, lambda v: 0 <= v < 1, "a fraction in [0, 1), e.g. 0.03 for 3 %"),
            "finalists": _number("finalists", self.finalists, lambda v: v >= 1,
                                 "a whole number >= 1 (1: plain argmin, no tie rule)", whole=True),
            "rounds": _number("final_rounds", self.rounds, lambda v: v >= 2,
                              "a whole number >= 2 (a confidence interval needs two rounds)", whole=True),
            "tolerance": _number("tie_tolerance", self.tolerance, lambda v: 0 <= v < 1,
                                 "a fraction in [0, 1), e.g. 0.01 for 1 %"),
        }
        checked["min_finalists"] = _number("min_finalists", self.min_finalists, lambda v: v >= 1,
                                           "a whole number >= 1 (never more finalists than tune.finalists; 1: the "
                                           "band alone)", whole=True)
        checked["max_rounds"] = _number("max_final_rounds", self.max_rounds, lambda v: v >= 1,
                                        "a whole number >= 1 (rounds in all; up to tune.final_rounds: one pass, "
                                        "no settling)", whole=True)
        checked["placements"] = _number("final_placements", self.placements, lambda v: v >= 1,
                                        "a whole number >= 1 (1: one set of buffers)", whole=True)
        for name, value in checked.items():
            object.__setattr__(self, name, value)


# -----------------------------------------------------------
# The preference order.

#: Flags that switch on a special code path, most special first; preferred off.
SPECIAL_FLAGS = ("PERSISTENT", "SPLIT_K", "SPLIT_SUM", "TMA_STORE", "TMA")
_SIZES = ("BLOCK_M", "BLOCK_N", "BLOCK_K")


def preference_key(config: Config) -> tuple:
    """Sort key of the fixed preference order among tied configs, simplest first: no
    PERSISTENT, then no SPLIT_K (smaller splits first), no SPLIT_SUM, no TMA_STORE, no TMA;
    then every other flag off (PACK_K, NCHW_IN, FOLD, the AMD knobs: by name); then the
    smaller tile (BLOCK_M * BLOCK_N), fewer warps, fewer stages, smaller BLOCK_K and BLOCK_M;
    finally the tiles themselves, so that two distinct configs never compare equal.

    Why simplest first:

    * it is known before anything is timed and depends on the configs only: noise can move
      a config in or out of the tied set (at its edge, near the tolerance) but never changes
      which tied config is preferred, so machines whose tied sets agree choose the same one;
    * the simplest config's speed depends on the fewest mechanisms that a swizzle also
      touches (persistent programs walk the tiles in their own loop, split-K changes the grid
      and adds a reduction, TMA changes how tiles are loaded; smaller tiles, fewer warps and
      stages take less shared memory and fewer registers), so the swizzle is measured on the
      most ordinary kernel of the tie;
    * nothing is given up: every tied config is within the tolerance, or the noise, of the fastest.
    """
    tiles = config.tiles_dict
    special = (int(tiles.get("PERSISTENT", 0)), int(tiles.get("SPLIT_K", 1)), int(tiles.get("SPLIT_SUM", 0)),
               int(tiles.get("TMA_STORE", 0)), int(tiles.get("TMA", 0)))
    others = tuple(int(v) for k, v in sorted(tiles.items()) if k not in SPECIAL_FLAGS and k not in _SIZES)
    bm, bn, bk = (int(tiles.get(k, 0)) for k in _SIZES)
    return (special, others, bm * bn, config.num_warps, config.num_stages, bk, bm,
            tuple(sorted(config.tiles)), config.label)


# -----------------------------------------------------------
# Records: the finalists and the decision.

def _pct(ratio: float) -> str:
    return f"{(ratio - 1) * 100:+.2f}" if math.isfinite(ratio) else ("+inf" if ratio > 0 else "-inf")


@dataclass(frozen=True)
class Finalist:
    """A candidate within the tie band.  ``ratio``: its time over the chosen config's time
    (> 1: slower), paired over the re-measured rounds (geometric mean) with its 95 % CI, or
    the single-shot ratio (no CI) where the finalists were not re-measured."""

    config: Config
    single_ms: float                 # single-shot trial time, ms
    ratio: float                     # time / chosen config's time (no unit)
    ci_lo: float | None = None       # 95 % CI of ``ratio``; None: not re-measured
    ci_hi: float | None = None
    tied: bool = False               # member of the tied set

    @property
    def gap(self) -> str:
        """``+0.30 % [-0.20, +0.80]`` (gap to the chosen config in %, CI in %), or
        ``+0.30 % (single shot)``."""
        if self.ci_lo is None or self.ci_hi is None:
            return f"{_pct(self.ratio)} % (single shot)"
        return f"{_pct(self.ratio)} % [{_pct(self.ci_lo)}, {_pct(self.ci_hi)}]"

    def as_dict(self) -> dict:
        return {"config": self.config.as_dict(), "label": self.config.label, "single_ms": self.single_ms,
                "ratio": self.ratio, "ci_lo": self.ci_lo, "ci_hi": self.ci_hi, "tied": self.tied}

    @classmethod
    def from_dict(cls, d: Mapping) -> "Finalist":
        return cls(Config.from_dict(d["config"]), float(d["single_ms"]), float(d["ratio"]), d.get("ci_lo"),
                   d.get("ci_hi"), bool(d.get("tied", False)))


@dataclass(frozen=True)
class TieDecision:
    """How the tie rule chose ``config`` among ``finalists`` (the chosen one included, ratio 1)."""

    config: Config
    finalists: tuple[Finalist, ...]
    rule: str                         # RULE_PAIRED, RULE_SINGLE or RULE_ARGMIN (+ why, on a fallback)
    rounds: int = 0                   # paired rounds of the re-measurement, all passes; 0: none
    placements: int = 0               # operand placements the rounds were spread over; 0: none
    passes: int = 0                   # re-measurements (step 3 adds passes while a finalist is unsettled)
    unsettled: int = 0                # finalists whose CI still contained 1 + tolerance at the end
    drained: int = 0                  # GPU batches whose hold ran out (their launches may count CPU overhead)

    @property
    def near_tie(self) -> bool:
        """More than one finalist was tied: the choice was made by the preference order."""
        return sum(f.tied for f in self.finalists) > 1

    @property
    def runner_ups(self) -> list[Finalist]:
        """The finalists other than the chosen one, closest first."""
        return sorted((f for f in self.finalists if f.config != self.config), key=lambda f: f.ratio)

    @property
    def runner_ups_text(self) -> str:
        """``M128 N256 K64 w8 s4 +0.30 % [-0.20, +0.80] tied; ...`` (``none``: one finalist)."""
        return "; ".join(f"{f.config.label} {f.gap}{' tied' if f.tied else ''}" for f in self.runner_ups) or "none"

    @property
    def measurement(self) -> str:
        """``90 rounds (3 passes) over 6 placements; 1 unsettled; 0 drained batches``, or ``none``."""
        if not self.rounds:
            return "none"
        return (f"{self.rounds} rounds ({self.passes} pass{'es' if self.passes != 1 else ''}) over "
                f"{self.placements} placement{'s' if self.placements != 1 else ''}; {self.unsettled} unsettled; "
                f"{self.drained} drained batches")

    def as_dict(self) -> dict:
        return {"rule": self.rule, "rounds": self.rounds, "placements": self.placements, "passes": self.passes,
                "unsettled": self.unsettled, "drained": self.drained,
                "finalists": [f.as_dict() for f in self.finalists]}

    @classmethod
    def from_dict(cls, d: Mapping, config: Config) -> "TieDecision":
        return cls(config, tuple(Finalist.from_dict(f) for f in d["finalists"]), str(d["rule"]), int(d.get("rounds", 0)),
                   int(d.get("placements", 0)), int(d.get("passes", 0)), int(d.get("unsettled", 0)),
                   int(d.get("drained", 0)))


# -----------------------------------------------------------
# The rule.

def select_finalists(single_ms: Mapping[Config, float], rule: TieRule) -> list[Config]:
    """Step 1: the verified configs within ``rule.band`` of the fastest single-shot time
    (``single_ms``: config -> ms), at most ``rule.finalists``, and at least
    ``rule.min_finalists`` of them where ``rule.finalists`` allows (the next fastest filling
    up, wherever they lie; all of them where fewer were verified); fastest first, equal times in preference order."""
    if not single_ms:
        raise ValueError("no timed config to choose from")
    order = sorted(single_ms, key=lambda c: (single_ms[c], preference_key(c)))
    fastest = single_ms[order[0]]
    near = sum(single_ms[c] <= fastest * (1 + rule.band) for c in order)
    return order[:min(rule.finalists, max(near, rule.min_finalists))]


def _geomean(values: np.ndarray) -> float:
    return float(np.exp(np.mean(np.log(values))))


def _ratio(times: np.ndarray, reference: np.ndarray, clusters: np.ndarray | None, method: str) -> PairedEstimate:
    """``times`` over ``reference`` (paired rounds) with its 95 % CI: over the placements'
    means when there are several, else over the rounds."""
    if clusters is not None and len(np.unique(clusters)) > 1:
        return clustered_ratio(times, reference, clusters)
    return paired_ratio(times, reference, method)


def _as_remeasured(measured, finals: Sequence[Config]) -> Remeasured:
    """A remeasure's answer as :class:`Remeasured` (a plain mapping: one placement, no drains),
    checked: every finalist, the same number of positive rounds."""
    if not isinstance(measured, Remeasured):
        measured = Remeasured(measured)
    times = {c: np.asarray(measured.times[c], dtype=float).ravel() for c in finals}
    counts = {len(v) for v in times.values()}
    if len(counts) != 1 or 0 in counts:
        raise ValueError(f"the finalists need the same, non-zero number of rounds; got {sorted(counts)}")
    places = None if measured.placements is None else np.asarray(measured.placements).ravel()
    if places is not None and len(places) != counts.pop():
        raise ValueError(f"one placement per round needed; got {len(places)}")
    return Remeasured(times, places, int(measured.drained))


def unsettled(to_fastest: Mapping[Config, PairedEstimate], tolerance: float) -> list[Config]:
    """Step 3: the finalists whose CI (time over the fastest finalist's) contains ``1 +
    tolerance``: more rounds could still move them across the tolerance."""
    edge = 1 + tolerance
    return [c for c, r in to_fastest.items() if not (r.ci_hi <= edge or r.ci_lo > edge)]


def decide(single_ms: Mapping[Config, float], rule: TieRule, remeasure: Remeasure | None = None,
           method: str = "t") -> TieDecision:
    """Apply the tie rule (module docstring) to the single-shot times ``single_ms`` (config ->
    ms of every verified candidate).  ``remeasure`` re-times the finalists in paired rounds,
    once per pass; if it raises, the single-shot times decide and the rule says why."""
    finals = select_finalists(single_ms, rule)
    if rule.finalists == 1:
        return _by_single_shot(finals, single_ms, rule, RULE_ARGMIN)
    if remeasure is None or len(finals) == 1:
        return _by_single_shot(finals, single_ms, rule, RULE_SINGLE if remeasure is None else RULE_PAIRED)
    passes: list[Remeasured] = []
    try:
        while True:
            passes.append(_as_remeasured(remeasure(finals), finals))
            rounds = {c: np.concatenate([p.times[c] for p in passes]) for c in finals}
            clusters = (None if any(p.placements is None for p in passes)
                        else np.concatenate([p.placements for p in passes]))
            fastest = min(finals, key=lambda c: (_geomean(rounds[c]), preference_key(c)))
            to_fastest = {c: _ratio(rounds[c], rounds[fastest], clusters, method) for c in finals}
            open_ = unsettled(to_fastest, rule.tolerance)
            done = len(rounds[fastest])
            if not open_ or done + len(passes[-1].times[fastest]) > rule.max_rounds:
                break
    except Exception as exc:  # noqa: BLE001 - a finalist that fails now was verified and timed before
        why = " ".join(f"{type(exc).__name__}: {exc}".split())[:200]
        return _by_single_shot(finals, single_ms, rule, f"{RULE_SINGLE} (paired re-measurement failed: {why})")
    tied = {c for c, r in to_fastest.items() if r.estimate <= 1 + rule.tolerance or r.ci_lo <= 1.0}
    chosen = min(tied, key=preference_key)
    finalists = []
    for c in finals:
        r = _ratio(rounds[c], rounds[chosen], clusters, method)
        finalists.append(Finalist(c, float(single_ms[c]), r.estimate, r.ci_lo, r.ci_hi, c in tied))
    placements = 1 if clusters is None else len(np.unique(clusters))
    return TieDecision(chosen, tuple(finalists), RULE_PAIRED, done, placements, len(passes), len(open_),
                       sum(p.drained for p in passes))


def _by_single_shot(finals: list[Config], single_ms: Mapping[Config, float], rule: TieRule, name: str) -> TieDecision:
    """Steps 4-5 on the single-shot times: tied = within ``rule.tolerance`` of the fastest."""
    fastest = min(single_ms[c] for c in finals)
    tied = {c for c in finals if single_ms[c] <= fastest * (1 + rule.tolerance)}
    chosen = min(tied, key=preference_key)
    base = single_ms[chosen]
    return TieDecision(chosen, tuple(Finalist(c, float(single_ms[c]), single_ms[c] / base, tied=c in tied)
                                     for c in finals), name)
