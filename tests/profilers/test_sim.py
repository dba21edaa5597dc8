"""The simulated L2 against cases whose answer is known by hand."""
import math

import numpy as np
import pytest

from harness.profilers import sim
from harness.profilers.base import L2Reading
from harness.profilers.sim import SimTarget, simulate_job, simulate_l2
from harness.profilers.sim_cache import HAVE_NUMBA, CacheGeometry, LRUCache, replay_lines
from kernels import KERNELS
from kernels.access import AccessModel
from kernels.problem import ConvShape
from swizzles import SWIZZLES
from swizzles.permutation import remap_table

MI300X = {"name": "mi300x", "num_xcds": 8, "compute_units": 304, "l2_bytes": 4 * 2**20, "l2_ways": 16,
          "l2_line_bytes": 128, "l2_domains": 8, "mall_bytes": 256 * 2**20}
H100 = {"name": "h100", "num_xcds": 1, "compute_units": 132, "l2_bytes": 50 * 2**20, "l2_ways": 16,
        "l2_line_bytes": 128, "l2_domains": 1, "mall_bytes": 0}
IGEMM_TILES = {"BLOCK_M": 16, "BLOCK_N": 16, "BLOCK_K": 16}
SHAPE = ConvShape("s", N=2, C=20, H=9, W=9, F=40, R=3, S=3, stride=1, padding=1)   # 11 x 3 tiles


def machine(num_xcds=1, slots=1, l2_lines=1024, ways=16, line=128, l2_domains=None, mall_lines=0):
    """A small simulated machine: ``slots`` resident programs per XCD (1 CU x occupancy)."""
    return SimTarget(num_xcds=num_xcds, cus_per_xcd=1, occupancy=slots, l2_domains=l2_domains or num_xcds,
                     l2=CacheGeometry(l2_lines * line, ways, line),
                     mall=CacheGeometry(mall_lines * line, 16, line) if mall_lines else None)


def synthetic(tile_steps: list[list[list[int]]], line=128) -> AccessModel:
    """An access model where tile t reads the lines ``tile_steps[t][k]`` at step k
    (one operand, one row per tile)."""
    num_steps = len(tile_steps[0])
    counts = [len(step) for steps in tile_steps for step in steps]
    offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    lines = np.array([x for steps in tile_steps for step in steps for x in step], dtype=np.int64)
    return AccessModel(num_steps=num_steps, line_bytes=line, operand_names=("x",),
                       tile_rows=np.arange(len(tile_steps), dtype=np.int64)[:, None], offsets=offsets,
                       lines=lines)


# -----------------------------------------------------------
# The LRU cache on its own.

def test_lru_eviction_order_on_a_tiny_cache():
    # 2 sets x 2 ways: even lines in set 0, odd lines in set 1.
    cache = LRUCache(CacheGeometry(size_bytes=4, ways=2, line_bytes=1))
    trace = [0, 2, 1, 0, 4, 3, 0, 2, 5, 4, 1]
    # set 0: 0 m, 2 m, 0 h, 4 m (evicts 2), 0 h, 2 m (evicts 4), 4 m (evicts 0)
    # set 1: 1 m, 3 m, 5 m (evicts 1), 1 m (evicts 3)
    expected = [False, False, False, True, False, False, True, False, False, False, False]
    assert [cache.access(x) for x in trace] == expected
    assert cache.contents(0) == [2, 4]          # least recently used first
    assert cache.contents(1) == [5, 1]
    assert replay_lines(np.array(trace), cache.geometry).tolist() == expected


def test_set_associativity_conflicts():
    geometry = CacheGeometry(size_bytes=8 * 128, ways=2, line_bytes=128)    # 4 sets x 2 ways
    # Three lines of one set, cycled: LRU always evicts the next one needed.
    same_set = np.tile([0, 4, 8], 5)
    assert not replay_lines(same_set, geometry).any()
    # Three lines of three sets fit: only the first pass misses.
    spread = np.tile([0, 1, 2], 5)
    assert replay_lines(spread, geometry).sum() == len(spread) - 3


# -----------------------------------------------------------
# The scheduler and the per-XCD caches.

def test_stream_without_reuse_never_hits():
    model = synthetic([[[10 * t + k, 10 * t + k + 5] for k in range(3)] for t in range(40)])
    result = simulate_l2(model, np.arange(40), machine(num_xcds=8, slots=2, l2_lines=64, mall_lines=1024))
    assert (result.hits, result.misses) == (0, 240)
    assert result.hit_rate == 0.0
    assert result.mall_hits == 0 and result.mall_misses == 240
    assert result.l2_miss_bytes == result.dram_read_bytes == 240 * 128


def test_two_xcds_reading_the_same_tile_each_miss_once():
    lines = list(range(100, 132))
    # Two programs read the same 32 lines twice (tiles 0 and 1 are identical).
    model = synthetic([[lines, lines], [lines, lines]])
    separate = simulate_l2(model, np.arange(2), machine(num_xcds=2, mall_lines=4096))
    assert separate.xcd_misses == (32, 32) and separate.xcd_hits == (32, 32)
    assert separate.domain_hit_rates == (50.0, 50.0)
    # Behind the two L2s the shared MALL sees both misses of each line: one miss, one hit.
    assert (separate.mall_misses, separate.mall_hits) == (32, 32)
    assert separate.dram_read_bytes == 32 * 128
    # One L2 shared by both XCDs: XCD 0 misses, XCD 1 then hits in the same round.
    shared = simulate_l2(model, np.arange(2), machine(num_xcds=2, l2_domains=1))
    assert shared.misses == 32 and shared.hits == 96
    assert shared.xcd_misses == (32, 0)


def test_round_robin_dispatch_follows_the_remap_table():
    # Tile t reads line t % 2.  Launch-order pid p runs on XCD p % 2.
    model = synthetic([[[t % 2]] for t in range(4)])
    identity = simulate_l2(model, np.arange(4), machine(num_xcds=2))
    assert identity.xcd_hits == (1, 1) and identity.xcd_misses == (1, 1)   # XCD 0: lines 0, 0
    swapped = simulate_l2(model, np.array([0, 2, 1, 3]), machine(num_xcds=2))
    assert swapped.xcd_hits == (0, 0) and swapped.xcd_misses == (2, 2)      # XCD 0: lines 0, 1


def test_resident_programs_interleave_step_by_step():
    # Every program reads its own line twice, at step 0 and step 1; the cache holds 2 lines.
    model = synthetic([[[t], [t]] for t in range(4)])
    small = dict(num_xcds=1, l2_lines=2, ways=2)
    one_at_a_time = simulate_l2(model, np.arange(4), machine(slots=1, **small))
    assert one_at_a_time.hits == 4             # miss then hit, program after program
    # Four resident programs: step 0 of all four evicts each line before its step 1.
    four_at_once = simulate_l2(model, np.arange(4), machine(slots=4, **small))
    assert four_at_once.hits == 0
    two_at_once = simulate_l2(model, np.arange(4), machine(slots=2, **small))
    assert two_at_once.hits == 4


def test_idle_xcds_report_nan():
    model = synthetic([[[1]], [[2]]])
    result = simulate_l2(model, np.arange(2), machine(num_xcds=8))
    assert result.xcd_misses[:2] == (1, 1) and all(math.isnan(r) for r in result.xcd_hit_rates[2:])


# -----------------------------------------------------------
# Real kernels.

def _table(kernel, shape, tiles, swizzle="identity", num_xcds=8, group_size=8):
    grid = kernel.tile_grid(shape, tiles)
    return remap_table(SWIZZLES[swizzle], grid.num_pid_m, grid.num_pid_n, num_xcds, group_size)


@pytest.mark.parametrize("swizzle", ["identity", "grouped", "xcd"])
def test_working_set_that_fits_misses_each_line_once(swizzle):
    kernel = KERNELS["igemm"]
    model = kernel.access_model(SHAPE, IGEMM_TILES, 128)
    table = _table(kernel, SHAPE, IGEMM_TILES, swizzle)
    every_line = np.concatenate([np.concatenate(model.tile_lines(t)) for t in range(model.num_tiles)])
    unique = len(np.unique(every_line))
    assert unique * 128 < 4 * 2**20                     # fits one MI300X L2 many times over

    one = simulate_l2(model, table, machine(num_xcds=1, slots=3, l2_lines=32768))
    assert one.misses == unique and one.accesses == model.num_accesses == len(every_line)
    assert one.hit_rate == pytest.approx(100 * (1 - unique / len(every_line)))

    # Eight XCDs: each misses exactly once on every line its own programs read.
    eight = simulate_l2(model, table, SimTarget.from_target(MI300X))
    for x in range(8):
        tiles = table[x::8]
        mine = np.concatenate([np.concatenate(model.tile_lines(t)) for t in tiles]) if len(tiles) else []
        assert eight.xcd_misses[x] == len(np.unique(mine))
    assert eight.mall_misses == unique                   # the MALL misses once per line overall


def test_compiled_and_interpreted_replay_agree(monkeypatch):
    if not HAVE_NUMBA:
        pytest.skip("numba not installed: only the interpreted replay exists")
    kernel = KERNELS["igemm"]
    model = kernel.access_model(SHAPE, IGEMM_TILES, 32)
    table = _table(kernel, SHAPE, IGEMM_TILES, "xcd_grouped", group_size=2)
    target = machine(num_xcds=4, slots=2, l2_lines=64, ways=4, line=32, mall_lines=256)
    compiled = simulate_l2(model, table, target)
    monkeypatch.setattr(sim, "_replay", sim._replay.py_func)
    interpreted = simulate_l2(model, table, target)
    for field in ("hits", "misses", "xcd_hits", "xcd_misses", "mall_hits", "mall_misses"):
        assert getattr(compiled, field) == getattr(interpreted, field), field
    assert 0 < compiled.hits < compiled.accesses


def test_simulate_job_end_to_end():
    result = simulate_job("igemm", SHAPE, IGEMM_TILES, SWIZZLES["xcd_grouped"], 8, 4, MI300X, occupancy=1)
    assert result.read_hits + result.read_misses == KERNELS["igemm"].access_model(SHAPE, IGEMM_TILES, 128).num_accesses
    stores = KERNELS["igemm"].store_plan(SHAPE, IGEMM_TILES).access_list(128)
    assert result.write_hits + result.write_misses == len(stores.lines) and stores.writes.all()
    assert result.slots_per_xcd == 38 and result.num_programs == 33
    assert len(result.domain_hit_rates) == 8
    reading = result.as_reading()
    assert isinstance(reading, L2Reading)
    assert (reading.l2_hit_rate, reading.l2_hit_rate_std, reading.samples) == (result.hit_rate, 0.0, 1)
    assert reading.l2_hits == result.hits and reading.dram_read_bytes == result.dram_read_bytes
    metrics = result.as_metrics()
    assert metrics["sim.l2_miss_bytes"] == result.read_misses * 128 and "sim.mall_hit_rate" in metrics
    assert metrics["sim.l2_hit_rate"] == result.hit_rate == 100 * result.hits / result.accesses
    assert metrics["sim.l2_read_hit_rate"] == 100 * result.read_hits / (result.read_hits + result.read_misses)
    assert len([k for k in metrics if k.startswith("sim.xcd")]) == 8     # 33 programs reach all XCDs


def test_nvidia_configuration_counts_32_byte_sectors():
    shape = ConvShape("p", N=1, C=8, H=6, W=6, F=4, R=3, S=3, stride=1, padding=1)
    tiles = {"BLOCK_Q": 8, "BLOCK_C": 8}
    result = simulate_job("patch", shape, tiles, SWIZZLES["identity"], 1, 8, H100, line_bytes=32)
    assert result.line_bytes == 32 and len(result.domain_hits) == 1 and result.mall_hits is None
    assert result.accesses == KERNELS["patch"].access_model(shape, tiles, 32).num_accesses   # loads only
    assert result.read_hit_rate == result.hit_rate
    assert result.dram_read_bytes == result.misses * 32


def test_unresolved_target_and_bad_remap_are_rejected():
    with pytest.raises(ValueError, match="l2_bytes is not set"):
        SimTarget.from_target({**MI300X, "name": "auto", "l2_bytes": None})
    with pytest.raises(ValueError, match="not a permutation"):
        simulate_job("igemm", SHAPE, IGEMM_TILES, SWIZZLES["seed_patch"], 8, 8, MI300X)
