"""The search section of a report: best found vs identity vs the best built-in, per group,
and the objective over the trials.

Input: a pandas frame with one row per evaluated swizzle, the columns of
:class:`harness.search_records.TrialRecord` (the sweeper writes these rows, :func:`trials_from_runs` builds them
from an MLflow runs frame).  :func:`search_section` returns the section's HTML and its
seaborn figure; :func:`write_search_report` writes a self-contained ``search.html`` (figure
inlined as a base64 PNG), ``search_trials.csv`` and ``search_summary.csv``.
"""
from __future__ import annotations

import base64
import html
import io
import math
from dataclasses import asdict
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib import rc_context
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from harness.search_records import BUILTIN, COLUMNS, CONFIRM, TRIAL, TrialRecord

def trial_frame(records: list[TrialRecord]) -> pd.DataFrame:
    return pd.DataFrame([asdict(r) for r in records], columns=COLUMNS)


def trials_from_runs(runs: pd.DataFrame, objective: str = "l2_hit_rate") -> pd.DataFrame:
    """Trial rows from an ``mlflow.search_runs`` frame of job runs (e.g. a search's sweep):
    built-ins by name, every other swizzle a trial numbered by start time within its group."""
    from swizzles import SWIZZLES

    def col(name: str, default: object = "") -> pd.Series:
        return runs[name] if name in runs else pd.Series(default, index=runs.index)

    frame = pd.DataFrame({
        "group": (col("params.kernel") + "/" + col("params.shape_preset") + "-" + col("params.shape.name")
                  + "/" + col("params.target")),
        "label": col("params.swizzle"), "family": col("params.swizzle.family"),
        "value": pd.to_numeric(col(f"metrics.{objective}", math.nan), errors="coerce"),
        "status": np.where(col("status") == "FINISHED", "COMPLETE", "FAIL"),
        "reason": col("tags.status_reason"), "run_id": col("run_id"), "spec_hash": col("tags.spec_hash"),
        "speedup": pd.to_numeric(col("metrics.speedup", math.nan), errors="coerce"),
        "speedup_ci_lo": pd.to_numeric(col("metrics.speedup_ci_lo", math.nan), errors="coerce"),
        "speedup_ci_hi": pd.to_numeric(col("metrics.speedup_ci_hi", math.nan), errors="coerce"),
        "verdict": col("tags.verdict"), "start": col("start_time", pd.NaT)})
    frame["kind"] = np.where(frame["label"].isin(list(SWIZZLES)), BUILTIN, TRIAL)
    frame = frame.sort_values("start")
    frame["number"] = frame.groupby(["group", "kind"]).cumcount()
    frame.loc[frame["kind"] == BUILTIN, "number"] = -1
    frame["params"] = "{}"
    frame["wall_s"] = math.nan
    return frame[COLUMNS].reset_index(drop=True)


def summary_table(trials: pd.DataFrame, direction: str = "maximize") -> pd.DataFrame:
    """One row per group: identity, the best built-in, the best trial, trials evaluated,
    summed trial wall time (s), and the best trial's confirmation when there is one."""
    better = pd.Series.idxmax if direction == "maximize" else pd.Series.idxmin
    rows = []
    for group, g in trials.groupby("group", sort=False):
        builtins = g[(g["kind"] == BUILTIN) & g["value"].notna()]
        found = g[(g["kind"] == TRIAL) & (g["status"] == "COMPLETE") & g["value"].notna()]
        identity = builtins.loc[builtins["label"] == "identity", "value"]
        row = {"group": group, "identity": identity.iloc[0] if len(identity) else math.nan,
               "best_builtin": "", "best_builtin_value": math.nan, "best_found": "", "best_found_value": math.nan,
               "trials": int(((g["kind"] == TRIAL) & (g["status"] != "DUPLICATE")).sum()),
               "wall_s": float(g.loc[g["kind"] != CONFIRM, "wall_s"].sum(min_count=1)),
               "confirmed_speedup": math.nan, "confirmed_ci": "", "confirmed_verdict": ""}
        if len(builtins):
            row.update(zip(("best_builtin", "best_builtin_value"), best_of(builtins, direction)))
        if len(found):
            best = found.loc[better(found["value"])]
            row.update(best_found=best["label"], best_found_value=best["value"])
            confirm = g[(g["kind"] == CONFIRM) & (g["label"] == best["label"])]
            if len(confirm):
                c = confirm.iloc[-1]
                verdict = c["verdict"] if isinstance(c["verdict"], str) and c["verdict"] else "not timed"
                row.update(confirmed_speedup=c["speedup"], confirmed_verdict=verdict,
                           confirmed_ci=("" if pd.isna(c["speedup_ci_lo"]) else
                                         f"[{c['speedup_ci_lo']:.3f}, {c['speedup_ci_hi']:.3f}]"))
        sign = 1.0 if direction == "maximize" else -1.0
        row["found_minus_builtin"] = sign * (row["best_found_value"] - row["best_builtin_value"])
        rows.append(row)
    return pd.DataFrame(rows)


def figure_objective(trials: pd.DataFrame, objective: str, direction: str = "maximize") -> Figure:
    """Objective vs trial number per group (points; the best so far as a step line), with
    the best built-in of the group as a dashed line."""
    import seaborn as sns

    t = trials[(trials["kind"] == TRIAL) & trials["value"].notna()].copy()
    t = t.sort_values("number")
    groups = list(dict.fromkeys(trials["group"]))
    cols = min(4, max(1, len(groups)))
    rows = max(1, math.ceil(len(groups) / cols))
    fig = Figure(figsize=(3.4 * cols, 2.6 * rows + 0.4), layout="constrained")
    axes = fig.subplots(rows, cols, squeeze=False, sharey=False)
    for ax, group in zip(axes.flat, groups):
        g = t[t["group"] == group]
        if len(g):
            # A repeated candidate ran no job: in the best-so-far line, not as a point.
            sns.scatterplot(data=g[g["status"] != "DUPLICATE"], x="number", y="value", hue="family", ax=ax, s=16,
                            legend=ax is axes.flat[0])
            best = g["value"].cummax() if direction == "maximize" else g["value"].cummin()
            ax.step(g["number"], best, where="post", color="black", linewidth=1)
        b = trials[(trials["group"] == group) & (trials["kind"] == BUILTIN)].dropna(subset=["value"])
        if len(b):
            label, value = best_of(b, direction)
            ax.axhline(value, color="tab:red", linestyle="--", linewidth=1)
            ax.text(0.01, 0.02, f"best built-in: {label}", transform=ax.transAxes, fontsize=7, color="tab:red")
        ax.set_title(group, fontsize=8)
        ax.set_xlabel("trial")
        ax.set_ylabel(objective)
    for ax in list(axes.flat)[len(groups):]:
        ax.set_visible(False)
    if axes.flat[0].get_legend() is not None:
        axes.flat[0].legend(fontsize=6, title=None)
    return fig


def best_of(rows: pd.DataFrame, direction: str = "maximize") -> tuple[str, float]:
    """The best value of ``rows`` and the labels reaching it, tied ones joined by `` = ``."""
    value = rows["value"].max() if direction == "maximize" else rows["value"].min()
    tied = rows.loc[(rows["value"] - value).abs() <= 1e-9, "label"]
    return " = ".join(dict.fromkeys(tied)), float(value)


def _png_base64(fig: Figure) -> str:
    buf = io.BytesIO()
    FigureCanvasAgg(fig).print_png(buf)
    return base64.b64encode(buf.getvalue()).decode("ascii")


def search_section(trials: pd.DataFrame, objective: str, direction: str = "maximize") -> tuple[str, Figure]:
    """The section's HTML (a heading, the per-group table, the figure inlined) and its figure."""
    summary = summary_table(trials, direction)
    with rc_context({"text.parse_math": False, "font.size": 8}):
        fig = figure_objective(trials, objective, direction)
        png = _png_base64(fig)
    shown = summary.copy()
    for name in ("identity", "best_builtin_value", "best_found_value", "found_minus_builtin", "confirmed_speedup"):
        shown[name] = shown[name].map(lambda v: "" if pd.isna(v) else f"{v:.3f}")
    shown["wall_s"] = shown["wall_s"].map(lambda v: "" if pd.isna(v) else f"{v:.0f}")
    failed = int((trials["status"] == "FAIL").sum())
    parts = [
        "<section id='search'><h2>Search</h2>",
        f"<p>Objective <code>{html.escape(objective)}</code> ({html.escape(direction)}); {len(summary)} group(s), "
        f"{int((trials['kind'] == TRIAL).sum())} trial row(s) ({failed} failed, with their reasons in "
        "search_trials.csv). <i>found - built-in</i> &gt; 0 means the search beat every built-in.</p>",
        shown.to_html(index=False, escape=True, border=0, classes="search"),
        f"<figure><img alt='objective vs trial' src='data:image/png;base64,{png}'>"
        "<figcaption>Objective per trial (colour: family), best so far (black), best built-in (red, dashed)."
        "</figcaption></figure></section>",
    ]
    return "\n".join(parts), fig


def write_search_report(trials: pd.DataFrame, objective: str, out_dir: Path, direction: str = "maximize",
                        title: str = "swizzlebench search") -> Path:
    """Write ``search.html``, ``search_trials.csv`` and ``search_summary.csv`` to ``out_dir``;
    returns the HTML's path."""
    out_dir.mkdir(parents=True, exist_ok=True)
    section, _ = search_section(trials, objective, direction)
    trials.to_csv(out_dir / "search_trials.csv", index=False)
    summary_table(trials, direction).to_csv(out_dir / "search_summary.csv", index=False)
    page = (f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title><style>"
            "body{font-family:sans-serif;margin:2em} table.search{border-collapse:collapse;font-size:12px}"
            "table.search td,table.search th{padding:2px 8px;border-bottom:1px solid #ddd}"
            "img{max-width:100%}</style></head><body>"
            f"<h1>{html.escape(title)}</h1>{section}</body></html>\n")
    path = out_dir / "search.html"
    path.write_text(page)
    return path
