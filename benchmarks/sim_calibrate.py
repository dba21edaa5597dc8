"""Calibrate the simulated L2 against ncu, and say how far to trust it, from held-out cells.

The simulator gives each L2 domain all of ``l2_bytes``.  An H100 / H200 L2 is two
partitions, and an SM's loads of lines homed in the far partition can be duplicated in
the near one, so the capacity the traffic effectively has lies between half and all of
it.  That share, ``l2_capacity_fraction`` f, is the simulator's one free parameter.  This
script fits it on half of the profiled cells of an MLflow store and reports the errors on
the other half, which is the figure a prediction should be quoted with::

    python benchmarks/sim_calibrate.py --uri sqlite:///tmp/h100_calibrate.db --target h100 \\
        --out OUT/h100

Input: job runs profiled by ncu (``tags.profiler = 'ncu'``, FINISHED, kind ``job``).  One
*cell* is one (kernel, shape, swizzle, config); it is re-simulated on the CPU, with its
baseline (``params.compare.baseline``, else identity), at every f of ``--fractions`` (the
Triton interpreter builds the remap tables; numba replays).  Occupancy is the run's
``compile.programs_per_cu`` where it was logged, else the target's default.

Split: the distinct shape names, sorted, alternate between the fit half and the held-out
half, so no shape is seen by both.  f minimises the fit half's mean absolute error of the
all-traffic hit rate (ncu's all traffic, stores included: its lookup counters since 2026-11-26, its
pass-mixed ``lts__t_sector_hit_rate.pct`` before, column ``hit_rate_counters``; vs the simulator's
``hit_rate``); ties go to the smaller delta error.  Reported, per half and per kernel, in
percentage points: MAE of the all-traffic hit rate, MAE of the read hit rate (ncu's read
lookups vs ``read_hit_rate``), MAE of the swizzle-minus-baseline delta, and the sign
agreement on every cell whose measured delta is at least ``--sign-min`` points (default
1) with a 95 % CI that excludes 0 (a predicted delta under ``--sign-pred-min``, 0.05 point,
predicts no effect and counts as wrong).  Deltas come from the store's paired ABBA figures
(``l2_delta_pts`` and its CI), each taken against the pooled baseline launches of its layer
and config (``--delta pooled``, the default: :func:`pool_deltas`) or against its own paired
ones (``--delta paired``); stores older than the pairs get the unpaired difference of the two
cells, with the CI 1.96 * sqrt(std_a^2 / n_a + std_b^2 / n_b) from the repeats.

Writes ``cells.csv`` (every cell, measured and predicted at the fitted f, its half),
``summary.md`` and ``calibration.json`` (the held-out figures: the ``sim_calibration``
record of ``conf/target/<target>.yaml`` that :func:`harness.profilers.sim.target.calibration` reads).
"""
from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import re
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Mapping

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
if __name__ == "__main__":   # remap tables on the CPU; imported (by a test), the process decides
    os.environ.setdefault("TRITON_INTERPRET", "1")

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from harness.profilers.ncu import METRIC_L2_HIT_RATE  # noqa: E402
from harness.profilers.sim.bands import ORDER_BLIND  # noqa: E402
from harness.profilers.sim.target import MERGE_UNITS, REFILLS, STEP_PHASES, STORE_INSERTS, TMA_UNITS  # noqa: E402

#: The grid of l2_capacity_fraction tried: half the L2 (every line duplicated) to all of it.
FRACTIONS = (0.5, 0.625, 0.75, 0.875, 1.0)

SHAPE_FIELDS = ("N", "C", "H", "W", "F", "R", "S", "stride", "padding")


@dataclass(frozen=True)
class SimSpec:
    """What one simulation needs: hashable, so equal specs share one simulation."""

    kernel: str
    shape: tuple[tuple[str, object], ...]   # ConvShape fields
    tiles: tuple[tuple[str, int], ...]
    swizzle: str
    num_xcds: int
    group_size: int
    occupancy: int | None = None
    formula: str | None = None              # swizzle=custom: the formula; swizzle is its label
    swizzle_fn: str | None = None           # a user remap's import path
    kernel_target: str | None = None        # a user kernel class's import path
    spill_bytes: int = 0                    # bytes one program spills (the compile stage's, on the target)

    def with_swizzle(self, name: str, formula: str | None = None) -> "SimSpec":
        from dataclasses import replace

        return replace(self, swizzle=name, formula=formula, swizzle_fn=None)


# -----------------------------------------------------------
# Runs -> cells (pure)

def _get(row: Mapping, key: str):
    """``row[key]``, None when the column is absent or the value missing."""
    value = row.get(key) if hasattr(row, "get") else None
    return None if value is None or (isinstance(value, float) and math.isnan(value)) else value


def config_label(row: Mapping, tile_names: Iterable[str]) -> str:
    """``BLOCK_M=128,BLOCK_N=128/w8/s3``: the launch config of a run."""
    tiles = ",".join(f"{t}={int(float(row[f'params.tile.{t}']))}" for t in tile_names)
    return f"{tiles}/w{_get(row, 'params.num_warps')}/s{_get(row, 'params.num_stages')}"


def _baseline_of(name: str) -> tuple[str, str | None]:
    """``params.compare.baseline`` -> (swizzle name, formula): a built-in or family label, else a formula."""
    from swizzles import SWIZZLES
    from swizzles.families import is_family_label

    return (name, None) if name in SWIZZLES or is_family_label(name) else ("custom", name)


def cell_of(row: Mapping) -> dict:
    """One run's cell: its identity, measured figures (%, points) and simulation spec."""
    from kernels import get_kernel

    kernel = row["params.kernel"]
    tile_cols = sorted(k[len("params.tile."):] for k in row.keys()
                       if k.startswith("params.tile.") and _get(row, k) is not None)
    try:
        tile_names = list(get_kernel(kernel).tile_names)
    except Exception:   # a user kernel: the tiles it logged
        tile_names = tile_cols
    # knobs a run did not log (igemm_fast's AMD-only ones on NVIDIA) take the kernel's defaults
    tiles = tuple((t, int(float(row[f"params.tile.{t}"]))) for t in tile_names if t in tile_cols)
    shape = (("name", row["params.shape.name"]), ("dtype", row.get("params.shape.dtype") or "float16"),
             *((k, int(float(row[f"params.shape.{k}"]))) for k in SHAPE_FIELDS))
    occupancy = _get(row, "metrics.compile.programs_per_cu")
    spills = _get(row, "metrics.compile.spill_bytes_per_program")
    if spills is None and _get(row, "metrics.compile.spill_bytes") and _get(row, "params.compile.arch"):
        from harness.compile.build import spill_bytes_per_program   # stores logged before the metric

        spills = spill_bytes_per_program(row["params.compile.arch"], row["metrics.compile.spill_bytes"],
                                         int(float(row["params.num_warps"])))
    spec = SimSpec(kernel=kernel, shape=shape, tiles=tiles, swizzle=row["params.swizzle"],
                   num_xcds=int(float(row["params.num_xcds"])), group_size=int(float(row["params.group_size"])),
                   occupancy=int(occupancy) if occupancy is not None else None,
                   formula=_get(row, "params.swizzle.formula"), swizzle_fn=_get(row, "params.swizzle.fn"),
                   kernel_target=_get(row, "params.kernel.target"), spill_bytes=int(spills or 0))
    baseline = _get(row, "params.compare.baseline") or "identity"
    read = _get(row, "metrics.l2_read_hit_rate")
    if read is None and _get(row, "metrics.l2_hits") is not None and _get(row, "metrics.l2_misses") is not None:
        total = row["metrics.l2_hits"] + row["metrics.l2_misses"]
        read = 100.0 * row["metrics.l2_hits"] / total if total else None
    return {
        "kernel": kernel, "shape": row["params.shape.name"], "swizzle": row["params.swizzle"],
        "config": config_label(row, [t for t, _ in tiles]), "num_xcds": spec.num_xcds,
        "group_size": spec.group_size, "baseline": baseline, "occupancy": spec.occupancy,
        "measured_hit": _get(row, "metrics.l2_hit_rate"), "measured_hit_std": _get(row, "metrics.l2_hit_rate_std"),
        "samples": _get(row, "metrics.l2_samples"), "measured_read": read,
        "measured_delta": _get(row, "metrics.l2_delta_pts"), "delta_ci_lo": _get(row, "metrics.l2_delta_ci_lo"),
        "delta_ci_hi": _get(row, "metrics.l2_delta_ci_hi"),
        "baseline_measured": _get(row, "metrics.baseline_l2_hit_rate"),
        "measured_read_delta": _get(row, "metrics.l2_read_delta_pts"),
        "read_delta_ci_lo": _get(row, "metrics.l2_read_delta_ci_lo"),
        "read_delta_ci_hi": _get(row, "metrics.l2_read_delta_ci_hi"),
        "delta_source": "paired" if _get(row, "metrics.l2_delta_pts") is not None else None,
        "sim_online": _get(row, "metrics.sim_l2_hit_rate"), "device": _get(row, "tags.device"),
        "run_id": row.get("run_id"), "spec": spec, "baseline_spec": spec.with_swizzle(*_baseline_of(baseline)),
        "same_permutation": _same_permutation(row),
        # The read lookups' counts (sectors, means over the repeats) and the bytes DRAM served:
        # what the hit rates are made of (:func:`count_errors`).
        "measured_read_hits": _get(row, "metrics.l2_hits"), "measured_read_misses": _get(row, "metrics.l2_misses"),
        "measured_dram_bytes": _get(row, "metrics.dram_read_bytes"),
        # What the all-traffic rate was taken from: the tag of runs since the ncu profiler counts
        # lookups (harness.profilers.ncu.L2_HIT_RATE_COUNTERS); before it, ncu's pass-mixed percentage.
        "hit_rate_counters": _get(row, "tags.l2_hit_rate_counters") or (METRIC_L2_HIT_RATE
                                                                      if _get(row, "tags.profiler") == "ncu" else None),
    }


def _same_permutation(row: Mapping) -> bool | None:
    """Whether the run's order is its baseline's own permutation (an A/A pair: colmajor on a grid
    of one column, say), by the remap hashes the run logged; None when it logged none."""
    mine, theirs = _get(row, "params.remap.hash"), _get(row, "params.baseline.remap.hash")
    return None if mine is None or theirs is None else mine == theirs


def fill_unpaired_deltas(cells: pd.DataFrame) -> pd.DataFrame:
    """Deltas for cells without a paired one (old stores): the cell minus its baseline's cell
    (same kernel, shape and config), the CI from both cells' repeat spreads (normal, 95 %)."""
    cells = cells.copy()
    key = ["kernel", "shape", "config"]
    base = cells.set_index(key + ["swizzle"])
    for i, c in cells.iterrows():
        if c["swizzle"] == c["baseline"] or not pd.isna(c["measured_delta"]):
            continue
        k = (c["kernel"], c["shape"], c["config"], c["baseline"])
        if k not in base.index:
            continue
        b = base.loc[[k]].iloc[0]
        delta = c["measured_hit"] - b["measured_hit"]
        var = sum((s or 0.0) ** 2 / (n or 1.0) for s, n in ((c["measured_hit_std"], c["samples"]),
                                                             (b["measured_hit_std"], b["samples"])))
        half = 1.96 * math.sqrt(var)
        cells.loc[i, ["measured_delta", "delta_ci_lo", "delta_ci_hi", "delta_source"]] = \
            [delta, delta - half, delta + half, "unpaired"]
        if pd.isna(c["baseline_measured"]):
            cells.loc[i, "baseline_measured"] = b["measured_hit"]
    for i, c in cells.iterrows():   # reads: the cells' difference, no CI (no per-repeat read rates logged)
        k = (c["kernel"], c["shape"], c["config"], c["baseline"])
        if c["swizzle"] != c["baseline"] and pd.isna(c.get("measured_read_delta", math.nan)) and k in base.index:
            cells.loc[i, "measured_read_delta"] = c["measured_read"] - base.loc[[k]].iloc[0]["measured_read"]
    return cells


#: How a cell's measured delta against its baseline is taken (``--delta``): ``pooled`` (default)
#: or ``paired`` (:func:`pool_deltas`).
DELTAS = ("pooled", "paired")


def pool_deltas(cells: pd.DataFrame) -> pd.DataFrame:
    """``cells`` with each paired delta (all traffic and reads, points) taken against the *pooled*
    baseline: the mean of the baseline launches paired with every candidate of the same kernel,
    shape and config (5 candidates x 8 ABBA pairs: 40 identity launches on a ResNet layer, where
    one cell's paired delta sees 8).  Its CI is the paired CI's half-width around it, which, with
    launches that do not share noise, is the wider of the two.

    Why: identity's own hit rate spreads by 2.4-4.7 points from launch to launch on small grids
    (``STAGE=noise``), and the same deltas measured twice lie 1.00 point apart paired, 0.61
    pooled (the held-out half, 41 cells; 1.21 and 0.97 on fresh2 measured on two nodes).  The
    paired figures stay as ``paired_delta`` and ``paired_read_delta``.  Cells without a paired
    delta (stores older than the ABBA pairs: already the difference of two cells) and cells
    already pooled are left as they are."""
    cells = cells.copy()
    source = cells["delta_source"] if "delta_source" in cells else pd.Series(None, index=cells.index)
    if (source == "pooled").any():
        return cells
    cells["paired_delta"] = cells["measured_delta"]
    cells["paired_read_delta"] = cells.get("measured_read_delta", math.nan)
    paired = source == "paired"
    if not paired.any():
        return cells
    paired &= cells["swizzle"] != cells["baseline"]
    key = ["kernel", "shape", "config", "baseline"]
    for measured, delta, lo, hi in (("measured_hit", "measured_delta", "delta_ci_lo", "delta_ci_hi"),
                                    ("measured_read", "measured_read_delta", "read_delta_ci_lo",
                                     "read_delta_ci_hi")):
        if delta not in cells or lo not in cells:
            continue
        own = cells[measured] - cells[delta]          # each cell's paired baseline mean
        pooled = own[paired].groupby([cells.loc[paired, k] for k in key]).transform("mean")
        half = (cells[hi] - cells[lo]) / 2
        new = cells.loc[pooled.index, measured] - pooled
        cells.loc[pooled.index, delta] = new
        cells.loc[pooled.index, lo] = new - half[pooled.index]
        cells.loc[pooled.index, hi] = new + half[pooled.index]
    cells.loc[paired, "delta_source"] = "pooled"
    cells.loc[paired, "baseline_measured"] = (cells["measured_hit"] - cells["measured_delta"])[paired]
    return cells


def cells_from_runs(runs: pd.DataFrame) -> pd.DataFrame:
    """One row per cell from MLflow's ``search_runs`` frame: ncu job runs that finished, the
    latest run of each cell."""
    keep = runs
    if "tags.profiler" in keep:
        keep = keep[keep["tags.profiler"] == "ncu"]
    if "status" in keep:
        keep = keep[keep["status"] == "FINISHED"]
    if "tags.swizzlebench.kind" in keep:
        keep = keep[keep["tags.swizzlebench.kind"] == "job"]
    keep = keep[keep["metrics.l2_hit_rate"].notna()]
    if "start_time" in keep:
        keep = keep.sort_values("start_time", ascending=False)
    cells = pd.DataFrame([cell_of(r) for _, r in keep.iterrows()])
    cells = cells.drop_duplicates(subset=["kernel", "shape", "swizzle", "config", "num_xcds", "group_size",
                                          "baseline"], keep="first")
    cells = cells.astype({"measured_delta": float, "delta_ci_lo": float, "delta_ci_hi": float,
                          "baseline_measured": float, "measured_read": float, "measured_read_delta": float,
                          "read_delta_ci_lo": float, "read_delta_ci_hi": float}, errors="ignore")
    cells = fill_unpaired_deltas(cells)
    return cells.sort_values(["kernel", "shape", "config", "swizzle"]).reset_index(drop=True)


# -----------------------------------------------------------
# Split, predict, fit, summarise (pure: ``simulate`` is injected)

def split_by_shape(shapes: Iterable[str]) -> dict[str, str]:
    """shape name -> ``"fit"`` or ``"holdout"``: the sorted distinct names, alternately."""
    return {s: ("fit", "holdout")[i % 2] for i, s in enumerate(sorted(set(shapes)))}


Simulate = Callable[[SimSpec, float], tuple[float, float]]   # (spec, f) -> (hit %, read hit %)


def predict(cells: pd.DataFrame, simulate: Simulate, fraction: float) -> pd.DataFrame:
    """``cells`` with the simulator's figures at ``fraction``: ``pred_hit``, ``pred_read``,
    ``pred_baseline_hit`` and ``pred_delta`` (candidate minus baseline, points)."""
    out = cells.copy()
    sims = [simulate(s, fraction) for s in cells["spec"]]
    base = [simulate(s, fraction) for s in cells["baseline_spec"]]
    out["pred_hit"] = [h for h, _ in sims]
    out["pred_read"] = [r for _, r in sims]
    out["pred_baseline_hit"] = [h for h, _ in base]
    out["pred_delta"] = out["pred_hit"] - out["pred_baseline_hit"]
    out["pred_read_delta"] = out["pred_read"] - [r for _, r in base]
    classes = getattr(simulate, "classes", {})   # the simulator's layer_class of each spec, if it says
    out["layer_class"] = [classes.get(s, "") for s in cells["spec"]]
    blind = getattr(simulate, "blind", {})       # ... and whether its grid is order-blind
    out["order_blind"] = [blind.get(s) for s in cells["spec"]]
    counts = getattr(simulate, "counts", {})     # ... and its read lookups' counts, if it keeps them
    if counts:
        hits, misses, merged = (np.array([counts.get((s, fraction), (math.nan,) * 3)[i] for s in cells["spec"]],
                                         dtype=float) for i in range(3))
        out["pred_read_lookups"], out["pred_read_misses"], out["pred_read_requests"] = (
            hits + misses, misses, hits + misses + merged)
    return out


def count_errors(cells: pd.DataFrame) -> dict:
    """What the hit rates are made of, on the cells with counts on both sides: the median and the
    mean absolute relative error (%) of the read lookups and of the read misses (ncu's tex read
    lookups vs the simulator's), and the measured and modelled misses per 32 B sector DRAM served
    (medians).  A hit rate can come out right from lookups and misses both wrong; the counts say
    which of the coalescer (lookups) and the partitions and capacity (misses) is off.  Empty when
    no cell has both."""
    need = ["measured_read_hits", "measured_read_misses", "pred_read_lookups", "pred_read_misses"]
    if any(c not in cells for c in need):
        return {}
    c = cells.dropna(subset=need)
    c = c[(c["measured_read_misses"] > 0) & (c["pred_read_misses"] > 0)]
    if c.empty:
        return {}
    lookups = c["measured_read_hits"].astype(float) + c["measured_read_misses"].astype(float)
    rel = {"lookups": 100.0 * (c["pred_read_lookups"].astype(float) / lookups - 1.0),
           "misses": 100.0 * (c["pred_read_misses"].astype(float) / c["measured_read_misses"].astype(float) - 1.0)}
    out = {"n": int(len(c))}
    for key, r in rel.items():
        out[f"{key}_err_median"] = float(r.median())
        out[f"{key}_err_mae"] = float(r.abs().mean())
    if "measured_dram_bytes" in c:
        dram = c["measured_dram_bytes"].astype(float) / 32.0
        ok = dram > 0
        if ok.any():
            out["miss_per_dram_measured"] = float((c.loc[ok, "measured_read_misses"].astype(float) / dram[ok]).median())
            out["miss_per_dram_pred"] = float((c.loc[ok, "pred_read_misses"].astype(float) / dram[ok]).median())
    return out


def count_groups(cells: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """The groups :func:`counts_table` shows: all cells, then each kernel and each layer class."""
    groups = {"all": cells}
    groups.update({f"kernel {k}": g for k, g in cells.groupby("kernel")})
    if "layer_class" in cells:
        groups.update({f"class {k}": g for k, g in cells.groupby("layer_class") if k})
    return groups


def counts_table(groups: Mapping[str, pd.DataFrame]) -> str:
    """Markdown table of :func:`count_errors` per group of cells (empty string: no counts)."""
    rows = {name: count_errors(g) for name, g in groups.items()}
    rows = {k: v for k, v in rows.items() if v}
    if not rows:
        return ""
    lines = ["| cells | n | lookups: median / mean abs. error (%) | misses: median / mean abs. error (%) "
             "| misses per DRAM sector: measured / model |", "|---|---:|---:|---:|---:|"]
    for name, e in rows.items():
        ratio = (f"{e['miss_per_dram_measured']:.2f} / {e['miss_per_dram_pred']:.2f}"
                 if "miss_per_dram_measured" in e else "-")
        lines.append(f"| {name} | {e['n']} | {e['lookups_err_median']:+.1f} / {e['lookups_err_mae']:.1f} | "
                     f"{e['misses_err_median']:+.1f} / {e['misses_err_mae']:.1f} | {ratio} |")
    return "\n".join(lines)


def _mae(a: pd.Series, b: pd.Series) -> float:
    err = (a.astype(float) - b.astype(float)).abs().dropna()
    return float(err.mean()) if len(err) else math.nan


def _has_delta(cells: pd.DataFrame) -> pd.Series:
    return (cells["swizzle"] != cells["baseline"]) & cells["measured_delta"].notna()


def _flag(cells: pd.DataFrame, column: str) -> pd.Series:
    """A yes/no column of ``cells`` as bools: True where it says True (a bool, or text read back
    from a CSV), False where it says otherwise, is empty, or is not there (a cells.csv written
    before the column)."""
    if column not in cells:
        return pd.Series(False, index=cells.index)
    return cells[column].astype(str).str.lower() == "true"


def _deltas_of_other_orders(cells: pd.DataFrame) -> pd.DataFrame:
    """The cells with a delta whose order is not their baseline's permutation: the cells a delta
    band is for.  A job on its baseline's own permutation claims nothing (its line says "same tile
    order"), and its delta is the measurement's noise, which the model predicts as 0 by
    construction; counted in, such A/A cells (148 of the H100's 346) narrowed the bands of real
    orders by up to 3.6x."""
    return cells[_has_delta(cells) & ~_flag(cells, "same_permutation")]


#: A predicted delta smaller than this (points) predicts no effect: on a cell with a clear
#: measured effect its sign counts as wrong, not as whichever side of 0 the rounding fell on.
PRED_SIGN_MIN = 0.05


def _clear(d: pd.DataFrame, measured: str, lo: str, hi: str, sign_min: float) -> pd.Series:
    """The cells of ``d`` with a clear measured effect: at least ``sign_min`` points, its CI
    (columns ``lo``, ``hi``) excluding 0."""
    return (d[measured].abs() >= sign_min) & ((d[lo] > 0) | (d[hi] < 0))


def _signs(d: pd.DataFrame, measured: str, lo: str, hi: str, predicted: str, sign_min: float,
           pred_min: float = PRED_SIGN_MIN):
    """(right, total, wrong cells) over the cells of ``d`` whose measured delta is at least
    ``sign_min`` points with a CI excluding 0; a prediction is right when it has the measured
    sign and is at least ``pred_min`` points."""
    if measured not in d or lo not in d:
        return 0, 0, []
    clear = d[_clear(d, measured, lo, hi, sign_min)]
    right = (np.sign(clear[measured]) == np.sign(clear[predicted])) & (clear[predicted].abs() >= pred_min)
    wrong = [f"{r.kernel}/{r.shape}/{r.swizzle}: measured {getattr(r, measured):+.2f}, "
             f"predicted {getattr(r, predicted):+.2f}"
             + (" (the baseline's own permutation: what differs is the swizzle's code, not the order the "
                "simulator models)" if getattr(r, "same_permutation", None) is True else "")
             for r in clear[~right].itertuples()]
    return int(right.sum()), int(len(clear)), wrong


#: The share of unfitted cells a prediction's +- band is to cover (:func:`band`).
BAND_COVERAGE = 0.9

#: Each error figure: (key stem, measured column, predicted column, which cells: all or deltas).
MEASURES = (("hit_rate", "measured_hit", "pred_hit", "cells"),
            ("read_hit_rate", "measured_read", "pred_read", "cells"),
            ("delta", "measured_delta", "pred_delta", "deltas"),
            ("read_delta", "measured_read_delta", "pred_read_delta", "deltas"))


def band(residuals, coverage: float = BAND_COVERAGE) -> float:
    """The split-conformal half-width of ``coverage`` from the residuals (points) of ``n``
    cells no fit saw: the ``ceil((n + 1) * coverage)``-th smallest ``|residual|`` (Lei et al.,
    "Distribution-free predictive inference for regression", 2018).  A new cell exchangeable
    with them is within prediction +- band with probability >= ``coverage``; ``inf`` when ``n``
    is too small to say that (fewer than 9 cells at 90 %).  NaNs are dropped."""
    r = np.abs(np.asarray(residuals, dtype=float))
    r = np.sort(r[~np.isnan(r)])
    k = math.ceil((len(r) + 1) * coverage)
    return math.inf if k > len(r) or len(r) == 0 else float(r[k - 1])


def errors(cells: pd.DataFrame, sign_min: float = 1.0, pred_min: float = PRED_SIGN_MIN,
           coverage: float = BAND_COVERAGE) -> dict:
    """The figures of predicted ``cells`` (points): hit / read / delta MAE, the +- band that
    covers ``coverage`` of them (:func:`band`; a delta band of the cells whose order is not their
    baseline's, :func:`_deltas_of_other_orders`), and the signs, of all traffic and of the reads
    alone."""
    d = cells[_has_delta(cells)]
    other = _deltas_of_other_orders(cells)
    right, total, wrong = _signs(d, "measured_delta", "delta_ci_lo", "delta_ci_hi", "pred_delta", sign_min,
                                 pred_min)
    out = {"n": int(len(cells)), "delta_n": int(len(d)), "sign_right": right, "sign_total": total,
           "sign_wrong": wrong, "read_delta_mae": math.nan, "read_delta_band": math.nan, "read_sign_right": 0,
           "read_sign_total": 0, "read_sign_wrong": []}
    for stem, measured, predicted, which in MEASURES:
        part = cells if which == "cells" else d
        if measured in part and predicted in part:
            banded = part if which == "cells" else other
            out[f"{stem}_mae"] = _mae(part[measured], part[predicted])
            out[f"{stem}_band"] = band(banded[measured].astype(float) - banded[predicted].astype(float), coverage)
    if "measured_read_delta" in d and "pred_read_delta" in d:
        rd = d[d["measured_read_delta"].notna()]
        right, total, wrong = _signs(rd, "measured_read_delta", "read_delta_ci_lo", "read_delta_ci_hi",
                                     "pred_read_delta", sign_min, pred_min)
        out.update({"read_delta_n": int(len(rd)), "read_sign_right": right, "read_sign_total": total,
                    "read_sign_wrong": wrong})
    return out


def class_bands(cells: pd.DataFrame, coverage: float = BAND_COVERAGE) -> dict:
    """``{layer class: {"cells": n, stem: band, ...}}`` of predicted ``cells`` with a
    ``layer_class`` column (:func:`harness.profilers.sim.bands.layer_class`): Mondrian bands, one
    set per class, each holding ``coverage`` of its own cells, and one per kernel family and
    class (key ``"<kernel>/<class>"``) where that family's cells of the class are enough for a
    band; a group with too few cells for a band of some measure leaves that measure out (its
    cells fall back to the class's band, then the family's); and the two delta bands of the
    order-blind grids, whatever their class (key ``"order-blind"``)."""
    every = [stem for stem, *_ in MEASURES]
    groups = [(str(cls), part, every) for cls, part in by_class(cells)]
    groups += [(f"{kernel}/{cls}", part, every) for kernel, fam in cells.groupby("kernel")
               for cls, part in by_class(fam)]
    blind = _blind(cells)
    if blind.any():
        groups.append((ORDER_BLIND, cells[blind], ["delta", "read_delta"]))
    out = {}
    for key, part, stems in groups:
        e = errors(part, coverage=coverage)
        got = {stem: round(e[f"{stem}_band"], 3) for stem in stems
               if math.isfinite(e.get(f"{stem}_band", math.nan))}
        if got:
            out[key] = {"cells": int(len(part)), **got}
    return out


def _blind(cells: pd.DataFrame) -> pd.Series:
    """Whether each cell's grid is order-blind (:func:`harness.profilers.sim.bands.order_blind`;
    False where a cells.csv written before the column does not say)."""
    return _flag(cells, "order_blind")


def _layer(cells: pd.DataFrame) -> list[str]:
    """Each cell's layer class ("" where not known: a cells.csv written before the classes)."""
    if "layer_class" not in cells:
        return [""] * len(cells)
    return ["" if pd.isna(v) else str(v) for v in cells["layer_class"]]


def by_class(cells: pd.DataFrame):
    """``(layer class, its cells)`` for each class ``cells`` name (none for cells without one)."""
    layer = pd.Series(_layer(cells), index=cells.index)
    known = layer != ""
    return cells[known].groupby(layer[known])


def covered(cells: pd.DataFrame, bands: Callable[..., Mapping[str, float | None]]) -> dict:
    """How many of predicted ``cells`` lie within their prediction +- band, per measure:
    ``{stem: (inside, cells judged)}``; ``bands(kernel, layer_class, order_blind)`` gives a
    cell's half-widths by stem (None or inf: no band, the cell is not judged).  Deltas are
    judged on the cells whose order is not their baseline's (:func:`_deltas_of_other_orders`)."""
    d = _deltas_of_other_orders(cells)
    out = {}
    for stem, measured, predicted, which in MEASURES:
        part = cells if which == "cells" else d
        inside = total = 0
        if measured in part and predicted in part:
            for kernel, layer, blind, m, p in zip(part["kernel"], _layer(part), _blind(part), part[measured],
                                                  part[predicted]):
                half = bands(kernel, layer, blind).get(stem)
                if half is None or not math.isfinite(half) or pd.isna(m) or pd.isna(p):
                    continue
                total += 1
                inside += int(abs(float(m) - float(p)) <= half)
        out[stem] = (inside, total)
    return out


#: The calibration record's keys of a point's optional parts, in :func:`unpack`'s order, and
#: their columns in the fit grid.
POINT_KEYS = ("coalesce_window", "cluster_run", "merge_unit", "store_insert", "step_jitter", "tma_window",
              "merge_cap", "dispatch_gap", "refill", "scatter_jitter", "partition_run", "step_phase",
              "tma_unit", "tma_cap")
GRID_COLUMNS = {"coalesce_window": "window"}
#: The unit a summary writes after a calibration key's value.
UNITS = {"coalesce_window": " K-steps", "cluster_run": " SMs", "tma_window": " K-steps", "dispatch_gap": " K-steps",
         "scatter_jitter": " K-steps", "partition_run": " SMs"}
#: The command line's axis of each calibration key: flag, value type, valid values, what it is.
AXES = {
    "coalesce_window": ("--windows", float, None, "request-coalescer windows (K-steps)"),
    "cluster_run": ("--cluster-runs", int, None, "cluster_run values (slots of one merge unit in a row)"),
    "merge_unit": ("--merge-units", str, MERGE_UNITS, "what the coalescer merges within"),
    "store_insert": ("--store-inserts", str, STORE_INSERTS, "where a store's fill goes in its set's LRU order"),
    "step_jitter": ("--jitters", float, None, "step jitter (each K-step lasts 1 +- this)"),
    "tma_window": ("--tma-windows", float, None, "the merge window of operands loaded by TMA"),
    "merge_cap": ("--merge-caps", int, None, "the most requests one lookup serves (merge unit any; 0: no cap)"),
    "dispatch_gap": ("--dispatch-gaps", float, None, "K-steps between the first wave's programs' starts"),
    "refill": ("--refills", str, REFILLS, "which free slot a later wave's next program takes"),
    "scatter_jitter": ("--scatter-jitters", float, None,
                       "extra step jitter of a work item that reads far from its launch-order predecessor"),
    "partition_run": ("--partition-runs", int, None,
                      "first-wave SMs in a row that read through one L2 partition (0: each cluster's partition)"),
    "tma_unit": ("--tma-units", str, TMA_UNITS,
                 "whose TMA (bulk) requests merge: turns on the bulk merge model (harness.profilers.sim.target.BulkMerge); "
                 "off: turns it off"),
    "tma_cap": ("--tma-caps", int, None, "with --tma-units any: the most TMA requests one lookup serves (0: no cap)"),
    "step_phase": ("--step-phases", str, STEP_PHASES,
                   "how the programs' step lengths are phased (one_wave: mixed in one-wave launches; "
                   "one_wave_bulk: in those that load an operand by TMA)"),
}


def unpack(point) -> tuple:
    """A calibration point -- an ``l2_capacity_fraction``, or a tuple ``(fraction, *values)``
    with values in :data:`POINT_KEYS` order (trailing ones may be left off) -- as a tuple of
    1 + len(POINT_KEYS) (None: not set)."""
    if not isinstance(point, tuple):
        return (point,) + (None,) * len(POINT_KEYS)
    return tuple(point) + (None,) * (1 + len(POINT_KEYS) - len(point))


def point_record(point) -> dict:
    """The ``sim_calibration`` keys a point sets (the fraction aside)."""
    return {k: v for k, v in zip(POINT_KEYS, unpack(point)[1:]) if v is not None}


def _tie_key(value) -> object:
    """A point's part as a sort key (not set: first)."""
    return (0, "") if value is None else (1, value)


def fit_fraction(cells: pd.DataFrame, simulate: Simulate, fractions: Iterable = FRACTIONS,
                 objective: str = "hit_rate_mae") -> tuple:
    """The point of ``fractions`` (an ``l2_capacity_fraction``, or a tuple, see
    :func:`unpack`) with the least ``objective`` MAE on ``cells`` (``hit_rate_mae``: all
    traffic; ``read_hit_rate_mae``: the reads alone), and the table of the errors per point.
    MAEs equal to 0.001 point are ties: the least delta MAE wins, then the larger fraction
    (the uncalibrated simulator's 1.0 unless the cells say otherwise), then the smaller
    values of the other parts, in order."""
    rows, keys = [], []
    for point in fractions:
        e = errors(predict(cells, simulate, point))
        fraction = unpack(point)[0]
        rows.append({"fraction": fraction,
                     **{GRID_COLUMNS.get(k, k): v for k, v in point_record(point).items()},
                     "hit_rate_mae": e["hit_rate_mae"], "delta_mae": e["delta_mae"],
                     "read_hit_rate_mae": e["read_hit_rate_mae"], "read_delta_mae": e["read_delta_mae"]})
        delta = e["read_delta_mae" if objective == "read_hit_rate_mae" else "delta_mae"]
        keys.append((round(e[objective], 3), math.inf if math.isnan(delta) else round(delta, 3), -fraction,
                     *(_tie_key(v) for v in unpack(point)[1:])))
    best = min(range(len(keys)), key=keys.__getitem__)
    return list(fractions)[best], pd.DataFrame(rows)


def summarise(cells: pd.DataFrame, sign_min: float = 1.0, pred_min: float = PRED_SIGN_MIN) -> dict:
    """{half: {"all": figures, kernel: figures, ...}} of predicted cells with a ``half`` column."""
    out = {}
    for half in ("fit", "holdout"):
        part = cells[cells["half"] == half]
        out[half] = {"all": errors(part, sign_min, pred_min)}
        out[half].update({k: errors(g, sign_min, pred_min) for k, g in part.groupby("kernel")})
    return out


def calibration_record(summary: dict, target: str, validated_on: str, fraction,
                       cells: pd.DataFrame, base: Mapping | None = None) -> dict:
    """The held-out half's figures as the target's ``sim_calibration`` record; ``fraction``
    is the fitted point (see :func:`unpack`), over the calibration keys of ``base`` (the
    target's own record) that the point does not set."""
    held = summary["holdout"]
    point, fraction = fraction, unpack(fraction)[0]

    def table(name: str) -> dict:
        return {k: round(v[name], 3) for k, v in held.items() if math.isfinite(v.get(name, math.nan))}

    return {"target": target, "validated_on": validated_on, "l2_capacity_fraction": fraction,
            "cells_fit": int((cells["half"] == "fit").sum()), "cells_holdout": int((cells["half"] == "holdout").sum()),
            **{f"{stem}_mae": table(f"{stem}_mae") for stem, *_ in MEASURES},
            "band_coverage": BAND_COVERAGE, **{f"{stem}_band": table(f"{stem}_band") for stem, *_ in MEASURES},
            **({"class_bands": cb} if (cb := class_bands(cells[cells["half"] == "holdout"])) else {}),
            "sign_right": [held["all"]["sign_right"], held["all"]["sign_total"]],
            "read_sign_right": [held["all"]["read_sign_right"], held["all"]["read_sign_total"]],
            **{k: v for k, v in (base or {}).items() if k in POINT_KEYS}, **point_record(point)}


# -----------------------------------------------------------
# The simulator (impure: CPU time)

def scaled_target(target: Mapping, fraction) -> dict:
    """``target`` whose L2 is ``fraction`` of its bytes, rounded down to whole sets (same
    ways and line size; the set count need not be a power of two), and for a ``(fraction,
    window, ...)`` tuple the calibration keys it sets, over the target's own calibration
    record (whose fraction is dropped, so that it is not applied twice)."""
    # The target's own calibration, its fraction aside, under what the point sets.
    own = target.get("sim_calibration") or {}
    record = {**{k: v for k, v in own.items() if k in POINT_KEYS}, **point_record(fraction)}
    fraction = unpack(fraction)[0]
    out = {k: v for k, v in target.items() if k != "sim_calibration"}
    if record:
        out["sim_calibration"] = record
    set_bytes = int(target["l2_ways"]) * int(target["l2_line_bytes"])
    out["l2_bytes"] = max(1, int(int(target["l2_bytes"]) * fraction) // set_bytes) * set_bytes
    return out


@dataclass
class Simulator:
    """``simulate(spec, f) -> (hit %, read hit %)`` on ``target``, each (spec, f) simulated once;
    ``seconds``: wall time spent simulating (remap tables included)."""

    target: Mapping
    results: dict = field(default_factory=dict)
    tables: dict = field(default_factory=dict)
    seconds: float = 0.0
    replay_seconds: float = 0.0
    counts: dict = field(default_factory=dict)    # (spec, f) -> (read hits, read misses, merged reads), sectors
    classes: dict = field(default_factory=dict)   # spec -> its layer_class (harness.profilers.sim.bands)
    blind: dict = field(default_factory=dict)     # spec -> whether its grid is order_blind (the same)

    def __call__(self, spec: SimSpec, fraction: float) -> tuple[float, float]:
        key = (spec, fraction)
        if key not in self.results:
            start = time.perf_counter()
            try:
                result = self._run(spec, fraction)
                self.results[key] = (result.hit_rate, result.read_hit_rate)
                self.counts[key] = (result.read_hits, result.read_misses, result.merged_reads)
                self.classes[spec] = result.layer_class
                self.blind[spec] = result.order_blind
                self.replay_seconds += result.replay_s + sum(r.replay_s for _, r in result.timed_run)
            except (NotImplementedError, ValueError) as exc:
                print(f"  cannot simulate {spec.kernel}/{dict(spec.shape)['name']}/{spec.swizzle}: {exc}")
                self.results[key] = (math.nan, math.nan)
            self.seconds += time.perf_counter() - start
        return self.results[key]

    def _run(self, spec: SimSpec, fraction: float):
        from harness.profilers.sim.job import Remap, simulate_job
        from harness.job.user_code import load_kernel, load_remap
        from kernels import get_kernel
        from kernels.problem import ConvShape
        from swizzles import resolve_swizzle
        from swizzles.permutation import remap_table

        kernel = load_kernel(spec.kernel_target, spec.kernel) if spec.kernel_target else get_kernel(spec.kernel)
        shape = ConvShape(**dict(spec.shape))
        tkey = spec.with_swizzle(spec.swizzle, spec.formula) if spec.swizzle_fn is None else spec
        if tkey not in self.tables:   # the remap table: the same at every f
            remap = load_remap(spec.swizzle_fn) if spec.swizzle_fn else resolve_swizzle(spec.swizzle, spec.formula)
            grid = kernel.tile_grid(shape, kernel.check_tiles(dict(spec.tiles)))
            self.tables[tkey] = remap_table(remap, grid.num_pid_m, grid.num_pid_n, spec.num_xcds,
                                            spec.group_size)
        return simulate_job(kernel, shape, dict(spec.tiles), Remap(None, table=self.tables[tkey]),
                            scaled_target(self.target, fraction), spec.occupancy, spill_bytes=spec.spill_bytes)


# -----------------------------------------------------------
# Output

def record_bands(record: Mapping, kind: str = "band") -> Callable[..., dict]:
    """``bands(kernel, layer_class="", order_blind=False)``: the half-widths by measure stem of a
    ``sim_calibration`` record, picked as a job picks them (:func:`harness.profilers.sim.bands.prediction_error`:
    for the deltas of an order-blind grid those of such grids, else the kernel family's in the layer
    class, the class's, the family's, all cells'); empty for a record without bands.
    ``kind="mae"``: its mean absolute errors instead, the ± jobs showed before the bands."""
    from harness.profilers.sim.bands import prediction_error

    if kind == "mae":   # the record as it was before bands: prediction_error then gives its MAEs
        record = {k: v for k, v in record.items()
                  if not k.endswith("_band") and k not in ("band_coverage", "class_bands")}

    def bands(kernel: str, layer: str = "", blind: bool = False) -> dict:
        e = prediction_error({"sim_calibration": record}, kernel, layer, blind)
        if (e.coverage is None) != (kind == "mae"):   # the record has no figures of that kind
            return {}
        return {"hit_rate": e.hit_rate, "delta": e.delta, "read_hit_rate": e.read_hit_rate,
                "read_delta": e.read_delta}
    return bands


def verdicts(cells: pd.DataFrame, bands: Callable[..., Mapping[str, float | None]]) -> dict:
    """The simulator's all-traffic verdicts on predicted ``cells`` against the measured ones: a
    prediction claims ``higher`` / ``lower`` when its delta clears its band (what a job's L2
    verdict does); ncu's claim is its CI excluding 0.  ``{claimed, confirmed, opposite,
    unconfirmed}``: claims the measurement confirms, contradicts (CI on the other side of 0),
    or cannot (CI spans 0); ``missed``: measured effects the simulator did not claim.  Cells on
    their baseline's own permutation are left out: a job there claims nothing by design."""
    d = _deltas_of_other_orders(cells)
    out = dict.fromkeys(("claimed", "confirmed", "opposite", "unconfirmed", "missed", "measured"), 0)
    for kernel, layer, blind, pred, lo, hi in zip(d["kernel"], _layer(d), _blind(d), d["pred_delta"],
                                                  d["delta_ci_lo"], d["delta_ci_hi"]):
        half = bands(kernel, layer, blind).get("delta")
        if half is None or pd.isna(pred) or pd.isna(lo) or pd.isna(hi):
            continue
        claim = 1 if pred - half > 0 else -1 if pred + half < 0 else 0
        truth = 1 if lo > 0 else -1 if hi < 0 else 0
        out["measured"] += int(truth != 0)
        out["missed"] += int(truth != 0 and claim == 0)
        if claim:
            out["claimed"] += 1
            out["confirmed" if truth == claim else "opposite" if truth == -claim else "unconfirmed"] += 1
    return out


def verdicts_text(v: dict) -> str:
    """``3 claimed: 3 confirmed, 0 opposite, 0 unconfirmed; 5 of 8 measured effects missed``."""
    return (f"{v['claimed']} claimed: {v['confirmed']} confirmed, {v['opposite']} opposite, "
            f"{v['unconfirmed']} unconfirmed; {v['missed']} of {v['measured']} measured effects not claimed")


def coverage_text(cov: dict) -> str:
    """``hit 33/36 (92 %), read ...``: a :func:`covered` result."""
    names = {"hit_rate": "hit", "read_hit_rate": "read", "delta": "delta", "read_delta": "read delta"}
    return ", ".join(f"{names[k]} {i}/{n}" + (f" ({100 * i / n:.0f} %)" if n else "") for k, (i, n) in cov.items())


def bands_table(summary: dict, classes: dict | None = None) -> str:
    """Markdown table of the held-out half's bands (points) per kernel, and per layer class
    (:func:`class_bands`)."""
    lines = [f"| kernel | cells | {100 * BAND_COVERAGE:.0f} % band: hit | read hit | delta | read delta |",
             "|---|---:|---:|---:|---:|---:|"]
    for kernel, e in summary["holdout"].items():
        lines.append(f"| {kernel} | {e['n']} | " + " | ".join(_fmt(e.get(f"{stem}_band", math.nan))
                                                           for stem, *_ in MEASURES) + " |")
    for cls, b in (classes or {}).items():
        lines.append(f"| class {cls} | {b['cells']} | " + " | ".join(_fmt(b.get(stem, math.nan))
                                                                   for stem, *_ in MEASURES) + " |")
    return "\n".join(lines)


def _fmt(v: float, spec: str = ".2f") -> str:
    return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else format(v, spec)


def markdown(frame: pd.DataFrame) -> str:
    """A plain markdown table of ``frame`` (floats to 3 decimals)."""
    rows = [[_fmt(v, ".3f") if isinstance(v, float) else str(v) for v in r] for r in frame.itertuples(index=False)]
    return "\n".join(["| " + " | ".join(map(str, frame.columns)) + " |", "|" + "---:|" * len(frame.columns)]
                     + ["| " + " | ".join(r) + " |" for r in rows])


def figures_table(summary: dict) -> str:
    """Markdown table: one row per (half, kernel)."""
    lines = ["| half | kernel | cells | hit MAE (all traffic) | read hit MAE | delta cells | delta MAE | sign right "
             "| read delta MAE | read sign right |", "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for half, groups in summary.items():
        for kernel, e in groups.items():
            lines.append(f"| {half} | {kernel} | {e['n']} | {_fmt(e['hit_rate_mae'])} | "
                         f"{_fmt(e['read_hit_rate_mae'])} | {e['delta_n']} | {_fmt(e['delta_mae'])} | "
                         f"{e['sign_right']}/{e['sign_total']} | {_fmt(e['read_delta_mae'])} | "
                         f"{e['read_sign_right']}/{e['read_sign_total']} |")
    return "\n".join(lines)


CSV_COLUMNS = ["half", "kernel", "shape", "swizzle", "config", "num_xcds", "group_size", "baseline", "occupancy",
               "measured_hit", "measured_hit_std", "measured_read", "measured_delta", "delta_ci_lo",
               "delta_ci_hi", "delta_source", "baseline_measured", "sim_online", "pred_hit", "pred_read",
               "pred_baseline_hit", "pred_delta", "measured_read_delta", "read_delta_ci_lo", "read_delta_ci_hi",
               "pred_read_delta", "layer_class", "run_id", "same_permutation", "paired_delta",
               "paired_read_delta", "order_blind", "measured_read_hits", "measured_read_misses",
               "measured_dram_bytes", "pred_read_lookups", "pred_read_misses", "pred_read_requests",
               "hit_rate_counters"]


def write_outputs(out: Path, cells: pd.DataFrame, summary: dict, grid: pd.DataFrame, record: dict,
                  command: str, store: str, took: str) -> None:
    out.mkdir(parents=True, exist_ok=True)
    cells.reindex(columns=CSV_COLUMNS).to_csv(out / "cells.csv", index=False, float_format="%.4f")
    (out / "calibration.json").write_text(json.dumps(record, indent=2) + "\n")
    wrong = [w for half in summary for w in summary[half]["all"]["sign_wrong"]
             if half == "holdout"]
    text = [f"# Simulated L2 calibration: {record['target']} vs {record['validated_on']}", "",
            f"Command: `{command}`", "", f"Store: `{store}`", "",
            ("Predicted at" if record["cells_fit"] == 0 else "Fitted")
            + f" `l2_capacity_fraction` = **{record['l2_capacity_fraction']}**"
            + "".join(f", `{k}` = **{record[k]}**{UNITS.get(k, '')}" for k in POINT_KEYS if k in record)
            + f" ({record['cells_fit']} fit cells, {record['cells_holdout']} held-out cells, split by shape). "
            f"Errors in percentage points; {took}.", "",
            "## Fit: error of the fit half per fraction", "",
            markdown(grid), "",
            *(["The hit-rate MAE moves < 0.01 point over the grid: these cells do not pin f down.", ""]
              if grid["hit_rate_mae"].max() - grid["hit_rate_mae"].min() < 0.01 else []),
            "## Figures at the fitted fraction", "", figures_table(summary), "",
            f"Bands: the split-conformal half-width that holds {100 * BAND_COVERAGE:.0f} % of the held-out cells "
            "(`sim_calibrate.band`).", "", bands_table(summary, record.get("class_bands")), "",
            "Sign right: cells with measured |delta| >= the threshold and a CI excluding 0.", ""]
    if "hit_rate_counters" in cells and cells["hit_rate_counters"].notna().any():
        used = ", ".join(f"`{c}` ({n} cells)" for c, n in cells["hit_rate_counters"].value_counts().items())
        text += [f"The measured all-traffic hit rate was taken from: {used} (ncu's percentage mixes replay "
                 "passes: docs/profilers.md).", ""]
    if counts := counts_table(count_groups(cells)):
        text += ["## What the read hit rates are made of", "",
                 "The simulator's read lookups and read misses against ncu's tex-unit read lookups "
                 "(`sim_calibrate.count_errors`): relative errors in %, model over measured; misses per "
                 "32 B sector DRAM served, medians.", "", counts, ""]
    if wrong:
        text += ["Held-out cells with the wrong sign:", ""] + [f"* {w}" for w in wrong] + [""]
    text += aa_lines(cells)
    (out / "summary.md").write_text("\n".join(text))


def aa_lines(cells: pd.DataFrame, sign_min: float = 1.0) -> list[str]:
    """The table's own A/A check: cells whose order is their baseline's permutation (colmajor on a
    grid of one column, say), and how many of them the paired measurement calls a clear effect
    (|delta| >= ``sign_min`` points, CI excluding 0), all traffic and reads.  Such an effect is
    the measurement's noise or the swizzle's code (its instructions change the kernel's timing),
    never its order; the simulator, which models orders, predicts 0.  Empty when no cell is one."""
    aa = cells[_flag(cells, "same_permutation") & (cells["swizzle"] != cells["baseline"])]
    if aa.empty:
        return []

    def clear(m: str, lo: str, hi: str) -> int:
        return int(_clear(aa, m, lo, hi, sign_min).sum()) if lo in aa else 0

    return [f"A/A cells (the order is the baseline's own permutation): {len(aa)}; measured as a clear effect "
            f"(|delta| >= {sign_min:g}, CI excluding 0): {clear('measured_delta', 'delta_ci_lo', 'delta_ci_hi')} "
            f"in all traffic, {clear('measured_read_delta', 'read_delta_ci_lo', 'read_delta_ci_hi')} in reads "
            "(noise, or the swizzle's code: not its order).", ""]


def _flow(value) -> str:
    """A record value as one line of YAML flow style, numbers rounded to 2 decimals (as the
    target files keep them); a key that YAML would read otherwise (``igemm/one-wave``) quoted."""
    if isinstance(value, dict):
        def key(k: str) -> str:
            return k if k.replace("_", "").replace("-", "").isalnum() else f'"{k}"'
        return "{" + ", ".join(f"{key(k)}: {_flow(v)}" for k, v in value.items()) + "}"
    if isinstance(value, float):
        return repr(round(value, 2)) if math.isfinite(value) else ".inf"
    return str(value)


#: The keys of a target's ``sim_calibration`` record that a pool sets (``--write-target``).
POOLED_KEYS = ("hit_rate_mae", "delta_mae", "read_hit_rate_mae", "read_delta_mae", "band_coverage",
               "hit_rate_band", "delta_band", "read_hit_rate_band", "read_delta_band")


def write_pooled_keys(text: str, record: Mapping, validated_on: str | None = None) -> str:
    """``text`` (a ``conf/target/*.yaml``) with the error keys of its ``sim_calibration`` record
    replaced by a pool's (:data:`POOLED_KEYS`, each line of ``class_bands``, and with
    ``validated_on`` that line), in place: the comments and every other line stay as they are.
    A class the record has and the file lacks is added after the file's last class line, a class
    the file has and the record lacks is left alone.  ``ValueError`` when a key to replace is not
    in the file: the record's keys are written where the file has them, not guessed at."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith("sim_calibration:")), None)
    if start is None:
        raise ValueError("the target file has no sim_calibration record to write the pooled errors into")
    end = next((i for i in range(start + 1, len(lines)) if lines[i] and not lines[i].startswith((" ", "#"))),
               len(lines))

    def where(pattern: str, lo: int, hi: int) -> int | None:
        return next((i for i in range(lo, hi) if re.match(pattern, lines[i])), None)

    updates = {k: record[k] for k in POOLED_KEYS if k in record}
    if validated_on is not None:
        updates["validated_on"] = validated_on
    for k, v in updates.items():
        i = where(rf"  {k}:", start, end)
        if i is None:
            raise ValueError(f"sim_calibration has no {k} line to replace")
        lines[i] = f"  {k}: {_flow(v)}"
    classes = record.get("class_bands") or {}
    if classes:
        head = where(r"  class_bands:", start, end)
        if head is None:
            raise ValueError("sim_calibration has no class_bands block to replace")
        stop = next((i for i in range(head + 1, end) if lines[i].strip() and not lines[i].startswith("    ")), end)
        last = head
        for name, bands in classes.items():
            i = where(rf'    "?{re.escape(name)}"?:', head + 1, stop)
            line = f"    {_flow({name: bands})[1:-1]}"
            if i is None:
                lines.insert(last + 1, line)
                stop += 1
                last += 1
            else:
                lines[i], last = line, max(last, i)
    return "\n".join(lines) + ("\n" if text.endswith("\n") else "")


def load_target(name: str) -> dict:
    import yaml

    return yaml.safe_load((ROOT / "conf" / "target" / f"{name}.yaml").read_text())


def with_layout(target: dict, layout: Path) -> dict:
    """``target`` with one chip's measured L2 layout: ``sm_partition`` from
    ``layout/l2_partition_map.json`` (benchmarks/probes/l2_partition_map.py) and ``sm_dispatch``
    from ``layout/sm_placement.json`` (sm_placement.py), as a validation session records them."""
    pmap = json.loads((layout / "l2_partition_map.json").read_text())
    place = json.loads((layout / "sm_placement.json").read_text())
    if pmap.get("disagree"):
        raise SystemExit(f"{layout}: the partition map's two sweeps disagree on SMs {pmap['disagree']}")
    return {**target, "sm_partition": pmap["sm_partition"],
            "sm_dispatch": {int(k): v for k, v in place["dispatch"].items()}}


def select_cells(cells: pd.DataFrame, kernels: list[str] | None, config_match: str | None) -> pd.DataFrame:
    """``cells`` of ``kernels`` (None: all) whose config label matches ``config_match`` (None: any)."""
    keep = pd.Series(True, index=cells.index)
    if kernels:
        keep &= cells["kernel"].isin(kernels)
    if config_match:
        keep &= cells["config"].str.contains(config_match, regex=True)
    return cells[keep].reset_index(drop=True)


def take_deltas(cells: pd.DataFrame, how: str, where: str = "the store") -> pd.DataFrame:
    """``cells`` with their deltas taken as ``how`` says (``--delta``)."""
    if how == "pooled":
        return pool_deltas(cells) if not cells.empty else cells
    if "delta_source" in cells and (cells["delta_source"] == "pooled").any():
        raise SystemExit(f"{where}: these cells were written with pooled deltas (--delta pooled); "
                         "score the store again with --delta paired for the paired ones")
    return cells


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--uri", nargs="+", help="MLflow store(s), e.g. sqlite:////tmp/session.db")
    ap.add_argument("--target", default=None, help="conf/target/<name>.yaml (default: the runs' params.target)")
    ap.add_argument("--out", help="directory for cells.csv, summary.md, calibration.json")
    ap.add_argument("--pool", nargs="+", metavar="CELLS_CSV", default=None,
                    help="simulate nothing: print the errors pooled over the held-out cells of these cells.csv "
                         "files (the held-out half of a fit and --validate runs on fresh cells); with --out, "
                         "also write them as OUT/pooled.json (the error keys of a target's sim_calibration)")
    ap.add_argument("--write-target", type=Path, default=None, metavar="TARGET_YAML",
                    help="with --pool: write the pooled errors and bands into this target file's sim_calibration "
                         "record, in place (comments kept), with --validated-on as its validated_on line")
    ap.add_argument("--validated-on", default=None, help="with --write-target: the record's validated_on text")
    ap.add_argument("--check", nargs="+", metavar="CELLS_CSV", default=None,
                    help="with --pool: how many held-out cells of these cells.csv files lie within the pooled bands")
    ap.add_argument("--shapes", nargs="+", default=None, help="score only the cells of these shape names")
    ap.add_argument("--kernels", nargs="+", default=None, help="score only the cells of these kernels")
    ap.add_argument("--config-match", default=None, metavar="REGEX",
                    help="score only the cells whose config label matches this regular expression "
                         "(e.g. 'TMA=1' for the kernels' TMA-loaded configs)")
    ap.add_argument("--device-label", default=None, help="GPU name when the runs carry no tags.device")
    ap.add_argument("--fractions", type=float, nargs="+", default=None,
                    help=f"l2_capacity_fraction values to fit (default: {list(FRACTIONS)}; with --validate "
                         "the target's)")
    for key, (flag, kind, choices, text) in AXES.items():
        ap.add_argument(flag, type=kind, nargs="+", default=None, choices=choices, dest=key,
                        help=f"{text}, to fit with each point of the other axes (default: the target's)")
    ap.add_argument("--objective", choices=("read", "all"), default="read",
                    help="fit the read hit rate (ncu's tex read lookups: like with like) or all traffic")
    ap.add_argument("--delta", choices=DELTAS, default="pooled",
                    help="the measured delta against the pooled baseline launches of a layer and config "
                         "(default) or the ones paired with the cell (pool_deltas)")
    ap.add_argument("--sign-min", type=float, default=1.0, help="|delta| (points) a sign is judged from")
    ap.add_argument("--sign-pred-min", type=float, default=PRED_SIGN_MIN,
                    help="a predicted |delta| (points) below this predicts no effect: a wrong sign")
    ap.add_argument("--layout", type=Path, default=None,
                    help="simulate with one chip's measured L2 layout: the directory a validation session "
                         "writes as OUT/layout (l2_partition_map.json, sm_placement.json)")
    ap.add_argument("--validate", action="store_true",
                    help="fit nothing: every cell is held out and predicted at the one point given (one "
                         "value per axis): a re-validation on cells no fit has seen")
    args = ap.parse_args(argv)
    if (args.write_target or args.validated_on) and not args.pool:
        ap.error("--write-target and --validated-on go with --pool (they write a pool's errors into a target file)")
    if args.pool:
        frames = {p: pd.read_csv(p) for p in args.pool}
        frames = {p: take_deltas(f[f["half"] == "holdout"], args.delta, p) for p, f in frames.items()}
        pooled = pd.concat(frames.values(), ignore_index=True)
        print(f"pooled: {len(pooled)} held-out cells of {', '.join(args.pool)}\n")
        summary = summarise(pooled, args.sign_min, args.sign_pred_min)
        print(figures_table(summary))
        if any(_layer(pooled)):   # the figures per layer class, and of the order-blind grids
            per_class = {"holdout": {f"class {c}": errors(g, args.sign_min, args.sign_pred_min)
                                     for c, g in by_class(pooled)}}
            blind = _blind(pooled)
            if blind.any():
                per_class["holdout"][f"{ORDER_BLIND} grids"] = errors(pooled[blind], args.sign_min, args.sign_pred_min)
            print(f"\n{figures_table(per_class)}")
        print(f"\n{bands_table(summary, class_bands(pooled))}")
        if counts := counts_table(count_groups(pooled)):
            print(f"\nwhat the read hit rates are made of (model over measured, %):\n{counts}")
        record = {k: v for k, v in calibration_record(summary, "", "", 1.0, pooled).items()
                  if k.endswith(("_mae", "_band", "sign_right")) or k in ("cells_holdout", "band_coverage",
                                                                           "class_bands")}
        if len(frames) > 1:   # each file's cells against the bands of the others
            print(f"\neach file's cells within the {100 * BAND_COVERAGE:.0f} % bands of the other files:")
            for p, f in frames.items():
                rest = pd.concat([g for q, g in frames.items() if q != p], ignore_index=True)
                others = calibration_record(summarise(rest, args.sign_min, args.sign_pred_min), "", "", 1.0, rest)
                print(f"  {p}: {coverage_text(covered(f, record_bands(others)))}")
        if args.check:
            check = pd.concat([pd.read_csv(p) for p in args.check], ignore_index=True)
            check = take_deltas(check[check["half"] == "holdout"], args.delta, " ".join(args.check))
            for kind, what in (("band", "bands"), ("mae", "mean errors")):
                print(f"\n{len(check)} cells of {', '.join(args.check)} within the pooled {what}: "
                      f"{coverage_text(covered(check, record_bands(record, kind)))}")
                print(f"verdicts on them: {verdicts_text(verdicts(check, record_bands(record, kind)))}")
        if args.out:   # the error keys of a target's sim_calibration record, pooled
            Path(args.out).mkdir(parents=True, exist_ok=True)
            (Path(args.out) / "pooled.json").write_text(json.dumps(record, indent=2) + "\n")
            print(f"\nwrote {args.out}/pooled.json")
        if args.write_target:
            try:
                text = write_pooled_keys(args.write_target.read_text(), record, args.validated_on)
            except (OSError, ValueError) as exc:
                raise SystemExit(f"--write-target {args.write_target}: {exc}") from exc
            args.write_target.write_text(text)
            print(f"wrote the pooled errors into {args.write_target}")
        return
    if not args.uri or not args.out:
        ap.error("--uri and --out are required (unless --pool)")

    import mlflow

    frames = []
    for uri in args.uri:
        mlflow.set_tracking_uri(uri)
        frames.append(mlflow.search_runs(search_all_experiments=True,
                                         filter_string="tags.profiler = 'ncu' and attributes.status = 'FINISHED'"))
    runs = pd.concat(frames, ignore_index=True)
    cells = cells_from_runs(runs)
    if args.shapes:
        unknown = sorted(set(args.shapes) - set(cells["shape"]))
        if unknown:
            raise SystemExit(f"--shapes {' '.join(unknown)}: no such shape in {' '.join(args.uri)} "
                             f"(it has {', '.join(sorted(cells['shape'].unique()))})")
        cells = cells[cells["shape"].isin(args.shapes)].reset_index(drop=True)
    cells = select_cells(cells, args.kernels, args.config_match)
    cells = take_deltas(cells, args.delta)
    if cells.empty:
        raise SystemExit(f"no finished ncu job runs in {args.uri}")
    target_name = args.target or runs["params.target"].dropna().mode().iloc[0]
    devices = cells["device"].dropna()
    device = devices.mode().iloc[0] if len(devices) else (args.device_label or "unknown GPU")
    halves = ({s: "holdout" for s in cells["shape"].unique()} if args.validate
              else split_by_shape(cells["shape"]))
    cells["half"] = cells["shape"].map(halves)
    print(f"{len(cells)} cells from {args.uri} ({device}); target {target_name}; "
          f"fit shapes {sorted(s for s, h in halves.items() if h == 'fit')}, "
          f"held out {sorted(s for s, h in halves.items() if h == 'holdout')}")

    target = load_target(target_name)
    if args.layout is not None:
        target = with_layout(target, args.layout)
    simulate = Simulator(target)
    if args.fractions is None:
        own = (target.get("sim_calibration") or {}).get("l2_capacity_fraction", 1.0)
        args.fractions = [float(own)] if args.validate else list(FRACTIONS)
    # One axis per calibration key (POINT_KEYS order); an axis not given is not set.
    optional = [getattr(args, key) for key in POINT_KEYS]
    points = (list(itertools.product(args.fractions, *[v if v is not None else [None] for v in optional]))
              if any(v is not None for v in optional) else args.fractions)
    objective = "read_hit_rate_mae" if args.objective == "read" else "hit_rate_mae"
    if args.validate and len(points) != 1:
        raise SystemExit(f"--validate predicts at one point; got {len(points)} (give one value per axis)")
    # With --validate the "fit" is over the held-out cells' single point: nothing is chosen.
    fraction, grid = fit_fraction(cells[cells["half"] == ("holdout" if args.validate else "fit")], simulate,
                                  points, objective)
    cells = predict(cells, simulate, fraction)
    summary = summarise(cells, args.sign_min, args.sign_pred_min)
    took = (f"{len(simulate.results)} simulations in {simulate.seconds:.1f} s wall "
            f"({simulate.replay_seconds:.1f} s replay)")

    show = cells[["half", "kernel", "shape", "swizzle", "measured_hit", "pred_hit", "measured_read", "pred_read",
                  "measured_delta", "pred_delta", "measured_read_delta", "pred_read_delta"]]
    print(show.to_string(float_format=lambda v: f"{v:.2f}"))
    print(f"\n{'all cells (no fit)' if args.validate else 'fit half'}, error per l2_capacity_fraction (and coalescer "
          f"window), points; objective {objective}:")
    print(grid.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    print(f"\nfitted: l2_capacity_fraction {unpack(fraction)[0]}, "
          + ", ".join(f"{k} {v}" for k, v in point_record(fraction).items()) + f"; {took}")
    if grid["hit_rate_mae"].max() - grid["hit_rate_mae"].min() < 0.01:
        print("  (the hit-rate MAE moves < 0.01 point over the grid: these cells do not pin f down)")
    print()
    print(figures_table(summary))
    if counts := counts_table(count_groups(cells)):
        print(f"\nwhat the read hit rates are made of (model over measured, %):\n{counts}")
    for w in summary["holdout"]["all"]["sign_wrong"]:
        print(f"  held-out wrong sign: {w}")
    if args.validate and target.get("sim_calibration"):   # a prospective check of the target's own bands
        for kind, what in (("band", "bands"), ("mae", "mean errors (the ± before the bands)")):
            bands = record_bands(target["sim_calibration"], kind)
            print(f"\nwithin the target's {what} ({target_name}.yaml): {coverage_text(covered(cells, bands))}")
            print(f"verdicts on them: {verdicts_text(verdicts(cells, bands))}")

    record = calibration_record(summary, target_name, f"{device} ncu", fraction, cells,
                                target.get("sim_calibration"))
    command = "python benchmarks/sim_calibrate.py " + " ".join(argv if argv is not None else sys.argv[1:])
    write_outputs(Path(args.out), cells, summary, grid, record, command, " ".join(args.uri), took)
    print(f"\nwrote {args.out}/cells.csv, summary.md, calibration.json")


if __name__ == "__main__":
    main()
