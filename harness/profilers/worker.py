"""The process a profiler wraps: ``python -m harness.profilers.worker REQUESTS.json``.

It launches each requested job's (already verified) kernel ``repeats`` times, in the
order of the request file and nothing else that matches the kernel-name filter, so the
profiler's dispatches can be attributed to jobs by dispatch order: job j owns dispatches
``j*repeats .. (j+1)*repeats - 1``.  Batching many jobs into one worker saves a profiler
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


def write_requests(path: Path, requests: list[ProfileRequest]) -> None:
    path.write_text(json.dumps([r.__dict__ for r in requests], indent=1))


def main(argv: list[str]) -> int:
    from harness.device import GPU, describe_device, select_execution_mode

    mode = select_execution_mode()  # before triton is imported
    import torch

    from harness.correctness import make_operands
    from harness.spec import JobSpec
    from kernels import get_kernel
    from kernels.base import LaunchConfig, SwizzleBinding
    from swizzles import resolve_swizzle

    device = describe_device(mode)
    requests = [ProfileRequest(**r) for r in json.loads(Path(argv[0]).read_text())]
    log_path = os.environ.get(DISPATCH_LOG_ENV)
    for req in requests:
        spec = JobSpec.from_dict(req.spec)
        kernel = get_kernel(spec.kernel)
        binding = SwizzleBinding(resolve_swizzle(spec.swizzle, spec.swizzle_formula), spec.num_xcds, spec.group_size)
        launch = LaunchConfig(spec.num_warps, spec.num_stages)
        ops = make_operands(spec.shape, kernel.has_bias, spec.input_seed, device.torch_device)
        run, _ = kernel.bind(ops, spec.shape, spec.tiles_dict, binding, launch)
        grid = kernel.tile_grid(spec.shape, spec.tiles_dict).num_pids
        for _ in range(req.repeats):
            run()
            if log_path:
                with open(log_path, "a") as f:
                    f.write(json.dumps({"kernel_name": kernel.jit_kernel.__name__, "grid": [grid, 1, 1],
                                        "block": [spec.num_warps * 32, 1, 1], "job": req.key}) + "\n")
        if mode == GPU:
            torch.cuda.synchronize()
        print(f"[worker] {spec.run_name}: {req.repeats} launches", file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
