"""Per-layer table of a tune-mode sweep store (benchmarks/gpu_tune_session.sh):

    python benchmarks/tune_table.py OUT/tune.db [--experiment swizzlebench]

One table per sweep (MLflow parent run): per shape the chosen config, our median time and
the vendor's (same process, interleaved rounds, L2 cleared), vendor/ours, the tuning cost
(s) and trials or "cache"; then the geometric mean of vendor/ours and the worst layer.
"""
from __future__ import annotations

import argparse
import math
from collections import defaultdict

from mlflow.tracking import MlflowClient


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("store")
    ap.add_argument("--experiment", default="swizzlebench")
    args = ap.parse_args()
    client = MlflowClient(tracking_uri=f"sqlite:///{args.store}")
    exp = client.get_experiment_by_name(args.experiment)
    runs = client.search_runs([exp.experiment_id], max_results=5000, order_by=["attributes.start_time ASC"])
    names = {r.info.run_id: r.info.run_name for r in runs}
    sweeps = defaultdict(list)
    for r in runs:
        if r.data.tags.get("swizzlebench.kind") == "job":
            sweeps[r.data.tags.get("mlflow.parentRunId", "-")].append(r)
    for parent, jobs in sweeps.items():
        print(f"\n### sweep {names.get(parent, parent)} ({len(jobs)} jobs)\n")
        print("| shape | N C HxW F RxS s p | chosen config | vendor us | ours us | vendor/ours | tune s | trials |")
        print("|---|---|---|---|---|---|---|---|")
        ratios = []
        for r in jobs:
            p, m = r.data.params, r.data.metrics
            dims = (f"{p['shape.N']} {p['shape.C']} {p['shape.H']}x{p['shape.W']} {p['shape.F']} "
                    f"{p['shape.R']}x{p['shape.S']} s{p['shape.stride']} p{p['shape.padding']}")
            if r.info.status != "FINISHED" or "time_ms_median" not in m:
                print(f"| {p.get('shape.name', r.info.run_name)} | {dims} | FAILED: "
                      f"{r.data.tags.get('status_reason', '?')[:120]} | | | | | |")
                continue
            ratio = m["vendor_time_ms"] / m["time_ms_median"]
            ratios.append((ratio, p["shape.name"]))
            trials = "cache" if p.get("tune.from_cache") == "True" else p.get("tune.trials", "-")
            print(f"| {p['shape.name']} | {dims} | {p.get('tune.config', '-')} | {m['vendor_time_ms'] * 1e3:.1f} | "
                  f"{m['time_ms_median'] * 1e3:.1f} | {ratio:.2f} | {float(p.get('tune.cost_s', 0)):.1f} | {trials} |")
        if ratios:
            geo = math.exp(sum(math.log(x) for x, _ in ratios) / len(ratios))
            worst = min(ratios)
            cost = sum(float(r.data.params.get("tune.cost_s", 0)) for r in jobs)
            print(f"\ngeomean vendor/ours = {geo:.3f} over {len(ratios)} shapes; worst {worst[1]} {worst[0]:.2f}; "
                  f"tuning {cost:.1f} s in all")


if __name__ == "__main__":
    main()
