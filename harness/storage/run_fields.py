"""The one mapping from a job's outcome (:class:`harness.job.result.JobResult`) to what its
MLflow run carries: params, metrics and tags, under the names the report, the docs and the
stores read.  The stages' free-form records pass through as they are; the typed fields are
written here, and only here, under their tag names."""
from __future__ import annotations

from harness.job.result import JobResult

#: Tag names of the typed outcome fields.
FAILED_GATE_TAG = "failed_gate"
ROLE_TAG, SAME_ORDER_TAG, QUESTION_TAG = "compare.role", "compare.same_order", "compare.question"
#: The verdict tag's opening for a candidate whose baseline failed a gate.
NO_COMPARISON = "no comparison"


def flag_text(value: bool) -> str:
    """A boolean as a tag stores it: ``true`` / ``false``."""
    return str(bool(value)).lower()


def flag_column(values):
    """A boolean tag's column, as ``mlflow.search_runs(output_format="pandas")`` returns it,
    read back as booleans (a run without the tag: False)."""
    return values.fillna("").astype(str) == flag_text(True)


def run_params(result: JobResult) -> dict[str, str]:
    """The run's params (MLflow stores text)."""
    return {k: str(v) for k, v in result.params.items()}


def run_metrics(result: JobResult) -> dict[str, float]:
    """The run's metrics (ms, TFLOP/s, %, ratios: see the stages that write them)."""
    return {k: float(v) for k, v in result.metrics.items()}


def run_tags(result: JobResult) -> dict[str, str]:
    """The run's tags: the stages' tags plus the typed fields (``failed_gate``,
    ``compare.role``, ``compare.same_order`` as ``true``/``false``, ``compare.question``, and
    ``verdict`` = ``no comparison: <why>`` for a candidate whose baseline failed a gate)."""
    tags = {k: str(v) for k, v in result.tags.items()}
    c = result.comparison
    typed = {FAILED_GATE_TAG: result.failed_gate, ROLE_TAG: c.role, QUESTION_TAG: c.question,
             SAME_ORDER_TAG: None if c.same_order is None else flag_text(c.same_order),
             "verdict": None if c.missing is None else f"{NO_COMPARISON}: {c.missing}"}
    tags.update({k: v for k, v in typed.items() if v is not None})
    return tags
