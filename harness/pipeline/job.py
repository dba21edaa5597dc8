"""One job, start to end: plan -> verify -> measure.  Nothing is measured unless both
gates pass, and every failure says which gate and why.  A job with a baseline swizzle
(config ``compare.baseline``) gates the baseline the same way and times both in the same
rounds (:mod:`harness.pipeline.paired`)."""
from __future__ import annotations

import inspect
import json
import traceback
from dataclasses import dataclass

import numpy as np
import torch

from harness.pipeline.compile import CompileFailed, CompileReport
from harness.pipeline.compile_client import CompileOptions, client
from harness.pipeline.correctness import compare, make_operands, placed_copies, reference
from harness.hardware.device import GPU, DeviceInfo
from harness.pipeline.faults import FaultPlan, maybe_inject
from harness.pipeline.result import FINISHED, JobResult
from harness.pipeline.roofline import Roofline
from harness.pipeline.shapes import downscale
from harness.pipeline.spec import JobSpec
from harness.pipeline.paired import BASELINE, CANDIDATE, NOT_TIMED, measure_paired, vendor_arms
from harness.pipeline.timing import PairedSettings
from harness.pipeline.best_vs_best import record_configs, same_config, shared_buffers
from harness.pipeline.job_tuning import tune_job
from harness.pipeline.tuning import FASTEST, TuneError, TuneOptions, candidates
from kernels.tuning import Config, DeviceTraits
from harness.pipeline.user_code import spec_kernel, spec_remap
from kernels.base import LaunchConfig, Operands, SwizzleBinding
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
    fault: FaultPlan | None = None    # deliberate fault (harness.pipeline.faults), for robustness tests
    tune: TuneOptions = TuneOptions()  # how spec.tune != "none" tunes (harness.pipeline.tuning)
    compile: CompileOptions = CompileOptions()  # the compile stage (harness.pipeline.compile)
    isolated: bool = False            # running in an isolated worker process
    roofline: Roofline | None = None  # the target's measured peaks (harness.pipeline.roofline)


@dataclass
class _Planned:
    """A swizzle that passed the permutation gate, bound for launching."""

    swizzle_fn: object
    binding: SwizzleBinding
    remap_hash: str      # remap_fingerprint of the table: equal iff same tile order
    is_identity: bool    # the table is launch order
    reason: str          # the permutation gate's verdict


class _GateFailed(Exception):
    """A gate rejected the job; ``gate`` names it."""

    def __init__(self, reason: str, gate: str):
        super().__init__(reason)
        self.gate = gate


def run_job(spec: JobSpec, device: DeviceInfo, options: JobOptions) -> JobResult:
    """Run one job; never raises for a problem of the job itself (it becomes a FAILED result).
    Steps: plan (permutation gate) -> verify (correctness gate) -> measure, for the job's
    swizzle and, when it has one, its baseline beside it."""
    result = JobResult(run_name=spec.run_name, params=spec.as_params())
    result.tags.update({"spec_hash": spec.spec_hash, "mode": device.mode, "device": device.name})
    if device.uuid:
        result.tags["device_uuid"] = device.uuid
    stage = "plan"
    try:
        maybe_inject(options.fault, spec, in_worker=options.isolated)
        kernel = spec_kernel(spec)
        kernel.check_tiles(spec.tiles_dict)
        if options.compile.only:   # compile.only=true: compile for the target, run nothing
            spec_remap(spec)       # a user's remap that does not import fails at plan, as in every job
            stage = "compile"
            return _compile_only(spec, kernel, options.compile, result)
        if spec.tune != "none":   # the chosen config(s) replace the configured one from here on
            stage = "tune"
            try:
                spec = tune_job(spec, kernel, device, options.tune, result,
                                options.paired.timer if options.paired.standin else None, options.compile.arch)
            except TuneError as exc:
                raise _GateFailed(f"tune: {exc}", "tune") from None
            stage = "plan"
        tiles = kernel.check_tiles(spec.tiles_dict)
        launch = LaunchConfig(spec.num_warps, spec.num_stages)
        grid = kernel.tile_grid(spec.shape, tiles)
        result.params.update({"grid.num_pid_m": str(grid.num_pid_m), "grid.num_pid_n": str(grid.num_pid_n),
                              "grid.num_pids": str(grid.num_pids)})
        if grid.num_pids > MAX_PIDS:   # pids are int32 in every kernel and swizzle: they would wrap
            return result.fail(
                f"shape {spec.shape.name!r}: grid of {grid.num_pid_m} x {grid.num_pid_n} = {grid.num_pids} programs "
                f"exceeds {MAX_PIDS} (2**31 - 1, the int32 program ids of the kernels and swizzles); "
                "use a smaller shape or larger tiles", gate="shape")

        swizzle_fn = spec_remap(spec)   # imports a user's remap: its errors belong to the plan stage

        # The compile stage: the launch built for the target, on any machine; what does not
        # compile (or fit) there fails here, before anything runs.
        if options.compile.arch:
            stage = "compile"
            try:
                _record_compile(result, client(options.compile.cache_dir).compile(spec, options.compile.arch))
                if spec.has_baseline and not same_config(spec):   # best vs best: the baseline's own config too
                    built = client(options.compile.cache_dir).compile(spec.baseline_spec(), options.compile.arch)
                    result.tags["baseline.gate.compile"] = built.summary()
            except CompileFailed as exc:
                result.tags["gate.compile"] = str(exc)
                return result.fail(f"compile for {options.compile.target or options.compile.arch}: {exc}",
                                   gate="compile")
            stage = "plan"

        # Gate 1: the remap over the job's real, full-size grid must be a permutation.
        result.artifacts["kernel_source.py"] = _source_as_launched(kernel, swizzle_fn, spec, tiles)
        try:
            planned = _plan(spec, swizzle_fn, grid, device, spec.swizzle_formula)
        except _GateFailed as exc:
            result.tags["gate.permutation"] = str(exc)
            return result.fail(f"swizzle {spec.swizzle}: {exc}", gate=exc.gate)
        result.tags["gate.permutation"] = planned.reason
        # Two swizzles with the same table launch the same kernel in the same order (e.g. xcd
        # with num_xcds=1): the report must not call their difference a speedup.
        result.params["remap.hash"] = planned.remap_hash
        result.params["remap.is_identity"] = str(planned.is_identity)
        baseline = _plan_baseline(spec, kernel, device, result)

        # Gate 2: the output must match conv2d.  On the CPU the interpreter runs a
        # down-scaled instance of the shape with small tiles (harness.pipeline.shapes.downscale).
        stage = "verify"
        if device.mode == GPU:
            check_shape, check_tiles = spec.shape, tiles
        else:
            check_shape, check_tiles = downscale(spec.shape), kernel.check_tiles(options.interpret_tiles)
            result.params["verified_shape"] = (f"N{check_shape.N} C{check_shape.C} H{check_shape.H} "
                                               f"W{check_shape.W} F{check_shape.F}")
        ops = make_operands(check_shape, kernel.has_bias, spec.input_seed, device.torch_device, spec.input_layout)
        try:
            run, check = _verify(kernel, spec, planned, ops, check_shape, check_tiles, launch, device, grid)
        except _GateFailed as exc:
            return result.fail(str(exc), gate=exc.gate)
        result.metrics["max_rel_err"] = check.max_rel_err
        result.tags["gate.correctness"] = check.reason
        run_baseline, base_launch = None, None
        if baseline is not None:
            bspec = spec.baseline_spec()   # on its own config in best-vs-best mode (harness.pipeline.best_vs_best)
            base_launch = (check_tiles if device.mode != GPU else kernel.check_tiles(bspec.tiles_dict),
                           LaunchConfig(bspec.num_warps, bspec.num_stages))
            try:   # on the candidate's own buffers: the same addresses for both (kernels.base.bind)
                run_baseline, _ = _verify(kernel, bspec, baseline, ops, check_shape, base_launch[0], base_launch[1],
                                          device, grid, share=shared_buffers(kernel, ops, check_shape, base_launch[0],
                                                                             check_tiles, run.bound))
            except _GateFailed as exc:
                _no_comparison(result, f"baseline {spec.baseline} failed the {exc.gate} gate: {exc}")

        # Measure: only verified kernels are timed, candidate and baseline in the same rounds,
        # over several placements of their (shared) operands.
        stage = "measure"
        if device.mode == GPU or options.paired.standin:
            arms = {CANDIDATE: run, **vendor_arms(ops, spec.shape)}
            if run_baseline is not None:
                arms[BASELINE] = run_baseline
            placements = [arms]
            if device.mode == GPU and not options.paired.standin:
                placements += _placements(options.paired.placements - 1, kernel, spec, planned, baseline, ops,
                                          check_shape, check_tiles, launch,
                                          base_launch=base_launch if run_baseline is not None else None)
            else:   # a stand-in timer launches nothing: the placements are labels
                placements *= options.paired.placements
            measure_paired(result, spec, placements, options)
        else:
            result.tags["timing"] = "not measured: no GPU (correctness checked under the Triton interpreter)"
            if spec.has_baseline:
                result.tags.setdefault("verdict", NOT_TIMED)
        result.status = FINISHED
        result.reason = f"verified: {result.tags['gate.permutation']}; {check.reason}"
        return result
    except Exception as exc:  # a job's own failure must not stop the sweep
        result.artifacts["traceback.txt"] = traceback.format_exc()
        return result.fail(f"{stage} error: {type(exc).__name__}: {_first_line(exc)}", gate=stage)


def _record_compile(result: JobResult, report: CompileReport) -> None:
    """Log a compile report on the job: params, metrics, the job line's clause, the whole report."""
    result.params.update(report.as_params())
    result.metrics.update(report.as_metrics())
    result.tags["gate.compile"] = report.summary()
    result.artifacts["compile_report.json"] = json.dumps(report.to_dict(), indent=1)


def _compile_only(spec: JobSpec, kernel, copts: CompileOptions, result: JobResult) -> JobResult:
    """``compile.only=true``: the job's config compiled for the target, nothing verified,
    timed or profiled.  In tune mode every candidate of the kernel's space for the target
    (:meth:`kernels.base.ConvKernel.tune_space`) is compiled too: the job FAILS if any does not,
    so that the first ``tune=fastest`` on that machine meets no compile error."""
    compiler = client(copts.cache_dir)
    try:
        report = compiler.compile(spec, copts.arch)
    except CompileFailed as exc:
        result.tags["gate.compile"] = str(exc)
        return result.fail(f"compile for {copts.target or copts.arch}: {exc}", gate="compile")
    _record_compile(result, report)
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


def _plan(spec: JobSpec, swizzle_fn, grid, device: DeviceInfo, formula: str | None = None) -> _Planned:
    """The permutation gate for one swizzle (``formula``: its text, if a formula) over the job's full grid."""
    divides_by_zero = formula and zero_divisor(formula, grid.num_pid_m, grid.num_pid_n, spec.num_xcds, spec.group_size)
    if divides_by_zero:   # undefined on a GPU, 0 under the interpreter: refused on every device
        raise _GateFailed(f"division by zero at {divides_by_zero}; never run", "permutation")
    table = remap_table(swizzle_fn, grid.num_pid_m, grid.num_pid_n, spec.num_xcds, spec.group_size,
                        device.torch_device)
    verdict = check_permutation(table)
    if not verdict.ok:
        raise _GateFailed(verdict.reason, "permutation")
    return _Planned(swizzle_fn, SwizzleBinding(swizzle_fn, spec.num_xcds, spec.group_size),
                    remap_fingerprint(table), bool((table == np.arange(len(table))).all()), verdict.reason)


def _plan_baseline(spec: JobSpec, kernel, device: DeviceInfo, result: JobResult) -> _Planned | None:
    """Plan the job's baseline over its own grid (best vs best: its own tiles), or None (no
    baseline, the job is the baseline, or the baseline failed its gate: then the job says why
    it has no comparison)."""
    if spec.baseline is None:
        return None
    if not spec.has_baseline:
        result.tags["compare.role"] = "baseline"
        return None
    result.tags["compare.role"] = "candidate"
    bspec = spec.baseline_spec()
    record_configs(result, spec)
    try:
        planned = _plan(spec, spec_remap(bspec), kernel.tile_grid(bspec.shape, kernel.check_tiles(bspec.tiles_dict)),
                        device, bspec.swizzle_formula)
    except _GateFailed as exc:
        _no_comparison(result, f"baseline {spec.baseline} failed the {exc.gate} gate: {exc}")
        return None
    result.params["baseline.remap.hash"] = planned.remap_hash
    same = planned.remap_hash == result.params["remap.hash"] and same_config(spec)   # same kernel, same order
    result.tags["compare.same_order"] = str(same).lower()
    return planned


def _placements(count: int, kernel, spec: JobSpec, planned: _Planned, baseline: _Planned | None, ops: Operands,
                shape, tiles, launch, base_launch: tuple | None) -> list[dict]:
    """``count`` more placements of the job's operands ``ops`` (:func:`placed_copies`, seeded
    by the job; on the device: the inputs are drawn once per job), each with a fresh output;
    candidate and baseline share each placement's buffers (``base_launch``: the baseline's
    (tiles, LaunchConfig); None: no baseline arm).  Every placement is kept alive until the
    job ends; fewer where the GPU is short of memory (metric paired_placements)."""
    out = []
    for placed, spacer in placed_copies(ops, count, spec.input_seed + 1):
        run, _ = kernel.bind(placed, shape, tiles, planned.binding, launch)
        arms = {CANDIDATE: run, **vendor_arms(placed, shape)}
        if base_launch is not None and baseline is not None:
            arms[BASELINE], _ = kernel.bind(placed, shape, base_launch[0], baseline.binding, base_launch[1],
                                            share=shared_buffers(kernel, placed, shape, base_launch[0], tiles,
                                                                 run.bound))
        arms[CANDIDATE].spacer = spacer    # type: ignore[attr-defined]  (alive as long as the placement)
        out.append(arms)
    return out


def _no_comparison(result: JobResult, why: str) -> None:
    result.tags["verdict"] = f"no comparison: {why}"


def _verify(kernel, spec: JobSpec, planned: _Planned, ops, check_shape, check_tiles, launch, device: DeviceInfo,
            grid, share=None):
    """The correctness gate for one swizzle: returns ``(run, verdict)`` or raises _GateFailed.
    ``share``: run on the buffers of an earlier binding (re-poisoned first)."""
    if device.mode != GPU:
        small = kernel.tile_grid(check_shape, check_tiles)
        small_verdict = check_permutation(remap_table(planned.swizzle_fn, small.num_pid_m, small.num_pid_n,
                                                      spec.num_xcds, spec.group_size, "cpu"))
        if not small_verdict.ok:
            raise _GateFailed(
                f"unverifiable on CPU: swizzle {spec.swizzle} is a permutation of the full grid "
                f"({grid.num_pids} pids) but on the down-scaled grid used for the interpreter check "
                f"it is {small_verdict.reason}", "correctness")
    run, out = kernel.bind(ops, check_shape, check_tiles, planned.binding, launch, share=share)
    run()
    if device.mode == GPU:
        torch.cuda.synchronize()
    check = compare(kernel.output_as_nchw(out), reference(ops, check_shape), check_shape.dtype)
    if not check.ok:
        raise _GateFailed(f"kernel {spec.kernel} with swizzle {spec.swizzle}: {check.reason}", "correctness")
    return run, check


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
