"""The kernels a wrapped profiler (ncu, rocprofv3) is told to profile: the main jit kernel of
every arm.  Where the two arms of a best-vs-best request run different configs of
``igemm_best`` (WS=0: igemm_fast's kernel; WS=1: igemm_ws's), both names are in the filter,
and nothing else (the split-K sum pass, the fold) is."""
from __future__ import annotations

import dataclasses
import re
import shlex
from pathlib import Path

from harness.job.plan import plan_job
from harness.job.spec import JobSpec
from harness.profilers.ncu import NcuProfiler
from harness.profilers.worker import ProfileRequest
from kernels import KERNELS
from kernels.igemm_fast import split_k_sum_kernel
from kernels.problem import ConvShape

STANDINS = Path(__file__).parents[1] / "standins"
SHAPE = ConvShape("l17ish", N=2, C=64, H=8, W=8, F=64, R=3, S=3, stride=1, padding=1)


def _spec(tiles: dict) -> JobSpec:
    best = KERNELS["igemm_best"]
    full = {**{t: 0 for t in best.tile_names}, **tiles}
    return JobSpec(kernel="igemm_best", tiles=tuple(full.items()), swizzle="identity", num_xcds=1, group_size=4,
                   shape=SHAPE, shape_preset="test", num_warps=8, num_stages=4, target="h100", seed=0)


def test_both_members_of_a_best_vs_best_request_are_profiled(tmp_path):
    fast = _spec({"WS": 0, "BLOCK_M": 128, "BLOCK_N": 64, "BLOCK_K": 64, "SPLIT_K": 2, "SPLIT_SUM": 1})
    ws = _spec({"WS": 1, "BLOCK_M": 128, "BLOCK_N": 64, "BLOCK_K": 64, "SPLIT_K": 1, "TMA_STORE": 1})
    best_vs_best = dataclasses.replace(ws, baseline="colmajor").with_baseline_config(
        fast.tiles_dict, fast.num_warps, fast.num_stages)
    request = ProfileRequest(key="r0", plan=plan_job(best_vs_best), repeats=1, paired=True)
    # On this machine the worker cannot launch igemm_ws (a Gluon kernel for Hopper): the run
    # fails, after the command line, filter included, is written.
    outcome = NcuProfiler(str(STANDINS / "ncu")).profile([request], tmp_path)["r0"]
    assert outcome.reading is None and "igemm_ws" in outcome.error, outcome.error
    command = shlex.split((tmp_path / "command.txt").read_text())
    regex = command[command.index("-k") + 1].removeprefix("regex:")
    names = {"igemm_fast": KERNELS["igemm_fast"].jit_kernel.__name__, "igemm_ws": KERNELS["igemm_ws"].jit_kernel.__name__}
    assert names["igemm_fast"] != names["igemm_ws"]
    for name in names.values():
        assert re.fullmatch(regex, name), (regex, name)
    assert not re.fullmatch(regex, split_k_sum_kernel.__name__), regex
