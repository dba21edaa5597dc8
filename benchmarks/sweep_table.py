"""Print a layer x swizzle table of median kernel time from an MLflow store.

    python benchmarks/sweep_table.py --uri sqlite:///mlflow.db --experiment swizzlebench
"""
from __future__ import annotations

import argparse

import mlflow


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--uri", default="sqlite:///mlflow.db")
    ap.add_argument("--experiment", default="swizzlebench")
    ap.add_argument("--metric", default="time_ms_median")
    args = ap.parse_args()
    mlflow.set_tracking_uri(args.uri)
    df = mlflow.search_runs(experiment_names=[args.experiment], filter_string="tags.`swizzlebench.kind` = 'job'")
    ok = df[df.status == "FINISHED"]
    cols = [c for c in (f"metrics.{args.metric}", "metrics.vendor_time_ms", "metrics.l2_hit_rate",
                        "metrics.l2_hit_rate_std") if c in ok.columns]
    table = ok.pivot_table(index=["params.kernel", "params.shape.name"], columns="params.swizzle",
                           values=cols[0], aggfunc="median")
    if "metrics.vendor_time_ms" in ok.columns:
        table["vendor"] = ok.groupby(["params.kernel", "params.shape.name"])["metrics.vendor_time_ms"].median()
    print(f"{args.metric} by shape x swizzle (FINISHED runs: {len(ok)}, FAILED: {(df.status == 'FAILED').sum()})")
    print(table.to_string(float_format=lambda v: f"{v:.4f}"))
    if "metrics.l2_hit_rate_std" in ok.columns:
        spread = ok.pivot_table(index=["params.kernel", "params.shape.name"], columns="params.swizzle",
                                values="metrics.l2_hit_rate_std", aggfunc="median")
        print("l2_hit_rate_std (points) by shape x swizzle")
        print(spread.to_string(float_format=lambda v: f"{v:.2f}"))
    if "metrics.time_ms_median" in ok.columns and args.metric != "time_ms_median":
        times = ok.pivot_table(index=["params.kernel", "params.shape.name"], columns="params.swizzle",
                               values="metrics.time_ms_median", aggfunc="median")
        print("time_ms_median by shape x swizzle")
        print(times.to_string(float_format=lambda v: f"{v:.4f}"))
    failed = df[df.status == "FAILED"]
    for _, row in failed.iterrows():
        print("FAILED", row["tags.mlflow.runName"], "-", row.get("tags.status_reason"))


if __name__ == "__main__":
    main()
