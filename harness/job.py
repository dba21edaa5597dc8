"""One job, start to end: plan -> verify -> measure.  Nothing is measured unless both
gates pass, and every failure says which gate and why."""
from __future__ import annotations

import inspect
import json
import traceback
from dataclasses import dataclass

import numpy as np
import torch

from harness.correctness import compare, make_operands, reference
from harness.device import GPU, DeviceInfo
from harness.faults import FaultPlan, maybe_inject
from harness.result import FINISHED, JobResult
from harness.shapes import downscale
from harness.spec import JobSpec
from harness.timing import tflops, time_gpu, vendor_conv
from kernels import get_kernel
from kernels.base import LaunchConfig, SwizzleBinding
from swizzles import resolve_swizzle
from swizzles.permutation import check_permutation, remap_fingerprint, remap_table


#: Largest grid a job may launch: program ids are int32 in the kernels and the swizzles.
MAX_PIDS = 2**31 - 1


@dataclass(frozen=True)
class JobOptions:
    """Knobs of the pipeline that are not part of the measured spec."""

    interpret_tiles: dict[str, int]
    warmup_ms: float = 25.0
    rep_ms: float = 100.0
    fault: FaultPlan | None = None   # deliberate fault (harness.faults), for robustness tests
    isolated: bool = False           # running in an isolated worker process


def run_job(spec: JobSpec, device: DeviceInfo, options: JobOptions) -> JobResult:
    """Run one job; never raises for a problem of the job itself (it becomes a FAILED result)."""
    result = JobResult(run_name=spec.run_name, params=spec.as_params())
    result.tags.update({"spec_hash": spec.spec_hash, "mode": device.mode, "device": device.name})
    if device.uuid:
        result.tags["device_uuid"] = device.uuid
    stage = "plan"
    try:
        maybe_inject(options.fault, spec, in_worker=options.isolated)
        kernel = get_kernel(spec.kernel)
        swizzle_fn = resolve_swizzle(spec.swizzle, spec.swizzle_formula)
        tiles = kernel.check_tiles(spec.tiles_dict)
        binding = SwizzleBinding(swizzle_fn, spec.num_xcds, spec.group_size)
        launch = LaunchConfig(spec.num_warps, spec.num_stages)
        result.artifacts["kernel_source.py"] = _source_as_launched(kernel, swizzle_fn, spec, tiles)

        # Gate 1: the remap over the job's real, full-size grid must be a permutation.
        grid = kernel.tile_grid(spec.shape, tiles)
        result.params.update({"grid.num_pid_m": str(grid.num_pid_m), "grid.num_pid_n": str(grid.num_pid_n),
                              "grid.num_pids": str(grid.num_pids)})
        if grid.num_pids > MAX_PIDS:   # pids are int32 in every kernel and swizzle: they would wrap
            return result.fail(
                f"shape {spec.shape.name!r}: grid of {grid.num_pid_m} x {grid.num_pid_n} = {grid.num_pids} programs "
                f"exceeds {MAX_PIDS} (2**31 - 1, the int32 program ids of the kernels and swizzles); "
                "use a smaller shape or larger tiles", gate="shape")
        table = remap_table(swizzle_fn, grid.num_pid_m, grid.num_pid_n, spec.num_xcds, spec.group_size,
                            device.torch_device)
        verdict = check_permutation(table)
        result.tags["gate.permutation"] = verdict.reason
        # Two swizzles with the same table launch the same kernel in the same order (e.g. xcd
        # with num_xcds=1): the report must not call their difference a speedup.
        result.params["remap.hash"] = remap_fingerprint(table)
        result.params["remap.is_identity"] = str(bool((table == np.arange(len(table))).all()))
        if not verdict.ok:
            return result.fail(f"swizzle {spec.swizzle}: {verdict.reason}", gate="permutation")

        # Gate 2: the output must match conv2d.  On the CPU the interpreter runs a
        # down-scaled instance of the shape with small tiles (harness.shapes.downscale).
        stage = "verify"
        if device.mode == GPU:
            check_shape, check_tiles = spec.shape, tiles
        else:
            check_shape, check_tiles = downscale(spec.shape), kernel.check_tiles(options.interpret_tiles)
            result.params["verified_shape"] = (f"N{check_shape.N} C{check_shape.C} H{check_shape.H} "
                                               f"W{check_shape.W} F{check_shape.F}")
            small = kernel.tile_grid(check_shape, check_tiles)
            small_verdict = check_permutation(remap_table(swizzle_fn, small.num_pid_m, small.num_pid_n,
                                                          spec.num_xcds, spec.group_size, "cpu"))
            if not small_verdict.ok:
                return result.fail(
                    f"unverifiable on CPU: swizzle {spec.swizzle} is a permutation of the full grid "
                    f"({grid.num_pids} pids) but on the down-scaled grid used for the interpreter check "
                    f"it is {small_verdict.reason}", gate="correctness")
        ops = make_operands(check_shape, kernel.has_bias, spec.input_seed, device.torch_device)
        run, out = kernel.bind(ops, check_shape, check_tiles, binding, launch)
        run()
        if device.mode == GPU:
            torch.cuda.synchronize()
        check = compare(kernel.output_as_nchw(out), reference(ops, check_shape), check_shape.dtype)
        result.metrics["max_rel_err"] = check.max_rel_err
        result.tags["gate.correctness"] = check.reason
        if not check.ok:
            return result.fail(f"kernel {spec.kernel} with swizzle {spec.swizzle}: {check.reason}",
                               gate="correctness")

        # Measure: only a verified kernel is timed.
        stage = "measure"
        if device.mode == GPU:
            t = time_gpu(run, options.warmup_ms, options.rep_ms)
            v = time_gpu(vendor_conv(ops, spec.shape), options.warmup_ms, options.rep_ms)
            result.metrics.update({
                "time_ms_median": t.median_ms, "time_ms_p20": t.p20_ms, "time_ms_p80": t.p80_ms,
                "tflops": tflops(spec.shape, t.median_ms),
                "vendor_time_ms": v.median_ms, "vendor_time_ms_p20": v.p20_ms, "vendor_time_ms_p80": v.p80_ms,
                "vendor_tflops": tflops(spec.shape, v.median_ms),
                "ratio_to_vendor": t.median_ms / v.median_ms,
            })
            result.tags["timing"] = "measured: triton.testing.do_bench, L2 flushed between reps"
        else:
            result.tags["timing"] = "not measured: no GPU (correctness checked under the Triton interpreter)"
        result.status = FINISHED
        result.reason = f"verified: {verdict.reason}; {check.reason}"
        return result
    except Exception as exc:  # a job's own failure must not stop the sweep
        result.artifacts["traceback.txt"] = traceback.format_exc()
        return result.fail(f"{stage} error: {type(exc).__name__}: {_first_line(exc)}", gate=stage)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0][:500] if text else repr(exc)


def _source_as_launched(kernel, swizzle_fn, spec: JobSpec, tiles: dict) -> str:
    """The Triton source of the kernel and the swizzle, headed by the launch parameters."""
    meta = {"kernel": spec.kernel, "swizzle": spec.swizzle, "NUM_XCDS": spec.num_xcds,
            "GROUP_SIZE": spec.group_size, "num_warps": spec.num_warps, "num_stages": spec.num_stages,
            **tiles}
    header = "# launched with: " + json.dumps(meta, sort_keys=True)
    return "\n\n".join([header, inspect.getsource(swizzle_fn.fn), inspect.getsource(kernel.jit_kernel.fn)])
