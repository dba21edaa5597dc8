"""How long ``harness.report.build_report`` takes on a sweep of 2,000 job runs.

    python benchmarks/report_speed.py [--runs 2000] [--repeat 3] [--store DIR]

Writes a synthetic SQLite store (one sweep parent, ``--runs`` child runs with the
params, tags and metrics the harness logs: shapes x 3 kernels x 4 num_warps x 5
swizzles, i.e. 34 shapes for 2,000 runs, about 2 % FAILED) unless ``--store`` already
holds one, then times ``build_report`` ``--repeat`` times (wall clock, s).
Target: < 30 s per report.
"""
from __future__ import annotations

import argparse
import itertools
import logging
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

from mlflow.entities import Metric, Param, RunTag
from mlflow.tracking import MlflowClient

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from harness.report import build_report  # noqa: E402

EXPERIMENT = "report-speed"
KERNELS = ("igemm", "direct", "patch")
WARPS = (2, 4, 8, 16)
SWIZZLES = ("identity", "xcd", "grouped", "xcd_grouped", "seed_xcd")
TARGET_S = 30.0


def write_store(root: Path, n_runs: int, seed: int = 0) -> tuple[str, str]:
    """Create the synthetic store under ``root``; returns (tracking URI, sweep run id)."""
    rng = random.Random(seed)
    uri = f"sqlite:///{root / 'mlflow.db'}"
    client = MlflowClient(tracking_uri=uri)
    exp_id = client.create_experiment(EXPERIMENT, artifact_location=(root / "artifacts").as_uri())
    t0 = 1_700_000_000_000
    sweep = client.create_run(exp_id, run_name="sweep (synthetic)", start_time=t0,
                              tags={"swizzlebench.kind": "sweep", "git_commit": "bench"})
    sid = sweep.info.run_id
    common_tags = {"swizzlebench.kind": "job", "mlflow.parentRunId": sid, "swizzlebench.sweep_run_id": sid,
                   "git_commit": "bench", "torch_version": "2.9.0", "triton_version": "3.5.0",
                   "target": "h200", "device": "NVIDIA H200", "mode": "gpu", "profiler": "ncu",
                   "profiler_version": "2025.1", "cache_control": "all", "timing": "measured"}
    combos = itertools.product(range(10_000), KERNELS, WARPS, SWIZZLES)   # 60 runs per shape
    base_time: dict[tuple, float] = {}
    for i, (shape, kernel, warps, swizzle) in enumerate(itertools.islice(combos, n_runs)):
        start = t0 + 1_000 * (i + 1)
        name = f"{kernel}/{swizzle}/resnet-s{shape:03d}/w{warps}"
        run = client.create_run(exp_id, run_name=name, start_time=start, tags=common_tags)
        params = {"kernel": kernel, "swizzle": swizzle, "num_warps": str(warps), "num_stages": "3",
                  "shape_preset": "resnet", "shape.name": f"s{shape:03d}", "shape.N": "32", "shape.C": "256",
                  "shape.H": "14", "shape.W": "14", "shape.F": "256", "shape.R": "3", "shape.S": "3",
                  "shape.dtype": "float16", "group_size": "8", "num_xcds": "1", "target": "h200", "seed": "0",
                  "tile.BLOCK_M": "128", "tile.BLOCK_N": "128", "tile.BLOCK_K": "64"}
        failed = rng.random() < 0.02
        metrics: dict[str, float] = {}
        if not failed:
            t = base_time.setdefault((kernel, shape, warps), rng.uniform(0.05, 2.0)) * rng.uniform(0.8, 1.2)
            l2 = rng.uniform(30, 90)
            metrics = {"time_ms_median": t, "time_ms_p20": t * 0.99, "time_ms_p80": t * 1.01,
                       "tflops": 1.0 / t, "vendor_time_ms": t * 0.9, "ratio_to_vendor": 1 / 0.9,
                       "max_rel_err": 1e-3, "l2_hit_rate": l2, "l2_hit_rate_std": rng.uniform(0, 1.5),
                       "l2_hits": l2 * 1e4, "l2_misses": (100 - l2) * 1e4, "profiled_time_ms": t * 1.05,
                       "dram_read_bytes": 1e8, "sim_l2_hit_rate": l2 + rng.uniform(-3, 3)}
        reason = "permutation gate: pid 3 maps twice" if failed else "verified"
        client.log_batch(run.info.run_id, params=[Param(k, v) for k, v in params.items()],
                         metrics=[Metric(k, v, start, 0) for k, v in metrics.items()],
                         tags=[RunTag("status_reason", reason)])
        client.set_terminated(run.info.run_id, "FAILED" if failed else "FINISHED", end_time=start + 900)
    client.set_terminated(sid, "FINISHED", end_time=t0 + 1_000 * (n_runs + 2))
    return uri, sid


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=2000, help="job runs in the synthetic sweep")
    parser.add_argument("--repeat", type=int, default=3, help="timed build_report calls")
    parser.add_argument("--store", type=Path, default=None,
                        help="folder of the store (reused if it holds mlflow.db; default: a temp folder)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)

    root = args.store or Path(tempfile.mkdtemp(prefix="report-speed-"))
    root.mkdir(parents=True, exist_ok=True)
    uri = f"sqlite:///{root / 'mlflow.db'}"
    if not (root / "mlflow.db").exists():
        started = time.perf_counter()
        uri, _ = write_store(root, args.runs)
        print(f"store: {args.runs} runs written to {root} in {time.perf_counter() - started:.1f} s")
    else:
        print(f"store: reusing {root}")

    times = []
    for i in range(args.repeat):
        started = time.perf_counter()
        page = build_report(uri, EXPERIMENT, out_dir=root / "report")
        times.append(time.perf_counter() - started)
        print(f"build_report #{i + 1}: {times[-1]:.2f} s")
    size_kb = page.stat().st_size / 1024
    best, median = min(times), statistics.median(times)
    verdict = "OK" if median < TARGET_S else "TOO SLOW"
    print(f"report of {args.runs} runs: median {median:.2f} s, best {best:.2f} s over {len(times)} "
          f"(target < {TARGET_S:.0f} s: {verdict}); index.html {size_kb:.0f} KiB at {page}")
    return 0 if median < TARGET_S else 1


if __name__ == "__main__":
    sys.exit(main())
