"""The correctness gate: an arm's output must match conv2d (harness.measure.correctness).
On the CPU the interpreter runs a down-scaled instance of the shape with small tiles
(harness.job.shapes.downscale), so the remap must also be a permutation of that smaller grid."""
from __future__ import annotations

from dataclasses import dataclass

import torch

from harness.gates import GateFailed
from harness.gates.permutation import Permuted
from harness.hardware.device import GPU, DeviceInfo
from harness.job.plan import PlannedJob
from harness.job.result import JobResult
from harness.job.shapes import downscale
from harness.measure.correctness import compare, make_operands, reference
from harness.measure.paired import BASELINE, CANDIDATE
from harness.tune.best_vs_best import shared_buffers
from harness.storage.field_names import Metric, Param, Tag
from kernels.base import Operands
from kernels.problem import ConvShape
from kernels.tuning import Config
from swizzles.permutation import check_permutation, remap_table


@dataclass(frozen=True)
class Instance:
    """Where the correctness gate and the rounds run: the operands, the shape they are for
    (the job's on a GPU; its down-scaled copy under the interpreter), each arm's tiles
    there (``base_tiles``: the baseline's, None without one) and the job's full grid."""

    ops: Operands
    shape: ConvShape
    tiles: dict[str, int]
    base_tiles: dict[str, int] | None
    grid: object


def correctness_gate(plan: PlannedJob, candidate: Permuted, baseline: Permuted | None, grid, device: DeviceInfo,
                     interpret_tiles: dict[str, int], result: JobResult):
    """The gate for the candidate and, beside it, the baseline (``interpret_tiles``: the tiles
    of the interpreter's down-scaled instance).  Returns (the instance, {arm: bound launch},
    the candidate's verdict), or None: the job FAILED.  A baseline failing it leaves the job
    without a comparison, saying why."""
    spec, kernel = plan.spec, plan.kernel
    if device.mode == GPU:
        shape, tiles = spec.shape, plan.candidate.tiles
    else:
        shape, tiles = downscale(spec.shape), kernel.check_tiles(interpret_tiles)
        result.params[Param.VERIFIED_SHAPE] = f"N{shape.N} C{shape.C} H{shape.H} W{shape.W} F{shape.F}"
        result.params[Param.VERIFIED_CONFIG] = Config.make(interpret_tiles, spec.num_warps, spec.num_stages).label
    base_tiles = None
    if baseline is not None:   # on its own config in best-vs-best mode (harness.tune.best_vs_best)
        base_tiles = tiles if device.mode != GPU else baseline.arm.tiles
    ops = make_operands(shape, kernel.has_bias, spec.input_seed, device.torch_device, spec.input_layout)
    inst = Instance(ops, shape, tiles, base_tiles, grid)
    try:
        run, check = verify(kernel, candidate, inst, tiles, device)
    except GateFailed as exc:
        result.fail(str(exc), gate=exc.gate)
        result.unverifiable = exc.unverifiable
        return None
    result.metrics[Metric.MAX_REL_ERR] = check.max_rel_err
    result.tags[Tag.GATE_CORRECTNESS] = check.reason
    runs = {CANDIDATE: run}
    if baseline is not None:
        try:   # on the candidate's own buffers: the same addresses for both (kernels.base.bind)
            runs[BASELINE], _ = verify(kernel, baseline, inst, base_tiles, device,
                                       share=shared_buffers(kernel, ops, shape, base_tiles, tiles, run.bound))
        except GateFailed as exc:
            result.comparison.missing = f"baseline {spec.baseline} failed the {exc.gate} gate: {exc}"
    return inst, runs, check


def verify(kernel, permuted: Permuted, inst: Instance, tiles: dict[str, int], device: DeviceInfo, share=None):
    """The correctness gate for one arm on ``inst`` with ``tiles``: returns ``(run, verdict)``
    or raises GateFailed.  ``share``: run on the buffers of an earlier binding (re-poisoned first)."""
    spec, shape = permuted.arm.spec, inst.shape
    if device.mode != GPU:
        small = kernel.tile_grid(shape, tiles)
        small_verdict = check_permutation(remap_table(permuted.arm.remap, small.num_pid_m, small.num_pid_n,
                                                      spec.num_xcds, spec.group_size, "cpu"))
        if not small_verdict.ok:
            raise GateFailed(
                f"unverifiable on CPU: swizzle {spec.swizzle} is a permutation of the full grid "
                f"({inst.grid.num_pids} pids) but on the down-scaled grid used for the interpreter check "
                f"it is {small_verdict.reason}", "correctness", unverifiable=True)
    run, out = kernel.bind(inst.ops, shape, tiles, permuted.arm.binding, permuted.arm.launch, share=share)
    run()
    if device.mode == GPU:
        torch.cuda.synchronize()
    check = compare(kernel.output_as_nchw(out), reference(inst.ops, shape), shape.dtype)
    if not check.ok:
        raise GateFailed(f"kernel {spec.kernel} with swizzle {spec.swizzle}: {check.reason}", "correctness")
    return run, check
