"""Tune mode (harness.tune.search): candidate spaces, the cache and its key, and the rule that
only the chosen config is measured and profiled after tuning."""
import dataclasses

import pytest

from harness.measure.correctness import compare, make_operands, reference
from harness.tune.search import candidates
from kernels.tuning import Config, DeviceTraits
from harness.tune.search import (CacheKey, TuneCache, TuneError, kernel_source_hash,
                            tune, tune_kernel)
from harness.tune.ties import RULE_SINGLE
from kernels import KERNELS
from kernels.base import LaunchConfig, SwizzleBinding
from kernels.problem import ConvShape
from swizzles import SWIZZLES

HOPPER = DeviceTraits("NVIDIA H200", 132, True)
L19 = ConvShape("l19", N=32, C=512, H=14, W=14, F=512, R=3, S=3, stride=2, padding=1)
STEM = ConvShape("l01", N=32, C=3, H=224, W=224, F=64, R=7, S=7, stride=2, padding=3)
L03 = ConvShape("l03", N=32, C=64, H=56, W=56, F=64, R=3, S=3, stride=1, padding=1)


def _cfg(bm, warps=4):
    return Config.make({"BLOCK_M": bm, "BLOCK_N": 16, "BLOCK_K": 16}, warps, 3)


# -----------------------------------------------------------
# Candidate spaces

@pytest.mark.parametrize("shape", [L19, STEM, L03], ids=lambda s: s.name)
@pytest.mark.parametrize("kernel", ["igemm", "igemm_fast"])
def test_every_candidate_is_a_valid_config(kernel, shape):
    space = candidates(kernel, shape, HOPPER)
    assert space and len(space) == len(set(space))
    for cfg in space:
        KERNELS[kernel].check_tiles(cfg.tiles_dict)
        assert cfg.num_warps in (4, 8) and cfg.num_stages in (2, 3, 4, 5)
        tiles = cfg.tiles_dict      # every pipeline fits a Hopper block's shared memory
        if kernel == "igemm_fast":
            assert cfg.num_stages * (tiles["BLOCK_M"] + tiles["BLOCK_N"]) * tiles["BLOCK_K"] * 2 <= 227 * 1024


def test_space_follows_the_shape_and_the_device():
    def flags(shape, traits, key):
        return {c.tiles_dict[key] for c in candidates("igemm_fast", shape, traits)}

    unfolded = {c.tiles_dict["PACK_K"] for c in candidates("igemm_fast", STEM, HOPPER) if not c.tiles_dict["FOLD"]}
    assert unfolded == {1, 2}                          # C = 3: the tap order would be 95% zeros
    assert flags(STEM, HOPPER, "FOLD") == {0, 1}       # strided, few channels: fold them
    assert flags(L03, HOPPER, "FOLD") == flags(L19, HOPPER, "FOLD") == {0}   # stride 1; C = 512
    assert flags(STEM, HOPPER, "BLOCK_M") == {64, 128, 256}
    assert flags(L03, HOPPER, "PACK_K") == {0}
    assert flags(L19, HOPPER, "SPLIT_K") == {1, 2, 4}  # 13 x 4 tiles of 128 x 128 < 132 SMs
    assert flags(L03, HOPPER, "SPLIT_K") == {1}        # 784 tiles: no idle SMs to fill
    assert flags(L03, HOPPER, "TMA") == {0, 1}
    elsewhere = DeviceTraits("AMD Instinct MI300X", 304, False)
    assert flags(L03, elsewhere, "TMA") == {0}         # the Hopper path only where supported
    assert flags(L03, HOPPER, "TMA_STORE") == {0, 1} and flags(L03, elsewhere, "TMA_STORE") == {0}
    # a 1x1 layer over 64 channels has one K step of 64: one buffer in flight is all it can
    # use, so 2 stages only; 2 steps of 32 get 2 or 3; a long K keeps 3 and 4
    l02 = ConvShape("l02", N=32, C=64, H=56, W=56, F=64, R=1, S=1)

    def stages(shape, bk):
        return {c.num_stages for c in candidates("igemm_fast", shape, HOPPER) if c.tiles_dict["BLOCK_K"] == bk}

    assert stages(l02, 64) == {2} and stages(l02, 32) == {2, 3} and stages(L19, 64) == {3, 4, 5}
    # compute-bound layers (a 3x3 window over >= 128 channels) also try BLOCK_K 128, 256-row
    # tiles and a 5-deep pipeline; 1x1 and few-channel layers do not
    assert flags(L19, HOPPER, "BLOCK_K") == {64, 128} and 5 in stages(L19, 64)
    assert flags(L03, HOPPER, "BLOCK_K") == {32, 64} and stages(L03, 64) <= {3, 4}
    assert 128 not in flags(l02, HOPPER, "BLOCK_K") and 256 not in flags(l02, HOPPER, "BLOCK_M")
    assert 128 not in flags(L19, DeviceTraits("AMD Instinct MI300X", 304, False, "amd"), "BLOCK_K")   # 64 KB LDS
    assert not any(c.tiles_dict["TMA_STORE"] and c.tiles_dict["SPLIT_K"] > 1
                   for c in candidates("igemm_fast", L19, HOPPER))
    assert {c.tiles_dict["BLOCK_N"] for c in candidates("igemm_fast", L03, HOPPER)} == {64}  # F = 64


def test_kernel_without_space_keeps_its_config():
    cfg = _cfg(16)
    assert candidates("direct", L03, HOPPER, default=cfg) == [cfg]
    with pytest.raises(ValueError, match="no candidate space"):
        candidates("direct", L03, HOPPER)


# -----------------------------------------------------------
# The cache key

def _key(**change):
    fields = dict(kernel="igemm_fast", shape=L03, device="NVIDIA H200", triton_version="3.6.0",
                  kernel_source="abc", swizzle="identity", space=[_cfg(16), _cfg(32)])
    fields.update(change)
    return CacheKey.make(**fields)


def test_cache_key_covers_device_triton_source_problem_and_space():
    base = _key()
    assert _key().digest == base.digest
    assert _key(shape=dataclasses.replace(L03, name="renamed")).digest == base.digest  # names don't matter
    for change in [dict(device="NVIDIA H100 80GB HBM3"), dict(triton_version="3.5.1"), dict(kernel_source="abd"),
                   dict(shape=dataclasses.replace(L03, dtype="bfloat16")), dict(shape=dataclasses.replace(L03, N=16)),
                   dict(kernel="igemm"), dict(swizzle="grouped"), dict(space=[_cfg(16)])]:
        assert _key(**change).digest != base.digest, change


def test_kernel_source_hash_is_stable_and_per_kernel():
    fast = kernel_source_hash(KERNELS["igemm_fast"])
    assert fast == kernel_source_hash(KERNELS["igemm_fast"]) and len(fast) == 16
    assert fast != kernel_source_hash(KERNELS["igemm"])


def test_cache_round_trip_and_key_check(tmp_path):
    cache = TuneCache(tmp_path)
    key = _key()
    assert cache.get(key) is None
    cache.put(key, {"config": _cfg(32).as_dict(), "time_ms": 1.5, "trials": []})
    assert cache.get(key)["time_ms"] == 1.5
    assert cache.get(_key(device="other")) is None
    # A file whose stored key disagrees (a digest collision, a hand edit) is not trusted.
    path = next(tmp_path.glob("*.json"))
    path.write_text(path.read_text().replace('"NVIDIA H200"', '"NVIDIA H100"'))
    assert cache.get(key) is None


# -----------------------------------------------------------
# The tuner

class StandIn:
    """A timing callable that records what it was asked to time."""

    def __init__(self, times):
        self.times, self.seen = times, []

    def __call__(self, cfg):
        self.seen.append(cfg)
        return self.times[cfg.tiles_dict["BLOCK_M"]]


def test_fastest_verified_config_wins_and_is_the_one_used_after(tmp_path):
    configs = [_cfg(16), _cfg(32), _cfg(64), _cfg(128)]
    measure = StandIn({16: 3.0, 32: 1.0, 64: 2.0, 128: 0.5})
    wrong = lambda cfg: "output wrong" if cfg.tiles_dict["BLOCK_M"] == 128 else None  # noqa: E731
    result = tune(configs, measure, wrong, TuneCache(tmp_path), _key())
    # Each candidate that verified was timed once; the wrong one (fastest!) never.
    assert measure.seen == configs[:3]
    assert result.config == _cfg(32) and result.time_ms == 1.0 and not result.from_cache
    assert [t.error for t in result.trials] == [None, None, None, "output wrong"]
    # "Profile only the chosen config": after tuning, the job's measure and profiler get
    # result.config and nothing else; a second tune is a cache hit that runs nothing.
    profiled = StandIn({16: 3.0, 32: 1.0, 64: 2.0, 128: 0.5})
    profiled(result.config)
    assert profiled.seen == [_cfg(32)]
    again_measure = StandIn({})
    again = tune(configs, again_measure, wrong, TuneCache(tmp_path), _key())
    assert again.from_cache and again.config == result.config and again_measure.seen == []
    assert len(again.trials) == 4 and "cache" in again.summary
    assert again.as_params()["tune.config"] == "M32 N16 K16 w4 s3"


def test_a_config_that_raises_is_a_failed_trial():
    def measure(cfg):
        if cfg.num_warps == 8:
            raise RuntimeError("out of resources: shared memory\nmore")
        return 1.0

    result = tune([_cfg(16, 8), _cfg(32)], measure)
    assert result.config == _cfg(32)
    assert result.trials[0].error == "RuntimeError: out of resources: shared memory"


def test_no_verified_config_raises():
    with pytest.raises(TuneError, match="no verified config among 2 candidates"):
        tune([_cfg(16), _cfg(32)], lambda c: 1.0, lambda c: "output wrong")


def test_tune_kernel_with_real_launches(tmp_path):
    """Real binds under the interpreter: every candidate verified against conv2d, the
    stand-in timer sees each verified run once, the choice computes the right output."""
    kernel = KERNELS["igemm_fast"]
    shape = ConvShape("t", N=1, C=5, H=6, W=5, F=10, R=3, S=3, stride=1, padding=1)
    base = {"BLOCK_M": 16, "BLOCK_N": 16, "BLOCK_K": 16, "SPLIT_K": 1, "PACK_K": 0, "NCHW_IN": 0, "PERSISTENT": 0, "TMA": 0, "TMA_STORE": 0, "FOLD": 0, "SPLIT_SUM": 0}
    configs = [Config.make(base, 4, 3), Config.make({**base, "PACK_K": 1}, 4, 3),
               Config.make({**base, "SPLIT_K": 2, "PERSISTENT": 1}, 4, 3)]
    ops = make_operands(shape, False, seed=0, device="cpu")
    swizzle = SwizzleBinding(SWIZZLES["identity"], 1, 8)
    timed = []

    def time_fn(run):
        timed.append(run)
        return {1: 2.0, 2: 1.0, 3: 3.0}[len(timed)]

    result = tune_kernel(kernel, shape, ops, swizzle, time_fn, configs=configs, cache=TuneCache(tmp_path))
    assert len(timed) == 3 and result.config == configs[1]
    assert all(t.error is None for t in result.trials)
    run, out = kernel.bind(ops, shape, result.config.tiles_dict, swizzle, LaunchConfig(4, 3))
    run()
    assert compare(kernel.output_as_nchw(out), reference(ops, shape), shape.dtype).ok
    again = tune_kernel(kernel, shape, ops, swizzle, time_fn, configs=configs, cache=TuneCache(tmp_path))
    assert again.from_cache and len(timed) == 3


def test_tune_config_group_composes():
    from hydra import compose, initialize_config_module

    with initialize_config_module("swizzlebench_conf", version_base="1.3"):
        on = compose("config", overrides=["tune=fastest", "kernel=igemm_fast"])
        off = compose("config")
    assert on.tune.name == "fastest" and on.tune.rounds == 10 and on.tune.on_cpu is False
    assert off.tune.name == "table" and off.kernel.name == "igemm_best"   # the main command's defaults
    assert KERNELS[on.kernel.name].check_tiles(on.kernel.tiles)


# -----------------------------------------------------------
# Tune mode in the job pipeline, end to end on the CPU (tune.on_cpu: the interpreter's wall
# clock picks; what is tested is the plumbing, not a speed).

def test_tuned_job_profiles_only_the_chosen_config(tmp_path):
    """The real CLI with tune=fastest and the stand-in ncu: the run logs the chosen config,
    the profiler's dispatches are all that config (grid and block), none of the trials, and a
    second run takes the choice from the cache."""
    import csv
    import io

    from tests.measure.test_paired import _sweep
    from tests.profilers.test_profiler_pipeline import _expected_rate

    cache = tmp_path / "tunecache"
    args = ["kernel=igemm", "swizzle=grouped", "shape.select=[t1]", "tune=fastest", "tune.on_cpu=true", f"tune.cache_dir={cache}",
            "compare.baseline=null"]
    _, runs = _sweep(tmp_path, *args)
    (run,) = runs
    p, m, t = run.data.params, run.data.metrics, run.data.tags
    assert run.info.status == "FINISHED", t.get("status_reason")
    trials = int(p["tune.trials"])
    t1 = ConvShape("t1", N=1, C=5, H=6, W=5, F=10, R=3, S=3, stride=1, padding=1)
    assert trials == len(candidates("igemm", t1, DeviceTraits.of("cpu")))
    assert p["tune.from_cache"] == "False" and p["tune.configured"] == "M16 N16 K16 w8 s3"
    chosen = Config.make({k: int(p[f"tile.{k}"]) for k in ("BLOCK_M", "BLOCK_N", "BLOCK_K")},
                         int(p["num_warps"]), int(p["num_stages"]))
    assert p["tune.config"] == chosen.label and chosen.tiles_dict["BLOCK_M"] >= 64   # from the space, not the default
    # the tie rule's record: on the CPU no paired re-measurement, single-shot ties
    assert t["tune.rule"] == RULE_SINGLE and t["tune.near_tie"] in ("true", "false")
    assert p["tune.runner_ups"] and p["tune.final_rounds"] == "0"
    assert int(p["grid.num_pids"]) == KERNELS["igemm"].tile_grid(t1, chosen.tiles_dict).num_pids
    # what the profiler saw: only the chosen config (its grid and block), as many launches as asked
    text = next((tmp_path / "multirun").rglob("ncu.csv")).read_text()
    rows = list(csv.DictReader(io.StringIO(text[text.index('"ID"'):])))
    launches = {(r["Grid Size"], r["Block Size"]) for r in rows}
    assert len({r["ID"] for r in rows}) == 3                      # profiler.repeats=3, nothing else
    assert launches == {(f"({p['grid.num_pids']}, 1, 1)", f"({chosen.num_warps * 32}, 1, 1)")}
    assert m["l2_hit_rate"] == pytest.approx(_expected_rate(run)[2], abs=0.006)
    # again: the cache answers, nothing is re-tried
    _, again = _sweep(tmp_path, *args, "resume=false")
    second = [r for r in again if r.info.run_id != run.info.run_id]
    assert second and all(r.data.params["tune.from_cache"] == "True" and r.data.params["tune.config"] == chosen.label
                          and r.data.tags["tune.near_tie"] == t["tune.near_tie"] for r in second)


def test_table_mode_launches_the_committed_config_without_timing(tmp_path):
    """The main command's default (tune=table) through the real CLI on the CPU, compiled for
    the H100: each layer launches its entry of kernels/tuned/igemm_best_h100.json, the compile
    stage builds that config for sm_90, and nothing is tuned or timed."""
    from mlflow.tracking import MlflowClient

    from kernels.tuned import load_table
    from tests.profilers.test_profiler_pipeline import _jobs
    from tests.test_cli import _harness

    uri = f"sqlite:///{tmp_path}/store.db"      # the defaults: kernel=igemm_best tune=table
    proc = _harness(["-m", "swizzle=identity", "shape=tiny", "shape.select=[t1,t3]", "target=h100", "profiler=none",
                     f"tracking.uri={uri}", "experiment=prof", f"hydra.sweep.dir={tmp_path}/multirun"], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    client = MlflowClient(tracking_uri=uri)
    table = load_table("igemm_best", "h100")
    runs = {r.data.params["shape.name"]: r for r in _jobs(client)}
    assert set(runs) == {"t1", "t3"}
    for run in runs.values():
        p, t = run.data.params, run.data.tags
        assert run.info.status == "FINISHED", t.get("status_reason")
        shape = ConvShape(p["shape.name"], **{k: int(p[f"shape.{k}"]) for k in "NCHWFRS"},
                          stride=int(p["shape.stride"]), padding=int(p["shape.padding"]), dtype=p["shape.dtype"])
        chosen = table.lookup(shape).config
        assert p["tune.table"] == "igemm_best_h100.json" and p["tune.chosen"] == chosen.label
        assert int(p["num_warps"]) == chosen.num_warps and int(p["num_stages"]) == chosen.num_stages
        # the names show the config it ran: the job line's, and the store's (renamed at its end)
        assert run.data.tags["job"].endswith(f"/w{chosen.num_warps}") and f"·w{chosen.num_warps}·" in run.info.run_name
        assert t["tune"].startswith("table igemm_best_h100.json: its own entry") and "not timed here" in t["tune"]
        assert "sm_90" in t["gate.compile"] and "tune.trials" not in p
