"""The simulated cache hierarchy: L2 domains of one or more partitions, each a set-associative
LRU cache (:mod:`harness.profilers.sim.lru`), and an optional memory-side cache (MALL) shared
by all domains.

A lookup is of one line id.  A read goes through the partition of the reader's slot; a miss
there of a line homed in another partition (:func:`harness.profilers.sim.address.home`) is
looked up again at home over the fabric and kept in both; what misses at home goes on to the
MALL, if any.  A store goes to the line's home partition: a hit if the line is present (or
always, with ``writes_hit``), else a miss that allocates it (write-allocate, no fetch; it does
not go on to the MALL; write-backs are not modelled).  With ``writes_hit`` a store to a line
homed in another partition is one more write hit, in the writer's partition, which it passes
on its way over the fabric.

``counts[x]`` holds XCD ``x``'s lookups by kind (:data:`COLUMNS`); ``mall_counts`` the
MALL's hits and misses.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from harness.profilers.sim.address import BLOCK_BYTES, home
from harness.profilers.sim.lru import jit, lru_access, lru_insert_last
from harness.profilers.sim.target import SimTarget

#: The columns of ``counts``: read hits and misses (through the reader's partition), write
#: hits and misses, reads merged before the L2 (no lookup), and read misses looked up again in
#: a far home partition: hits and misses there.
COLUMNS = ("read_hits", "read_misses", "write_hits", "write_misses", "merged_reads", "fabric_hits",
           "fabric_misses")


class L2(NamedTuple):
    """The hierarchy's geometry and write rules, for the jitted replay."""

    partitions: int      # partitions per L2 domain
    block_lines: int     # lines per 128 B block (the home hash's unit)
    sets: int            # sets of one partition
    ways: int
    mall_sets: int       # 0: no MALL
    mall_ways: int
    writes_hit: bool     # every store is a hit (NVIDIA)
    stores_last: bool    # a store's fill is least recently used (store_insert: lru)


class State(NamedTuple):
    """What the replay updates: the caches' tags, the counters and the merge state."""

    l2_tags: np.ndarray       # (domains * partitions * sets * ways,): every L2 partition's sets
    mall_tags: np.ndarray     # the MALL's sets (one unused entry without a MALL)
    counts: np.ndarray        # (num_xcds, len(COLUMNS)) int64
    mall_counts: np.ndarray   # (2,) int64: MALL hits, misses
    last: np.ndarray          # (tracked lines, 2) int32: per line, the merge units (bit mask, or with
    #                           merge_cap the requests) of its current burst, and when it began (ticks)


@dataclass
class CacheState:
    """The simulated caches' contents, carried from one launch of a timed run to the next."""

    l2_tags: np.ndarray
    mall_tags: np.ndarray

    @classmethod
    def cold(cls, target: SimTarget, dtype) -> "CacheState":
        """Empty caches of ``target`` whose tags have type ``dtype`` (int32 or int64)."""
        mall = target.mall.empty_state(1, dtype) if target.mall is not None else np.zeros(1, dtype=dtype)
        return cls(target.l2.empty_state(target.l2_domains * target.l2_partitions, dtype), mall)


def l2_of(target: SimTarget) -> L2:
    """The hierarchy of ``target``."""
    mall_sets, mall_ways = (target.mall.num_sets, target.mall.ways) if target.mall is not None else (0, 1)
    return L2(target.l2_partitions, max(1, BLOCK_BYTES // target.line_bytes), target.l2.num_sets,
              target.l2.ways, mall_sets, mall_ways, target.writes_hit, target.store_insert == "lru")


def state_of(caches: CacheState, num_xcds: int, tracked: int) -> State:
    """Zeroed counters over ``caches``, with a merge state for ``tracked`` lines (1: unused)."""
    last = np.empty((tracked, 2), dtype=np.int32)
    last[:, 0] = 0
    last[:, 1] = np.iinfo(np.int32).min // 2
    return State(caches.l2_tags, caches.mall_tags, np.zeros((num_xcds, len(COLUMNS)), dtype=np.int64),
                 np.zeros(2, dtype=np.int64), last)


@jit
def read_miss(line, lset, x, dom, part, l2, state):
    """A read of ``line`` (set ``lset``) missed in partition ``part`` of domain ``dom`` (counted
    by the caller): a line homed in another partition is looked up there (fabric hits and
    misses) and stays in both; what misses at home goes on to the MALL, if any, or to memory."""
    where = home(line, l2.block_lines, l2.partitions)
    if where != part:
        if lru_access(state.l2_tags, ((dom * l2.partitions + where) * l2.sets + lset) * l2.ways, l2.ways, line):
            state.counts[x, 5] += 1
            return
        state.counts[x, 6] += 1
    if l2.mall_sets > 0:
        if lru_access(state.mall_tags, (line % l2.mall_sets) * l2.mall_ways, l2.mall_ways, line):
            state.mall_counts[0] += 1
        else:
            state.mall_counts[1] += 1


@jit
def lookups(accesses, key, x, dom, part, l2, state):
    """Segment ``key`` of ``accesses`` (epilogue, split-K arrival), by XCD ``x``'s slot reading
    through partition ``part`` of domain ``dom``: a store (``writes``) to the line's home
    partition, a read through ``part``.  The tuples' arrays are taken out once, not per access."""
    offsets, lines, sets, writes = accesses
    tags, counts = state.l2_tags, state.counts
    for i in range(offsets[key], offsets[key + 1]):
        line, lset = lines[i], sets[i]
        if writes[i]:
            where = home(line, l2.block_lines, l2.partitions)
            if where != part and l2.writes_hit:
                counts[x, 2] += 1
            set_base = ((dom * l2.partitions + where) * l2.sets + lset) * l2.ways
            present = (lru_insert_last(tags, set_base, l2.ways, line) if l2.stores_last
                       else lru_access(tags, set_base, l2.ways, line))
            if present or l2.writes_hit:
                counts[x, 2] += 1
            else:
                counts[x, 3] += 1
        elif lru_access(tags, ((dom * l2.partitions + part) * l2.sets + lset) * l2.ways, l2.ways, line):
            counts[x, 0] += 1
        else:
            counts[x, 1] += 1
            read_miss(line, lset, x, dom, part, l2, state)
