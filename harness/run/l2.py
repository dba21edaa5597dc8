"""The L2 stage: after a job's shapes are verified and timed, profile their L2 (one profiler
launch for all, or one each), pair candidate and baseline readings into the L2 verdict, and
log each run.  Hit rates are in % (0-100), deltas in percentage points."""
from __future__ import annotations

from pathlib import Path

from harness.job.plan import PlannedJob
from harness.job.result import JobResult
from harness.job.spec import JobSpec
from harness.measure.paired import record_l2, record_read_l2
from harness.profilers.worker import ProfileRequest
from harness.run.progress import print_line
from harness.schema import ProfilerConfig, TargetConfig
from harness.storage.field_names import Metric, Tag
from harness.storage.run_fields import PROFILER_ARTIFACTS
from harness.storage.tracking import Tracker


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
