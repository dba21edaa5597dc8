"""Every kind of config in igemm_fast's AMD candidate space compiles for gfx942 on this CPU
(the compile stage, harness/compile/build.py), on four representative ResNet-50 layers: a
3x3 (l11), a 1x1 (l16), a strided 3x3 (l13) and the 7x7 stride-2 stem (l01).

A sample, to stay under a minute on a fresh cache: the space's configs are grouped by code
path (K order, NCHW input, fold, split-K and how its partials are summed, persistent grid, AMD
knobs; :func:`code_path`) and the heaviest config of each group is compiled, the one with
the most output elements per wave and then the most LDS (tiles x BLOCK_K): the most likely to
run out of registers or LDS.  48 compiles.  The whole space of four layers is compiled by
tests/compile/test_build.py (a ``slow`` test, which .ci/run runs after the README's command);
every layer of the presets by benchmarks/amd_table.py."""
from __future__ import annotations

import pytest

from harness.compile.build import CompileFailed
from harness.job.spec import JobSpec
from kernels import KERNELS
from kernels.igemm_fast import AMD_OPTIONS
from kernels.problem import ConvShape
from kernels.tuning import Config, DeviceTraits

TRAITS = DeviceTraits.for_target("mi300x", "gfx942", 304)
LAYERS = [ConvShape("l11", 32, 128, 28, 28, 128, 3, 3, 1, 1), ConvShape("l16", 32, 1024, 14, 14, 256, 1, 1, 1, 0),
          ConvShape("l13", 32, 256, 28, 28, 256, 3, 3, 2, 1), ConvShape("l01", 32, 3, 224, 224, 64, 7, 7, 2, 3)]


def code_path(cfg: Config) -> tuple:
    """What decides which code a config compiles, tile sizes and warps aside."""
    t = cfg.tiles_dict
    return (t["PACK_K"], t["NCHW_IN"], t["FOLD"], t["SPLIT_K"] > 1, t["SPLIT_SUM"], t["PERSISTENT"],
            tuple(k for k in AMD_OPTIONS if t.get(k)))


def heaviest_per_path(space: list[Config]) -> list[Config]:
    """One config per :func:`code_path`: the most outputs per wave, then the most LDS."""
    def weight(cfg: Config) -> tuple:
        t = cfg.tiles_dict
        return (t["BLOCK_M"] * t["BLOCK_N"] / cfg.num_warps, (t["BLOCK_M"] + t["BLOCK_N"]) * t["BLOCK_K"])

    best: dict[tuple, Config] = {}
    for cfg in space:
        path = code_path(cfg)
        if path not in best or weight(cfg) > weight(best[path]):
            best[path] = cfg
    return list(best.values())


def test_the_sample_covers_every_code_path_of_each_layer():
    for shape in LAYERS:
        space = KERNELS["igemm_fast"].tune_space(shape, TRAITS)
        sample = heaviest_per_path(space)
        assert {code_path(c) for c in sample} == {code_path(c) for c in space}
        assert len(sample) < len(space)
    stem = heaviest_per_path(KERNELS["igemm_fast"].tune_space(LAYERS[3], TRAITS))
    assert {(c.tiles_dict["PACK_K"], c.tiles_dict["FOLD"]) for c in stem} == {(1, 0), (2, 0), (0, 1), (2, 1)}


@pytest.mark.parametrize("shape", LAYERS, ids=lambda s: s.name)
def test_every_code_path_of_the_gfx942_space_compiles(compiler, shape):
    failed = []
    for cfg in heaviest_per_path(KERNELS["igemm_fast"].tune_space(shape, TRAITS)):
        spec = JobSpec(kernel="igemm_fast", tiles=cfg.tiles, swizzle="identity", num_xcds=8, group_size=8,
                       shape=shape, shape_preset="test", num_warps=cfg.num_warps, num_stages=cfg.num_stages,
                       target="mi300x", seed=0)
        try:
            report = compiler.compile(spec, "gfx942")
        except CompileFailed as exc:
            failed.append((cfg.label, str(exc)))
            continue
        assert report.main.name == "igemm_fast_kernel" and report.main.registers
    assert failed == []
