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

DISPATCH_LOG_ENV = "SWIZZLEBENCH_DISPATCH_LOG"


@dataclass(frozen=True)
class ProfileRequest:
    """One job to profile: its key (where results go back to), its spec, and the repeats."""

    key: str
    spec: dict
    repeats: int
    baseline: dict | None = None   # spec of the baseline profiled in pairs with this job
    occupancy: int | None = None   # programs per CU / SM of the compiled kernel (the simulator's residency)
    spill_bytes: int | None = None  # bytes one program of the compiled kernel spills (the simulator's stores)


#: The two arms of a paired request, as named in the schedule.
CANDIDATE, BASELINE = "candidate", "baseline"


def launch_schedule(requests: list[ProfileRequest]) -> list[tuple[str, str]]:
    """Every launch the worker makes, in order, as (request key, arm): a request's
    ``repeats`` candidate launches, or with a baseline ``repeats`` pairs in ABBA order
    (pair i runs the candidate first when i is even)."""
    schedule: list[tuple[str, str]] = []
    for req in requests:
        for i in range(req.repeats):
            if req.baseline is None:
                schedule.append((req.key, CANDIDATE))
            else:
                pair = [CANDIDATE, BASELINE] if i % 2 == 0 else [BASELINE, CANDIDATE]
                schedule.extend((req.key, arm) for arm in pair)
    return schedule


def write_requests(path: Path, requests: list[ProfileRequest]) -> None:
    path.write_text(json.dumps([r.__dict__ for r in requests], indent=1))


def main(argv: list[str]) -> int:
    from harness.hardware.device import GPU, describe_device, select_execution_mode

    mode = select_execution_mode()  # before triton is imported
    import torch

    from harness.measure.correctness import make_operands
    from harness.job.spec import JobSpec
    from harness.job.user_code import spec_kernel, spec_remap
    from kernels.base import LaunchConfig, SwizzleBinding

    device = describe_device(mode)
    requests = [ProfileRequest(**r) for r in json.loads(Path(argv[0]).read_text())]
    log_path = os.environ.get(DISPATCH_LOG_ENV)
    launchers = {}   # (key, arm) -> (run, kernel name, grid, block, run name)
    for req in requests:
        specs = {CANDIDATE: JobSpec.from_dict(req.spec)}
        if req.baseline is not None:
            specs[BASELINE] = JobSpec.from_dict(req.baseline)
        spec = specs[CANDIDATE]
        kernel = spec_kernel(spec)
        ops = make_operands(spec.shape, kernel.has_bias, spec.input_seed, device.torch_device, spec.input_layout)
        shared = None   # both arms on the same buffers, as in the timing rounds
        for arm, arm_spec in specs.items():
            binding = SwizzleBinding(spec_remap(arm_spec), arm_spec.num_xcds, arm_spec.group_size)
            run, _ = kernel.bind(ops, arm_spec.shape, arm_spec.tiles_dict, binding,
                                 LaunchConfig(arm_spec.num_warps, arm_spec.num_stages), share=shared)
            shared = run.bound
            grid = kernel.tile_grid(arm_spec.shape, arm_spec.tiles_dict).num_pids
            name = kernel.jit_kernel_for(arm_spec.tiles_dict).__name__
            launchers[(req.key, arm)] = (run, name, grid, arm_spec.num_warps * 32, arm_spec.run_name)
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
        print(f"[worker] {JobSpec.from_dict(req.spec).run_name}: {req.repeats} launches"
              + (" (+ as many of its baseline, ABBA)" if req.baseline else ""), file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
