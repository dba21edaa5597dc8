"""Tune mode's tie rule (harness.tune.ties), its records in the tune result and the
cache, and a cache directory shared between machines.  CPU only: the GPU's timings are
stand-ins with noise (the paired rounds' per-round times), the GPU wiring is checked with a
stand-in ``time_interleaved``."""
from __future__ import annotations

import json
import os
import shutil
import socket
from pathlib import Path

import numpy as np
import pytest

from harness.errors import UserError
from harness.tune.search import TuneCache, TuneOptions, resolve_cache_dir, tune
from kernels.tuning import Config
from harness.tune.ties import (RULE_ARGMIN, RULE_LEGACY, RULE_PAIRED, RULE_SINGLE, Remeasured, TieDecision,
                                          TieRule, decide, preference_key, select_finalists, unsettled)
from tests.tune.test_search import _key

BASE = {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "SPLIT_K": 1, "PACK_K": 0, "NCHW_IN": 0, "PERSISTENT": 0,
        "TMA": 0, "TMA_STORE": 0, "FOLD": 0, "SPLIT_SUM": 0}

#: The rule's mechanics are tested at a 1 % tie tolerance (the stand-in timings are built around
#: it); the default is 2 % (conf/tune/fastest.yaml says why).
ONE_PCT = 0.01


def cfg(warps: int = 4, stages: int = 3, **tiles) -> Config:
    return Config.make({**BASE, **tiles}, warps, stages)


# The layer of issue 19: four candidates within 0.8 % (true times, µs), one simpler one 1.6 %
# behind (a finalist, never tied), one outside the 3 % band.
PERSIST = cfg(PERSISTENT=1)
TMA_WIDE = cfg(8, 4, BLOCK_N=256, TMA=1)
PLAIN = cfg()                               # the simplest of the four near-equal ones
DEEP = cfg(8, 4)
SMALL = cfg(BLOCK_M=64, BLOCK_N=64)         # simpler than all, but 1.6 % slower
FAR = cfg(8, 4, BLOCK_M=256, BLOCK_N=256)
TRUE_US = {PERSIST: 62.9, TMA_WIDE: 63.1, PLAIN: 63.2, DEEP: 63.4, SMALL: 63.9, FAR: 70.0}


class Machine:
    """One GPU: its own speed and its own noise (``seed``).  ``measure`` is a single-shot
    trial (0.4 % noise), ``remeasure`` the paired rounds: every round shares a drift factor
    (2 %: clocks, temperature) and each launch has 0.4 % of its own."""

    def __init__(self, seed: int):
        self.rng = np.random.default_rng(seed)
        self.speed = 1.0 + 0.02 * self.rng.standard_normal()
        self.remeasured: list[list[Config]] = []

    def measure(self, config: Config) -> float:
        return TRUE_US[config] * 1e-3 * self.speed * (1 + 0.004 * self.rng.standard_normal())

    def remeasure(self, finalists, rounds: int = 30):
        self.remeasured.append(list(finalists))
        drift = np.exp(0.02 * self.rng.standard_normal(rounds))
        return {c: TRUE_US[c] * 1e-3 * self.speed * drift * (1 + 0.004 * self.rng.standard_normal(rounds))
                for c in finalists}


def test_two_machines_choose_the_same_config_where_argmin_would_not():
    plain, ruled = {}, {}
    for seed in range(12):
        machine = Machine(seed)
        single = {c: machine.measure(c) for c in TRUE_US}
        plain[seed] = min(single, key=single.get)
        decision = decide(single, TieRule(tolerance=ONE_PCT), machine.remeasure)
        ruled[seed] = decision.config
        assert decision.rule == RULE_PAIRED and decision.near_tie
        assert decision.rounds == 30 * decision.passes and 1 <= decision.passes <= 3
        finalists = {f.config: f for f in decision.finalists}
        assert FAR not in finalists and machine.remeasured == [list(finalists)] * decision.passes   # outside the band
        assert SMALL in finalists and not finalists[SMALL].tied                    # simplest, but 1.6 % slower
        assert finalists[SMALL].ci_lo > 1.0
        assert finalists[PLAIN].tied and finalists[PLAIN].ratio == 1.0
    # Plain argmin: two machines (seeds) disagree; the rule: every machine chooses PLAIN.
    assert len(set(plain.values())) >= 2, plain
    assert set(ruled.values()) == {PLAIN}


def test_tied_set_by_tolerance_or_ci():
    a, b, c, d = cfg(), cfg(8, 3), cfg(8, 4), cfg(BLOCK_M=64)
    rng = np.random.default_rng(1)
    base = 1.0 + 0.001 * rng.standard_normal(30)
    rounds = {
        c: base * 1.0,                                                # the fastest, but not the simplest
        b: base * 1.008 * (1 + 1e-4 * rng.standard_normal(30)),     # 0.8 % slower, tight CI: within 1 %
        a: base * 1.03 * np.tile([1.1, 0.9], 15),                   # 2.5 % slower but so noisy its CI holds 1
        d: base * 1.05 * (1 + 1e-4 * rng.standard_normal(30)),       # 5 %, tight: not tied
    }
    single = {a: 1.0, b: 1.0, c: 1.0, d: 1.02}
    one_pass = TieRule(band=0.05, max_rounds=30, tolerance=ONE_PCT)                     # steps 4-5 on these rounds as they stand
    decision = decide(single, one_pass, lambda finals: {f: rounds[f] for f in finals})
    tied = {f.config for f in decision.finalists if f.tied}
    assert tied == {a, b, c}
    assert decision.config == a                                       # the simplest of the tied set
    gaps = {f.config: f for f in decision.finalists}
    assert gaps[a].ratio == 1.0 and gaps[d].ratio == pytest.approx(1.05 / 1.025, rel=0.002)   # to the *chosen* one
    assert gaps[a].tied and not gaps[d].tied                         # d: 5 % behind the fastest, tight CI
    assert decision.runner_ups[0].config in (b, c)
    # tolerance 0: only the CI ties; a tight 0.8 % gap is then a difference
    strict = decide(single, TieRule(band=0.05, tolerance=0.0, max_rounds=30),
                    lambda finals: {f: rounds[f] for f in finals})
    assert {f.config for f in strict.finalists if f.tied} == {a, c}


def test_preference_order_is_simplest_first_and_total():
    ordered = [cfg(4, 2, BLOCK_M=64, BLOCK_N=64), cfg(4, 3, BLOCK_M=64, BLOCK_N=64), cfg(8, 2, BLOCK_M=64, BLOCK_N=64),
               cfg(4, 2, BLOCK_M=64, BLOCK_N=128), cfg(4, 2, BLOCK_M=128, BLOCK_N=64),   # same area: smaller M first
               cfg(4, 2, PACK_K=1), cfg(4, 2, TMA=1), cfg(4, 2, TMA_STORE=1), cfg(4, 2, SPLIT_K=2),
               cfg(4, 2, SPLIT_K=4), cfg(4, 2, PERSISTENT=1)]
    shuffled = list(ordered)
    np.random.default_rng(0).shuffle(shuffled)
    assert sorted(shuffled, key=preference_key) == ordered
    assert len({preference_key(c) for c in ordered}) == len(ordered)
    # tiles without any flag (igemm's space) order by size, warps and stages too
    plain = [Config.make({"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32}, 4, 2),
             Config.make({"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 64}, 4, 2),
             Config.make({"BLOCK_M": 128, "BLOCK_N": 64, "BLOCK_K": 32}, 4, 2)]
    assert sorted(reversed(plain), key=preference_key) == plain


def test_finalists_band_and_limit():
    times = {cfg(4, 2): 1.00, cfg(4, 3): 1.02, cfg(8, 2): 1.029, cfg(8, 3): 1.031, cfg(8, 4): 1.2, cfg(4, 4): 1.0}
    in_band = [cfg(4, 2), cfg(4, 4), cfg(4, 3), cfg(8, 2)]                  # equal times: simplest first
    assert select_finalists(times, TieRule(min_finalists=1)) == in_band
    assert select_finalists(times, TieRule()) == in_band                    # 4 in the band: nothing to fill
    assert select_finalists(times, TieRule(finalists=2)) == [cfg(4, 2), cfg(4, 4)]
    assert select_finalists(times, TieRule(band=0.0, min_finalists=1)) == [cfg(4, 2), cfg(4, 4)]


def test_min_finalists_fill_up_with_the_next_fastest_wherever_they_lie():
    times = {cfg(4, 2): 1.00, cfg(4, 3): 1.05, cfg(8, 2): 1.09, cfg(8, 3): 1.30, cfg(8, 4): 2.0}
    assert select_finalists(times, TieRule(min_finalists=1)) == [cfg(4, 2)]              # alone in the 3 % band
    assert select_finalists(times, TieRule()) == [cfg(4, 2), cfg(4, 3), cfg(8, 2), cfg(8, 3)]   # 30 % behind: still
    assert select_finalists(times, TieRule(band=0.06)) == [cfg(4, 2), cfg(4, 3), cfg(8, 2), cfg(8, 3)]
    assert select_finalists(times, TieRule(band=0.5, min_finalists=2)) == [cfg(4, 2), cfg(4, 3), cfg(8, 2), cfg(8, 3)]
    assert select_finalists(times, TieRule(finalists=3)) == [cfg(4, 2), cfg(4, 3), cfg(8, 2)]  # never above finalists
    assert select_finalists(times, TieRule(min_finalists=9)) == list(sorted(times, key=times.get))[:6]
    assert select_finalists({cfg(8, 4): 1.0, cfg(4, 3): 1.5}, TieRule()) == [cfg(8, 4), cfg(4, 3)]   # all there is
    argmin = decide(times, TieRule(finalists=1, min_finalists=4, tolerance=ONE_PCT), lambda f: pytest.fail("argmin re-measures nothing"))
    assert argmin.config == cfg(4, 2) and argmin.rule == RULE_ARGMIN and len(argmin.finalists) == 1


def test_without_remeasure_single_shot_times_decide_and_finalists_1_is_argmin():
    times = {cfg(8, 4): 1.000, cfg(4, 3): 1.005, cfg(4, 2): 1.02}
    single = decide(times, TieRule(tolerance=ONE_PCT))
    assert (single.config, single.rule, single.near_tie) == (cfg(4, 3), RULE_SINGLE, True)
    assert single.runner_ups_text == ("M128 N128 K64 SPLIT_K1 PACK_K0 NCHW_IN0 PERSISTENT0 TMA0 TMA_STORE0 FOLD0 "
                                      "SPLIT_SUM0 w8 s4 -0.50 % (single shot) tied; M128 N128 K64 SPLIT_K1 PACK_K0 "
                                      "NCHW_IN0 PERSISTENT0 TMA0 TMA_STORE0 FOLD0 SPLIT_SUM0 w4 s2 +1.49 % (single shot)")
    argmin = decide(times, TieRule(finalists=1, tolerance=ONE_PCT), lambda f: pytest.fail("argmin re-measures nothing"))
    assert (argmin.config, argmin.rule, argmin.near_tie, argmin.runner_ups_text) == (cfg(8, 4), RULE_ARGMIN, False, "none")


def test_a_failing_remeasurement_falls_back_to_single_shot_and_says_so():
    def broken(finals):
        raise RuntimeError("CUDA error: an illegal memory access\nmore")

    decision = decide({cfg(8, 4): 1.0, cfg(4, 3): 1.004}, TieRule(tolerance=ONE_PCT), broken)
    assert decision.config == cfg(4, 3)
    assert decision.rule == f"{RULE_SINGLE} (paired re-measurement failed: RuntimeError: CUDA error: an illegal memory access more)"


@pytest.mark.parametrize("knobs, message", [
    (dict(tie_band=-0.1), "tune.tie_band=-0.1 is invalid; valid: a fraction in [0, 1), e.g. 0.03 for 3 %"),
    (dict(tie_band=3), "tune.tie_band=3 is invalid; valid: a fraction in [0, 1)"),
    (dict(finalists=0), "tune.finalists=0 is invalid; valid: a whole number >= 1 (1: plain argmin"),
    (dict(finalists=2.5), "tune.finalists=2.5 is invalid"),
    (dict(final_rounds=1), "tune.final_rounds=1 is invalid; valid: a whole number >= 2"),
    (dict(tie_tolerance="1%"), "tune.tie_tolerance='1%' is invalid; valid: a fraction in [0, 1), e.g. 0.01 for 1 %"),
    (dict(tie_tolerance=float("nan")), "tune.tie_tolerance=nan is invalid"),
    (dict(finalists=True), "tune.finalists=True is invalid"),
    (dict(min_finalists=0), "tune.min_finalists=0 is invalid; valid: a whole number >= 1 (never more finalists than "
                            "tune.finalists; 1: the band alone)"),
    (dict(min_finalists=3.5), "tune.min_finalists=3.5 is invalid"),
    (dict(max_final_rounds=0), "tune.max_final_rounds=0 is invalid; valid: a whole number >= 1 (rounds in all; up to "
                               "tune.final_rounds: one pass, no settling)"),
    (dict(max_final_rounds="90"), "tune.max_final_rounds='90' is invalid"),
    (dict(final_placements=0), "tune.final_placements=0 is invalid; valid: a whole number >= 1 (1: one set of "
                               "buffers)"),
    (dict(final_placements=float("inf")), "tune.final_placements=inf is invalid"),
])
def test_bad_tie_knobs_are_user_errors(knobs, message):
    with pytest.raises(UserError) as err:
        TuneOptions(mode="fastest", **knobs)
    assert str(err.value).startswith(message)


def test_tie_knobs_from_the_config_group():
    from hydra import compose, initialize_config_module

    from omegaconf import OmegaConf

    def tune_options(cfg):
        return OmegaConf.to_object(cfg.tune).options()   # the typed node (harness.schema.TuneConfig)

    with initialize_config_module("swizzlebench_conf", version_base="1.3"):
        on = compose("config", overrides=["tune=fastest"])
        tuned = compose("config", overrides=["tune=fastest", "tune.finalists=3", "tune.tie_tolerance=0.005",
                                             "tune.cache_dir=tuning/h100", "tune.min_finalists=2",
                                             "tune.max_final_rounds=60", "tune.final_placements=1"])
        bad = compose("config", overrides=["tune=fastest", "tune.final_rounds=0"])
        off = compose("config")
    assert tune_options(on).tie_rule == TieRule(0.03, 6, 30, 0.02, 4, 90, 6) == TieRule()
    assert tune_options(off).tie_rule == TieRule()                    # tune=none: the defaults, unused
    opts = tune_options(tuned)
    assert (opts.finalists, opts.tie_tolerance) == (3, 0.005)
    assert opts.tie_rule == TieRule(0.03, 3, 30, 0.005, min_finalists=2, max_rounds=60, placements=1)
    assert os.path.isabs(opts.cache_dir) and opts.cache_dir.endswith(os.path.join("", "tuning", "h100"))
    with pytest.raises(UserError, match=r"tune.final_rounds=0 is invalid"):
        tune_options(bad)


# -----------------------------------------------------------
# Finalists that two runs share, settling, placements (issue 19: tune mode twice, same picks)

class Process:
    """One tuning process on one GPU.  Its operands' addresses give every (config, placement) a
    steady bias (log-normal, sd ``address``: where the buffers lie), every paired round a drift
    shared by all arms, every launch ``noise`` of its own; single shots, taken seconds apart,
    drift by ``shot_drift`` each.  ``remeasure`` is one pass of the tie rule: ``rounds`` rounds
    in batches of 5 that take ``placements`` placements in turn (as the GPU timer does)."""

    def __init__(self, seed: int, true_us: dict, address: float = 0.0, shot_drift: float = 0.0,
                 noise: float = 0.002, placements: int = 6, rounds: int = 30):
        self.seed, self.true_us, self.address, self.noise = seed, true_us, address, noise
        self.placements, self.rounds = placements, rounds
        self.rng = np.random.default_rng(seed)
        self.shots = {c: t * np.exp(shot_drift * self.rng.standard_normal()) for c, t in true_us.items()}
        self.passes = 0

    def bias(self, config: Config, placement: int) -> float:
        index = sorted(self.true_us, key=preference_key).index(config)
        return float(np.exp(self.address * np.random.default_rng((self.seed, index, placement)).standard_normal()))

    def remeasure(self, finalists) -> Remeasured:
        self.passes += 1
        where = [(r // 5) % self.placements for r in range(self.rounds)]
        drift = np.exp(0.02 * self.rng.standard_normal(self.rounds))
        times = {c: np.array([self.true_us[c] * self.bias(c, p) for p in where]) * drift
                 * (1 + self.noise * self.rng.standard_normal(self.rounds)) for c in finalists}
        return Remeasured(times, where if self.placements > 1 else None)


def test_min_finalists_measure_the_picks_two_runs_would_otherwise_never_compare():
    """ResNet-50 l22 on an H100: each run had one config in its 3 % band, a different one, so
    neither measured the other's pick.  With at least 4 finalists both are re-timed together
    in both runs, and both runs choose the faster one (1.6 % ahead: not a tie)."""
    n64, n128, m128, far = cfg(BLOCK_M=64, BLOCK_N=64), cfg(BLOCK_M=64), cfg(BLOCK_N=64), cfg(8, 4, BLOCK_M=256)
    true = {n64: 15.30, n128: 15.55, m128: 15.70, far: 17.0}
    shots = [{n64: 15.84, n128: 15.31, m128: 16.1, far: 17.1},     # run 1: n128 fastest, n64 3.5 % behind
             {n64: 15.31, n128: 15.80, m128: 16.0, far: 17.2}]     # run 2: the other way round
    old = [decide(shot, TieRule(min_finalists=1, tolerance=ONE_PCT), Process(i, true).remeasure) for i, shot in enumerate(shots)]
    assert [d.config for d in old] == [n128, n64]                               # two picks ...
    assert [len(d.finalists) for d in old] == [1, 1]                            # ... never timed together
    new = [decide(shot, TieRule(tolerance=ONE_PCT), Process(i, true).remeasure) for i, shot in enumerate(shots)]
    assert [d.config for d in new] == [n64, n64]
    for d in new:
        measured = {f.config: f for f in d.finalists}
        assert set(measured) == {n64, n128, m128, far} and not measured[n128].tied and measured[n128].ci_lo > 1.01


def test_unsettled_finalists_are_those_whose_ci_contains_the_tolerance():
    from harness.measure.stats import PairedEstimate

    est = {cfg(4, 2): PairedEstimate(1.0, 1.0, 1.0, 30), cfg(4, 3): PairedEstimate(1.005, 0.999, 1.0099, 30),
           cfg(4, 4): PairedEstimate(1.02, 1.0101, 1.03, 30), cfg(8, 2): PairedEstimate(1.01, 1.0, 1.02, 30),
           cfg(8, 3): PairedEstimate(1.02, 0.98, 1.06, 30), cfg(8, 4): PairedEstimate(1.012, 1.01, 1.014, 30)}
    assert unsettled(est, 0.01) == [cfg(8, 2), cfg(8, 3), cfg(8, 4)]   # lo <= 1.01 < hi
    assert unsettled(est, 0.0) == [cfg(4, 3), cfg(8, 2), cfg(8, 3)]


def test_settling_measures_on_until_the_marks_hold():
    """A simpler config 2 % behind the fastest, whose first pass was noisy (a CI of about +-2 %
    that includes 1: tied, and it would be chosen): the rule measures two more passes, the CI
    settles beyond the 1 % tolerance, and the fastest is chosen.  One pass only
    (max_final_rounds = final_rounds) keeps the old, noise-made choice."""
    fast, simple = cfg(8, 4, TMA_STORE=1), cfg()
    spread = [0.06, 0.01, 0.01]                                  # log-ratio noise of each pass

    def passes(record):
        def remeasure(finals):
            k = len(record)
            record.append(k)
            base = np.exp(0.01 * np.sin(np.arange(30) + k))      # drift shared by both arms
            wiggle = np.exp(spread[min(k, 2)] * np.tile([1.0, -1.0], 15))
            return {fast: base, simple: base * 1.02 * wiggle}
        return remeasure

    single = {fast: 1.0, simple: 1.01}
    calls: list[int] = []
    settled = decide(single, TieRule(tolerance=ONE_PCT), passes(calls))
    assert settled.config == fast and settled.passes == len(calls) == 3 and settled.rounds == 90
    assert settled.unsettled == 0
    mark = {f.config: f for f in settled.finalists}[simple]
    assert not mark.tied and 1.01 < mark.ci_lo and mark.ratio == pytest.approx(1.02, abs=0.002)
    one = decide(single, TieRule(max_rounds=30, tolerance=ONE_PCT), passes([]))
    assert one.config == simple and one.passes == 1 and one.unsettled == 1   # tied while its CI holds 1
    # a cap between passes: never more rounds than max_final_rounds (after the first pass)
    assert decide(single, TieRule(max_rounds=80, tolerance=ONE_PCT), passes([])).rounds == 60


def repro_verdict(a: TieDecision, b: TieDecision) -> str:
    """Issue 19's acceptance for one layer tuned by two runs (benchmarks/tune_repro.py): same
    config, or one run measured the other's pick as tied, else not."""
    if a.config == b.config:
        return "same"
    in_a, in_b = ({f.config: f for f in d.finalists} for d in (a, b))
    return "tied" if (b.config in in_a and in_a[b.config].tied) or (a.config in in_b and in_b[a.config].tied) else "not"


@pytest.mark.parametrize("gap", [1.0, 1.005])
def test_placements_keep_two_processes_from_contradicting_each_other(gap):
    """Two configs equally fast (or 0.5 % apart), the faster-looking one not the simplest, and
    where each process's buffers lie moving every config's time by ~1 % (sd): timed on one set
    of buffers, each process gets a tight CI around its own address-biased ratio, and in some
    pairs of processes each measures its own pick more than 1 % ahead of the other's: neither
    same nor tied.  Over 6 placements the CI covers that spread: no pair contradicts."""
    fast, simple, other = cfg(8, 4, TMA_STORE=1), cfg(), cfg(8, 3, BLOCK_N=256)
    true = {fast: 20.0, simple: 20.0 * gap, other: 21.0}
    single = {fast: 20.0, simple: 20.1, other: 20.9}

    def verdicts(placements: int) -> dict[str, int]:
        rule = TieRule(placements=placements, tolerance=ONE_PCT)
        runs = [decide(single, rule, Process(seed, true, address=0.01, placements=placements).remeasure)
                for seed in range(24)]
        pairs = [repro_verdict(a, b) for i, a in enumerate(runs) for b in runs[i + 1:]]
        return {v: pairs.count(v) for v in ("same", "tied", "not")}

    one, six = verdicts(1), verdicts(6)
    assert one["not"] >= 20, one            # of 276 pairs
    assert six["not"] == 0 and six["same"] > one["same"], six


def test_clustered_ci_when_the_rounds_name_their_placements():
    """The same rounds: over rounds (no placements) a tight CI that excludes 1; named as 3
    placements with different offsets, a CI over the 3 means that holds 1 (tied)."""
    a, b = cfg(8, 4, TMA=1), cfg()
    offsets = np.repeat([0.99, 1.02, 1.035], 10)
    rounds = {a: np.ones(30), b: 1.015 * offsets / offsets.mean() * (1 + 1e-4 * np.sin(np.arange(30)))}
    flat = decide({a: 1.0, b: 1.0}, TieRule(max_rounds=30, tolerance=ONE_PCT), lambda f: {c: rounds[c] for c in f})
    placed = decide({a: 1.0, b: 1.0}, TieRule(max_rounds=30, tolerance=ONE_PCT),
                    lambda f: Remeasured({c: rounds[c] for c in f}, np.repeat([0, 1, 2], 10)))
    fb, pb = ({x.config: x for x in d.finalists}[b] for d in (flat, placed))
    assert flat.placements == 1 and placed.placements == 3
    assert fb.ci_lo > 1.0 and not fb.tied and flat.config == a                  # 1.5 % behind, "tight"
    assert pb.ci_lo <= 1.0 and pb.tied and placed.config == b                   # the spread between placements


def test_a_malformed_remeasurement_falls_back_to_single_shot():
    a, b = cfg(8, 4), cfg()
    short = decide({a: 1.0, b: 1.004}, TieRule(tolerance=ONE_PCT), lambda f: {a: np.ones(30), b: np.ones(29)})
    assert short.rule.startswith(f"{RULE_SINGLE} (paired re-measurement failed: ValueError: the finalists need the "
                                 "same, non-zero number of rounds")
    labels = decide({a: 1.0, b: 1.004}, TieRule(tolerance=ONE_PCT), lambda f: Remeasured({a: np.ones(30), b: np.ones(30)}, [0] * 29))
    assert "one placement per round needed; got 29" in labels.rule and labels.config == b


def test_decision_records_the_measurement_and_reads_older_entries():
    process = Process(1, TRUE_US, address=0.005)
    decision = decide({c: TRUE_US[c] for c in TRUE_US}, TieRule(tolerance=ONE_PCT), process.remeasure)
    assert decision.placements == 6 and decision.passes == process.passes and decision.rounds == 30 * process.passes
    back = TieDecision.from_dict(json.loads(json.dumps(decision.as_dict())), decision.config)
    assert back == decision
    old = {"rule": "paired-ties-simplest-first", "rounds": 30, "finalists": [f.as_dict() for f in decision.finalists]}
    older = TieDecision.from_dict(old, decision.config)
    assert (older.rounds, older.placements, older.passes, older.unsettled, older.drained) == (30, 0, 0, 0, 0)
    assert TieDecision(decision.config, decision.finalists, RULE_SINGLE).measurement == "none"


# -----------------------------------------------------------
# The tune result, the cache, and a cache shared between machines

def _tune(machine: Machine, cache: TuneCache, verify=None):
    return tune(list(TRUE_US), machine.measure, verify, cache, _key(), remeasure=machine.remeasure,
                rule=TieRule(tolerance=ONE_PCT))


def test_result_logs_runner_ups_and_near_tie_and_the_cache_keeps_them(tmp_path):
    result = _tune(Machine(3), TuneCache(tmp_path))
    params, tags = result.as_params(), result.as_tags()
    assert result.config == PLAIN and tags == {"tune.near_tie": "true", "tune.rule": RULE_PAIRED}
    assert params["tune.config"] == PLAIN.label and params["tune.final_rounds"] == str(30 * result.tie.passes)
    passes = f"{result.tie.passes} pass{'es' if result.tie.passes > 1 else ''}"
    assert params["tune.final_measurement"] == (f"{30 * result.tie.passes} rounds ({passes}) over 1 placement; "
                                                f"{result.tie.unsettled} unsettled; 0 drained batches")
    runner_ups = params["tune.runner_ups"].split("; ")
    assert len(runner_ups) == len(result.tie.finalists) - 1 and all(" % [" in r for r in runner_ups)
    assert runner_ups[-1].startswith(SMALL.label + " +") and not runner_ups[-1].endswith("tied")
    assert "near-tie: simplest of" in result.summary
    again = _tune(Machine(4), TuneCache(tmp_path))
    assert again.from_cache and again.tie == result.tie and again.as_tags() == tags
    assert again.as_params()["tune.runner_ups"] == params["tune.runner_ups"]


def test_cache_entries_from_before_the_tie_rule_still_read(tmp_path):
    TuneCache(tmp_path).put(_key(), {"config": DEEP.as_dict(), "time_ms": 0.0634, "cost_s": 9.0, "trials": []})
    result = tune(list(TRUE_US), lambda c: pytest.fail("a cache hit measures nothing"), cache=TuneCache(tmp_path),
                  key=_key())
    assert result.from_cache and result.config == DEEP and result.tie is None and result.near_tie is None
    assert result.as_tags() == {"tune.near_tie": "unknown", "tune.rule": RULE_LEGACY}
    assert result.as_params()["tune.runner_ups"] == "not recorded"


def test_a_cache_directory_can_be_committed_and_reused_elsewhere(tmp_path, monkeypatch):
    """Tune on "machine A" into a directory, copy it (as a commit and a checkout would) to
    another path, and "machine B" gets every choice from it without timing anything.  No
    file holds a path or the host name, not even a failed trial's compiler message."""
    monkeypatch.setattr(socket, "gethostname", lambda: "gpu-node-17")
    home, host = os.path.expanduser("~"), socket.gethostname()
    here = tmp_path / "checkout-a"
    here.mkdir()
    monkeypatch.chdir(here)         # a message naming the working directory

    def verify(config):
        if config == FAR:
            raise RuntimeError(f"out of resources: see {home}/.triton/cache/x.json, {here}/kernel.py on {host}")
        return None

    source = tmp_path / "checkout-a" / "tuning" / "h100"
    first = _tune(Machine(5), TuneCache(resolve_cache_dir("tuning/h100", base=here)), verify)
    (entry,) = source.glob("*.json")
    text = entry.read_text()
    for particular in (str(tmp_path), home, host):
        assert particular not in text, particular
    assert "see ~/.triton/cache/x.json, <cwd>/kernel.py on <host>" in text
    assert json.loads(text)["tie"]["rule"] == RULE_PAIRED

    elsewhere = tmp_path / "checkout-b" / "tuning" / "h100"
    shutil.copytree(source, elsewhere)
    machine_b = Machine(6)
    again = tune(list(TRUE_US), lambda c: pytest.fail("a shared cache measures nothing"), verify,
                 TuneCache(resolve_cache_dir("tuning/h100", base=tmp_path / "checkout-b")), _key(),
                 remeasure=machine_b.remeasure)
    assert again.from_cache and again.config == first.config and machine_b.remeasured == []
    assert again.as_tags() == first.as_tags()


def test_cache_keys_of_real_kernels_name_no_path():
    from dataclasses import asdict

    from harness.tune.search import cache_key, candidates
    from kernels.tuning import DeviceTraits
    from kernels import KERNELS
    from tests.tune.test_search import L03

    traits = DeviceTraits("NVIDIA H100 80GB HBM3", 132, True)
    key = cache_key(KERNELS["igemm_fast"], L03, traits, "identity", candidates("igemm_fast", L03, traits))
    text = json.dumps(asdict(key), default=list)
    repo = str(Path(__file__).resolve().parents[2])
    assert repo not in text and os.path.expanduser("~") not in text and socket.gethostname() not in text


def test_resolve_cache_dir(tmp_path):
    assert resolve_cache_dir(None) is None
    assert resolve_cache_dir("tuning/h100", base=tmp_path) == str(tmp_path / "tuning" / "h100")
    assert resolve_cache_dir(str(tmp_path / "abs"), base="/elsewhere") == str(tmp_path / "abs")
    assert resolve_cache_dir("~/t") == os.path.join(os.path.expanduser("~"), "t")


# -----------------------------------------------------------
# Real launches (interpreter) and the GPU wiring

def test_tune_kernel_remeasures_the_finalists_with_real_launches(tmp_path):
    """tune_kernel binds the finalists again, on the job's operands and on copies at other
    addresses (one dict of launches per placement), once for all passes, and hands them to
    ``paired_time_fn``; the tied pair is broken by the preference order, not by which timed
    fastest."""
    from harness.measure.correctness import make_operands
    from harness.tune.search import tune_kernel
    from kernels import KERNELS
    from kernels.base import SwizzleBinding
    from kernels.problem import ConvShape
    from swizzles import SWIZZLES

    kernel = KERNELS["igemm_fast"]
    shape = ConvShape("t", N=1, C=5, H=6, W=5, F=10, R=3, S=3, stride=1, padding=1)
    small = {**BASE, "BLOCK_M": 16, "BLOCK_N": 16, "BLOCK_K": 16}
    tap, packed, split = (Config.make(small, 4, 3), Config.make({**small, "PACK_K": 1}, 4, 3),
                          Config.make({**small, "SPLIT_K": 2}, 4, 3))
    single = iter([1.004, 1.000, 2.0])
    seen: list[list[dict]] = []

    def paired_time_fn(placements):
        for arms in placements:
            for run in arms.values():
                run()                        # real launches of the re-bound finalists
        seen.append(placements)
        rounds = {name: np.full(6, 1.0) * (1.0 if name == "finalist0" else 1.003) for name in placements[0]}
        return Remeasured(rounds, [0, 0, 0, 1, 1, 1])

    ops = make_operands(shape, False, seed=0, device="cpu")
    result = tune_kernel(kernel, shape, ops, SwizzleBinding(SWIZZLES["identity"], 1, 8), lambda run: next(single),
                         configs=[tap, packed, split], cache=TuneCache(tmp_path), paired_time_fn=paired_time_fn,
                         rule=TieRule(rounds=6, placements=2, min_finalists=2, max_rounds=6, tolerance=ONE_PCT))
    ((first, second),) = seen                                          # one pass, two placements
    assert sorted(first) == sorted(second) == ["finalist0", "finalist1"]   # split-K, 2x slower, is no finalist
    assert first["finalist0"] is not second["finalist0"]
    assert result.config == tap and result.near_tie                  # packed timed fastest; tap is simpler
    assert [f.config for f in result.tie.finalists] == [packed, tap]
    assert (result.tie.rounds, result.tie.placements, result.tie.passes) == (6, 2, 1)

    # three finalists (min_finalists=3 takes split-K in, 2x behind); each pass gets the same launches
    seen.clear()
    single = iter([1.004, 1.000, 2.0])
    again = tune_kernel(kernel, shape, ops, SwizzleBinding(SWIZZLES["identity"], 1, 8), lambda run: next(single),
                        configs=[tap, packed, split], cache=None, paired_time_fn=lambda p: _noisy_pass(p, seen),
                        rule=TieRule(rounds=6, placements=3, min_finalists=3, max_rounds=18, tolerance=ONE_PCT))
    assert len(again.tie.finalists) == 3 and again.tie.passes == len(seen) >= 2
    assert all([list(p) for p in pass_] == [list(p) for p in seen[0]] for pass_ in seen)
    assert all(a[name] is b[name] for pass_ in seen for a, b in zip(pass_, seen[0]) for name in a)


def _noisy_pass(placements, seen):
    """A pass whose CIs stay wide (noise +-30 %): every pass is asked for, up to the cap."""
    seen.append(placements)
    noise = np.array([0.7, 1.3, 1.0, 1.3, 0.7, 1.0])
    return {name: np.roll(noise, i) * (1.0 + 0.001 * i) for i, name in enumerate(placements[0])}


def test_gpu_finalist_timer_runs_fixed_paired_rounds_in_small_batches_over_the_placements(monkeypatch):
    """On a GPU the finalists are re-timed by time_interleaved itself: one arm each,
    ``tune.final_rounds`` rounds (no stopping rule) in batches of at most 5 rounds that take
    the placements in turn, the round medians, placements and drained batches returned; each
    pass draws other orders (seed)."""
    from harness.hardware.device import GPU, INTERPRETER, DeviceInfo
    from harness.tune import per_job as job
    from harness.measure.timing import RoundSamples

    calls = []

    def standin(arms, settings, seed, tracked=None):
        calls.append((arms, settings, seed, tracked))
        rounds = settings.min_rounds
        names = list(arms[0])
        return RoundSamples({name: [[1.0 + i, 2.0 + i, 3.0 + i]] * rounds for i, name in enumerate(names)},
                            orders=[names] * rounds, drained_batches=1,
                            placements=[(r // settings.check_every) % len(arms) for r in range(rounds)])

    monkeypatch.setattr(job, "time_interleaved", standin)
    gpu = DeviceInfo(GPU, "NVIDIA H100 80GB HBM3", "nvidia", 132, 50 << 20)
    timer = job.finalist_timer(gpu, TuneOptions(mode="fastest", final_rounds=30))
    placements = [{"finalist0": lambda: None, "finalist1": lambda: None} for _ in range(6)]
    out = timer(placements)
    ((arms, settings, seed, tracked),) = calls
    assert arms == placements and tracked is None and seed == 0
    assert settings.min_rounds == settings.max_rounds == 30 and settings.check_every == 5   # 6 batches, 1 each
    assert isinstance(out, Remeasured) and list(out.times["finalist1"]) == [3.0] * 30   # each round's median launch
    assert out.placements == [r // 5 for r in range(30)] and out.drained == 1
    timer(placements[:1])
    assert calls[1][2] == 1 and calls[1][1].check_every == 5 and calls[1][1].min_rounds == 30   # the next pass
    assert job.finalist_timer(DeviceInfo(INTERPRETER, "cpu", None, None, None), TuneOptions()) is None
    assert job.finalist_timer(gpu, TuneOptions(), standin="tests.standins.config_timer:time_ms") is None


@pytest.mark.parametrize("rounds, placements, plan", [
    (30, 6, (5, 30)), (30, 1, (5, 30)), (30, 4, (5, 40)), (10, 6, (1, 12)), (12, 2, (5, 20)), (2, 8, (1, 8)),
    (90, 6, (5, 90)),
])
def test_final_round_plan(rounds, placements, plan):
    from harness.tune.per_job import final_round_plan

    per_batch, total = final_round_plan(rounds, placements)
    assert (per_batch, total) == plan
    assert total >= rounds and total % (per_batch * placements) == 0 and per_batch <= 5


def test_decision_round_trips_through_json():
    decision = decide({c: TRUE_US[c] for c in TRUE_US}, TieRule(tolerance=ONE_PCT), Machine(0).remeasure)
    back = TieDecision.from_dict(json.loads(json.dumps(decision.as_dict())), decision.config)
    assert back == decision
