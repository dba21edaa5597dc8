"""The permutation gate: an arm's remap over the job's real, full-size grid must be a
permutation of its program ids (swizzles.permutation); a formula that divides by zero
anywhere on the grid fails it on every device."""
from __future__ import annotations

import inspect
import json
from dataclasses import dataclass

import numpy as np

from harness.gates import GateFailed
from harness.hardware.device import DeviceInfo
from harness.job.plan import Arm, PlannedJob
from harness.job.result import BASELINE_ROLE, CANDIDATE_ROLE, JobResult
from harness.tune.best_vs_best import record_configs
from harness.storage.field_names import Param, Tag
from swizzles.custom import zero_divisor
from swizzles.permutation import check_permutation, remap_fingerprint, remap_table


@dataclass
class Permuted:
    """An arm that passed the permutation gate over the job's full grid."""

    arm: Arm
    remap_hash: str      # remap_fingerprint of the table: equal iff same tile order
    is_identity: bool    # the table is launch order
    reason: str          # the permutation gate's verdict


def permutation_gate(plan: PlannedJob, grid, device: DeviceInfo,
                     result: JobResult) -> tuple[Permuted, Permuted | None] | None:
    """The gate over the job's full grid ``grid``: the candidate's (None: the job FAILED) and
    the baseline's (None in the pair: no comparison, the job says why)."""
    spec = plan.spec
    result.artifacts["kernel_source.py"] = _source_as_launched(plan.kernel, plan.candidate)
    try:
        candidate = permuted(plan.candidate, grid, device)
    except GateFailed as exc:
        result.tags[Tag.GATE_PERMUTATION] = str(exc)
        result.fail(f"swizzle {spec.swizzle}: {exc}", gate=exc.gate)
        return None
    result.tags[Tag.GATE_PERMUTATION] = candidate.reason
    # Two swizzles with the same table launch the same kernel in the same order (e.g. xcd
    # with num_xcds=1): the report must not call their difference a speedup.
    result.params[Param.REMAP_HASH] = candidate.remap_hash
    result.params[Param.REMAP_IS_IDENTITY] = str(candidate.is_identity)
    return candidate, _baseline_gate(plan, candidate, device, result)


def permuted(arm: Arm, grid, device: DeviceInfo) -> Permuted:
    """The permutation gate for one arm over ``grid`` (the job's full grid, or the baseline's);
    raises GateFailed."""
    spec = arm.spec
    divides_by_zero = spec.swizzle_formula and zero_divisor(spec.swizzle_formula, grid.num_pid_m, grid.num_pid_n,
                                                            spec.num_xcds, spec.group_size)
    if divides_by_zero:   # undefined on a GPU, 0 under the interpreter: refused on every device
        raise GateFailed(f"division by zero at {divides_by_zero}; never run", "permutation")
    table = remap_table(arm.remap, grid.num_pid_m, grid.num_pid_n, spec.num_xcds, spec.group_size,
                        device.torch_device)
    verdict = check_permutation(table)
    if not verdict.ok:
        raise GateFailed(verdict.reason, "permutation")
    return Permuted(arm, remap_fingerprint(table), bool((table == np.arange(len(table))).all()), verdict.reason)


def _baseline_gate(plan: PlannedJob, candidate: Permuted, device: DeviceInfo, result: JobResult) -> Permuted | None:
    """The permutation gate of the job's baseline over its own grid (best vs best: its own
    tiles), or None (no baseline, the job is the baseline, or the baseline failed its gate:
    then the job says why it has no comparison)."""
    spec = plan.spec
    if spec.baseline is None:
        return None
    if plan.baseline is None:
        result.comparison.role = BASELINE_ROLE
        return None
    result.comparison.role = CANDIDATE_ROLE
    record_configs(result, plan)
    try:
        baseline = permuted(plan.baseline, plan.kernel.tile_grid(spec.shape, plan.baseline.tiles), device)
    except GateFailed as exc:
        result.comparison.missing = f"baseline {spec.baseline} failed the {exc.gate} gate: {exc}"
        return None
    result.params[Param.BASELINE_REMAP_HASH] = baseline.remap_hash
    same = baseline.remap_hash == candidate.remap_hash and plan.same_config   # same kernel, same order
    result.comparison.same_order = same
    return baseline


def _source_as_launched(kernel, arm: Arm) -> str:
    """The Triton source of the kernel and the arm's swizzle, headed by the launch parameters."""
    spec = arm.spec
    meta = {"kernel": spec.kernel, "swizzle": spec.swizzle, "NUM_XCDS": spec.num_xcds,
            "GROUP_SIZE": spec.group_size, "num_warps": spec.num_warps, "num_stages": spec.num_stages,
            **arm.tiles}
    header = "# launched with: " + json.dumps(meta, sort_keys=True)
    return "\n\n".join([header, inspect.getsource(arm.remap.fn), inspect.getsource(kernel.jit_kernel_for(arm.tiles).fn)])
