"""The simulated L2 against cases whose answer is known by hand."""
import math

import numpy as np
import pytest

from harness.profilers.base import L2Reading
from harness.profilers.sim import address, bands, caches, replay
from harness.profilers.sim.job import Remap, simulate_job
from harness.profilers.sim.lru import HAVE_NUMBA, CacheGeometry, LRUCache, replay_lines
from harness.profilers.sim.replay import simulate_l2
from harness.profilers.sim.target import SimTarget
from kernels import KERNELS
from kernels.access import AccessList, AccessModel, LaunchModel, Schedule
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


def _interpret_replay(monkeypatch):
    """Run the replay's loops as Python (the functions they call stay compiled)."""
    for name in ("_replay", "_round", "_finish_item"):
        monkeypatch.setattr(replay, name, getattr(replay, name).py_func)
    monkeypatch.setattr(replay, "lookups", caches.lookups.py_func)


def test_compiled_and_interpreted_replay_agree(monkeypatch):
    if not HAVE_NUMBA:
        pytest.skip("numba not installed: only the interpreted replay exists")
    kernel = KERNELS["igemm"]
    model = kernel.access_model(SHAPE, IGEMM_TILES, 32)
    table = _table(kernel, SHAPE, IGEMM_TILES, "xcd_grouped", group_size=2)
    target = machine(num_xcds=4, slots=2, l2_lines=64, ways=4, line=32, mall_lines=256)
    compiled = simulate_l2(model, table, target)
    _interpret_replay(monkeypatch)
    interpreted = simulate_l2(model, table, target)
    for field in ("hits", "misses", "xcd_hits", "xcd_misses", "mall_hits", "mall_misses"):
        assert getattr(compiled, field) == getattr(interpreted, field), field
    assert 0 < compiled.hits < compiled.accesses


def test_simulate_job_end_to_end():
    result = simulate_job("igemm", SHAPE, IGEMM_TILES, Remap(SWIZZLES["xcd_grouped"], 8, 4), MI300X, occupancy=1)
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
    result = simulate_job("patch", shape, tiles, Remap(SWIZZLES["identity"], 1, 8), H100, line_bytes=32)
    assert result.line_bytes == 32 and len(result.domain_hits) == 1 and result.mall_hits is None
    assert result.accesses == KERNELS["patch"].access_model(shape, tiles, 32).num_accesses   # loads only
    assert result.read_hit_rate == result.hit_rate
    assert result.dram_read_bytes == result.misses * 32


def test_unresolved_target_and_bad_remap_are_rejected():
    with pytest.raises(ValueError, match="l2_bytes is not set"):
        SimTarget.from_target({**MI300X, "name": "auto", "l2_bytes": None})
    with pytest.raises(ValueError, match="not a permutation"):
        simulate_job("igemm", SHAPE, IGEMM_TILES, Remap(SWIZZLES["seed_patch"], 8, 8), MI300X)


# -----------------------------------------------------------
# Stores, schedules and the timed run, on launches small enough to count by hand.

def accesses(entries: list[list[tuple[int, bool]]]) -> AccessList:
    """An access list where key k accesses ``entries[k]``: (line, writes) pairs in order."""
    counts = [len(e) for e in entries]
    return AccessList(np.concatenate([[0], np.cumsum(counts)]).astype(np.int64),
                      np.array([line for e in entries for line, _ in e], dtype=np.int64),
                      np.array([w for e in entries for _, w in e], dtype=np.bool_))


def launch(tile_steps, epilogue, last=None, splits=1, persistent=False) -> LaunchModel:
    """A launch of ``synthetic`` loads with the given epilogue (keyed by tile * splits +
    split) and last-arrival accesses (keyed by tile)."""
    loads = synthetic(tile_steps)
    last = last or [[] for _ in tile_steps]
    return LaunchModel("conv", Schedule(len(tile_steps), loads.num_steps, splits, persistent), loads,
                       accesses(epilogue), accesses(last))


def test_stores_are_write_allocate_lookups():
    # Tile 0 loads lines 1, 2 and stores line 100; tile 1 loads 2 and 100 (which tile 0's
    # store allocated) and stores 100 and 101.  One program at a time, a cache that holds all.
    model = launch([[[1, 2]], [[2, 100]]], [[(100, True)], [(100, True), (101, True)]])
    result = simulate_l2(model, np.arange(2), machine(mall_lines=1024))
    # reads: 1 m, 2 m | 2 h, 100 h;   writes: 100 m | 100 h, 101 m
    assert (result.read_hits, result.read_misses) == (2, 2)
    assert (result.write_hits, result.write_misses) == (1, 2)
    assert (result.hits, result.misses) == (3, 4) and result.hit_rate == pytest.approx(300 / 7)
    assert result.read_hit_rate == 50.0
    # Write misses fetch nothing: the MALL sees the two read misses only.
    assert (result.mall_hits, result.mall_misses) == (0, 2)
    assert result.l2_miss_bytes == result.dram_read_bytes == 2 * 128
    metrics = result.as_metrics()
    assert (metrics["sim.l2_hit_rate"], metrics["sim.l2_read_hit_rate"]) == (pytest.approx(300 / 7), 50.0)
    assert metrics["sim.l2_write_lookups"] == 3


def test_stores_hit_on_nvidia_targets():
    # The launch above on a machine whose stores are hits (NVIDIA, l2_writes: hit): the same
    # reads, and all three stores hits, though 100 and 101 were absent; they still allocate,
    # so tile 1's read of 100 hits.
    from dataclasses import replace

    model = launch([[[1, 2]], [[2, 100]]], [[(100, True)], [(100, True), (101, True)]])
    result = simulate_l2(model, np.arange(2), replace(machine(), writes_hit=True))
    assert (result.read_hits, result.read_misses, result.write_hits, result.write_misses) == (2, 2, 3, 0)
    assert SimTarget.from_target({**H100, "l2_writes": "hit"}).writes_hit
    assert not SimTarget.from_target(MI300X).writes_hit
    with pytest.raises(ValueError, match="l2_writes='sometimes' is invalid; valid: hit"):
        SimTarget.from_target({**H100, "l2_writes": "sometimes"})


def test_reads_of_another_programs_fresh_line_are_merged():
    # Two programs resident at once (one XCD, two slots), each reading line 7 then its own
    # line at steps 0 and 1.  In lock step, pid 1 reads 7 in the same round as pid 0: with a
    # coalescer window, that read is merged (no lookup); pid 0's own re-read of 7 would not be.
    from dataclasses import replace

    model = synthetic([[[7], [10]], [[7], [11]]])
    plain = simulate_l2(model, np.arange(2), machine(slots=2))
    # 7 m, 7 h | 10 m, 11 m: the second read of 7 is an L2 hit
    assert (plain.read_hits, plain.read_misses, plain.merged_reads) == (1, 3, 0)
    merged = simulate_l2(model, np.arange(2), replace(machine(slots=2), coalesce_window=0.5, step_jitter=0.0))
    assert (merged.read_hits, merged.read_misses, merged.merged_reads) == (0, 3, 1)
    assert merged.read_hit_rate == 0.0 and merged.as_metrics()["sim.l2_merged_reads"] == 1
    # Programs one after the other (one slot): pid 1 reads 7 two steps after pid 0, outside
    # a window of 0.5 steps: an L2 hit, not merged.
    apart = simulate_l2(model, np.arange(2), replace(machine(slots=1), coalesce_window=0.5, step_jitter=0.0))
    assert (apart.read_hits, apart.read_misses, apart.merged_reads) == (1, 3, 0)
    # A re-read inside the window is merged whoever makes it (the first request is still in
    # flight); one step later, outside a window of 0.5 steps, it is a lookup again.
    own = simulate_l2(synthetic([[[7], [7]]]), np.arange(1), replace(machine(), coalesce_window=5.0))
    assert (own.read_hits, own.read_misses, own.merged_reads) == (0, 1, 1)
    own = simulate_l2(synthetic([[[7], [7]]]), np.arange(1), replace(machine(), coalesce_window=0.5))
    assert (own.read_hits, own.read_misses, own.merged_reads) == (1, 1, 0)


def test_reads_are_merged_within_a_cluster_only():
    # Four programs at once on 2 CUs (2 slots each): slots 0..3 run on CUs 0, 1, 0, 1, in
    # clusters 0, 1, 0, 1.  All read line 7 in the same round, then their own line.
    from dataclasses import replace

    model = synthetic([[[7], [10 + t]] for t in range(4)])
    two = replace(machine(slots=2), cus_per_xcd=2, clusters=2, coalesce_window=0.5, step_jitter=0.0)
    result = simulate_l2(model, np.arange(4), two)
    # 7: pid 0 misses, pid 1 (the other cluster) hits, pids 2 and 3 merge with their cluster's request.
    assert (result.read_hits, result.read_misses, result.merged_reads) == (1, 5, 2)
    # One cluster (cluster_run 2: both CUs in cluster 0): everything after the first is merged.
    one = simulate_l2(model, np.arange(4), replace(two, cluster_run=2))
    assert (one.read_hits, one.read_misses, one.merged_reads) == (0, 5, 3)
    with pytest.raises(ValueError, match="clusters=40 > 31"):
        replace(two, clusters=40)


def test_merge_unit_partition_merges_across_clusters_of_one_partition():
    # Four programs at once on 2 CUs (2 slots each): slots 0..3 on CUs 0, 1, 0, 1, clusters
    # 0, 1, 0, 1, both clusters reading through partition 0 (2 clusters, 1 partition).
    from dataclasses import replace

    model = synthetic([[[7], [10 + t]] for t in range(4)])
    two = replace(machine(slots=2), cus_per_xcd=2, clusters=2, coalesce_window=0.5, step_jitter=0.0)
    by_cluster = simulate_l2(model, np.arange(4), two)
    assert (by_cluster.read_hits, by_cluster.merged_reads) == (1, 2)      # pid 1's cluster looks it up
    by_partition = simulate_l2(model, np.arange(4), replace(two, merge_unit="partition"))
    assert (by_partition.read_hits, by_partition.read_misses, by_partition.merged_reads) == (0, 5, 3)
    with pytest.raises(ValueError, match="merge_unit='gpc' is invalid; valid: cluster, partition, any"):
        replace(two, merge_unit="gpc")


def test_merge_cap_lets_one_lookup_serve_a_few_requests_from_any_sm():
    # Nine programs at once on 9 CUs, each in its own cluster, all reading line 7 in the same
    # round, then their own line.  merge_unit any: every SM's request may merge; with a cap of
    # 4, pid 0's lookup (a miss) serves pids 1-3, pid 4 starts a new lookup (a hit) serving
    # 5-7, and pid 8 a third.  (The H100 probe: 132 SMs reading one sector at once, 35 lookups.)
    from dataclasses import replace

    model = synthetic([[[7], [10 + t]] for t in range(9)])
    nine = replace(machine(slots=9), cus_per_xcd=9, clusters=9, coalesce_window=0.5, step_jitter=0.0)
    by_cluster = simulate_l2(model, np.arange(9), nine)          # every cluster looks 7 up once
    assert (by_cluster.read_hits, by_cluster.read_misses, by_cluster.merged_reads) == (8, 10, 0)
    capped = simulate_l2(model, np.arange(9), replace(nine, merge_unit="any", merge_cap=4))
    assert (capped.read_hits, capped.read_misses, capped.merged_reads) == (2, 10, 6)
    uncapped = simulate_l2(model, np.arange(9), replace(nine, merge_unit="any"))
    assert (uncapped.read_hits, uncapped.read_misses, uncapped.merged_reads) == (0, 10, 8)
    with pytest.raises(ValueError, match="merge_cap=4 needs merge_unit='any'"):
        replace(nine, merge_cap=4)
    with pytest.raises(ValueError, match="merge_cap=-1 must be a whole number >= 0"):
        replace(nine, merge_unit="any", merge_cap=-1)
    record = {**H100, "sim_calibration": {"coalesce_window": 0.2, "merge_unit": "any", "merge_cap": 4}}
    assert SimTarget.from_target(record).merge_cap == 4


def test_bulk_merge_gives_tma_loads_a_merge_unit_and_cap_of_their_own():
    # Nine programs at once on 9 CUs, each its own cluster, all reading line 7 in the same round,
    # then their own line.  Ordinary loads merge per cluster (none here: 8 hits); with a bulk
    # merge of unit any and cap 4 a TMA-loaded operand merges as merge_cap 4 does above
    # (2 hits, 6 merged), and an operand not marked bulk is unchanged.
    from dataclasses import replace

    from harness.profilers.sim.target import BulkMerge

    model = synthetic([[[7], [10 + t]] for t in range(9)])
    nine = replace(machine(slots=9), cus_per_xcd=9, clusters=9, coalesce_window=0.5, step_jitter=0.0,
                   bulk_merge=BulkMerge(0.5, "any", 4))
    plain = simulate_l2(model, np.arange(9), nine)
    assert (plain.read_hits, plain.read_misses, plain.merged_reads) == (8, 10, 0)
    bulk = simulate_l2(replace(model, operand_bulk=(True,)), np.arange(9), nine)
    assert (bulk.read_hits, bulk.read_misses, bulk.merged_reads) == (2, 10, 6)
    narrow = simulate_l2(replace(model, operand_bulk=(True,)), np.arange(9),
                         replace(nine, bulk_merge=BulkMerge(0.0, "any", 4)))   # window 0: no merging
    assert (narrow.read_hits, narrow.merged_reads) == (8, 0)
    merge = nine.operand_merge((True, False), 2, 9)
    assert merge.window.tolist() == [0.5, 0.5] and merge.cap.tolist() == [4, 0]
    assert not merge.unit[0].any() and merge.unit[1][:9].tolist() == list(range(9))   # any; a cluster per CU
    record = {**H100, "sim_calibration": {"coalesce_window": 0.2, "tma_unit": "any", "tma_cap": 4}}
    assert SimTarget.from_target(record).bulk_merge == BulkMerge(0.2, "any", 4)
    record["sim_calibration"]["tma_window"] = 0.35
    assert SimTarget.from_target(record).bulk_merge == BulkMerge(0.35, "any", 4)
    assert SimTarget.from_target({**H100, "sim_calibration": {"tma_window": 0.4}}).bulk_merge is None
    assert SimTarget.from_target({**record, "sim_calibration": {**record["sim_calibration"], "tma_unit": "off"}}
                                 ).bulk_merge is None                   # a record can turn it off
    with pytest.raises(ValueError, match="cap=4 needs unit='any'"):
        BulkMerge(0.5, "cluster", 4)
    with pytest.raises(ValueError, match="unit='gpc' is invalid"):
        BulkMerge(0.5, "gpc")
    with pytest.raises(ValueError, match="window=-1 must be >= 0"):
        BulkMerge(-1)


def test_bulk_loads_merge_in_their_own_window():
    # As above: two programs at once, both reading line 7 at step 0.  With the coalescer off for
    # ordinary loads (window 0) but a window for operands loaded by TMA, the second read of 7
    # is merged only when the operand is marked bulk.
    from dataclasses import replace

    model = synthetic([[[7], [10]], [[7], [11]]])
    target = replace(machine(slots=2), coalesce_window=0.0, bulk_window=0.5, step_jitter=0.0)
    plain = simulate_l2(model, np.arange(2), target)
    assert (plain.read_hits, plain.read_misses, plain.merged_reads) == (1, 3, 0)
    bulk = simulate_l2(replace(model, operand_bulk=(True,)), np.arange(2), target)
    assert (bulk.read_hits, bulk.read_misses, bulk.merged_reads) == (0, 3, 1)
    assert target.operand_windows((True, False), 2).tolist() == [0.5, 0.0]
    assert replace(target, bulk_window=None, coalesce_window=0.2).operand_windows((True,), 1).tolist() == [0.2]
    assert SimTarget.from_target({**H100, "sim_calibration": {"tma_window": 0.4}}).bulk_window == 0.4
    with pytest.raises(ValueError, match="bulk_window=-1 must be >= 0"):
        replace(target, bulk_window=-1)


def test_igemm_fast_marks_its_tma_operands_bulk():
    from kernels.igemm_fast import derived_flags

    kernel = KERNELS["igemm_fast"]
    one_by_one = ConvShape("m", N=1, C=16, H=8, W=8, F=32, R=1, S=1)
    tiles = kernel.check_tiles({"BLOCK_M": 32, "BLOCK_N": 32, "BLOCK_K": 16, "SPLIT_K": 1, "PACK_K": 0, "NCHW_IN": 0,
                                "PERSISTENT": 0, "TMA": 1, "TMA_STORE": 0, "FOLD": 0, "SPLIT_SUM": 0})
    assert derived_flags(one_by_one, tiles)["A_TMA"]
    assert kernel.load_plan(one_by_one, tiles).access_model(32).operand_bulk == (True, True)
    assert kernel.load_plan(SHAPE, tiles).access_model(32).operand_bulk == (False, True)   # 3x3: A gathered
    plain = kernel.check_tiles({**tiles, "TMA": 0})
    assert kernel.load_plan(one_by_one, plain).access_model(32).operand_bulk == (False, False)


def test_partition_run_sets_the_partition_of_each_slot():
    # 8 clusters of 17 SMs in a row (cluster_run 17), 2 partitions: by default a CU reads
    # through its cluster's partition (clusters 0-3: partition 0); partition_run 8 instead
    # gives 8 CUs in a row to each partition, as the H100's dispatch of SM pairs over 8 GPCs.
    from dataclasses import replace

    target = SimTarget.from_target({**H100, "l2_partitions": 2, "clusters": 8,
                                    "sim_calibration": {"cluster_run": 17}})
    default = target.partition_of_slot()
    assert default[:68].tolist() == [0] * 68 and default[68:132].tolist() == [1] * 64
    assert (target.merge_of_slot() == target.cluster_of_slot()).all()
    run8 = replace(target, partition_run=8, merge_unit="partition").partition_of_slot()
    assert run8[:16].tolist() == [0] * 8 + [1] * 8 and run8[132] == 0
    assert (replace(target, partition_run=8, merge_unit="partition").merge_of_slot() == run8).all()
    assert SimTarget.from_target({**H100, "partition_run": 8}).partition_run == 8
    # a calibration record's partition_run (a fitted point) wins over the target key
    assert SimTarget.from_target({**H100, "partition_run": 8,
                                  "sim_calibration": {"partition_run": 0}}).partition_run == 0
    with pytest.raises(ValueError, match="partition_run=-1 must be a whole number >= 0"):
        replace(target, partition_run=-1)


def test_store_insert_lru_keeps_reads_cached():
    # A 2-way, 1-set cache, one program at a time.  Tile 0 reads line 1 and stores line 9,
    # tile 1 reads 2, tile 2 reads 1 again.  A store filled most recently used (mru) leaves 1
    # least recently used: tile 1's fill evicts it and the re-read misses.  Filled least
    # recently used (lru), the store is what tile 1's fill evicts, and the re-read hits.
    from dataclasses import replace

    model = launch([[[1]], [[2]], [[1]]], [[(9, True)], [], []])
    target = replace(machine(l2_lines=2, ways=2), writes_hit=True)
    mru = simulate_l2(model, np.arange(3), target)
    assert (mru.read_hits, mru.read_misses) == (0, 3)
    lru = simulate_l2(model, np.arange(3), replace(target, store_insert="lru"))
    assert (lru.read_hits, lru.read_misses) == (1, 2)
    assert (lru.write_hits, lru.write_misses) == (1, 0)
    with pytest.raises(ValueError, match="store_insert='first' is invalid; valid: mru, lru"):
        replace(target, store_insert="first")


def test_lru_insert_last_fills_the_victim_way():
    from harness.profilers.sim.lru import lru_insert_last

    tags = np.full(4, -1, dtype=np.int64)
    assert not lru_insert_last(tags, 0, 4, 5)           # empty set: the first empty way
    assert tags.tolist() == [5, -1, -1, -1]
    tags[:] = [1, 2, 3, 4]                               # 1 most recently used, 4 least
    assert not lru_insert_last(tags, 0, 4, 9)           # 4 evicted, 9 stays least recently used
    assert tags.tolist() == [1, 2, 3, 9]
    assert lru_insert_last(tags, 0, 4, 9)               # a hit: most recently used
    assert tags.tolist() == [9, 1, 2, 3]


def _homed(partitions: int) -> tuple[int, int]:
    """A line homed in partition 0 and one homed in partition 1 (128 B lines)."""
    homes = {int(address.home(line, 1, partitions)): line for line in range(100, 200)}
    return homes[0], homes[1]


def test_far_partition_misses_cross_the_fabric():
    # Two partitions, one per CU (2 CUs x 1 slot, 2 clusters).  Both tiles read line b (homed in
    # partition 1) at step 0 and line a (homed in 0) at step 1; stores go home.
    from dataclasses import replace

    a, b = _homed(2)
    model = launch([[[b], [a]], [[b], [a]]], [[(b, True)], []])
    target = replace(machine(slots=1), cus_per_xcd=2, clusters=2, l2_partitions=2, writes_hit=False)
    result = simulate_l2(model, np.arange(2), target)
    # Round 1: pid 0 (partition 0) misses b, looks it up at home (1): miss, fetched, kept in both;
    #          pid 1 (partition 1) hits b.
    # Round 2: pid 0 misses a (home 0: fetched, no fabric lookup); pid 1 misses a in partition 1
    #          and hits it at home (0) over the fabric.  pid 0's store of b goes home: hit.
    assert (result.read_hits, result.read_misses) == (1, 3)
    assert (result.fabric_hits, result.fabric_misses) == (1, 1)
    assert (result.write_hits, result.write_misses) == (1, 0)
    assert (result.hits, result.misses) == (3, 4)                 # all lookups, the fabric's included
    assert result.dram_read_bytes == result.l2_miss_bytes == 2 * 128   # a and b, once each
    assert result.as_metrics()["sim.l2_fabric_lookups"] == 2
    # One partition: the same reads are 1 hit (b) + 1 hit (a, pid 1) and 2 misses, no fabric.
    flat = simulate_l2(model, np.arange(2), replace(target, l2_partitions=1))
    assert (flat.read_hits, flat.read_misses, flat.fabric_hits + flat.fabric_misses) == (2, 2, 0)


def test_refill_by_clock_gives_the_next_program_the_slot_that_freed_first():
    # 3 CUs x 1 slot in 3 clusters: clusters 0 and 1 read through partition 0, cluster 2 through
    # partition 1.  One K step each, lasting 1 + 0.2 u(pid, 0): pid 0 ends at 0.875, pid 1 at
    # 1.066, pid 2 at 0.856 (the hash in _replay).  pid 3 reads line a (homed in partition 0),
    # which pid 0 read before it; pids 1 and 2 read lines of their own.
    from dataclasses import replace

    a, _ = _homed(2)
    model = launch([[[a]], [[a + 1000]], [[a + 2000]], [[a]]], [[], [], [], []])
    target = replace(machine(slots=1), cus_per_xcd=3, clusters=3, l2_partitions=2)
    in_order = simulate_l2(model, np.arange(4), target)
    by_clock = simulate_l2(model, np.arange(4), replace(target, refill="clock"))
    # In order, pid 3 takes slot 0 (partition 0) and hits a there.  By clock it takes slot 2,
    # which freed first (partition 1): a near miss, then a hit at home over the fabric.
    assert (in_order.read_hits, by_clock.read_hits) == (1, 0)
    assert by_clock.read_misses == in_order.read_misses + 1
    assert by_clock.fabric_hits == in_order.fabric_hits + 1
    with pytest.raises(ValueError, match="refill='first' is invalid; valid: order, clock"):
        replace(target, refill="first")


def test_a_store_to_a_far_home_is_a_write_lookup_in_both_partitions():
    # NVIDIA (writes_hit): pid 0 (partition 0) stores b, homed in partition 1, and a, homed in
    # 0; pid 1 (partition 1) stores b.  The far store passes pid 0's partition on its way over
    # the fabric and ncu counts both lookups (an H100 counts 602 K write sectors for l02's
    # 401 K stores): 2 + 1 + 1 write hits.
    from dataclasses import replace

    a, b = _homed(2)
    model = launch([[[a]], [[a]]], [[(b, True), (a, True)], [(b, True)]])
    target = replace(machine(slots=1), cus_per_xcd=2, clusters=2, l2_partitions=2, writes_hit=True)
    result = simulate_l2(model, np.arange(2), target)
    assert (result.write_hits, result.write_misses) == (4, 0)
    # One partition: one lookup per store.
    flat = simulate_l2(model, np.arange(2), replace(target, l2_partitions=1))
    assert (flat.write_hits, flat.write_misses) == (3, 0)


def test_a_measured_layout_decides_each_slots_partition():
    # Measured layout: SMs 0 and 1 both read through partition 1; a grid of 2 programs runs
    # on SMs 0, 1.  The reads of test_far_partition_misses_cross_the_fabric, now both programs
    # in partition 1: pid 0 misses b (home 1: no fabric), pid 1 hits it; pid 0 misses a (home
    # 0: a fabric miss, fetched, kept in both), pid 1 hits it.
    from dataclasses import replace

    a, b = _homed(2)
    model = launch([[[b], [a]], [[b], [a]]], [[], []])
    target = replace(machine(slots=1), cus_per_xcd=2, clusters=2, l2_partitions=2)
    assert target.partition_of_slot(2).tolist() == [0, 1]                  # the clusters' partitions
    measured = SimTarget.from_target({**H100, "compute_units": 2, "l2_partitions": 2, "occupancy": 1,
                                      "sm_partition": [1, 1], "sm_dispatch": {2: [0, 1]}})
    assert measured.partition_of_slot(2).tolist() == [1, 1]
    result = simulate_l2(model, np.arange(2), replace(target, slot_partitions=measured.slot_partitions))
    assert (result.read_hits, result.read_misses) == (2, 2)
    assert (result.fabric_hits, result.fabric_misses) == (0, 1)
    default = simulate_l2(model, np.arange(2), target)
    assert (default.read_hits, default.read_misses, default.fabric_hits) == (1, 3, 1)


def test_a_small_grid_takes_the_layout_of_its_own_size():
    # A grid of one program runs on SM 1 (partition 1), the first program of a full one on SM 0.
    layout = {**H100, "compute_units": 2, "l2_partitions": 2, "occupancy": 2,
              "sm_partition": [0, 1], "sm_dispatch": {1: [1], 4: [0, 1, 1, 0]}}
    target = SimTarget.from_target(layout)
    assert target.partition_of_slot(1).tolist() == [1, 1, 1, 1]   # the 1-list, repeated over the slots
    assert target.partition_of_slot(3).tolist() == [0, 1, 1, 0]
    assert target.partition_of_slot(100).tolist() == [0, 1, 1, 0]
    assert target.partition_of_slot().tolist() == [0, 1, 1, 0]
    with pytest.raises(ValueError, match=r"sm_dispatch\[4\] must list 4 SM ids in 0..1"):
        SimTarget.from_target({**layout, "sm_dispatch": {4: [0, 1, 2, 0]}})
    with pytest.raises(ValueError, match="sm_partition holds a partition outside 0..1"):
        SimTarget.from_target({**layout, "sm_partition": [0, 2]})


def test_partitions_split_the_l2_and_homes_are_balanced():
    target = SimTarget.from_target({**H100, "l2_partitions": 2, "clusters": 8,
                                    "sim_calibration": {"cluster_run": 17}})
    assert target.l2.size_bytes == 25 * 2**20 and target.clusters == 8
    clusters = target.cluster_of_slot()
    assert clusters[:17].tolist() == [0] * 17 and clusters[17] == 1 and clusters[132] == 0
    homes = np.array([address.home(line, 4, 2) for line in range(0, 4 * 4096)])
    assert (homes[::4] == homes[3::4]).all()                       # a 128 B block's sectors share a home
    assert 0.45 < homes.mean() < 0.55


def test_epilogue_runs_after_the_last_step_of_its_tile():
    # Two programs resident, 2 steps each, a 1-line cache (a hit only on the line just used).
    # Round 1: tile 0 step 0 (line 5), tile 1 step 0 (line 6); round 2: tile 0 step 1
    # (line 6: hit), its store (line 6: hit), tile 1 step 1 (line 7), its store (line 7: hit).
    model = launch([[[5], [6]], [[6], [7]]], [[(6, True)], [(7, True)]])
    result = simulate_l2(model, np.arange(2), machine(slots=2, l2_lines=1, ways=1))
    assert (result.read_hits, result.read_misses, result.write_hits, result.write_misses) == (1, 3, 2, 0)


def test_schedule_walks_and_split_ranges():
    persistent = Schedule(num_tiles=7, num_steps=2, persistent=True)
    assert persistent.num_programs(3) == 3 and persistent.num_programs(100) == 7
    assert [persistent.walk(p, 3) for p in range(3)] == [[0, 3, 6], [1, 4], [2, 5]]
    assert Schedule(7, 2).num_programs(3) == 7 and Schedule(7, 2).walk(4, 7) == [4]
    split = Schedule(num_tiles=3, num_steps=5, splits=2)
    assert split.num_work == 6 and split.steps_per_split == 3
    assert [split.split_steps(s) for s in range(2)] == [range(0, 3), range(3, 5)]
    # Four splits of five steps: 2 + 2 + 1 + none (the last split stores zeros).
    assert [len(Schedule(1, 5, 4).split_steps(s)) for s in range(4)] == [2, 2, 1, 0]


def persistent_machine(cus: int, occupancy: int, l2_lines: int, ways: int) -> SimTarget:
    return SimTarget(num_xcds=1, cus_per_xcd=cus, occupancy=occupancy, l2_domains=1,
                     l2=CacheGeometry(l2_lines * 128, ways, 128), mall=None)


def test_persistent_programs_stay_resident_and_walk_their_tiles():
    # Every tile reads its own line at steps 0 and 1; the cache holds 2 lines.
    tile_steps = [[[t], [t]] for t in range(6)]
    target = persistent_machine(cus=2, occupancy=2, l2_lines=2, ways=2)    # 4 slots, 2 CUs
    # One program per tile: tiles 0-3 resident together, step 0 of all four evicts each line
    # before its step 1; tiles 4, 5 then run two at a time: their step 1 hits.
    plain = simulate_l2(launch(tile_steps, [[] for _ in range(6)]), np.arange(6), target)
    assert plain.num_programs == 6 and plain.hits == 2
    # Persistent: min(6 tiles, 2 CUs) = 2 programs (program 0: tiles 0, 2, 4; program 1:
    # 1, 3, 5), two lines live at a time: every step 1 hits.
    walked = simulate_l2(launch(tile_steps, [[] for _ in range(6)], persistent=True), np.arange(6), target)
    assert walked.num_programs == 2 and (walked.hits, walked.misses) == (6, 6)
    # Program 0's tiles 0, 2, 4 store line 50 after their last step, program 1's tiles
    # line 51.  Program p's stores are its tiles' in walk order, each after the tile's last
    # step: with a 1-line cache (and steps reading 60 + tile) nothing but the order of
    # accesses decides a hit, and none of the 18 lookups hits.
    one_line = persistent_machine(cus=2, occupancy=2, l2_lines=1, ways=1)
    stores = [[(50 + t % 2, True)] for t in range(6)]
    model = launch([[[60 + t], [60 + t]] for t in range(6)], stores, persistent=True)
    result = simulate_l2(model, np.arange(6), one_line)
    # Round 1: 60, 61; round 2: 60, store 50, 61, store 51; round 3: 62, 63; ... no repeats.
    assert (result.hits, result.misses) == (0, 18)
    # With one CU the only program walks all six tiles back to back: each step 1 hits its
    # step 0's line; stores to 50 / 51 alternate and miss.
    alone = simulate_l2(model, np.arange(6), persistent_machine(cus=1, occupancy=2, l2_lines=1, ways=1))
    assert alone.num_programs == 1
    assert (alone.read_hits, alone.read_misses, alone.write_hits, alone.write_misses) == (6, 6, 0, 6)


def test_a_persistent_programs_step_lengths_run_on_over_its_work_items():
    # Two programs in one cluster, both reading line 100 + 8 j + k at step k of their j-th work
    # item (tiles 2 j and 2 j + 1 read alike): the second read of each line merges when the two
    # programs' clocks are within the window.  A program's step count (the kernel's ring
    # position) runs on over its items, so walking 4 items of 8 steps times its steps as one item
    # of 32 steps does: the same lookups and merges.  Restarting the count at each item would
    # repeat one item's drift between the two programs four times over.
    from dataclasses import replace

    walk = [[[100 + 8 * (t // 2) + k] for k in range(8)] for t in range(8)]
    long = [[[100 + k] for k in range(32)] for _ in range(2)]
    two = replace(persistent_machine(cus=2, occupancy=1, l2_lines=1024, ways=16), coalesce_window=0.2)
    walked = simulate_l2(launch(walk, [[] for _ in walk], persistent=True), np.arange(8), two)
    one_item = simulate_l2(launch(long, [[] for _ in long]), np.arange(2), two)
    assert walked.num_programs == one_item.num_programs == 2
    assert (walked.read_hits, walked.read_misses, walked.merged_reads) == \
        (one_item.read_hits, one_item.read_misses, one_item.merged_reads)
    assert one_item.read_misses == 32 and 0 < one_item.merged_reads < 32


def test_split_partials_written_then_summed_by_the_last_split():
    # One tile, two steps, two splits: split s reads line 1 + s, stores its partial to line
    # 50 + s; the last to arrive reads both partials back and stores the output, line 60.
    model = launch([[[1], [2]]], [[(50, True)], [(51, True)]],
                   last=[[(50, False), (51, False), (60, True)]], splits=2)
    result = simulate_l2(model, np.arange(1), machine(slots=2))
    # Round 1: split 0: 1 m, store 50 m; split 1: 2 m, store 51 m, then (last) 50 h, 51 h, 60 m.
    assert (result.read_hits, result.read_misses, result.write_hits, result.write_misses) == (2, 2, 0, 3)
    assert result.num_programs == 2
    # The remap table maps the launch-order tile of every split.  Two tiles, one step each
    # (tile t reads line 1 + t), swapped: work items 0..3 are tile 1 split 0, tile 0 split 0,
    # tile 1 split 1, tile 0 split 1.  Split s of tile t stores line 10 * (t + 1) + s; the
    # last split stores 30 + t.  A 1-line cache: only back-to-back repeats hit.
    two = launch([[[1]], [[2]]], [[(10, True)], [(11, True)], [(20, True)], [(21, True)]],
                 last=[[(30, True)], [(31, True)]], splits=2)
    order = simulate_l2(two, np.array([1, 0]), machine(l2_lines=1, ways=1))
    # Schedule.split_steps: 1 step in 2 splits -> split 0 runs step 0, split 1 none.
    # Lookups: 2, 20 | 1, 10 | 21, 31 | 11, 30: no repeats, nothing hits.
    assert (order.read_misses, order.write_misses, order.hits) == (2, 6, 0)


def test_compiled_and_interpreted_replay_agree_with_stores_and_splits(monkeypatch):
    if not HAVE_NUMBA:
        pytest.skip("numba not installed: only the interpreted replay exists")
    kernel, tiles = KERNELS["igemm_fast"], {**FAST_TILES, "SPLIT_K": 2, "SPLIT_SUM": 1, "PERSISTENT": 1}
    (model,) = kernel.launch_models(SHAPE, tiles, 32)
    table = _table(kernel, SHAPE, tiles, "xcd_grouped", group_size=2)
    target = SimTarget(num_xcds=2, cus_per_xcd=3, occupancy=2, l2_domains=2,
                       l2=CacheGeometry(64 * 32, 4, 32), mall=CacheGeometry(256 * 32, 16, 32))
    compiled = simulate_l2(model, table, target)
    _interpret_replay(monkeypatch)
    interpreted = simulate_l2(model, table, target)
    for field in ("read_hits", "read_misses", "hits", "misses", "xcd_hits", "xcd_misses", "mall_hits"):
        assert getattr(compiled, field) == getattr(interpreted, field), field
    assert 0 < compiled.write_hits and 0 < compiled.read_hits < compiled.read_hits + compiled.read_misses


# -----------------------------------------------------------
# igemm_fast's schedules end to end (simulate_job), counted from the address model.

FAST_TILES = {"BLOCK_M": 16, "BLOCK_N": 16, "BLOCK_K": 16, "SPLIT_K": 1, "PACK_K": 0, "NCHW_IN": 0,
              "PERSISTENT": 0, "TMA": 0, "TMA_STORE": 0, "FOLD": 0, "SPLIT_SUM": 0}
BIG = {**H100, "compute_units": 4}          # one 50 MB L2 that holds everything; 4 SMs


def _distinct(lines) -> int:
    return len(np.unique(lines))


def test_igemm_fast_persistent_reads_and_writes_every_tile_once():
    kernel = KERNELS["igemm_fast"]
    tiles = {**FAST_TILES, "PERSISTENT": 1}
    result = simulate_job(kernel, SHAPE, tiles, Remap(SWIZZLES["grouped"], 1, 2), BIG, line_bytes=32)
    (model,) = kernel.launch_models(SHAPE, tiles, 32)
    assert result.num_programs == 4                     # min(33 tiles, 4 SMs)
    assert result.read_hits + result.read_misses == model.loads.num_accesses
    assert result.read_misses == _distinct(model.loads.lines)   # everything fits: one miss per line
    # The output, 2 x 9 x 9 x 40 fp16 = 12960 B = 405 sectors: each misses once.  A pixel's
    # row is 80 B, so tiles share sectors: the model's other store lookups hit.
    assert result.write_misses == 405
    assert result.write_hits + result.write_misses == len(model.epilogue.lines) == 648
    plain = simulate_job(kernel, SHAPE, FAST_TILES, Remap(SWIZZLES["grouped"], 1, 2), BIG, line_bytes=32)
    assert plain.num_programs == 33 and plain.accesses == result.accesses


def test_igemm_fast_split_k_with_sum_pass():
    kernel = KERNELS["igemm_fast"]
    tiles = {**FAST_TILES, "SPLIT_K": 2}
    result = simulate_job(kernel, SHAPE, tiles, Remap(SWIZZLES["identity"], 1, 8), BIG, line_bytes=32)
    assert result.num_programs == 66                    # 33 tiles x 2 splits
    # Partials: 2 x 162 x 40 fp32 = 51840 B = 1620 sectors, written once each.
    assert (result.write_hits, result.write_misses) == (0, 1620)
    (name_c, conv), (name_s, summed) = result.timed_run
    assert (name_c, name_s) == ("conv", "split_k_sum")
    assert conv.hits == result.hits and conv.misses == result.misses     # first launch: cold anyway
    # The sum pass: ceil(6480 / 1024) = 7 programs read every partial sector back (all in
    # L2: hits) and write the 405 output sectors (never touched before: misses; its
    # 2048 B chunks are whole sectors, so none is written twice).
    assert summed.num_programs == 7
    assert (summed.read_hits, summed.read_misses, summed.write_hits, summed.write_misses) == (1620, 0, 0, 405)
    metrics = result.as_metrics()
    assert metrics["sim.split_k_sum.l2_read_hit_rate"] == 100.0
    assert metrics["sim.timed.l2_hit_rate"] == pytest.approx(
        100 * (result.hits + 1620) / (result.accesses + 2025))


def test_igemm_fast_split_sum_reads_partials_back_in_the_same_launch():
    kernel = KERNELS["igemm_fast"]
    tiles = {**FAST_TILES, "SPLIT_K": 2, "SPLIT_SUM": 1}
    result = simulate_job(kernel, SHAPE, tiles, Remap(SWIZZLES["identity"], 1, 8), BIG, line_bytes=32)
    plain = simulate_job(kernel, SHAPE, {**tiles, "SPLIT_SUM": 0}, Remap(SWIZZLES["identity"], 1, 8), BIG, line_bytes=32)
    assert result.timed_run == ()                       # one launch
    # Besides the plain split launch: 33 tiles x 2 arrivals + 33 resets on 33 counters
    # (4 B each: 132 B from a 4096-aligned base, 5 sectors): 5 misses, 94 hits; the 1620
    # partial sectors read back (hits); the output written as in the unsplit launch
    # (405 misses, 648 - 405 = 243 hits on sectors shared by neighbouring tiles).
    assert result.read_hits - plain.read_hits == 1620 and result.read_misses == plain.read_misses
    assert result.write_misses - plain.write_misses == 5 + 405
    assert result.write_hits - plain.write_hits == 94 + 243


def test_igemm_fast_fold_pass_feeds_the_conv():
    # A 1 x 1 x 4 x 4 input, stride 2, 2x2 filter: folded to 1 x 2 x 2 x 8 (4 channels
    # padded to 8), one tap.  32 B sectors throughout.
    shape = ConvShape("f", N=1, C=1, H=4, W=4, F=16, R=2, S=2, stride=2, padding=0)
    tiles = {**FAST_TILES, "FOLD": 1}
    result = simulate_job("igemm_fast", shape, tiles, Remap(SWIZZLES["identity"], 1, 8), BIG, line_bytes=32)
    # The conv alone, cold: 1 tile, 1 step: the folded input (4 pixels x 8 channels x 2 B =
    # 64 B: 2 sectors), the packed weights (16 rows x 16 columns x 2 B: 16 sectors), then
    # the output (4 pixels x 16 filters x 2 B: 4 sectors).  Nothing hits.
    assert (result.read_hits, result.read_misses, result.write_hits, result.write_misses) == (0, 18, 0, 4)
    (fold_name, fold), (_, conv) = result.timed_run
    # The fold pass: one program gathers the 16 input elements (32 B: 1 sector) and writes
    # the 2 sectors of the folded input ...
    assert fold_name == "fold" and fold.num_programs == 1
    assert (fold.read_hits, fold.read_misses, fold.write_hits, fold.write_misses) == (0, 1, 0, 2)
    # ... which the conv then finds in L2.
    assert (conv.read_hits, conv.read_misses, conv.write_hits, conv.write_misses) == (2, 16, 0, 4)
    assert result.as_metrics()["sim.timed.l2_hit_rate"] == pytest.approx(100 * 2 / 25)


def test_set_hash_spreads_blocks_that_modulo_puts_in_one_set():
    # 16 sets x 1 way of 32 B sectors (4 per 128 B block, so 4 groups of 4 sets).  Lines 0 and
    # 16 are sector 0 of blocks 0 and 4: modulo 16 both go to set 0 and evict each other; the
    # hash sends block 0 to group 0 and block 4 to group 1 (set 4), so the second pass hits both.
    from dataclasses import replace

    from harness.profilers.sim.address import set_index

    tiny = machine(slots=1, l2_lines=16, ways=1, line=32)
    model = synthetic([[[0], [16], [0], [16]]], line=32)
    assert simulate_l2(model, np.arange(1), tiny).read_hits == 0
    hashed = simulate_l2(model, np.arange(1), replace(tiny, set_hash=True))
    assert (hashed.read_hits, hashed.read_misses) == (2, 2)
    assert set_index(np.array([0, 16, 1, 17]), 16, 4, False).tolist() == [0, 0, 1, 1]
    assert set_index(np.array([0, 16, 1, 17]), 16, 4, True).tolist() == [0, 4, 1, 5]   # a block's sectors side by side
    # A stride-2 stream (every other 512 B pixel, as a stride-2 1x1 conv reads its input) uses
    # half the sets by modulo and nearly all of them hashed.
    stream = np.array([p * 16 + k for p in range(0, 20000, 2) for k in range(16)])
    assert len(np.unique(set_index(stream, 4096, 4, False))) == 2048
    assert len(np.unique(set_index(stream, 4096, 4, True))) > 0.95 * 4096
    assert SimTarget.from_target({**H100, "l2_set_hash": True}).set_hash
    assert not SimTarget.from_target(H100).set_hash



def test_dispatch_gap_starts_the_first_wave_apart():
    # Two programs at once, both reading line 7 at step 0, a merge window of 0.5 steps.  Dealt
    # together, pid 1's read is merged; dealt 1 step apart (dispatch_gap), it is an L2 hit.
    from dataclasses import replace

    model = synthetic([[[7], [10]], [[7], [11]]])
    two = replace(machine(slots=2), coalesce_window=0.5, step_jitter=0.0)
    together = simulate_l2(model, np.arange(2), replace(two, dispatch_gap=0.25))
    assert (together.read_hits, together.merged_reads) == (0, 1)
    apart = simulate_l2(model, np.arange(2), replace(two, dispatch_gap=1.0))
    assert (apart.read_hits, apart.merged_reads) == (1, 0)
    with pytest.raises(ValueError, match="dispatch_gap=-1.0 must be >= 0"):
        replace(two, dispatch_gap=-1.0)
    record = {**H100, "sim_calibration": {"dispatch_gap": 0.01}}
    assert SimTarget.from_target(record).dispatch_gap == 0.01


def test_scattered_items_marks_a_jump_from_the_predecessors_blocks():
    from harness.profilers.sim.dispatch import scattered_items

    # A 2 x 3 grid, operand rows: the input's M block (0, 1), the weights' N block (2, 3, 4).
    rows = np.array([[m, 2 + n] for m in range(2) for n in range(3)], dtype=np.int64)
    # Launch order: each item reads the same or a neighbouring block of each operand as the
    # one before, except where the row of tiles wraps (N block 4 -> 2).
    assert scattered_items(np.arange(6), rows).tolist() == [0, 0, 0, 1, 0, 0]
    # Column-major on two rows: M 0 <-> 1 and N + 1, neighbours every time.
    assert scattered_items(np.array([0, 3, 1, 4, 2, 5]), rows).tolist() == [0] * 6
    # (1, 4) -> (0, 2): N jumps by 2; (0, 2) -> (1, 3): neighbours.
    assert scattered_items(np.array([5, 0, 4]), rows).tolist() == [0, 1, 0]


def test_scatter_jitter_puts_a_far_reader_out_of_step():
    # Three programs at once (one cluster, merge window 0.2 steps, no step jitter), tile t
    # reading its own line 10 + t, then the shared line 7.  In launch order (or with no scatter
    # jitter) they read 7 together: one miss, two merged.  With tiles 2, 0, 1, pid 1 reads tile
    # 0 after pid 0's tile 2: a jump, so its first step lasts 1 + 0.9 u (u = 0.3275, its hash)
    # and it reads 7 at 1.295, outside pid 0's burst: a lookup (a hit) that opens a new burst,
    # and pid 2's read at 1.0 is outside that one too: another hit.
    from dataclasses import replace

    model = synthetic([[[10 + t], [7]] for t in range(3)])
    three = replace(machine(slots=3), coalesce_window=0.2, step_jitter=0.0)
    for table, jitter in ((np.arange(3), 0.9), (np.array([2, 0, 1]), 0.0)):
        r = simulate_l2(model, table, replace(three, scatter_jitter=jitter))
        assert (r.read_hits, r.read_misses, r.merged_reads) == (0, 4, 2)
    r = simulate_l2(model, np.array([2, 0, 1]), replace(three, scatter_jitter=0.9))
    assert (r.read_hits, r.read_misses, r.merged_reads) == (2, 4, 0)
    with pytest.raises(ValueError, match="scatter_jitter=0.9 must be >= 0, and with step_jitter=0.2 below 1"):
        replace(three, step_jitter=0.2, scatter_jitter=0.9)
    assert SimTarget.from_target({**H100, "sim_calibration": {"scatter_jitter": 0.3}}).scatter_jitter == 0.3


def test_prediction_error_gives_bands_with_their_coverage_else_mean_errors():
    # A record with bands: the ± are the kernel family's bands (else all cells'), said to cover 90 %.
    record = {"validated_on": "H100 ncu, 9 cells not fitted", "hit_rate_mae": {"all": 2.0}, "delta_mae": {"all": 1.0},
              "band_coverage": 0.9, "hit_rate_band": {"all": 5.0, "igemm": 4.0}, "delta_band": {"all": 3.0},
              "read_hit_rate_band": {"all": float("inf")}}
    err = bands.prediction_error({"name": "h100", "sim_calibration": record}, "igemm")
    assert (err.hit_rate, err.delta, err.read_hit_rate, err.coverage) == (4.0, 3.0, None, 0.9)
    assert err.validated == "validated on H100 ncu, 9 cells not fitted; ± covers 90 %"
    # An older record (mean absolute errors only): those, and no coverage claimed.
    old = {k: v for k, v in record.items() if not k.endswith("band") and k != "band_coverage"}
    err = bands.prediction_error({"name": "h100", "sim_calibration": old}, "igemm")
    assert (err.hit_rate, err.delta, err.coverage) == (2.0, 1.0, None)
    assert err.validated == "validated on H100 ncu, 9 cells not fitted"
    # Never validated: nothing to quote.
    err = bands.prediction_error({"name": "mi300x"}, "igemm")
    assert err.hit_rate is None and err.validated == "not validated on mi300x hardware"


def test_order_blind_grids_are_those_whose_tiles_are_alike():
    # One column of a 1x1 conv: every tile reads the one weight block and input rows of its
    # own (64 B pixels, whole sectors) -- no order changes what the model sees.
    from kernels.problem import ConvShape
    from swizzles import get_swizzle

    target = {"name": "t", "num_xcds": 1, "compute_units": 4, "l2_bytes": 65536, "l2_ways": 4,
              "l2_line_bytes": 32, "l2_domains": 1, "occupancy": 1}
    tiles = {"BLOCK_M": 16, "BLOCK_N": 16, "BLOCK_K": 16}

    def job(swizzle, **shape):
        s = ConvShape(name="s", **{"N": 1, "C": 32, "H": 8, "W": 8, "F": 16, "R": 1, "S": 1, **shape})
        return simulate_job("igemm", s, tiles, Remap(get_swizzle(swizzle), 1, 8), target)

    column = [job(order) for order in ("identity", "scatter", "colmajor")]
    assert all(r.order_blind for r in column)
    assert len({(r.hits, r.misses) for r in column}) == 1          # the same traffic in every order
    assert not job("identity", F=32).order_blind                   # two columns share each input block
    assert not job("identity", R=3, S=3, padding=1).order_blind    # a 3x3's input blocks overlap (halo)
    assert job("identity", H=4, W=4, F=64).order_blind             # one row of tiles: one input block


def test_layer_class_misaligned_then_one_wave_then_regular():
    from kernels.problem import ConvShape

    def shape(C, F=64, dtype="float16"):
        return ConvShape(name="s", N=1, C=C, H=8, W=8, F=F, R=1, S=1, stride=1, padding=0, dtype=dtype)

    # 24 fp16 channels = 48 B: a pixel's row straddles 32 B sectors, whatever the grid; so do 40 filters
    assert bands.layer_class(shape(24), 32, num_work=10_000, resident=264) == "misaligned"
    assert bands.layer_class(shape(256, F=40), 32, 10, 264) == "misaligned"
    # 96 channels = 192 B, six whole sectors (a partial K step, but aligned rows): not misaligned
    assert bands.layer_class(shape(96), 32, 10_000, 264) == "regular"
    # ... but 192 B is not a whole number of MI300X's 128 B lines
    assert bands.layer_class(shape(96), 128, 10_000, 264) == "misaligned"
    # aligned: one wave when every work item is in flight at once
    assert bands.layer_class(shape(256), 32, num_work=264, resident=264) == "one-wave"
    assert bands.layer_class(shape(256), 32, num_work=265, resident=264) == "regular"


def test_a_job_carries_its_layer_class_and_that_classes_band():
    # simulate_job classes the job from its grid and the target's residency; prediction_error
    # then takes that class's bands, and the family's (or all cells') for a class without them.
    from kernels.problem import ConvShape
    from swizzles import get_swizzle

    target = {"name": "t", "num_xcds": 1, "compute_units": 4, "l2_bytes": 65536, "l2_ways": 4,
              "l2_line_bytes": 32, "l2_domains": 1, "occupancy": 1}
    tiles = {"BLOCK_M": 16, "BLOCK_N": 16, "BLOCK_K": 16}
    small = ConvShape(name="s", N=1, C=16, H=4, W=4, F=16, R=1, S=1, stride=1, padding=0)    # 1 program
    wide = ConvShape(name="w", N=1, C=16, H=8, W=8, F=32, R=1, S=1, stride=1, padding=0)     # 8 programs
    misaligned = ConvShape(name="r", N=1, C=24, H=8, W=8, F=32, R=1, S=1, stride=1, padding=0)   # 48 B rows
    got = [simulate_job("igemm", s, tiles, Remap(get_swizzle("identity"), 1, 8), target).layer_class
           for s in (small, wide, misaligned)]
    assert got == ["one-wave", "regular", "misaligned"]
    # A persistent grid of 4 programs (one per SM) walking 8 tiles is not one wave
    fast = {**tiles, "SPLIT_K": 1, "PACK_K": 0, "NCHW_IN": 0, "PERSISTENT": 1, "TMA": 0, "TMA_STORE": 0, "FOLD": 0,
            "SPLIT_SUM": 0}
    persistent = simulate_job("igemm_fast", wide, fast, Remap(get_swizzle("identity"), 1, 8), target)
    assert persistent.num_programs == 4 and persistent.layer_class == "regular"
    record = {"validated_on": "X ncu", "hit_rate_mae": {"all": 2.0}, "band_coverage": 0.9,
              "hit_rate_band": {"all": 5.0}, "delta_band": {"all": 4.0},
              "class_bands": {"regular": {"cells": 20, "hit_rate": 3.0, "delta": 2.0}, "misaligned": {"cells": 9, "hit_rate": 20.0}}}
    t = {"name": "t", "sim_calibration": record}
    regular = bands.prediction_error(t, "igemm", "regular")
    assert (regular.hit_rate, regular.delta) == (3.0, 2.0)
    assert regular.validated == "validated on X ncu; ± covers 90 % of regular layers"
    assert (bands.prediction_error(t, "igemm", "misaligned").hit_rate, bands.prediction_error(t, "igemm", "misaligned").delta) == (20.0, 4.0)
    assert bands.prediction_error(t, "igemm", "one-wave").hit_rate == 5.0     # no bands of its own
    assert bands.prediction_error(t, "igemm").validated == "validated on X ncu; ± covers 90 %"
    # An order-blind grid's deltas take the bands of such grids; its levels its class's.
    record["class_bands"]["order-blind"] = {"cells": 30, "delta": 1.5, "read_delta": 3.5}
    blind = bands.prediction_error(t, "igemm", "regular", blind=True)
    assert (blind.hit_rate, blind.delta, blind.read_delta) == (3.0, 1.5, 3.5)
    assert blind.validated == "validated on X ncu; ± covers 90 % of regular layers (Δ: of order-blind grids)"
    assert bands.prediction_error(t, "igemm", "regular").delta == 2.0
    # A family's own bands for a class come first, measure by measure, then the class's.
    record["class_bands"]["igemm_fast/misaligned"] = {"cells": 12, "hit_rate": 30.0, "delta": 6.0}
    fast_err = bands.prediction_error(t, "igemm_fast", "misaligned")
    assert (fast_err.hit_rate, fast_err.delta) == (30.0, 6.0)
    assert fast_err.validated == "validated on X ncu; ± covers 90 % of igemm_fast's misaligned layers"
    assert bands.prediction_error(t, "igemm", "misaligned").hit_rate == 20.0
    record["class_bands"]["igemm_fast/misaligned"] = {"cells": 12, "hit_rate": 30.0}   # no delta band of its own
    assert bands.prediction_error(t, "igemm_fast", "misaligned").delta == 4.0   # neither the class: the family's


# -----------------------------------------------------------
# Requests of 128 B (NVIDIA's L1): split loads, stores per output row.

def test_a_run_across_128_bytes_opens_a_second_request_at_the_boundary():
    from kernels.access import _distinct_lines, _split_heads

    # One group, three runs: bytes 96..191 (sectors 3, 4, 5: crosses 128 at sector 4),
    # 256..383 (sectors 8-11, one aligned line) and 300..331 (sectors 9, 10: crosses nothing).
    start = np.array([[[96, 256, 300]]], dtype=np.int64)
    length = np.array([[[96, 128, 32]]], dtype=np.int64)
    counts, lines = _distinct_lines(start, length, 32)
    assert counts.tolist() == [7] and lines.tolist() == [3, 4, 5, 8, 9, 10, 11]
    heads = _split_heads(start, length, 32, 128, counts, lines)
    assert heads.tolist() == [False, True, False, False, False, False, False]


def test_a_split_request_counts_one_more_hit_when_its_line_misses():
    # Tile 0 reads sectors 3, 4, 5 (a run from byte 96 to 191, split at 128: sector 4 opens the
    # second request); tile 1 reads them again.  Cold: 3 misses and the split's extra hit;
    # then 3 hits and no extra (the split head hit).
    from dataclasses import replace

    model = synthetic([[[3, 4, 5]], [[3, 4, 5]]], line=32)
    model = replace(model, split_heads=np.array([False, True, False] * 2))
    result = simulate_l2(model, np.arange(2), machine(line=32))
    assert (result.read_hits, result.read_misses) == (1 + 3, 3)
    plain = simulate_l2(replace(model, split_heads=None), np.arange(2), machine(line=32))
    assert (plain.read_hits, plain.read_misses) == (3, 3)


def test_each_output_rows_store_is_its_own_request():
    # F = 24 fp16: a 48 B output row; rows share sectors (row 1 starts at byte 48, inside
    # sector 1).  With 128 B requests each row's store looks up its own 2 sectors: 2 per row,
    # against 48 / 32 = 1.5 distinct sectors per row.  Everything fits: 1 tile column.
    shape = ConvShape("f24", N=2, C=16, H=9, W=9, F=24, R=1, S=1, stride=1, padding=0)
    tiles = {"BLOCK_M": 16, "BLOCK_N": 32, "BLOCK_K": 16}
    target = {**BIG, "l2_line_bytes": 32, "l2_writes": "hit", "l2_request_bytes": 128}
    rows = 2 * 9 * 9
    per_row = simulate_job("igemm", shape, tiles, Remap(SWIZZLES["identity"], 1, 8), target)
    distinct = simulate_job("igemm", shape, tiles, Remap(SWIZZLES["identity"], 1, 8), {**target, "l2_request_bytes": 0})
    assert per_row.write_hits + per_row.write_misses == 2 * rows
    assert distinct.write_hits + distinct.write_misses == rows * 48 // 32
    # The loads' runs of 32 B (16 channels) sit inside 128 B: no split, the same reads.
    assert (per_row.read_hits, per_row.read_misses) == (distinct.read_hits, distinct.read_misses)


def test_a_store_is_one_lookup_per_request_the_first_of_a_line_a_miss():
    # MI300X (l2_store_request_bytes: 32): F = 64 fp16 output rows of 128 B, one line each; a
    # row's store is four 32 B requests: the first misses and allocates the line, three hit.
    shape = ConvShape("f64", N=1, C=16, H=4, W=4, F=64, R=1, S=1, stride=1, padding=0)
    tiles = {"BLOCK_M": 16, "BLOCK_N": 64, "BLOCK_K": 16}
    per_line = simulate_job("igemm", shape, tiles, Remap(SWIZZLES["identity"], 8, 8), MI300X, occupancy=1)
    pieces = simulate_job("igemm", shape, tiles, Remap(SWIZZLES["identity"], 8, 8),
                          {**MI300X, "l2_store_request_bytes": 32}, occupancy=1)
    rows = 16
    assert (per_line.write_hits, per_line.write_misses) == (0, rows)
    assert (pieces.write_hits, pieces.write_misses) == (3 * rows, rows)
    assert (pieces.read_hits, pieces.read_misses) == (per_line.read_hits, per_line.read_misses)
    # a line no larger than a request is one lookup anyway (line_bytes=32 counts sectors)
    assert SimTarget.from_target({**MI300X, "l2_store_request_bytes": 32}, 1, 32).store_request_bytes == 0


@pytest.mark.parametrize("size", [48, 128, 256, -32])
def test_a_store_request_must_divide_the_line(size):
    with pytest.raises(ValueError, match=f"l2_store_request_bytes={size} must divide the 128 B line"):
        SimTarget.from_target({**MI300X, "l2_store_request_bytes": size}, 1)


# -----------------------------------------------------------
# Register spills: stores to local memory that reach the L2 (NVIDIA).

def test_spilled_lines_are_write_hits_counted_in_both_partitions_when_far():
    from dataclasses import replace

    nvidia = replace(machine(line=32), writes_hit=True)
    assert replay.spill_lookups(1000, nvidia) == 32                 # ceil(1000 / 32) lines, one partition
    assert replay.spill_lookups(1000, replace(nvidia, l2_partitions=2)) == 32 + 16   # half homed far: twice
    assert replay.spill_lookups(1000, machine(line=32)) == 0        # stores that allocate: not modelled
    assert replay.spill_lookups(0, nvidia) == 0


def test_a_job_that_spills_adds_its_lines_to_every_work_items_stores():
    # 33 tiles, each spilling 256 threads x 136 B = 34816 B = 1088 sectors, half of them homed
    # in the far partition: 1632 more write hits per tile; the reads do not change.
    target = {**BIG, "l2_line_bytes": 32, "l2_writes": "hit", "l2_partitions": 2}
    plain = simulate_job("igemm", SHAPE, IGEMM_TILES, Remap(SWIZZLES["identity"], 1, 8), target)
    spilled = simulate_job("igemm", SHAPE, IGEMM_TILES, Remap(SWIZZLES["identity"], 1, 8), target, spill_bytes=34816)
    assert spilled.write_hits - plain.write_hits == 33 * (1088 + 544)
    assert spilled.write_misses == plain.write_misses
    assert (spilled.read_hits, spilled.read_misses) == (plain.read_hits, plain.read_misses)


def test_step_phase_mixed_spreads_launch_neighbours_phases_in_one_wave_launches():
    # Three programs at once in one cluster (window 0.16 steps, step jitter 0.2), all reading
    # line 7 at step 0 (together: pid 0 misses, pids 1 and 2 merge) and line 8 at step 1.  With
    # linear phases, pid 1 steps in antiphase to pid 0 (its step 0 lasts 1.0655 against
    # 0.8753) and opens a burst of its own; pid 2 (0.8556) is 0.21 from it: a lookup too.  With
    # mixed phases (0.8753, 1.1226, 0.9698) pid 2 lies 0.153 from pid 1's burst: merged.
    from dataclasses import replace

    from harness.profilers.sim.target import STEP_HASH

    model = synthetic([[[7], [8]] for _ in range(3)])
    three = replace(machine(slots=3), coalesce_window=0.16)
    counts = {}
    for phase in ("linear", "mixed", "one_wave"):
        r = simulate_l2(model, np.arange(3), replace(three, step_phase=phase))
        counts[phase] = (r.read_hits, r.read_misses, r.merged_reads)
    assert counts["linear"] == (2, 2, 2)
    assert counts["mixed"] == counts["one_wave"] == (1, 2, 3)             # 3 items on 3 slots: one wave
    default = simulate_l2(model, np.arange(3), three)                      # linear is the default
    assert (default.read_hits, default.read_misses, default.merged_reads) == counts["linear"]
    # Two slots for three items (two waves): one_wave keeps the linear phases.
    two = replace(machine(slots=2), coalesce_window=0.16)
    linear, one_wave = (simulate_l2(model, np.arange(3), replace(two, step_phase=p)) for p in ("linear", "one_wave"))
    assert (one_wave.read_hits, one_wave.merged_reads) == (linear.read_hits, linear.merged_reads)
    assert [replace(two, step_phase=p).phase_shift(n) for p in ("linear", "mixed", "one_wave")
            for n in (2, 3)] == [0, 0, 16, 16, 16, 0]
    assert (STEP_HASH >> 16) % 65536 == 40503 and STEP_HASH % 65536 == 31153   # pid 1's phases, in 2^-16 cycles
    assert SimTarget.from_target({**H100, "sim_calibration": {"step_phase": "one_wave"}}).step_phase == "one_wave"
    assert SimTarget.from_target(H100).step_phase == "linear"
    with pytest.raises(ValueError, match="step_phase='random' is invalid; valid: linear, mixed, one_wave, one_wave_bulk"):
        replace(two, step_phase="random")


def test_step_phase_one_wave_bulk_mixes_only_launches_that_load_an_operand_in_bulk():
    # The three programs of the test above (one wave, window 0.16): with one_wave_bulk, a
    # launch whose operand is loaded by a tensor descriptor gets mixed phases (pids 1 and 2
    # merge), one without keeps the linear phases, as does a bulk launch of two waves.
    from dataclasses import replace

    model = synthetic([[[7], [8]] for _ in range(3)])
    bulk_model = replace(model, operand_bulk=(True,))
    three = replace(machine(slots=3), coalesce_window=0.16, step_phase="one_wave_bulk")

    def counts(m, target):
        r = simulate_l2(m, np.arange(3), target)
        return (r.read_hits, r.read_misses, r.merged_reads)

    assert counts(model, three) == counts(model, replace(three, step_phase="linear")) == (2, 2, 2)
    assert counts(bulk_model, three) == counts(bulk_model, replace(three, step_phase="one_wave")) == (1, 2, 3)
    two = replace(machine(slots=2), coalesce_window=0.16, step_phase="one_wave_bulk")
    assert counts(bulk_model, two) == counts(bulk_model, replace(two, step_phase="linear"))
    assert [two.phase_shift(n, bulk) for bulk in (False, True) for n in (2, 3)] == [0, 0, 16, 0]
    assert SimTarget.from_target({**H100, "sim_calibration": {"step_phase": "one_wave_bulk"}}).step_phase == "one_wave_bulk"


def test_numba_cache_is_named_by_every_simulator_module(tmp_path):
    """Numba checks a cached function against its own file only; the simulator's cache folder
    is named by all its modules, so editing one that another's cached function calls
    (dispatch.py from replay.py) compiles afresh instead of running the old code."""
    import os
    import shutil
    from pathlib import Path

    import numba

    from harness.profilers.sim import lru

    if HAVE_NUMBA and "NUMBA_CACHE_DIR" not in os.environ:
        assert numba.config.CACHE_DIR == str(lru.numba_cache_dir())
    copy = tmp_path / "sim"
    shutil.copytree(Path(lru.__file__).parent, copy, ignore=shutil.ignore_patterns("__pycache__"))
    before = lru.numba_cache_dir(copy)
    assert before.parent == copy / "__pycache__" and before == lru.numba_cache_dir(copy)
    dispatch = copy / "dispatch.py"
    dispatch.write_text(dispatch.read_text() + "\n# an edit\n")
    assert lru.numba_cache_dir(copy) != before
