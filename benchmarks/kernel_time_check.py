"""Kernel time, three ways, on the same kernels: does the harness's timer see what the GPU
spends in the kernels?  (Issue "Verdicts that hold on the next run", part 7.)

For every layer of a shape preset, igemm_fast at its default config and the vendor call
(``torch.nn.functional.conv2d``, cuDNN) are timed

* by the harness's paired rounds with ``compare.timer=events`` (CUDA events around each
  launch) and with ``compare.timer=cupti`` (kernel durations of each launch from CUPTI,
  :func:`harness.measure.cupti.kineto_launch_kernel_ms`), in one call of ``time_interleaved``;
* independently: a plain loop of (L2 clear, launch) x ``--launches`` under torch.profiler,
  read through the profiler's own per-kernel table (``key_averages``): the summed device
  time of every kernel that is not the L2 clear's, divided by the launches.  No code of
  the harness's timer is involved.

    python benchmarks/kernel_time_check.py --out OUT_DIR [--shapes resnet] [--launches 200]

Writes ``kernel_time.csv`` and prints a table: µs per launch by each method and the
harness's CUPTI time over the independent one.
"""
from __future__ import annotations

import argparse
import csv
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import torch  # noqa: E402
import yaml  # noqa: E402
from torch.profiler import ProfilerActivity, profile  # noqa: E402

from harness.measure.correctness import make_operands  # noqa: E402
from harness.measure.timing import FLUSH_BYTES, PairedSettings, time_interleaved, vendor_conv  # noqa: E402
from kernels import get_kernel  # noqa: E402
from kernels.base import LaunchConfig, SwizzleBinding  # noqa: E402
from kernels.problem import ConvShape  # noqa: E402
from swizzles import resolve_swizzle  # noqa: E402


def independent_us(fn, flush: torch.Tensor, launches: int, flush_kernels: set[str]) -> float:
    """µs of kernel time per launch of ``fn``: torch.profiler's per-kernel totals of a plain
    (clear, launch) loop, the clear's kernels left out."""
    for _ in range(5):
        flush.zero_()
        fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(launches):
            flush.zero_()
            fn()
        torch.cuda.synchronize()
    total = sum(e.device_time_total for e in prof.key_averages() if e.key not in flush_kernels
                and e.device_time_total > 0 and e.device_type == torch.autograd.DeviceType.CUDA)
    return total / launches


def flush_kernel_names(flush: torch.Tensor) -> set[str]:
    """The kernel names of the L2 clear (``zero_`` of the flush buffer)."""
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(3):
            flush.zero_()
        torch.cuda.synchronize()
    return {e.key for e in prof.key_averages() if e.device_time_total > 0}


def default_igemm_fast(shapes: str):
    """``(preset, kernel, tiles, launch, binding)``: the shape preset ``conf/shape/<shapes>.yaml``
    and igemm_fast at its default config (``conf/kernel/igemm_fast.yaml``) in identity order."""
    preset = yaml.safe_load((ROOT / "conf" / "shape" / f"{shapes}.yaml").read_text())
    conf = yaml.safe_load((ROOT / "conf" / "kernel" / "igemm_fast.yaml").read_text())
    kernel = get_kernel("igemm_fast")
    tiles = kernel.check_tiles(conf["tiles"])
    return (preset, kernel, tiles, LaunchConfig(conf["num_warps"], conf["num_stages"]),
            SwizzleBinding(resolve_swizzle("identity"), 1, 8))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--shapes", default="resnet")
    ap.add_argument("--launches", type=int, default=200)
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    preset, kernel, tiles, launch, binding = default_igemm_fast(args.shapes)
    flush = torch.empty(FLUSH_BYTES // 4, dtype=torch.int32, device="cuda")
    flush_names = flush_kernel_names(flush)
    rows = []
    for entry in preset["shapes"]:
        fields = {k: entry[k] for k in ("N", "C", "H", "W", "F", "R", "S", "stride", "padding")}
        shape = ConvShape(entry["name"], dtype=preset.get("dtype", "float16"), **fields)
        ops = make_operands(shape, kernel.has_bias, 0, "cuda", "channels_last")
        run, _ = kernel.bind(ops, shape, tiles, binding, launch)
        arms = {"ours": run, "vendor": vendor_conv(ops, shape)}
        settings = PairedSettings(min_rounds=30, check_every=10, max_time_s=1.0, timer="cupti")
        samples = time_interleaved(arms, settings, seed=0)
        row = {"shape": shape.name}
        for arm in arms:
            row[f"{arm}_events_us"] = float(np.median(np.asarray(samples.event_times_ms[arm]))) * 1e3
            row[f"{arm}_cupti_us"] = float(np.median(np.asarray(samples.times_ms[arm]))) * 1e3
            row[f"{arm}_independent_us"] = independent_us(arms[arm], flush, args.launches, flush_names)
            row[f"{arm}_cupti_over_independent"] = row[f"{arm}_cupti_us"] / row[f"{arm}_independent_us"]
        rows.append(row)
        print(" ".join(f"{k}={v:.3f}" if isinstance(v, float) else f"{k}={v}" for k, v in row.items()), flush=True)
    with open(out / "kernel_time.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    small = [r for r in rows if r["ours_independent_us"] < 30]
    for arm in ("ours", "vendor"):
        ratios = np.array([r[f"{arm}_cupti_over_independent"] for r in small])
        print(f"{arm}: {len(small)} layers under 30 us; harness cupti / independent: median {np.median(ratios):.4f}, "
              f"range [{ratios.min():.4f}, {ratios.max():.4f}]; within 2 %: {(abs(ratios - 1) <= 0.02).sum()}")
    print("flush kernels:", sorted(flush_names))
    print(torch.cuda.get_device_name(), "torch", torch.__version__, os.environ.get("CUDA_VERSION", ""))


if __name__ == "__main__":
    main()
