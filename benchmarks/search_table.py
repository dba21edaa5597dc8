"""The per-layer table of a search run, in Markdown, for benchmarks/README.md ("Search").

    python benchmarks/search_table.py --report reports/search-resnet/<sweep run id> \\
        --log log.txt --tracking-uri sqlite:///search-bench.db

Reads the search report's ``search_trials.csv`` (written by the sweeper), the per-study wall
times from the search's log ("search <group>: done in X s") and each layer's grid from the
MLflow params of one of its runs.
"""
from __future__ import annotations

import argparse
import re
from pathlib import Path

import pandas as pd
from mlflow.tracking import MlflowClient

from harness.report.search import summary_table


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--report", required=True, type=Path, help="the search report folder")
    parser.add_argument("--log", required=True, type=Path, help="the search's stdout/stderr")
    parser.add_argument("--tracking-uri", required=True)
    args = parser.parse_args()
    trials = pd.read_csv(args.report / "search_trials.csv")
    for column in ("run_id", "reason", "verdict", "family", "spec_hash"):
        trials[column] = trials[column].fillna("")
    walls = {m.group(1): float(m.group(2))
             for m in re.finditer(r"search (.+?): done in ([0-9.]+) s", args.log.read_text())}
    client = MlflowClient(tracking_uri=args.tracking_uri)
    print("| layer | grid m x n | best built-in | hit % | best found | hit % | found - built-in (points) "
          "| found at trial | trials | wall s |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for row in summary_table(trials).itertuples():
        group = trials[trials["group"] == row.group]
        run_id = next(r for r in group["run_id"] if r)
        params = client.get_run(run_id).data.params
        best = group[(group["kind"] == "trial") & (group["label"] == row.best_found) & (group["status"] == "COMPLETE")]
        layer = row.group.split("/")[1]
        print(f"| {layer} | {params['grid.num_pid_m']} x {params['grid.num_pid_n']} | {row.best_builtin} | "
              f"{row.best_builtin_value:.2f} | `{row.best_found}` | {row.best_found_value:.2f} | "
              f"{row.found_minus_builtin:+.2f} | {int(best['number'].min())} | {row.trials} | "
              f"{walls.get(row.group, float('nan')):.0f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
