"""One job, start to end: plan (resolved once into a :class:`harness.job.plan.PlannedJob`)
-> tune -> compile -> verify -> measure.  Nothing is measured unless the gates pass (the
compile, permutation and correctness gates: :mod:`harness.gates`), and every failure says
which gate and why.  A job with a baseline swizzle (config
``compare.baseline``) gates the baseline the same way and times both in the same rounds
(:mod:`harness.measure.paired`)."""
from __future__ import annotations

import json
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from harness.compile.build import CompileFailed
from harness.compile.client import CompileOptions, client
from harness.gates import GateFailed
from harness.gates.compile import compile_gate, record_compile, refuse
from harness.gates.correctness import Instance, correctness_gate
from harness.gates.permutation import Permuted, permutation_gate
from harness.hardware.device import GPU, DeviceInfo
from harness.job.faults import FaultPlan, maybe_inject
from harness.job.plan import PlannedJob, plan_job
from harness.job.result import FINISHED, JobResult
from harness.job.spec import JobSpec
from harness.job.verdict import NO_GPU
from harness.measure.correctness import placed_copies
from harness.measure.paired import BASELINE, CANDIDATE, NOT_TIMED, measure_paired, vendor_arms
from harness.measure.roofline import Roofline
from harness.measure.timing import PairedSettings
from harness.tune.best_vs_best import shared_buffers
from harness.tune.per_job import tune_job
from harness.tune.search import FASTEST, TuneError, TuneOptions, candidates
from kernels.tuning import Config, DeviceTraits


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
        raise GateFailed(f"tune: {exc}", "tune") from None


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
            if not compile_gate(plan, options.compile, result):
                return result
    with _stage("plan"):
        permuted = permutation_gate(plan, grid, device, result)
    if permuted is None:
        return result
    candidate, baseline = permuted
    with _stage("verify"):
        verified = correctness_gate(plan, candidate, baseline, grid, device, options.interpret_tiles, result)
    if verified is None:
        return result
    inst, runs, check = verified
    with _stage("measure"):
        _measure(plan, candidate, baseline, inst, runs, device, options, result)
    result.status = FINISHED
    result.reason = f"verified: {result.tags['gate.permutation']}; {check.reason}"
    return result


def _measure(plan: PlannedJob, candidate: Permuted, baseline: Permuted | None, inst: Instance, runs: dict,
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
        return refuse(result, copts, exc)
    record_compile(result, report)
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


def _placements(count: int, plan: PlannedJob, candidate: Permuted, baseline: Permuted | None,
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


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0][:500] if text else repr(exc)
