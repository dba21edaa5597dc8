"""The replay: a launch's accesses played through the simulated caches, compiled with numba.

Resident programs advance in lock step, round-robin: in each round every XCD in turn, and in
each XCD every resident program in turn (in slot order), performs one K-step of its work item
(:func:`_step`: the step's distinct lines of each operand, input lines first).  The turn of an
item's last step then performs its epilogue (:func:`_finish_item`: the output tile's stores;
split-K: the partial's stores, the arrival counter and, for the last split of a tile, the
partials read back and the output stored), and the slot takes its next item or program
(:mod:`harness.profilers.sim.dispatch`).

The order of the lookups is the rounds' (the caches' LRU order); the clocks only decide which
reads are merged.  With a merge window ``> 0`` a line's requests form bursts (a burst begins
with a request more than the window, by the clocks, from the current one's first), and a read
by a merge unit that already requested the line in its burst is merged with that request
before the L2 (no lookup).  With ``merge_cap > 0`` the merge state counts the burst's requests
instead: a read merges while fewer than ``merge_cap`` share the burst's lookup, and the next
one is a lookup that opens a new burst.  Window, cap and merge unit are per operand
(:meth:`~harness.profilers.sim.target.SimTarget.operand_merge`: TMA-loaded operands may have
rules of their own, :class:`~harness.profilers.sim.target.BulkMerge`).

The jitted functions take the NamedTuples of :mod:`~harness.profilers.sim.dispatch` and
:mod:`~harness.profilers.sim.caches` and the :class:`Trace` below (numba takes no dataclasses);
:func:`simulate_l2` builds them from a :class:`~harness.profilers.sim.target.SimTarget`.
"""
from __future__ import annotations

import time
from typing import NamedTuple

import numpy as np

from harness.profilers.sim.address import set_index
from harness.profilers.sim.caches import CacheState, L2, State, l2_of, lookups, read_miss, state_of
from harness.profilers.sim.dispatch import (CLOCK_TICKS, Clocks, Layout, clocks_of, first_wave, layout_of, new_slots,
                                            next_item, refill_by_clock, work_of)
from harness.profilers.sim.lru import ENGINE, jit, lru_access, tag_dtype
from harness.profilers.sim.result import SimResult, rate
from harness.profilers.sim.target import STEP_HASH, SimTarget
from kernels.access import AccessList, AccessModel, LaunchModel


class Loads(NamedTuple):
    """The K loop's reads: segment ``tile_rows[tile, o] * num_steps + step`` of ``offsets``
    holds the lines operand ``o`` of ``tile`` reads in K-step ``step``."""

    tile_rows: np.ndarray    # (num_tiles, operands) int64: the block (global row) each tile reads
    offsets: np.ndarray      # (segments + 1,) int64
    lines: np.ndarray        # line ids, the tags' type
    sets: np.ndarray         # each line's L2 set, int32
    split_heads: np.ndarray  # bool per line: the second request of a load split at request_bytes


class Accesses(NamedTuple):
    """Accesses outside the K loop, segment ``k`` of ``offsets`` per epilogue key or tile."""

    offsets: np.ndarray
    lines: np.ndarray
    sets: np.ndarray
    writes: np.ndarray       # bool per line: a store (else a read)


class Trace(NamedTuple):
    """Every access of a launch: the K loop's reads, each work item's epilogue (key ``tile *
    splits + split``) and each tile's last-arrival accesses (key ``tile``)."""

    loads: Loads
    epilogue: Accesses
    last: Accesses


class Machine(NamedTuple):
    """The simulated machine, for the jitted replay."""

    layout: Layout
    l2: L2
    clocks: Clocks
    phase_shift: int   # bits the step hash drops from pid * STEP_HASH (SimTarget.phase_shift)


@jit
def _replay(work, trace, machine, state):
    """Replay every program of the launch ``work`` until none is left."""
    layout, by_clock = machine.layout, machine.clocks.refill_by_clock
    slots = new_slots(work, layout, machine.clocks.dispatch_gap)
    active = first_wave(work, layout, slots)
    while active > 0:
        active -= _round(work, trace, machine, state, slots)
        if by_clock:
            active -= refill_by_clock(work, layout, slots)


@jit
def _round(work, trace, machine, state, slots):
    """One round: every XCD in turn, and in each every resident program in turn, reads its next
    K-step's lines (the hot loop: :func:`~harness.profilers.sim.caches.lookups`' read path, inline) and advances its clock; a
    program whose item ends performs its epilogue and takes its next item or leaves the slot.
    Returns how many slots went idle for good.  The tuples' arrays are taken out once here, not
    per step: each extraction from a tuple is a reference count taken and dropped."""
    layout, l2, clocks = machine.layout, machine.l2, machine.clocks
    tile_rows, offsets, lines, line_sets, split_heads = trace.loads
    tags, last, counts, op_window = state.l2_tags, state.last, state.counts, clocks.op_window
    pids, steps, stops, tiles, clock, rings = slots.pid, slots.step, slots.stop, slots.tile, slots.t, slots.ring
    ways, op_cap, op_unit, num_steps = l2.ways, clocks.op_cap, clocks.op_unit, work.num_steps
    works, item_jitter, num_tiles = slots.work, clocks.item_jitter, len(work.table)
    shift = machine.phase_shift
    idle = 0
    for x in range(layout.num_xcds):
        dom = layout.domain_of_xcd[x]
        for sl in range(layout.slots):
            pid = pids[x, sl]
            if pid < 0:
                continue
            step = steps[x, sl]
            if step < stops[x, sl]:
                part = layout.partition_of_slot[sl]
                l2_base = (dom * l2.partitions + part) * l2.sets   # the partition it reads through
                tile = tiles[x, sl]
                hits = 0
                misses = 0
                merged = 0
                tq = np.int64(clock[x, sl] * CLOCK_TICKS)          # the clock in ticks, as the merge state keeps it
                for o in range(tile_rows.shape[1]):
                    seg = tile_rows[tile, o] * num_steps + step
                    wq, cap = op_window[o], op_cap[o]
                    bit = np.int32(1) << op_unit[o, sl]            # the reader's merge unit, likewise
                    for i in range(offsets[seg], offsets[seg + 1]):
                        line = lines[i]
                        near = wq > 0 and _merged(line, tq, wq, bit, cap, last)
                        if lru_access(tags, (l2_base + line_sets[i]) * ways, ways, line):
                            if near:
                                merged += 1
                            else:
                                hits += 1
                        else:
                            misses += 1
                            if split_heads[i]:                     # a split request: ncu counts one more hit
                                hits += 1
                            read_miss(line, line_sets[i], x, dom, part, l2, state)
                counts[x, 0] += hits
                counts[x, 1] += misses
                counts[x, 4] += merged
                k = rings[x, sl]                                   # the program's step count (its ring position)
                u = ((((pid * STEP_HASH) >> shift) + k * 40503 + 12345) % 65536) / 32768.0 - 1.0   # the step's length
                rings[x, sl] = k + 1
                clock[x, sl] = clock[x, sl] + 1.0 + item_jitter[works[x, sl] % num_tiles] * u
                step += 1
                steps[x, sl] = step
            if step < stops[x, sl]:
                continue
            _finish_item(x, sl, work, trace, machine, state, slots)
            idle += next_item(x, sl, work, layout, clocks.refill_by_clock, slots)
    return idle


@jit
def _merged(line, tq, wq, bit, merge_cap, last):
    """Whether a read of ``line`` at ``tq`` (ticks) by merge unit ``bit`` merges with a request
    of the line's current burst (window ``wq`` ticks), updating the merge state ``last``."""
    if abs(tq - last[line, 1]) < wq:
        if merge_cap == 0:
            near = (last[line, 0] & bit) != 0
            last[line, 0] |= bit
            return near
        if last[line, 0] < merge_cap:                  # the lookup serves one more
            last[line, 0] += 1
            return True
        last[line, 0] = 1                              # that lookup is full: a new one, a new burst
        last[line, 1] = tq
        return False
    last[line, 0] = bit if merge_cap == 0 else 1       # the first request of a new burst
    last[line, 1] = tq
    return False


@jit
def _finish_item(x, sl, work, trace, machine, state, slots):
    """Slot (x, sl)'s work item is done: its epilogue, and, when it is the last split of its
    tile to arrive, the tile's last-arrival accesses."""
    dom = machine.layout.domain_of_xcd[x]
    part = machine.layout.partition_of_slot[sl]
    tile = slots.tile[x, sl]
    lookups(trace.epilogue, tile * work.splits + slots.work[x, sl] // len(work.table), x, dom, part,
             machine.l2, state)
    slots.arrived[tile] += 1
    if slots.arrived[tile] == work.splits:
        lookups(trace.last, tile, x, dom, part, machine.l2, state)


#: Line ids whose L2 sets :func:`trace_of` computes at once.
_SET_CHUNK = 1 << 20


def trace_of(launch: LaunchModel, target: SimTarget, dtype) -> Trace:
    """``launch``'s accesses with line ids of type ``dtype`` and their L2 sets on ``target``."""
    block_lines = l2_of(target).block_lines

    def sets(lines: np.ndarray) -> np.ndarray:   # in chunks: set_index's int64 temporaries stay small
        out = np.empty(len(lines), dtype=np.int32)
        for lo in range(0, len(lines), _SET_CHUNK):
            out[lo:lo + _SET_CHUNK] = set_index(lines[lo:lo + _SET_CHUNK], target.l2.num_sets, block_lines,
                                                target.set_hash)
        return out

    def accesses(a: AccessList) -> Accesses:
        return Accesses(a.offsets, a.lines.astype(dtype, copy=False), sets(a.lines), a.writes)

    loads = launch.loads
    split_heads = (loads.split_heads if loads.split_heads is not None
                   else np.zeros(len(loads.lines), dtype=np.bool_))
    return Trace(Loads(loads.tile_rows, loads.offsets, loads.lines.astype(dtype, copy=False), sets(loads.lines),
                       split_heads),
                 accesses(launch.epilogue), accesses(launch.last))


def simulate_l2(model: AccessModel | LaunchModel, table: np.ndarray, target: SimTarget,
                caches: CacheState | None = None, spill_bytes: int = 0) -> SimResult:
    """Replay a launch on the machine ``target``: the launch-order tile ``t`` of every work
    item computes tile ``table[t]``; a bare :class:`AccessModel` is a launch of one program
    per tile with loads only.  ``caches``: start from (and leave in) this state instead of
    cold caches.  ``spill_bytes``: bytes each work item stores to local memory (the compiled
    kernel's register spills, :func:`spill_lookups`).  The model's line size must equal the L2's."""
    launch = model if isinstance(model, LaunchModel) else LaunchModel.loads_only(model)
    table = _checked_table(launch, table, target)
    # Line ids and tags share one type, int32 whenever the ids fit (half the memory traffic).
    dtype = tag_dtype(launch.max_line) if caches is None else caches.l2_tags.dtype
    caches = caches if caches is not None else CacheState.cold(target, dtype)
    loads = launch.loads
    num_programs = launch.schedule.num_programs(target.num_xcds * target.cus_per_xcd)
    clocks = clocks_of(target, table, loads.tile_rows, loads.operand_bulk, num_programs)
    # The merge state: one entry per line when some operand merges, else a single unused one.
    state = state_of(caches, target.num_xcds, launch.max_line + 1 if clocks.op_window.max(initial=0.0) > 0 else 1)
    machine = Machine(layout_of(target, num_programs), l2_of(target), clocks,
                      target.phase_shift(launch.schedule.num_work, any(loads.operand_bulk)))
    trace = trace_of(launch, target, dtype)
    started = time.perf_counter()
    _replay(work_of(launch, table, num_programs), trace, machine, state)
    replay_s = time.perf_counter() - started
    state.counts[:, 2] += spill_lookups(spill_bytes, target) * np.bincount(
        np.arange(launch.schedule.num_work) % target.num_xcds, minlength=target.num_xcds)
    return _result(launch.name, state, target, num_programs, replay_s)


def _checked_table(launch: LaunchModel, table: np.ndarray, target: SimTarget) -> np.ndarray:
    """``table`` as contiguous int64, after checking it and the line size against ``launch``."""
    loads, schedule = launch.loads, launch.schedule
    if loads.line_bytes != target.line_bytes:
        raise ValueError(f"access model uses {loads.line_bytes} B lines, the simulated L2 "
                         f"{target.line_bytes} B")
    table = np.ascontiguousarray(table, dtype=np.int64)
    if len(table) != schedule.num_tiles:
        raise ValueError(f"remap table has {len(table)} entries for {schedule.num_tiles} tiles")
    if len(table) and (table.min() < 0 or table.max() >= loads.num_tiles):
        raise ValueError(f"remap table sends a program outside the {loads.num_tiles} tiles")
    return table


def spill_lookups(spill_bytes: int, target: SimTarget) -> int:
    """Write lookups in the L2 of one work item's register spills: ``spill_bytes`` stored to
    local memory, each line once, all hits, and a line homed in another partition looked up in
    both (as any store; :func:`harness.profilers.sim.caches.lookups`), so ``1 + (partitions - 1) /
    partitions`` lookups per line.  Only where stores are hits (NVIDIA); 0 elsewhere.  The
    spilled lines take no room in the simulated L2."""
    if spill_bytes <= 0 or not target.writes_hit:
        return 0
    lines = -(-int(spill_bytes) // target.line_bytes)
    p = target.l2_partitions
    return lines + lines * (p - 1) // p


def _result(name: str, state: State, target: SimTarget, num_programs: int, replay_s: float) -> SimResult:
    """Sum the replay's per-XCD counters into a :class:`SimResult`."""
    counts, mall_counts = state.counts, state.mall_counts
    domain_of_xcd = target.domain_of_xcd()
    # All lookups: the reads through each program's partition, the stores, and the reads looked
    # up again in a far home partition (ncu counts those too, as srcunit_ltcfabric).
    xcd_hits = counts[:, 0] + counts[:, 2] + counts[:, 5]
    xcd_misses = counts[:, 1] + counts[:, 3] + counts[:, 6]
    domain_hits = np.bincount(domain_of_xcd, weights=xcd_hits, minlength=target.l2_domains).astype(np.int64)
    domain_misses = np.bincount(domain_of_xcd, weights=xcd_misses, minlength=target.l2_domains).astype(np.int64)
    hits, misses = int(xcd_hits.sum()), int(xcd_misses.sum())
    read_misses = int(counts[:, 1].sum())
    fabric_hits = int(counts[:, 5].sum())
    fetched = read_misses - fabric_hits       # read misses the far partition did not serve
    line = target.line_bytes
    with_mall = target.mall is not None
    return SimResult(
        hit_rate=rate(hits, misses), hits=hits, misses=misses,
        read_hits=int(counts[:, 0].sum()), read_misses=read_misses,
        xcd_hits=tuple(int(v) for v in xcd_hits), xcd_misses=tuple(int(v) for v in xcd_misses),
        domain_hits=tuple(int(v) for v in domain_hits), domain_misses=tuple(int(v) for v in domain_misses),
        line_bytes=line, l2_miss_bytes=fetched * line,
        mall_hits=int(mall_counts[0]) if with_mall else None,
        mall_misses=int(mall_counts[1]) if with_mall else None,
        dram_read_bytes=int(mall_counts[1]) * line if with_mall else fetched * line,
        num_programs=num_programs, slots_per_xcd=target.slots_per_xcd, replay_s=replay_s, engine=ENGINE,
        name=name, merged_reads=int(counts[:, 4].sum()), fabric_hits=fabric_hits,
        fabric_misses=int(counts[:, 6].sum()))

