"""The shape gate: the job's full tile grid must fit the int32 program ids of every kernel
and swizzle; a grid that would wrap fails the job before anything is compiled or run."""
from __future__ import annotations

from harness.job.plan import PlannedJob
from harness.job.result import JobResult
from harness.storage.field_names import Param
from kernels.base import TileGrid

#: Largest grid a job may launch: program ids are int32 in the kernels and the swizzles.
MAX_PIDS = 2**31 - 1


def shape_gate(plan: PlannedJob, result: JobResult) -> TileGrid | None:
    """The job's full grid (params ``grid.num_pid_m``, ``grid.num_pid_n``, ``grid.num_pids``:
    programs), or None: the job FAILED at gate ``shape``, its grid over :data:`MAX_PIDS`."""
    spec = plan.spec
    grid = plan.kernel.tile_grid(spec.shape, plan.candidate.tiles)
    result.params.update({Param.GRID_PID_M: str(grid.num_pid_m), Param.GRID_PID_N: str(grid.num_pid_n),
                          Param.GRID_PIDS: str(grid.num_pids)})
    if grid.num_pids > MAX_PIDS:   # pids are int32 in every kernel and swizzle: they would wrap
        result.fail(f"shape {spec.shape.name!r}: grid of {grid.num_pid_m} x {grid.num_pid_n} = {grid.num_pids} programs "
                    f"exceeds {MAX_PIDS} (2**31 - 1, the int32 program ids of the kernels and swizzles); "
                    "use a smaller shape or larger tiles", gate="shape")
        return None
    return grid
