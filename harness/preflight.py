"""The checks a command passes before anything is logged.

:func:`check_job` turns a job's composed config into its typed config (:func:`typed_config`:
the config onto harness.schema's dataclasses), its shapes and the pipeline's options: after
it, the pipeline reads typed objects only, never the composed config.  It refuses with a
one-line :class:`harness.errors.UserError` what no job of it could run: a bad
``shape.select`` or preset, a padding the CPU check cannot fit, a kernel, ``num_warps`` or
tile size the target cannot run, a contradiction among the options.
It leaves that config as it is and returns what it resolved (:class:`CheckedJob`).  It runs
once per job, before the job opens the store: in a multirun the sweep's callback runs it
first (:func:`refuse_before_sweep`) on the config of every job of the sweep, before the
sweep's run is created, so a refused command logs nothing, and each job's task takes that
check (:func:`checked_job`) rather than running it again.  The shape checks come first and import
no kernel (torch): most refusals stay quick and small.
"""
from __future__ import annotations

import copy
import importlib.resources
import sys
import traceback
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Sequence

from omegaconf import DictConfig, OmegaConf, open_dict, read_write
from omegaconf.errors import OmegaConfBaseException

from harness.errors import (USER_ERROR_EXIT, UserError, compose_error_line, full_error_requested, one_line,
                            unknown_key)
from harness.hardware.device import GPU, DeviceInfo, describe_device, select_execution_mode, target_name_for
from harness.job.launch_limits import check_num_warps, check_tiles, limits_for
from harness.job.shapes import ShapeEntry, expand_preset, refuse_unrunnable
from harness.notices import show, start_sweep
from harness.schema import Config, TargetConfig
from harness.tune.modes import NONE, TABLE

if TYPE_CHECKING:
    from harness.run.options import JobOptions

#: Overrides that give a launch config: with any of them, ``tune=table`` gives way to it.
LAUNCH_OVERRIDES = ("kernel.tiles.", "kernel.tiles=", "launch.")


@dataclass(frozen=True)
class CheckedJob:
    """What :func:`check_job` made of a job's composed config: ``config``, a resolved copy of
    it (``target: auto`` replaced, tune=table giving way; what the run records as its
    config.yaml), the typed config, its shape entries and the pipeline's options."""

    config: DictConfig
    job: Config
    entries: list[ShapeEntry]
    options: JobOptions


def check_job(cfg: DictConfig, device: DeviceInfo, overrides: Sequence[str],
              notices: list[str | None] | None = None) -> CheckedJob:
    """The job's resolved config, typed config, shape entries and pipeline options, after
    every check that needs no run; ``cfg`` (the task's config) is left as it is (the resolved
    copy: ``target: auto``, tune=table giving way to a launch config in ``overrides``).  What
    was resolved is printed once every check has passed (harness.notices: once per sweep),
    or added to ``notices`` when given.  Raises UserError."""
    resolved, target_notice = resolve_target(cfg, device)
    resolved, tune_notice = given_config_wins(resolved, overrides)
    found = [target_notice, tune_notice]
    refuse_unrunnable(resolved.shape, on_cpu=device.mode != GPU)   # before the typed config, which imports torch
    job = typed_config(resolved)
    check_swizzle(job)
    check_baseline(job)
    entries = expand_preset(vars(job.shape))
    check_launch_config(job, entries)
    options = job_options(job)
    if not options.compile.only:   # compile.only allocates and simulates nothing
        check_memory(job, entries, device)
    if notices is None:
        show(*found)
    else:
        notices.extend(found)
    return CheckedJob(resolved, job, entries, options)


#: The jobs the sweep's refusal (:func:`refuse_before_sweep`) checked in this process, each
#: as (its overrides, its device, its composed config as a container, what the check made of it).
_SWEEP_CHECKED: list[tuple[tuple[str, ...], DeviceInfo, object, CheckedJob]] = []


def checked_job(cfg: DictConfig, device: DeviceInfo, overrides: Sequence[str]) -> CheckedJob:
    """The job's check: the one :func:`refuse_before_sweep` made in this process of the same
    config, device and overrides (taken, so each is used once), else :func:`check_job` of it.
    Raises UserError."""
    key = (tuple(overrides), device, OmegaConf.to_container(cfg, resolve=False))
    for i, (*seen, checked) in enumerate(_SWEEP_CHECKED):
        if tuple(seen) == key:
            del _SWEEP_CHECKED[i]
            return checked
    return check_job(cfg, device, overrides)


def task_overrides() -> list[str]:
    """The running job's overrides (Hydra's ``overrides.task``); none outside a Hydra job."""
    from hydra.core.hydra_config import HydraConfig

    return overrides_as_typed(HydraConfig.get().overrides.task) if HydraConfig.initialized() else []


def overrides_as_typed(node) -> list[str]:
    """The overrides Hydra recorded (``hydra.overrides.task``) as the user typed them: an
    interpolation in a value (``swizzle.expr='${oc.env:F}'``) stays text, to be resolved in
    the job's config, never in the override (whose parse the resolved value could break)."""
    return [str(o) for o in OmegaConf.to_container(node, resolve=False)]


def resolve_target(cfg: DictConfig, device: DeviceInfo) -> tuple[DictConfig, str | None]:
    """``cfg`` with ``target: auto`` replaced by the preset matching the device (a copy, so
    that interpolations such as ``swizzle.num_xcds`` follow it; ``cfg`` itself when the target
    was given) and the notice saying so (None when the target was given)."""
    if cfg.target.name != "auto":
        return cfg, None
    name = target_name_for(device)
    if name is not None:
        path = importlib.resources.files("swizzlebench_conf") / "target" / f"{name}.yaml"
        target = OmegaConf.load(str(path))
    else:  # a GPU with no shipped preset: describe it from what the driver reports
        target = OmegaConf.create({
            "name": device.name.lower().replace(" ", "_"), "vendor": device.vendor, "arch": device.arch,
            "num_xcds": 1, "compute_units": device.num_sms, "l2_bytes": device.l2_bytes,
            "l2_ways": None, "l2_line_bytes": 128, "l2_domains": 1, "mall_bytes": 0})
    resolved = copy.deepcopy(cfg)
    with open_dict(resolved):
        resolved.target = OmegaConf.merge(OmegaConf.structured(TargetConfig), target)
    return resolved, f"target=auto resolved to {target.name} for device {device.name!r}"


def given_config_wins(cfg: DictConfig, overrides: Sequence[str]) -> tuple[DictConfig, str | None]:
    """``tune=table`` (the default) launches each layer's committed config; a launch config
    given on the command line (``kernel.tiles.*``, ``launch.*``, among ``overrides``) is what
    the user asked to measure, so with one the job runs it as configured (``tune=none``).
    Returns ``cfg`` with that applied (a copy; ``cfg`` itself when nothing changed) and the
    notice saying so (None when nothing changed)."""
    if cfg.tune.name != TABLE:
        return cfg, None
    given = [o for o in overrides if o.lstrip("+~").startswith(LAUNCH_OVERRIDES)]
    if not given:
        return cfg, None
    resolved = copy.deepcopy(cfg)
    resolved.tune.name = NONE
    return resolved, f"tune=table: {', '.join(given)} given, so the configured launch config runs (tune=none)"


def typed_config(cfg: DictConfig) -> Config:
    """The composed ``cfg`` as a :class:`Config` (``OmegaConf.to_object``), the range checks
    run.  A key added with ``+`` to a typed group (``+compare.bogus=1``, which OmegaConf lets
    through) is refused here.  Raises UserError."""
    _refuse_added_keys(cfg, "")
    try:
        return OmegaConf.to_object(cfg)
    except OmegaConfBaseException as exc:   # e.g. a node the schema needs, deleted (~kernel)
        key = getattr(exc, "full_key", None)
        reason = str(getattr(exc, "msg", exc)).splitlines()[0]
        raise UserError(f"{key}: {reason}" if key else reason) from None


def _refuse_added_keys(node: DictConfig, path: str) -> None:
    """UserError for a key of a typed node that its dataclass does not declare."""
    schema = OmegaConf.get_type(node)
    names = {f.name for f in fields(schema)} if schema not in (None, dict) else None
    if names is None:   # an open node (kernel, swizzle, a dict): any key
        return
    for key in node.keys():
        if key not in names:
            raise UserError(unknown_key(f"{path}{key}", names))
        if not (OmegaConf.is_missing(node, key) or OmegaConf.is_interpolation(node, key)) \
                and isinstance(node[key], DictConfig):
            _refuse_added_keys(node[key], f"{path}{key}.")


def check_swizzle(job: Config) -> None:
    """Refuse a swizzle no shape could run (harness.job.spec_config.swizzle_choice):
    ``swizzle=custom`` without exactly one of expr, file and fn, a formula outside the language
    (its position, the value and the allowed forms; the caret excerpt under ``-v``, in the
    chained error), an unreadable formula file, a family parameter out of range, a label that
    cannot name runs.  Raises UserError."""
    from harness.job.spec_config import swizzle_choice
    from swizzles.custom import FormulaError

    try:
        swizzle_choice(job.swizzle)
    except FormulaError as exc:   # one of its text (with a position) names the value; one of its file, the file
        given = next(f"swizzle.{key}={job.swizzle[key]!r}: " for key in ("file", "expr") if job.swizzle.get(key) is not None)
        raise UserError(f"{given if exc.line is not None else ''}{exc.summary()}") from exc
    except ValueError as exc:
        raise UserError(str(exc).splitlines()[0]) from exc


def check_baseline(job: Config) -> None:
    """Refuse a ``compare.baseline`` that is neither a built-in swizzle nor a valid formula: the
    closest name, or the formula's first error line (its caret excerpt under ``-v``, in the
    chained error); every shape's comparison would fail alike.  Raises UserError."""
    from harness.job.spec_config import baseline_choice

    try:
        baseline_choice(job.compare.baseline)
    except ValueError as exc:
        raise UserError(str(exc).splitlines()[0]) from exc


def check_launch_config(job: Config, entries: list) -> None:
    """Refuse, before any job runs, a kernel name, ``launch.num_warps`` or tile size that the
    (resolved) target cannot run, also on the CPU (harness.job.launch_limits); raises UserError."""
    kernel_cfg, target = job.kernel, job.target
    limits = limits_for(target.vendor, target.name)
    check_num_warps(job.launch.num_warps, limits, target.name)   # before the kernels' imports (torch)
    if kernel_cfg.get("_target_") is not None:   # the user's own kernel (harness.job.user_code)
        from harness.job.user_code import load_kernel

        try:
            kernel = load_kernel(str(kernel_cfg["_target_"]).strip(), str(kernel_cfg["name"]))
        except (ValueError, ImportError):
            return   # each job fails with the import's reason, and the sweep goes on
    else:
        from kernels import get_kernel

        try:
            kernel = get_kernel(str(kernel_cfg["name"]))
        except ValueError as exc:
            raise UserError(f"kernel.name: {exc}") from None
    dtypes = {entry.shape.dtype for entry in entries if entry.shape is not None}
    tiles = check_tiles(kernel, dict(kernel_cfg["tiles"]), limits, target.name, dtypes)
    if target.arch is not None:   # e.g. TMA=1 on an AMD target: no job could compile
        try:
            kernel.check_target(None, tiles, limits.vendor, target.arch)
        except ValueError as exc:
            raise UserError(f"kernel.tiles: {exc} (target {target.name})") from None
    check_tiles(kernel, dict(kernel_cfg["interpret_tiles"]), None, target.name, key="kernel.interpret_tiles")


def check_memory(job: Config, entries: list[ShapeEntry], device: DeviceInfo) -> None:
    """Refuse, before anything is logged, a shape whose gate and rounds would not fit this
    machine's memory (harness.job.footprint: host RAM, and GPU memory on a GPU) or whose
    simulated L2 would exceed ``profiler.sim_memory_gib`` or the host's free memory
    (harness.profilers.sim.budget).  Raises UserError naming the shape, what it needs and
    what there is."""
    from harness.hardware.memory import available_memory, device_memory
    from harness.job.footprint import job_memory
    from harness.profilers.sim.budget import GIB, SimulationTooLarge

    budget = job.profiler.sim_memory_gib   # positive (harness.schema.ProfilerConfig)
    host = available_memory()
    on_gpu = device.mode == GPU
    gpu, gpu_kind = device_memory() if on_gpu else (None, "")
    simulated = simulates(job, device)
    for entry in entries:
        if entry.shape is None:
            continue
        need = job_memory(entry.shape, on_gpu)
        where = f"shape {entry.name!r} (N{entry.shape.N} C{entry.shape.C} H{entry.shape.H} W{entry.shape.W} F{entry.shape.F})"
        if gpu is not None and need.device_bytes > gpu:
            raise UserError(f"{where}: its operands, output and fp32 reference need about "
                            f"{need.device_bytes / GIB:,.1f} GiB of GPU memory, more than the {gpu / GIB:,.1f} GiB "
                            f"{gpu_kind} on {device.name}; use a smaller shape (N, H, W, C or F)")
        if host is not None and need.host_bytes > host:
            raise UserError(f"{where}: its operands need about {need.host_bytes / GIB:,.1f} GiB of host memory, more "
                            f"than the {host / GIB:,.1f} GiB available; use a smaller shape (N, H, W, C or F)")
        if simulated:
            try:
                check_simulation(job, entry.shape, int(budget * GIB), host)
            except SimulationTooLarge as exc:
                raise UserError(f"{where}: {exc}") from None


def simulates(job: Config, device: DeviceInfo) -> bool:
    """Whether the job's L2 is simulated: ``profiler=sim``, ``profiler=auto`` with no GPU, or
    ``profiler.simulate=true`` beside a hardware profiler."""
    name = job.profiler.name
    return name == "sim" or (name == "auto" and device.mode != GPU) or (name != "none" and job.profiler.simulate)


def check_simulation(job: Config, shape, budget_bytes: int, available_bytes: int | None) -> None:
    """Raise SimulationTooLarge when the simulated L2 of ``shape`` exceeds the budget or the
    memory available, on the configured tiles and (``tune=table``) the table's."""
    from harness.profilers.sim.budget import check_budget, simulation_footprint
    from harness.profilers.sim.target import SimTarget
    from harness.tune.per_job import TABLE_FALLBACK
    from kernels import get_kernel
    from kernels.tuned import load_table

    kernel_cfg = job.kernel
    if kernel_cfg.get("_target_") is not None:
        return   # the user's kernel: the simulator checks its budget itself when it runs
    kernel = get_kernel(str(kernel_cfg["name"]))
    target = job.target.as_dict()
    try:
        sim_target = SimTarget.from_target(target, job.profiler.occupancy, job.profiler.line_bytes)
    except ValueError:
        return   # no simulator for this target: the profiler says so
    tile_sets = [dict(kernel_cfg["tiles"])]
    if job.tune.name == TABLE:
        table = load_table(kernel.name, job.target.name) or load_table(kernel.name, TABLE_FALLBACK.get(job.target.name, ""))
        choice = table.lookup(shape) if table is not None else None
        if choice is not None:
            tile_sets.append(choice.config.tiles_dict)
    for tiles in tile_sets:
        try:
            footprint = simulation_footprint(kernel, shape, tiles, sim_target, budget_bytes)
        except (ValueError, NotImplementedError):
            continue   # tiles or a kernel the simulator refuses: the job fails with that reason
        check_budget(footprint, budget_bytes, available_bytes)


def job_options(job: Config) -> JobOptions:
    """The pipeline's knobs, each built by its typed config node; UserError for a bad value."""
    from harness.measure.roofline import Roofline
    from harness.run.options import JobOptions

    job.compare.configs_mode(job.tune.name)   # best vs best needs tune mode and a baseline: refuse early
    return JobOptions(interpret_tiles={str(k): int(v) for k, v in job.kernel["interpret_tiles"].items()},
                      paired=job.compare.paired(), min_effect=job.compare.min_effect, fault=job.fault,
                      tune=job.tune.options(), compile=job.compile.options(job.target),
                      roofline=Roofline.of_target(job.target.as_dict()))


def refuse_before_sweep(config: DictConfig) -> None:
    """In a multirun's launching process, before the sweep's run is created: compose the
    config of every job of the sweep (``config``: the multirun's, ``hydra`` node included) and
    :func:`check_job` it.  A refusal prints one line and exits with status 2
    (``HYDRA_FULL_ERROR=1``: its traceback, same status); the sweep then never starts.  Once
    every job has passed, the sweep's notices are printed, each once."""
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
    from hydra.core.global_hydra import GlobalHydra
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException

    overrides = overrides_as_typed(config.hydra.overrides.task)
    device = describe_device(select_execution_mode())
    as_launched = overrides   # the one job's overrides as the sweeper hands them to it, when nothing is swept
    try:
        parsed = OverridesParser.create().parse_overrides(overrides)
        swept = any(override.is_sweep_override() for override in parsed)
        jobs = [list(job) for batch in BasicSweeper.split_arguments(parsed, None) for job in batch]
        as_launched, jobs = (overrides, jobs) if swept or len(jobs) != 1 else (jobs[0], [])
    except HydraException:   # a sweeper of its own syntax: its base config alone
        jobs = []
    notices: list[str | None] = []
    try:
        _SWEEP_CHECKED.clear()
        if not jobs:   # nothing swept: every job's config is this one (composing it again costs ~0.3 s)
            _check_for_sweep(_task_config(config), device, overrides, notices, as_launched)
        loader = GlobalHydra.instance().config_loader() if jobs else None
        for job_overrides in jobs:
            job_cfg = loader.load_sweep_config(config, job_overrides)
            _check_for_sweep(_task_config(job_cfg), device, job_overrides, notices)
    except (UserError, HydraException, UnicodeDecodeError) as exc:
        if full_error_requested():
            traceback.print_exc()
        line = exc if isinstance(exc, UserError) else UserError(compose_error_line(exc))
        print(one_line(line), file=sys.stderr, flush=True)
        raise SystemExit(USER_ERROR_EXIT) from None
    start_sweep()
    show(*notices)   # after every job's checks: no notice before a refusal, each once


def _check_for_sweep(cfg: DictConfig, device: DeviceInfo, overrides: Sequence[str], notices: list[str | None],
                     as_launched: Sequence[str] | None = None) -> None:
    """:func:`check_job` a job of the sweep, kept for the job's task (:func:`checked_job`), whose
    overrides are ``as_launched`` (the sweeper's form of them: values re-quoted; default
    ``overrides``)."""
    checked = check_job(cfg, device, overrides, notices)
    _SWEEP_CHECKED.append((tuple(overrides if as_launched is None else as_launched), device, OmegaConf.to_container(cfg, resolve=False), checked))


def _task_config(config: DictConfig) -> DictConfig:
    """A copy of ``config`` without its ``hydra`` node: the config a job's task receives."""
    task = copy.deepcopy(config)
    with read_write(task), open_dict(task):
        task.pop("hydra", None)
    return task
