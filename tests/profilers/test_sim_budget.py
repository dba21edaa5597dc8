"""The simulated L2's memory budget (issue 54, item 2): the footprint estimated from a sample of
the access model matches the model built, stays above the peak the simulation really takes
(tracemalloc sees numpy's allocations), and a simulation over its budget is refused before
anything is built."""
from __future__ import annotations

import tracemalloc
from pathlib import Path

import numpy as np
import pytest
from omegaconf import OmegaConf

import swizzlebench_conf
from harness.profilers.sim import job as sim_job
from harness.profilers.sim.budget import GIB, SCRATCH_BYTES, SimulationTooLarge, check_budget, simulation_footprint
from harness.profilers.sim.target import SimTarget
from kernels import get_kernel
from kernels.problem import ConvShape

CONF = Path(swizzlebench_conf.__file__).parent


def _target(name: str) -> dict:
    return OmegaConf.to_container(OmegaConf.load(CONF / "target" / f"{name}.yaml"))


def _tiles(kernel: str) -> dict:
    return dict(OmegaConf.load(CONF / "kernel" / f"{kernel}.yaml").tiles)


def _accesses(models) -> int:
    return sum(len(m.loads.lines) + len(m.epilogue.lines) + len(m.last.lines) for m in models)


@pytest.mark.parametrize("kernel, extra, target", [
    ("igemm", {}, "mi300x"),
    ("igemm_fast", {}, "h100"),
    ("igemm_fast", {"SPLIT_K": 4, "SPLIT_SUM": 1}, "mi300x"),
    ("igemm_fast", {"FOLD": 1}, "h100"),
    ("direct", {}, "mi300x"),
    ("patch", {}, "h100"),
])
def test_sampled_footprint_counts_what_the_model_holds(kernel, extra, target):
    """Line accesses within 3 % and the largest line id within 1 % of the built models'."""
    shape = ConvShape("s", 4, 48, 30, 30, 40, 3, 3, padding=1)
    k = get_kernel(kernel)
    tiles = k.check_tiles({**_tiles(kernel), **extra})
    sim_target = SimTarget.from_target(_target(target))
    models = k.launch_models(shape, tiles, sim_target.line_bytes, sim_target.request_bytes,
                             sim_target.store_request_bytes)
    fp = simulation_footprint(k, shape, tiles, sim_target)
    assert fp.accesses == pytest.approx(_accesses(models), rel=0.03)
    assert fp.max_line == pytest.approx(max(m.max_line for m in models), rel=0.01)
    assert fp.work_items == max(m.schedule.num_work for m in models)


@pytest.mark.parametrize("target", ["mi300x", "h100"])
def test_footprint_stays_above_the_simulations_peak(target):
    """The estimate is an upper bound of what simulate_job allocates, and not a loose one (the
    fixed scratch of building the trace in chunks aside)."""
    shape = ConvShape("m", 16, 128, 56, 56, 128, 3, 3, padding=1)   # about 3 million line accesses
    k = get_kernel("igemm_best")
    tiles = _tiles("igemm_best")
    record = _target(target)
    fp = simulation_footprint(k, shape, tiles, SimTarget.from_target(record))
    table = np.arange(k.tile_grid(shape, k.check_tiles(tiles)).num_pids, dtype=np.int64)
    small = ConvShape("w", 1, 8, 8, 8, 8, 3, 3)   # numba's compile (or cache load) is not the simulation's
    sim_job.simulate_job(k, small, tiles, sim_job.Remap(None, table=np.arange(
        k.tile_grid(small, k.check_tiles(tiles)).num_pids, dtype=np.int64)), record)
    sim_job._cached_models.cache_clear()
    tracemalloc.start()
    try:
        sim_job.simulate_job(k, shape, tiles, sim_job.Remap(None, table=table), record)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
        sim_job._cached_models.cache_clear()
    assert peak < fp.bytes < 2 * peak + SCRATCH_BYTES, (peak, fp)


def test_simulation_over_its_budget_is_refused_before_it_is_built():
    shape = ConvShape("b", 8, 64, 56, 56, 64, 3, 3, padding=1)
    k = get_kernel("igemm")
    tiles = _tiles("igemm")
    record = _target("mi300x")
    need = simulation_footprint(k, shape, tiles, SimTarget.from_target(record)).bytes
    sim_job._cached_models.cache_clear()
    table = np.arange(k.tile_grid(shape, k.check_tiles(tiles)).num_pids, dtype=np.int64)
    with pytest.raises(SimulationTooLarge, match=r"the simulated L2 would need about .* GiB \(.* line "
                                                 r"accesses\), over its budget profiler.sim_memory_gib="):
        sim_job.simulate_job(k, shape, tiles, sim_job.Remap(None, table=table), record, budget_bytes=need // 2)
    assert sim_job._cached_models.cache_info().currsize == 0   # nothing was built


def test_available_memory_bounds_the_simulation_too():
    fp = simulation_footprint(get_kernel("igemm"), ConvShape("a", 2, 16, 16, 16, 16, 3, 3), _tiles("igemm"),
                              SimTarget.from_target(_target("h100")))
    check_budget(fp, fp.bytes, fp.bytes)   # exactly fits
    with pytest.raises(SimulationTooLarge, match=r"more than the .* GiB of memory available"):
        check_budget(fp, 16 * GIB, fp.bytes - 1)


def test_a_grid_too_large_to_tabulate_is_refused_without_sampling():
    """N1024 C4096 H=W2048 F4096 (issue 54): two billion tiles; its plans are never built."""
    shape = ConvShape("g", 1024, 4096, 2048, 2048, 4096, 3, 3, padding=1)
    fp = simulation_footprint(get_kernel("igemm_best"), shape, _tiles("igemm_best"),
                              SimTarget.from_target(_target("mi300x")), limit_bytes=16 * GIB)
    assert fp.accesses == 0 and fp.work_items > 2 * 10**9
    with pytest.raises(SimulationTooLarge, match=r"would need at least .* GiB \(the tables of its .* tiles alone\)"):
        check_budget(fp, 16 * GIB)
