"""Tune mode's tie rule: which of several nearly equally fast configs is chosen, so that two
machines that time the same candidates choose the same one.

The single-shot trial times of a layer's best candidates often lie within 1 % of each other
(62.9 / 63.1 / 63.2 / 63.4 µs on an H100): plain argmin then picks by noise, two GPUs pick
different configs, and a swizzle's measured effect, which depends on the config (x0.97 on one,
x0.82 on another), differs with them.  The rule (:data:`RULE_PAIRED`):

1. *finalists*: the verified candidates within ``tie_band`` (default 3 %) of the fastest
   single-shot time, at most ``finalists`` (6) of them, fastest first;
2. on a GPU the finalists are re-measured together in ``final_rounds`` (30) paired,
   interleaved rounds (L2 flushed before every launch, :func:`harness.pipeline.timing.time_interleaved`)
   and each one's paired time ratio to the fastest finalist is estimated with its 95 % CI
   (:func:`harness.pipeline.stats.paired_ratio`);
3. the *tied set*: the finalists within ``tie_tolerance`` (1 %) of the fastest, or whose CI
   includes the fastest's time (ratio 1);
4. the choice: the member of the tied set that comes first in :func:`preference_key`, a fixed
   order of the candidate space (simplest first), never "whichever timed fastest".

Without a re-measurement (the CPU interpreter, or a caller that gives none) step 3 compares the
single-shot times, without a CI (:data:`RULE_SINGLE`); ``tune.finalists=1`` is plain argmin
(:data:`RULE_ARGMIN`).  Everything here is a pure function of times: tested on the CPU with
stand-in timings.
"""
from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

import numpy as np

from harness.errors import UserError
from harness.pipeline.stats import paired_ratio
from harness.pipeline.tuning_space import Config

#: Rule names, logged as tag ``tune.rule``.
RULE_PAIRED = "paired-ties-simplest-first"       # finalists re-measured in paired rounds
RULE_SINGLE = "single-shot-ties-simplest-first"  # no re-measurement: ties by single-shot times
RULE_ARGMIN = "fastest-single-shot"              # tune.finalists=1: plain argmin
#: ``tune.rule`` of a cache entry written before the tie rule existed (its choice was argmin).
RULE_LEGACY = "fastest-single-shot (cache entry from before the tie rule)"

#: ``remeasure(finalists) -> {config: per-round times, ms}``: every finalist timed in the same
#: interleaved rounds, so the i-th values of two finalists form a pair.
Remeasure = Callable[[Sequence[Config]], Mapping[Config, Sequence[float]]]


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
    ``tune.final_rounds``, ``tune.tie_tolerance``); fractions, not %."""

    band: float = 0.03        # finalists: within this fraction of the fastest single-shot time
    finalists: int = 6        # at most this many finalists (1: plain argmin)
    rounds: int = 30          # paired rounds re-measuring the finalists (GPU)
    tolerance: float = 0.01   # tied: within this fraction of the fastest finalist, or CI includes it

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
    rounds: int = 0                   # paired rounds of the re-measurement; 0: none

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

    def as_dict(self) -> dict:
        return {"rule": self.rule, "rounds": self.rounds, "finalists": [f.as_dict() for f in self.finalists]}

    @classmethod
    def from_dict(cls, d: Mapping, config: Config) -> "TieDecision":
        return cls(config, tuple(Finalist.from_dict(f) for f in d["finalists"]), str(d["rule"]), int(d.get("rounds", 0)))


# -----------------------------------------------------------
# The rule.

def select_finalists(single_ms: Mapping[Config, float], rule: TieRule) -> list[Config]:
    """The verified configs within ``rule.band`` of the fastest single-shot time (``single_ms``:
    config -> ms), fastest first (equal times in preference order), at most ``rule.finalists``."""
    if not single_ms:
        raise ValueError("no timed config to choose from")
    fastest = min(single_ms.values())
    near = [c for c, ms in single_ms.items() if ms <= fastest * (1 + rule.band)]
    return sorted(near, key=lambda c: (single_ms[c], preference_key(c)))[:rule.finalists]


def _geomean(values: np.ndarray) -> float:
    return float(np.exp(np.mean(np.log(values))))


def decide(single_ms: Mapping[Config, float], rule: TieRule, remeasure: Remeasure | None = None,
           method: str = "t") -> TieDecision:
    """Apply the tie rule (module docstring) to the single-shot times ``single_ms`` (config ->
    ms of every verified candidate).  ``remeasure`` re-times the finalists in paired rounds; if
    it raises, the single-shot times decide and the rule says why."""
    finals = select_finalists(single_ms, rule)
    if rule.finalists == 1:
        return _by_single_shot(finals, single_ms, rule, RULE_ARGMIN)
    if remeasure is None or len(finals) == 1:
        return _by_single_shot(finals, single_ms, rule, RULE_SINGLE if remeasure is None else RULE_PAIRED)
    try:
        measured = remeasure(finals)
        rounds = {c: np.asarray(measured[c], dtype=float) for c in finals}
    except Exception as exc:  # noqa: BLE001 - a finalist that fails now was verified and timed before
        why = " ".join(f"{type(exc).__name__}: {exc}".split())[:200]
        return _by_single_shot(finals, single_ms, rule, f"{RULE_SINGLE} (paired re-measurement failed: {why})")
    fastest = min(finals, key=lambda c: (_geomean(rounds[c]), preference_key(c)))
    to_fastest = {c: paired_ratio(rounds[c], rounds[fastest], method) for c in finals}
    tied = {c for c, r in to_fastest.items() if r.estimate <= 1 + rule.tolerance or r.ci_lo <= 1.0}
    chosen = min(tied, key=preference_key)
    finalists = []
    for c in finals:
        r = paired_ratio(rounds[c], rounds[chosen], method)
        finalists.append(Finalist(c, float(single_ms[c]), r.estimate, r.ci_lo, r.ci_hi, c in tied))
    return TieDecision(chosen, tuple(finalists), RULE_PAIRED, min(len(v) for v in rounds.values()))


def _by_single_shot(finals: list[Config], single_ms: Mapping[Config, float], rule: TieRule, name: str) -> TieDecision:
    """Steps 3-4 on the single-shot times: tied = within ``rule.tolerance`` of the fastest."""
    fastest = min(single_ms[c] for c in finals)
    tied = {c for c in finals if single_ms[c] <= fastest * (1 + rule.tolerance)}
    chosen = min(tied, key=preference_key)
    base = single_ms[chosen]
    return TieDecision(chosen, tuple(Finalist(c, float(single_ms[c]), single_ms[c] / base, tied=c in tied)
                                     for c in finals), name)
