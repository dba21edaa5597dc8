"""The Hydra task: one job = one kernel x swizzle x launch config over every shape of
the chosen preset, each shape a tracked MLflow run.

:func:`run_hydra_job` reads top to bottom as the job's steps, from the checked job (the
resolved config, the typed config, its shapes and the job's options: harness.preflight, run
once per job by the task, the one module that reads the composed ``cfg``) -> profiler, store
and runner -> each shape: spec, resume, run, log -> the verified shapes profiled and logged
(the L2 stage).  Every later step gets typed objects (harness.schema.Config and its nodes),
never ``cfg``.

The L2 stage (:func:`profile_and_finish`): after a job's shapes are verified and timed,
profile their L2 (one profiler launch for all, or one each), pair candidate and baseline
readings into the L2 verdict, and log each run.  Hit rates are in % (0-100), deltas in
percentage points."""
from __future__ import annotations

import logging
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from hydra.core.hydra_config import HydraConfig
from omegaconf import OmegaConf

from harness.callbacks import sweep_run_id
from harness.hardware.device import GPU, DeviceInfo, describe_device
from harness.run.interrupt import Interrupted
from harness.run.isolation import InProcessRunner, IsolatedRunner
from harness.hardware.pinning import DevicePin, inherited_visibility, parse_devices, require_isolation
from harness.preflight import CheckedJob
from harness.run.options import JobOptions
from harness.run import live
from harness.run.progress import NAME_WIDTH, print_line
from harness.job.plan import PlannedJob, plan_job
from harness.job.result import FINISHED, JobResult
from harness.job.spec import JobSpec
from harness.job.verdict import L2, NO_PROFILER, Kind, Verdict
from harness.measure.paired import record_l2, record_read_l2
from harness.profilers.worker import ProfileRequest
from harness.job.spec_config import build_spec
from harness.tune.search import FASTEST
from harness.profilers import Profiler, make_profiler
from harness.schema import Config, IsolationConfig, ProfilerConfig, TargetConfig
from harness.storage.field_names import Metric, Param, Tag
from harness.storage.provenance import git_commit, library_versions
from harness.storage.run_fields import PROFILER_ARTIFACTS
from harness.storage.spool import spool_dir_for
from harness.storage.tracking import Reuse, Tracker, resolve_tracking_uri

log = logging.getLogger("swizzlebench")


def run_hydra_job(checked: CheckedJob, mode: str) -> list[JobResult]:
    """Run every shape of the checked job's preset (harness.preflight.check_job: user errors
    come first, nothing logged if refused) and log each to MLflow; returns the results."""
    device = describe_device(mode)
    job, entries, options = checked.job, checked.entries, checked.options
    config_yaml = OmegaConf.to_yaml(checked.config, resolve=True)
    profiler = (None if options.compile.only else   # compile.only runs nothing, so profiles nothing
                make_profiler(job.profiler, device, job.target.as_dict()))  # fails fast when the tool is missing
    tracker = Tracker(resolve_tracking_uri(job.tracking.uri), job.experiment,
                      spool_dir=spool_dir_for(job.tracking.spool_dir))
    parent = sweep_run_id()
    common_tags = {Tag.GIT_COMMIT: git_commit(), **library_versions(), Tag.TARGET: job.target.name}
    job_num = HydraConfig.get().job.get("num", 0) if HydraConfig.initialized() else 0

    pkey = profiler_key(profiler, job.profiler)
    runner = make_runner(job.isolation, job.devices, device, job_num, profiler)
    if options.tune.mode == FASTEST and device.mode == GPU and not options.compile.only:
        _precompile(job, entries, pkey, tracker, options)
    sweep = _Sweep(job, runner, tracker, parent, common_tags, config_yaml, options, pkey, profiler)
    try:
        results = _run_entries(sweep, entries, job_num)
        _profile_pending(sweep)
    except Interrupted as stop:   # SIGTERM / SIGINT: the runs in flight or awaiting their profile end KILLED
        tracker.kill_open_runs(stop.reason("mid-job"))
        raise
    return results


def profiler_key(profiler: Profiler | None, settings: ProfilerConfig) -> str:
    """What a job's L2 figures depend on, for its spec hash: backend, cache state, repeats."""
    if profiler is None:
        return "none"
    tags = profiler.tags()
    return f"{tags[Tag.PROFILER]}/cache={tags.get(Tag.CACHE_CONTROL, '-')}/r{settings.repeats}"


def make_runner(isolation: IsolationConfig, devices: object, device: DeviceInfo, job_num: int = 0,
                profiler: Profiler | None = None):
    """The job's runner.  With ``devices`` set, the job's GPU work is pinned to GPU
    ``devices[job_num % len(devices)]``: the runner is always isolated (also on the CPU) and
    its worker, like the profiler's worker, sees only that GPU (harness.hardware.pinning)."""
    pinned = parse_devices(devices)
    if pinned:
        require_isolation(pinned, isolation.mode)
        pin = DevicePin.for_job(job_num, pinned)
        inherited = inherited_visibility(os.environ)
        if inherited:
            log.warning("devices=%s overrides the inherited %s in the job's worker processes",
                        list(pinned), inherited)
        if profiler is not None:
            profiler.pin_to(pin)
        log.info("job %d pinned to GPU %d (devices=%s)", job_num, pin.device, list(pinned))
        return IsolatedRunner(timeout_s=isolation.timeout_s, pin=pin)
    if isolation.mode == "process" or (isolation.mode == "auto" and device.mode == GPU):
        return IsolatedRunner(timeout_s=isolation.timeout_s)
    return InProcessRunner(device)


def _precompile(job: Config, entries, pkey: str, tracker: Tracker, options: JobOptions) -> None:
    """Tune mode on a GPU: compile the candidates of the shapes still to run, in parallel."""
    from harness.tune.search import precompile_specs

    specs = []
    for entry in entries:
        try:
            spec = build_spec(job, entry.shape, entry.preset, pkey) if entry.shape is not None else None
        except ValueError:
            continue   # the shape's job fails with its reason, below
        if spec is not None and not (job.resume and tracker.find_finished(spec.spec_hash)):
            specs.append(spec)
    print(precompile_specs(specs, options.tune), flush=True)


@dataclass
class _Sweep:
    """What every shape of the job shares: the typed config, the runner, the store and the
    sweep's run id, the tags every run carries, the composed config's YAML, the pipeline's
    options, the profiler's spec key and the profiler, and the verified runs waiting for it
    (``pending``: (run id, profiled spec, result, progress position))."""

    job: Config
    runner: object
    tracker: Tracker
    parent: str | None
    common_tags: dict[str, str]
    config_yaml: str
    options: JobOptions
    pkey: str
    profiler: Profiler | None
    pending: list = field(default_factory=list)


def _run_entries(sweep: _Sweep, entries, job_num: int) -> list[JobResult]:
    """Run the job's shapes in turn (:func:`_run_entry`); the results of those not skipped.
    The runner is closed at the end, and when interrupted (its worker is then killed at once)."""
    results = []
    live.job_started(len(entries))
    try:
        for i, entry in enumerate(entries, 1):
            result = _run_entry(sweep, entry, f"[job {job_num} | {i}/{len(entries)}]")
            if result is not None:
                results.append(result)
    finally:
        sweep.runner.close()
    return results


def _run_entry(sweep: _Sweep, entry, position: str) -> JobResult | None:
    """Run one shape of the job: skip it if already FINISHED (resume), else run and log it
    (or queue it for profiling).  Returns the result, None when skipped."""
    job, tracker, pkey, profiler = sweep.job, sweep.tracker, sweep.pkey, sweep.profiler
    spec, result = None, None
    if entry.shape is None:
        result = _failed_entry(job, entry, {Param.SHAPE_PREFIX + k: str(v) for k, v in entry.raw.items()},
                               f"invalid shape: {entry.error}", "shape")
    else:
        try:
            spec = build_spec(job, entry.shape, entry.preset, pkey)
        except ValueError as exc:  # FormulaError included: a clear reason, and the sweep goes on
            result = _failed_entry(job, entry, {Param.SWIZZLE: str(job.swizzle["name"])}, f"invalid swizzle: {exc}",
                                   "swizzle")
    if spec is None:
        run_id = tracker.start_job(result.run_name, sweep.parent, sweep.common_tags)
    else:   # the run claims its spec (spec_hash from the start: a killed sweep's run is found stale)
        run_id = tracker.claim_job(spec.run_name, sweep.parent, sweep.common_tags, spec.spec_hash, job.resume)
        if isinstance(run_id, Reuse):
            print(f"{position} {spec.run_name:<{NAME_WIDTH}} SKIPPED  {run_id.why}", flush=True)
            live.shape_done(failed=False)
            tracker.link_reused(sweep.parent, run_id, spec.run_name)
            return None
    if result is None:
        result = sweep.runner.run(spec, sweep.options)
    result.artifacts["config.yaml"] = sweep.config_yaml
    if profiler is None and spec is not None and compared(spec, result):
        result.l2_verdict = Verdict(L2, Kind.NOT_PROFILED, detail=NO_PROFILER)
    if profiler is not None and result.status == FINISHED:
        sweep.pending.append((run_id, _profiled_plan(spec, result), result, position))  # logged once profiled
        if not profiler.batched:   # the simulator: profiled, logged and printed now, not at the job's end
            _profile_pending(sweep)
        return result
    tracker.finish_job(run_id, result)
    print_line(position, result)
    return result


def _profile_pending(sweep: _Sweep) -> None:
    """Profile, log and print the verified shapes waiting for their L2 reading, then forget them."""
    if not sweep.pending:
        return
    job = sweep.job
    workdir = Path(HydraConfig.get().runtime.output_dir if HydraConfig.initialized() else tempfile.mkdtemp())
    profile_and_finish(sweep.profiler, job.profiler, job.target, sweep.pending, sweep.tracker,
                       job.compare.min_l2_delta, workdir)
    sweep.pending.clear()


def _profiled_plan(spec: JobSpec, result: JobResult) -> PlannedJob:
    """The job whose L2 the profiler reports, planned (:func:`harness.job.plan.plan_job`; the
    runner planned it in its own process, which may be another): the config the target
    launches where this machine launched another (:attr:`JobResult.target_launch`: only off
    the target's GPU, where the L2 is simulated), else the launched one (tune mode's choice),
    else ``spec``."""
    return plan_job(result.target_launch or result.launched or spec)


def _failed_entry(job: Config, entry, params: dict[str, str], reason: str, gate: str) -> JobResult:
    """The FAILED result of a shape entry that could not become a JobSpec."""
    name = f"{job.kernel['name']}/{job.swizzle['name']}/{entry.label}/w{job.launch.num_warps}"
    return JobResult(run_name=name, params=params).fail(reason, gate=gate)


def compared(spec: JobSpec, result: JobResult) -> bool:
    """True when the job has a baseline that passed its gates: profile both, in pairs."""
    return spec.has_baseline and result.comparison.compared


def _simulate_alongside(profiler, settings: ProfilerConfig, target: TargetConfig, requests: list,
                        workdir: Path) -> dict[str, tuple[dict[str, float], dict[str, str]]]:
    """With ``profiler.simulate=true``, also predict each job's hit rate with the simulator
    configured as the target: run id -> (metrics, tags).  The metric ``sim_l2_hit_rate`` (%,
    for the report's simulated vs measured figure) comes with its band ``sim_l2_hit_rate_err``
    where the target is validated, and always with the tag ``sim_l2_validation`` (what it was
    validated on, or "not validated ..."): a simulated figure never goes without one."""
    if not settings.simulate or profiler.name == "sim":
        return {}
    from harness.profilers.sim.profiler import SimProfiler

    outcomes = SimProfiler(target.as_dict(), memory_gib=settings.sim_memory_gib).profile(requests, workdir)
    predicted = {}
    for key, o in outcomes.items():
        if o.reading is None:
            continue
        metrics = {Metric.SIM_L2_HIT_RATE: o.reading.l2_hit_rate}
        if Metric.L2_HIT_RATE_ERR in o.metrics:
            metrics[Metric.SIM_L2_HIT_RATE_ERR] = o.metrics[Metric.L2_HIT_RATE_ERR]
        predicted[key] = (metrics, {Tag.SIM_L2_VALIDATION: o.tags[Tag.SIM_VALIDATION]})
    return predicted


def _compiled(result: JobResult, metric: str) -> int | None:
    """A figure of the job's kernel as compiled for its target, for the simulated L2: metric
    ``compile.<metric>`` (``programs_per_cu``: its residency; ``spill_bytes_per_program``: the
    bytes one program spills, which it stores); None without a compile stage, and where the
    prediction is for the config the target launches, which this machine did not build."""
    if result.target_launch is not None:
        return None
    value = result.metrics.get(Metric.COMPILE_PREFIX + metric)
    return int(value) if value else None


def profile_and_finish(profiler, settings: ProfilerConfig, target: TargetConfig,
                       pending: list[tuple[str, PlannedJob, JobResult, str]], tracker: Tracker,
                       min_l2_delta: float, workdir: Path) -> None:
    """Profile the verified jobs (``pending``: (run id, profiled plan, result, progress
    position) each) in ``workdir`` and log them.  A profiling failure fails the run with its
    reason but keeps its timing metrics."""
    requests = [ProfileRequest(key=run_id, plan=plan, repeats=settings.repeats, paired=compared(plan.spec, result),
                               occupancy=_compiled(result, "programs_per_cu"),
                               spill_bytes=_compiled(result, "spill_bytes_per_program"))
                for run_id, plan, result, _ in pending]
    batches = [requests] if settings.batch else [[r] for r in requests]
    outcomes = {}
    for n, batch in enumerate(batches):
        outcomes.update(profiler.profile(batch, workdir / "profiler" / f"launch{n:03d}"))
    predicted = _simulate_alongside(profiler, settings, target, requests, workdir / "profiler" / "sim")
    for run_id, _, result, position in pending:
        if run_id in predicted:
            result.metrics.update(predicted[run_id][0])
            result.tags.update(predicted[run_id][1])
        _record_outcome(result, outcomes[run_id], profiler, min_l2_delta)
        tracker.finish_job(run_id, result)
        print_line(position, result)


def _record_outcome(result: JobResult, outcome, profiler, min_l2_delta: float) -> None:
    """One job's profile on its result: the reading, and the L2 verdicts when paired."""
    result.tags.update(profiler.tags())
    result.files.extend((PROFILER_ARTIFACTS, p) for p in outcome.raw_files)   # the report file among them
    result.profiler_report = outcome.report
    if outcome.reading is None:
        result.fail(f"profile error: {outcome.error}", gate="profile")
        return
    result.metrics.update(outcome.reading.as_metrics())
    result.metrics.update(outcome.metrics)
    result.tags.update(outcome.tags)
    result.artifacts.update(outcome.artifacts)
    if outcome.pairs:
        record_l2(result, [c for c, _ in outcome.pairs], [b for _, b in outcome.pairs],
                  min_l2_delta, profiler.name, deterministic=profiler.deterministic,
                  error=outcome.delta_error)
        record_read_l2(result, outcome.read_pairs, profiler.deterministic, outcome.read_delta_error)
