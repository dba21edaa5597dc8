"""The report's figures (seaborn on Agg figures, no pyplot state), embedded as base64 PNGs.

Each figure is a :class:`FigureBlock`: a PNG, or the sentence saying why it is absent
(not timed, not profiled, or the figure failed to draw).
"""
from __future__ import annotations

import base64
import io
import logging
from dataclasses import dataclass
from typing import Callable

import numpy as np
import pandas as pd
from matplotlib import rc_context
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import LogFormatter

from harness.measure.roofline import MEMORY
from harness.quiet import quiet
from harness.report.compare import Comparison
from harness.report.prediction import validation_summary
from harness.report.verdicts import (BY_IDENTITY_RUN, FASTER, NO_DIFFERENCE, NOISE, NOT_TIMED, PAIRED, SAME_ORDER, SLOWER,
                                     ordered)
from harness.storage.run_fields import bound_column

log = logging.getLogger(__name__)

#: Figures list at most this many rows (groups or cells); the rest is in the table.
MAX_FIGURE_ROWS = 80
#: Resolution of the embedded PNGs, in dots per inch.
FIGURE_DPI = 100


@dataclass(frozen=True)
class FigureBlock:
    """One figure of the report: a PNG (base64), or the sentence saying why it is absent."""

    title: str
    png_base64: str | None
    caption: str


VERDICT_COLOURS = {FASTER: "#1a9850", SLOWER: "#d73027", NOISE: "#8c8c8c", NO_DIFFERENCE: "#8c8c8c",
                   SAME_ORDER: "#c7c7c7"}


def png_base64(fig: Figure) -> str:
    """PNG bytes of ``fig`` (Agg canvas, no pyplot state), base64-encoded."""
    FigureCanvasAgg(fig)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=FIGURE_DPI, bbox_inches="tight")
    return base64.b64encode(buf.getvalue()).decode("ascii")


def _labelled_candidates(comparison: Comparison) -> pd.DataFrame:
    """The compared cells with ``group_label`` and ``variant_label`` columns."""
    t = comparison.candidates.copy()
    t["group_label"] = comparison.group_label(t)
    t["variant_label"] = comparison.variant_label(t)
    return t


def figure_l2_heatmap(comparison: Comparison) -> FigureBlock:
    """Heatmap of the L2 hit-rate delta vs the baseline (points): groups x swizzles."""
    import seaborn as sns

    t = _labelled_candidates(comparison).dropna(subset=["l2_delta_pts"])
    predicted = validation_summary(t)
    title = "L2 hit-rate delta vs baseline (percentage points)" + (f": {predicted}" if predicted else "")
    if t.empty:
        return FigureBlock(title, None, "Skipped: not profiled: no swizzle has an L2 hit-rate delta to its "
                                        "baseline (no L2 profiler, or no baseline).")
    grid = t.pivot_table(index="group_label", columns="variant_label", values="l2_delta_pts",
                         aggfunc="mean", sort=False)
    caption = ("Each cell: swizzle hit rate minus its baseline's hit rate in the same group (paired cells: the "
               "mean over profiled pairs); red = more L2 hits.")
    if predicted:
        caption += (" Simulated cells are predictions of the L2 model, not measurements; their bands, or "
                    "'not validated', are in All cells.")
    if len(grid) > MAX_FIGURE_ROWS:
        keep = grid.abs().max(axis=1).nlargest(MAX_FIGURE_ROWS).index
        grid = grid.loc[[i for i in grid.index if i in set(keep)]]
        caption += f" Showing the {MAX_FIGURE_ROWS} groups with the largest |delta| of {t['group_label'].nunique()}."
    limit = float(np.nanmax(np.abs(grid.to_numpy()))) or 1.0
    fig = Figure(figsize=(max(5.0, 1.1 * grid.shape[1] + 3.5), max(2.5, 0.32 * grid.shape[0] + 1.5)))
    ax = fig.add_subplot()
    with quiet(category=DeprecationWarning), quiet(category=PendingDeprecationWarning):   # seaborn's matplotlib calls
        sns.heatmap(grid, ax=ax, cmap="RdBu_r", center=0.0, vmin=-limit, vmax=limit,
                    annot=grid.shape[0] * grid.shape[1] <= 400, fmt="+.1f",
                    cbar_kws={"label": "delta hit rate (points)"}, linewidths=0.5, linecolor="white")
    ax.set_xlabel("swizzle")
    ax.set_ylabel("group")
    ax.set_title(title.replace(": ", ":\n", 1))
    return FigureBlock(title, png_base64(fig), caption)


def figure_speedup(comparison: Comparison) -> FigureBlock:
    """Speedup vs the baseline per cell, with its CI (paired) or noise-band interval as error bars."""
    import seaborn as sns

    title = "Speedup vs baseline (baseline time / swizzle time)"
    t = _labelled_candidates(comparison).dropna(subset=["speedup"])
    if t.empty:
        return FigureBlock(title, None, f"Skipped: {NOT_TIMED}: no cell has a measured speedup (CPU-only runs are "
                                        "verified under the Triton interpreter, not timed).")
    kinds = set(t["comparison"])
    caption = "Bars: " + "; ".join(
        text for kind, text in ((PAIRED, "the 95 % CI of the paired speedup (speedup_ci_lo, speedup_ci_hi)"),
                                (BY_IDENTITY_RUN, "for cells compared with a separate identity run, the "
                                 "conservative interval [identity p20 / swizzle p80, identity p80 / swizzle p20]"))
        if kind in kinds) + f"; green = {FASTER}, red = {SLOWER}, grey = {NO_DIFFERENCE} / {NOISE}."
    if len(t) > MAX_FIGURE_ROWS:
        keep = np.log(t["speedup"]).abs().nlargest(MAX_FIGURE_ROWS).index
        caption += f" Showing the {MAX_FIGURE_ROWS} cells with the largest effect of {len(t)}."
        t = t.loc[sorted(keep)]
    t = t.assign(y=np.arange(len(t))[::-1], label=t["group_label"] + " · " + t["variant_label"])
    fig = Figure(figsize=(9.0, max(2.5, 0.26 * len(t) + 1.2)))
    ax = fig.add_subplot()
    palette = {v: VERDICT_COLOURS.get(v, "#444444") for v in t["verdict"].unique()}
    for verdict, part in t.groupby("verdict", sort=False):
        below = part["speedup"] - part["speedup_lo"].fillna(part["speedup"])
        above = part["speedup_hi"].fillna(part["speedup"]) - part["speedup"]
        ax.errorbar(part["speedup"], part["y"], xerr=[below.to_numpy(), above.to_numpy()], fmt="none",
                    ecolor=palette[verdict], elinewidth=2, capsize=3)
    sns.scatterplot(data=t, x="speedup", y="y", hue="verdict", hue_order=ordered(t["verdict"]), palette=palette,
                    ax=ax, s=30, zorder=3)
    ax.axvline(1.0, color="black", linewidth=1, linestyle="--")
    ax.set_yticks(t["y"], t["label"].tolist(), fontsize=8)
    ax.set_ylabel("")
    ax.set_xlabel("speedup (> 1: faster than the baseline)")
    ax.set_title(title)
    ax.grid(axis="x", alpha=0.3)
    if ax.get_legend() is not None:
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return FigureBlock(title, png_base64(fig), caption)


def _rank_correlation(x: pd.Series, y: pd.Series) -> float:
    """Spearman's rank correlation (Pearson on ranks), NaN for < 3 points."""
    if len(x) < 3:
        return float("nan")
    return float(x.rank().corr(y.rank()))


def figure_l2_vs_speedup(comparison: Comparison) -> FigureBlock:
    """Scatter: L2 hit-rate delta (points) vs speedup: does L2 predict speed?"""
    import seaborn as sns

    title = "Does L2 predict speed? Hit-rate delta vs speedup"
    t = _labelled_candidates(comparison).dropna(subset=["speedup", "l2_delta_pts"])
    if t.empty:
        return FigureBlock(title, None, "Skipped: no cell has both a speedup and an L2 hit-rate delta (needs "
                                        "runs timed on a GPU (CPU runs are not timed) and profiled for L2).")
    rho = _rank_correlation(t["l2_delta_pts"], t["speedup"])
    points = pd.DataFrame({"l2_delta_pts": t["l2_delta_pts"], "speedup": t["speedup"],
                           "swizzle": t["variant_label"], "verdict": t["verdict"]})
    fig = Figure(figsize=(7.5, 5.0))
    ax = fig.add_subplot()
    sns.scatterplot(data=points, x="l2_delta_pts", y="speedup", hue="swizzle", style="verdict",
                    style_order=ordered(points["verdict"]), ax=ax, s=40)
    ax.axhline(1.0, color="black", linewidth=1, linestyle="--")
    ax.axvline(0.0, color="black", linewidth=1, linestyle=":")
    ax.set_xlabel("L2 hit-rate delta vs baseline (points)")
    ax.set_ylabel("speedup vs baseline")
    ax.set_title(title)
    if ax.get_legend() is not None:
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    rho_text = "n/a (fewer than 3 cells)" if not np.isfinite(rho) else f"{rho:+.2f}"
    caption = f"{len(t)} cells; Spearman rank correlation between delta and speedup: {rho_text}."
    return FigureBlock(title, png_base64(fig), caption)


def figure_sim_vs_measured(comparison: Comparison) -> FigureBlock:
    """Scatter: simulated vs measured L2 hit rate (%), with the y = x line."""
    import seaborn as sns

    title = "Simulated vs measured L2 hit rate"
    t = comparison.table.dropna(subset=["sim_l2_hit_rate", "l2_hit_rate"]).copy()
    if t.empty:
        return FigureBlock(title, None, "Skipped: no run has both a measured and a simulated L2 hit rate "
                                        "(sim_l2_hit_rate is logged only where both exist).")
    points = pd.DataFrame({"l2_hit_rate": t["l2_hit_rate"], "sim_l2_hit_rate": t["sim_l2_hit_rate"],
                           "swizzle": comparison.variant_label(t)})
    fig = Figure(figsize=(6.0, 5.5))
    ax = fig.add_subplot()
    sns.scatterplot(data=points, x="l2_hit_rate", y="sim_l2_hit_rate", hue="swizzle", ax=ax, s=40)
    lo = float(min(t["l2_hit_rate"].min(), t["sim_l2_hit_rate"].min()))
    hi = float(max(t["l2_hit_rate"].max(), t["sim_l2_hit_rate"].max()))
    pad = max(1.0, 0.05 * (hi - lo))
    ax.plot([lo - pad, hi + pad], [lo - pad, hi + pad], color="black", linewidth=1, linestyle="--")
    ax.set_xlabel("measured L2 hit rate (%)")
    ax.set_ylabel("simulated L2 hit rate (%)")
    ax.set_title(title)
    if ax.get_legend() is not None:
        ax.legend(fontsize=7, loc="best")
    err = (t["sim_l2_hit_rate"] - t["l2_hit_rate"]).abs()
    rho = _rank_correlation(t["l2_hit_rate"], t["sim_l2_hit_rate"])
    rho_text = "n/a" if not np.isfinite(rho) else f"{rho:+.2f}"
    caption = (f"{len(t)} runs; mean |simulated - measured| = {err.mean():.2f} points, "
               f"max {err.max():.2f}; Spearman rank correlation {rho_text}.")
    return FigureBlock(title, png_base64(fig), caption)


def _ceilings(t: pd.DataFrame) -> tuple[float, float]:
    """(peak TFLOP/s, DRAM bytes/s) of one target's cells: the logged ceilings (params
    ``roofline.*``), else what the readings imply (peak = TFLOP/s / pct_of_peak; bandwidth from
    memory-bound cells, roofline = I x bandwidth); NaN where neither says."""
    peak = t["roof_peak_tflops"].dropna()
    peak = float(peak.median()) if len(peak) else float((100 * t["tflops"] / t["pct_of_peak"]).median())
    bw = t["roof_dram_bytes_per_s"].dropna()
    memory = t[bound_column(t["bound"]) == MEMORY]
    implied = 100 * memory["tflops"] * 1e12 / memory["pct_of_roofline"] / memory["arith_intensity"]
    bw = float(bw.median()) if len(bw) else float(implied.median()) if len(implied) else float("nan")
    return peak, bw


def roofline_points(comparison: Comparison) -> pd.DataFrame:
    """The compared cells with a roofline reading, with ``base_tflops``: the baseline's achieved
    TFLOP/s (the same FLOP in ``baseline_time_ms``; NaN without a baseline time)."""
    t = _labelled_candidates(comparison)
    t = t[np.isfinite(t["arith_intensity"]) & (t["arith_intensity"] > 0) & (t["tflops"] > 0)]
    return t.assign(base_tflops=t["tflops"] * t["time_ms_median"] / t["baseline_time_ms"])


def figure_roofline(comparison: Comparison) -> FigureBlock | None:
    """Log-log roofline: achieved TFLOP/s vs arithmetic intensity (FLOP per compulsory DRAM
    byte) under the target's peak and bandwidth ceilings, each cell an arrow from its baseline
    to its candidate.  None (no figure at all) when no cell has a roofline reading."""
    title = "Roofline: each cell from its baseline (open circle) to its swizzle (dot)"
    t = roofline_points(comparison)
    if t.empty:
        return None
    caption = ("Arithmetic intensity: conv FLOP over its compulsory DRAM bytes (input, weights and output once "
               "each), the same for both arms of a cell, so each arrow is vertical: up = the swizzle reaches more "
               "TFLOP/s than its baseline. Ceilings: the target's measured dense peak and DRAM bandwidth; green = "
               f"{FASTER}, red = {SLOWER}, grey = {NO_DIFFERENCE}.")
    if len(t) > MAX_FIGURE_ROWS:
        keep = np.log(t["speedup"].fillna(1.0)).abs().nlargest(MAX_FIGURE_ROWS).index
        caption += f" Showing the {MAX_FIGURE_ROWS} cells with the largest effect of {len(t)}."
        t = t.loc[sorted(keep)]
    fig = Figure(figsize=(7.5, 5.5))
    ax = fig.add_subplot()
    ax.set_xscale("log")
    ax.set_yscale("log")
    x = np.geomspace(float(t["arith_intensity"].min()) / 4, float(t["arith_intensity"].max()) * 4, 200)
    for (target, part), style in zip(t.groupby("target", sort=True), ("-", "--", ":", "-.")):
        peak, bw = _ceilings(part)
        roof = np.minimum(peak, x * bw / 1e12) if np.isfinite(bw) else np.full_like(x, peak)
        bw_text = f"{bw / 1e12:.2f} TB/s" if np.isfinite(bw) else "bandwidth unknown"
        ax.plot(x, roof, color="black", linewidth=1.2, linestyle=style, label=f"{target}: {peak:g} TFLOP/s, {bw_text}")
    for verdict, part in t.groupby("verdict", sort=False):
        colour = VERDICT_COLOURS.get(verdict, "#444444")
        based = part[np.isfinite(part["base_tflops"]) & (part["base_tflops"] > 0)]
        ax.scatter(based["arith_intensity"], based["base_tflops"], facecolors="none", edgecolors=colour, s=30)
        for row in based.itertuples(index=False):
            ax.annotate("", xy=(row.arith_intensity, row.tflops), xytext=(row.arith_intensity, row.base_tflops),
                        arrowprops={"arrowstyle": "->", "color": colour, "lw": 1.2})
        ax.scatter(part["arith_intensity"], part["tflops"], color=colour, s=30, label=verdict, zorder=3)
    for axis in (ax.xaxis, ax.yaxis):   # plain numbers: mathtext is off for the report's figures
        axis.set_major_formatter(LogFormatter())
        axis.set_minor_formatter(LogFormatter(minor_thresholds=(2, 0.5)))
    ax.set_xlabel("arithmetic intensity (FLOP per compulsory DRAM byte)")
    ax.set_ylabel("achieved TFLOP/s")
    ax.set_title(title)
    ax.grid(which="both", alpha=0.3)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return FigureBlock(title, png_base64(fig), caption + f" {len(t)} cells.")


FIGURES: tuple[Callable[[Comparison], FigureBlock | None], ...] = (
    figure_l2_heatmap, figure_speedup, figure_l2_vs_speedup, figure_sim_vs_measured, figure_roofline)


def make_figures(comparison: Comparison) -> list[FigureBlock]:
    """Every figure that applies (a figure returning None, such as the roofline without roofline
    readings, is left out); one that fails to draw becomes a block saying why."""
    blocks = []
    # parse_math off: a '$' in a shape or swizzle name is text, not mathtext.
    with rc_context({"text.parse_math": False, "font.size": 9}):
        for make in FIGURES:
            try:
                block = make(comparison)
                if block is not None:
                    blocks.append(block)
            except Exception as exc:  # a broken figure must not cost the whole report
                log.warning("report figure %s failed", make.__name__, exc_info=True)
                blocks.append(FigureBlock(make.__name__, None, f"Figure failed: {type(exc).__name__}: {exc}"))
    return blocks
