"""The one live line per job printed as a sweep runs."""
from __future__ import annotations

from harness.errors import full_error_requested
from harness.tune.best_vs_best import comparison_head
from harness.job.result import FINISHED, JobResult
from harness.storage.run_fields import run_tags


def progress_line(position: str, result: JobResult) -> str:
    """``[job 2 | 3/23] igemm/xcd/resnet-l03/w8  FINISHED  0.412 ms [0.405, 0.420] ...``"""
    m = result.metrics
    head = f"{position} {result.run_name:<36} {result.status:<8}"
    if result.status != FINISHED:   # its first line; the whole reason (e.g. a formula's caret excerpt) is stored
        return f"{head} {result.reason if full_error_requested() else result.reason.partition(chr(10))[0]}"
    if result.compile_only:
        return f"{head} {result.reason}"
    if "time_ms_median" in m:
        body = (f"{m['time_ms_median']:.4f} ms [p20 {m['time_ms_p20']:.4f}, p80 {m['time_ms_p80']:.4f}]  "
                f"{m['tflops']:.1f} TFLOP/s  vendor {m['vendor_time_ms']:.4f} ms  "
                f"max_rel_err {m['max_rel_err']:.2g}")
        if "bound" in result.tags:      # harness.measure.roofline
            body += f"  ({result.tags['bound']})"
    else:
        body = f"verified (max_rel_err {m.get('max_rel_err', float('nan')):.2g}); {result.tags.get('timing', '')}"
    if "l2_hit_rate" in m:
        spread = f" ± {m['l2_hit_rate_std']:.2f}" if m.get("l2_samples", 1) > 1 else ""
        source = result.tags.get("profiler", "?")
        if "sim_validation" in result.tags:   # a prediction: its measured error, and against what
            spread = f" ± {m['l2_hit_rate_err']:.1f}" if "l2_hit_rate_err" in m else ""
            source += ", " + result.tags["sim_validation"]
        body += f"  L2 hit {m['l2_hit_rate']:.2f}%{spread} ({source})"
        if "l2_read_hit_rate" in m:   # the reads alone (ncu's tex read lookups; the simulator's loads)
            read_err = f" ± {m['l2_read_hit_rate_err']:.1f}" if "l2_read_hit_rate_err" in m else ""
            body += f", reads {m['l2_read_hit_rate']:.2f}%{read_err}"
    if "speedup" in m:
        body += (f"  | {comparison_head(result.comparison.question, result.params)}: x{m['speedup']:.4f} [{m.get('speedup_ci_lo', float('nan')):.4f}, "
                 f"{m.get('speedup_ci_hi', float('nan')):.4f}] {result.tags.get('verdict', '')}")
    elif result.comparison.missing is not None:
        body += f"  | {run_tags(result)['verdict']}"
    if "l2_delta_pts" in m:
        band = ""
        if "sim_validation" in result.tags and m.get("l2_delta_ci_hi", 0) > m.get("l2_delta_ci_lo", 0):
            band = f" ± {(m['l2_delta_ci_hi'] - m['l2_delta_ci_lo']) / 2:.1f}"   # the model's measured delta error
        body += f"; L2 {m['l2_delta_pts']:+.2f}{band} pts {result.tags.get('l2_verdict', '')}"
        if result.tags.get("sim_order_blind"):   # harness.profilers.sim.bands.order_blind: its note
            body += f" ({result.tags['sim_order_blind']})"
    if m.get("compile.spills") or m.get("compile.spill_bytes"):   # the compiler ran out of registers
        unit = "spill stores" if str(result.params.get("compile.arch", "")).startswith("sm_") else "VGPRs spilled"
        body += (f"  SPILLS on {result.params.get('compile.arch', '?')}: {int(m.get('compile.spills', 0))} {unit}, "
                 f"{int(m.get('compile.spill_bytes', 0))} B per thread")
    return f"{head} {body}"
