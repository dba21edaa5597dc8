"""A job's simulated L2: its timed run (:func:`simulate_run`) and the entry point the harness
calls for one job (:func:`simulate_job`), from a kernel, a shape, its tiles and its remap.
"""
from __future__ import annotations

import functools
import os
from dataclasses import dataclass, replace
from typing import Any, Callable, Mapping

import numpy as np

from harness.hardware.memory import available_memory
from harness.profilers.sim.bands import layer_class, order_blind
from harness.profilers.sim.budget import DEFAULT_MEMORY_GIB, GIB, check_budget, simulation_footprint
from harness.profilers.sim.caches import CacheState
from harness.profilers.sim.lru import tag_dtype
from harness.profilers.sim.replay import simulate_l2
from harness.profilers.sim.result import SimResult
from harness.profilers.sim.target import SimTarget
from kernels.access import LaunchModel


@dataclass(frozen=True)
class Remap:
    """A job's order of tiles: its swizzle function with the constexprs it takes, or the remap
    table given outright (then ``swizzle_fn`` is not run)."""

    swizzle_fn: Callable | None
    num_xcds: int = 1                  # the swizzle's NUM_XCDS constexpr
    group_size: int = 8                # its GROUP_SIZE constexpr
    table: np.ndarray | None = None    # (num_tiles,) int64: launch-order tile t computes tile table[t]

    def table_for(self, num_pid_m: int, num_pid_n: int) -> np.ndarray:
        """The remap table of a grid of ``num_pid_m`` x ``num_pid_n`` tiles."""
        if self.table is not None:
            return self.table
        from swizzles.permutation import remap_table

        return remap_table(self.swizzle_fn, num_pid_m, num_pid_n, self.num_xcds, self.group_size,
                           device=table_device())


def simulate_run(models, table: np.ndarray, target: SimTarget, spill_bytes: int = 0) -> SimResult:
    """Simulate a job's timed run, ``models`` (:meth:`kernels.base.ConvKernel.launch_models`).

    The result is the ``profiled`` launch (the conv) replayed from cold caches, as the
    hardware profilers measure it (ncu's ``--cache-control all`` flushes before the kernel
    it profiles; the fold and sum passes are filtered out by kernel name).  With more than
    one launch, ``timed_run`` holds every launch replayed in launch order with the caches
    carried over, as the timed launcher runs them.  The remap table applies to the
    ``swizzled`` launch; the others run their programs in launch order."""
    def table_of(m: LaunchModel) -> np.ndarray:
        return table if m.swizzled else np.arange(m.schedule.num_tiles, dtype=np.int64)

    profiled = next(m for m in models if m.profiled)
    alone = simulate_l2(profiled, table_of(profiled), target, spill_bytes=spill_bytes)
    if len(models) == 1:
        return alone
    caches = CacheState.cold(target, tag_dtype(max(m.max_line for m in models)))
    run = tuple((m.name, simulate_l2(m, table_of(m), target, caches, spill_bytes if m.profiled else 0))
                for m in models)
    return replace(alone, timed_run=run)


#: (kernel, shape, tiles) whose access models stay cached between jobs.
_CACHED_MODELS = 4


@functools.lru_cache(maxsize=_CACHED_MODELS)
def _cached_models(kernel, shape, tiles: tuple[tuple[str, int], ...], line_bytes: int,
                   request_bytes: int = 0, store_request_bytes: int = 0) -> tuple[LaunchModel, ...]:
    # A sweep simulates the same (kernel, shape, tiles) under several swizzles.
    return kernel.launch_models(shape, dict(tiles), line_bytes, request_bytes, store_request_bytes)


@functools.lru_cache(maxsize=4)
def _cached_blind(kernel, shape, tiles: tuple[tuple[str, int], ...], line_bytes: int, request_bytes: int = 0,
                  store_request_bytes: int = 0) -> bool:
    # ... and asks once per (kernel, shape, tiles) whether its grid is order-blind.
    models = _cached_models(kernel, shape, tiles, line_bytes, request_bytes, store_request_bytes)
    return order_blind(next(m for m in models if m.profiled).loads)


def simulate_job(kernel, shape, tiles: Mapping[str, int], remap: Remap, target: Mapping[str, Any],
                 occupancy: int | None = None, *, line_bytes: int | None = None, spill_bytes: int = 0,
                 budget_bytes: int = int(DEFAULT_MEMORY_GIB * GIB)) -> SimResult:
    """Simulate one job's launch on the L2 of ``target`` (a ``conf/target/*.yaml`` record).

    ``kernel`` is a :class:`kernels.base.ConvKernel` or its name; ``remap`` its order of tiles
    (the swizzle's ``num_xcds`` is a constexpr: the hardware's XCD count comes from ``target``).
    A table that is not a permutation is rejected with ``ValueError`` (such a job fails its gate
    before any profiler runs).  ``occupancy`` (programs per CU) and ``line_bytes`` override the
    target record (see :meth:`SimTarget.from_target`).  ``spill_bytes``: bytes one program of
    the compiled kernel stores to local memory per work item (its threads times the compiler's
    spill bytes per thread; :func:`harness.profilers.sim.replay.spill_lookups`).
    ``budget_bytes``: the most host memory the simulation may take; one estimated above it, or
    above the memory available, raises :class:`~harness.profilers.sim.budget.SimulationTooLarge`
    (a ValueError) before anything is built (:mod:`harness.profilers.sim.budget`).
    """
    from kernels import get_kernel
    from swizzles.permutation import check_permutation

    kernel = get_kernel(kernel) if isinstance(kernel, str) else kernel
    tiles = kernel.check_tiles(tiles)
    sim_target = SimTarget.from_target(target, occupancy, line_bytes)
    key = tuple(sorted(tiles.items()))
    requests = (sim_target.line_bytes, sim_target.request_bytes, sim_target.store_request_bytes)
    footprint = simulation_footprint(kernel, shape, tiles, sim_target, budget_bytes)
    check_budget(footprint, budget_bytes, available_memory())
    if footprint.bytes * _CACHED_MODELS > budget_bytes:   # the models cached for earlier shapes would not fit beside it
        _cached_models.cache_clear()
        _cached_blind.cache_clear()
    grid = kernel.tile_grid(shape, tiles)
    table = remap.table_for(grid.num_pid_m, grid.num_pid_n)
    verdict = check_permutation(np.asarray(table))
    if not verdict.ok:
        raise ValueError(f"cannot simulate: the remap is {verdict.reason}")
    models = _cached_models(kernel, shape, key, *requests)
    result = simulate_run(models, table, sim_target, spill_bytes)
    resident = sim_target.slots_per_xcd * sim_target.num_xcds
    num_work = next(m for m in models if m.profiled).schedule.num_work
    blind = _cached_blind(kernel, shape, key, *requests)
    return replace(result, layer_class=layer_class(shape, sim_target.line_bytes, num_work, resident),
                   order_blind=blind)


def table_device() -> str:
    """Where the remap-table kernel can run: the CPU under the interpreter, else the GPU."""
    if os.environ.get("TRITON_INTERPRET") == "1":
        return "cpu"
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"

