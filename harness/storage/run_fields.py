"""The one mapping from a job's outcome (:class:`harness.job.result.JobResult`) to what its
MLflow run carries: params, metrics and tags, under the names the report, the docs and the
stores read, and back.  The stages' free-form records pass through as they are; the typed
fields are written here, and only here, under their tag names.

The verdicts (:class:`harness.job.verdict.Verdict`) are stored as text, the words of
:class:`~harness.job.verdict.Kind` with their numbers: ``faster``, ``no difference detected
(CI [0.9950, 1.0100])``, ``higher``, ``no difference detected (CI [-0.40, +0.60] pts)``,
``predicted, not validated (+3.70 pts)``, ``same tile order; code cost x0.983 [0.978, 0.988]
(faster)``, ``same tile order: the swizzle's code, not its order (higher)``, ``not timed
(<why>)``, ``not profiled (<why>)``, ``no comparison: <why>``.  :func:`verdict_text` writes
them and :func:`parse_verdict` reads them back (the report, the search, older stores).
"""
from __future__ import annotations

import math
import re

from harness.job.result import BASELINE_ROLE, FINISHED, JobResult
from harness.job.spec import JobSpec
from harness.job.verdict import L2, NOT_VALIDATED, SAME_ORDER_L2, SAME_ORDER_SIM, SAME_ORDER_TIME, TIME, Kind, Verdict
from harness.storage.field_names import Metric, Param, Tag
from swizzles.families import is_family_label, parse_label

#: Tag names of the typed outcome fields.
FAILED_GATE_TAG = "failed_gate"
ROLE_TAG, SAME_ORDER_TAG, QUESTION_TAG = "compare.role", "compare.same_order", "compare.question"
#: The tag that says how the job was timed, or why not (``not measured: <why>``).
TIMING_TAG = Tag.TIMING
#: Tag names of the verdicts, by axis.
VERDICT_TAGS = {TIME: "verdict", L2: "l2_verdict"}
#: The artifact folder of a run's profiler files: its raw output and its report file.
PROFILER_ARTIFACTS = "profiler"
#: Tags of :class:`harness.job.result.ProfilerReport`: the report file's path among the run's
#: artifacts (``profiler/ncu.ncu-rep``), and the IDs of the job's results in it (``10-19``).
PROFILER_REPORT_TAG, PROFILER_REPORT_RESULTS_TAG = "profiler_report", "profiler_report.results"
#: Tags made for display: the MLflow UI's first view shows them as its columns, rounded text
#: (``1.03x``, ``+3.7 pts (predicted, not validated)``); the exact figures stay the metrics
#: and the verdict tags above.  :func:`display_tags` writes them.
DISPLAY_VERDICT_TAG, DISPLAY_SPEEDUP_TAG, DISPLAY_L2_TAG = "display.verdict", "display.speedup", "display.l2"
#: The first view's columns, as the MLflow UI names them (``type.`name```).
FIRST_VIEW_COLUMNS = tuple(f"tags.`{tag}`" for tag in (DISPLAY_VERDICT_TAG, DISPLAY_SPEEDUP_TAG, DISPLAY_L2_TAG))
#: The MLflow UI's run name column, and the first view's columns in their order with their
#: widths (px): wide enough for a job run's name and the display tags' longest texts.
NAME_COLUMN = "attributes.`Run Name`"
FIRST_VIEW_WIDTHS = dict(zip((NAME_COLUMN, *FIRST_VIEW_COLUMNS), (250, 210, 110, 280)))
#: MLflow's tag of a run's name.
RUN_NAME_TAG = "mlflow.runName"
#: The MLflow UI's key that sorts the runs table by run name (sorted so, job runs are not
#: folded under their sweep's run).
SORT_BY_NAME = f"tags.`{RUN_NAME_TAG}`"
#: Between the parts of a job run's name in the store (:func:`store_run_name`).
NAME_SEP = "·"
#: The tag holding the job's name as its job line prints it (``igemm/xcd/tiny-t1/w8``).
JOB_NAME_TAG = "job"
_JOB_NAME = re.compile(r"(?P<kernel>[^/]+)/(?P<swizzle>.+)/(?P<shape>[^/]+)/(?P<warps>w\d+)")
#: The kinds a stored verdict can open with (the report's own words never are stored).
_STORED = (Kind.FASTER, Kind.SLOWER, Kind.HIGHER, Kind.LOWER, Kind.NO_DIFFERENCE, Kind.PREDICTED, Kind.NOT_TIMED,
           Kind.NOT_PROFILED, Kind.NO_COMPARISON)
_NUMBER = r"([-+]?(?:inf|nan|\d+(?:\.\d*)?(?:e[-+]?\d+)?))"


def flag_text(value: bool) -> str:
    """A boolean as a tag stores it: ``true`` / ``false``."""
    return str(bool(value)).lower()


def flag_column(values):
    """A boolean tag's column, as ``mlflow.search_runs(output_format="pandas")`` returns it,
    read back as booleans (a run without the tag: False)."""
    return values.fillna("").astype(str) == flag_text(True)


def spec_params(spec: JobSpec) -> dict[str, str]:
    """Every field of a job's spec, flattened, as its run's params (text): a parametric
    family's parameters each on its own (``swizzle.W``), filterable in MLflow."""
    P = Param
    params = {P.KERNEL: spec.kernel, P.SWIZZLE: spec.swizzle, P.NUM_XCDS: spec.num_xcds,
              P.GROUP_SIZE: spec.group_size, P.SHAPE_PRESET: spec.shape_preset, P.NUM_WARPS: spec.num_warps,
              P.NUM_STAGES: spec.num_stages, P.TARGET: spec.target, P.SEED: spec.seed, P.PROFILER: spec.profiler,
              P.INPUT_LAYOUT: spec.input_layout, P.TUNE: spec.tune}
    if spec.kernel_target is not None:
        params[P.KERNEL_TARGET] = spec.kernel_target
    if spec.swizzle_fn is not None:
        params[P.SWIZZLE_FN] = spec.swizzle_fn
    elif spec.swizzle_formula is not None:
        params[P.SWIZZLE_FORMULA] = spec.swizzle_formula
    elif is_family_label(spec.swizzle):
        try:
            instance = parse_label(spec.swizzle)
        except ValueError:
            pass   # the job fails its plan stage with the label's error
        else:
            params[P.SWIZZLE_FAMILY] = instance.family
            params.update({P.SWIZZLE_PREFIX + k: v for k, v in instance.values})
    if spec.baseline is not None:
        params[P.COMPARE_BASELINE] = spec.baseline_formula or spec.baseline
    if spec.compare_configs is not None:
        params[P.COMPARE_CONFIGS] = spec.compare_configs
    params.update({P.TILE_PREFIX + k: v for k, v in spec.tiles})
    params.update({P.SHAPE_PREFIX + k: v for k, v in spec.shape.as_params().items()})
    return {k: str(v) for k, v in params.items()}


def run_params(result: JobResult) -> dict[str, str]:
    """The run's params (MLflow stores text)."""
    return {k: str(v) for k, v in result.params.items()}


def run_metrics(result: JobResult) -> dict[str, float]:
    """The run's metrics (ms, TFLOP/s, %, ratios: see the stages that write them)."""
    return {k: float(v) for k, v in result.metrics.items()}


def store_run_name(job_name: str) -> str:
    """A job run's name in the store: short, its swizzle label first, for the MLflow UI's
    narrow name column: ``xcd·tiny-t1·w8·igemm`` for the job line's ``igemm/xcd/tiny-t1/w8``
    (:attr:`harness.job.spec.JobSpec.run_name`, kept in the tag ``job``); a name of another
    form unchanged."""
    found = _JOB_NAME.fullmatch(job_name)
    if found is None:
        return job_name
    return NAME_SEP.join(found.group("swizzle", "shape", "warps", "kernel"))


def run_tags(result: JobResult) -> dict[str, str]:
    """The run's tags: the stages' tags plus the typed fields (``failed_gate``,
    ``compare.role``, ``compare.same_order`` as ``true``/``false``, ``compare.question``,
    ``verdict`` and ``l2_verdict`` (:func:`verdict_text`; ``no comparison: <why>`` for a
    candidate whose baseline failed a gate), ``timing`` = ``not measured: <why>`` for a
    job not timed, ``profiler_report`` / ``profiler_report.results`` for a job whose
    profiler kept a report file, the job line's name (``job``) and the display tags
    (:func:`display_tags`))."""
    tags = {k: str(v) for k, v in result.tags.items()}
    c = result.comparison
    missing = None if c.missing is None else Verdict(TIME, Kind.NO_COMPARISON, detail=c.missing)
    typed = {FAILED_GATE_TAG: result.failed_gate, ROLE_TAG: c.role, QUESTION_TAG: c.question,
             SAME_ORDER_TAG: None if c.same_order is None else flag_text(c.same_order),
             VERDICT_TAGS[L2]: result.l2_verdict and verdict_text(result.l2_verdict),
             VERDICT_TAGS[TIME]: (missing or result.verdict) and verdict_text(missing or result.verdict)}
    if result.not_timed is not None:
        typed[TIMING_TAG] = f"not measured: {result.not_timed}"
    report = result.profiler_report
    if report is not None:
        typed[PROFILER_REPORT_TAG] = f"{PROFILER_ARTIFACTS}/{report.file.name}"
        typed[PROFILER_REPORT_RESULTS_TAG] = (f"{report.first_result}" if report.first_result == report.last_result
                                              else f"{report.first_result}-{report.last_result}")
    tags.update({k: v for k, v in typed.items() if v is not None})
    tags.update({JOB_NAME_TAG: result.run_name, **display_tags(result)})
    return tags


def display_tags(result: JobResult) -> dict[str, str]:
    """The run's display tags: ``display.verdict``, the verdict that decides (on time where
    the job was timed, else on L2 as ``L2 <word>``; ``baseline``, ``FAILED (<gate>)``, ``no
    comparison``); ``display.speedup``, the speedup to two decimals (``1.03x``); ``display.l2``,
    the L2 change in % points to one decimal with its verdict (``+3.7 pts (predicted, not
    validated)``; a simulated one says ``predicted``).  Only those the run has a figure for."""
    m, out = result.metrics, {}
    if Metric.SPEEDUP in m:
        out[DISPLAY_SPEEDUP_TAG] = f"{m[Metric.SPEEDUP]:.2f}x"
    l2 = _l2_display(result)
    if Metric.L2_DELTA_PTS in m and l2:
        out[DISPLAY_L2_TAG] = f"{m[Metric.L2_DELTA_PTS]:+.1f} pts ({l2})"
    verdict, c = result.verdict, result.comparison
    if result.status != FINISHED:
        out[DISPLAY_VERDICT_TAG] = f"FAILED ({result.failed_gate})" if result.failed_gate else "FAILED"
    elif c.missing is not None:
        out[DISPLAY_VERDICT_TAG] = Kind.NO_COMPARISON.word
    elif c.role == BASELINE_ROLE:
        out[DISPLAY_VERDICT_TAG] = Kind.BASELINE.word
    elif verdict is not None and verdict.kind != Kind.NOT_TIMED:
        out[DISPLAY_VERDICT_TAG] = f"{SAME_ORDER_SIM} ({verdict.word})" if verdict.same_order else verdict.word
    elif l2:
        out[DISPLAY_VERDICT_TAG] = f"L2 {l2}"
    return out


def _l2_display(result: JobResult) -> str:
    """The L2 verdict in a few words: its kind's word, ``same tile order`` for a simulated job
    in its baseline's order, ``predicted`` before a simulated verdict that held a band."""
    verdict = result.l2_verdict
    if verdict is None or verdict.kind == Kind.NOT_PROFILED:
        return ""
    simulated = result.tags.get(Tag.L2_SOURCE) == "sim"
    if verdict.same_order:
        return SAME_ORDER_SIM if simulated else f"{SAME_ORDER_SIM} ({verdict.word})"
    if simulated and verdict.kind != Kind.PREDICTED:
        return f"predicted {verdict.word}"
    return verdict.word


def bound_column(values):
    """The ``bound`` tag's column (``memory-bound, at 40 % of its roofline``, as
    :attr:`harness.measure.roofline.RooflineReading.text` writes it) read back as what bounds
    each cell: ``compute`` / ``memory`` (:data:`harness.measure.roofline.COMPUTE` / ``MEMORY``),
    empty for a run without the tag."""
    return values.fillna("").astype(str).str.partition("-")[0]


def validated(text: object) -> bool:
    """Whether a simulated figure's validation (tag ``sim_validation``: ``validated on H100 ncu
    ...`` / ``not validated on mi300x hardware``) says the model held a band on hardware; False
    without the tag."""
    return isinstance(text, str) and bool(text) and not text.startswith(NOT_VALIDATED)


def verdict_text(verdict: Verdict) -> str:
    """A verdict as its tag and the job line say it (the module's docstring lists the forms)."""
    kind, word = verdict.kind, verdict.word
    if verdict.same_order:
        if verdict.axis == TIME:
            return (f"{SAME_ORDER_TIME} x{verdict.estimate:.3f} [{verdict.ci_lo:.3f}, {verdict.ci_hi:.3f}]"
                    f" ({word})")
        return f"{SAME_ORDER_L2} ({word})"
    if kind == Kind.NO_COMPARISON:
        return f"{word}: {verdict.detail}"
    if kind in (Kind.NOT_TIMED, Kind.NOT_PROFILED) and verdict.detail:
        return f"{word} ({verdict.detail})"
    if kind == Kind.PREDICTED:
        return f"{word} ({verdict.estimate:+.2f} pts)"
    if kind == Kind.NO_DIFFERENCE and verdict.axis == TIME:
        return f"{word} (CI [{_fmt(verdict.ci_lo, '.4f')}, {_fmt(verdict.ci_hi, '.4f')}])"
    if kind == Kind.NO_DIFFERENCE:
        return f"{word} (CI [{_fmt(verdict.ci_lo, '+.2f')}, {_fmt(verdict.ci_hi, '+.2f')}] pts)"
    return word


def parse_verdict(text: object, axis: str) -> Verdict | None:
    """The verdict a ``verdict`` (``axis`` TIME) or ``l2_verdict`` (L2) tag stores; None for
    no tag (empty, None, NaN: a pandas column's missing cell); kind OTHER for text that is no
    verdict this module writes."""
    if not isinstance(text, str) or not text:
        return None
    for opening in (SAME_ORDER_TIME, SAME_ORDER_L2):
        if text.startswith(opening):
            inner = parse_verdict(text.rpartition(" (")[2].removesuffix(")"), axis)
            kind = inner.kind if inner is not None else Kind.OTHER
            found = re.match(rf" x{_NUMBER} \[{_NUMBER}, {_NUMBER}\]", text[len(opening):])
            numbers = [float(g) for g in found.groups()] if found else []
            return Verdict(axis, kind, *numbers, same_order=True)
    kind = next((k for k in sorted(_STORED, key=lambda k: -len(k.word)) if text.startswith(k.word)), None)
    if kind is None:
        return Verdict(axis, Kind.OTHER, detail=text)
    rest = text[len(kind.word):]
    if kind == Kind.NO_COMPARISON:
        return Verdict(axis, kind, detail=rest.removeprefix(":").strip())
    numbers = [float(n) for n in re.findall(_NUMBER, rest)] if kind in (Kind.NO_DIFFERENCE, Kind.PREDICTED) else []
    if kind == Kind.PREDICTED and numbers:
        return Verdict(axis, kind, numbers[0])
    if kind == Kind.NO_DIFFERENCE and len(numbers) >= 2:
        return Verdict(axis, kind, math.nan, numbers[0], numbers[1])
    detail = rest.strip().removeprefix("(").removesuffix(")") if kind in (Kind.NOT_TIMED, Kind.NOT_PROFILED) else ""
    return Verdict(axis, kind, detail=detail)


def _fmt(value: float, spec: str) -> str:
    return format(value, spec) if math.isfinite(value) else ("-inf" if value < 0 else "inf")
