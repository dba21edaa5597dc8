"""The process a profiler wraps: ``python -m harness.profilers.worker REQUESTS.json``.

It launches each requested job's (already verified) kernel ``repeats`` times, following
:func:`launch_schedule` and launching nothing else that matches the kernel-name filter,
so the profiler's dispatches can be attributed to jobs by dispatch order.  A job with a
baseline is launched in ABBA pairs (candidate, baseline, baseline, candidate, ...): both
are profiled alternately in the same profiler session, so the paired hit-rate
differences cancel what drifts.  Batching many jobs into one worker saves a profiler
start-up per job.

When ``SWIZZLEBENCH_DISPATCH_LOG`` is set, every launch is also appended to that file as
a JSON line (kernel name, grid, block, job): the stand-in profilers the tests put on
PATH read it, since no CPU tool can observe a launch.
"""
from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:   # not imported here: the worker selects its device before Triton is imported
    from harness.job.plan import Arm, PlannedJob

DISPATCH_LOG_ENV = "SWIZZLEBENCH_DISPATCH_LOG"


@dataclass(frozen=True)
class ProfileRequest:
    """One job to profile: its key (where results go back to), its plan (the job as launched:
    its kernel and arms, :mod:`harness.job.plan`), and the repeats.  Across the process
    boundary to the worker it travels as its spec (:meth:`as_json`), planned there again by
    the same function (:meth:`from_json`)."""

    key: str
    plan: PlannedJob
    repeats: int
    paired: bool = False           # the plan's baseline arm profiled in pairs with its candidate
    occupancy: int | None = None   # programs per CU / SM of the compiled kernel (the simulator's residency)
    spill_bytes: int | None = None  # bytes one program of the compiled kernel spills (the simulator's stores)

    @property
    def arms(self) -> dict[str, Arm]:
        """The arms to launch, by schedule name: the candidate, and the baseline when paired."""
        arms = {CANDIDATE: self.plan.candidate}
        if self.paired:
            arms[BASELINE] = self.plan.baseline
        return arms

    def as_json(self) -> dict:
        return {"key": self.key, "spec": self.plan.spec.to_dict(), "repeats": self.repeats, "paired": self.paired,
                "occupancy": self.occupancy, "spill_bytes": self.spill_bytes}

    @classmethod
    def from_json(cls, data: dict) -> "ProfileRequest":
        from harness.job.plan import plan_job
        from harness.job.spec import JobSpec

        fields = dict(data)
        return cls(plan=plan_job(JobSpec.from_dict(fields.pop("spec"))), **fields)


#: The two arms of a paired request, as named in the schedule.
CANDIDATE, BASELINE = "candidate", "baseline"


def launch_schedule(requests: list[ProfileRequest]) -> list[tuple[str, str]]:
    """Every launch the worker makes, in order, as (request key, arm): a request's
    ``repeats`` candidate launches, or with a baseline ``repeats`` pairs in ABBA order
    (pair i runs the candidate first when i is even)."""
    schedule: list[tuple[str, str]] = []
    for req in requests:
        for i in range(req.repeats):
            if not req.paired:
                schedule.append((req.key, CANDIDATE))
            else:
                pair = [CANDIDATE, BASELINE] if i % 2 == 0 else [BASELINE, CANDIDATE]
                schedule.extend((req.key, arm) for arm in pair)
    return schedule


def write_requests(path: Path, requests: list[ProfileRequest]) -> None:
    path.write_text(json.dumps([r.as_json() for r in requests], indent=1))


def main(argv: list[str]) -> int:
    from harness.hardware.device import GPU, describe_device, select_execution_mode

    mode = select_execution_mode()  # before triton is imported
    import torch

    from harness.measure.correctness import make_operands

    device = describe_device(mode)
    requests = [ProfileRequest.from_json(r) for r in json.loads(Path(argv[0]).read_text())]
    log_path = os.environ.get(DISPATCH_LOG_ENV)
    launchers = {}   # (key, arm) -> (run, kernel name, grid, block, run name)
    for req in requests:
        spec, kernel = req.plan.spec, req.plan.kernel
        ops = make_operands(spec.shape, kernel.has_bias, spec.input_seed, device.torch_device, spec.input_layout)
        shared = None   # both arms on the same buffers, as in the timing rounds
        for name, arm in req.arms.items():
            run, _ = kernel.bind(ops, arm.spec.shape, arm.tiles, arm.binding, arm.launch, share=shared)
            shared = run.bound
            grid = kernel.tile_grid(arm.spec.shape, arm.tiles).num_pids
            launchers[(req.key, name)] = (run, kernel.jit_kernel_for(arm.tiles).__name__, grid,
                                          arm.launch.num_warps * 32, arm.spec.run_name)
    for key, arm in launch_schedule(requests):
        run, name, grid, block, run_name = launchers[(key, arm)]
        run()
        if mode == GPU:
            torch.cuda.synchronize()
        if log_path:
            with open(log_path, "a") as f:
                f.write(json.dumps({"kernel_name": name, "grid": [grid, 1, 1], "block": [block, 1, 1],
                                    "job": key if arm == CANDIDATE else f"{key}/{arm}", "arm": arm}) + "\n")
    for req in requests:
        print(f"[worker] {req.plan.spec.run_name}: {req.repeats} launches"
              + (" (+ as many of its baseline, ABBA)" if req.paired else ""), file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
