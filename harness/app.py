"""The Hydra task: one job = one kernel x swizzle x launch config over every shape of
the chosen preset, each shape a tracked MLflow run."""
from __future__ import annotations

import hashlib
import importlib.resources
import logging
import os
import tempfile
from pathlib import Path

from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf, open_dict

from harness.callbacks import sweep_run_id
from harness.hardware.device import GPU, DeviceInfo, describe_device, target_name_for
from harness.errors import UserError
from harness.pipeline.faults import FaultPlan
from harness.hardware.isolation import InProcessRunner, IsolatedRunner
from harness.pipeline.best_vs_best import compare_configs
from harness.pipeline.compile_client import CompileOptions
from harness.pipeline.job import JobOptions
from harness.pipeline.launch_limits import check_num_warps, check_tiles, limits_for
from harness.pipeline.paired import record_l2, record_read_l2
from harness.pipeline.roofline import Roofline
from harness.pipeline.timing import PairedSettings, resolve_timer, timing_key
from harness.hardware.pinning import DevicePin, inherited_visibility, parse_devices, require_isolation
from harness.pipeline.progress import progress_line
from harness.storage.provenance import git_commit, library_versions
from harness.profilers import Profiler, make_profiler
from harness.profilers.worker import ProfileRequest
from harness.pipeline.result import FINISHED, JobResult
from harness.pipeline.shapes import expand_preset
from harness.pipeline.spec import JobSpec
from harness.storage.spool import spool_dir_for
from harness.storage.tracking import Tracker, resolve_tracking_uri
from harness.pipeline.tuning import TIE_KEYS, TuneOptions, resolve_cache_dir

log = logging.getLogger("swizzlebench")


def resolve_target(cfg: DictConfig, device: DeviceInfo) -> None:
    """Replace ``target: auto`` by the preset matching the device (in place)."""
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
        cfg.target = target
    log.info("target=auto resolved to %s for device %r", target.name, device.name)


def swizzle_choice(cfg: DictConfig) -> tuple[str, str | None]:
    """(label, formula) of the configured swizzle: a built-in name and None, or for
    ``swizzle=custom`` the parsed, normalized formula and a label naming it (``swizzle.label``,
    else ``custom-<first 8 hex of its hash>``).  A swizzle given as an import path
    (``swizzle.fn``) has no formula; its label is ``swizzle.label``, else the config's ``name``
    unless that is ``custom``, else the path.  Raises FormulaError / ValueError."""
    name = str(cfg.swizzle.name)
    expr, path, fn = cfg.swizzle.get("expr"), cfg.swizzle.get("file"), cfg.swizzle.get("fn")
    if name != "custom" and fn is None:
        return name, None
    if [expr, path, fn].count(None) != 2:
        raise ValueError(f"swizzle={name} needs exactly one of swizzle.expr=\"...\", swizzle.file=PATH or "
                         f"swizzle.fn=package.module:function (got expr={expr!r}, file={path!r}, fn={fn!r})")
    if fn is not None:
        return str(cfg.swizzle.get("label") or (name if name != "custom" else fn)), None
    from swizzles.custom import load_formula_file

    return _formula_choice(load_formula_file(path) if path is not None else str(expr), cfg.swizzle.get("label"))


def baseline_choice(cfg: DictConfig) -> tuple[str | None, str | None]:
    """(label, formula) of ``compare.baseline``: a built-in swizzle name, a formula, or
    null (no baseline: the job is timed alone).  Raises ValueError naming what is valid."""
    value = cfg.get("compare", {}).get("baseline")
    if value is None or str(value).strip().lower() in ("", "none", "null"):
        return None, None
    from swizzles import SWIZZLES
    from swizzles.custom import FormulaError

    value = str(value).strip()
    if value in SWIZZLES:
        return value, None
    try:
        return _formula_choice(value, None)
    except FormulaError as exc:
        raise ValueError(f"compare.baseline={value!r} is neither a built-in swizzle ({', '.join(sorted(SWIZZLES))}) "
                         f"nor a valid formula: {exc}") from None


def _formula_choice(text: str, label: str | None) -> tuple[str, str]:
    from swizzles.custom import parse_formula

    formula = parse_formula(text).text
    return str(label or "custom-" + hashlib.sha256(formula.encode()).hexdigest()[:8]), formula


def build_spec(cfg: DictConfig, shape, preset: str, profiler_key: str = "none") -> JobSpec:
    label, formula = swizzle_choice(cfg)
    baseline, baseline_formula = baseline_choice(cfg)
    return JobSpec(
        kernel=str(cfg.kernel.name),
        tiles=tuple((str(k), int(v)) for k, v in cfg.kernel.tiles.items()),
        swizzle=label, swizzle_formula=formula, num_xcds=int(cfg.swizzle.num_xcds),
        group_size=int(cfg.swizzle.group_size), shape=shape, shape_preset=preset,
        num_warps=int(cfg.launch.num_warps), num_stages=int(cfg.launch.num_stages),
        target=str(cfg.target.name), seed=int(cfg.seed), profiler=profiler_key,
        baseline=baseline, baseline_formula=baseline_formula, input_layout=input_layout(cfg),
        tune=tune_options(cfg).mode, compare_configs=compare_configs(cfg.compare, tune_options(cfg).mode),
        timing=timing_key(str(cfg.compare.get("timer", "events")), int(cfg.compare.get("placements", 1))),
        kernel_target=_import_path(cfg.kernel.get("_target_")), swizzle_fn=_import_path(cfg.swizzle.get("fn")))


def _import_path(value) -> str | None:
    """A config's import path (``kernel._target_``, ``swizzle.fn``) as the spec carries it."""
    return None if value is None else str(value).strip()


def input_layout(cfg: DictConfig) -> str:
    """``input_layout``: the memory format of the input the kernel and the vendor call share."""
    from harness.pipeline.correctness import INPUT_LAYOUTS

    value = str(cfg.get("input_layout", "channels_last"))
    if value not in INPUT_LAYOUTS:
        raise ValueError(f"input_layout={value!r} is invalid; valid: {', '.join(INPUT_LAYOUTS)}")
    return value


def tune_options(cfg: DictConfig) -> TuneOptions:
    """The ``tune`` group (``tune=none`` when absent)."""
    t = cfg.get("tune") or {}
    return TuneOptions(mode=str(t.get("name", "none")), cache_dir=resolve_cache_dir(t.get("cache_dir")),
                       warmup_ms=float(t.get("warmup_ms", 5)), rounds=int(t.get("rounds", 10)),
                       on_cpu=bool(t.get("on_cpu", False)), compile_jobs=int(t.get("compile_jobs", 8)),
                       **{k: t.get(k, getattr(TuneOptions, k)) for k in TIE_KEYS})


def check_launch_config(cfg: DictConfig, entries: list) -> None:
    """Refuse, before any job runs, a kernel name, ``launch.num_warps`` or tile size that the
    (resolved) target cannot run, also on the CPU (harness.pipeline.launch_limits); raises UserError."""
    from kernels import get_kernel

    target = str(cfg.target.name)
    if cfg.kernel.get("_target_") is not None:   # the user's own kernel (harness.pipeline.user_code)
        from harness.pipeline.user_code import load_kernel

        try:
            kernel = load_kernel(str(cfg.kernel._target_).strip(), str(cfg.kernel.name))
        except (ValueError, ImportError):
            return   # each job fails with the import's reason, and the sweep goes on
    else:
        try:
            kernel = get_kernel(str(cfg.kernel.name))
        except ValueError as exc:
            raise UserError(f"kernel.name: {exc}") from None
    limits = limits_for(cfg.target.get("vendor"), target)
    check_num_warps(cfg.launch.num_warps, limits, target)
    dtypes = {entry.shape.dtype for entry in entries if entry.shape is not None}
    tiles = check_tiles(kernel, OmegaConf.to_container(cfg.kernel.tiles), limits, target, dtypes)
    arch = cfg.target.get("arch")
    if arch is not None:   # e.g. TMA=1 on an AMD target: no job could compile
        try:
            kernel.check_target(None, tiles, limits.vendor, str(arch))
        except ValueError as exc:
            raise UserError(f"kernel.tiles: {exc} (target {target})") from None
    check_tiles(kernel, OmegaConf.to_container(cfg.kernel.interpret_tiles), None, target,
                key="kernel.interpret_tiles")


def compile_options(cfg: DictConfig) -> CompileOptions:
    """The ``compile`` group with the target's arch; UserError for an arch we have no limits for."""
    from harness.hardware.arch import arch_limits

    c = cfg.get("compile") or {}
    arch = cfg.target.get("arch")
    only = bool(c.get("only", False))
    if arch is None:
        if only:
            raise UserError(f"compile.only=true needs a target with an arch; target {cfg.target.name} has "
                            "target.arch=null: choose target=mi300x, h100 or h200, or set target.arch")
        return CompileOptions()
    try:
        arch_limits(str(arch))
    except ValueError as exc:
        raise UserError(f"target.arch: {exc}") from None
    if not bool(c.get("enabled", True)):
        if only:
            raise UserError("compile.only=true with compile.enabled=false would do nothing; drop one")
        return CompileOptions()
    return CompileOptions(arch=str(arch), only=only, cache_dir=c.get("cache_dir"), target=str(cfg.target.name),
                          compute_units=int(cfg.target.get("compute_units") or 0))


def job_options(cfg: DictConfig) -> JobOptions:
    """The pipeline's knobs from the config (``compare`` for paired timing); UserError for a bad value."""
    c = cfg.compare
    try:
        paired = PairedSettings(
            launches_per_round=int(c.launches_per_round), min_rounds=int(c.min_rounds),
            max_rounds=int(c.max_rounds), check_every=int(c.check_every),
            target_precision=float(c.target_precision), max_time_s=float(c.max_time_s),
            warmup_ms=float(c.warmup_ms), method=str(c.ci_method), placements=int(c.placements),
            timer=resolve_timer(str(c.timer)))
    except ValueError as exc:
        raise UserError(str(exc)) from None
    compare_configs(c, tune_options(cfg).mode)   # best vs best needs tune mode and a baseline
    if not 0 <= float(c.min_effect) < 1:
        raise UserError(f"compare.min_effect={c.min_effect!r} must be a fraction in [0, 1), e.g. 0.01 for 1 %")
    return JobOptions(interpret_tiles={str(k): int(v) for k, v in cfg.kernel.interpret_tiles.items()},
                      paired=paired, min_effect=float(c.min_effect), fault=fault_plan(cfg),
                      tune=tune_options(cfg), compile=compile_options(cfg),
                      roofline=Roofline.of_target(cfg.target))


def profiler_key(profiler, pcfg: DictConfig) -> str:
    """What a job's L2 figures depend on, for its spec hash: backend, cache state, repeats."""
    if profiler is None:
        return "none"
    tags = profiler.tags()
    return f"{tags['profiler']}/cache={tags.get('cache_control', '-')}/r{int(pcfg.get('repeats', 1))}"


def make_runner(cfg: DictConfig, device: DeviceInfo, job_num: int = 0, profiler: Profiler | None = None):
    """The job's runner.  With ``devices`` set, the job's GPU work is pinned to GPU
    ``devices[job_num % len(devices)]``: the runner is always isolated (also on the CPU) and
    its worker, like the profiler's worker, sees only that GPU (harness.hardware.pinning)."""
    mode = str(cfg.isolation.mode)
    valid = ("auto", "process", "none")
    if mode not in valid:
        raise UserError(f"isolation.mode={mode!r} is invalid; valid: {', '.join(valid)}")
    devices = parse_devices(cfg.get("devices"))
    if devices:
        require_isolation(devices, mode)
        pin = DevicePin.for_job(job_num, devices)
        inherited = inherited_visibility(os.environ)
        if inherited:
            log.warning("devices=%s overrides the inherited %s in the job's worker processes",
                        list(devices), inherited)
        if profiler is not None:
            profiler.pin_to(pin)
        log.info("job %d pinned to GPU %d (devices=%s)", job_num, pin.device, list(devices))
        return IsolatedRunner(timeout_s=float(cfg.isolation.timeout_s), pin=pin)
    if mode == "process" or (mode == "auto" and device.mode == GPU):
        return IsolatedRunner(timeout_s=float(cfg.isolation.timeout_s))
    return InProcessRunner(device)


def fault_plan(cfg: DictConfig) -> FaultPlan | None:
    f = cfg.get("fault")
    if not f or f.get("kind") is None:
        return None
    return FaultPlan(kind=str(f.kind), shape=f.get("shape"), swizzle=f.get("swizzle"))


def run_hydra_job(cfg: DictConfig, mode: str) -> list[JobResult]:
    """Run every shape of the job's preset and log each to MLflow; returns the results."""
    device = describe_device(mode)
    resolve_target(cfg, device)
    entries = expand_preset(cfg.shape)   # user errors first: nothing is logged for a command that is refused
    check_launch_config(cfg, entries)
    options = job_options(cfg)
    profiler = (None if options.compile.only else   # compile.only runs nothing, so profiles nothing
                make_profiler(cfg.profiler, device, OmegaConf.to_container(cfg.target, resolve=True)))  # fails fast when the chosen tool is missing
    tracker = Tracker(resolve_tracking_uri(cfg.tracking.uri), cfg.experiment, spool_dir=spool_dir_for(cfg))
    parent = sweep_run_id()
    common_tags = {"git_commit": git_commit(), **library_versions(), "target": str(cfg.target.name)}
    config_yaml = OmegaConf.to_yaml(cfg, resolve=True)
    job_num = HydraConfig.get().job.get("num", 0) if HydraConfig.initialized() else 0

    pkey = profiler_key(profiler, cfg.profiler)
    runner = make_runner(cfg, device, job_num, profiler)
    if options.tune.mode != "none" and device.mode == GPU and not options.compile.only:
        _precompile(cfg, entries, pkey, tracker, options)
    results, pending = [], []
    try:
        for i, entry in enumerate(entries, 1):
            position = f"[job {job_num} | {i}/{len(entries)}]"
            result = _run_entry(cfg, entry, runner, tracker, parent, common_tags, config_yaml, options,
                                pkey, position, profiler, pending)
            if result is not None:
                results.append(result)
    finally:
        runner.close()
    if pending:
        _profile_and_finish(profiler, cfg.profiler, OmegaConf.to_container(cfg.target, resolve=True), pending,
                            tracker, float(cfg.compare.min_l2_delta))
    return results


def _precompile(cfg, entries, pkey: str, tracker: Tracker, options: JobOptions) -> None:
    """Tune mode on a GPU: compile the candidates of the shapes still to run, in parallel."""
    from harness.pipeline.tuning import precompile_specs

    specs = []
    for entry in entries:
        try:
            spec = build_spec(cfg, entry.shape, entry.preset, pkey) if entry.shape is not None else None
        except ValueError:
            continue   # the shape's job fails with its reason, below
        if spec is not None and not (bool(cfg.resume) and tracker.find_finished(spec.spec_hash)):
            specs.append(spec)
    print(precompile_specs(specs, options.tune), flush=True)


def _run_entry(cfg, entry, runner, tracker, parent, common_tags, config_yaml, options, pkey, position,
               profiler, pending) -> JobResult | None:
    """Run one shape of the job: skip it if already FINISHED (resume), else run and log it
    (or queue it for profiling).  Returns the result, None when skipped."""
    spec, result = None, None
    if entry.shape is None:
        result = _failed_entry(cfg, entry, {f"shape.{k}": str(v) for k, v in entry.raw.items()},
                               f"invalid shape: {entry.error}", "shape")
    else:
        try:
            spec = build_spec(cfg, entry.shape, entry.preset, pkey)
        except ValueError as exc:  # FormulaError included: a clear reason, and the sweep goes on
            result = _failed_entry(cfg, entry, {"swizzle": str(cfg.swizzle.name)}, f"invalid swizzle: {exc}",
                                   "swizzle")
    if spec is not None:
        if bool(cfg.resume):
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


def _failed_entry(cfg: DictConfig, entry, params: dict[str, str], reason: str, gate: str) -> JobResult:
    """The FAILED result of a shape entry that could not become a JobSpec."""
    name = f"{cfg.kernel.name}/{cfg.swizzle.name}/{entry.label}/w{cfg.launch.num_warps}"
    return JobResult(run_name=name, params=params).fail(reason, gate=gate)


def _simulate_alongside(profiler, pcfg: DictConfig, target: dict, requests: list,
                        workdir: Path) -> dict[str, float]:
    """With ``profiler.simulate=true``, also predict each job's hit rate with the simulator
    configured as the target (logged as ``sim_l2_hit_rate``, for the report's simulated vs
    measured figure).  Returns run id -> predicted %."""
    if not pcfg.get("simulate", False) or profiler.name == "sim":
        return {}
    from harness.profilers.sim import SimProfiler

    outcomes = SimProfiler(target).profile(requests, workdir)
    return {key: o.reading.l2_hit_rate for key, o in outcomes.items() if o.reading is not None}


def _compiled_occupancy(result: JobResult) -> int | None:
    """Programs per CU / SM of the job's kernel as compiled for its target (the compile
    stage's ``compile.programs_per_cu``), for the simulated L2's residency; None without one."""
    value = result.metrics.get("compile.programs_per_cu")
    return int(value) if value else None


def _compared(spec: JobSpec, result: JobResult) -> bool:
    """True when the job has a baseline that passed its gates: profile both, in pairs."""
    return (spec.has_baseline and result.tags.get("compare.role") == "candidate"
            and not result.tags.get("verdict", "").startswith("no comparison"))


def _profile_and_finish(profiler, pcfg: DictConfig, target: dict, pending: list, tracker: Tracker,
                        min_l2_delta: float) -> None:
    """Profile the verified jobs (one profiler launch for all, or one each) and log them.
    A profiling failure fails the run with its reason but keeps its timing metrics."""
    workdir = Path(HydraConfig.get().runtime.output_dir if HydraConfig.initialized() else tempfile.mkdtemp())
    repeats = int(pcfg.get("repeats", 5))
    requests = [ProfileRequest(key=run_id, spec=spec.to_dict(), repeats=repeats,
                               baseline=spec.baseline_spec().to_dict() if _compared(spec, result) else None,
                               occupancy=_compiled_occupancy(result))
                for run_id, spec, result, _ in pending]
    batches = [requests] if bool(pcfg.get("batch", True)) else [[r] for r in requests]
    outcomes = {}
    for n, batch in enumerate(batches):
        outcomes.update(profiler.profile(batch, workdir / "profiler" / f"launch{n:03d}"))
    predicted = _simulate_alongside(profiler, pcfg, target, requests, workdir / "profiler" / "sim")
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
