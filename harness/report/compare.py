"""The comparison table: every finished job run judged against its baseline.

A *group* is one kernel x shape x num_warps (plus any other launch knob that varies
in the report, e.g. num_stages or tiles); a *cell* is one swizzle in a group.  Rules:

* **paired** (a run tagged ``compare.role``: the job timed its baseline ``compare.baseline``
  itself, in the same process, in interleaved rounds): the run's own ``speedup`` (baseline
  time / swizzle time) with its 95 % CI, ``verdict``, ``l2_delta_pts`` with its CI and
  ``l2_verdict`` are shown as logged; no identity job is needed.  A run tagged
  ``compare.same_order=true`` launches its baseline's tile order: "same order as baseline";
* **config**: every cell names the launch config it was measured on (tune mode's choice,
  param ``tune.config``, else the configured tiles, warps and stages); a tuned config whose
  choice was a near-tie (tag ``tune.near_tie=true``: several candidates timed within
  ``tune.tie_tolerance`` and the tie rule chose the simplest) is flagged, since a swizzle's
  effect can depend on the config;
* **identity run** (older runs without paired results): speedup = identity median time /
  swizzle median time of the same group; its interval treats each run's [p20, p80] band
  of repetition times as a noise band and takes the extreme ratios, ``[identity p20 /
  swizzle p80, identity p80 / swizzle p20]``; "faster" only when the whole interval is
  above 1, "slower" only when wholly below 1, otherwise "within noise" ("not timed" when
  either side has no time, e.g. CPU-only runs); a remap table equal to identity's
  (``params.remap.hash``) is "same order as baseline".  L2: delta = swizzle hit rate -
  identity hit rate, in percentage points; noise band = max(2 * sqrt(std_swizzle^2 +
  std_identity^2), 0.5 points); "higher" / "lower" only beyond the band.

Also :func:`failed_runs`: the runs that did not finish, with their reasons.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from harness.tune.best_vs_best import BEST_VS_BEST
from harness.report.labels import config_label, frame_column, shape_label, swizzle_label, tiles_label
from harness.report.prediction import VALIDATION_TAG, mark_simulated
from harness.job.verdict import L2, TIME
from harness.report.verdicts import (BASELINE, BY_IDENTITY_RUN, CANDIDATE, FASTER, IDENTITY, L2_VERDICT_KINDS,
                                     NO_BASELINE, NO_COMPARISON, NO_VERDICT, NOT_PROFILED, NOT_TIMED, PAIRED,
                                     ROLE_TAG, SAME_ORDER, TIME_VERDICT_KINDS, identity_l2_verdict,
                                     identity_time_verdict, l2_band, paired_verdict, speedup_interval)
from harness.storage.field_names import Metric, Param, Tag, metric_column, param_column, tag_column
from harness.storage.run_fields import (FAILED_GATE_TAG, PROFILER_REPORT_RESULTS_TAG, PROFILER_REPORT_TAG, QUESTION_TAG,
                                        SAME_ORDER_TAG, VERDICT_TAGS, flag_column, parse_verdict)
from harness.storage.tracking import SPOOL_PENDING_TAG, STATUS_REASON_TAG

OPTIONAL_GROUP_KEYS = ("num_stages", "tiles", "num_xcds", "dtype", "target", "seed")
GROUP_KEYS = ("kernel", "shape", "num_warps")

#: Text columns of a cell: column -> the run's param it is read from (its swizzle:
#: :func:`harness.report.labels.swizzle_label`).
CELL_TEXT = {"kernel": Param.KERNEL, "num_warps": Param.NUM_WARPS, "num_stages": Param.NUM_STAGES,
             "num_xcds": Param.NUM_XCDS, "dtype": Param.SHAPE_DTYPE, "target": Param.TARGET,
             "seed": Param.SEED, "group_size": Param.GROUP_SIZE}
#: Tags of a paired run: cell column -> tag.
CELL_TAGS = {"role": ROLE_TAG, "verdict_tag": VERDICT_TAGS[TIME], "l2_verdict_tag": VERDICT_TAGS[L2],
             "l2_source": Tag.L2_SOURCE,
             "same_order": SAME_ORDER_TAG, "bound": Tag.BOUND, "question": QUESTION_TAG,
             "sim_order_blind": Tag.SIM_ORDER_BLIND, "sim_validation": VALIDATION_TAG,
             "reused_from": "swizzlebench.reused_from", "profiler_report_results": PROFILER_REPORT_RESULTS_TAG}
#: Params of a run read as numbers: cell column -> param (the roofline's ceilings, TFLOP/s and B/s).
CELL_NUMBER_PARAMS = {"roof_peak_tflops": Param.ROOFLINE_PEAK_TFLOPS,
                      "roof_dram_bytes_per_s": Param.ROOFLINE_DRAM_BYTES_PER_S}
#: Metrics copied from the runs into the table (time in ms, rates in %, bytes).
RUN_METRICS = (Metric.TIME_MS_MEDIAN, Metric.TIME_MS_P20, Metric.TIME_MS_P80, Metric.TFLOPS, Metric.VENDOR_TIME_MS,
               Metric.RATIO_TO_VENDOR, Metric.MAX_REL_ERR, Metric.L2_HIT_RATE, Metric.L2_HIT_RATE_STD, Metric.L2_HITS,
               Metric.L2_MISSES, Metric.PROFILED_TIME_MS, Metric.DRAM_READ_BYTES, Metric.SIM_L2_HIT_RATE,
               Metric.PAIRED_ROUNDS, Metric.PAIRED_TIME_S, Metric.L2_PAIRS, Metric.L2_HIT_RATE_ERR,
               Metric.L2_ERR_COVERAGE, Metric.PCT_OF_PEAK, Metric.PCT_OF_ROOFLINE, Metric.ARITH_INTENSITY)
#: The compile stage's figures (harness/compile/build.py): table column -> metric
#: (registers per thread or VGPRs per lane, bytes, programs per CU / SM, spilled registers).
COMPILE_METRICS = {"compile_registers": Metric.COMPILE_REGISTERS, "compile_shared_bytes": Metric.COMPILE_SHARED_BYTES,
                   "compile_programs_per_cu": Metric.COMPILE_PROGRAMS_PER_CU, "compile_spills": Metric.COMPILE_SPILLS,
                   "compile_spill_bytes": Metric.COMPILE_SPILL_BYTES}
#: ... and its text: table column -> param.
COMPILE_TEXT = {"compile_arch": Param.COMPILE_ARCH, "compile_limiter": Param.COMPILE_LIMITER}
#: A paired run's own comparison metrics -> the table column they become.
PAIRED_METRICS = {Metric.SPEEDUP: "speedup", Metric.SPEEDUP_CI_LO: "speedup_lo", Metric.SPEEDUP_CI_HI: "speedup_hi",
                  Metric.BASELINE_TIME_MS: "baseline_time_ms", Metric.L2_DELTA_PTS: "l2_delta_pts",
                  Metric.L2_DELTA_CI_LO: "l2_delta_lo", Metric.L2_DELTA_CI_HI: "l2_delta_hi",
                  Metric.BASELINE_L2_HIT_RATE: "baseline_l2_hit_rate"}


# --------------------------------------------------------------------------------------
# The comparison table
# --------------------------------------------------------------------------------------
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

    def kernel_label(self, frame: pd.DataFrame) -> pd.Series:
        """``igemm · w8``: the group without its shape, and without a knob that follows the
        shape (one value per shape, several over the kernel's shapes: a per-shape config of
        tune=table or tune=fastest), which is the kernel's own choice, not another kernel."""
        per_shape = frame.groupby(["kernel", "shape"])
        per_kernel = frame.groupby("kernel")
        return _join_labels(frame, [c for c in self.group_cols if c != "shape" and (
            c == "kernel" or per_shape[c].nunique().max() > 1 or per_kernel[c].nunique().max() == 1)])

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


def _text(frame: pd.DataFrame, column: str) -> pd.Series:
    """Column ``column`` of ``frame`` as text, empty where a run has no value."""
    return frame_column(frame, column, "").fillna("").astype(str)


def _cells(runs: pd.DataFrame) -> pd.DataFrame:
    """One row per FINISHED run: its group and variant keys, metrics and paired fields."""
    finished = runs[runs["status"] == "FINISHED"] if "status" in runs else runs.iloc[0:0]
    cells = finished[["run_id", "run_name", "start_ms"]].copy()
    for name, source in CELL_TEXT.items():
        cells[name] = frame_column(finished, param_column(source), "?").fillna("?").astype(str)
    cells["swizzle"] = swizzle_label(finished)
    cells["shape"] = shape_label(finished)
    cells["tiles"] = tiles_label(finished)
    cells["config"] = config_label(finished)
    # best vs best: a near-tie on either side
    cells["tune_near_tie"] = (flag_column(frame_column(finished, tag_column(Tag.TUNE_NEAR_TIE), "")) |
                              flag_column(frame_column(finished, tag_column(Tag.BASELINE_TUNE_NEAR_TIE), "")))
    cells["tune_runner_ups"] = _text(finished, param_column(Param.TUNE_RUNNER_UPS))
    cells["baseline_config"] = _text(finished, param_column(Param.BASELINE_CONFIG))  # best vs best
    cells["remap_hash"] = frame_column(finished, param_column(Param.REMAP_HASH))
    cells["compare_baseline"] = _text(finished, param_column(Param.COMPARE_BASELINE))
    for name, tag in CELL_TAGS.items():
        cells[name] = _text(finished, tag_column(tag))
    # The profiler's report file (ncu's .ncu-rep) where the run kept one: its artifact's location.
    report = _text(finished, tag_column(PROFILER_REPORT_TAG))
    where = frame_column(finished, "artifact_uri", "").fillna("").astype(str).str.rstrip("/")
    cells["profiler_report"] = (where + "/" + report).where(report != "", "")
    for name in RUN_METRICS:
        cells[name] = pd.to_numeric(frame_column(finished, metric_column(name)), errors="coerce")
    for name, param in CELL_NUMBER_PARAMS.items():
        cells[name] = pd.to_numeric(frame_column(finished, param_column(param)), errors="coerce")
    for name, metric in COMPILE_METRICS.items():
        cells[name] = pd.to_numeric(frame_column(finished, metric_column(metric)), errors="coerce")
    for name, source in COMPILE_TEXT.items():
        cells[name] = _text(finished, param_column(source))
    for name, column in PAIRED_METRICS.items():
        cells[f"paired_{column}"] = pd.to_numeric(frame_column(finished, metric_column(name)), errors="coerce")
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

    table["verdict"] = [identity_time_verdict(s, lo, hi) for s, lo, hi in
                        zip(table["speedup"], table["speedup_lo"], table["speedup_hi"])]
    table.loc[no_base, "verdict"] = NO_BASELINE
    table.loc[table["time_ms_median"].isna(), "verdict"] = NOT_TIMED
    table.loc[is_identity, "verdict"] = BASELINE
    table["l2_verdict"] = [identity_l2_verdict(d, b) for d, b in zip(table["l2_delta_pts"], table["l2_band_pts"])]
    table.loc[no_base & table["l2_hit_rate"].notna(), "l2_verdict"] = NO_BASELINE
    table.loc[is_identity, "l2_verdict"] = BASELINE
    same = (~is_identity) & table["remap_hash"].notna() & (table["remap_hash"] == table["id_remap_hash"])
    table.loc[same, ["verdict", "l2_verdict"]] = SAME_ORDER
    table["same_order_cell"] = same
    return table


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
    table.loc[cand, "verdict"] = [paired_verdict(parse_verdict(t, TIME), TIME_VERDICT_KINDS, a)
                                  for t, a in zip(table.loc[cand, "verdict_tag"], time_absent[rows])]
    table.loc[cand, "l2_verdict"] = [paired_verdict(parse_verdict(t, L2), L2_VERDICT_KINDS, a)
                                     for t, a in zip(table.loc[cand, "l2_verdict_tag"], l2_absent[rows])]
    same = cand & flag_column(table["same_order"])
    table.loc[same & ~table["verdict"].isin([NOT_TIMED, NO_COMPARISON]), "verdict"] = SAME_ORDER
    table.loc[same & (table["l2_verdict"] != NOT_PROFILED), "l2_verdict"] = SAME_ORDER
    table.loc[paired & ~cand, ["verdict", "l2_verdict"]] = BASELINE
    table["same_order_cell"] = table["same_order_cell"].where(~paired, same)
    return paired


def _verdict_details(table: pd.DataFrame, paired: pd.Series) -> None:
    """``verdict_detail`` / ``l2_verdict_detail``: a paired run's own verdict text (e.g.
    ``no difference detected (CI [0.994, 1.003])``) where its word stands, else the word."""
    for word_col, tag_col, axis in (("verdict", "verdict_tag", TIME), ("l2_verdict", "l2_verdict_tag", L2)):
        parsed = [parse_verdict(t, axis) for t in table[tag_col]]
        tagged = pd.Series([v is not None for v in parsed], index=table.index)
        # a same-order speedup is the remap code's cost, a result: the job's own text says it
        code_cost = pd.Series([v is not None and v.same_order and axis == TIME for v in parsed], index=table.index)
        own = paired & tagged & ((table[word_col] != SAME_ORDER) | code_cost) & (table[word_col] != BASELINE)
        table[f"{word_col}_detail"] = table[tag_col].where(own, table[word_col])
    bvb = paired & (table["question"] == BEST_VS_BEST) & (table["verdict"] != BASELINE)   # which question it answers
    table.loc[bvb, "verdict_detail"] = BEST_VS_BEST + ": " + table.loc[bvb, "verdict_detail"]


def _comparison_notes(table: pd.DataFrame, paired: pd.Series) -> list[str]:
    """What a reader must know about how the cells were compared."""
    notes: list[str] = []
    cand = table["verdict"] != BASELINE
    n_paired = int((paired & cand).sum())
    by_identity = cand & ~paired
    timed = paired & cand & ~(table["simulated"] & table["speedup"].isna())   # not a CPU's predictions
    if timed.any():
        notes.append(f"{int(timed.sum())} cell(s) carry a paired comparison: the job timed its baseline itself, in the "
                     "same process (interleaved rounds); speedup and measured L2 delta are shown with their 95 % CIs.")
    predicted = cand & table["simulated"] & table["l2_delta_pts"].notna()
    if predicted.any():
        notes.append(f"{int(predicted.sum())} cell(s) compare simulated L2 hit rates: each ΔL2 is a prediction of the "
                     "L2 model (profiler=sim) for the swizzle and for its baseline, shown with the band the model held "
                     "on hardware or 'not validated on <target>'; nothing in them was measured.")
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
    near = table[cand & table["tune_near_tie"]]
    if len(near):
        notes.append(f"{len(near)} compared cell(s) were measured on a near-tie config (flagged in All cells): "
                     "tune mode found several candidates within tune.tie_tolerance of the fastest, and its tie "
                     "rule chose the simplest; the swizzle's effect may differ on the runner-ups (each run's "
                     "param tune.runner_ups, and table.csv, list them with their gaps).")
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
    # A launch knob joins the group key only if it varies *within* a kernel family on one shape
    # (a launch-config sweep); configs chosen per shape (tune=table, tune=fastest) are the
    # kernel's own, and tiles always differ between families, which the kernel column separates.
    group_cols = list(GROUP_KEYS) + [k for k in OPTIONAL_GROUP_KEYS
                                     if len(cells) and cells.groupby(["kernel", "shape"])[k].nunique().max() > 1]
    variant_cols = ["swizzle"] + (["group_size"] if cells["group_size"].nunique() > 1 else [])
    if cells.loc[cells["compare_baseline"] != "", "compare_baseline"].nunique() > 1:
        variant_cols.append("baseline")
    if cells.loc[cells["question"] != "", "question"].nunique() > 1:   # same config and best vs best, side by side
        variant_cols.append("question")

    # One row per cell: a later run of the same cell supersedes an earlier one.
    key = group_cols + ["swizzle", "group_size", "compare_baseline", "question"]
    cells = cells.sort_values("start_ms", kind="stable")
    before = len(cells)
    cells = cells.drop_duplicates(subset=key, keep="last")
    superseded = before - len(cells)
    notes = [f"{superseded} finished run(s) were superseded by a later run of the same configuration; the "
             "table shows the latest."] if superseded else []

    table = _judge_by_identity(cells, group_cols)
    paired = _apply_paired(table)
    _verdict_details(table, paired)
    mark_simulated(table)
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
#: speedup_hi: the 95 % CI of a paired cell, the [p20, p80]-band interval of the others;
#: l2_delta_lo / l2_delta_hi: a measured delta's 95 % CI, a simulated one's band (prediction
#: +- l2_delta_band_pts; empty where the model is not validated, l2_validation says so).
#: profiler_report: where the run's profiler report file is (ncu's .ncu-rep: its artifact's URI or
#: path), profiler_report_results: the IDs of the cell's own results in it (``10-19``).
TABLE_COLUMNS = [
    "kernel", "shape", "num_warps", "num_stages", "tiles", "num_xcds", "dtype", "target", "seed",
    "config", "baseline_config", "question", "tune_near_tie", "tune_runner_ups", "bound", "pct_of_peak", "pct_of_roofline", "swizzle", "group_size", "baseline", "comparison", "run_id", "run_name", "reused_from",
    "time_ms_median", "time_ms_p20", "time_ms_p80", "baseline_time_ms", "paired_rounds", "paired_time_s",
    "id_run_id", "id_time_ms_median", "id_time_ms_p20", "id_time_ms_p80",
    "speedup", "speedup_lo", "speedup_hi", "verdict", "verdict_detail",
    "l2_hit_rate", "l2_hit_rate_std", "l2_hit_rate_err", "l2_err_coverage", "baseline_l2_hit_rate", "id_l2_hit_rate", "id_l2_hit_rate_std",
    "l2_delta_pts", "l2_delta_lo", "l2_delta_hi", "l2_band_pts", "l2_pairs", "l2_source", "l2_verdict",
    "l2_verdict_detail", "simulated", "l2_validation", "l2_delta_band_pts", "sim_order_blind",
    "sim_l2_hit_rate", "l2_hits", "l2_misses", "dram_read_bytes", "profiled_time_ms", "profiler_report",
    "profiler_report_results",
    "ratio_to_vendor", "vendor_time_ms", "tflops", "max_rel_err", "best",
    "compile_arch", "compile_registers", "compile_shared_bytes", "compile_programs_per_cu", "compile_limiter",
    "compile_spills", "compile_spill_bytes",
]



def failed_runs(runs: pd.DataFrame) -> pd.DataFrame:
    """Every job run that did not finish: FAILED with its reason, or never terminated."""
    if runs.empty:
        return pd.DataFrame(columns=["run_id", "run_name", "status", "gate", "kernel", "swizzle", "shape", "reason"])
    bad = runs[runs["status"] != "FINISHED"]
    reason = _text(bad, tag_column(STATUS_REASON_TAG))
    unfinished = (bad["status"] != "FAILED") & (reason == "")
    reason = reason.where(~unfinished, "run never finished (status " + bad["status"].astype(str) +
                          "): the job crashed, was killed or is still running")
    reason = reason.where(reason != "", "FAILED without a status_reason tag")
    out = pd.DataFrame({
        "run_id": bad["run_id"], "run_name": bad["run_name"], "status": bad["status"],
        "gate": _text(bad, tag_column(FAILED_GATE_TAG)), "kernel": _text(bad, param_column(Param.KERNEL)),
        "swizzle": _text(bad, param_column(Param.SWIZZLE)),
        "shape": shape_label(bad), "reason": reason,
    })
    return out.sort_values(["run_name", "run_id"], kind="stable").reset_index(drop=True)



def spooled_note(runs: pd.DataFrame) -> str | None:
    """One line naming the job runs whose results are still only in the spool (ended KILLED
    in the store, tag ``SPOOL_PENDING_TAG``: harness.storage.tracking), or None if none."""
    if runs.empty:
        return None
    held = runs[_text(runs, tag_column(SPOOL_PENDING_TAG)) != ""]
    if held.empty:
        return None
    names = ", ".join(sorted(held["run_name"].astype(str)))
    return (f"{len(held)} run(s) are still only in the spool, not in this report: {names}. Log them with "
            f"`python -m harness.storage.sync` (failed.csv names each one's spool record and the command), then "
            f"rebuild this report.")
