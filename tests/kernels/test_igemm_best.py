"""igemm_best (igemm_fast or igemm_ws per layer, by tile WS) on a CPU: the tiles, the dispatch of
every method to the member, the space (the union of the members' where igemm_ws runs), and the
committed tables (every preset layer; the family measured faster; rebuilt by
benchmarks/best_of_tables.py to the byte)."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from harness.measure.correctness import compare, make_operands, reference
from kernels import KERNELS
from kernels.base import LaunchConfig, SwizzleBinding
from kernels.problem import ConvShape
from kernels.tuned import load_table, shape_key
from kernels.tuning import Config, DeviceTraits
from swizzles import SWIZZLES
from tests.benchmarks.scripts import load
from tests.kernels.test_tuned import _preset_layers

KERNEL = KERNELS["igemm_best"]
FAST, WS = KERNELS["igemm_fast"], KERNELS["igemm_ws"]
FAST_TILES = {"BLOCK_M": 16, "BLOCK_N": 16, "BLOCK_K": 16, "SPLIT_K": 1, "PACK_K": 0, "NCHW_IN": 0, "PERSISTENT": 0,
              "TMA": 0, "TMA_STORE": 0, "FOLD": 0, "SPLIT_SUM": 0}
WS_TILES = {"BLOCK_M": 128, "BLOCK_N": 64, "BLOCK_K": 64, "SPLIT_K": 1, "PERSISTENT": 1, "TMA_STORE": 1, "MAXNREG": 80}
H100 = DeviceTraits("NVIDIA H100 80GB HBM3", 132, True, "nvidia", "sm_90")
MI300X = DeviceTraits.for_target("mi300x", "gfx942", 304)
L03 = ConvShape("l03", N=32, C=64, H=56, W=56, F=64, R=3, S=3, stride=1, padding=1)
L13 = ConvShape("l13", N=32, C=256, H=28, W=28, F=256, R=3, S=3, stride=2, padding=1)
ODD = ConvShape("odd3", N=2, C=20, H=6, W=6, F=20, R=3, S=3, stride=1, padding=1)


@pytest.fixture
def gluon_ok(monkeypatch):
    """igemm_ws's Triton check passed, as under Triton 3.6 (this machine may have another)."""
    monkeypatch.setattr("kernels.igemm_best.check_gluon_version", lambda: None)
    monkeypatch.setattr("kernels.igemm_ws.check_gluon_version", lambda version=None: None)


# -----------------------------------------------------------
# Tiles.

def test_tiles_are_ws_and_the_union_of_the_members():
    assert KERNEL.tile_names[0] == "WS"
    assert set(KERNEL.tile_names) == {"WS"} | set(FAST.tile_names) | set(WS.tile_names)
    fast = KERNEL.check_tiles({"WS": 0, **FAST_TILES})
    assert list(fast) == list(KERNEL.tile_names) and fast["MAXNREG"] == 0 and fast["BOX_W"] == 0
    ws = KERNEL.check_tiles({"WS": 1, **WS_TILES})
    assert ws["MAXNREG"] == 80 and all(ws[t] == 0 for t in ("PACK_K", "NCHW_IN", "TMA", "FOLD", "SPLIT_SUM"))


@pytest.mark.parametrize("tiles, message", [
    ({**FAST_TILES}, r"tile WS=None must be 0 \(igemm_fast\) or 1 \(igemm_ws\)"),
    ({"WS": 2, **FAST_TILES}, r"tile WS=2 must be 0"),
    ({"WS": 0, **FAST_TILES, "MAXNREG": 80}, r"WS=0 runs igemm_fast, which has no tiles MAXNREG=80; leave them out"),
    ({"WS": 1, **WS_TILES, "PACK_K": 1}, r"WS=1 runs igemm_ws, which has no tiles PACK_K=1"),
    ({"WS": 1, **WS_TILES, "BLOCK_K": 16}, r"\(WS=1: igemm_ws's tiles\): kernel 'igemm_ws': tile BLOCK_K=16 must be 32 or 64"),
    ({"WS": 0, **{k: v for k, v in FAST_TILES.items() if k != "PACK_K"}}, r"igemm_fast's tiles.*missing \['PACK_K'\]"),
    ({"WS": 0, **FAST_TILES, "NOPE": 1}, r"unknown tiles \['NOPE'\]"),
])
def test_bad_tiles_are_named(tiles, message):
    with pytest.raises(ValueError, match=message):
        KERNEL.check_tiles(tiles)


# -----------------------------------------------------------
# Every method runs the member that WS names.

def test_grid_kernel_and_address_model_are_the_members():
    for ws, member, tiles in ((0, FAST, {**FAST_TILES, "BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 64}),
                              (1, WS, WS_TILES)):
        best = {"WS": ws, **tiles}
        assert KERNEL.tile_grid(L03, best) == member.tile_grid(L03, tiles)
        assert KERNEL.jit_kernel_for(best) is member.jit_kernel
        ours, theirs = KERNEL.launch_plans(L03, best), member.launch_plans(L03, tiles)
        assert [p.name for p in ours] == [p.name for p in theirs]
        for tile in (0, 7):
            for a, b in zip(KERNEL.access_steps(L03, best, tile), member.access_steps(L03, tiles, tile)):
                np.testing.assert_array_equal(a, b)


def test_the_layout_methods_without_tiles_agree_between_the_members():
    """empty_output and output_as_nchw take no tiles: both members' NHWC output."""
    for member in (FAST, WS):
        out = member.empty_output(L03, torch.device("meta"))
        mine = KERNEL.empty_output(L03, torch.device("meta"))
        assert (out.shape, out.stride(), out.dtype) == (mine.shape, mine.stride(), mine.dtype)
        assert member.output_as_nchw(out).shape == KERNEL.output_as_nchw(mine).shape == (32, 64, 56, 56)
    x = torch.empty(2, 24, 5, 5)
    assert KERNEL.input_view(x, {"WS": 0, **FAST_TILES, "NCHW_IN": 1}).is_contiguous()         # igemm_fast's NCHW_IN
    assert KERNEL.input_view(x, {"WS": 0, **FAST_TILES}).shape == (2, 5, 5, 24)                # NHWC
    assert KERNEL.input_view(x, {"WS": 1, **WS_TILES}).shape == (2, 5, 5, 24)


@pytest.mark.parametrize("swizzle", ["identity", "grouped"])
def test_ws0_runs_igemm_fast_under_the_interpreter(swizzle):
    ops = make_operands(ODD, False, seed=3, device="cpu")
    run, out = KERNEL.bind(ops, ODD, {"WS": 0, **FAST_TILES, "SPLIT_K": 2, "PERSISTENT": 1},
                           SwizzleBinding(SWIZZLES[swizzle], 8, 2), LaunchConfig(4, 3))
    run()
    assert compare(KERNEL.output_as_nchw(out), reference(ops, ODD), ODD.dtype).ok


def test_ws1_runs_igemm_ws_which_refuses_the_cpu():
    ops = make_operands(L03, False, seed=3, device="cpu")
    with pytest.raises(ValueError, match=r"^kernel 'igemm_ws' is a Gluon kernel for Hopper \(sm_90\); on the CPU"):
        KERNEL.bind(ops, L03, {"WS": 1, **WS_TILES}, SwizzleBinding(SWIZZLES["identity"], 8, 2), LaunchConfig(8, 4))


def test_check_target_is_the_members():
    with pytest.raises(ValueError, match=r"^kernel 'igemm_ws' is a Gluon kernel for Hopper \(sm_90\); on gfx942"):
        KERNEL.check_target(L03, {"WS": 1, **WS_TILES}, "amd", "gfx942")
    with pytest.raises(ValueError, match=r"^kernel 'igemm_fast': TMA=1 needs NVIDIA tensor descriptors"):
        KERNEL.check_target(L03, {"WS": 0, **FAST_TILES, "TMA": 1}, "amd", "gfx942")
    KERNEL.check_target(L03, {"WS": 0, **FAST_TILES}, "amd", "gfx942")


# -----------------------------------------------------------
# The space.

def _as(ws: int, space: list[Config]) -> list[Config]:
    return [Config.make({"WS": ws, **c.tiles_dict}, c.num_warps, c.num_stages) for c in space]


def test_space_is_the_union_where_igemm_ws_runs(gluon_ok):
    space = KERNEL.tune_space(L03, H100)
    assert space == _as(0, FAST.tune_space(L03, H100)) + _as(1, WS.tune_space(L03, H100))
    assert {c.tiles_dict["WS"] for c in space} == {0, 1}
    assert KERNEL.tune_space(L13, H100) == _as(0, FAST.tune_space(L13, H100)) + _as(1, WS.tune_space(L13, H100))
    stem = ConvShape("l01", N=32, C=3, H=224, W=224, F=64, R=7, S=7, stride=2, padding=3)
    assert KERNEL.tune_space(stem, H100) == _as(0, FAST.tune_space(stem, H100))     # C = 3: igemm_fast only
    for elsewhere in (MI300X, DeviceTraits.of("cpu"), DeviceTraits("NVIDIA B200", 148, True, "nvidia", "sm_100")):
        assert KERNEL.tune_space(L03, elsewhere) == _as(0, FAST.tune_space(L03, elsewhere)), elsewhere


def test_no_ws_candidates_under_another_triton():
    from kernels.igemm_ws import GLUON_VERSIONS
    import triton

    if tuple(int(v) for v in triton.__version__.split(".")[:2]) in GLUON_VERSIONS:
        pytest.skip("igemm_ws runs under this Triton")
    assert {c.tiles_dict["WS"] for c in KERNEL.tune_space(L03, H100)} == {0}


# -----------------------------------------------------------
# The committed tables.

def test_h100_table_has_every_preset_layer_on_the_family_measured_faster(gluon_ok):
    best, fast, ws = (load_table(k, "h100") for k in ("igemm_best", "igemm_fast", "igemm_ws"))
    layers = _preset_layers()
    missing = [s.name for s in layers if shape_key(s) not in best.entries]
    assert not missing, missing
    picked = set()
    for s in layers:
        entry = best.entries[shape_key(s)]
        cfg = Config.from_dict(entry["config"])
        space = map(KERNEL.canonical, KERNEL.tune_space(s, H100))
        assert KERNEL.canonical(cfg) in space, f"{s.name}: {cfg.label} is outside igemm_best's space"
        pick = cfg.tiles_dict["WS"]
        member_table = ws if pick else fast
        own = member_table.entries[shape_key(s)]["config"]
        assert entry["config"] == {**own, "tiles": {"WS": pick, **own["tiles"]}}, s.name
        measured = entry["measured"]
        faster = 1 if measured["igemm_ws"] is not None and measured["igemm_ws"] > measured["igemm_fast"] else 0
        assert pick == faster, (s.name, measured)
        assert (measured["igemm_ws"] is None) == (shape_key(s) not in ws.entries)
        fast_own = fast.entries[shape_key(s)]["config"]
        assert entry.get("fallback") == ({**fast_own, "tiles": {"WS": 0, **fast_own["tiles"]}} if pick else None)
        picked.add(pick)
    assert picked == {0, 1}
    assert "timed on different nodes" in best.how


def test_the_kernel_benchmark_launches_each_table_entry_not_its_fallback(gluon_ok):
    """``conv_speed.py --table`` times each layer's own entry: an igemm_ws entry that leaves
    out a tile with a default (SPLIT_ADD) is still in the layer's space, so the benchmark does
    not quietly time the igemm_fast fallback instead."""
    conv_speed = load("conv_speed.py")
    best = load_table("igemm_best", "h100")
    for s in _preset_layers():
        entry = best.entries[shape_key(s)]
        got = conv_speed.space_for(s, KERNEL.tune_space(s, H100), best, [], KERNEL.canonical)
        assert got == [Config.from_dict(entry["config"])], s.name


def test_an_igemm_ws_entry_falls_back_to_igemm_fast_s_where_refused():
    """E.g. on an H100 under a Triton whose Gluon API igemm_ws was not written for: the layer
    runs igemm_fast's own entry, not a failing launch (harness.tune.per_job.table_job's accept)."""
    table = load_table("igemm_best", "h100")
    key = next(k for k, e in table.entries.items() if e["config"]["tiles"]["WS"] == 1)
    dims = {d: v for d, v in table.entries[key]["shape"].items() if d != "name"}
    shape = ConvShape(table.entries[key]["shape"]["name"], **dims)
    assert table.lookup(shape).config.tiles_dict["WS"] == 1
    refused = table.lookup(shape, accept=lambda cfg: cfg.tiles_dict["WS"] == 0)
    assert refused.exact and refused.source.endswith("its fallback config")
    assert refused.config == Config.from_dict(table.entries[key]["fallback"])
    fast = load_table("igemm_fast", "h100").lookup(shape).config
    assert refused.config.tiles_dict == {"WS": 0, **fast.tiles_dict}


@pytest.mark.parametrize("target, arch", [("h100", "sm_90"), ("h200", "sm_90"), ("mi300x", "gfx942")])
def test_off_the_target_the_simulated_l2_is_for_the_config_the_target_launches(monkeypatch, target, arch):
    """table_job off the target's GPU: every preset layer whose entry this Triton cannot build
    (every igemm_ws entry under 3.9) launches its fallback here and carries the entry's own
    config for the simulated L2; every other layer (all of the MI300X's) carries none."""
    import triton

    from harness.job.plan import plan_job
    from harness.job.result import JobResult
    from harness.job.spec import JobSpec
    from harness.tune.per_job import TABLE_FALLBACK, table_job

    monkeypatch.setattr(triton, "__version__", "3.9.0")
    table = load_table("igemm_best", target) or load_table("igemm_best", TABLE_FALLBACK[target])
    predicted = 0
    for s in _preset_layers():
        if shape_key(s) not in table.entries:   # no MI300X run tuned the kinds layers (compiled-only target)
            assert target == "mi300x" and s.name.startswith("kinds/"), s.name
            continue
        own = Config.from_dict(table.entries[shape_key(s)]["config"])
        spec = JobSpec(kernel="igemm_best", tiles=tuple(KERNEL.check_tiles({"WS": 0, **FAST_TILES}).items()),
                       swizzle="identity", num_xcds=1, group_size=8, shape=s, shape_preset="p", num_warps=4,
                       num_stages=3, target=target, seed=0)
        result = JobResult("t")
        launched = table_job(plan_job(spec), arch, result, off_target=True)
        assert launched.candidate.tiles["WS"] == 0, s.name
        if own.tiles_dict["WS"] == 1:
            predicted += 1
            assert KERNEL.check_tiles(result.target_launch.tiles_dict) == KERNEL.check_tiles(
                own.tiles_dict), s.name
            assert result.params["sim.config"] == own.label and result.params["sim.family"] == "igemm_ws"
        else:
            assert result.target_launch is None and "sim.config" not in result.params, s.name
        on_gpu = JobResult("t")
        table_job(plan_job(spec), arch, on_gpu)   # on the target's GPU: what runs is what is predicted
        assert on_gpu.target_launch is None
    assert (predicted > 0) == (arch == "sm_90")


def test_h100_table_is_what_the_script_builds_from_the_measurements():
    script = load("best_of_tables.py")
    runs = script.load_runs()
    h200, h200_ratio = script.build_h200(script.load_runs(script.H200_ROWS), runs)
    fast, ws = (script._borrowed(f, h200[f]) for f in ("igemm_fast", "igemm_ws"))
    built, committed = script.build_h100(runs, fast, ws, h200_ratio), load_table("igemm_best", "h100")
    assert built.entries == committed.entries and built.how == committed.how
    assert script.build_mi300x().entries == load_table("igemm_best", "mi300x").entries
    # each family's figure is the newest run's that timed the committed config: igemm_fast's l03
    # (also in the calibrate preset) from the full tune, igemm_ws's from its newest re-tune;
    # igemm_fast's l23 from the table run only; unseen/vgg42 from the full tune, as the table run
    # timed an older config of it
    def row(run: str, name: str) -> dict:
        (found,) = [r for r in runs[run]["rows"] if r["shape"] == name]
        return found

    def newest_ws_run(name: str) -> str:
        return next(run for run in script.WS_RUNS if any(r["shape"] == name for r in runs[run]["rows"]))

    def measured(name: str) -> dict:
        return committed.entries[shape_key(next(s for s in _preset_layers() if s.name == name))]["measured"]

    assert measured("resnet/l03") == {"igemm_fast": row("other_presets_full_tune", "calibrate/l03")["ratio"],
                                      "igemm_ws": row(newest_ws_run("resnet/l03"), "resnet/l03")["ratio"]}
    assert measured("resnet/l23")["igemm_fast"] == row("resnet_and_unseen_table_run", "resnet/l23")["ratio"]
    older = row("resnet_and_unseen_table_run", "unseen/vgg42")
    now = load_table("igemm_fast", "h100").entries[script.row_key(older["dims"], "float16")]["config"]
    assert ((FAST.check_tiles(older["config"]["tiles"]), older["config"]["num_warps"], older["config"]["num_stages"])
            != (FAST.check_tiles(now["tiles"]), now["num_warps"], now["num_stages"]))
    assert measured("unseen/vgg42")["igemm_fast"] == row("other_presets_full_tune", "unseen/vgg42")["ratio"]


def test_the_script_refuses_a_run_the_rows_file_lacks():
    script = load("best_of_tables.py")
    runs = script.load_runs()
    with pytest.raises(SystemExit, match=r"igemm_ws: runs \['no_such_run'\] are not in the rows file"):
        script.measured_ratio("igemm_ws", load_table("igemm_ws", "h100"), runs, ("no_such_run",) + script.WS_RUNS)


def test_mi300x_table_is_igemm_fast_s_and_compiles_on_gfx942_only_ws0():
    best, fast = load_table("igemm_best", "mi300x"), load_table("igemm_fast", "mi300x")
    assert best.entries.keys() == fast.entries.keys()
    for key, entry in best.entries.items():
        tiles = entry["config"]["tiles"]
        assert tiles["WS"] == 0 and {k: v for k, v in tiles.items() if k != "WS"} == fast.entries[key]["config"]["tiles"]
    def runs_there(s: ConvShape, cfg: Config) -> bool:
        try:
            KERNEL.check_target(s, KERNEL.check_tiles(cfg.tiles_dict), "amd", "gfx942")
            return True
        except ValueError:
            return False

    for s in _preset_layers():
        choice = best.lookup(s, lambda cfg: runs_there(s, cfg))   # as harness.tune.per_job looks up
        assert choice is not None and runs_there(s, choice.config), s.name
        if shape_key(s) in best.entries:
            assert choice.config in KERNEL.tune_space(s, MI300X), s.name
        else:   # a kinds layer: no MI300X was lent to tune it; the nearest entry that runs there, named
            assert s.name.startswith("kinds/") and not choice.exact and choice.source, (s.name, choice.source)


def test_under_another_triton_an_h100_job_runs_the_igemm_fast_fallback(tmp_path):
    """The real CLI on the CPU, compiled for the H100: l03's entry is igemm_ws's, which this
    Triton cannot build, so the job launches the entry's fallback (igemm_fast's config), compiles
    it for sm_90, and its tune tag says why."""
    from mlflow.tracking import MlflowClient

    from kernels.igemm_ws import check_gluon_version
    from tests.profilers.test_profiler_pipeline import _jobs
    from tests.test_cli import _harness

    try:
        check_gluon_version()
        pytest.skip("igemm_ws runs under this Triton: no fallback")
    except ValueError as exc:
        reason = str(exc)
    uri = f"sqlite:///{tmp_path}/store.db"
    proc = _harness(["-m", "kernel=igemm_best", "shape=resnet", "shape.select=[l03]", "target=h100", "profiler=none",
                     f"tracking.uri={uri}", "experiment=prof", f"hydra.sweep.dir={tmp_path}/multirun"], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (run,) = _jobs(MlflowClient(tracking_uri=uri))
    p, t = run.data.params, run.data.tags
    assert run.info.status == "FINISHED", t.get("status_reason")
    entry = load_table("igemm_best", "h100").entries[shape_key(L03)]
    assert p["tune.chosen"] == Config.from_dict(entry["fallback"]).label and p["tile.WS"] == "0"
    own = Config.from_dict(entry["config"]).label
    assert t["tune"].startswith("table igemm_best_h100.json: its own entry's fallback config (")
    assert t["tune"].endswith(f"; its own config {own} is refused here: {reason}")
    assert t["gate.compile"].startswith("sm_90: ")
