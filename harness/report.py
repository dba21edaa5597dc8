"""Comparison report of one sweep: every swizzle against the identity swizzle of its group.

    python -m harness.report --experiment swizzlebench [--sweep RUN_ID] [--out DIR]
                             [--tracking-uri sqlite:///mlflow.db]

Reads the sweep's job runs from MLflow (one ``search_runs`` query per 1,000 runs), and
writes into the output folder:

* ``index.html``: ONE self-contained page (figures are base64 PNGs, the CSS is inline,
  there is no JavaScript and nothing is fetched), every shown text HTML-escaped;
* ``table.csv``: one row per (group, swizzle) cell, numbers unformatted;
* ``failed.csv``: the runs that did not finish, with their reasons (header only if none).

A *group* is one kernel x shape x num_warps (plus any other launch knob that varies
in the sweep, e.g. num_stages or tiles); a *cell* is one swizzle in a group.  Rules:

* speedup = identity median time / swizzle median time (> 1: the swizzle is faster);
* its interval treats each run's [p20, p80] band of repetition times as a noise band
  and takes the extreme ratios, ``[identity p20 / swizzle p80, identity p80 /
  swizzle p20]``; the verdict is "faster" only when the whole interval is above 1,
  "slower" only when it is wholly below 1, otherwise "within noise" ("not timed" when
  either side has no time, e.g. CPU-only runs);
* a swizzle whose remap table equals identity's (``params.remap.hash``) gets the
  verdict "same order as identity": same kernel, same order, any difference is noise;
* L2: delta = swizzle hit rate - identity hit rate, in percentage points; noise band
  = max(2 * sqrt(std_swizzle^2 + std_identity^2), 0.5 points), where std is the
  standard deviation of the hit rate over profiled repeats; "higher" / "lower" only
  beyond the band.

When a sweep run id exists the report is also attached to that parent run as the
artifacts ``report/index.html``, ``report/table.csv`` and ``report/failed.csv``.
"""
from __future__ import annotations

import argparse
import base64
import html
import io
import logging
import re
import sys
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Iterable

import numpy as np
import pandas as pd
from matplotlib import rc_context
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from mlflow.entities import Run, ViewType
from mlflow.tracking import MlflowClient

from harness.tracking import STATUS_REASON_TAG, SWEEP_TAG

log = logging.getLogger(__name__)

KIND_TAG = "swizzlebench.kind"
IDENTITY = "identity"

# Verdicts on time (speedup interval vs 1).
FASTER, SLOWER, NOISE = "faster", "slower", "within noise"
NOT_TIMED, NO_BASELINE, BASELINE = "not timed", "no identity baseline", "baseline"
#: The swizzle's remap table equals identity's (e.g. ``xcd`` with num_xcds=1): same kernel,
#: same order, so any measured difference is run-to-run noise, never a result.
SAME_ORDER = "same order as identity"
# Verdicts on the L2 hit rate (delta vs its noise band).
L2_HIGHER, L2_LOWER, NOT_PROFILED = "higher", "lower", "not profiled"

#: The L2 noise band is this many combined standard deviations of the hit rate ...
L2_BAND_SIGMAS = 2.0
#: ... and never narrower than this, in percentage points (a single profiled repeat or a
#: deterministic simulator reports std 0, which is no evidence of zero noise).
L2_BAND_FLOOR_POINTS = 0.5

#: Figures list at most this many rows (groups or cells); the rest is in the table.
MAX_FIGURE_ROWS = 80
#: Resolution of the embedded PNGs, in dots per inch.
FIGURE_DPI = 100

#: Launch knobs that join kernel, shape and num_warps in the group key when they vary.
OPTIONAL_GROUP_KEYS = ("num_stages", "tiles", "num_xcds", "dtype", "target", "seed")
GROUP_KEYS = ("kernel", "shape", "num_warps")

#: Metrics copied from the runs into the table (time in ms, rates in %, bytes).
RUN_METRICS = ("time_ms_median", "time_ms_p20", "time_ms_p80", "tflops", "vendor_time_ms",
               "ratio_to_vendor", "max_rel_err", "l2_hit_rate", "l2_hit_rate_std", "l2_hits",
               "l2_misses", "profiled_time_ms", "dram_read_bytes", "sim_l2_hit_rate")

_RUN_ID_RE = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


# --------------------------------------------------------------------------------------
# Loading
# --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class SweepRuns:
    """What the report is about: the job runs (one row each) and the sweep parent."""

    experiment: str
    experiment_id: str
    sweep_run: Run | None   # None when the experiment has no sweep run ("all job runs")
    runs: pd.DataFrame      # columns run_id, run_name, status, start_ms, end_ms,
                            # params.<k>, tags.<k>, metrics.<k>

    @property
    def sweep_run_id(self) -> str | None:
        return self.sweep_run.info.run_id if self.sweep_run else None


def _quote_filter_value(value: str) -> str:
    """A run id for an MLflow filter string; rejects anything but id characters so a
    value can never change the filter's meaning."""
    if not _RUN_ID_RE.match(value):
        raise ValueError(f"not a valid MLflow run id: {value!r}")
    return f"'{value}'"


def search_all_runs(client: MlflowClient, experiment_id: str, filter_string: str) -> list[Run]:
    """Every active run of the experiment matching ``filter_string``, 1,000 per query."""
    runs: list[Run] = []
    token: str | None = None
    while True:
        page = client.search_runs([experiment_id], filter_string=filter_string,
                                  run_view_type=ViewType.ACTIVE_ONLY, max_results=1000,
                                  page_token=token)
        runs.extend(page)
        token = page.token
        if not token:
            return runs


def runs_to_frame(runs: Iterable[Run]) -> pd.DataFrame:
    """One row per run: run_id, run_name, status, start_ms / end_ms (epoch ms), then
    ``params.<key>``, ``tags.<key>``, ``metrics.<key>`` (latest value)."""
    rows = []
    for run in runs:
        row: dict[str, object] = {
            "run_id": run.info.run_id, "run_name": run.info.run_name or "",
            "status": run.info.status, "start_ms": run.info.start_time, "end_ms": run.info.end_time,
        }
        row.update({f"params.{k}": v for k, v in run.data.params.items()})
        row.update({f"tags.{k}": v for k, v in run.data.tags.items()})
        row.update({f"metrics.{k}": v for k, v in run.data.metrics.items()})
        rows.append(row)
    frame = pd.DataFrame(rows, columns=None if rows else ["run_id", "run_name", "status", "start_ms", "end_ms"])
    for col in ("start_ms", "end_ms"):
        frame[col] = pd.to_numeric(frame[col], errors="coerce")
    return frame


def load_sweep(client: MlflowClient, experiment: str, sweep_run_id: str | None = None) -> SweepRuns:
    """The job runs of ``sweep_run_id``; without it, of the latest sweep run of the
    experiment, or every job run when the experiment has no sweep run."""
    exp = client.get_experiment_by_name(experiment)
    if exp is None:
        raise LookupError(f"no MLflow experiment named {experiment!r}")
    sweep_run: Run | None = None
    if sweep_run_id is None:
        latest = client.search_runs([exp.experiment_id], filter_string=f"tags.`{KIND_TAG}` = 'sweep'",
                                    run_view_type=ViewType.ACTIVE_ONLY, max_results=1,
                                    order_by=["attributes.start_time DESC"])
        sweep_run = latest[0] if latest else None
    else:
        _quote_filter_value(sweep_run_id)
        sweep_run = client.get_run(sweep_run_id)
        if sweep_run.info.experiment_id != exp.experiment_id:
            raise LookupError(f"run {sweep_run_id} belongs to experiment {sweep_run.info.experiment_id}, "
                              f"not to {experiment!r} ({exp.experiment_id})")
    if sweep_run is not None:
        flt = f"tags.`{SWEEP_TAG}` = {_quote_filter_value(sweep_run.info.run_id)}"
    else:
        flt = f"tags.`{KIND_TAG}` = 'job'"
    frame = runs_to_frame(search_all_runs(client, exp.experiment_id, flt))
    return SweepRuns(experiment, exp.experiment_id, sweep_run, frame)


# --------------------------------------------------------------------------------------
# The comparison table
# --------------------------------------------------------------------------------------
def _col(frame: pd.DataFrame, name: str, default: object = np.nan) -> pd.Series:
    """Column ``name`` of ``frame``, or a column of ``default`` when it is absent."""
    if name in frame.columns:
        return frame[name]
    return pd.Series(default, index=frame.index, dtype=object if isinstance(default, str) else float)


def _shape_label(frame: pd.DataFrame) -> pd.Series:
    """``shape.name``, prefixed by the preset when it differs (as ``JobSpec.shape_label``)."""
    name = _col(frame, "params.shape.name", "").fillna("").astype(str)
    preset = _col(frame, "params.shape_preset", "").fillna("").astype(str)
    prefixed = preset + "-" + name
    return name.where((preset == name) | (preset == ""), prefixed)


def _tiles_label(frame: pd.DataFrame) -> pd.Series:
    """``BLOCK_M=128 BLOCK_N=128 ...`` from the ``tile.*`` params a run has (kernel
    families have different tile names; absent ones are left out, not shown as ``?``)."""
    cols = sorted(c for c in frame.columns if c.startswith("params.tile."))
    if not cols:
        return pd.Series("", index=frame.index, dtype=object)
    tiles = frame[cols].rename(columns=lambda c: c.removeprefix("params.tile."))
    return tiles.apply(lambda row: " ".join(f"{k}={v}" for k, v in row.items() if pd.notna(v)), axis=1)


def speedup_interval(id_p20: pd.Series, id_p80: pd.Series, sw_p20: pd.Series,
                     sw_p80: pd.Series) -> tuple[pd.Series, pd.Series]:
    """Conservative speedup interval from the two [p20, p80] noise bands (times in ms):
    ``[id_p20 / sw_p80, id_p80 / sw_p20]`` (dimensionless)."""
    return id_p20 / sw_p80, id_p80 / sw_p20


def time_verdict(speedup: float, lo: float, hi: float) -> str:
    """faster / slower only when the whole interval is beyond 1, else within noise (also
    when the interval is unknown because p20/p80 are missing); not timed without a speedup."""
    if not np.isfinite(speedup):
        return NOT_TIMED
    if np.isfinite(lo) and lo > 1.0:
        return FASTER
    if np.isfinite(hi) and hi < 1.0:
        return SLOWER
    return NOISE


def l2_band(std_swizzle: pd.Series, std_identity: pd.Series) -> pd.Series:
    """Noise band of an L2 hit-rate delta, in percentage points."""
    combined = np.sqrt(std_swizzle.fillna(0.0) ** 2 + std_identity.fillna(0.0) ** 2)
    return np.maximum(L2_BAND_SIGMAS * combined, L2_BAND_FLOOR_POINTS)


def l2_verdict(delta: float, band: float) -> str:
    """higher / lower only when the delta (points) is beyond its band (points)."""
    if not np.isfinite(delta):
        return NOT_PROFILED
    if delta > band:
        return L2_HIGHER
    if delta < -band:
        return L2_LOWER
    return NOISE


@dataclass(frozen=True)
class Comparison:
    """The per-cell table and how it was keyed."""

    table: pd.DataFrame            # one row per (group, swizzle variant); see TABLE_COLUMNS
    group_cols: list[str]          # columns that identify a group
    variant_cols: list[str]        # columns that identify a swizzle variant inside a group
    superseded: int                # finished runs replaced by a later run of the same cell
    notes: list[str] = field(default_factory=list)

    def group_label(self, frame: pd.DataFrame) -> pd.Series:
        """``igemm · resnet-l03 · w8`` (plus any varying launch knob)."""
        return _join_labels(frame, self.group_cols)

    def variant_label(self, frame: pd.DataFrame) -> pd.Series:
        return _join_labels(frame, self.variant_cols)


def _join_labels(frame: pd.DataFrame, cols: list[str]) -> pd.Series:
    prefixes = {"num_warps": "w", "num_stages": "s", "group_size": "g", "num_xcds": "xcd", "seed": "seed "}
    out = pd.Series("", index=frame.index, dtype=object)
    for i, col in enumerate(cols):
        part = prefixes.get(col, "") + frame[col].astype(str)
        out = part if i == 0 else out + " · " + part
    return out


def build_comparison(runs: pd.DataFrame) -> Comparison:
    """Join every finished job run to the identity run of its group and judge it."""
    finished = runs[runs["status"] == "FINISHED"] if "status" in runs else runs.iloc[0:0]
    cells = pd.DataFrame(index=finished.index)
    cells["run_id"] = finished["run_id"]
    cells["run_name"] = finished["run_name"]
    cells["start_ms"] = finished["start_ms"]
    cells["kernel"] = _col(finished, "params.kernel", "?").fillna("?").astype(str)
    cells["shape"] = _shape_label(finished)
    cells["num_warps"] = _col(finished, "params.num_warps", "?").fillna("?").astype(str)
    cells["num_stages"] = _col(finished, "params.num_stages", "?").fillna("?").astype(str)
    cells["tiles"] = _tiles_label(finished)
    cells["num_xcds"] = _col(finished, "params.num_xcds", "?").fillna("?").astype(str)
    cells["dtype"] = _col(finished, "params.shape.dtype", "?").fillna("?").astype(str)
    cells["target"] = _col(finished, "params.target", "?").fillna("?").astype(str)
    cells["seed"] = _col(finished, "params.seed", "?").fillna("?").astype(str)
    cells["swizzle"] = _col(finished, "params.swizzle", "?").fillna("?").astype(str)
    cells["group_size"] = _col(finished, "params.group_size", "?").fillna("?").astype(str)
    cells["remap_hash"] = _col(finished, "params.remap.hash")
    for name in RUN_METRICS:
        cells[name] = pd.to_numeric(_col(finished, f"metrics.{name}"), errors="coerce")

    # A launch knob joins the group key only if it varies *within* a kernel family (tiles
    # always differ between families, which the kernel column already separates).
    group_cols = list(GROUP_KEYS) + [k for k in OPTIONAL_GROUP_KEYS
                                     if len(cells) and cells.groupby("kernel")[k].nunique().max() > 1]
    variant_cols = ["swizzle"] + (["group_size"] if cells["group_size"].nunique() > 1 else [])
    notes: list[str] = []

    # One row per cell: a later run of the same cell supersedes an earlier one.
    key = group_cols + ["swizzle", "group_size"]
    cells = cells.sort_values("start_ms", kind="stable")
    before = len(cells)
    cells = cells.drop_duplicates(subset=key, keep="last")
    superseded = before - len(cells)
    if superseded:
        notes.append(f"{superseded} finished run(s) were superseded by a later run of the same "
                     "configuration; the table shows the latest.")

    # Identity baseline: same group, same group_size if there is one, else any identity
    # run of the group (identity ignores group_size).
    base_cols = ["run_id", "time_ms_median", "time_ms_p20", "time_ms_p80", "l2_hit_rate", "l2_hit_rate_std",
                 "remap_hash"]
    ident = cells[cells["swizzle"] == IDENTITY]
    exact = ident[group_cols + ["group_size"] + base_cols].rename(columns={c: f"id_{c}" for c in base_cols})
    anyg = (ident.drop_duplicates(subset=group_cols, keep="last")[group_cols + base_cols]
            .rename(columns={c: f"id_{c}" for c in base_cols}))
    table = cells.merge(exact, on=group_cols + ["group_size"], how="left")   # keeps row order
    fallback = cells[group_cols].merge(anyg, on=group_cols, how="left")
    has_exact = table["id_run_id"].notna()
    for c in base_cols:
        table[f"id_{c}"] = table[f"id_{c}"].where(has_exact, fallback[f"id_{c}"])

    table["speedup"] = table["id_time_ms_median"] / table["time_ms_median"]
    table["speedup_lo"], table["speedup_hi"] = speedup_interval(
        table["id_time_ms_p20"], table["id_time_ms_p80"], table["time_ms_p20"], table["time_ms_p80"])
    table["l2_delta_pts"] = table["l2_hit_rate"] - table["id_l2_hit_rate"]
    table["l2_band_pts"] = l2_band(table["l2_hit_rate_std"], table["id_l2_hit_rate_std"])
    is_identity = table["swizzle"] == IDENTITY
    no_base = table["id_run_id"].isna()

    verdicts = [time_verdict(s, lo, hi) for s, lo, hi in
                zip(table["speedup"], table["speedup_lo"], table["speedup_hi"])]
    table["verdict"] = verdicts
    table.loc[no_base, "verdict"] = NO_BASELINE
    table.loc[table["time_ms_median"].isna(), "verdict"] = NOT_TIMED
    table.loc[is_identity, "verdict"] = BASELINE
    table["l2_verdict"] = [l2_verdict(d, b) for d, b in zip(table["l2_delta_pts"], table["l2_band_pts"])]
    table.loc[no_base & table["l2_hit_rate"].notna(), "l2_verdict"] = NO_BASELINE
    table.loc[is_identity, "l2_verdict"] = BASELINE
    same = (~is_identity) & table["remap_hash"].notna() & (table["remap_hash"] == table["id_remap_hash"])
    table.loc[same, ["verdict", "l2_verdict"]] = SAME_ORDER
    timed_same = table[same & table["speedup"].notna()]
    if len(timed_same):
        notes.append(
            f"{len(timed_same)} cell(s) launch exactly the tile order of identity ({SAME_ORDER}); their "
            f"measured 'speedups' range {timed_same['speedup'].min():.3f} to {timed_same['speedup'].max():.3f}: "
            "that spread is run-to-run noise between separate runs, which the [p20, p80] intervals "
            "(noise within one run) do not contain.  Read verdicts with it in mind.")
    if no_base.any() and not is_identity.any():
        notes.append("No identity run in this sweep: no speedup or L2 delta can be computed.")
    elif no_base.any():
        notes.append(f"{int(no_base.sum())} cell(s) have no identity run in their group.")

    table["best"] = False
    faster = table[table["verdict"] == FASTER]
    if not faster.empty:
        best_idx = faster.groupby(group_cols, sort=False)["speedup"].idxmax()
        table.loc[best_idx.to_numpy(), "best"] = True

    table = _sort_cells(table, group_cols, variant_cols)
    return Comparison(table=table, group_cols=group_cols, variant_cols=variant_cols,
                      superseded=superseded, notes=notes)


def _sort_cells(table: pd.DataFrame, group_cols: list[str], variant_cols: list[str]) -> pd.DataFrame:
    """Groups in natural order (numbers as numbers), identity first inside each group."""
    order = table.assign(
        _warps=pd.to_numeric(table["num_warps"], errors="coerce"),
        _gsize=pd.to_numeric(table["group_size"], errors="coerce"),
        _not_identity=table["swizzle"] != IDENTITY)
    by = [("_warps" if c == "num_warps" else c) for c in group_cols] + ["_not_identity", "swizzle", "_gsize"]
    return order.sort_values(by, kind="stable").drop(columns=["_warps", "_gsize", "_not_identity"]).reset_index(drop=True)


#: Columns of table.csv, in order (times in ms, rates and deltas in % / points).
TABLE_COLUMNS = [
    "kernel", "shape", "num_warps", "num_stages", "tiles", "num_xcds", "dtype", "target", "seed",
    "swizzle", "group_size", "run_id", "run_name",
    "time_ms_median", "time_ms_p20", "time_ms_p80",
    "id_run_id", "id_time_ms_median", "id_time_ms_p20", "id_time_ms_p80",
    "speedup", "speedup_lo", "speedup_hi", "verdict",
    "l2_hit_rate", "l2_hit_rate_std", "id_l2_hit_rate", "id_l2_hit_rate_std",
    "l2_delta_pts", "l2_band_pts", "l2_verdict",
    "sim_l2_hit_rate", "l2_hits", "l2_misses", "dram_read_bytes", "profiled_time_ms",
    "ratio_to_vendor", "vendor_time_ms", "tflops", "max_rel_err", "best",
]


def failed_runs(runs: pd.DataFrame) -> pd.DataFrame:
    """Every job run that did not finish: FAILED with its reason, or never terminated."""
    if runs.empty:
        return pd.DataFrame(columns=["run_id", "run_name", "status", "gate", "kernel", "swizzle", "shape", "reason"])
    bad = runs[runs["status"] != "FINISHED"]
    reason = _col(bad, f"tags.{STATUS_REASON_TAG}", "").fillna("").astype(str)
    unfinished = (bad["status"] != "FAILED") & (reason == "")
    reason = reason.where(~unfinished, "run never finished (status " + bad["status"].astype(str) +
                          "): the job crashed, was killed or is still running")
    reason = reason.where(reason != "", "FAILED without a status_reason tag")
    out = pd.DataFrame({
        "run_id": bad["run_id"], "run_name": bad["run_name"], "status": bad["status"],
        "gate": _col(bad, "tags.failed_gate", "").fillna("").astype(str),
        "kernel": _col(bad, "params.kernel", "").fillna("").astype(str),
        "swizzle": _col(bad, "params.swizzle", "").fillna("").astype(str),
        "shape": _shape_label(bad), "reason": reason,
    })
    return out.sort_values(["run_name", "run_id"], kind="stable").reset_index(drop=True)


# --------------------------------------------------------------------------------------
# Header facts
# --------------------------------------------------------------------------------------
def _distinct(runs: pd.DataFrame, tag: str, absent: str = "not recorded") -> str:
    col = f"tags.{tag}"
    if col not in runs.columns:
        return absent
    values = sorted({str(v) for v in runs[col].dropna()})
    if not values:
        return absent
    return values[0] if len(values) == 1 else "MIXED: " + "; ".join(values)


def _utc(ms: float) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def _duration(seconds: float) -> str:
    seconds = int(round(seconds))
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h} h {m:02d} min {s:02d} s" if h else f"{m} min {s:02d} s"


def header_facts(data: SweepRuns, comparison: Comparison, failed: pd.DataFrame) -> list[tuple[str, str]]:
    """(label, value) pairs describing where and when the sweep ran."""
    runs = data.runs
    facts = [("Experiment", data.experiment)]
    if data.sweep_run is not None:
        sweep = data.sweep_run
        facts.append(("Sweep run", f"{sweep.info.run_id} ({sweep.info.run_name or 'unnamed'}, "
                                   f"status {sweep.info.status})"))
        overrides = sweep.data.params.get("sweep.overrides")
        if overrides is not None:
            facts.append(("Sweep overrides", overrides or "(none)"))
    else:
        facts.append(("Sweep run", "none in this experiment: the report covers every job run"))
    facts += [
        ("Device", _distinct(runs, "device")),
        ("Target", _distinct(runs, "target")),
        ("Mode", _distinct(runs, "mode")),
        ("Timing", _distinct(runs, "timing")),
        ("Profiler", _distinct(runs, "profiler", "none (no L2 profiler tag)")
         + (f" {_distinct(runs, 'profiler_version')}" if "tags.profiler_version" in runs else "")),
        ("Cache control", _distinct(runs, "cache_control")),
        ("torch / triton", f"{_distinct(runs, 'torch_version')} / {_distinct(runs, 'triton_version')}"),
        ("Git commit", _distinct(runs, "git_commit")),
    ]
    n = len(runs)
    n_finished = int((runs["status"] == "FINISHED").sum()) if n else 0
    n_failed = int((runs["status"] == "FAILED").sum()) if n else 0
    facts.append(("Sweep size", f"{n} job runs: {n_finished} finished, {n_failed} failed, "
                                f"{n - n_finished - n_failed} unfinished; {len(comparison.table)} cells in "
                                f"{comparison.table.groupby(comparison.group_cols).ngroups if len(comparison.table) else 0} groups"))
    if n and runs["start_ms"].notna().any():
        start = float(runs["start_ms"].min())
        end = runs["end_ms"].max()
        if pd.notna(end):
            open_runs = int(runs["end_ms"].isna().sum())
            note = f" ({open_runs} run(s) without an end time)" if open_runs else ""
            facts.append(("Time taken", f"{_duration((float(end) - start) / 1000)}: {_utc(start)} "
                                        f"to {_utc(float(end))}{note}"))
        else:
            facts.append(("Time taken", f"started {_utc(start)}; no run has ended"))
    return facts


# --------------------------------------------------------------------------------------
# Figures
# --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class FigureBlock:
    """One figure of the report: a PNG (base64), or the sentence saying why it is absent."""

    title: str
    png_base64: str | None
    caption: str


VERDICT_COLOURS = {FASTER: "#1a9850", SLOWER: "#d73027", NOISE: "#8c8c8c"}


def _render(fig: Figure) -> str:
    """PNG bytes of ``fig`` (Agg canvas, no pyplot state), base64-encoded."""
    FigureCanvasAgg(fig)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=FIGURE_DPI, bbox_inches="tight")
    return base64.b64encode(buf.getvalue()).decode("ascii")


def _non_identity(comparison: Comparison) -> pd.DataFrame:
    t = comparison.table
    t = t[t["swizzle"] != IDENTITY].copy()
    t["group_label"] = comparison.group_label(t)
    t["variant_label"] = comparison.variant_label(t)
    return t


def figure_l2_heatmap(comparison: Comparison) -> FigureBlock:
    """Heatmap of the L2 hit-rate delta vs identity (points): groups x swizzles."""
    import seaborn as sns

    title = "L2 hit-rate delta vs identity (percentage points)"
    t = _non_identity(comparison).dropna(subset=["l2_delta_pts"])
    if t.empty:
        return FigureBlock(title, None, "Skipped: no swizzle has both its own and its identity's L2 hit rate "
                                        "(the sweep ran without an L2 profiler, or without identity).")
    grid = t.pivot_table(index="group_label", columns="variant_label", values="l2_delta_pts",
                         aggfunc="mean", sort=False)
    caption = "Each cell: swizzle hit rate minus identity hit rate of the same group; red = more L2 hits."
    if len(grid) > MAX_FIGURE_ROWS:
        keep = grid.abs().max(axis=1).nlargest(MAX_FIGURE_ROWS).index
        grid = grid.loc[[i for i in grid.index if i in set(keep)]]
        caption += f" Showing the {MAX_FIGURE_ROWS} groups with the largest |delta| of {t['group_label'].nunique()}."
    limit = float(np.nanmax(np.abs(grid.to_numpy()))) or 1.0
    fig = Figure(figsize=(max(5.0, 1.1 * grid.shape[1] + 3.5), max(2.5, 0.32 * grid.shape[0] + 1.5)))
    ax = fig.add_subplot()
    sns.heatmap(grid, ax=ax, cmap="RdBu_r", center=0.0, vmin=-limit, vmax=limit,
                annot=grid.shape[0] * grid.shape[1] <= 400, fmt="+.1f",
                cbar_kws={"label": "delta hit rate (points)"}, linewidths=0.5, linecolor="white")
    ax.set_xlabel("swizzle")
    ax.set_ylabel("group")
    ax.set_title(title)
    return FigureBlock(title, _render(fig), caption)


def figure_speedup(comparison: Comparison) -> FigureBlock:
    """Speedup vs identity per cell with its noise-band interval as error bars."""
    title = "Speedup vs identity (identity time / swizzle time)"
    t = _non_identity(comparison).dropna(subset=["speedup"])
    if t.empty:
        return FigureBlock(title, None, "Skipped: no timed swizzle with a timed identity baseline "
                                        "(CPU-only runs are verified but not timed).")
    caption = ("Bars: the conservative interval [identity p20 / swizzle p80, identity p80 / swizzle p20]; "
               "green = faster, red = slower, grey = within noise.")
    if len(t) > MAX_FIGURE_ROWS:
        keep = np.log(t["speedup"]).abs().nlargest(MAX_FIGURE_ROWS).index
        caption += f" Showing the {MAX_FIGURE_ROWS} cells with the largest effect of {len(t)}."
        t = t.loc[sorted(keep)]
    labels = (t["group_label"] + " · " + t["variant_label"]).tolist()
    y = np.arange(len(t))[::-1]
    fig = Figure(figsize=(9.0, max(2.5, 0.26 * len(t) + 1.2)))
    ax = fig.add_subplot()
    colours = [VERDICT_COLOURS.get(v, "#444444") for v in t["verdict"]]
    lo = t["speedup_lo"].fillna(t["speedup"]).to_numpy()
    hi = t["speedup_hi"].fillna(t["speedup"]).to_numpy()
    ax.hlines(y, lo, hi, colors=colours, linewidth=2)
    ax.scatter(np.concatenate([lo, hi]), np.concatenate([y, y]), c=colours + colours, marker="|", s=60)
    ax.scatter(t["speedup"], y, c=colours, s=22, zorder=3)
    ax.axvline(1.0, color="black", linewidth=1, linestyle="--")
    ax.set_yticks(y, labels, fontsize=8)
    ax.set_xlabel("speedup (> 1: faster than identity)")
    ax.set_title(title)
    ax.grid(axis="x", alpha=0.3)
    return FigureBlock(title, _render(fig), caption)


def _rank_correlation(x: pd.Series, y: pd.Series) -> float:
    """Spearman's rank correlation (Pearson on ranks), NaN for < 3 points."""
    if len(x) < 3:
        return float("nan")
    return float(x.rank().corr(y.rank()))


def figure_l2_vs_speedup(comparison: Comparison) -> FigureBlock:
    """Scatter: L2 hit-rate delta (points) vs speedup: does L2 predict speed?"""
    import seaborn as sns

    title = "Does L2 predict speed? Hit-rate delta vs speedup"
    t = _non_identity(comparison).dropna(subset=["speedup", "l2_delta_pts"])
    if t.empty:
        return FigureBlock(title, None, "Skipped: no cell has both a speedup and an L2 hit-rate delta "
                                        "(needs timed GPU runs profiled for L2, and identity runs).")
    rho = _rank_correlation(t["l2_delta_pts"], t["speedup"])
    points = pd.DataFrame({"l2_delta_pts": t["l2_delta_pts"], "speedup": t["speedup"],
                           "swizzle": t["variant_label"], "verdict": t["verdict"]})
    fig = Figure(figsize=(7.5, 5.0))
    ax = fig.add_subplot()
    sns.scatterplot(data=points, x="l2_delta_pts", y="speedup", hue="swizzle", style="verdict",
                    style_order=[v for v in (FASTER, NOISE, SLOWER) if v in set(points["verdict"])], ax=ax, s=40)
    ax.axhline(1.0, color="black", linewidth=1, linestyle="--")
    ax.axvline(0.0, color="black", linewidth=1, linestyle=":")
    ax.set_xlabel("L2 hit-rate delta vs identity (points)")
    ax.set_ylabel("speedup vs identity")
    ax.set_title(title)
    if ax.get_legend() is not None:
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    rho_text = "n/a (fewer than 3 cells)" if not np.isfinite(rho) else f"{rho:+.2f}"
    caption = f"{len(t)} cells; Spearman rank correlation between delta and speedup: {rho_text}."
    return FigureBlock(title, _render(fig), caption)


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
    return FigureBlock(title, _render(fig), caption)


FIGURES: tuple[Callable[[Comparison], FigureBlock], ...] = (
    figure_l2_heatmap, figure_speedup, figure_l2_vs_speedup, figure_sim_vs_measured)


def make_figures(comparison: Comparison) -> list[FigureBlock]:
    """Every figure; one that fails to draw becomes a block saying why."""
    blocks = []
    # parse_math off: a '$' in a shape or swizzle name is text, not mathtext.
    with rc_context({"text.parse_math": False, "font.size": 9}):
        for make in FIGURES:
            try:
                blocks.append(make(comparison))
            except Exception as exc:  # a broken figure must not cost the whole report
                log.warning("report figure %s failed", make.__name__, exc_info=True)
                blocks.append(FigureBlock(make.__name__, None, f"Figure failed: {type(exc).__name__}: {exc}"))
    return blocks


# --------------------------------------------------------------------------------------
# HTML
# --------------------------------------------------------------------------------------
def esc(value: object) -> str:
    """HTML-escape any value shown on the page (quotes included)."""
    return html.escape(str(value), quote=True)


def _num(value: float, fmt: str) -> str:
    return "–" if value is None or not np.isfinite(value) else format(value, fmt)


CSS = """
body { font-family: "DejaVu Sans", Arial, sans-serif; margin: 24px; color: #222; background: #fff; }
h1 { font-size: 22px; } h2 { font-size: 18px; margin-top: 28px; border-bottom: 1px solid #ccc; }
table { border-collapse: collapse; font-size: 12px; margin: 8px 0; }
th, td { border: 1px solid #ddd; padding: 3px 6px; text-align: left; vertical-align: top; }
th { background: #f2f2f2; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
table.facts th { width: 160px; }
.v-faster { background: #d9f0d3; } .v-slower { background: #f8d3cf; }
.v-noise { background: #eeeeee; } .v-baseline { color: #666; }
tr.best td { font-weight: bold; } tr.best td.sw::after { content: " \\2605"; color: #b8860b; }
tr.group-start td { border-top: 2px solid #999; }
.note { color: #555; font-size: 13px; } .skip { color: #8a5a00; font-style: italic; }
figure { margin: 12px 0 24px 0; } figcaption { font-size: 12px; color: #444; max-width: 1000px; }
img { max-width: 100%; height: auto; border: 1px solid #eee; }
.reason { font-family: "DejaVu Sans Mono", monospace; white-space: pre-wrap; word-break: break-word; }
"""

METHODS = [
    "Speedup = identity median time / swizzle median time, within the same group "
    "(kernel, shape, num_warps and any other launch knob that varies); > 1 means the swizzle is faster.",
    "Interval: each run's [p20, p80] of the timed repetitions (triton.testing.do_bench, L2 flushed "
    "between repetitions) is treated as a noise band; the interval is the extreme ratio of the two bands, "
    "[identity p20 / swizzle p80, identity p80 / swizzle p20]. This is wider than a confidence interval "
    "of the median, i.e. conservative.",
    "Verdict: faster only if the whole interval is above 1, slower only if it is wholly below 1, "
    "otherwise within noise; not timed when the swizzle or its identity has no time (CPU-only runs); "
    "same order as identity when the swizzle's remap table equals identity's (any difference is noise).",
    f"L2: delta = swizzle hit rate - identity hit rate (percentage points); noise band = "
    f"max({L2_BAND_SIGMAS:g} x sqrt(std_swizzle^2 + std_identity^2), {L2_BAND_FLOOR_POINTS:g} points), "
    "std being the spread of the hit rate over profiled repeats; higher / lower only beyond the band.",
    "Ratio to vendor = swizzle median time / vendor conv2d (cuDNN / MIOpen) median time; < 1 beats the vendor.",
    "Best swizzle per group: the highest speedup among the verdict-faster cells (marked with a star).",
]


def _facts_html(facts: list[tuple[str, str]]) -> str:
    rows = "".join(f"<tr><th>{esc(k)}</th><td>{esc(v)}</td></tr>" for k, v in facts)
    return f'<table class="facts">{rows}</table>'


def _verdict_class(verdict: str) -> str:
    return {FASTER: "v-faster", SLOWER: "v-slower", NOISE: "v-noise", L2_HIGHER: "v-faster",
            L2_LOWER: "v-slower", BASELINE: "v-baseline"}.get(verdict, "")


EXTRA_GROUP_HEADS = {"num_stages": "Stages", "tiles": "Tiles", "num_xcds": "XCDs", "dtype": "Dtype",
                     "target": "Target", "seed": "Seed"}


def _cell_table_html(comparison: Comparison) -> str:
    t = comparison.table
    if t.empty:
        return '<p class="skip">No finished job run: nothing to compare.</p>'
    extra_group = [c for c in comparison.group_cols if c not in GROUP_KEYS]
    show_gsize = "group_size" in comparison.variant_cols
    show_sim = t["sim_l2_hit_rate"].notna().any()
    heads = ["Kernel", "Shape", "Warps", *[EXTRA_GROUP_HEADS.get(c, c) for c in extra_group], "Swizzle", *(["Group size"] if show_gsize else []),
             "Time ms: median [p20, p80]", "Speedup vs identity [interval]", "Verdict",
             "L2 hit % ± std", "ΔL2 vs identity (points) ± band", "L2 verdict",
             *(["Simulated L2 %"] if show_sim else []), "Time / vendor", "TFLOP/s"]
    out = ["<table><tr>" + "".join(f"<th>{esc(h)}</th>" for h in heads) + "</tr>"]
    previous_group = None
    for row in t.itertuples(index=False):
        r = row._asdict()
        group = tuple(r[c] for c in comparison.group_cols)
        classes = (["best"] if r["best"] else []) + (["group-start"] if group != previous_group else [])
        previous_group = group
        speed = ("1 (baseline)" if r["verdict"] == BASELINE else
                 f"{_num(r['speedup'], '.3f')} [{_num(r['speedup_lo'], '.3f')}, {_num(r['speedup_hi'], '.3f')}]"
                 if np.isfinite(r["speedup"]) else "–")
        l2 = ("–" if not np.isfinite(r["l2_hit_rate"]) else
              f"{_num(r['l2_hit_rate'], '.2f')} ± {_num(r['l2_hit_rate_std'], '.2f')}")
        dl2 = ("–" if not np.isfinite(r["l2_delta_pts"]) or r["swizzle"] == IDENTITY else
               f"{r['l2_delta_pts']:+.2f} ± {_num(r['l2_band_pts'], '.2f')}")
        cells = [("", r["kernel"]), ("", r["shape"]), ("num", r["num_warps"]),
                 *[("", r[c]) for c in extra_group], ("sw", r["swizzle"]),
                 *([("num", r["group_size"])] if show_gsize else []),
                 ("num", f"{_num(r['time_ms_median'], '.4f')} [{_num(r['time_ms_p20'], '.4f')}, "
                         f"{_num(r['time_ms_p80'], '.4f')}]" if np.isfinite(r["time_ms_median"]) else "–"),
                 ("num", speed), (_verdict_class(r["verdict"]), r["verdict"]),
                 ("num", l2), ("num", dl2), (_verdict_class(r["l2_verdict"]), r["l2_verdict"]),
                 *([("num", _num(r["sim_l2_hit_rate"], ".2f"))] if show_sim else []),
                 ("num", _num(r["ratio_to_vendor"], ".3f")), ("num", _num(r["tflops"], ".1f"))]
        tds = "".join(f'<td class="{esc(cls)}">{esc(text)}</td>' if cls else f"<td>{esc(text)}</td>"
                      for cls, text in cells)
        out.append(f'<tr class="{" ".join(classes)}">{tds}</tr>')
    out.append("</table>")
    return "".join(out)


def best_per_group(comparison: Comparison) -> pd.DataFrame:
    """One row per group: its best swizzle (among verdict faster) or why there is none."""
    t = comparison.table
    rows = []
    for key, grp in t.groupby(comparison.group_cols, sort=False):
        key = key if isinstance(key, tuple) else (key,)
        best = grp[grp["best"]]
        label = " · ".join(_join_labels(grp.head(1), comparison.group_cols).tolist())
        if not best.empty:
            b = best.iloc[0]
            variant = comparison.variant_label(best.head(1)).iloc[0]
            text = (f"{variant}: speedup {b['speedup']:.3f} [{b['speedup_lo']:.3f}, {b['speedup_hi']:.3f}]"
                    + (f", ΔL2 {b['l2_delta_pts']:+.2f} points" if np.isfinite(b["l2_delta_pts"]) else ""))
        elif not (grp["swizzle"] == IDENTITY).any():
            text = "no identity run in this group: no comparison possible"
        elif (grp["swizzle"] == IDENTITY).all():
            text = "only identity ran in this group: nothing to compare"
        elif (grp.loc[grp["swizzle"] != IDENTITY, "verdict"] == NOT_TIMED).all():
            text = "not timed: no comparison of speed possible"
        else:
            text = "none beats identity beyond noise"
        rows.append({"group": label, "best": text, "has_best": not best.empty})
    return pd.DataFrame(rows, columns=["group", "best", "has_best"])


def _best_html(comparison: Comparison) -> str:
    best = best_per_group(comparison)
    if best.empty:
        return '<p class="skip">No groups.</p>'
    rows = "".join(f'<tr class="{"best" if r.has_best else ""}"><td>{esc(r.group)}</td><td>{esc(r.best)}</td></tr>'
                   for r in best.itertuples(index=False))
    return f"<table><tr><th>Group</th><th>Best swizzle (verdict faster only)</th></tr>{rows}</table>"


def _verdict_summary_html(comparison: Comparison) -> str:
    t = comparison.table[comparison.table["swizzle"] != IDENTITY]
    if t.empty:
        return '<p class="skip">No swizzle other than identity finished.</p>'
    counts = t["verdict"].value_counts()
    l2counts = t["l2_verdict"].value_counts()
    time_part = ", ".join(f"{n} {v}" for v, n in counts.items())
    l2_part = ", ".join(f"{n} {v}" for v, n in l2counts.items())
    return f'<p>Time verdicts over {len(t)} non-identity cells: {esc(time_part)}. L2 verdicts: {esc(l2_part)}.</p>'


def _failed_html(failed: pd.DataFrame) -> str:
    if failed.empty:
        return "<p>No job run failed.</p>"
    heads = ["Run", "Status", "Gate", "Reason", "Run id"]
    rows = "".join(
        f"<tr><td>{esc(r.run_name)}</td><td>{esc(r.status)}</td><td>{esc(r.gate)}</td>"
        f'<td class="reason">{esc(r.reason)}</td><td>{esc(r.run_id)}</td></tr>'
        for r in failed.itertuples(index=False))
    return "<table><tr>" + "".join(f"<th>{h}</th>" for h in heads) + f"</tr>{rows}</table>"


def _figure_html(block: FigureBlock) -> str:
    if block.png_base64 is None:
        return f'<h3>{esc(block.title)}</h3><p class="skip">{esc(block.caption)}</p>'
    return (f'<figure><img alt="{esc(block.title)}" src="data:image/png;base64,{block.png_base64}">'
            f"<figcaption>{esc(block.caption)}</figcaption></figure>")


def render_html(data: SweepRuns, comparison: Comparison, failed: pd.DataFrame,
                figures: list[FigureBlock], facts: list[tuple[str, str]]) -> str:
    """The whole page; every dynamic text goes through ``esc``."""
    title = f"swizzlebench report: {data.experiment}" + (f" / {data.sweep_run_id}" if data.sweep_run_id else "")
    notes = "".join(f'<p class="note">{esc(n)}</p>' for n in comparison.notes)
    generated = datetime.now(tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{esc(title)}</title><style>{CSS}</style></head><body>",
        f"<h1>{esc(title)}</h1>",
        _facts_html(facts),
        f'<p class="note">Generated {esc(generated)} by harness.report.</p>',
        "<h2>Verdicts</h2>", _verdict_summary_html(comparison), notes,
        "<h2>Best swizzle per group</h2>", _best_html(comparison),
        "<h2>Figures</h2>", *[_figure_html(b) for b in figures],
        "<h2>All cells</h2>", _cell_table_html(comparison),
        f"<h2>Failed or unfinished runs ({len(failed)})</h2>", _failed_html(failed),
        "<h2>How the numbers are computed</h2><ul>",
        *[f"<li>{esc(m)}</li>" for m in METHODS], "</ul>",
        "</body></html>",
    ]
    return "\n".join(parts)


# --------------------------------------------------------------------------------------
# Entry points
# --------------------------------------------------------------------------------------
def default_out_dir(experiment: str, sweep_run_id: str | None) -> Path:
    """``reports/<experiment>/<sweep_run_id or all-jobs>`` relative to the working directory."""
    return Path("reports") / experiment / (sweep_run_id or "all-jobs")


def attach_to_sweep(client: MlflowClient, sweep_run_id: str, files: list[Path]) -> None:
    """Log ``files`` as artifacts ``report/<name>`` of the sweep's parent run."""
    for path in files:
        client.log_artifact(sweep_run_id, str(path), artifact_path="report")


def build_report(tracking_uri: str, experiment: str, sweep_run_id: str | None = None,
                 out_dir: str | Path | None = None) -> Path:
    """Build the report of a sweep (default: the experiment's latest) and return the path
    of its ``index.html``; ``table.csv`` and ``failed.csv`` are written next to it and,
    when the sweep run exists, all three are attached to it under ``report/``."""
    started = time.perf_counter()
    client = MlflowClient(tracking_uri=tracking_uri)
    data = load_sweep(client, experiment, sweep_run_id)
    loaded = time.perf_counter()
    comparison = build_comparison(data.runs)
    failed = failed_runs(data.runs)
    figures = make_figures(comparison)
    facts = header_facts(data, comparison, failed)
    page = render_html(data, comparison, failed, figures, facts)

    out = Path(out_dir) if out_dir is not None else default_out_dir(experiment, data.sweep_run_id)
    out.mkdir(parents=True, exist_ok=True)
    html_path = out / "index.html"
    html_path.write_text(page, encoding="utf-8")
    table = comparison.table.reindex(columns=TABLE_COLUMNS)
    table.to_csv(out / "table.csv", index=False)
    failed.to_csv(out / "failed.csv", index=False)
    log.info("report of %d runs written to %s (load %.1f s, total %.1f s)", len(data.runs), html_path,
             loaded - started, time.perf_counter() - started)

    if data.sweep_run_id:
        try:
            attach_to_sweep(client, data.sweep_run_id, [html_path, out / "table.csv", out / "failed.csv"])
        except Exception as exc:  # the local report stands even if the artifact store is unreachable
            log.warning("report written to %s but not attached to sweep run %s: %s: %s",
                        html_path, data.sweep_run_id, type(exc).__name__, exc)
    return html_path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.report", description=__doc__.split("\n\n")[0])
    parser.add_argument("--experiment", required=True, help="MLflow experiment (the sweep name)")
    parser.add_argument("--sweep", default=None, help="sweep parent run id (default: the latest sweep run)")
    parser.add_argument("--out", default=None,
                        help="output folder (default: reports/<experiment>/<sweep run id or all-jobs>)")
    parser.add_argument("--tracking-uri", default="sqlite:///mlflow.db", help="MLflow tracking URI")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    try:
        path = build_report(args.tracking_uri, args.experiment, args.sweep, args.out)
    except (LookupError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
