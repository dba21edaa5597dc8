"""The search section of a report: best found vs identity vs the best built-in, per group
(kernel, shape, target), and the objective over the trials.

Input: a pandas frame with one row per evaluated swizzle, the columns of
:class:`harness.storage.search_trials.TrialRecord` (the sweeper writes these rows;
:func:`trials_from_runs` builds them from an MLflow runs frame).  :func:`section` gives the
section's content for ``templates/macros.html.j2``; :func:`search_section` its HTML alone;
:func:`write_search_report` the sweeper's self-contained ``search.html`` with
``search_trials.csv`` and ``search_summary.csv``; :func:`search_sections` the sections of
the main report, one per objective of the search sweeps among its runs (a search's sweep run
is tagged with its objective, :data:`harness.storage.search_trials.SEARCH_OBJECTIVE_TAG`).
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib import rc_context
from matplotlib.figure import Figure

from harness.job.verdict import TIME
from harness.report.labels import shape_label
from harness.report.figures import FigureBlock, png_base64
from harness.report.render import render
from harness.report.verdicts import NOT_TIMED
from harness.report.views import ReportRuns
from harness.storage.search_trials import (BUILTIN, COLUMNS, CONFIRM, SEARCH_DIRECTION_TAG, SEARCH_OBJECTIVE_TAG, TRIAL,
                                    TrialRecord)
from harness.storage.field_names import Metric, Param, Tag, metric_column, param_column, tag_column
from harness.storage.run_fields import VERDICT_TAGS
from harness.storage.tracking import STATUS_REASON_TAG, SWEEP_TAG

#: Columns of the per-group table, and their headings.
SUMMARY_HEADS = {"group": "group", "identity": "identity", "best_builtin": "best built-in",
                 "best_builtin_value": "built-in value", "best_found": "best found", "best_found_value": "found value",
                 "found_minus_builtin": "found - built-in", "trials": "trials", "wall_s": "wall s",
                 "confirmed_speedup": "confirmed speedup", "confirmed_ci": "confirmed CI",
                 "confirmed_verdict": "confirmed verdict"}


def trial_frame(records: list[TrialRecord]) -> pd.DataFrame:
    """The sweeper's records as a trials frame."""
    return pd.DataFrame([asdict(r) for r in records], columns=COLUMNS)


def trials_from_runs(runs: pd.DataFrame, objective: str = Metric.L2_HIT_RATE) -> pd.DataFrame:
    """Trial rows from a frame of job runs (``mlflow.search_runs`` or
    :func:`harness.report.data.runs_to_frame`): built-ins by name, a later run of a swizzle
    already tried in its group a confirmation, every other swizzle a trial numbered by start
    time within its group."""
    from swizzles import SWIZZLES

    def col(name: str, default: object = "") -> pd.Series:
        return runs[name] if name in runs else pd.Series(default, index=runs.index)

    def number(name: str) -> pd.Series:
        return pd.to_numeric(col(name, math.nan), errors="coerce")

    start = col("start_time", pd.NaT) if "start_time" in runs else pd.to_datetime(col("start_ms", math.nan), unit="ms")
    frame = pd.DataFrame({
        "group": col(param_column(Param.KERNEL)) + "/" + shape_label(runs) + "/" + col(param_column(Param.TARGET)),
        "label": col(param_column(Param.SWIZZLE)), "family": col(param_column(Param.SWIZZLE_FAMILY)),
        "value": number(metric_column(objective)),
        "status": np.where(col("status") == "FINISHED", "COMPLETE", "FAIL"),
        "reason": col(tag_column(STATUS_REASON_TAG)), "run_id": col("run_id"),
        "spec_hash": col(tag_column(Tag.SPEC_HASH)), "speedup": number(metric_column(Metric.SPEEDUP)),
        "speedup_ci_lo": number(metric_column(Metric.SPEEDUP_CI_LO)),
        "speedup_ci_hi": number(metric_column(Metric.SPEEDUP_CI_HI)), "verdict": col(tag_column(VERDICT_TAGS[TIME])),
        "start": start})
    frame = frame.sort_values("start", kind="stable")
    frame["kind"] = np.where(frame["label"].isin(list(SWIZZLES)), BUILTIN, TRIAL)
    frame.loc[(frame["kind"] == TRIAL) & frame.duplicated(["group", "label"]), "kind"] = CONFIRM
    frame["number"] = frame.groupby(["group", "kind"]).cumcount()
    frame.loc[frame["kind"] != TRIAL, "number"] = -1
    frame["params"] = "{}"
    frame["wall_s"] = math.nan
    for name in ("family", "reason", "spec_hash", "verdict"):
        frame[name] = frame[name].fillna("")
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
                verdict = c["verdict"] if isinstance(c["verdict"], str) and c["verdict"] else NOT_TIMED
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


@dataclass(frozen=True)
class SearchSection:
    """What ``search_section`` in ``templates/macros.html.j2`` shows: the objective, counts,
    the per-group table as text and the trace figure."""

    objective: str
    direction: str
    groups: int
    trials: int
    failed: int
    failed_note: str                 # where the failed trials' reasons are
    heads: list[str]
    rows: list[list[str]]
    figure: FigureBlock


def _text(value: object, fmt: str) -> str:
    return "" if pd.isna(value) else format(value, fmt)


def section(trials: pd.DataFrame, objective: str, direction: str = "maximize",
            failed_note: str = ", with their reasons in search_trials.csv") -> tuple[SearchSection, Figure]:
    """The section's content and its figure."""
    summary = summary_table(trials, direction).reindex(columns=list(SUMMARY_HEADS))
    with rc_context({"text.parse_math": False, "font.size": 8}):
        fig = figure_objective(trials, objective, direction)
        png = png_base64(fig)
    for name in ("identity", "best_builtin_value", "best_found_value", "found_minus_builtin", "confirmed_speedup"):
        summary[name] = summary[name].map(lambda v: _text(v, ".3f"))
    summary["wall_s"] = summary["wall_s"].map(lambda v: _text(v, ".0f"))
    block = FigureBlock("objective vs trial", png, "Objective per trial (colour: family), best so far (black), "
                        "best built-in (red, dashed).")
    content = SearchSection(objective, direction, len(summary), int((trials["kind"] == TRIAL).sum()),
                            int((trials["status"] == "FAIL").sum()), failed_note, list(SUMMARY_HEADS.values()),
                            summary.fillna("").astype(str).to_numpy().tolist(), block)
    return content, fig


def search_section(trials: pd.DataFrame, objective: str, direction: str = "maximize") -> tuple[str, Figure]:
    """The section's HTML (a heading, the per-group table, the figure inlined) and its figure."""
    content, fig = section(trials, objective, direction)
    return render("search_section.html.j2", search=content), fig


def write_search_report(trials: pd.DataFrame, objective: str, out_dir: Path, direction: str = "maximize",
                        title: str = "swizzlebench search") -> Path:
    """Write ``search.html``, ``search_trials.csv`` and ``search_summary.csv`` to ``out_dir``;
    returns the HTML's path."""
    out_dir.mkdir(parents=True, exist_ok=True)
    content, _ = section(trials, objective, direction)
    trials.to_csv(out_dir / "search_trials.csv", index=False)
    summary_table(trials, direction).to_csv(out_dir / "search_summary.csv", index=False)
    path = out_dir / "search.html"
    path.write_text(render("search.html.j2", title=title, search=content), encoding="utf-8")
    return path


def search_sections(data: ReportRuns) -> list[SearchSection]:
    """One section per (objective, direction) of the search sweeps whose job runs the report
    covers; none when it covers no search."""
    sweeps, runs = data.sweeps, data.runs
    tag, sweep_tag = tag_column(SEARCH_OBJECTIVE_TAG), tag_column(SWEEP_TAG)
    if sweeps.empty or tag not in sweeps or sweep_tag not in runs:
        return []
    searches = sweeps[sweeps[tag].notna()]
    direction = searches.get(tag_column(SEARCH_DIRECTION_TAG), pd.Series("maximize", index=searches.index))
    out = []
    for (objective, how), group in searches.groupby([searches[tag], direction.fillna("maximize")], sort=False):
        jobs = runs[runs[sweep_tag].isin(set(group["run_id"]))]
        if len(jobs):
            content, _ = section(trials_from_runs(jobs, str(objective)), str(objective), str(how),
                                 failed_note="; their reasons are under Failed or unfinished runs")
            out.append(content)
    return out
