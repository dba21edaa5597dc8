"""The one live line per job printed as a sweep runs, and the legend printed once at the
sweep's start that says what the lines' verdict words mean."""
from __future__ import annotations

from harness.errors import full_error_requested
from harness.quiet import verbose
from harness.tune.best_vs_best import comparison_head
from harness.job.result import FINISHED, JobResult
from harness.job.verdict import SAME_ORDER_SIM, TIME, Kind
from harness.run import live
from harness.storage.run_fields import VERDICT_TAGS, run_tags, verdict_text
from harness.storage.field_names import Metric, Param, Tag

#: Characters the run name is padded to (the columns of the lines that follow it line up).
NAME_WIDTH = 28
#: What the line says of a simulated delta on an order-blind grid; the whole note
#: (harness.profilers.sim.bands.ORDER_BLIND_NOTE) is its ``sim_order_blind`` tag.
ORDER_BLIND_SHORT = "order-blind grid"
#: The tag of the time verdict (harness.storage.run_fields).
VERDICT_TAG = VERDICT_TAGS[TIME]


def verdict_legend(min_effect: float, min_l2_delta: float) -> str:
    """The verdict words of the job lines, said once per sweep: ``min_effect`` a fraction
    (``compare.min_effect``), ``min_l2_delta`` in % points (``compare.min_l2_delta``)."""
    k = Kind
    return (f"Job lines compare each swizzle with its baseline (vs identity unless compare.baseline says "
            f"otherwise): {k.FASTER.word} / {k.SLOWER.word} when the speedup's 95 % CI excludes 1 and it is at least "
            f"{100 * min_effect:g} % (compare.min_effect); L2 {k.HIGHER.word} / {k.LOWER.word} when the hit-rate change is at least "
            f"{min_l2_delta:g} pts (compare.min_l2_delta) and its CI, or a simulation's band, excludes 0; "
            f"else '{k.NO_DIFFERENCE.word}'. Simulated (sim) figures are predictions of the L2 model, with the "
            f"band it held on hardware or 'not validated on <target>', whose change claims no effect "
            f"('{k.PREDICTED.word}'); 'order-blind grid': every tile order reads "
            f"the same blocks in the model, which then predicts no difference. '{k.NOT_TIMED.word}': no GPU, verified under "
            f"the Triton interpreter.")


def _l2_verdict(result: JobResult) -> str:
    """The L2 verdict as the line shows it: a prediction with no band says its word after the
    number the line already prints, and a simulated job in its baseline's tile order says
    :data:`~harness.job.verdict.SAME_ORDER_SIM`."""
    verdict = result.l2_verdict
    if verdict is None:
        return ""
    if result.tags.get(Tag.L2_SOURCE) != "sim":
        return verdict_text(verdict)
    if verdict.same_order:
        return SAME_ORDER_SIM
    return verdict.word if verdict.kind == Kind.PREDICTED else verdict_text(verdict)


def print_line(position: str, result: JobResult) -> None:
    """Print the shape's job line (:func:`progress_line`) now, and count it on the sweep's live
    display (:mod:`harness.run.live`)."""
    print(progress_line(position, result), flush=True)
    live.shape_done(failed=result.status != FINISHED)


def progress_line(position: str, result: JobResult) -> str:
    """``[job 2 | 3/23] igemm/xcd/resnet-l03/w8  FINISHED  0.412 ms [0.405, 0.420] ... | vs identity: ...``"""
    m, tags = result.metrics, run_tags(result)
    head = f"{position} {result.run_name:<{NAME_WIDTH}} {result.status:<8}"
    if result.status != FINISHED:   # its first line; the whole reason (e.g. a formula's caret excerpt) is stored
        return f"{head} {result.reason if full_error_requested() else result.reason.partition(chr(10))[0]}"
    if result.compile_only:
        return f"{head} {result.reason}"
    if Metric.TIME_MS_MEDIAN in m:
        body = (f"{m[Metric.TIME_MS_MEDIAN]:.4f} ms [p20 {m[Metric.TIME_MS_P20]:.4f}, p80 {m[Metric.TIME_MS_P80]:.4f}]  "
                f"{m[Metric.TFLOPS]:.1f} TFLOP/s  vendor {m[Metric.VENDOR_TIME_MS]:.4f} ms  "
                f"max_rel_err {m[Metric.MAX_REL_ERR]:.2g}")
        if Tag.BOUND in result.tags:      # harness.measure.roofline
            body += f"  ({result.tags[Tag.BOUND]})"
    else:
        timing = tags.get(Tag.TIMING, "")   # the full sentence: in MLflow, the report, and under HYDRA_FULL_ERROR=1
        said = Kind.NOT_TIMED.word if result.not_timed is not None and not verbose() else timing
        body = f"verified (max_rel_err {m.get(Metric.MAX_REL_ERR, float('nan')):.2g}), {said}"
    if Metric.L2_HIT_RATE in m:
        repeated = m.get(Metric.L2_SAMPLES, 1) > 1 and m.get(Metric.L2_HIT_RATE_STD, 0) > 0
        spread = f" ± {m[Metric.L2_HIT_RATE_STD]:.2f}" if repeated else ""
        source = result.tags.get(Tag.PROFILER, "?")
        if Param.SIM_CONFIG in result.params:   # the target's config, not the one launched here (harness.tune.per_job)
            config = result.params[Param.SIM_CONFIG] if verbose() else "config"
            source += f" of the target's {result.params[Param.SIM_FAMILY]} {config}"
        if Tag.SIM_VALIDATION in result.tags:   # a prediction: its measured error, and against what
            spread = f" ± {m[Metric.L2_HIT_RATE_ERR]:.1f}" if Metric.L2_HIT_RATE_ERR in m else ""
            validation = result.tags[Tag.SIM_VALIDATION]
            source += ", " + (validation if verbose() else validation.removesuffix(" hardware"))
        body += f"  L2 hit {m[Metric.L2_HIT_RATE]:.2f}%{spread} ({source})"
        if Metric.L2_READ_HIT_RATE in m:   # the reads alone (ncu's tex read lookups; the simulator's loads)
            read_err = f" ± {m[Metric.L2_READ_HIT_RATE_ERR]:.1f}" if Metric.L2_READ_HIT_RATE_ERR in m else ""
            body += f", reads {m[Metric.L2_READ_HIT_RATE]:.2f}%{read_err}"
    against = f"  | {comparison_head(result.comparison.question, result.params)}:"
    if Metric.SPEEDUP in m:
        body += (f"{against} x{m[Metric.SPEEDUP]:.4f} [{m.get(Metric.SPEEDUP_CI_LO, float('nan')):.4f}, "
                 f"{m.get(Metric.SPEEDUP_CI_HI, float('nan')):.4f}] {tags.get(VERDICT_TAG, '')}")
        against = ";"
    elif result.comparison.missing is not None:
        body += f"  | {tags[VERDICT_TAG]}"
        against = ";"
    if Metric.L2_DELTA_PTS in m:
        band = ""
        if Tag.SIM_VALIDATION in result.tags and m.get(Metric.L2_DELTA_CI_HI, 0) > m.get(Metric.L2_DELTA_CI_LO, 0):
            # the model's measured delta error
            band = f" ± {(m[Metric.L2_DELTA_CI_HI] - m[Metric.L2_DELTA_CI_LO]) / 2:.1f}"
        body += f"{against} L2 {m[Metric.L2_DELTA_PTS]:+.2f}{band} pts {_l2_verdict(result)}"
        if result.tags.get(Tag.SIM_ORDER_BLIND):   # harness.profilers.sim.bands.order_blind: its note
            body += f" ({result.tags[Tag.SIM_ORDER_BLIND] if verbose() else ORDER_BLIND_SHORT})"
    if m.get(Metric.COMPILE_SPILLS) or m.get(Metric.COMPILE_SPILL_BYTES):   # the compiler ran out of registers
        unit = "spill stores" if str(result.params.get(Param.COMPILE_ARCH, "")).startswith("sm_") else "VGPRs spilled"
        body += (f"  SPILLS on {result.params.get(Param.COMPILE_ARCH, '?')}: "
                 f"{int(m.get(Metric.COMPILE_SPILLS, 0))} {unit}, "
                 f"{int(m.get(Metric.COMPILE_SPILL_BYTES, 0))} B per thread")
    return f"{head} {body}"
