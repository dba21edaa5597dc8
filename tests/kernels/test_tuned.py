"""The committed tuning tables (kernels.tuned): lookups, the nearest-entry rule, and the tables
the main command launches from (every layer of every shipped preset has its own entry)."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch
import yaml

from kernels import KERNELS
from kernels.problem import ConvShape
from kernels.tuned import HERE, HOW_MAX_CHARS, TunedTable, load_table, shape_key
from kernels.tuning import Config, DeviceTraits

ROOT = Path(__file__).resolve().parents[2]
L03 = ConvShape("l03", N=32, C=64, H=56, W=56, F=64, R=3, S=3, stride=1, padding=1)
L11 = ConvShape("l11", N=32, C=128, H=28, W=28, F=128, R=3, S=3, stride=1, padding=1)
L02 = ConvShape("l02", N=32, C=64, H=56, W=56, F=64, R=1, S=1)
A = Config.make({"BLOCK_M": 128, "BLOCK_N": 64, "BLOCK_K": 64}, 4, 3)
B = Config.make({"BLOCK_M": 64, "BLOCK_N": 128, "BLOCK_K": 64}, 4, 4)


def _table(*pairs) -> TunedTable:
    table = TunedTable("test", {})
    for shape, cfg in pairs:
        table.entries[shape_key(shape)] = table.entry(shape, cfg)
    return table


def test_own_entry_then_nearest_of_the_same_kind():
    table = _table((L03, A), (L02, B))
    own = table.lookup(L03)
    assert own.exact and own.config == A and "l03" in own.source
    bigger = ConvShape("x", N=64, C=64, H=56, W=56, F=64, R=3, S=3, stride=1, padding=1)
    near = table.lookup(bigger)
    assert not near.exact and near.config == A      # a 3x3 s1 layer: the 3x3 entry, never the 1x1 one


def test_a_layer_of_no_kind_in_the_table_takes_the_nearest_kind_and_says_so():
    table = _table((L03, A), (L02, B))
    stride2 = ConvShape("s2", N=32, C=64, H=56, W=56, F=64, R=3, S=3, stride=2, padding=1)
    s2 = table.lookup(stride2)
    assert s2.config == A and "nearest kind" in s2.source       # 3x3 stride 2: the 3x3 entry
    one_by_seven = table.lookup(ConvShape("i17", N=32, C=64, H=17, W=17, F=64, R=1, S=7))
    assert one_by_seven.config == B and "nearest kind" in one_by_seven.source   # 1x7: nearer 1x1 than 3x3
    assert table.lookup(stride2, accept=lambda cfg: cfg != A).config == B   # the next kind where refused


def test_nearest_is_closest_in_log_dims_and_accepted():
    table = _table((L03, A), (L11, B))
    wide = ConvShape("w", N=32, C=128, H=28, W=28, F=160, R=3, S=3, stride=1, padding=1)
    assert table.lookup(wide).config == B
    assert table.lookup(wide, accept=lambda cfg: cfg != B).config == A   # a refused config is skipped


def test_save_and_load_round_trip(tmp_path):
    table = _table((L03, A))
    table.how = "made by a test"
    table.save(tmp_path / "t.json")
    again = TunedTable.load(tmp_path / "t.json")
    assert again.entries == table.entries and again.how == "made by a test" and again.configs() == [A]


def test_save_refuses_a_how_that_is_a_log(tmp_path):
    """A table's ``how`` is a one-line summary: a writer that appends each run's command to it
    (as re-tuning once did) is stopped at save, with the limit named, and nothing is written."""
    table = _table((L03, A))
    for how in ("x" * (HOW_MAX_CHARS + 1), "timed on a GPU:\nsecond line"):
        table.how = how
        with pytest.raises(ValueError, match=f"t.json: its how must be one line of at most {HOW_MAX_CHARS}"):
            table.save(tmp_path / "t.json")
        assert not (tmp_path / "t.json").exists()
    table.how = "x" * HOW_MAX_CHARS
    table.save(tmp_path / "t.json")
    assert TunedTable.load(tmp_path / "t.json").how == table.how


def test_every_committed_table_says_how_in_one_short_line():
    """Every ``kernels/tuned/*.json`` (tables added later included): ``how`` is one line of at
    most HOW_MAX_CHARS characters with a head before its first ':' (what a job's tune tag
    quotes); the commands live in docs/benchmarks.md."""
    paths = sorted(HERE.glob("*.json"))
    assert paths
    for path in paths:
        how = TunedTable.load(path).how
        assert how and "\n" not in how and len(how) <= HOW_MAX_CHARS, (path.name, len(how), how[:300])
        assert ":" in how and how.split(":")[0].strip(), (path.name, how)


def _preset_layers() -> list[ConvShape]:
    out = []
    for path in sorted((ROOT / "conf" / "shape").glob("*.yaml")):
        preset = yaml.safe_load(path.read_text())
        for e in preset.get("shapes") or []:
            dims = {k: v for k, v in e.items() if k not in ("name", "layer", "dtype")}
            out.append(ConvShape(f"{path.stem}/{e['name']}", dtype=e.get("dtype", preset.get("dtype", "float16")),
                                 **dims))
    return out


@pytest.mark.parametrize("target", ["h100", "h200"])
def test_committed_table_covers_every_preset_layer_with_a_valid_config(target):
    table = load_table("igemm_fast", target)
    kernel = KERNELS["igemm_fast"]
    layers = _preset_layers()
    missing = [s.name for s in layers if shape_key(s) not in table.entries]
    assert not missing, f"layers of shipped presets without an entry in the {target} table: {missing}"
    hopper = DeviceTraits("NVIDIA H100 80GB HBM3", 132, True)
    for s in layers:
        cfg = table.lookup(s).config
        tiles = kernel.check_tiles(cfg.tiles_dict)
        kernel.check_flags(s, tiles, torch.device("meta"))
        kernel.check_target(s, tiles, "nvidia", "sm_90")
        assert cfg in kernel.tune_space(s, hopper), f"{s.name}: {cfg.label} is outside the kernel's space"
    assert table.how.startswith({"h100": "timed on an NVIDIA H100", "h200": "tuned on an NVIDIA H200"}[target])


@pytest.mark.parametrize("target", ["h100", "h200"])
def test_igemm_ws_table_covers_every_preset_layer_it_can_run(target):
    """kernel=igemm_ws with tune=table on an H100/H200 launches its own timed entry on every
    shipped layer the family runs (stride 1, C and F multiples of 8)."""
    table, kernel = load_table("igemm_ws", target), KERNELS["igemm_ws"]
    hopper = DeviceTraits("NVIDIA H100 80GB HBM3", 132, True)
    runnable = [s for s in _preset_layers() if kernel.tune_space(s, hopper)]
    assert len(runnable) >= 80
    missing = [s.name for s in runnable if shape_key(s) not in table.entries]
    assert not missing, f"layers igemm_ws runs without an entry in its {target} table: {missing}"
    for s in runnable:
        cfg = table.lookup(s).config
        kernel.check_tiles(cfg.tiles_dict)
        space = map(kernel.canonical, kernel.tune_space(s, hopper))
        assert kernel.canonical(cfg) in space, f"{s.name}: {cfg.label} is outside igemm_ws's space"


def test_the_h200_tables_are_the_h200s_own_where_it_tuned_and_say_where_it_did_not():
    """Every ResNet-50 layer of the H200's igemm_best table was timed on an H200 in both
    members; an entry the H200 did not tune names the GPU it was (``tuned_on``)."""
    best = load_table("igemm_best", "h200")
    assert best.device == "NVIDIA H200" and len(best.how) <= 200 and "\n" not in best.how
    keys = {shape_key(s) for s in _preset_layers() if s.name.startswith("resnet/")}
    resnet = [best.entries[k] for k in keys]
    assert len(resnet) == 23
    assert all(e["timed_on"]["igemm_fast"] == "H200" and "tuned_on" not in e for e in resnet)
    for e in best.entries.values():
        member = "igemm_ws" if e["config"]["tiles"]["WS"] else "igemm_fast"
        assert e.get("tuned_on", "H200") == e["timed_on"][member]
        other = e["measured"]["igemm_fast" if member == "igemm_ws" else "igemm_ws"]
        assert other is None or e["measured"][member] >= other   # the faster member, as measured


@pytest.mark.parametrize("target", ["h100", "h200"])
@pytest.mark.parametrize("dims", [dict(R=1, S=7, padding=0), dict(R=7, S=1, padding=0), dict(R=3, S=3, stride=3, padding=1),
                                  dict(R=5, S=5, padding=2), dict(R=3, S=3, padding=1, C=36, F=52),
                                  dict(R=1, S=3, padding=0, stride=2)])
def test_every_layer_kind_gets_a_tuned_entry_the_kernel_accepts(target, dims):
    """A layer of a kind no preset has (1xN, Nx1, odd strides, C or F not multiples of 8) takes
    the nearest kind's nearest entry the default kernel runs there, never the untuned default."""
    shape = ConvShape("kind", **{"N": 32, "C": 128, "H": 17, "W": 17, "F": 128, "stride": 1, **dims})
    kernel, table = KERNELS["igemm_best"], load_table("igemm_best", target)

    def runs(cfg: Config) -> bool:
        try:
            kernel.check_target(shape, kernel.check_tiles(cfg.tiles_dict), "nvidia", "sm_90")
            return True
        except ValueError:
            return False

    choice = table.lookup(shape, runs)
    assert choice is not None and runs(choice.config)
    same_kind = any((e["shape"]["R"], e["shape"]["S"], e["shape"]["stride"], e["shape"]["padding"] > 0)
                    == (shape.R, shape.S, shape.stride, shape.padding > 0) for e in table.entries.values())
    assert same_kind or "nearest kind" in choice.source


@pytest.mark.parametrize("family", ["igemm_fast", "igemm_ws", "igemm_best"])
def test_h100_layers_no_h100_tuned_take_the_h200s_entry_and_say_so(family):
    """Layers added after an H100 was last lent (the kinds preset) have no H100 timing: the H100
    table holds the H200's own entry for them, marked ``tuned_on: H200``, never an untimed guess."""
    h100, h200 = load_table(family, "h100"), load_table(family, "h200")
    kinds = [shape_key(s) for s in _preset_layers() if s.name.startswith("kinds/")]
    borrowed = {k: e for k, e in h100.entries.items() if e.get("tuned_on") == "H200"}
    assert borrowed and set(borrowed) <= set(h200.entries)
    assert set(borrowed) & set(kinds)
    for key, entry in borrowed.items():
        assert "tuned_on" not in h200.entries[key] and entry["config"] == h200.entries[key]["config"]
