"""The measure stage: only verified kernels are timed, candidate and baseline in the same
rounds (:func:`harness.measure.paired.measure_paired`), over several placements of their
(shared) operands."""
from __future__ import annotations

from harness.gates.correctness import Instance
from harness.gates.permutation import Permuted
from harness.hardware.device import GPU, DeviceInfo
from harness.job.plan import PlannedJob
from harness.job.result import JobResult
from harness.job.verdict import NO_GPU
from harness.measure.correctness import placed_copies
from harness.measure.paired import BASELINE, CANDIDATE, NOT_TIMED, measure_paired, vendor_arms
from harness.run.options import JobOptions
from harness.tune.best_vs_best import shared_buffers


def measure(plan: PlannedJob, arms: tuple[Permuted, Permuted | None], inst: Instance, runs: dict,
            device: DeviceInfo, options: JobOptions, result: JobResult) -> None:
    """Time the verified launches ``runs`` (by arm) of ``arms`` (candidate, baseline or None)
    on ``inst``, recording on ``result``; off a GPU, without a stand-in timer, the job says
    it was not timed (and, compared, carries the ``not timed`` verdict)."""
    spec = plan.spec
    if not (device.mode == GPU or options.paired.standin):
        result.not_timed = NO_GPU
        if spec.has_baseline and result.comparison.missing is None:
            result.verdict = NOT_TIMED
        return
    timed = {CANDIDATE: runs[CANDIDATE], **vendor_arms(inst.ops, spec.shape)}
    if BASELINE in runs:
        timed[BASELINE] = runs[BASELINE]
    placements = [timed]
    if device.mode == GPU and not options.paired.standin:
        candidate, baseline = arms
        placements += placements_of(options.paired.placements - 1, plan, candidate,
                                    baseline if BASELINE in runs else None, inst)
    else:   # a stand-in timer launches nothing: the placements are labels
        placements *= options.paired.placements
    measure_paired(result, spec, placements, options)


def placements_of(count: int, plan: PlannedJob, candidate: Permuted, baseline: Permuted | None,
                  inst: Instance) -> list[dict]:
    """``count`` more placements of the job's operands ``inst.ops`` (:func:`placed_copies`,
    seeded by the job; on the device: the inputs are drawn once per job), each with a fresh
    output; candidate and baseline share each placement's buffers (``baseline``: None, no
    baseline arm).  Every placement is kept alive until the job ends; fewer where the GPU is
    short of memory (metric paired_placements)."""
    kernel, shape, tiles = plan.kernel, inst.shape, inst.tiles
    out = []
    for placed, spacer in placed_copies(inst.ops, count, plan.spec.input_seed + 1):
        run, _ = kernel.bind(placed, shape, tiles, candidate.arm.binding, candidate.arm.launch)
        arms = {CANDIDATE: run, **vendor_arms(placed, shape)}
        if baseline is not None:
            arms[BASELINE], _ = kernel.bind(placed, shape, inst.base_tiles, baseline.arm.binding, baseline.arm.launch,
                                            share=shared_buffers(kernel, placed, shape, inst.base_tiles, tiles,
                                                                 run.bound))
        arms[CANDIDATE].spacer = spacer    # type: ignore[attr-defined]  (alive as long as the placement)
        out.append(arms)
    return out
