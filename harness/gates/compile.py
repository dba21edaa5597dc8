"""The compile gate: the job's launch (and a best-vs-best baseline's own) built for the
target's arch (harness.compile), on any machine; what does not compile (or fit) there
fails the job before anything runs."""
from __future__ import annotations

import json

from harness.compile.build import CompileFailed, CompileReport
from harness.compile.client import CompileOptions, client
from harness.job.plan import PlannedJob
from harness.job.result import JobResult
from harness.storage.field_names import Tag


def compile_gate(plan: PlannedJob, copts: CompileOptions, result: JobResult) -> bool:
    """The compile gate for both arms; False (the job FAILED) when one does not compile."""
    try:
        record_compile(result, client(copts.cache_dir).compile(plan.spec, copts.arch))
        if plan.baseline is not None and not plan.same_config:   # best vs best: the baseline's own config too
            built = client(copts.cache_dir).compile(plan.baseline.spec, copts.arch)
            result.tags[Tag.BASELINE_GATE_COMPILE] = built.summary()
    except CompileFailed as exc:
        refuse(result, copts, exc)
        return False
    return True


def refuse(result: JobResult, copts: CompileOptions, exc: CompileFailed) -> JobResult:
    """The job FAILED at the compile gate with ``exc``'s reason; returns ``result``."""
    result.tags[Tag.GATE_COMPILE] = str(exc)
    return result.fail(f"compile for {copts.target or copts.arch}: {exc}", gate="compile")


def record_compile(result: JobResult, report: CompileReport) -> None:
    """Log a compile report on the job: params, metrics, the job line's clause, the whole report."""
    result.params.update(report.as_params())
    result.metrics.update(report.as_metrics())
    result.tags[Tag.GATE_COMPILE] = report.summary()
    result.artifacts["compile_report.json"] = json.dumps(report.to_dict(), indent=1)
