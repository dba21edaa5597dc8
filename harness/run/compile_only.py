"""The compile-only stage (``compile.only=true``): the job's config compiled for the target,
nothing verified, timed or profiled; in tune mode every candidate of the kernel's space for
the target too (:meth:`kernels.base.ConvKernel.tune_space`)."""
from __future__ import annotations

import json

from harness.compile.build import CompileFailed
from harness.compile.client import CompileOptions, client
from harness.gates.compile import record_compile, refuse
from harness.job.plan import PlannedJob
from harness.job.result import FINISHED, JobResult
from harness.tune.search import FASTEST, candidates
from harness.storage.field_names import Metric, Tag
from kernels.tuning import Config, DeviceTraits


def compile_only(plan: PlannedJob, copts: CompileOptions, result: JobResult) -> JobResult:
    """``compile.only=true``: the job's config compiled for the target, nothing verified,
    timed or profiled.  In tune mode every candidate of the kernel's space for the target
    is compiled too: the job FAILS if any does not, so that the first ``tune=fastest`` on
    that machine meets no compile error."""
    spec = plan.spec
    compiler = client(copts.cache_dir)
    try:
        report = compiler.compile(spec, copts.arch)
    except CompileFailed as exc:
        return refuse(result, copts, exc)
    record_compile(result, report)
    result.compile_only = True
    result.tags[Tag.TIMING] = f"not run: compile.only=true (compiled for {copts.arch})"
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
        result.metrics.update({Metric.COMPILE_CANDIDATES: float(len(trials) + len(failed)),
                               Metric.COMPILE_CANDIDATE_FAILURES: float(len(failed))})
        result.artifacts["compile_candidates.json"] = json.dumps({"compiled": trials, "failed": failed}, indent=1)
        if failed:
            return result.fail(f"compile for {copts.target or copts.arch}: {len(failed)} of {len(trials) + len(failed)} "
                               f"tune candidates do not compile; first: {failed[0]['config']}: {failed[0]['error']}",
                               gate="compile")
        result.tags[Tag.TIMING] += f"; {len(trials)} tune candidates compiled"
    result.status = FINISHED
    result.reason = f"compiled: {report.summary()}"
    return result
