"""Comparison report: every swizzle against its baseline, for one sweep, several sweeps,
the whole experiment, or named runs.

    python -m harness.report --experiment swizzlebench [--sweep RUN_ID ...] [--out DIR]
    python -m harness.report --experiment swizzlebench --experiment-view
    python -m harness.report --experiment swizzlebench --run RUN_ID [--run RUN_ID ...]
    python -m harness.report --experiment swizzlebench --list-sweeps

Which runs each form covers is :mod:`harness.report_views`.  The report is written into
the output folder:

* ``index.html``: ONE self-contained page (figures are base64 PNGs, the CSS is inline,
  there is no JavaScript and nothing is fetched), every shown text HTML-escaped;
* ``table.csv``: one row per (group, swizzle) cell, numbers unformatted;
* ``failed.csv``: the runs that did not finish, with their reasons (header only if none).

A *group* is one kernel x shape x num_warps (plus any other launch knob that varies
in the report, e.g. num_stages or tiles); a *cell* is one swizzle in a group.  Rules:

* **paired** (a run tagged ``compare.role``: the job timed its baseline ``compare.baseline``
  itself, in the same process, in interleaved rounds): the run's own ``speedup`` (baseline
  time / swizzle time) with its 95 % CI, ``verdict``, ``l2_delta_pts`` with its CI and
  ``l2_verdict`` are shown as logged; no identity job is needed.  A run tagged
  ``compare.same_order=true`` launches its baseline's tile order: "same order as baseline";
* **identity run** (older runs without paired results): speedup = identity median time /
  swizzle median time of the same group; its interval treats each run's [p20, p80] band
  of repetition times as a noise band and takes the extreme ratios, ``[identity p20 /
  swizzle p80, identity p80 / swizzle p20]``; "faster" only when the whole interval is
  above 1, "slower" only when wholly below 1, otherwise "within noise" ("not timed" when
  either side has no time, e.g. CPU-only runs); a remap table equal to identity's
  (``params.remap.hash``) is "same order as baseline".  L2: delta = swizzle hit rate -
  identity hit rate, in percentage points; noise band = max(2 * sqrt(std_swizzle^2 +
  std_identity^2), 0.5 points); "higher" / "lower" only beyond the band.

A report of one sweep is also attached to that sweep's parent run as the artifacts
``report/index.html``, ``report/table.csv`` and ``report/failed.csv``.
"""
from __future__ import annotations

import argparse
import base64
import html
import io
import logging
import sys
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd
from matplotlib import rc_context
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from mlflow.tracking import MlflowClient

from harness.report_views import ReportRuns, Selection, list_sweeps, load_runs, utc
from harness.tracking import STATUS_REASON_TAG

log = logging.getLogger(__name__)

IDENTITY = "identity"

# Verdicts on time.  Paired runs: the first words of their ``verdict`` tag (harness.stats);
# identity-run comparisons: speedup interval vs 1.
FASTER, SLOWER, NOISE = "faster", "slower", "within noise"
NO_DIFFERENCE = "no difference detected"
NOT_TIMED, NO_BASELINE, BASELINE = "not timed", "no identity baseline", "baseline"
#: A paired job whose baseline failed a gate (tag ``verdict`` = ``no comparison: <why>``).
NO_COMPARISON = "no comparison"
#: A paired run that carries no verdict tag, or one this report does not know.
NO_VERDICT, OTHER = "no verdict recorded", "unrecognised verdict"
#: The swizzle's remap table equals its baseline's (e.g. ``xcd`` with num_xcds=1): same
#: kernel, same order, so any measured difference is noise, never a result.
SAME_ORDER = "same order as baseline"
# Verdicts on the L2 hit rate.
L2_HIGHER, L2_LOWER, NOT_PROFILED = "higher", "lower", "not profiled"

#: The words a paired ``verdict`` / ``l2_verdict`` tag starts with.
TIME_VERDICT_WORDS = (FASTER, SLOWER, NO_DIFFERENCE, SAME_ORDER, NOT_TIMED, NO_COMPARISON)
L2_VERDICT_WORDS = (L2_HIGHER, L2_LOWER, NO_DIFFERENCE, SAME_ORDER, NOT_PROFILED)
#: Order of the words in verdict counts.
COUNT_ORDER = (FASTER, L2_HIGHER, SLOWER, L2_LOWER, NO_DIFFERENCE, NOISE, SAME_ORDER, NO_COMPARISON,
               NO_BASELINE, NOT_TIMED, NOT_PROFILED, NO_VERDICT, OTHER)

# Paired runs (tag ``compare.role``, param ``compare.baseline``).
ROLE_TAG, CANDIDATE = "compare.role", "candidate"
PAIRED, BY_IDENTITY_RUN = "paired", "identity run"

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

#: Text columns of a cell: column -> the run's param or tag it is read from.
CELL_TEXT = {"kernel": "params.kernel", "num_warps": "params.num_warps", "num_stages": "params.num_stages",
             "num_xcds": "params.num_xcds", "dtype": "params.shape.dtype", "target": "params.target",
             "seed": "params.seed", "swizzle": "params.swizzle", "group_size": "params.group_size"}
#: Tags of a paired run: cell column -> tag.
CELL_TAGS = {"role": ROLE_TAG, "verdict_tag": "verdict", "l2_verdict_tag": "l2_verdict", "l2_source": "l2_source",
             "same_order": "compare.same_order"}
#: Metrics copied from the runs into the table (time in ms, rates in %, bytes).
RUN_METRICS = ("time_ms_median", "time_ms_p20", "time_ms_p80", "tflops", "vendor_time_ms",
               "ratio_to_vendor", "max_rel_err", "l2_hit_rate", "l2_hit_rate_std", "l2_hits",
               "l2_misses", "profiled_time_ms", "dram_read_bytes", "sim_l2_hit_rate",
               "paired_rounds", "paired_time_s", "l2_pairs")
#: A paired run's own comparison metrics -> the table column they become.
PAIRED_METRICS = {"speedup": "speedup", "speedup_ci_lo": "speedup_lo", "speedup_ci_hi": "speedup_hi",
                  "baseline_time_ms": "baseline_time_ms", "l2_delta_pts": "l2_delta_pts",
                  "l2_delta_ci_lo": "l2_delta_lo", "l2_delta_ci_hi": "l2_delta_hi",
                  "baseline_l2_hit_rate": "baseline_l2_hit_rate"}


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
        """``xcd`` (plus the group size and ``vs <baseline>`` when they vary)."""
        return _join_labels(frame, self.variant_cols)

    @property
    def candidates(self) -> pd.DataFrame:
        """The cells compared with a baseline (every row but the baselines themselves)."""
        return self.table[self.table["verdict"] != BASELINE]


def _join_labels(frame: pd.DataFrame, cols: list[str]) -> pd.Series:
    prefixes = {"num_warps": "w", "num_stages": "s", "group_size": "g", "num_xcds": "xcd", "seed": "seed ",
                "baseline": "vs "}
    out = pd.Series("", index=frame.index, dtype=object)
    for i, col in enumerate(cols):
        part = prefixes.get(col, "") + frame[col].astype(str)
        out = part if i == 0 else out + " · " + part
    return out


def _cells(runs: pd.DataFrame) -> pd.DataFrame:
    """One row per FINISHED run: its group and variant keys, metrics and paired fields."""
    finished = runs[runs["status"] == "FINISHED"] if "status" in runs else runs.iloc[0:0]
    cells = finished[["run_id", "run_name", "start_ms"]].copy()
    for name, source in CELL_TEXT.items():
        cells[name] = _col(finished, source, "?").fillna("?").astype(str)
    cells["shape"] = _shape_label(finished)
    cells["tiles"] = _tiles_label(finished)
    cells["remap_hash"] = _col(finished, "params.remap.hash")
    cells["compare_baseline"] = _col(finished, "params.compare.baseline", "").fillna("").astype(str)
    for name, tag in CELL_TAGS.items():
        cells[name] = _col(finished, f"tags.{tag}", "").fillna("").astype(str)
    for name in RUN_METRICS:
        cells[name] = pd.to_numeric(_col(finished, f"metrics.{name}"), errors="coerce")
    for name, column in PAIRED_METRICS.items():
        cells[f"paired_{column}"] = pd.to_numeric(_col(finished, f"metrics.{name}"), errors="coerce")
    return cells


def _judge_by_identity(cells: pd.DataFrame, group_cols: list[str]) -> pd.DataFrame:
    """Every cell joined to the identity run of its group and judged against it (the rule
    for runs without paired results; paired rows are overwritten by ``_apply_paired``)."""
    # Same group and group_size if there is one, else any identity run of the group
    # (identity ignores group_size).
    base_cols = ["run_id", "time_ms_median", "time_ms_p20", "time_ms_p80", "l2_hit_rate", "l2_hit_rate_std",
                 "remap_hash"]
    renamed = {c: f"id_{c}" for c in base_cols}
    ident = cells[cells["swizzle"] == IDENTITY]
    exact = ident[group_cols + ["group_size"] + base_cols].rename(columns=renamed)
    anyg = ident.drop_duplicates(subset=group_cols, keep="last")[group_cols + base_cols].rename(columns=renamed)
    exact = exact.drop_duplicates(subset=group_cols + ["group_size"], keep="last")
    table = cells.merge(exact, on=group_cols + ["group_size"], how="left")   # keeps row order
    fallback = cells[group_cols].merge(anyg, on=group_cols, how="left")
    has_exact = table["id_run_id"].notna()
    for c in base_cols:
        table[f"id_{c}"] = table[f"id_{c}"].where(has_exact, fallback[f"id_{c}"])

    table["speedup"] = table["id_time_ms_median"] / table["time_ms_median"]
    table["speedup_lo"], table["speedup_hi"] = speedup_interval(
        table["id_time_ms_p20"], table["id_time_ms_p80"], table["time_ms_p20"], table["time_ms_p80"])
    table["baseline_time_ms"] = table["id_time_ms_median"]
    table["baseline_l2_hit_rate"] = table["id_l2_hit_rate"]
    table["l2_delta_pts"] = table["l2_hit_rate"] - table["id_l2_hit_rate"]
    table["l2_band_pts"] = l2_band(table["l2_hit_rate_std"], table["id_l2_hit_rate_std"])
    table["l2_delta_lo"] = table["l2_delta_hi"] = np.nan
    is_identity = table["swizzle"] == IDENTITY
    no_base = table["id_run_id"].isna()
    table["baseline"] = np.where(no_base, "", IDENTITY)
    table["comparison"] = np.where(no_base | is_identity, "", BY_IDENTITY_RUN)

    table["verdict"] = [time_verdict(s, lo, hi) for s, lo, hi in
                        zip(table["speedup"], table["speedup_lo"], table["speedup_hi"])]
    table.loc[no_base, "verdict"] = NO_BASELINE
    table.loc[table["time_ms_median"].isna(), "verdict"] = NOT_TIMED
    table.loc[is_identity, "verdict"] = BASELINE
    table["l2_verdict"] = [l2_verdict(d, b) for d, b in zip(table["l2_delta_pts"], table["l2_band_pts"])]
    table.loc[no_base & table["l2_hit_rate"].notna(), "l2_verdict"] = NO_BASELINE
    table.loc[is_identity, "l2_verdict"] = BASELINE
    same = (~is_identity) & table["remap_hash"].notna() & (table["remap_hash"] == table["id_remap_hash"])
    table.loc[same, ["verdict", "l2_verdict"]] = SAME_ORDER
    table["same_order_cell"] = same
    return table


def paired_verdict(tag: str, words: tuple[str, ...], absent: str) -> str:
    """The verdict word a paired run's tag starts with; ``absent`` when it has no tag."""
    if not tag:
        return absent
    return next((w for w in words if tag.startswith(w)), OTHER)


def _apply_paired(table: pd.DataFrame) -> pd.Series:
    """Overwrite the rows of paired runs (tag ``compare.role``) with the comparison the job
    made itself; returns the mask of those rows."""
    paired = table["role"].isin([CANDIDATE, BASELINE])
    cand = paired & (table["role"] == CANDIDATE)
    for column in PAIRED_METRICS.values():
        table[column] = table[column].where(~paired, table[f"paired_{column}"])
    table["l2_band_pts"] = table["l2_band_pts"].where(~paired)
    table.loc[paired, "baseline"] = table.loc[paired, "compare_baseline"]
    table.loc[paired, "comparison"] = np.where(cand[paired], PAIRED, "")

    time_absent = np.where(table["time_ms_median"].isna(), NOT_TIMED,
                           np.where(table["speedup"].isna(), NO_COMPARISON, NO_VERDICT))
    l2_absent = np.where(table["l2_delta_pts"].notna(), NO_VERDICT,
                         np.where(table["l2_hit_rate"].notna(), NO_COMPARISON, NOT_PROFILED))
    rows = cand.to_numpy()
    table.loc[cand, "verdict"] = [paired_verdict(t, TIME_VERDICT_WORDS, a)
                                  for t, a in zip(table.loc[cand, "verdict_tag"], time_absent[rows])]
    table.loc[cand, "l2_verdict"] = [paired_verdict(t, L2_VERDICT_WORDS, a)
                                     for t, a in zip(table.loc[cand, "l2_verdict_tag"], l2_absent[rows])]
    same = cand & (table["same_order"] == "true")
    table.loc[same & ~table["verdict"].isin([NOT_TIMED, NO_COMPARISON]), "verdict"] = SAME_ORDER
    table.loc[same & (table["l2_verdict"] != NOT_PROFILED), "l2_verdict"] = SAME_ORDER
    table.loc[paired & ~cand, ["verdict", "l2_verdict"]] = BASELINE
    table["same_order_cell"] = table["same_order_cell"].where(~paired, same)
    return paired


def _verdict_details(table: pd.DataFrame, paired: pd.Series) -> None:
    """``verdict_detail`` / ``l2_verdict_detail``: a paired run's own verdict text (e.g.
    ``no difference detected (CI [0.994, 1.003])``) where its word stands, else the word."""
    for word_col, tag_col in (("verdict", "verdict_tag"), ("l2_verdict", "l2_verdict_tag")):
        own = paired & (table[tag_col] != "") & (table[word_col] != SAME_ORDER) & (table[word_col] != BASELINE)
        table[f"{word_col}_detail"] = table[tag_col].where(own, table[word_col])


def _comparison_notes(table: pd.DataFrame, paired: pd.Series) -> list[str]:
    """What a reader must know about how the cells were compared."""
    notes: list[str] = []
    cand = table["verdict"] != BASELINE
    n_paired = int((paired & cand).sum())
    by_identity = cand & ~paired
    if n_paired:
        notes.append(f"{n_paired} cell(s) carry a paired comparison: the job timed its baseline itself, in the "
                     "same process (interleaved rounds); speedup and L2 delta are shown with their 95 % CIs.")
    if by_identity.any() and n_paired:
        notes.append(f"{int(by_identity.sum())} cell(s) have no paired results (older runs): they are compared "
                     "with the identity run of their group, with [p20, p80] noise bands.")
    timed_same = table[table["same_order_cell"] & ~paired & table["speedup"].notna()]
    if len(timed_same):
        notes.append(
            f"{len(timed_same)} cell(s) launch exactly the tile order of identity ({SAME_ORDER}); their "
            f"measured 'speedups' range {timed_same['speedup'].min():.3f} to {timed_same['speedup'].max():.3f}: "
            "that spread is run-to-run noise between separate runs, which the [p20, p80] intervals "
            "(noise within one run) do not contain.  Read verdicts with it in mind.")
    paired_same = table[table["same_order_cell"] & paired & table["speedup"].notna()]
    if len(paired_same):
        notes.append(f"{len(paired_same)} paired cell(s) launch exactly their baseline's tile order "
                     f"({SAME_ORDER}): their paired speedups, {paired_same['speedup'].min():.4f} to "
                     f"{paired_same['speedup'].max():.4f}, are an A/A check of the measurement.")
    no_base = by_identity & ((table["verdict"] == NO_BASELINE) | (table["l2_verdict"] == NO_BASELINE))
    if no_base.any() and not (table["swizzle"] == IDENTITY).any():
        notes.append("No identity run and no paired results in these runs: no speedup or L2 delta can be computed.")
    elif no_base.any():
        notes.append(f"{int(no_base.sum())} cell(s) have neither paired results nor an identity run in their group.")
    return notes


def build_comparison(runs: pd.DataFrame) -> Comparison:
    """Judge every finished job run: by its own paired comparison when it has one, else
    against the identity run of its group."""
    cells = _cells(runs)
    # A launch knob joins the group key only if it varies *within* a kernel family (tiles
    # always differ between families, which the kernel column already separates).
    group_cols = list(GROUP_KEYS) + [k for k in OPTIONAL_GROUP_KEYS
                                     if len(cells) and cells.groupby("kernel")[k].nunique().max() > 1]
    variant_cols = ["swizzle"] + (["group_size"] if cells["group_size"].nunique() > 1 else [])
    if cells.loc[cells["compare_baseline"] != "", "compare_baseline"].nunique() > 1:
        variant_cols.append("baseline")

    # One row per cell: a later run of the same cell supersedes an earlier one.
    key = group_cols + ["swizzle", "group_size", "compare_baseline"]
    cells = cells.sort_values("start_ms", kind="stable")
    before = len(cells)
    cells = cells.drop_duplicates(subset=key, keep="last")
    superseded = before - len(cells)
    notes = [f"{superseded} finished run(s) were superseded by a later run of the same configuration; the "
             "table shows the latest."] if superseded else []

    table = _judge_by_identity(cells, group_cols)
    paired = _apply_paired(table)
    _verdict_details(table, paired)
    notes += _comparison_notes(table, paired)

    table["best"] = False
    faster = table[table["verdict"] == FASTER]
    if not faster.empty:
        best_idx = faster.groupby(group_cols, sort=False)["speedup"].idxmax()
        table.loc[best_idx.to_numpy(), "best"] = True

    table = _sort_cells(table, group_cols)
    return Comparison(table=table, group_cols=group_cols, variant_cols=variant_cols,
                      superseded=superseded, notes=notes)


def _sort_cells(table: pd.DataFrame, group_cols: list[str]) -> pd.DataFrame:
    """Groups in natural order (numbers as numbers), baselines first inside each group."""
    order = table.assign(
        _warps=pd.to_numeric(table["num_warps"], errors="coerce"),
        _gsize=pd.to_numeric(table["group_size"], errors="coerce"),
        _not_baseline=table["verdict"] != BASELINE)
    by = [("_warps" if c == "num_warps" else c) for c in group_cols] + ["_not_baseline", "swizzle", "_gsize"]
    return order.sort_values(by, kind="stable").drop(columns=["_warps", "_gsize", "_not_baseline"]).reset_index(drop=True)


#: Columns of table.csv, in order (times in ms, rates and deltas in % / points).  speedup_lo /
#: speedup_hi: the 95 % CI of a paired cell, the [p20, p80]-band interval of the others.
TABLE_COLUMNS = [
    "kernel", "shape", "num_warps", "num_stages", "tiles", "num_xcds", "dtype", "target", "seed",
    "swizzle", "group_size", "baseline", "comparison", "run_id", "run_name",
    "time_ms_median", "time_ms_p20", "time_ms_p80", "baseline_time_ms", "paired_rounds", "paired_time_s",
    "id_run_id", "id_time_ms_median", "id_time_ms_p20", "id_time_ms_p80",
    "speedup", "speedup_lo", "speedup_hi", "verdict", "verdict_detail",
    "l2_hit_rate", "l2_hit_rate_std", "baseline_l2_hit_rate", "id_l2_hit_rate", "id_l2_hit_rate_std",
    "l2_delta_pts", "l2_delta_lo", "l2_delta_hi", "l2_band_pts", "l2_pairs", "l2_source", "l2_verdict",
    "l2_verdict_detail",
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


def _duration(seconds: float) -> str:
    seconds = int(round(seconds))
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h} h {m:02d} min {s:02d} s" if h else f"{m} min {s:02d} s"


def header_facts(data: ReportRuns, comparison: Comparison, failed: pd.DataFrame) -> list[tuple[str, str]]:
    """(label, value) pairs describing which runs the report covers, where and when they ran."""
    runs = data.runs
    facts = [("Experiment", data.experiment), *data.facts]
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
# Figures
# --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class FigureBlock:
    """One figure of the report: a PNG (base64), or the sentence saying why it is absent."""

    title: str
    png_base64: str | None
    caption: str


VERDICT_COLOURS = {FASTER: "#1a9850", SLOWER: "#d73027", NOISE: "#8c8c8c", NO_DIFFERENCE: "#8c8c8c",
                   SAME_ORDER: "#c7c7c7"}


def _render(fig: Figure) -> str:
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

    title = "L2 hit-rate delta vs baseline (percentage points)"
    t = _labelled_candidates(comparison).dropna(subset=["l2_delta_pts"])
    if t.empty:
        return FigureBlock(title, None, "Skipped: not profiled: no swizzle has an L2 hit-rate delta to its "
                                        "baseline (no L2 profiler, or no baseline).")
    grid = t.pivot_table(index="group_label", columns="variant_label", values="l2_delta_pts",
                         aggfunc="mean", sort=False)
    caption = ("Each cell: swizzle hit rate minus its baseline's hit rate in the same group (paired cells: the "
               "mean over profiled pairs); red = more L2 hits.")
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
    """Speedup vs the baseline per cell, with its CI (paired) or noise-band interval as error bars."""
    import seaborn as sns

    title = "Speedup vs baseline (baseline time / swizzle time)"
    t = _labelled_candidates(comparison).dropna(subset=["speedup"])
    if t.empty:
        return FigureBlock(title, None, "Skipped: not timed: no cell has a measured speedup (CPU-only runs are "
                                        "verified under the Triton interpreter, not timed).")
    kinds = set(t["comparison"])
    caption = "Bars: " + "; ".join(
        text for kind, text in ((PAIRED, "the 95 % CI of the paired speedup (speedup_ci_lo, speedup_ci_hi)"),
                                (BY_IDENTITY_RUN, "for cells compared with a separate identity run, the "
                                 "conservative interval [identity p20 / swizzle p80, identity p80 / swizzle p20]"))
        if kind in kinds) + "; green = faster, red = slower, grey = no difference detected / within noise."
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
    sns.scatterplot(data=t, x="speedup", y="y", hue="verdict", hue_order=_ordered(t["verdict"]), palette=palette,
                    ax=ax, s=30, zorder=3)
    ax.axvline(1.0, color="black", linewidth=1, linestyle="--")
    ax.set_yticks(t["y"], t["label"].tolist(), fontsize=8)
    ax.set_ylabel("")
    ax.set_xlabel("speedup (> 1: faster than the baseline)")
    ax.set_title(title)
    ax.grid(axis="x", alpha=0.3)
    if ax.get_legend() is not None:
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return FigureBlock(title, _render(fig), caption)


def _ordered(verdicts: pd.Series) -> list[str]:
    """The distinct verdict words of ``verdicts`` in COUNT_ORDER (unknown ones last)."""
    present = list(dict.fromkeys(verdicts))
    return [v for v in COUNT_ORDER if v in present] + [v for v in present if v not in COUNT_ORDER]


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
                    style_order=_ordered(points["verdict"]), ax=ax, s=40)
    ax.axhline(1.0, color="black", linewidth=1, linestyle="--")
    ax.axvline(0.0, color="black", linewidth=1, linestyle=":")
    ax.set_xlabel("L2 hit-rate delta vs baseline (points)")
    ax.set_ylabel("speedup vs baseline")
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

PAIRED_METHODS = [
    "Paired comparison (runs tagged compare.role): the job timed its swizzle and its baseline "
    "(compare.baseline, shown in the Baseline column) itself, in the same process, in interleaved rounds. "
    "Speedup = baseline time / swizzle time (> 1: the swizzle is faster), with its 95 % confidence interval; "
    "the verdict is the job's own: faster / slower only when the CI excludes 1 and the effect is at least "
    "compare.min_effect, otherwise 'no difference detected' with the CI. L2: delta = swizzle hit rate - "
    "baseline hit rate per profiled pair (percentage points), with its 95 % CI and the job's l2_verdict. "
    "No identity job is needed.",
]
IDENTITY_METHODS = [
    "Runs without paired results (older stores) are compared with the identity run of their group "
    "(kernel, shape, num_warps and any other launch knob that varies): speedup = identity median time / "
    "swizzle median time; interval: each run's [p20, p80] of the timed repetitions is treated as a noise "
    "band and the interval is the extreme ratio of the two bands, [identity p20 / swizzle p80, identity p80 / "
    "swizzle p20], wider than a confidence interval of the median, i.e. conservative; faster only if the whole "
    "interval is above 1, slower only if wholly below 1, otherwise within noise.",
    f"L2 of those runs: delta = swizzle hit rate - identity hit rate (percentage points); noise band = "
    f"max({L2_BAND_SIGMAS:g} x sqrt(std_swizzle^2 + std_identity^2), {L2_BAND_FLOOR_POINTS:g} points), "
    "std being the spread of the hit rate over profiled repeats; higher / lower only beyond the band.",
]
METHODS = [
    "Not timed: CPU-only runs are verified under the Triton interpreter but have no GPU time, so no speedup. "
    "Same order as baseline: the swizzle's remap table equals its baseline's (same kernel, same order), so any "
    "difference is noise, never a result.",
    "Ratio to vendor = swizzle median time / vendor conv2d (cuDNN / MIOpen) median time; < 1 beats the vendor.",
    "Best swizzle per group: the highest speedup among the verdict-faster cells (marked with a star).",
]


def _facts_html(facts: list[tuple[str, str]]) -> str:
    rows = "".join(f"<tr><th>{esc(k)}</th><td>{esc(v)}</td></tr>" for k, v in facts)
    return f'<table class="facts">{rows}</table>'


def _verdict_class(verdict: str) -> str:
    return {FASTER: "v-faster", SLOWER: "v-slower", NOISE: "v-noise", NO_DIFFERENCE: "v-noise",
            SAME_ORDER: "v-noise", L2_HIGHER: "v-faster", L2_LOWER: "v-slower", BASELINE: "v-baseline"}.get(verdict, "")


EXTRA_GROUP_HEADS = {"num_stages": "Stages", "tiles": "Tiles", "num_xcds": "XCDs", "dtype": "Dtype",
                     "target": "Target", "seed": "Seed"}


def _interval(value: float, lo: float, hi: float, fmt: str) -> str:
    """``1.250 [1.210, 1.291]``; the bracket is left out when both bounds are unknown."""
    if not np.isfinite(value):
        return "–"
    bounds = f" [{_num(lo, fmt)}, {_num(hi, fmt)}]" if np.isfinite(lo) or np.isfinite(hi) else ""
    return format(value, fmt) + bounds


def _compared_text(r: dict) -> str:
    """How a cell was compared: ``paired, 40 rounds`` / ``identity run, [p20, p80] bands``."""
    if r["comparison"] == PAIRED:
        rounds = f", {r['paired_rounds']:.0f} rounds" if np.isfinite(r["paired_rounds"]) else ""
        pairs = f", {r['l2_pairs']:.0f} L2 pairs" if np.isfinite(r["l2_pairs"]) else ""
        return f"paired{rounds}{pairs}"
    return f"{BY_IDENTITY_RUN}, [p20, p80] bands" if r["comparison"] == BY_IDENTITY_RUN else ""


def _delta_l2_text(r: dict) -> str:
    if r["verdict"] == BASELINE or not np.isfinite(r["l2_delta_pts"]):
        return "–"
    if r["comparison"] == PAIRED:
        return _interval(r["l2_delta_pts"], r["l2_delta_lo"], r["l2_delta_hi"], "+.2f")
    return f"{r['l2_delta_pts']:+.2f} ± {_num(r['l2_band_pts'], '.2f')}"


def _cell_table_html(comparison: Comparison) -> str:
    t = comparison.table
    if t.empty:
        return '<p class="skip">No finished job run: nothing to compare.</p>'
    extra_group = [c for c in comparison.group_cols if c not in GROUP_KEYS]
    show_gsize = "group_size" in comparison.variant_cols
    show_sim = t["sim_l2_hit_rate"].notna().any()
    heads = ["Kernel", "Shape", "Warps", *[EXTRA_GROUP_HEADS.get(c, c) for c in extra_group], "Swizzle",
             *(["Group size"] if show_gsize else []), "Baseline", "Compared",
             "Time ms: median [p20, p80]", "Baseline time ms", "Speedup vs baseline [95 % CI or band interval]",
             "Verdict", "L2 hit % ± std", "ΔL2 vs baseline (points) [95 % CI] or ± band", "L2 verdict",
             *(["Simulated L2 %"] if show_sim else []), "Time / vendor", "TFLOP/s"]
    out = ["<table><tr>" + "".join(f"<th>{esc(h)}</th>" for h in heads) + "</tr>"]
    previous_group = None
    for row in t.itertuples(index=False):
        r = row._asdict()
        group = tuple(r[c] for c in comparison.group_cols)
        classes = (["best"] if r["best"] else []) + (["group-start"] if group != previous_group else [])
        previous_group = group
        speed = ("1 (baseline)" if r["verdict"] == BASELINE else
                 _interval(r["speedup"], r["speedup_lo"], r["speedup_hi"], ".3f"))
        l2 = ("–" if not np.isfinite(r["l2_hit_rate"]) else
              f"{_num(r['l2_hit_rate'], '.2f')} ± {_num(r['l2_hit_rate_std'], '.2f')}")
        cells = [("", r["kernel"]), ("", r["shape"]), ("num", r["num_warps"]),
                 *[("", r[c]) for c in extra_group], ("sw", r["swizzle"]),
                 *([("num", r["group_size"])] if show_gsize else []),
                 ("", r["baseline"] or "–"), ("", _compared_text(r) or "–"),
                 ("num", _interval(r["time_ms_median"], r["time_ms_p20"], r["time_ms_p80"], ".4f")),
                 ("num", _num(r["baseline_time_ms"], ".4f")),
                 ("num", speed), (_verdict_class(r["verdict"]), r["verdict_detail"]),
                 ("num", l2), ("num", _delta_l2_text(r)), (_verdict_class(r["l2_verdict"]), r["l2_verdict_detail"]),
                 *([("num", _num(r["sim_l2_hit_rate"], ".2f"))] if show_sim else []),
                 ("num", _num(r["ratio_to_vendor"], ".3f")), ("num", _num(r["tflops"], ".1f"))]
        tds = "".join(f'<td class="{esc(cls)}">{esc(text)}</td>' if cls else f"<td>{esc(text)}</td>"
                      for cls, text in cells)
        out.append(f'<tr class="{" ".join(classes)}">{tds}</tr>')
    out.append("</table>")
    return "".join(out)


def verdict_counts(verdicts: pd.Series, always: tuple[str, str] = (FASTER, SLOWER),
                   nothing: str = NOT_TIMED) -> str:
    """``0 faster, 0 slower, 6 no difference detected``; just ``not timed`` when every verdict
    is ``nothing`` (for L2: ``(L2_HIGHER, L2_LOWER)`` and NOT_PROFILED)."""
    if len(verdicts) and (verdicts == nothing).all():
        return nothing
    counts = verdicts.value_counts()
    return ", ".join(f"{counts.get(v, 0)} {v}" for v in dict.fromkeys([*always, *_ordered(verdicts)]))


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
        return "not timed: no comparison of speed possible"
    return "; ".join(dict.fromkeys(cands["verdict_detail"]))   # e.g. "no comparison: baseline ... failed"


def best_per_group(comparison: Comparison) -> pd.DataFrame:
    """One row per group: its best swizzle (among verdict faster) or why there is none, and
    the counts of its time verdicts."""
    t = comparison.table
    rows = []
    for _, grp in t.groupby(comparison.group_cols, sort=False):
        best = grp[grp["best"]]
        label = _join_labels(grp.head(1), comparison.group_cols).iloc[0]
        if not best.empty:
            b = best.iloc[0]
            variant = comparison.variant_label(best.head(1)).iloc[0]
            against = "" if "baseline" in comparison.variant_cols else f" vs {b['baseline']}"
            how = "95 % CI" if b["comparison"] == PAIRED else "band interval"
            text = (f"{variant}{against}: speedup {b['speedup']:.3f} [{b['speedup_lo']:.3f}, {b['speedup_hi']:.3f}] "
                    f"({how})" + (f", ΔL2 {b['l2_delta_pts']:+.2f} points" if np.isfinite(b["l2_delta_pts"]) else ""))
        else:
            text = _no_best_reason(grp)
        cands = grp[grp["verdict"] != BASELINE]
        rows.append({"group": label, "best": text, "has_best": not best.empty,
                     "verdicts": verdict_counts(cands["verdict"]) if len(cands) else "–"})
    return pd.DataFrame(rows, columns=["group", "best", "has_best", "verdicts"])


def _best_html(comparison: Comparison) -> str:
    best = best_per_group(comparison)
    if best.empty:
        return '<p class="skip">No groups.</p>'
    rows = "".join(f'<tr class="{"best" if r.has_best else ""}"><td>{esc(r.group)}</td><td>{esc(r.best)}</td>'
                   f"<td>{esc(r.verdicts)}</td></tr>" for r in best.itertuples(index=False))
    return ("<table><tr><th>Group</th><th>Best swizzle (verdict faster only)</th><th>Time verdicts</th></tr>"
            f"{rows}</table>")


def verdicts_per_swizzle(comparison: Comparison) -> pd.DataFrame:
    """One row per swizzle variant: its baseline(s), cells, and time and L2 verdict counts
    over the groups (e.g. ``0 faster, 0 slower, 6 no difference detected``)."""
    t = comparison.candidates.assign(variant=lambda f: comparison.variant_label(f))
    rows = [{"swizzle": variant, "baseline": _names(grp["baseline"]), "cells": len(grp),
             "time": verdict_counts(grp["verdict"]),
             "l2": verdict_counts(grp["l2_verdict"], (L2_HIGHER, L2_LOWER), NOT_PROFILED)}
            for variant, grp in t.groupby("variant", sort=False)]
    return pd.DataFrame(rows, columns=["swizzle", "baseline", "cells", "time", "l2"])


def _verdict_summary_html(comparison: Comparison) -> str:
    t = comparison.candidates
    if t.empty:
        return '<p class="skip">No swizzle other than a baseline finished: nothing was compared.</p>'
    time_part = verdict_counts(t["verdict"])
    l2_part = verdict_counts(t["l2_verdict"], (L2_HIGHER, L2_LOWER), NOT_PROFILED)
    items = "".join(f"<li>{esc(r.swizzle)}: {esc(r.time)} ({esc('vs ' + r.baseline if r.baseline else 'no baseline')}, "
                    f"{r.cells} cell{'s' if r.cells != 1 else ''}); L2: {esc(r.l2)}</li>"
                    for r in verdicts_per_swizzle(comparison).itertuples(index=False))
    return (f"<p>Time verdicts over {len(t)} compared cells: {esc(time_part)}. L2 verdicts: {esc(l2_part)}.</p>"
            f'<ul class="verdicts">{items}</ul>')


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


def methods_for(comparison: Comparison) -> list[str]:
    """The method notes that apply: paired and / or identity-run rules, then the common ones."""
    used = set(comparison.table["comparison"])
    return ((PAIRED_METHODS if PAIRED in used else []) + (IDENTITY_METHODS if BY_IDENTITY_RUN in used else [])
            + METHODS)


def render_html(data: ReportRuns, comparison: Comparison, failed: pd.DataFrame,
                figures: list[FigureBlock], facts: list[tuple[str, str]]) -> str:
    """The whole page; every dynamic text goes through ``esc``."""
    title = f"swizzlebench report: {data.experiment} / {data.title}"
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
        *[f"<li>{esc(m)}</li>" for m in methods_for(comparison)], "</ul>",
        "</body></html>",
    ]
    return "\n".join(parts)


# --------------------------------------------------------------------------------------
# Entry points
# --------------------------------------------------------------------------------------
def attach_to_sweep(client: MlflowClient, sweep_run_id: str, files: list[Path]) -> None:
    """Log ``files`` as artifacts ``report/<name>`` of the sweep's parent run."""
    for path in files:
        client.log_artifact(sweep_run_id, str(path), artifact_path="report")


def build_report(tracking_uri: str, experiment: str, sweep_run_id: str | None = None,
                 out_dir: str | Path | None = None, selection: Selection | None = None) -> Path:
    """Build the report of ``selection`` (default: the sweep ``sweep_run_id``, or the
    experiment's latest sweep) and return the path of its ``index.html``; ``table.csv``
    and ``failed.csv`` are written next to it (default folder:
    ``reports/<experiment>/<sweep id | experiment | run-<id> | ...>``) and, for a report
    of one sweep, all three are attached to its sweep run under ``report/``."""
    if selection is not None and sweep_run_id is not None:
        raise ValueError("give either sweep_run_id or selection, not both")
    started = time.perf_counter()
    client = MlflowClient(tracking_uri=tracking_uri)
    data = load_runs(client, experiment, selection or Selection.sweep(sweep_run_id), tracking_uri)
    loaded = time.perf_counter()
    comparison = build_comparison(data.runs)
    failed = failed_runs(data.runs)
    figures = make_figures(comparison)
    facts = header_facts(data, comparison, failed)
    page = render_html(data, comparison, failed, figures, facts)

    out = Path(out_dir) if out_dir is not None else Path("reports") / experiment / data.out_name
    out.mkdir(parents=True, exist_ok=True)
    html_path = out / "index.html"
    html_path.write_text(page, encoding="utf-8")
    table = comparison.table.reindex(columns=TABLE_COLUMNS)
    table.to_csv(out / "table.csv", index=False)
    failed.to_csv(out / "failed.csv", index=False)
    log.info("report of %d runs written to %s (load %.1f s, total %.1f s)", len(data.runs), html_path,
             loaded - started, time.perf_counter() - started)

    if data.attach_run_id:
        try:
            attach_to_sweep(client, data.attach_run_id, [html_path, out / "table.csv", out / "failed.csv"])
        except Exception as exc:  # the local report stands even if the artifact store is unreachable
            log.warning("report written to %s but not attached to sweep run %s: %s: %s",
                        html_path, data.attach_run_id, type(exc).__name__, exc)
    return html_path


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m harness.report", description=__doc__.split("\n\n")[0],
        epilog="Without --sweep, --experiment-view or --run: the experiment's latest sweep (the experiment "
               "view when it has none).")
    parser.add_argument("--experiment", required=True, help="MLflow experiment (the sweep name)")
    view = parser.add_mutually_exclusive_group()
    view.add_argument("--sweep", action="append", metavar="RUN_ID",
                      help="a sweep's parent run id (see --list-sweeps); repeat it to report several sweeps together")
    view.add_argument("--experiment-view", action="store_true",
                      help="the whole experiment: the latest FINISHED run of every spec (spec_hash), from any "
                           "sweep or single run")
    view.add_argument("--run", action="append", metavar="RUN_ID",
                      help="a run id: a job run stands for every run of its Hydra job (e.g. all shapes of one "
                           "`python -m harness` without -m), a sweep run for its jobs; repeatable")
    view.add_argument("--list-sweeps", action="store_true",
                      help="list the experiment's sweep runs (id, start, status, name) and exit")
    parser.add_argument("--out", default=None,
                        help="output folder (default: reports/<experiment>/<sweep run id | experiment | "
                             "run-<id> | sweeps-... | runs-...>)")
    parser.add_argument("--tracking-uri", default="sqlite:///mlflow.db", help="MLflow tracking URI")
    return parser


def selection_from_args(args: argparse.Namespace) -> Selection:
    """The view the command line asks for."""
    if args.experiment_view:
        return Selection("experiment")
    if args.run:
        return Selection("runs", tuple(args.run))
    if args.sweep:
        return Selection("sweeps", tuple(args.sweep))
    return Selection("latest")


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    try:
        if args.list_sweeps:
            print("\n".join(list_sweeps(MlflowClient(tracking_uri=args.tracking_uri), args.experiment)))
            return 0
        path = build_report(args.tracking_uri, args.experiment, out_dir=args.out, selection=selection_from_args(args))
    except (LookupError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
