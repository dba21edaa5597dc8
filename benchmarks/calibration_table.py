"""Calibration tables from the MLflow stores of `+study=calibrate` sweeps.

    python benchmarks/calibration_table.py benchmarks/results/calibration/*.db

Per control and layer: how many repeats (seeds) gave which time and L2 verdict against
identity, the median effect and its CI, the CI half-widths (the detection limit at 95 %),
the paired rounds, and the seconds of paired timing per shape.  A/A = identity_copy (the same
compiled kernel as identity): every verdict there is a false positive.
"""
from __future__ import annotations

import argparse
import sys

import numpy as np
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
    return verdict.split(" (")[0]


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


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("stores", nargs="+", help="SQLite MLflow stores (files)")
    ap.add_argument("--experiment", default="calibrate")
    args = ap.parse_args(argv)
    runs = pd.concat([load(f"sqlite:///{p}", args.experiment) for p in args.stores], ignore_index=True)
    t = table(runs)
    pd.set_option("display.width", 250)
    print(t.to_markdown(index=False))
    aa = runs[runs.swizzle == "identity_copy"]
    if len(aa):
        fp_t = (aa.verdict.map(word) != "no difference detected").sum()
        fp_l = (~aa.l2_verdict.map(word).isin(["no difference detected", "not profiled"])).sum()
        print(f"\nA/A (identity_copy): {fp_t} of {len(aa)} time verdicts and {fp_l} of {len(aa)} L2 verdicts "
              f"are not 'no difference detected' (false-positive rates {fp_t / len(aa):.1%}, {fp_l / len(aa):.1%})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
