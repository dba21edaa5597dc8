"""Calibration tables from the MLflow stores of `+study=calibrate` sweeps.

    python benchmarks/calibration_table.py benchmarks/results/calibration/cal4_*.db    # after tar xJf cal4_stores.tar.xz

Per control and layer: how many repeats (seeds) gave which time and L2 verdict against
identity, the median effect and its CI, the CI half-widths (the detection limit at 95 %),
the paired rounds, and the seconds of paired timing per shape.  A/A = identity_copy (the same
compiled kernel as identity): every verdict there is a false positive.
"""
from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import pandas as pd
from mlflow.tracking import MlflowClient


def load(uri: str, experiment: str) -> pd.DataFrame:
    client = MlflowClient(uri)
    exp = client.get_experiment_by_name(experiment)
    if exp is None:
        sys.exit(f"{uri}: no experiment {experiment!r}")
    rows = []
    for run in client.search_runs([exp.experiment_id], "attributes.status = 'FINISHED'", max_results=50000):
        if "spec_hash" not in run.data.tags or "compare.role" not in run.data.tags:
            continue
        rows.append({"swizzle": run.data.params.get("swizzle"), "layer": run.data.params.get("shape.name"),
                     "seed": run.data.params.get("seed"), "verdict": run.data.tags.get("verdict", ""),
                     "l2_verdict": run.data.tags.get("l2_verdict", ""), **run.data.metrics})
    return pd.DataFrame(rows)


def word(verdict: str) -> str:
    """A verdict's outcome: 'faster', 'slower', 'higher', 'lower', 'no difference detected'.

    A cell whose order is its baseline's own permutation (an A/A control such as identity_copy)
    gets a verdict on the swizzle's code instead, e.g. ``same tile order; code cost x0.999 [0.998,
    1.001] (no difference detected)``: its outcome is the parenthesis at the end, prefixed
    ``same order:`` so the table keeps the two kinds apart.
    """
    if verdict.startswith("same tile order"):
        tail = re.search(r"\(([^()]*)\)\s*$", verdict)
        return "same order: " + (tail.group(1) if tail else verdict)
    return verdict.split(" (")[0]


NO_DIFFERENCE = {"no difference detected", "same order: no difference detected", "not profiled"}


def table(runs: pd.DataFrame) -> pd.DataFrame:
    for col in ("l2_delta_ci_hi", "l2_delta_ci_lo", "l2_delta_pts"):   # absent in a profiler=none store
        if col not in runs:
            runs[col] = float("nan")
    runs = runs.assign(t=runs.verdict.map(word), l2=runs.l2_verdict.map(word),
                       t_hw=(runs.speedup_ci_hi - runs.speedup_ci_lo) / 2 / runs.speedup * 100,
                       l2_hw=(runs.l2_delta_ci_hi - runs.l2_delta_ci_lo) / 2)
    out = []
    for (swizzle, layer), g in runs.groupby(["swizzle", "layer"], sort=True):
        out.append({
            "control": swizzle, "layer": layer, "repeats": len(g),
            "time verdicts": ", ".join(f"{k} {v}" for k, v in g.t.value_counts().items()),
            "speedup median [min, max]": f"{g.speedup.median():.4f} [{g.speedup.min():.4f}, {g.speedup.max():.4f}]",
            "time CI ±% (median)": round(float(g.t_hw.median()), 2),
            "rounds (median)": int(g.paired_rounds.median()),
            "paired s/shape": round(float(g.paired_time_s.median()), 2),
            "kernel ms": round(float(g.time_ms_median.median()), 4),
            "L2 verdicts": ", ".join(f"{k} {v}" for k, v in g.l2.value_counts().items()),
            "L2 delta pts median": round(float(g.l2_delta_pts.median()), 2),
            "L2 CI ± pts (median)": round(float(g.l2_hw.median()), 2),
        })
    return pd.DataFrame(out)


def false_positives(runs: pd.DataFrame) -> tuple[int, int, int]:
    """A/A (identity_copy) jobs whose time / L2 verdict is not 'no difference': (time, L2, jobs)."""
    aa = runs[runs.swizzle == "identity_copy"]
    return (int((~aa.verdict.map(word).isin(NO_DIFFERENCE)).sum()),
            int((~aa.l2_verdict.map(word).isin(NO_DIFFERENCE)).sum()), len(aa))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("stores", nargs="+", help="SQLite MLflow stores (files)")
    ap.add_argument("--experiment", default="calibrate")
    args = ap.parse_args(argv)
    missing = [p for p in args.stores if not Path(p).is_file()]
    if missing:   # MLflow would create an empty store there
        ap.error(f"no such MLflow store: {', '.join(missing)}")
    runs = pd.concat([load(f"sqlite:///{p}", args.experiment) for p in args.stores], ignore_index=True)
    t = table(runs)
    pd.set_option("display.width", 250)
    print(t.to_markdown(index=False))
    fp_t, fp_l, n = false_positives(runs)
    if n:
        print(f"\nA/A (identity_copy): {fp_t} of {n} time verdicts and {fp_l} of {n} L2 verdicts "
              f"are not 'no difference detected' (false-positive rates {fp_t / n:.1%}, {fp_l / n:.1%})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
