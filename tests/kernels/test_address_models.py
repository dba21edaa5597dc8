"""The address models are exact: what each program of the real kernel loads, recorded
under the Triton interpreter, equals what the model says, step by step.

The chain of proof: recorded loads == ``access_steps`` (element addresses per step),
and ``access_model`` (distinct lines per step, the simulator's input) == the lines of
``access_steps``.  Shapes have stride and padding, partial tiles on every axis and
grids that are not multiples of 8; swizzles are not the identity, so the tile decode
is checked too.
"""
import numpy as np
import pytest

from harness.measure.correctness import make_operands
from kernels import KERNELS
from kernels.access import TENSOR_ALIGN, tensor_bases
from kernels.base import LaunchConfig, SwizzleBinding
from kernels.load_trace import record_loads
from kernels.problem import ConvShape
from swizzles import SWIZZLES
from swizzles.permutation import remap_table

# Loads a program issues before its loop (the patch kernel's bias); they belong to step 0.
# Every family then issues two loads per step: input, then weights.
PROLOGUE_LOADS = {"igemm": 0, "igemm_fast": 0, "direct": 0, "patch": 1}
LOADS_PER_STEP = 2

ODD = ConvShape("odd", N=2, C=5, H=7, W=8, F=10, R=3, S=2, stride=2, padding=1)   # P=4, Q=5
T1 = ConvShape("t1", N=1, C=5, H=7, W=6, F=10, R=3, S=3, stride=1, padding=1)
T2 = ConvShape("t2", N=2, C=4, H=9, W=9, F=6, R=3, S=3, stride=2, padding=0)
T3 = ConvShape("t3", N=1, C=6, H=5, W=5, F=9, R=1, S=1, stride=1, padding=0)
SMALL = ConvShape("small", N=1, C=3, H=5, W=6, F=3, R=3, S=2, stride=2, padding=1)  # P=3, Q=4
ROW = ConvShape("row", N=1, C=3, H=4, W=5, F=3, R=1, S=1, stride=1, padding=0)

# (kernel, shape, tiles, swizzle, num_xcds, group_size)
CASES = [
    ("igemm", ODD, {"BLOCK_M": 16, "BLOCK_N": 8, "BLOCK_K": 4}, "xcd_grouped", 8, 2),
    ("igemm", T1, {"BLOCK_M": 16, "BLOCK_N": 16, "BLOCK_K": 16}, "xcd", 8, 8),
    ("igemm", T3, {"BLOCK_M": 8, "BLOCK_N": 4, "BLOCK_K": 4}, "grouped", 8, 3),
    ("igemm_fast", ODD, {"BLOCK_M": 16, "BLOCK_N": 16, "BLOCK_K": 16, "SPLIT_K": 1, "PACK_K": 0, "NCHW_IN": 0, "PERSISTENT": 0,
                         "TMA": 0, "TMA_STORE": 0, "FOLD": 0, "SPLIT_SUM": 0}, "xcd_grouped", 8, 2),
    ("igemm_fast", T1, {"BLOCK_M": 16, "BLOCK_N": 16, "BLOCK_K": 16, "SPLIT_K": 1, "PACK_K": 1, "NCHW_IN": 0, "PERSISTENT": 0,
                        "TMA": 0, "TMA_STORE": 0, "FOLD": 0, "SPLIT_SUM": 0}, "grouped", 8, 3),
    ("igemm_fast", SMALL, {"BLOCK_M": 16, "BLOCK_N": 16, "BLOCK_K": 16, "SPLIT_K": 1, "PACK_K": 2, "NCHW_IN": 0,
                           "PERSISTENT": 0, "TMA": 0, "TMA_STORE": 0, "FOLD": 0, "SPLIT_SUM": 0}, "xcd", 8, 2),
    ("igemm_fast", ConvShape("nchw", N=3, C=20, H=5, W=3, F=10, R=1, S=1),
     {"BLOCK_M": 16, "BLOCK_N": 16, "BLOCK_K": 16, "SPLIT_K": 1, "PACK_K": 0, "NCHW_IN": 1, "PERSISTENT": 0,
      "TMA": 0, "TMA_STORE": 0, "FOLD": 0, "SPLIT_SUM": 0}, "xcd", 8, 8),
    ("igemm_fast", ConvShape("box", N=2, C=8, H=6, W=7, F=10, R=3, S=3, stride=1, padding=1),
     {"BLOCK_M": 16, "BLOCK_N": 16, "BLOCK_K": 16, "SPLIT_K": 1, "PACK_K": 0, "NCHW_IN": 0, "PERSISTENT": 0,
      "TMA": 1, "TMA_STORE": 0, "FOLD": 0, "SPLIT_SUM": 0, "BOX_W": 8}, "grouped", 8, 3),
    ("direct", ODD, {"BLOCK_N": 2, "BLOCK_F": 4, "BLOCK_H": 2, "BLOCK_W": 4, "BLOCK_C": 2}, "xcd_grouped", 8, 2),
    ("direct", T2, {"BLOCK_N": 1, "BLOCK_F": 2, "BLOCK_H": 4, "BLOCK_W": 2, "BLOCK_C": 8}, "grouped", 8, 2),
    ("patch", SMALL, {"BLOCK_Q": 2, "BLOCK_C": 2}, "xcd_grouped", 8, 2),
    ("patch", ROW, {"BLOCK_Q": 4, "BLOCK_C": 4}, "xcd", 8, 8),
]


def _ids(case):
    return f"{case[0]}-{case[1].name}-{case[3]}"


@pytest.mark.parametrize("case", CASES, ids=_ids)
def test_recorded_loads_equal_model(case):
    name, shape, tiles, swizzle, num_xcds, group_size = case
    kernel = KERNELS[name]
    grid = kernel.tile_grid(shape, tiles)
    assert grid.num_pids % 8, "cases are meant to have grids that are not multiples of 8"
    table = remap_table(SWIZZLES[swizzle], grid.num_pid_m, grid.num_pid_n, num_xcds, group_size)
    ops = make_operands(shape, kernel.has_bias, seed=0, device="cpu")
    run, _ = kernel.bind(ops, shape, tiles, SwizzleBinding(SWIZZLES[swizzle], num_xcds, group_size),
                         LaunchConfig())
    with record_loads() as log:
        run()

    bases = tensor_bases(shape, kernel.has_bias)
    by_pid = log.by_pid()
    assert sorted(by_pid) == list(range(grid.num_pids))
    pro = PROLOGUE_LOADS[name]
    for pid, loads in by_pid.items():
        tile = int(table[pid])
        model = kernel.access_steps(shape, tiles, tile)
        assert len(loads) == pro + LOADS_PER_STEP * len(model), f"pid {pid}: unexpected number of loads"
        for step, expected in enumerate(model):
            group = loads[pro + LOADS_PER_STEP * step: pro + LOADS_PER_STEP * (step + 1)]
            if step == 0:
                group = loads[:pro] + group
            recorded = [ld.offsets + bases[ld.tensor.removesuffix("_ptr")] for ld in group if ld.tensor]
            got = np.unique(np.concatenate(recorded)) if recorded else np.zeros(0, dtype=np.int64)
            assert np.array_equal(got, expected), (
                f"{name} pid {pid} (tile {tile}) step {step}: recorded {len(got)} addresses, "
                f"model {len(expected)}; only recorded: {np.setdiff1d(got, expected)[:8]}, "
                f"only model: {np.setdiff1d(expected, got)[:8]}")


@pytest.mark.parametrize("line_bytes", [32, 128])
@pytest.mark.parametrize("case", CASES, ids=_ids)
def test_line_model_equals_element_model(case, line_bytes):
    name, shape, tiles = case[:3]
    kernel = KERNELS[name]
    model = kernel.access_model(shape, tiles, line_bytes)
    plan = kernel.load_plan(shape, tiles)
    assert model.num_tiles == kernel.tile_grid(shape, tiles).num_pids == plan.num_tiles
    total = 0
    for tile in range(model.num_tiles):
        for step, addresses in enumerate(plan.tile_addresses(tile)):
            expected = np.unique(addresses // line_bytes)
            assert np.array_equal(model.step_lines(tile, step), expected), (tile, step)
            total += len(expected)
    assert model.num_accesses == total


def test_tensor_bases_are_aligned_and_disjoint():
    bases = tensor_bases(ODD, with_bias=True)
    assert bases["x"] == 0
    assert all(b % TENSOR_ALIGN == 0 for b in bases.values())
    assert bases["w"] >= ODD.N * ODD.C * ODD.H * ODD.W * 2
    assert bases["b"] >= bases["w"] + ODD.F * ODD.C * ODD.R * ODD.S * 2


def test_large_layer_model_is_compact():
    """A full-size layer builds quickly and shares rows between tiles."""
    shape = ConvShape("l03", N=32, C=64, H=56, W=56, F=64, R=3, S=3, stride=1, padding=1)
    tiles = {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64}
    model = KERNELS["igemm"].access_model(shape, tiles, 128)
    assert model.num_tiles == 784
    # Aligned 64-channel fp16 runs are one 128 B line each: 128 input rows + 64 filters
    # per step, minus input rows in the padding.
    assert model.num_accesses <= 784 * 9 * (128 + 64)
    assert model.step_lines(0, 4).size == 128 + 64     # centre tap: no padding in tile 0


# -----------------------------------------------------------
# Schedules: which program loads which tile's which steps (kernels.access.Schedule).

FAST = {"BLOCK_M": 16, "BLOCK_N": 16, "BLOCK_K": 16, "SPLIT_K": 1, "PACK_K": 0, "NCHW_IN": 0, "PERSISTENT": 0,
        "TMA": 0, "TMA_STORE": 0, "FOLD": 0, "SPLIT_SUM": 0}
SCHEDULED = [(ODD, {**FAST, "PERSISTENT": 1}, "xcd_grouped", 8, 2),
             (T1, {**FAST, "SPLIT_K": 2}, "grouped", 8, 3),
             (T1, {**FAST, "SPLIT_K": 4, "SPLIT_SUM": 1, "PERSISTENT": 1}, "xcd", 8, 8)]


@pytest.mark.parametrize("case", SCHEDULED, ids=lambda c: f"{c[0].name}-S{c[1]['SPLIT_K']}-P{c[1]['PERSISTENT']}")
def test_recorded_loads_follow_the_schedule(case):
    """Program p of the interpreted launch loads, item after item of its walk, the K steps
    of that item's split of tile table[item % num_tiles], as the conv's LaunchPlan says;
    with SPLIT_SUM the last split then reads back every partial of its tile."""
    from kernels.igemm_fast import INTERPRETER_PROGRAMS

    shape, tiles, swizzle, num_xcds, group_size = case
    kernel = KERNELS["igemm_fast"]
    grid = kernel.tile_grid(shape, tiles)
    table = remap_table(SWIZZLES[swizzle], grid.num_pid_m, grid.num_pid_n, num_xcds, group_size)
    plan = next(p for p in kernel.launch_plans(shape, tiles) if p.name == "conv")
    schedule = plan.schedule
    programs = schedule.num_programs(INTERPRETER_PROGRAMS)
    ops = make_operands(shape, False, seed=0, device="cpu")
    run, _ = kernel.bind(ops, shape, tiles, SwizzleBinding(SWIZZLES[swizzle], num_xcds, group_size), LaunchConfig())
    with record_loads() as log:
        run()
    bases = kernel.buffer_bases(shape, tiles)
    last = plan.last
    seen_last = 0
    for pid in range(programs):
        # The conv's operand loads (the sum pass's, also on ws_ptr, are another launch).
        loads = [ld for ld in log.by_pid()[pid] if ld.tensor != "ws_ptr" or last is not None]
        pos = 0
        for work in schedule.walk(pid, programs):
            split, tile = work // schedule.num_tiles, int(table[work % schedule.num_tiles])
            steps = plan.loads.tile_addresses(tile)
            for step in schedule.split_steps(split):
                group = loads[pos:pos + LOADS_PER_STEP]
                pos += LOADS_PER_STEP
                got = np.unique(np.concatenate([ld.offsets + bases[ld.tensor.removesuffix("_ptr")]
                                                for ld in group if ld.tensor]))
                assert np.array_equal(got, steps[step]), (pid, work, step)
            if last is not None and pos < len(loads) and loads[pos].tensor == "ws_ptr":
                # The tile's last split: SPLIT_K loads of the partials, in split order.
                back = loads[pos:pos + schedule.splits]
                pos += schedule.splits
                got = np.unique(np.concatenate([ld.offsets + bases["ws"] for ld in back]))
                assert np.array_equal(got, last.addresses(tile, 4)[0][1]), (pid, work)
                seen_last += 1
        assert pos == len(loads), f"pid {pid}: {len(loads) - pos} loads the schedule does not explain"
    assert seen_last == (schedule.num_tiles if last is not None else 0)
