"""One job, start to end: plan (resolved once into a :class:`harness.job.plan.PlannedJob`)
-> tune -> compile -> verify -> measure.  Nothing is measured unless both gates pass, and
every failure says which gate and why.  A job with a baseline swizzle (config
``compare.baseline``) gates the baseline the same way and times both in the same rounds
(:mod:`harness.measure.paired`)."""
from __future__ import annotations

import inspect
import json
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np
import torch

from harness.compile.build import CompileFailed, CompileReport
from harness.compile.client import CompileOptions, client
from harness.hardware.device import GPU, DeviceInfo
from harness.job.faults import FaultPlan, maybe_inject
from harness.job.plan import Arm, PlannedJob, plan_job
from harness.job.result import BASELINE_ROLE, CANDIDATE_ROLE, FINISHED, JobResult
from harness.job.shapes import downscale
from harness.job.spec import JobSpec
from harness.job.verdict import NO_GPU
from harness.measure.correctness import compare, make_operands, placed_copies, reference
from harness.measure.paired import BASELINE, CANDIDATE, NOT_TIMED, measure_paired, vendor_arms
from harness.measure.roofline import Roofline
from harness.measure.timing import PairedSettings
from harness.tune.best_vs_best import record_configs, shared_buffers
from harness.tune.per_job import tune_job
from harness.tune.search import FASTEST, TuneError, TuneOptions, candidates
from kernels.base import Operands
from kernels.problem import ConvShape
from kernels.tuning import Config, DeviceTraits
from swizzles.custom import zero_divisor
from swizzles.permutation import check_permutation, remap_fingerprint, remap_table


#: Largest grid a job may launch: program ids are int32 in the kernels and the swizzles.
MAX_PIDS = 2**31 - 1


@dataclass(frozen=True)
class JobOptions:
    """Knobs of the pipeline that are not part of the measured spec."""

    interpret_tiles: dict[str, int]
    paired: PairedSettings = PairedSettings()
    min_effect: float = 0.01          # smallest speedup change called a verdict (fraction)
    fault: FaultPlan | None = None    # deliberate fault (harness.job.faults), for robustness tests
    tune: TuneOptions = TuneOptions()  # how spec.tune != "none" tunes (harness.tune.search)
    compile: CompileOptions = CompileOptions()  # the compile stage (harness.compile.build)
    isolated: bool = False            # running in an isolated worker process
    roofline: Roofline | None = None  # the target's measured peaks (harness.measure.roofline)


@dataclass
class _Permuted:
    """An arm that passed the permutation gate over the job's full grid."""

    arm: Arm
    remap_hash: str      # remap_fingerprint of the table: equal iff same tile order
    is_identity: bool    # the table is launch order
    reason: str          # the permutation gate's verdict


@dataclass(frozen=True)
class _Instance:
    """Where the correctness gate and the rounds run: the operands, the shape they are for
    (the job's on a GPU; its down-scaled copy under the interpreter), each arm's tiles
    there (``base_tiles``: the baseline's, None without one) and the job's full grid."""

    ops: Operands
    shape: ConvShape
    tiles: dict[str, int]
    base_tiles: dict[str, int] | None
    grid: object


class _GateFailed(Exception):
    """A gate rejected the job; ``gate`` names it."""

    def __init__(self, reason: str, gate: str, unverifiable: bool = False):
        super().__init__(reason)
        self.gate = gate
        self.unverifiable = unverifiable   # the gate could not judge (JobResult.unverifiable)


class _StageError(Exception):
    """An unexpected error inside stage ``stage``: the job FAILS with it (gate = the stage)."""

    def __init__(self, stage: str, cause: BaseException, trace: str):
        super().__init__(str(cause))
        self.stage, self.cause, self.trace = stage, cause, trace


@contextmanager
def _stage(name: str) -> Iterator[None]:
    """Run a block as stage ``name``: any exception it raises becomes a _StageError naming it."""
    try:
        yield
    except _StageError:
        raise
    except Exception as exc:
        raise _StageError(name, exc, traceback.format_exc()) from exc


def run_job(spec: JobSpec, device: DeviceInfo, options: JobOptions) -> JobResult:
    """Run one job; never raises for a problem of the job itself (it becomes a FAILED result).
    Steps: plan (resolve once, :func:`harness.job.plan.plan_job`; permutation gate) -> tune ->
    compile -> verify (correctness gate) -> measure, for the job's swizzle and, when it has
    one, its baseline beside it."""
    result = JobResult(run_name=spec.run_name, params=spec.as_params())
    result.tags.update({"spec_hash": spec.spec_hash, "mode": device.mode, "device": device.name})
    if device.uuid:
        result.tags["device_uuid"] = device.uuid
    try:
        with _stage("plan"):
            maybe_inject(options.fault, spec, in_worker=options.isolated)
            plan = plan_job(spec)   # imports a user's kernel and remap: their errors belong to the plan stage
        if options.compile.only:   # compile.only=true: compile for the target, run nothing
            with _stage("compile"):
                return _compile_only(plan, options.compile, result)
        if spec.tune != "none":   # the chosen config(s) replace the configured one from here on
            with _stage("tune"):
                plan = _tuned(plan, device, options, result)
        return _gate_and_measure(plan, device, options, result)
    except _StageError as err:  # a job's own failure must not stop the sweep
        result.artifacts["traceback.txt"] = err.trace
        return result.fail(f"{err.stage} error: {type(err.cause).__name__}: {_first_line(err.cause)}",
                           gate=err.stage)


def _tuned(plan: PlannedJob, device: DeviceInfo, options: JobOptions, result: JobResult) -> PlannedJob:
    """Tune mode's plan (:func:`harness.tune.per_job.tune_job`); a TuneError fails the job."""
    try:
        return tune_job(plan, device, options.tune, result, options.paired.timer if options.paired.standin else None,
                        options.compile.arch)
    except TuneError as exc:
        raise _GateFailed(f"tune: {exc}", "tune") from None


def _gate_and_measure(plan: PlannedJob, device: DeviceInfo, options: JobOptions, result: JobResult) -> JobResult:
    """Plan checks, the compile stage, the permutation and correctness gates, then the rounds."""
    spec, kernel = plan.spec, plan.kernel
    with _stage("plan"):
        grid = kernel.tile_grid(spec.shape, plan.candidate.tiles)
        result.params.update({"grid.num_pid_m": str(grid.num_pid_m), "grid.num_pid_n": str(grid.num_pid_n),
                              "grid.num_pids": str(grid.num_pids)})
        if grid.num_pids > MAX_PIDS:   # pids are int32 in every kernel and swizzle: they would wrap
            return result.fail(
                f"shape {spec.shape.name!r}: grid of {grid.num_pid_m} x {grid.num_pid_n} = {grid.num_pids} programs "
                f"exceeds {MAX_PIDS} (2**31 - 1, the int32 program ids of the kernels and swizzles); "
                "use a smaller shape or larger tiles", gate="shape")
    # The compile stage: the launch built for the target, on any machine; what does not
    # compile (or fit) there fails here, before anything runs.
    if options.compile.arch:
        with _stage("compile"):
            if not _compiled(plan, options.compile, result):
                return result
    with _stage("plan"):
        permuted = _permutation_gates(plan, grid, device, result)
    if permuted is None:
        return result
    candidate, baseline = permuted
    with _stage("verify"):
        verified = _verify_arms(plan, candidate, baseline, grid, device, options, result)
    if verified is None:
        return result
    inst, runs, check = verified
    with _stage("measure"):
        _measure(plan, candidate, baseline, inst, runs, device, options, result)
    result.status = FINISHED
    result.reason = f"verified: {result.tags['gate.permutation']}; {check.reason}"
    return result


def _compiled(plan: PlannedJob, copts: CompileOptions, result: JobResult) -> bool:
    """The compile stage for both arms; False (the job FAILED) when one does not compile."""
    try:
        _record_compile(result, client(copts.cache_dir).compile(plan.spec, copts.arch))
        if plan.baseline is not None and not plan.same_config:   # best vs best: the baseline's own config too
            built = client(copts.cache_dir).compile(plan.baseline.spec, copts.arch)
            result.tags["baseline.gate.compile"] = built.summary()
    except CompileFailed as exc:
        result.tags["gate.compile"] = str(exc)
        result.fail(f"compile for {copts.target or copts.arch}: {exc}", gate="compile")
        return False
    return True


def _permutation_gates(plan: PlannedJob, grid, device: DeviceInfo,
                       result: JobResult) -> tuple[_Permuted, _Permuted | None] | None:
    """Gate 1: the remap over the job's real, full-size grid must be a permutation, the
    candidate's (None: the job FAILED) and the baseline's (None in the pair: no comparison)."""
    spec = plan.spec
    result.artifacts["kernel_source.py"] = _source_as_launched(plan.kernel, plan.candidate)
    try:
        candidate = _permuted(plan.candidate, grid, device)
    except _GateFailed as exc:
        result.tags["gate.permutation"] = str(exc)
        result.fail(f"swizzle {spec.swizzle}: {exc}", gate=exc.gate)
        return None
    result.tags["gate.permutation"] = candidate.reason
    # Two swizzles with the same table launch the same kernel in the same order (e.g. xcd
    # with num_xcds=1): the report must not call their difference a speedup.
    result.params["remap.hash"] = candidate.remap_hash
    result.params["remap.is_identity"] = str(candidate.is_identity)
    return candidate, _plan_baseline(plan, candidate, device, result)


def _verify_arms(plan: PlannedJob, candidate: _Permuted, baseline: _Permuted | None, grid, device: DeviceInfo,
                 options: JobOptions, result: JobResult):
    """Gate 2: the output must match conv2d.  On the CPU the interpreter runs a down-scaled
    instance of the shape with small tiles (harness.job.shapes.downscale).  Returns (the
    instance, {arm: bound launch}, the candidate's verdict), or None: the job FAILED."""
    spec, kernel = plan.spec, plan.kernel
    if device.mode == GPU:
        shape, tiles = spec.shape, plan.candidate.tiles
    else:
        shape, tiles = downscale(spec.shape), kernel.check_tiles(options.interpret_tiles)
        result.params["verified_shape"] = f"N{shape.N} C{shape.C} H{shape.H} W{shape.W} F{shape.F}"
        result.params["verified_config"] = Config.make(options.interpret_tiles, spec.num_warps, spec.num_stages).label
    base_tiles = None
    if baseline is not None:   # on its own config in best-vs-best mode (harness.tune.best_vs_best)
        base_tiles = tiles if device.mode != GPU else baseline.arm.tiles
    ops = make_operands(shape, kernel.has_bias, spec.input_seed, device.torch_device, spec.input_layout)
    inst = _Instance(ops, shape, tiles, base_tiles, grid)
    try:
        run, check = _verify(kernel, candidate, inst, tiles, device)
    except _GateFailed as exc:
        result.fail(str(exc), gate=exc.gate)
        result.unverifiable = exc.unverifiable
        return None
    result.metrics["max_rel_err"] = check.max_rel_err
    result.tags["gate.correctness"] = check.reason
    runs = {CANDIDATE: run}
    if baseline is not None:
        try:   # on the candidate's own buffers: the same addresses for both (kernels.base.bind)
            runs[BASELINE], _ = _verify(kernel, baseline, inst, base_tiles, device,
                                        share=shared_buffers(kernel, ops, shape, base_tiles, tiles, run.bound))
        except _GateFailed as exc:
            _no_comparison(result, f"baseline {spec.baseline} failed the {exc.gate} gate: {exc}")
    return inst, runs, check


def _measure(plan: PlannedJob, candidate: _Permuted, baseline: _Permuted | None, inst: _Instance, runs: dict,
             device: DeviceInfo, options: JobOptions, result: JobResult) -> None:
    """Measure: only verified kernels are timed, candidate and baseline in the same rounds,
    over several placements of their (shared) operands."""
    spec = plan.spec
    if not (device.mode == GPU or options.paired.standin):
        result.not_timed = NO_GPU
        if spec.has_baseline and result.comparison.missing is None:
            result.verdict = NOT_TIMED
        return
    arms = {CANDIDATE: runs[CANDIDATE], **vendor_arms(inst.ops, spec.shape)}
    if BASELINE in runs:
        arms[BASELINE] = runs[BASELINE]
    placements = [arms]
    if device.mode == GPU and not options.paired.standin:
        placements += _placements(options.paired.placements - 1, plan, candidate,
                                  baseline if BASELINE in runs else None, inst)
    else:   # a stand-in timer launches nothing: the placements are labels
        placements *= options.paired.placements
    measure_paired(result, spec, placements, options)


def _record_compile(result: JobResult, report: CompileReport) -> None:
    """Log a compile report on the job: params, metrics, the job line's clause, the whole report."""
    result.params.update(report.as_params())
    result.metrics.update(report.as_metrics())
    result.tags["gate.compile"] = report.summary()
    result.artifacts["compile_report.json"] = json.dumps(report.to_dict(), indent=1)


def _compile_only(plan: PlannedJob, copts: CompileOptions, result: JobResult) -> JobResult:
    """``compile.only=true``: the job's config compiled for the target, nothing verified,
    timed or profiled.  In tune mode every candidate of the kernel's space for the target
    (:meth:`kernels.base.ConvKernel.tune_space`) is compiled too: the job FAILS if any does not,
    so that the first ``tune=fastest`` on that machine meets no compile error."""
    spec = plan.spec
    compiler = client(copts.cache_dir)
    try:
        report = compiler.compile(spec, copts.arch)
    except CompileFailed as exc:
        result.tags["gate.compile"] = str(exc)
        return result.fail(f"compile for {copts.target or copts.arch}: {exc}", gate="compile")
    _record_compile(result, report)
    result.compile_only = True
    result.tags["timing"] = f"not run: compile.only=true (compiled for {copts.arch})"
    if spec.tune == FASTEST:
        traits = DeviceTraits.for_target(copts.target, copts.arch, copts.compute_units)
        default = Config.make(spec.tiles_dict, spec.num_warps, spec.num_stages)
        trials, failed = [], []
        for cfg in candidates(spec.kernel, spec.shape, traits, default):
            try:
                built = compiler.compile(spec.with_config(cfg.tiles_dict, cfg.num_warps, cfg.num_stages), copts.arch)
                trials.append({"config": cfg.label, "summary": built.summary(), "seconds": built.seconds})
            except CompileFailed as exc:
                failed.append({"config": cfg.label, "error": str(exc)})
        result.metrics.update({"compile.candidates": float(len(trials) + len(failed)),
                               "compile.candidate_failures": float(len(failed))})
        result.artifacts["compile_candidates.json"] = json.dumps({"compiled": trials, "failed": failed}, indent=1)
        if failed:
            return result.fail(f"compile for {copts.target or copts.arch}: {len(failed)} of {len(trials) + len(failed)} "
                               f"tune candidates do not compile; first: {failed[0]['config']}: {failed[0]['error']}",
                               gate="compile")
        result.tags["timing"] += f"; {len(trials)} tune candidates compiled"
    result.status = FINISHED
    result.reason = f"compiled: {report.summary()}"
    return result


def _permuted(arm: Arm, grid, device: DeviceInfo) -> _Permuted:
    """The permutation gate for one arm over ``grid`` (the job's full grid, or the baseline's);
    a formula that divides by zero anywhere on the grid fails it on every device."""
    spec = arm.spec
    divides_by_zero = spec.swizzle_formula and zero_divisor(spec.swizzle_formula, grid.num_pid_m, grid.num_pid_n,
                                                            spec.num_xcds, spec.group_size)
    if divides_by_zero:   # undefined on a GPU, 0 under the interpreter: refused on every device
        raise _GateFailed(f"division by zero at {divides_by_zero}; never run", "permutation")
    table = remap_table(arm.remap, grid.num_pid_m, grid.num_pid_n, spec.num_xcds, spec.group_size,
                        device.torch_device)
    verdict = check_permutation(table)
    if not verdict.ok:
        raise _GateFailed(verdict.reason, "permutation")
    return _Permuted(arm, remap_fingerprint(table), bool((table == np.arange(len(table))).all()), verdict.reason)


def _plan_baseline(plan: PlannedJob, candidate: _Permuted, device: DeviceInfo, result: JobResult) -> _Permuted | None:
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
        permuted = _permuted(plan.baseline, plan.kernel.tile_grid(spec.shape, plan.baseline.tiles), device)
    except _GateFailed as exc:
        _no_comparison(result, f"baseline {spec.baseline} failed the {exc.gate} gate: {exc}")
        return None
    result.params["baseline.remap.hash"] = permuted.remap_hash
    same = permuted.remap_hash == candidate.remap_hash and plan.same_config   # same kernel, same order
    result.comparison.same_order = same
    return permuted


def _placements(count: int, plan: PlannedJob, candidate: _Permuted, baseline: _Permuted | None,
                inst: _Instance) -> list[dict]:
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


def _no_comparison(result: JobResult, why: str) -> None:
    result.comparison.missing = why


def _verify(kernel, permuted: _Permuted, inst: _Instance, tiles: dict[str, int], device: DeviceInfo, share=None):
    """The correctness gate for one arm on ``inst`` with ``tiles``: returns ``(run, verdict)``
    or raises _GateFailed.  ``share``: run on the buffers of an earlier binding (re-poisoned first)."""
    spec, shape = permuted.arm.spec, inst.shape
    if device.mode != GPU:
        small = kernel.tile_grid(shape, tiles)
        small_verdict = check_permutation(remap_table(permuted.arm.remap, small.num_pid_m, small.num_pid_n,
                                                      spec.num_xcds, spec.group_size, "cpu"))
        if not small_verdict.ok:
            raise _GateFailed(
                f"unverifiable on CPU: swizzle {spec.swizzle} is a permutation of the full grid "
                f"({inst.grid.num_pids} pids) but on the down-scaled grid used for the interpreter check "
                f"it is {small_verdict.reason}", "correctness", unverifiable=True)
    run, out = kernel.bind(inst.ops, shape, tiles, permuted.arm.binding, permuted.arm.launch, share=share)
    run()
    if device.mode == GPU:
        torch.cuda.synchronize()
    check = compare(kernel.output_as_nchw(out), reference(inst.ops, shape), shape.dtype)
    if not check.ok:
        raise _GateFailed(f"kernel {spec.kernel} with swizzle {spec.swizzle}: {check.reason}", "correctness")
    return run, check


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0][:500] if text else repr(exc)


def _source_as_launched(kernel, arm: Arm) -> str:
    """The Triton source of the kernel and the arm's swizzle, headed by the launch parameters."""
    spec = arm.spec
    meta = {"kernel": spec.kernel, "swizzle": spec.swizzle, "NUM_XCDS": spec.num_xcds,
            "GROUP_SIZE": spec.group_size, "num_warps": spec.num_warps, "num_stages": spec.num_stages,
            **arm.tiles}
    header = "# launched with: " + json.dumps(meta, sort_keys=True)
    return "\n\n".join([header, inspect.getsource(arm.remap.fn), inspect.getsource(kernel.jit_kernel_for(arm.tiles).fn)])
