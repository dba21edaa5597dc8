"""What the report says in words and small tables: the header facts, the best swizzle per
group, the verdict counts per swizzle, and each kernel against the vendor's conv2d.
"""
from __future__ import annotations

import re

import numpy as np
import pandas as pd

from harness.report.compare import Comparison
from harness.report.data import utc
from harness.report.prediction import PREDICTION, band_text
from harness.report.verdicts import (BASELINE, L2_HIGHER, L2_LOWER, NOT_PROFILED, NOT_TIMED, PAIRED, SAME_ORDER,
                                     verdict_counts)
from harness.report.views import ReportRuns
from harness.storage.field_names import Tag, tag_column


# --------------------------------------------------------------------------------------
# Header facts
# --------------------------------------------------------------------------------------
def _distinct(runs: pd.DataFrame, tag: str, absent: str = "not recorded") -> str:
    col = tag_column(tag)
    if col not in runs.columns:
        return absent
    values = sorted({str(v) for v in runs[col].dropna()})
    if not values:
        return absent
    return values[0] if len(values) == 1 else "MIXED: " + "; ".join(values)


def _timing(runs: pd.DataFrame) -> str:
    """The ``timing`` tags summarised: the jobs' sentences with their round counts taken out,
    each once, then the rounds per job as min / median / max (one sentence per distinct round
    count repeated the same words about 20 times on the design card's sweep)."""
    col = tag_column(Tag.TIMING)
    if col not in runs.columns or not runs[col].notna().any():
        return "not recorded"
    texts = runs[col].dropna().astype(str)
    shapes = sorted({re.sub(r"^measured: \d+ interleaved rounds", "measured: N interleaved rounds", t) for t in texts})
    rounds = pd.to_numeric(texts.str.extract(r"measured: (\d+) interleaved rounds")[0], errors="coerce").dropna()
    out = "; ".join(shapes) if len(shapes) > 1 else shapes[0]
    if len(rounds):
        out += (f" (N = rounds per job: min {int(rounds.min())}, median {int(rounds.median())}, "
                f"max {int(rounds.max())} over {len(rounds)} jobs)")
    return out if len(shapes) > 1 or len(rounds) else texts.iloc[0]


def _duration(seconds: float) -> str:
    seconds = int(round(seconds))
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h} h {m:02d} min {s:02d} s" if h else f"{m} min {s:02d} s"


def _profiler_settings(runs: pd.DataFrame) -> list[tuple[str, str]]:
    """The facts rows naming each profiler's own settings: ncu's cache control (runs not
    simulated), the simulated L2's target and validation (runs with ``profiler=sim``)."""
    profiler = runs.get(tag_column(Tag.PROFILER), pd.Series("", index=runs.index, dtype=object)).fillna("")
    simulated, measured = runs[profiler == "sim"], runs[profiler != "sim"]
    rows = []
    cache_control = tag_column(Tag.CACHE_CONTROL)
    recorded = cache_control in measured and measured[cache_control].notna().any()
    if recorded or not len(simulated):   # runs that never reached a profiler do not ask for the row
        rows.append(("Cache control", _distinct(measured, Tag.CACHE_CONTROL)))
    if len(simulated):
        rows += [("Simulated target", _distinct(simulated, Tag.SIM_TARGET)),
                 ("Simulator validation", _distinct(simulated, Tag.SIM_VALIDATION))]
    return rows


def header_facts(data: ReportRuns, comparison: Comparison, failed: pd.DataFrame) -> list[tuple[str, str]]:
    """(label, value) pairs describing which runs the report covers, where and when they ran."""
    runs = data.runs
    facts = [("Experiment", data.experiment), *data.facts]
    facts += [
        ("Device", _distinct(runs, Tag.DEVICE)),
        ("Target", _distinct(runs, Tag.TARGET)),
        ("Mode", _distinct(runs, Tag.MODE)),
        ("Timing", _timing(runs)),
        ("Profiler", _distinct(runs, Tag.PROFILER, "none (no L2 profiler tag)")
         + (f" {_distinct(runs, Tag.PROFILER_VERSION)}" if tag_column(Tag.PROFILER_VERSION) in runs else "")
         + (" (the simulated L2: its hit rates are predictions, not measurements)"
            if _distinct(runs, Tag.PROFILER) == "sim" else "")),
        *_profiler_settings(runs),
        ("torch / triton", f"{_distinct(runs, Tag.TORCH_VERSION)} / {_distinct(runs, Tag.TRITON_VERSION)}"),
        ("Git commit", _distinct(runs, Tag.GIT_COMMIT)),
    ]
    n = len(runs)
    n_finished = int((runs["status"] == "FINISHED").sum()) if n else 0
    n_failed = int((runs["status"] == "FAILED").sum()) if n else 0
    facts.append(("Runs", f"{n} job runs: {n_finished} finished, {n_failed} failed, "
                                f"{n - n_finished - n_failed} unfinished; {len(comparison.table)} cells in "
                                f"{comparison.table.groupby(comparison.group_cols).ngroups if len(comparison.table) else 0} groups"))
    # One sweep ran from its first start to its last end; other views only span that interval.
    took = "Time taken" if data.attach_run_id else "Runs span"
    if n and runs["start_ms"].notna().any():
        start = float(runs["start_ms"].min())
        end = runs["end_ms"].max()
        if pd.notna(end):
            open_runs = int(runs["end_ms"].isna().sum())
            note = f" ({open_runs} run(s) without an end time)" if open_runs else ""
            facts.append((took, f"{_duration((float(end) - start) / 1000)}: {utc(start)} to {utc(float(end))}{note}"))
        else:
            facts.append((took, f"started {utc(start)}; no run has ended"))
    return facts


# --------------------------------------------------------------------------------------
# Verdicts per group and per swizzle
# --------------------------------------------------------------------------------------
def _names(values: pd.Series) -> str:
    """The distinct non-empty values, in order, joined by ``, ``."""
    return ", ".join(dict.fromkeys(v for v in values.astype(str) if v))


def _no_best_reason(grp: pd.DataFrame) -> str:
    """Why a group has no best swizzle, in one phrase."""
    cands = grp[grp["verdict"] != BASELINE]
    if cands.empty:
        return f"only {_names(grp['swizzle'])} ran in this group: nothing to compare"
    if cands["speedup"].notna().any():
        return f"none beats {_names(cands['baseline']) or 'its baseline'} beyond noise"
    if (cands["verdict"] == NOT_TIMED).any():
        return f"{NOT_TIMED}: no comparison of speed possible"
    return "; ".join(dict.fromkeys(cands["verdict_detail"]))   # e.g. "no comparison: baseline ... failed"


def _ranked_by_l2(cands: pd.DataFrame, comparison: Comparison) -> str:
    """A group nothing was timed in, its swizzles ranked by ΔL2 vs their baseline, highest
    first: ``prediction, ΔL2 points vs identity (not validated on mi300x hardware): xcd +43.73,
    grouped +0.00 (same order as baseline)``; a simulated delta with its band (``+1.38 ±
    0.9``, ``90 % band``), a measured one with its 95 % CI."""
    ranked = cands.dropna(subset=["l2_delta_pts"]).sort_values("l2_delta_pts", ascending=False, kind="stable")
    parts, qualifiers = [], []
    for variant, row in zip(comparison.variant_label(ranked), ranked.to_dict("records")):
        if row["simulated"]:
            band = row["l2_delta_band_pts"]
            text = f"{variant} {row['l2_delta_pts']:+.2f}" + (f" ± {band:.1f}" if np.isfinite(band) else "")
            qualifiers.append(band_text(row))
        else:
            ci = (f" [{row['l2_delta_lo']:+.2f}, {row['l2_delta_hi']:+.2f}] (95 % CI)"
                  if np.isfinite(row["l2_delta_lo"]) and np.isfinite(row["l2_delta_hi"]) else "")
            text = f"{variant} {row['l2_delta_pts']:+.2f}{ci}"
        parts.append(text + (f" ({SAME_ORDER})" if row["l2_verdict"] == SAME_ORDER else ""))
    kind = PREDICTION if ranked["simulated"].any() else f"measured L2, {NOT_TIMED}"
    said = f" ({'; '.join(dict.fromkeys(qualifiers))})" if qualifiers else ""
    return f"{kind}, ΔL2 points vs {_names(ranked['baseline']) or 'baseline'}{said}: " + ", ".join(parts)


def best_per_group(comparison: Comparison) -> pd.DataFrame:
    """One row per group: its best swizzle (among verdict faster) or why there is none, and
    the counts of its time verdicts; a group nothing was timed in but with L2 deltas (a CPU's
    simulated ones): its swizzles ranked by ΔL2, labelled a prediction when simulated, and
    the counts of its L2 verdicts."""
    t = comparison.table
    rows = []
    for _, grp in t.groupby(comparison.group_cols, sort=False):
        best = grp[grp["best"]]
        label = comparison.group_label(grp.head(1)).iloc[0]
        if not best.empty:
            b = best.iloc[0]
            variant = comparison.variant_label(best.head(1)).iloc[0]
            against = "" if "baseline" in comparison.variant_cols else f" vs {b['baseline']}"
            how = "95 % CI" if b["comparison"] == PAIRED else "band interval"
            text = (f"{variant}{against}: speedup {b['speedup']:.3f} [{b['speedup_lo']:.3f}, {b['speedup_hi']:.3f}] "
                    f"({how})" + (f", ΔL2 {b['l2_delta_pts']:+.2f} points" if np.isfinite(b["l2_delta_pts"]) else ""))
        cands = grp[grp["verdict"] != BASELINE]
        by_l2 = best.empty and cands["speedup"].isna().all() and cands["l2_delta_pts"].notna().any()
        verdicts = verdict_counts(cands["verdict"]) if len(cands) else "–"
        if by_l2:
            text = _ranked_by_l2(cands, comparison)
            verdicts = verdict_counts(cands["l2_verdict"], (L2_HIGHER, L2_LOWER), NOT_PROFILED)
        elif best.empty:
            text = _no_best_reason(grp)
        rows.append({"group": label, "best": text, "has_best": not best.empty, "verdicts": verdicts})
    return pd.DataFrame(rows, columns=["group", "best", "has_best", "verdicts"])


def verdicts_per_swizzle(comparison: Comparison) -> pd.DataFrame:
    """One row per swizzle variant: its baseline(s), cells, and time and L2 verdict counts
    over the groups (e.g. ``0 faster, 0 slower, 6 no difference detected``)."""
    t = comparison.candidates.assign(variant=lambda f: comparison.variant_label(f))
    rows = [{"swizzle": variant, "baseline": _names(grp["baseline"]), "cells": len(grp),
             "time": verdict_counts(grp["verdict"]),
             "l2": verdict_counts(grp["l2_verdict"], (L2_HIGHER, L2_LOWER), NOT_PROFILED)}
            for variant, grp in t.groupby("variant", sort=False)]
    return pd.DataFrame(rows, columns=["swizzle", "baseline", "cells", "time", "l2"])



# --------------------------------------------------------------------------------------
# Kernel vs vendor
# --------------------------------------------------------------------------------------
#: Columns of :func:`kernel_vs_vendor` (and vendor.csv).  Ratios are time / vendor time.
VENDOR_COLUMNS = ["kernel", "swizzle", "shapes", "timed_shapes", "geomean_ratio", "geomean_vendor_speedup",
                  "worst_shape", "worst_ratio"]


def time_over_vendor(table: pd.DataFrame) -> pd.Series:
    """Each cell's time / vendor conv2d time: the run's ``ratio_to_vendor`` (paired per round),
    else ``time_ms_median / vendor_time_ms``; NaN when not timed."""
    fallback = table["time_ms_median"] / table["vendor_time_ms"]
    ratio = table["ratio_to_vendor"].where(table["ratio_to_vendor"].notna(), fallback)
    return ratio.where(ratio > 0)


def kernel_vs_vendor(comparison: Comparison) -> pd.DataFrame:
    """One row per kernel (with any varying launch knob) and swizzle: over its shapes, the
    geometric mean of time / vendor time (< 1: faster than the vendor), its inverse (the
    speedup over the vendor) and the shape furthest behind the vendor; NaN when not timed."""
    t = comparison.table
    if t.empty:
        return pd.DataFrame(columns=VENDOR_COLUMNS)
    t = t.assign(kernel_label=comparison.kernel_label(t), variant_label=comparison.variant_label(t),
                 log_ratio=np.log(time_over_vendor(t)))
    rows = []
    for (kernel, variant), grp in t.groupby(["kernel_label", "variant_label"], sort=False):
        per_shape = grp.groupby("shape", sort=False)["log_ratio"].mean().dropna()
        row = {"kernel": kernel, "swizzle": variant, "shapes": grp["shape"].nunique(), "timed_shapes": len(per_shape),
               "geomean_ratio": np.nan, "geomean_vendor_speedup": np.nan, "worst_shape": "", "worst_ratio": np.nan}
        if len(per_shape):
            mean_log = float(per_shape.mean())
            row.update(geomean_ratio=float(np.exp(mean_log)), geomean_vendor_speedup=float(np.exp(-mean_log)),
                       worst_shape=per_shape.idxmax(), worst_ratio=float(np.exp(per_shape.max())))
        rows.append(row)
    return pd.DataFrame(rows, columns=VENDOR_COLUMNS)
