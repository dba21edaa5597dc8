"""What each of igemm_fast's flags is worth, read off a tune-mode store's trials
(benchmarks/gpu_tune_session.sh):

    python benchmarks/tune_flags.py OUT/tune.db \
        --trials OUT/trials

For every shape and flag: the best verified trial with the flag on against the best with it
off (both timed by the tuner in the same process, held rounds; ``on/off`` below 1 means the
flag helped), and the number of failed trials (verification or launch) with their first
error.  Only the first sweep's jobs that tuned (not cache hits) are read.
"""
from __future__ import annotations

import argparse
import json
import os
from collections import Counter

from mlflow.tracking import MlflowClient

FLAGS = ("TMA", "TMA_STORE", "PERSISTENT", "FOLD", "SPLIT_SUM")


def trials_of(client: MlflowClient, run, trials_dir: str | None) -> list[dict]:
    """The run's ``tune_trials.json``: from the store's artifacts, or from ``trials_dir``
    (``<run id>.json``, as the GPU session copies them out)."""
    path = (os.path.join(trials_dir, f"{run.info.run_id}.json") if trials_dir
            else client.download_artifacts(run.info.run_id, "tune_trials.json"))
    with open(path) as fh:
        return json.load(fh)


def flag_row(trials: list[dict], flag: str) -> str:
    """``best on / best off`` in us and their ratio, or '-' where one side was not tried."""
    best = {}
    for t in trials:
        if t["time_ms"] is None:
            continue
        tiles = t["config"]["tiles"]
        if flag == "SPLIT_SUM" and tiles["SPLIT_K"] == 1:
            continue                                   # the flag means nothing without a split
        on = bool(tiles.get(flag, 0))
        best[on] = min(best.get(on, float("inf")), t["time_ms"])
    if len(best) < 2:
        return "-"
    return f"{best[True] * 1e3:.1f} / {best[False] * 1e3:.1f} = {best[True] / best[False]:.2f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("store")
    ap.add_argument("--experiment", default="swizzlebench")
    ap.add_argument("--trials", help="a folder of <run id>.json trial lists (default: the store's artifacts)")
    args = ap.parse_args()
    client = MlflowClient(tracking_uri=f"sqlite:///{args.store}")
    exp = client.get_experiment_by_name(args.experiment)
    runs = client.search_runs([exp.experiment_id], max_results=5000, order_by=["attributes.start_time ASC"])
    print("| shape | " + " | ".join(f"{f} on/off (us)" for f in FLAGS) + " | failed trials |")
    print("|---|" + "---|" * (len(FLAGS) + 1))
    for r in runs:
        if r.data.tags.get("swizzlebench.kind") != "job" or r.data.params.get("tune.from_cache") != "False":
            continue
        trials = trials_of(client, r, args.trials)
        errors = Counter((t["error"] or "")[:80] for t in trials if t["time_ms"] is None)
        failed = f"{sum(errors.values())}" + (f" ({errors.most_common(1)[0][0]})" if errors else "")
        print(f"| {r.data.params['shape.name']} | " + " | ".join(flag_row(trials, f) for f in FLAGS)
              + f" | {failed} |")


if __name__ == "__main__":
    main()
