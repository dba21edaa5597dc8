"""benchmarks/tune_repro.py: reading ``tune.runner_ups`` and classifying a layer tuned by two
runs as same / tied / not (issue 19's acceptance for tune mode), on hand-made picks and on a
small MLflow store."""
from __future__ import annotations

import pytest

from tests.benchmarks.scripts import load

repro = load("tune_repro.py")

FLAGS = "SPLIT_K1 PACK_K0 NCHW_IN0 PERSISTENT0 TMA1 TMA_STORE0 FOLD0 SPLIT_SUM0"
N64 = f"M64 N64 K64 {FLAGS} w4 s4"
N128 = f"M64 N128 K64 {FLAGS} w4 s4"
M128 = f"M128 N64 K64 {FLAGS} w4 s4"
SUM1 = f"M64 N256 K64 SPLIT_K2 PACK_K0 NCHW_IN0 PERSISTENT0 TMA1 TMA_STORE0 FOLD0 SPLIT_SUM1 w4 s4"


def pick(label: str, runner_ups: str) -> "repro.Pick":
    return repro.make_pick(label, repro.parse_runner_ups(runner_ups))


def test_parse_runner_ups_as_the_harness_logs_them():
    text = (f"{M128} +2.56 % [+1.64, +3.50]; {N128} -0.84 % [-1.60, -0.08] tied; "
            f"{SUM1} +1.49 % (single shot) tied; {N64} +inf % [+1.00, +inf]")
    got = repro.parse_runner_ups(text)
    assert [(f.label, f.gap, f.tied) for f in got] == [
        (M128, "+2.56 % [+1.64, +3.50]", False), (N128, "-0.84 % [-1.60, -0.08]", True),
        (SUM1, "+1.49 % (single shot)", True), (N64, "+inf % [+1.00, +inf]", False)]
    assert repro.parse_runner_ups("none") == repro.parse_runner_ups("not recorded") == repro.parse_runner_ups("") == []
    with pytest.raises(ValueError, match="cannot read runner-up"):
        repro.parse_runner_ups(f"{M128} about 2 % slower")


def test_finalists_from_the_artifact():
    doc = {"rule": "r", "rounds": 30, "finalists": [
        {"label": N64, "ratio": 1.0, "ci_lo": 1.0, "ci_hi": 1.0, "tied": True},
        {"label": N128, "ratio": 1.0164, "ci_lo": 1.0051, "ci_hi": 1.0278, "tied": False},
        {"label": M128, "ratio": 0.995, "ci_lo": None, "ci_hi": None, "tied": True}]}
    got = repro.finalists_from_artifact(doc, N64)
    assert [(f.label, f.gap, f.tied) for f in got] == [(N128, "+1.64 % [+0.51, +2.78]", False),
                                                       (M128, "-0.50 % (single shot)", True)]


@pytest.mark.parametrize("a, b, verdict, contested", [
    (pick(N64, f"{N128} +1.64 % [+0.51, +2.78]"), pick(N64, f"{M128} +3 % [+2, +4]"), "same", False),
    # l02: one run measured the other's pick tied, the other never had it as a finalist
    (pick(N64, f"{M128} +7.99 % [-6.23, +24.37] tied"), pick(M128, "none"), "tied", False),
    (pick(M128, "none"), pick(N64, f"{M128} +7.99 % [-6.23, +24.37] tied"), "tied", False),
    # both measured each other tied
    (pick(N64, f"{N128} +0.5 % [-1, +2] tied"), pick(N128, f"{N64} -0.5 % [-2, +1] tied"), "tied", False),
    # l17 (band 0.10): one run tied, the other measured the pair apart
    (pick(N64, f"{N128} +2.24 % [+1.43, +3.06]"), pick(N128, f"{N64} -0.84 % [-1.60, -0.08] tied"), "tied", True),
    # l22: each run had one finalist, a different one
    (pick(N128, "none"), pick(N64, "none"), "not", False),
    # l19: one run measured the other's pick not tied; the other never had it
    (pick(N64, "none"), pick(SUM1, f"{N64} +40.32 % [+14.15, +72.48]"), "not", False),
    (pick(N64, f"{N128} +3 % [+2, +4]"), pick(N128, f"{N64} +3 % [+2, +4]"), "not", False),
])
def test_classify(a, b, verdict, contested):
    got, why = repro.classify(a, b)
    assert got == verdict
    assert why.startswith("CONTESTED") == contested
    strict, _ = repro.classify(a, b, strict=True)
    assert strict == ("not" if contested else verdict)
    assert repro.classify(b, a)[0] == verdict                        # symmetric


def test_classify_says_how_each_run_measured_the_other_and_missing_layers():
    verdict, why = repro.classify(pick(N64, f"{M128} +7.99 % [-6.23, +24.37] tied"), pick(M128, "none"), ("A", "B"))
    assert (verdict, why) == ("tied", "A: B's pick +7.99 % [-6.23, +24.37] tied; B: A's pick no finalist")
    assert repro.classify(None, pick(N64, "none"), ("A", "B")) == ("missing", "no tuned job in A")
    assert repro.short_label(SUM1) == "M64 N256 K64 SPLIT_K2 TMA1 SPLIT_SUM1 w4 s4"


def test_a_store_with_two_sweeps(tmp_path, capsys):
    """Two sweeps of three layers (one layer logged twice in a sweep: the tuning and a cache
    hit), one layer missing from the second sweep; the counts come out per pair."""
    import mlflow

    from harness.storage.new_store import seed_new_store

    store = tmp_path / "tune.db"
    seed_new_store(f"sqlite:///{store}")   # as the harness starts a store: no migrations run here
    mlflow.set_tracking_uri(f"sqlite:///{store}")
    mlflow.set_experiment("tune")
    layers = [{"l01": (N64, "none"), "l02": (N64, f"{M128} +0.5 % [-1, +2] tied"), "l03": (N128, "none")},
              {"l01": (N64, "none"), "l02": (M128, "none")}]
    for sweep in layers:
        with mlflow.start_run(run_name="sweep"):
            mlflow.set_tag("swizzlebench.kind", "sweep")
            for name, (config, runner_ups) in sweep.items():
                for cached in ((False, True) if name == "l01" else (False,)):
                    with mlflow.start_run(run_name=f"igemm_fast/identity/resnet-{name}/w4", nested=True):
                        mlflow.set_tag("swizzlebench.kind", "job")
                        mlflow.log_params({"kernel": "igemm_fast", "swizzle": "identity", "shape.name": name,
                                           "tune.config": config, "tune.runner_ups": runner_ups,
                                           "tune.from_cache": str(cached), "tune.cost_s": "0.00" if cached else "2.50",
                                           "tune.trials": "7"})
    mlflow.set_tracking_uri("")
    sweeps = repro.load_sweeps([str(store)])
    assert [len(s.picks) for s in sweeps] == [3, 2] and sweeps[0].tune_s == 7.5
    assert repro.main([str(store)]) == 0
    out = capsys.readouterr().out
    assert "run 1 vs run 2: 1 same, 1 tied, 0 not, 1 missing of 3 layers; same or tied: 2 of 3" in out
    assert "| l03 | M64 N128 K64 TMA1 w4 s4 | - | missing | no tuned job in run 2 |" in out
