"""The committed MI300X table of igemm_fast (kernels/tuned/igemm_fast_mi300x.json, written by
benchmarks/amd_table.py from gfx942 compile reports, not timed): every entry is a config of
the kernel's AMD space for its layer, its compile figures pass the rule's filters, and the
rule, re-run on the stored compile figures of every candidate
(benchmarks/results/amd_table/candidates.csv.xz), picks the same config; the rule itself on
made-up reports; and the main command's ``tune=table`` launches the entry's config."""
from __future__ import annotations

import functools
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import amd_table  # noqa: E402
from amd_table import Candidate, choose, config_from_label, read_candidates  # noqa: E402
from harness.job.plan import plan_job  # noqa: E402
from harness.tune.per_job import table_job  # noqa: E402
from harness.job.result import JobResult  # noqa: E402
from harness.job.spec import JobSpec  # noqa: E402
from kernels import KERNELS  # noqa: E402
from kernels.problem import ConvShape  # noqa: E402
from kernels.tuned import load_table, shape_key  # noqa: E402
from kernels.tuning import Config  # noqa: E402

TABLE = load_table("igemm_fast", "mi300x")
ENTRIES = sorted(TABLE.entries.items()) if TABLE else []


@functools.cache
def stored_candidates() -> dict[str, list[Candidate]]:
    return read_candidates(amd_table.CANDIDATES_CSV)


def shape_of(entry: dict) -> ConvShape:
    s = entry["shape"]
    return ConvShape(s["name"], **{k: v for k, v in s.items() if k not in ("name", "dtype")}, dtype=s["dtype"])


def test_the_table_says_it_was_compiled_not_timed():
    assert TABLE is not None and len(TABLE.entries) >= 23     # ResNet-50's layers at least
    assert re.match(r"compiled for gfx942 with Triton \d+\.\d+", TABLE.how)
    assert "not timed on an MI300X" in TABLE.how.split(":")[0]   # the part the job's tag shows
    resnet = {k for k, e in ENTRIES if e["shape"]["name"].startswith("resnet/")}
    assert len(resnet) == 23


@pytest.mark.parametrize("key,entry", ENTRIES, ids=[k for k, _ in ENTRIES])
def test_each_entry_is_in_the_amd_space_and_is_the_rules_pick(key, entry):
    shape = shape_of(entry)
    assert shape_key(shape) == key
    chosen = Config.from_dict(entry["config"])
    assert chosen in KERNELS["igemm_fast"].tune_space(shape, amd_table.TRAITS)
    figures = entry["compile"]
    assert figures["spills"] == figures["scratch_bytes"] == 0 and figures["lds_bytes"] <= 65536
    cands = stored_candidates()[key]
    best, steps = choose(cands)
    assert best.config == chosen and steps == entry["rule"]
    assert {k: getattr(best, k) for k in figures} == figures


def test_the_csv_reads_back_its_configs():
    cfg = Config.make({"BLOCK_M": 128, "BLOCK_N": 64, "BLOCK_K": 32, "SPLIT_K": 2, "PACK_K": 0, "NCHW_IN": 0,
                       "PERSISTENT": 0, "TMA": 0, "TMA_STORE": 0, "FOLD": 0, "SPLIT_SUM": 1,
                       "MATRIX_INSTR_NONKDIM": 16}, 8, 2)
    assert config_from_label(cfg.label) == cfg


def _cand(bm=64, bn=64, bk=32, waves=4, lds=8192, spills=0, scratch=0, error="", **knobs) -> Candidate:
    tiles = {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "SPLIT_K": 1, "PACK_K": 0, "NCHW_IN": 0, "PERSISTENT": 0,
             "TMA": 0, "TMA_STORE": 0, "FOLD": 0, "SPLIT_SUM": 0, **knobs}
    return Candidate(Config.make(tiles, 4, 2), error=error, waves_per_simd=waves, lds_bytes=lds, spills=spills,
                     scratch_bytes=scratch)


def test_the_rule_in_its_order():
    small, big = _cand(waves=4), _cand(bm=128, bn=128, waves=2)
    assert choose([big, small])[0] is big                                     # 2 waves are enough: then tile area
    assert choose([_cand(bm=128, bn=128, waves=1), small])[0] is small       # below 2 waves: occupancy first
    assert choose([small, _cand(waves=8)])[0].waves_per_simd == 8             # same tile: more waves
    spilled = _cand(bm=256, bn=256, waves=8, spills=3)
    assert choose([spilled, small])[0] is small                               # no spills
    assert choose([_cand(bm=256, waves=8, scratch=64), small])[0] is small    # no scratch
    assert choose([_cand(bm=256, waves=8, lds=65537), small])[0] is small     # LDS within 64 KB
    assert choose([_cand(bm=256, waves=8, error="out of resource"), small])[0] is small
    knob = _cand(waves=4, WAVES_PER_EU=2)
    assert choose([knob, small])[0] is small                                  # no AMD knob at a tie
    deep = _cand(bk=64, waves=4)
    assert choose([small, deep])[0] is deep                                   # then the deeper BLOCK_K
    best, steps = choose([spilled, big, small, knob])
    assert best is big and steps == {"candidates": 4, "compiled": 4, "no_spills": 3, "eligible": 3,
                                     "enough_waves": 3, "largest_tile": 1}
    assert choose([spilled]) == (None, {"candidates": 1, "compiled": 1, "no_spills": 0, "eligible": 0})


def test_tune_table_launches_the_entry_on_mi300x():
    key, entry = next((k, e) for k, e in ENTRIES if e["shape"]["name"] == "resnet/l11")
    shape = shape_of(entry)
    flags = dict.fromkeys(("PACK_K", "NCHW_IN", "PERSISTENT", "TMA", "TMA_STORE", "FOLD", "SPLIT_SUM"), 0)
    tiles = tuple(KERNELS["igemm_fast"].tile_entries(
        {"BLOCK_M": 16, "BLOCK_N": 16, "BLOCK_K": 16, "SPLIT_K": 1, **flags}).items())
    spec = JobSpec(kernel="igemm_fast", tiles=tiles, swizzle="identity", num_xcds=8, group_size=8,
                   shape=shape, shape_preset="resnet", num_warps=4, num_stages=3, target="mi300x", seed=0)
    result = JobResult("t")
    launched = table_job(plan_job(spec), "gfx942", result).spec
    assert Config.make(launched.tiles_dict, launched.num_warps, launched.num_stages) == Config.from_dict(entry["config"])
    assert result.params["tune.table"] == "igemm_fast_mi300x.json"
    assert "not timed on an MI300X" in result.tags["tune"]
