"""The Hydra task: one job = one kernel x swizzle x launch config over every shape of
the chosen preset, each shape a tracked MLflow run.

:func:`run_hydra_job` reads top to bottom as the job's steps: the device and the target ->
the typed config (harness.schema: the one place the composed ``cfg`` is read) -> the shapes
and the launch checks -> the job's options -> profiler, store and runner -> each shape: spec,
resume, run, log -> the verified shapes profiled and logged.  Every later step gets typed
objects (harness.schema.Config and its nodes), never ``cfg``."""
from __future__ import annotations

import importlib.resources
import logging
import os
import tempfile
from pathlib import Path

from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf, open_dict

from harness.callbacks import sweep_run_id
from harness.errors import UserError
from harness.hardware.device import GPU, DeviceInfo, describe_device, target_name_for
from harness.hardware.isolation import InProcessRunner, IsolatedRunner
from harness.hardware.pinning import DevicePin, inherited_visibility, parse_devices, require_isolation
from harness.pipeline.job import JobOptions
from harness.pipeline.launch_limits import check_num_warps, check_tiles, limits_for
from harness.pipeline.paired import record_l2, record_read_l2
from harness.pipeline.progress import progress_line
from harness.pipeline.result import FINISHED, JobResult
from harness.pipeline.roofline import Roofline
from harness.pipeline.shapes import expand_preset
from harness.pipeline.spec import JobSpec
from harness.pipeline.spec_config import build_spec
from harness.profilers import Profiler, make_profiler
from harness.profilers.worker import ProfileRequest
from harness.schema import Config, IsolationConfig, ProfilerConfig, TargetConfig, typed_config
from harness.storage.provenance import git_commit, library_versions
from harness.storage.spool import spool_dir_for
from harness.storage.tracking import Tracker, resolve_tracking_uri

log = logging.getLogger("swizzlebench")


def run_hydra_job(cfg: DictConfig, mode: str) -> list[JobResult]:
    """Run every shape of the job's preset and log each to MLflow; returns the results."""
    device = describe_device(mode)
    resolve_target(cfg, device)
    job = typed_config(cfg)   # user errors first: nothing is logged for a command that is refused
    config_yaml = OmegaConf.to_yaml(cfg, resolve=True)
    entries = expand_preset(vars(job.shape))
    check_launch_config(job, entries)
    options = job_options(job)
    profiler = (None if options.compile.only else   # compile.only runs nothing, so profiles nothing
                make_profiler(job.profiler, device, job.target.as_dict()))  # fails fast when the tool is missing
    tracker = Tracker(resolve_tracking_uri(job.tracking.uri), job.experiment,
                      spool_dir=spool_dir_for(job.tracking.spool_dir))
    parent = sweep_run_id()
    common_tags = {"git_commit": git_commit(), **library_versions(), "target": job.target.name}
    job_num = HydraConfig.get().job.get("num", 0) if HydraConfig.initialized() else 0

    pkey = profiler_key(profiler, job.profiler)
    runner = make_runner(job.isolation, job.devices, device, job_num, profiler)
    if options.tune.mode != "none" and device.mode == GPU and not options.compile.only:
        _precompile(job, entries, pkey, tracker, options)
    results, pending = [], []
    try:
        for i, entry in enumerate(entries, 1):
            position = f"[job {job_num} | {i}/{len(entries)}]"
            result = _run_entry(job, entry, runner, tracker, parent, common_tags, config_yaml, options,
                                pkey, position, profiler, pending)
            if result is not None:
                results.append(result)
    finally:
        runner.close()
    if pending:
        _profile_and_finish(profiler, job.profiler, job.target, pending, tracker, job.compare.min_l2_delta)
    return results


def resolve_target(cfg: DictConfig, device: DeviceInfo) -> None:
    """Replace ``target: auto`` by the preset matching the device (in place, so that
    interpolations such as ``swizzle.num_xcds`` follow it)."""
    if cfg.target.name != "auto":
        return
    name = target_name_for(device)
    if name is not None:
        path = importlib.resources.files("swizzlebench_conf") / "target" / f"{name}.yaml"
        target = OmegaConf.load(str(path))
    else:  # a GPU with no shipped preset: describe it from what the driver reports
        target = OmegaConf.create({
            "name": device.name.lower().replace(" ", "_"), "vendor": device.vendor, "arch": device.arch,
            "num_xcds": 1, "compute_units": device.num_sms, "l2_bytes": device.l2_bytes,
            "l2_ways": None, "l2_line_bytes": 128, "l2_domains": 1, "mall_bytes": 0})
    with open_dict(cfg):
        cfg.target = OmegaConf.merge(OmegaConf.structured(TargetConfig), target)
    log.info("target=auto resolved to %s for device %r", target.name, device.name)


def check_launch_config(job: Config, entries: list) -> None:
    """Refuse, before any job runs, a kernel name, ``launch.num_warps`` or tile size that the
    (resolved) target cannot run, also on the CPU (harness.pipeline.launch_limits); raises UserError."""
    from kernels import get_kernel

    kernel_cfg, target = job.kernel, job.target
    if kernel_cfg.get("_target_") is not None:   # the user's own kernel (harness.pipeline.user_code)
        from harness.pipeline.user_code import load_kernel

        try:
            kernel = load_kernel(str(kernel_cfg["_target_"]).strip(), str(kernel_cfg["name"]))
        except (ValueError, ImportError):
            return   # each job fails with the import's reason, and the sweep goes on
    else:
        try:
            kernel = get_kernel(str(kernel_cfg["name"]))
        except ValueError as exc:
            raise UserError(f"kernel.name: {exc}") from None
    limits = limits_for(target.vendor, target.name)
    check_num_warps(job.launch.num_warps, limits, target.name)
    dtypes = {entry.shape.dtype for entry in entries if entry.shape is not None}
    tiles = check_tiles(kernel, dict(kernel_cfg["tiles"]), limits, target.name, dtypes)
    if target.arch is not None:   # e.g. TMA=1 on an AMD target: no job could compile
        try:
            kernel.check_target(None, tiles, limits.vendor, target.arch)
        except ValueError as exc:
            raise UserError(f"kernel.tiles: {exc} (target {target.name})") from None
    check_tiles(kernel, dict(kernel_cfg["interpret_tiles"]), None, target.name, key="kernel.interpret_tiles")


def job_options(job: Config) -> JobOptions:
    """The pipeline's knobs, each built by its typed config node; UserError for a bad value."""
    job.compare.configs_mode(job.tune.name)   # best vs best needs tune mode and a baseline: refuse early
    return JobOptions(interpret_tiles={str(k): int(v) for k, v in job.kernel["interpret_tiles"].items()},
                      paired=job.compare.paired(), min_effect=job.compare.min_effect, fault=job.fault,
                      tune=job.tune.options(), compile=job.compile.options(job.target),
                      roofline=Roofline.of_target(job.target.as_dict()))


def profiler_key(profiler: Profiler | None, settings: ProfilerConfig) -> str:
    """What a job's L2 figures depend on, for its spec hash: backend, cache state, repeats."""
    if profiler is None:
        return "none"
    tags = profiler.tags()
    return f"{tags['profiler']}/cache={tags.get('cache_control', '-')}/r{settings.repeats}"


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
    from harness.pipeline.tuning import precompile_specs

    specs = []
    for entry in entries:
        try:
            spec = build_spec(job, entry.shape, entry.preset, pkey) if entry.shape is not None else None
        except ValueError:
            continue   # the shape's job fails with its reason, below
        if spec is not None and not (job.resume and tracker.find_finished(spec.spec_hash)):
            specs.append(spec)
    print(precompile_specs(specs, options.tune), flush=True)


def _run_entry(job: Config, entry, runner, tracker, parent, common_tags, config_yaml, options, pkey, position,
               profiler, pending) -> JobResult | None:
    """Run one shape of the job: skip it if already FINISHED (resume), else run and log it
    (or queue it for profiling).  Returns the result, None when skipped."""
    spec, result = None, None
    if entry.shape is None:
        result = _failed_entry(job, entry, {f"shape.{k}": str(v) for k, v in entry.raw.items()},
                               f"invalid shape: {entry.error}", "shape")
    else:
        try:
            spec = build_spec(job, entry.shape, entry.preset, pkey)
        except ValueError as exc:  # FormulaError included: a clear reason, and the sweep goes on
            result = _failed_entry(job, entry, {"swizzle": str(job.swizzle["name"])}, f"invalid swizzle: {exc}",
                                   "swizzle")
    if spec is not None:
        if job.resume:
            done = tracker.find_finished(spec.spec_hash)
            if done:
                print(f"{position} {spec.run_name:<36} SKIPPED  already FINISHED as run {done} "
                      "(resume=false to run again)", flush=True)
                return None
        tracker.close_stale(spec.spec_hash)
    # spec_hash from the start: a run left RUNNING by a killed sweep is found by close_stale
    run_id = tracker.start_job(result.run_name if result else spec.run_name, parent,
                               common_tags if spec is None else {**common_tags, "spec_hash": spec.spec_hash})
    if result is None:
        result = runner.run(spec, options)
    result.artifacts["config.yaml"] = config_yaml
    if profiler is None and spec is not None and _compared(spec, result):
        result.tags["l2_verdict"] = "not profiled (profiler=none)"
    if profiler is not None and result.status == FINISHED:
        launched = JobSpec.from_dict(result.launched) if result.launched else spec   # tune mode's choice
        pending.append((run_id, launched, result, position))  # logged once profiled
        return result
    tracker.finish_job(run_id, result)
    print(progress_line(position, result), flush=True)
    return result


def _failed_entry(job: Config, entry, params: dict[str, str], reason: str, gate: str) -> JobResult:
    """The FAILED result of a shape entry that could not become a JobSpec."""
    name = f"{job.kernel['name']}/{job.swizzle['name']}/{entry.label}/w{job.launch.num_warps}"
    return JobResult(run_name=name, params=params).fail(reason, gate=gate)


def _simulate_alongside(profiler, settings: ProfilerConfig, target: TargetConfig, requests: list,
                        workdir: Path) -> dict[str, float]:
    """With ``profiler.simulate=true``, also predict each job's hit rate with the simulator
    configured as the target (logged as ``sim_l2_hit_rate``, for the report's simulated vs
    measured figure).  Returns run id -> predicted %."""
    if not settings.simulate or profiler.name == "sim":
        return {}
    from harness.profilers.sim.profiler import SimProfiler

    outcomes = SimProfiler(target.as_dict()).profile(requests, workdir)
    return {key: o.reading.l2_hit_rate for key, o in outcomes.items() if o.reading is not None}


def _compiled(result: JobResult, metric: str) -> int | None:
    """A figure of the job's kernel as compiled for its target, for the simulated L2: metric
    ``compile.<metric>`` (``programs_per_cu``: its residency; ``spill_bytes_per_program``: the
    bytes one program spills, which it stores); None without a compile stage."""
    value = result.metrics.get(f"compile.{metric}")
    return int(value) if value else None


def _compared(spec: JobSpec, result: JobResult) -> bool:
    """True when the job has a baseline that passed its gates: profile both, in pairs."""
    return (spec.has_baseline and result.tags.get("compare.role") == "candidate"
            and not result.tags.get("verdict", "").startswith("no comparison"))


def _profile_and_finish(profiler, settings: ProfilerConfig, target: TargetConfig, pending: list, tracker: Tracker,
                        min_l2_delta: float) -> None:
    """Profile the verified jobs (one profiler launch for all, or one each) and log them.
    A profiling failure fails the run with its reason but keeps its timing metrics."""
    workdir = Path(HydraConfig.get().runtime.output_dir if HydraConfig.initialized() else tempfile.mkdtemp())
    repeats = settings.repeats
    requests = [ProfileRequest(key=run_id, spec=spec.to_dict(), repeats=repeats,
                               baseline=spec.baseline_spec().to_dict() if _compared(spec, result) else None,
                               occupancy=_compiled(result, "programs_per_cu"),
                               spill_bytes=_compiled(result, "spill_bytes_per_program"))
                for run_id, spec, result, _ in pending]
    batches = [requests] if settings.batch else [[r] for r in requests]
    outcomes = {}
    for n, batch in enumerate(batches):
        outcomes.update(profiler.profile(batch, workdir / "profiler" / f"launch{n:03d}"))
    predicted = _simulate_alongside(profiler, settings, target, requests, workdir / "profiler" / "sim")
    for run_id, _, result, position in pending:
        outcome = outcomes[run_id]
        if run_id in predicted:
            result.metrics["sim_l2_hit_rate"] = predicted[run_id]
        result.tags.update(profiler.tags())
        result.files.extend(("profiler", p) for p in outcome.raw_files)
        if outcome.reading is None:
            result.fail(f"profile error: {outcome.error}", gate="profile")
        else:
            result.metrics.update(outcome.reading.as_metrics())
            result.metrics.update(outcome.metrics)
            result.tags.update(outcome.tags)
            result.artifacts.update(outcome.artifacts)
            if outcome.pairs:
                record_l2(result, [c for c, _ in outcome.pairs], [b for _, b in outcome.pairs],
                          min_l2_delta, profiler.name, deterministic=profiler.deterministic,
                          error=outcome.delta_error)
                record_read_l2(result, outcome.read_pairs, profiler.deterministic, outcome.read_delta_error)
        tracker.finish_job(run_id, result)
        print(progress_line(position, result), flush=True)
