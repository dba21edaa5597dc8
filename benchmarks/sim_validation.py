"""How well does the simulated L2 track real hardware?  Re-simulate every ncu-profiled
run of an MLflow store with the simulator configured as that GPU, then compare.

    python benchmarks/sim_validation.py --uri sqlite:///OUT/ncu_session.db \\
        --target h200 --line-bytes 32

Prints one row per run (measured read hit rate, all-traffic rate ± std, predicted), Spearman rank correlation
and mean absolute error overall, per kernel, and of the swizzle-vs-identity deltas.
"""
from __future__ import annotations

import argparse
import os
import time

if __name__ == "__main__":   # remap tables on the CPU; imported (by a test), the process decides
    os.environ.setdefault("TRITON_INTERPRET", "1")

import mlflow  # noqa: E402
import pandas as pd  # noqa: E402
from omegaconf import OmegaConf  # noqa: E402

import swizzlebench_conf  # noqa: E402
from harness.profilers.sim.job import Remap, simulate_job  # noqa: E402
from kernels import get_kernel  # noqa: E402
from kernels.problem import ConvShape  # noqa: E402
from swizzles import get_swizzle  # noqa: E402

SHAPE_FIELDS = ("N", "C", "H", "W", "F", "R", "S", "stride", "padding")


def load_target(name: str) -> dict:
    path = os.path.join(os.path.dirname(swizzlebench_conf.__file__), "target", f"{name}.yaml")
    return OmegaConf.to_container(OmegaConf.load(path))


def simulate_row(row: pd.Series, target: dict, line_bytes: int | None, occupancy: int | None) -> float:
    shape = ConvShape(name=row["params.shape.name"], dtype=row["params.shape.dtype"],
                      **{k: int(row[f"params.shape.{k}"]) for k in SHAPE_FIELDS})
    kernel = get_kernel(row["params.kernel"])
    tiles = {t: int(row[f"params.tile.{t}"]) for t in kernel.tile_names}
    result = simulate_job(kernel, shape, tiles, Remap(get_swizzle(row["params.swizzle"]), int(row["params.num_xcds"]),
                          int(row["params.group_size"])), target, occupancy, line_bytes=line_bytes)
    return result.hit_rate


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--uri", required=True)
    ap.add_argument("--target", default="h200")
    ap.add_argument("--line-bytes", type=int, default=32)
    ap.add_argument("--occupancy", type=int, default=None)
    ap.add_argument("--csv", default=None, help="write the per-run table here")
    args = ap.parse_args()

    mlflow.set_tracking_uri(args.uri)
    runs = mlflow.search_runs(search_all_experiments=True,
                              filter_string="tags.profiler = 'ncu' and attributes.status = 'FINISHED'")
    runs = runs.drop_duplicates(subset=["tags.spec_hash"], keep="first")
    target = load_target(args.target)
    start = time.perf_counter()
    runs["predicted"] = [simulate_row(r, target, args.line_bytes, args.occupancy) for _, r in runs.iterrows()]
    took = time.perf_counter() - start
    # The simulator models loads only, so it is compared with ncu's read-only sector lookups
    # (l2_hits / l2_misses: lts__t_sectors_srcunit_tex_op_read_lookup_hit/miss); the
    # all-traffic lts__t_sector_hit_rate (stores included) is shown beside it.
    read_rate = 100 * runs["metrics.l2_hits"] / (runs["metrics.l2_hits"] + runs["metrics.l2_misses"])
    df = pd.DataFrame({"kernel": runs["params.kernel"], "shape": runs["params.shape.name"],
                       "swizzle": runs["params.swizzle"], "all_traffic": runs["metrics.l2_hit_rate"],
                       "std": runs["metrics.l2_hit_rate_std"], "measured": read_rate,
                       "predicted": runs["predicted"]})
    df = df.sort_values(["kernel", "shape", "swizzle"]).reset_index(drop=True)
    df["error"] = df["predicted"] - df["measured"]
    print(df.to_string(float_format=lambda v: f"{v:.2f}"))
    if args.csv:
        df.to_csv(args.csv, index=False)

    def summary(d: pd.DataFrame, label: str) -> None:
        rho = d["measured"].corr(d["predicted"], method="spearman")
        print(f"{label:<28} n={len(d):3d}  Spearman={rho:+.3f}  MAE={d['error'].abs().mean():.2f} points")

    print(f"\nsimulator: target={args.target} line_bytes={args.line_bytes} occupancy={args.occupancy or 'default'}; "
          f"{len(df)} runs simulated in {took:.1f} s")
    summary(df, "all runs")
    for kernel, d in df.groupby("kernel"):
        summary(d, f"kernel={kernel}")
    ident = df[df.swizzle == "identity"].set_index(["kernel", "shape"])
    deltas = df[df.swizzle != "identity"].merge(ident[["measured", "predicted"]], left_on=["kernel", "shape"],
                                                right_index=True, suffixes=("", "_id")).dropna()
    if len(deltas) > 2:
        d = pd.DataFrame({"measured": deltas["measured"] - deltas["measured_id"],
                          "predicted": deltas["predicted"] - deltas["predicted_id"]})
        d["error"] = d["predicted"] - d["measured"]
        if d["predicted"].nunique() > 1 and d["measured"].nunique() > 1:
            summary(d, "delta vs identity")
        else:
            print(f"{'delta vs identity':<28} n={len(d):3d}  predicted deltas constant "
                  f"({d['predicted'].iloc[0]:+.2f}); MAE={d['error'].abs().mean():.2f} points")


if __name__ == "__main__":
    main()
