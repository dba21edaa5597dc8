"""The same cells measured twice: how far the two measurements lie apart, and the model's error
against each and against both pooled.

    python benchmarks/remeasure_table.py FIRST/cells.csv SECOND/cells.csv

Each ``cells.csv`` is ``sim_calibrate.py``'s (its held-out cells; ``--validate`` holds out
all).  Cells are matched by kernel, shape and swizzle.  The pooled measurement weights each
run's delta by its number of ABBA pairs (``--pairs``, default 3 and 8: the original table's
``profiler.repeats=3`` and ``STAGE=holdout8``'s 8).  Deltas are taken as ``sim_calibrate.py``
takes them (``--delta``: against the pooled baseline launches of the cell's layer and config,
the default, or against the cell's own paired ones).  Errors are mean absolute, in points; the
model's prediction is the second file's (the model of the commit that scored it).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from sim_calibrate import DELTAS, take_deltas  # noqa: E402

KEY = ["kernel", "shape", "swizzle"]
#: (label, measured column, predicted column): the two levels and the two deltas vs identity.
FIGURES = [("hit, all traffic", "measured_hit", "pred_hit"), ("read hit", "measured_read", "pred_read"),
           ("delta, all traffic", "measured_delta", "pred_delta"),
           ("read delta", "measured_read_delta", "pred_read_delta")]


def table(first: pd.DataFrame, second: pd.DataFrame, pairs: tuple[int, int]) -> str:
    both = first[first["half"] == "holdout"].merge(second[second["half"] == "holdout"], on=KEY,
                                                   suffixes=("_1", "_2"))
    w1, w2 = pairs
    rows = ["| figure | cells | first vs second measurement | model vs first | model vs second | "
            "model vs pooled |", "|---|---:|---:|---:|---:|---:|"]
    for label, m, p in FIGURES:
        cells = both.dropna(subset=[f"{m}_1", f"{m}_2"])
        pred = cells[f"{p}_2"]
        pooled = (w1 * cells[f"{m}_1"] + w2 * cells[f"{m}_2"]) / (w1 + w2)
        rows.append(f"| {label} | {len(cells)} | {(cells[f'{m}_1'] - cells[f'{m}_2']).abs().mean():.2f} | "
                    f"{(cells[f'{m}_1'] - pred).abs().mean():.2f} | {(cells[f'{m}_2'] - pred).abs().mean():.2f} | "
                    f"{(pooled - pred).abs().mean():.2f} |")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("first")
    ap.add_argument("second")
    ap.add_argument("--pairs", type=int, nargs=2, default=(3, 8), help="ABBA pairs per cell in each run")
    ap.add_argument("--delta", choices=DELTAS, default="pooled",
                    help="deltas against the pooled baseline launches of a layer (default) or the paired ones")
    args = ap.parse_args(argv)
    first, second = (take_deltas(pd.read_csv(p), args.delta, p) for p in (args.first, args.second))
    print(f"deltas: {args.delta}\n")
    print(table(first, second, tuple(args.pairs)))


if __name__ == "__main__":
    main()
