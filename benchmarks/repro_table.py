"""Do verdicts hold on the next run?  The reproducibility benchmark's table (issue 19).

Reads MLflow stores written by ``STAGE=repro bash benchmarks/gpu_verdicts_session.sh``: each
sweep (one process) ran kernel x swizzles x shapes x ``compare.placements`` (1: the old method,
one set of buffers; 8: the new default).  Per (placements, swizzle, shape) cell over the
processes: the verdict words and their counts, *contradictions* (two processes saying two
different of faster / no difference / slower), the share of process pairs whose speedup CIs
overlap, the speedup's median and range, the CI half-width, the paired seconds per shape.
Per method: the A/A false-verdict rate (``identity_copy``: the same kernel under two names).

    python benchmarks/repro_table.py benchmarks/results/verdicts/repro_*.db    # after tar xJf repro_stores.tar.xz
"""
from __future__ import annotations

import argparse
import itertools
from pathlib import Path

import mlflow
import numpy as np
import pandas as pd


def word(verdict: str) -> str:
    """faster / slower / no difference, from a verdict tag (same-order cells included)."""
    v = str(verdict)
    if v.startswith("same tile order"):
        v = v.rsplit("(", 1)[-1].rstrip(")")
    return "no difference" if v.startswith("no difference") else v.split()[0]


def load(paths: list[str]) -> pd.DataFrame:
    """The finished job runs of these MLflow SQLite stores (paths of existing files: MLflow
    would create an empty store for any other name)."""
    missing = [p for p in paths if not Path(p).is_file()]
    if missing:
        raise SystemExit(f"repro_table: no such MLflow store: {', '.join(missing)} "
                         "(give the paths of SQLite files a repro sweep wrote)")
    frames = []
    for path in paths:
        mlflow.set_tracking_uri(f"sqlite:///{path}")
        runs = mlflow.search_runs(search_all_experiments=True,
                                  filter_string="tags.`swizzlebench.kind` = 'job' and attributes.status = 'FINISHED'")
        runs["store"] = path
        frames.append(runs)
    runs = pd.concat(frames, ignore_index=True)
    runs = runs[runs["metrics.speedup"].notna()]
    return pd.DataFrame({
        "process": runs["store"] + ":" + runs["tags.mlflow.parentRunId"].astype(str),
        "placements": runs["params.compare.timer"] + "/" + runs["params.compare.placements"],
        "swizzle": runs["params.swizzle"], "shape": runs["params.shape.name"],
        "speedup": runs["metrics.speedup"], "lo": runs["metrics.speedup_ci_lo"], "hi": runs["metrics.speedup_ci_hi"],
        "verdict": runs["tags.verdict"].map(word), "paired_s": runs["metrics.paired_time_s"],
        "rounds": runs["metrics.paired_rounds"], "kernel_ms": runs["metrics.time_ms_median"],
        "placement_sd_pct": runs.get("metrics.speedup_placement_sd_pct", np.nan)})


def cells(df: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for (p, sw, sh), g in df.groupby(["placements", "swizzle", "shape"]):
        words = g["verdict"].value_counts()
        pairs = list(itertools.combinations(g.itertuples(), 2))
        overlap = [a.lo <= b.hi and b.lo <= a.hi for a, b in pairs]
        rows.append({"placements": p, "swizzle": sw, "shape": sh, "processes": len(g),
                     "verdicts": ", ".join(f"{w} {n}" for w, n in words.items()),
                     "contradicting": len(words) > 1,
                     "CI overlap %": 100 * np.mean(overlap) if overlap else np.nan,
                     "speedup median [min, max]": f"{g.speedup.median():.4f} [{g.speedup.min():.4f}, {g.speedup.max():.4f}]",
                     "CI ±% (median)": 100 * ((g.hi - g.lo) / 2 / g.speedup).median(),
                     "placement sd %": g["placement_sd_pct"].median(),
                     "paired s/shape": g.paired_s.median(), "kernel ms": g.kernel_ms.median()})
    return pd.DataFrame(rows)


def main(paths: list[str]) -> None:
    df = load(paths)
    table = cells(df)
    print(table.to_markdown(index=False, floatfmt=".3g"))
    print()
    for p, g in table.groupby("placements"):
        aa = df[(df.placements == p) & (df.swizzle == "identity_copy")]
        false = (aa.verdict != "no difference").sum()
        print(f"placements={p}: {int(g.contradicting.sum())} of {len(g)} cells with contradicting verdicts; "
              f"CI overlap over process pairs {g['CI overlap %'].mean():.1f} % (mean of cells), "
              f"min {g['CI overlap %'].min():.1f} %; A/A false verdicts {false} of {len(aa)}; "
              f"paired s/shape median {df[df.placements == p].paired_s.median():.3f}")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("stores", nargs="+", metavar="STORE_DB", help="MLflow SQLite stores of repro sweeps")
    main(ap.parse_args().stores)
