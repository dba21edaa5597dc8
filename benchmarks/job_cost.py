"""What a timed job spends outside its paired rounds, before and after issue 19's fix, on a
CUDA GPU, for every layer of a shape preset:

* making the 7 extra operand placements of ``compare.placements=8`` (spacer, operands,
  vendor call; the kernel's binding is the same both ways and left out): the inputs drawn
  again on the CPU for each (``make_operands``, before) vs a device-side copy of the job's
  operands (``copy_operands``, now);
* reading the kernel time of every launch of ``--rounds`` paired rounds (igemm_fast and the
  vendor conv, 3 launches each, as ``compare.timer=cupti`` runs them) from the CUPTI
  profile: torch.profiler's event tree (``prof.events()`` + ``launch_kernel_ms``, before)
  vs its raw records (``kineto_launch_kernel_ms``, now); the two must agree.

    python benchmarks/job_cost.py [--shapes calibrate] [--rounds 500]

Prints one row per layer, wall-clock seconds.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import torch  # noqa: E402
from torch.autograd import DeviceType  # noqa: E402

from harness.measure.correctness import copy_operands, make_operands  # noqa: E402
from harness.measure.cupti import LAUNCH_RANGE, gc_paused, kineto_launch_kernel_ms, launch_kernel_ms  # noqa: E402
from harness.measure.timing import GpuTimer, vendor_conv  # noqa: E402
from kernels.base import Operands  # noqa: E402
from kernels.problem import ConvShape  # noqa: E402
from kernel_time_check import default_igemm_fast  # noqa: E402  (benchmarks/: the script's folder)

EXTRA_PLACEMENTS = 7


def seconds(fn: Callable[[], object]) -> tuple[float, object]:
    """Wall time of ``fn()`` with the GPU's queue drained before and after, s, and its result."""
    torch.cuda.synchronize()
    start = time.perf_counter()
    out = fn()
    torch.cuda.synchronize()
    return time.perf_counter() - start, out


def placements(make: Callable[[], Operands], shape: ConvShape) -> list:
    """What ``placements_of`` (harness.run.rounds) makes per placement but the binding: spacer, operands, vendor call."""
    rng = np.random.default_rng(1)
    return [(torch.empty(int(rng.integers(0, 4096)) * 4096 + 1, dtype=torch.uint8, device="cuda"),
             vendor_conv(make(), shape)) for _ in range(EXTRA_PLACEMENTS)]


def profiled_rounds(arms: dict, rounds: int) -> GpuTimer:
    """``rounds`` paired rounds of ``arms`` (3 launches each) under the CUPTI timer."""
    timer = GpuTimer(cupti=True)
    for fn in arms.values():
        fn()
    torch.cuda.synchronize()
    rng = np.random.default_rng(0)
    with timer:
        for _ in range(0, rounds, 10):
            orders = [[list(arms)[i] for i in rng.permutation(len(arms))] for _ in range(10)]
            timer.run_batch(arms, 0, orders, 3, 0)
    return timer


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", default="calibrate")
    ap.add_argument("--rounds", type=int, default=500)
    args = ap.parse_args()
    preset, kernel, tiles, launch, binding = default_igemm_fast(args.shapes)
    print(f"{'layer':6s} {'M values':>8s} | placements x{EXTRA_PLACEMENTS}: {'before':>7s} {'now':>7s} | "
          f"{'launches':>8s} {'records':>8s} post-processing: {'before':>7s} {'now':>7s}  max |diff| ms")
    for entry in preset["shapes"]:
        fields = {k: entry[k] for k in ("N", "C", "H", "W", "F", "R", "S", "stride", "padding")}
        shape = ConvShape(entry["name"], dtype=preset.get("dtype", "float16"), **fields)
        ops = make_operands(shape, kernel.has_bias, 0, "cuda", "channels_last")
        drawn_s, kept = seconds(lambda: placements(
            lambda: make_operands(shape, kernel.has_bias, 0, "cuda", "channels_last"), shape))
        del kept
        copied_s, kept = seconds(lambda: placements(lambda: copy_operands(ops), shape))
        del kept
        run, _ = kernel.bind(ops, shape, tiles, binding, launch)
        timer = profiled_rounds({"ours": run, "vendor": vendor_conv(ops, shape)}, args.rounds)
        with gc_paused():
            start = time.perf_counter()
            records = timer.profile.profiler.kineto_results.events()
            now = kineto_launch_kernel_ms(records, timer.launches)
            now_s = time.perf_counter() - start
        start = time.perf_counter()
        before = launch_kernel_ms(timer.profile.events(), timer.launches)
        before_s = time.perf_counter() - start
        diff = np.abs(np.subtract(before, now))
        values_m = (ops.x.numel() + ops.w.numel()) / 1e6
        print(f"{shape.name:6s} {values_m:8.1f} | {'':15s}{drawn_s:7.3f} {copied_s:7.3f} | {timer.launches:8d} "
              f"{len(records):8d} {'':17s}{before_s:7.3f} {now_s:7.3f}  {diff.max():.2e}", flush=True)
        if diff.max() > 1e-6:   # where they differ: is the tree's figure the range's GPU-side span?
            span = np.zeros(timer.launches)
            for rec in records:
                if rec.device_type() != DeviceType.CPU and rec.name().startswith(LAUNCH_RANGE):
                    span[int(rec.name()[len(LAUNCH_RANGE):])] = (rec.end_ns() - rec.start_ns()) / 1e6
            differ = diff > 1e-6
            print(f"       {differ.sum()} launches differ (median {np.median(diff[differ]) * 1e3:.2f} µs); of those, "
                  f"{np.sum(np.abs(np.asarray(before)[differ] - span[differ]) < 1e-6)} read the range's GPU "
                  f"span (kernels and the gaps between them) instead of the kernels' sum", flush=True)
    print(torch.cuda.get_device_name(), "torch", torch.__version__)


if __name__ == "__main__":
    main()
