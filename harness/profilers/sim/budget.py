"""The simulated L2's memory, estimated before anything is built, and its budget.

A simulation holds the trace of every launch of the job's timed run (one line id, its L2 set
and flags per line access: :mod:`harness.profilers.sim.replay`), per-tile tables, the caches'
tags and, where reads merge, a merge state per line of the simulated address space.  Its size
follows from the shape and the tiles: :func:`simulation_footprint` estimates it from a sample
of the access model's rows (:meth:`kernels.access.LaunchPlan.sampled_lines`), in well under a
second and a few MB whatever the shape, and :func:`check_budget` refuses a simulation above
the budget (config ``profiler.sim_memory_gib``) or above the memory this machine has free, so
that a too-large simulation is refused up front and never ended by the OOM killer.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import TYPE_CHECKING, Mapping

if TYPE_CHECKING:
    from harness.profilers.sim.target import SimTarget

#: Host bytes the simulation holds at its peak per line access of its trace: the access
#: model's line ids (int64) and flags, the trace's line ids and sets (int32) and the
#: temporaries of building them in chunks.  Measured with tracemalloc at 23 to 44 on MI300X and
#: H100 layers of 5 to 124 million accesses (a test checks that the estimate stays above the
#: measured peak).
BYTES_PER_ACCESS = 48
#: Host bytes of the scratch arrays that build the trace in chunks, whatever its size: a few
#: int64 arrays of ``kernels.access._CHUNK_ELEMENTS`` (4 Mi) elements at once.
SCRATCH_BYTES = 128 * 1024**2
#: Host bytes per work item of the launch: the remap table, each tile's rows, its step jitter.
BYTES_PER_TILE = 64
#: Host bytes per line id of the merge state (two int32), where some operand's reads merge.
BYTES_PER_MERGE_LINE = 8
#: Bytes per tag of the simulated caches (the widest tag type, int64).
BYTES_PER_TAG = 8
#: Default of ``profiler.sim_memory_gib``: the most host memory one job's simulation may take, GiB.
DEFAULT_MEMORY_GIB = 16.0

GIB = 1024**3


class SimulationTooLarge(ValueError):
    """The simulation of a job would take more memory than its budget allows."""


@dataclass(frozen=True)
class SimFootprint:
    """What a job's simulation would hold at its peak, estimated before it is built."""

    accesses: int        # line accesses of every launch's trace (0: not estimated, the tiles alone are too many)
    work_items: int      # work items of the largest launch
    max_line: int        # largest line id of the simulated address space
    cache_tags: int      # tags of the simulated L2s and MALL

    @property
    def bytes(self) -> int:
        """Peak host bytes (an estimate; see the module's constants)."""
        return (SCRATCH_BYTES + self.accesses * BYTES_PER_ACCESS + self.work_items * BYTES_PER_TILE
                + (self.max_line + 1) * BYTES_PER_MERGE_LINE + self.cache_tags * BYTES_PER_TAG)


def cache_tags(target: SimTarget) -> int:
    """Tags of every simulated cache of ``target``: its L2 partitions' and its MALL's."""
    l2 = target.l2_domains * target.l2_partitions * target.l2.num_sets * target.l2.ways
    return l2 + (target.mall.num_sets * target.mall.ways if target.mall is not None else 0)


def simulation_footprint(kernel, shape, tiles: Mapping[str, int], target: SimTarget,
                         limit_bytes: int | None = None) -> SimFootprint:
    """The estimated peak of simulating ``kernel`` on ``shape`` with ``tiles`` on ``target``.
    With ``limit_bytes``, a grid whose per-tile tables alone exceed it is not sampled (building
    its launch plans would itself take that memory): its footprint counts the tiles only."""
    tags = cache_tags(target)
    tiles = kernel.check_tiles(tiles)
    grid = kernel.tile_grid(shape, tiles).num_pids
    if limit_bytes is not None and grid * BYTES_PER_TILE > limit_bytes:
        return SimFootprint(0, grid, 0, tags)
    accesses, work, max_line = _sampled(kernel, shape, tuple(sorted(tiles.items())), target.line_bytes,
                                        target.request_bytes, target.store_request_bytes)
    return SimFootprint(accesses, work, max_line, tags)


@functools.lru_cache(maxsize=256)
def _sampled(kernel, shape, tiles: tuple[tuple[str, int], ...], line_bytes: int, request_bytes: int,
             store_request_bytes: int) -> tuple[int, int, int]:
    # A sweep checks the same (kernel, shape, tiles) for every swizzle: (accesses, work items, max line).
    plans = kernel.launch_plans(shape, dict(tiles))
    samples = [plan.sampled_lines(line_bytes, request_bytes, store_request_bytes) for plan in plans]
    return (sum(s.accesses for s in samples), max(plan.schedule.num_work for plan in plans),
            max(s.max_line for s in samples))


def check_budget(footprint: SimFootprint, budget_bytes: int, available_bytes: int | None = None) -> None:
    """Raise :class:`SimulationTooLarge` when ``footprint`` exceeds ``budget_bytes`` (config
    ``profiler.sim_memory_gib``) or ``available_bytes`` (this machine's free memory; None:
    not checked), saying how much it needs and what would fit."""
    need = footprint.bytes
    what = (f"about {need / GIB:,.1f} GiB ({footprint.accesses:,} line accesses)" if footprint.accesses
            else f"at least {need / GIB:,.1f} GiB (the tables of its {footprint.work_items:,} tiles alone)")
    if need > budget_bytes:
        raise SimulationTooLarge(f"the simulated L2 would need {what}, over its budget "
                                 f"profiler.sim_memory_gib={budget_bytes / GIB:g}; use a smaller shape, "
                                 "profiler=none, or raise profiler.sim_memory_gib")
    if available_bytes is not None and need > available_bytes:
        raise SimulationTooLarge(f"the simulated L2 would need {what}, more than the "
                                 f"{available_bytes / GIB:,.1f} GiB of memory available; use a smaller shape or "
                                 "profiler=none")
