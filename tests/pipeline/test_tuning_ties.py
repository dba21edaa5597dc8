"""Tune mode's tie rule (harness.pipeline.tuning_ties), its records in the tune result and the
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
from harness.pipeline.tuning import TuneCache, TuneOptions, resolve_cache_dir, tune
from harness.pipeline.tuning_space import Config
from harness.pipeline.tuning_ties import (RULE_ARGMIN, RULE_LEGACY, RULE_PAIRED, RULE_SINGLE, TieDecision, TieRule,
                                          decide, preference_key, select_finalists)
from tests.pipeline.test_tuning import _key

BASE = {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "SPLIT_K": 1, "PACK_K": 0, "NCHW_IN": 0, "PERSISTENT": 0,
        "TMA": 0, "TMA_STORE": 0, "FOLD": 0, "SPLIT_SUM": 0}


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
        decision = decide(single, TieRule(), machine.remeasure)
        ruled[seed] = decision.config
        assert decision.rule == RULE_PAIRED and decision.rounds == 30 and decision.near_tie
        finalists = {f.config: f for f in decision.finalists}
        assert FAR not in finalists and machine.remeasured == [list(finalists)]   # outside the 3 % band
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
    decision = decide(single, TieRule(band=0.05), lambda finals: {f: rounds[f] for f in finals})
    tied = {f.config for f in decision.finalists if f.tied}
    assert tied == {a, b, c}
    assert decision.config == a                                       # the simplest of the tied set
    gaps = {f.config: f for f in decision.finalists}
    assert gaps[a].ratio == 1.0 and gaps[d].ratio == pytest.approx(1.05 / 1.025, rel=0.002)   # to the *chosen* one
    assert gaps[a].tied and not gaps[d].tied                         # d: 5 % behind the fastest, tight CI
    assert decision.runner_ups[0].config in (b, c)
    # tolerance 0: only the CI ties; a tight 0.8 % gap is then a difference
    strict = decide(single, TieRule(band=0.05, tolerance=0.0), lambda finals: {f: rounds[f] for f in finals})
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
    assert select_finalists(times, TieRule()) == [cfg(4, 2), cfg(4, 4), cfg(4, 3), cfg(8, 2)]   # equal times: simplest first
    assert select_finalists(times, TieRule(finalists=2)) == [cfg(4, 2), cfg(4, 4)]
    assert select_finalists(times, TieRule(band=0.0)) == [cfg(4, 2), cfg(4, 4)]


def test_without_remeasure_single_shot_times_decide_and_finalists_1_is_argmin():
    times = {cfg(8, 4): 1.000, cfg(4, 3): 1.005, cfg(4, 2): 1.02}
    single = decide(times, TieRule())
    assert (single.config, single.rule, single.near_tie) == (cfg(4, 3), RULE_SINGLE, True)
    assert single.runner_ups_text == ("M128 N128 K64 SPLIT_K1 PACK_K0 NCHW_IN0 PERSISTENT0 TMA0 TMA_STORE0 FOLD0 "
                                      "SPLIT_SUM0 w8 s4 -0.50 % (single shot) tied; M128 N128 K64 SPLIT_K1 PACK_K0 "
                                      "NCHW_IN0 PERSISTENT0 TMA0 TMA_STORE0 FOLD0 SPLIT_SUM0 w4 s2 +1.49 % (single shot)")
    argmin = decide(times, TieRule(finalists=1), lambda f: pytest.fail("argmin re-measures nothing"))
    assert (argmin.config, argmin.rule, argmin.near_tie, argmin.runner_ups_text) == (cfg(8, 4), RULE_ARGMIN, False, "none")


def test_a_failing_remeasurement_falls_back_to_single_shot_and_says_so():
    def broken(finals):
        raise RuntimeError("CUDA error: an illegal memory access\nmore")

    decision = decide({cfg(8, 4): 1.0, cfg(4, 3): 1.004}, TieRule(), broken)
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
                                             "tune.cache_dir=tuning/h100"])
        bad = compose("config", overrides=["tune=fastest", "tune.final_rounds=0"])
        off = compose("config")
    assert tune_options(on).tie_rule == TieRule(0.03, 6, 30, 0.01)
    assert tune_options(off).tie_rule == TieRule()                    # tune=none: the defaults, unused
    opts = tune_options(tuned)
    assert (opts.finalists, opts.tie_tolerance) == (3, 0.005)
    assert os.path.isabs(opts.cache_dir) and opts.cache_dir.endswith(os.path.join("", "tuning", "h100"))
    with pytest.raises(UserError, match=r"tune.final_rounds=0 is invalid"):
        tune_options(bad)


# -----------------------------------------------------------
# The tune result, the cache, and a cache shared between machines

def _tune(machine: Machine, cache: TuneCache, verify=None):
    return tune(list(TRUE_US), machine.measure, verify, cache, _key(), remeasure=machine.remeasure)


def test_result_logs_runner_ups_and_near_tie_and_the_cache_keeps_them(tmp_path):
    result = _tune(Machine(3), TuneCache(tmp_path))
    params, tags = result.as_params(), result.as_tags()
    assert result.config == PLAIN and tags == {"tune.near_tie": "true", "tune.rule": RULE_PAIRED}
    assert params["tune.config"] == PLAIN.label and params["tune.final_rounds"] == "30"
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

    from harness.pipeline.tuning import cache_key
    from harness.pipeline.tuning_space import DeviceTraits, candidates
    from kernels import KERNELS
    from tests.pipeline.test_tuning import L03

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
    """tune_kernel binds the finalists again and hands their runs to ``paired_time_fn``; the
    tied pair is broken by the preference order, not by which timed fastest."""
    from harness.pipeline.correctness import make_operands
    from harness.pipeline.tuning import tune_kernel
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
    seen = {}

    def paired_time_fn(arms):
        for name, run in arms.items():
            run()                        # real launches of the re-bound finalists
            seen[name] = run
        return {name: np.full(5, 1.0) * (1.0 if name == "finalist0" else 1.003) for name in arms}

    result = tune_kernel(kernel, shape, make_operands(shape, False, seed=0, device="cpu"),
                         SwizzleBinding(SWIZZLES["identity"], 1, 8), lambda run: next(single),
                         configs=[tap, packed, split], cache=TuneCache(tmp_path), paired_time_fn=paired_time_fn,
                         rule=TieRule(rounds=5))
    assert sorted(seen) == ["finalist0", "finalist1"]               # split-K, 2x slower, is no finalist
    assert result.config == tap and result.near_tie                  # packed timed fastest; tap is simpler
    assert [f.config for f in result.tie.finalists] == [packed, tap]


def test_gpu_finalist_timer_runs_fixed_paired_rounds(monkeypatch):
    """On a GPU the finalists are re-timed by time_interleaved itself: one arm each,
    ``tune.final_rounds`` rounds exactly (no stopping rule), the round medians returned."""
    from harness.hardware.device import GPU, INTERPRETER, DeviceInfo
    from harness.pipeline import job_tuning as job
    from harness.pipeline.timing import RoundSamples

    calls = []

    def standin(arms, settings, seed, tracked=None):
        calls.append((list(arms), settings, tracked))
        rounds = settings.min_rounds
        return RoundSamples({name: [[1.0 + i, 2.0 + i, 3.0 + i]] * rounds for i, name in enumerate(arms)},
                            orders=[list(arms)] * rounds)

    monkeypatch.setattr(job, "time_interleaved", standin)
    gpu = DeviceInfo(GPU, "NVIDIA H100 80GB HBM3", "nvidia", 132, 50 << 20)
    timer = job.finalist_timer(gpu, TuneOptions(mode="fastest", final_rounds=12))
    out = timer({"finalist0": lambda: None, "finalist1": lambda: None})
    ((arms, settings, tracked),) = calls
    assert arms == ["finalist0", "finalist1"] and tracked is None
    assert settings.min_rounds == settings.max_rounds == settings.check_every == 12
    assert list(out["finalist1"]) == [3.0] * 12                         # each round's median launch
    assert job.finalist_timer(DeviceInfo(INTERPRETER, "cpu", None, None, None), TuneOptions()) is None
    assert job.finalist_timer(gpu, TuneOptions(), standin="tests.standins.config_timer:time_ms") is None


def test_decision_round_trips_through_json():
    decision = decide({c: TRUE_US[c] for c in TRUE_US}, TieRule(), Machine(0).remeasure)
    back = TieDecision.from_dict(json.loads(json.dumps(decision.as_dict())), decision.config)
    assert back == decision
