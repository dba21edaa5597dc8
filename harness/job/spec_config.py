"""The JobSpec of one shape from the typed job config (harness.schema.Config): the kernel,
the swizzle's and the baseline's labels and formulas, the launch, the target."""
from __future__ import annotations

from typing import Any, Mapping

from harness.errors import did_you_mean
from harness.job.spec import JobSpec, code_digest
from swizzles.families import is_family_label, parse_label
from kernels.problem import ConvShape


#: How launches are timed (config ``compare.timer``): CUDA events around each launch, or the
#: GPU's own kernel durations from CUPTI activity records (torch.profiler), or the import path
#: ``module:function`` of a stand-in timer (tests; see :func:`harness.measure.timing.load_standin_timer`).
TIMERS = ("events", "cupti")


def resolve_timer(timer: str) -> str:
    """``compare.timer=auto``: kernel durations (cupti) with CUDA, CUDA events with ROCm
    (torch.profiler's kernel records there are not verified by this project)."""
    if timer != "auto":
        return timer
    import torch

    return "events" if torch.version.hip else "cupti"


def timing_key(timer: str, placements: int) -> str | None:
    """How a job's rounds are timed, for its spec hash: None for the original method (CUDA
    events, one set of buffers), so the jobs measured that way keep their hashes."""
    timer = resolve_timer(timer)
    return None if (timer, placements) == ("events", 1) else f"{timer}/placements={placements}"


def swizzle_choice(swizzle: Mapping[str, Any]) -> tuple[str, str | None]:
    """(label, formula) of the ``swizzle`` config: a built-in name and None, or for
    ``swizzle=custom`` the parsed, normalized formula and a label naming it (``swizzle.label``,
    else ``custom-<first 8 hex of its hash>``).  A swizzle given as an import path
    (``swizzle.fn``) has no formula; its label is ``swizzle.label``, else the config's ``name``
    unless that is ``custom``, else the path.  Raises FormulaError / ValueError, also for a
    family label whose parameter is out of range and a ``swizzle.label`` that cannot name
    runs (:func:`check_label`)."""
    name = str(swizzle["name"])
    expr, path, fn = swizzle.get("expr"), swizzle.get("file"), swizzle.get("fn")
    if name != "custom" and fn is None:
        if is_family_label(name):
            parse_label(name)   # a parameter out of range: ValueError
        return name, None
    if [expr, path, fn].count(None) != 2:
        raise ValueError(f"swizzle={name} needs exactly one of swizzle.expr=\"...\", swizzle.file=PATH or "
                         f"swizzle.fn=package.module:function (got expr={expr!r}, file={path!r}, fn={fn!r})")
    label = check_label(swizzle.get("label"))
    if fn is not None:
        return label or (name if name != "custom" else str(fn)), None
    from swizzles.custom import load_formula_file

    return _formula_choice(load_formula_file(path) if path is not None else str(expr), label)


def check_label(label: object) -> str | None:
    """``swizzle.label`` as it names runs (None when not given); ValueError for one that
    cannot: empty, with a ``/`` or white space (a run is named ``kernel/label/shape/wN``), or
    naming a built-in swizzle (its name, a family instance's label: a label names one remap in
    every report, table and MLflow view)."""
    if label is None:
        return None
    from swizzles import SWIZZLES

    text = str(label)
    if text in SWIZZLES or _names_a_family_instance(text):   # its cells would be taken for the built-in's
        raise ValueError(f"swizzle.label={text!r} names a built-in swizzle (built-ins: {', '.join(sorted(SWIZZLES))}; "
                         "families: name[key=value,...]); give the formula another label, or none (custom-<hash>)")
    if not text or "/" in text or any(c.isspace() for c in text):
        problem = "is empty" if not text else "has a '/' or white space (runs are named kernel/label/shape/wN)"
        raise ValueError(f"swizzle.label={text!r} {problem}; valid: a name of your own without '/' or white "
                         "space, e.g. my_remap")
    return text


def baseline_choice(value: str | None) -> tuple[str | None, str | None]:
    """(label, formula) of ``compare.baseline``: a built-in swizzle name, a formula, or
    null (no baseline: the job is timed alone).  Raises ValueError naming what is valid."""
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
        raise ValueError(f"compare.baseline={value!r} is neither a built-in swizzle ({did_you_mean(value, SWIZZLES)}"
                         f"{', '.join(sorted(SWIZZLES))}) nor a valid formula: {exc}") from exc


def _formula_choice(text: str, label: str | None) -> tuple[str, str]:
    from swizzles.custom import parse_formula

    formula = parse_formula(text).text
    return str(label or "custom-" + code_digest(formula)), formula


def _names_a_family_instance(label: str) -> bool:
    """Whether ``label`` is a family instance's canonical label (``grouped_m[...]``); a search
    formula's label (``formula:name[a=1]``) is written alike but names none."""
    try:
        parse_label(label)
    except ValueError:
        return False
    return True


def build_spec(job, shape: ConvShape, preset: str, profiler_key: str = "none") -> JobSpec:
    """The spec of ``shape`` under ``job`` (harness.schema.Config); ``profiler_key``: what its
    L2 figures depend on.  Raises ValueError (FormulaError included) for a bad swizzle."""
    label, formula = swizzle_choice(job.swizzle)
    baseline, baseline_formula = baseline_choice(job.compare.baseline)
    kernel, swizzle = job.kernel, job.swizzle
    return JobSpec(
        kernel=str(kernel["name"]), tiles=tuple((str(k), int(v)) for k, v in kernel["tiles"].items()),
        swizzle=label, swizzle_formula=formula, num_xcds=int(swizzle["num_xcds"]),
        group_size=int(swizzle["group_size"]), shape=shape, shape_preset=preset,
        num_warps=job.launch.num_warps, num_stages=job.launch.num_stages,
        target=job.target.name, seed=job.seed, profiler=profiler_key,
        baseline=baseline, baseline_formula=baseline_formula, input_layout=job.input_layout,
        tune=job.tune.name, timing=timing_key(job.compare.timer, job.compare.placements),
        compare_configs=job.compare.configs_mode(job.tune.name),
        kernel_target=_import_path(kernel.get("_target_")), swizzle_fn=_import_path(swizzle.get("fn")))


def _import_path(value) -> str | None:
    """A config's import path (``kernel._target_``, ``swizzle.fn``) as the spec carries it."""
    return None if value is None else str(value).strip()
