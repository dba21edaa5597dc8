"""Dispatch and residency in the replay: which program holds which slot, which work item it
computes, and its clock.

An XCD has ``slots`` slots (its CUs times the programs each keeps resident).  Programs start
in launch order, XCD ``x`` running pids ``x, x + num_xcds, ...``; program ``pid`` first
computes work item ``pid`` and, in a persistent launch, items ``pid + P, pid + 2P, ...`` after
it (``P`` programs).  Work item ``w`` is split ``w // num_tiles`` of launch-order tile
``w % num_tiles``, which computes tile ``table[w % num_tiles]`` (the remap table).

Clocks are in K-steps (one step of a program's K loop lasts ``1 + jitter * u``, ``u`` in
[-1, 1) a fixed hash of pid and the program's step count: its ring position, which runs on
over a persistent program's work items and does not restart at each); the merge state keeps them in ticks,
:data:`CLOCK_TICKS` per step.

The types here are the numba-facing form of :class:`~harness.profilers.sim.target.SimTarget`
and of a launch's schedule: numba's compiled functions take tuples of arrays and scalars, not
dataclasses, so each group of parameters is a NamedTuple built from the dataclass by the
``*_of`` functions below.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from harness.profilers.sim.lru import jit
from harness.profilers.sim.target import SimTarget
from kernels.access import LaunchModel

#: Resolution of the programs' clocks in the merge state: ticks per K-step (int32 ticks hold
#: 2^31 / 4096 = 524288 steps, more than any launch's programs walk in a row).
CLOCK_TICKS = 4096


class Work(NamedTuple):
    """The launch's schedule."""

    table: np.ndarray        # (num_tiles,) int64: launch-order tile t computes tile table[t]
    splits: int              # splits of each tile's K steps (split-K; 1 without)
    steps_per_split: int     # K-steps of one split
    num_steps: int           # K-steps of a whole tile
    num_programs: int        # programs launched (persistent: fewer than the work items)


class Layout(NamedTuple):
    """Where the slots are: XCDs, L2 domains, partitions and merge units."""

    num_xcds: int
    slots: int                      # resident programs per XCD
    domain_of_xcd: np.ndarray       # (num_xcds,) int64: the L2 domain each XCD looks up
    partition_of_slot: np.ndarray   # (slots,) int64: the L2 partition each slot reads through


class Clocks(NamedTuple):
    """The programs' timing and the request coalescer's rules."""

    item_jitter: np.ndarray   # (num_tiles,) float64: step jitter of each launch-order item, K-steps
    dispatch_gap: float       # the first wave's programs start this far apart, K-steps
    op_window: np.ndarray     # (operands,) float64: each operand's merge window, ticks (0: no merging)
    op_cap: np.ndarray        # (operands,) int64: requests one lookup serves (0: no cap; merge by unit)
    op_unit: np.ndarray       # (operands, slots) int64: each slot's merge unit per operand (its bit in the merge state)
    refill_by_clock: bool     # freed slots take the next programs in the order their clocks finished


class Slots(NamedTuple):
    """The dispatch state, arrays updated in place: per slot (num_xcds, slots) the resident
    program (-1: idle), its work item, tile, next and end K-step, and clock (K-steps); per XCD
    its next pid and the slots freed this round (refill by clock); per tile the splits done; per
    slot the resident program's K-step count (``ring``: the step number its step lengths hash,
    the kernel's ring position, which runs on over a persistent program's items)."""

    pid: np.ndarray
    work: np.ndarray
    tile: np.ndarray
    step: np.ndarray
    stop: np.ndarray
    t: np.ndarray
    next_pid: np.ndarray
    freed: np.ndarray
    num_freed: np.ndarray
    arrived: np.ndarray
    ring: np.ndarray


def work_of(launch: LaunchModel, table: np.ndarray, num_programs: int) -> Work:
    """The schedule of ``launch`` with the remap table ``table`` (int64, contiguous)."""
    schedule = launch.schedule
    return Work(table, int(schedule.splits), int(schedule.steps_per_split), int(launch.loads.num_steps),
                int(num_programs))


def layout_of(target: SimTarget, num_programs: int) -> Layout:
    """The slots of ``target`` for a launch of ``num_programs``."""
    return Layout(target.num_xcds, target.slots_per_xcd, target.domain_of_xcd(),
                  target.partition_of_slot(num_programs))


def clocks_of(target: SimTarget, table: np.ndarray, tile_rows: np.ndarray, operand_bulk: tuple[bool, ...],
              num_programs: int | None = None) -> Clocks:
    """The clocks of a launch of ``table`` (``num_programs`` programs; None: a full first wave)
    whose tiles read the blocks ``tile_rows`` (:class:`kernels.access.AccessModel`);
    ``operand_bulk``: which operands a tensor descriptor loads (their own merge rules,
    :meth:`SimTarget.operand_merge`)."""
    item_jitter = np.full(len(table), target.step_jitter)   # each work item's step jitter, K-steps
    if target.scatter_jitter:
        item_jitter += target.scatter_jitter * scattered_items(table, tile_rows)
    merge = target.operand_merge(operand_bulk, tile_rows.shape[1], num_programs)
    return Clocks(item_jitter, float(target.dispatch_gap), merge.window * CLOCK_TICKS, merge.cap, merge.unit,
                  target.refill == "clock")


def scattered_items(table: np.ndarray, tile_rows: np.ndarray) -> np.ndarray:
    """Per launch-order work item (``len(table)``,) float64: 1.0 where the tile it computes reads
    some operand from a block (a row of ``tile_rows``: an M block of the input, an N block of
    the weights) that is neither the one the item launched before it reads nor a neighbour of
    it (a row number 1 away), else 0.0 (the first item: 0).  The dispatcher runs launch-order
    neighbours side by side, so this is their DRAM locality: identity jumps once per row of
    tiles, scatter at almost every item."""
    rows = np.asarray(tile_rows)[np.asarray(table, dtype=np.int64)]
    out = np.zeros(len(rows), dtype=np.float64)
    if len(rows) > 1:
        out[1:] = (np.abs(np.diff(rows, axis=0)) > 1).any(axis=1)
    return out


@jit
def new_slots(work, layout, dispatch_gap):
    """Every slot idle, its clock at its first-wave start (launch order, ``dispatch_gap`` apart)."""
    nx, ns = layout.num_xcds, layout.slots
    t = np.zeros((nx, ns), dtype=np.float64)
    for x in range(nx):
        for sl in range(ns):
            t[x, sl] = (sl * nx + x) * dispatch_gap
    return Slots(np.full((nx, ns), -1, dtype=np.int64), np.zeros((nx, ns), dtype=np.int64),
                 np.zeros((nx, ns), dtype=np.int64), np.zeros((nx, ns), dtype=np.int64),
                 np.zeros((nx, ns), dtype=np.int64), t, np.arange(nx, dtype=np.int64),
                 np.zeros((nx, ns), dtype=np.int64), np.zeros(nx, dtype=np.int64),
                 np.zeros(len(work.table), dtype=np.int64), np.zeros((nx, ns), dtype=np.int64))


@jit
def first_wave(work, layout, slots):
    """Fill every slot with the XCDs' first programs; returns how many started."""
    active = 0
    for x in range(layout.num_xcds):
        for sl in range(layout.slots):
            if slots.next_pid[x] < work.num_programs:
                _take_next(x, sl, work, layout, slots)
                active += 1
    return active


@jit
def _take_next(x, sl, work, layout, slots):
    """XCD ``x``'s next program becomes resident in slot ``sl``, at its first work item."""
    pid = slots.next_pid[x]
    slots.next_pid[x] += layout.num_xcds
    slots.pid[x, sl] = pid
    _assign(pid, x, sl, work, slots)
    slots.ring[x, sl] = slots.step[x, sl]      # a program's step count starts at its first item's first step


@jit
def _assign(item, x, sl, work, slots):
    """Slot (x, sl) starts work item ``item`` at the first K-step of its split."""
    num_tiles = len(work.table)
    split = item // num_tiles
    first = min(split * work.steps_per_split, work.num_steps)
    slots.work[x, sl] = item
    slots.tile[x, sl] = work.table[item - split * num_tiles]
    slots.step[x, sl] = first
    slots.stop[x, sl] = work.num_steps if split == work.splits - 1 else min(first + work.steps_per_split,
                                                                             work.num_steps)


@jit
def next_item(x, sl, work, layout, by_clock, slots):
    """Slot (x, sl) finished its work item: its program takes its next item (persistent), else
    the XCD's next program takes the slot now (``by_clock`` False) or at the round's end
    (:func:`refill_by_clock`).  Returns 1 when the slot stays idle for good, else 0."""
    item = slots.work[x, sl]
    if item + work.num_programs < len(work.table) * work.splits:
        _assign(item + work.num_programs, x, sl, work, slots)
    elif by_clock:
        slots.pid[x, sl] = -1
        slots.freed[x, slots.num_freed[x]] = sl
        slots.num_freed[x] += 1
    elif slots.next_pid[x] < work.num_programs:
        _take_next(x, sl, work, layout, slots)
    else:
        slots.pid[x, sl] = -1
        return 1
    return 0


@jit
def refill_by_clock(work, layout, slots):
    """At a round's end, the slots freed in it, the earliest finished by its clock first, take
    their XCD's next programs; returns how many stay idle for good."""
    idle = 0
    for x in range(layout.num_xcds):
        if slots.num_freed[x] == 0:
            continue
        waiting = slots.freed[x, :slots.num_freed[x]]
        for sl in waiting[np.argsort(slots.t[x, waiting], kind="mergesort")]:
            if slots.next_pid[x] < work.num_programs:
                _take_next(x, sl, work, layout, slots)
            else:
                idle += 1
        slots.num_freed[x] = 0
    return idle
