"""Tune igemm_fast per shape and time it against cuDNN: the "Fast kernels" figures of
benchmarks/README.md.  Standalone (torch + Triton + this repo's kernels/ and
harness/tune/search.py; no Hydra, no MLflow), so it runs on a bare GPU image:

    python benchmarks/kernel_bench.py --out /tmp/bench [--shapes l03,l19] [--jobs 16]

Per shape:
1. every candidate of ``harness.tune.search.candidates('igemm_fast', ...)`` is compiled first, in
   ``--jobs`` worker processes (Triton's on-disk cache then serves the tuner);
2. ``harness.tune.search.tune_kernel`` verifies each candidate against conv2d (fp32 reference,
   TF32 off) and times it (do_bench, median, L2 flushed, 3 ms warm-up / 12 ms reps), with
   the identity swizzle; the choice goes to a tuning cache under --out, and a second call
   must come back from that cache;
3. the chosen config alone is timed as the harness times (do_bench, 25 ms / 100 ms, median
   and p20/p80), beside the vendor call (F.conv2d on channels_last tensors, built outside
   the timing), with two inputs: NCHW (our NCHW -> NHWC copy inside the timed call) and
   channels_last (the vendor's own input; our copy is then a no-op);
4. the old igemm default (128x128x64, 8 warps, 3 stages; layout change outside the timing,
   as the harness does for it) for the before/after, and the chosen config under the
   grouped and xcd swizzles (every swizzle still applies).
Writes ``results.json`` and ``table.md`` under --out, and prints the table last.
"""
from __future__ import annotations

import argparse
import json
import math
import multiprocessing as mp
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from harness.measure.correctness import compare, make_operands, reference  # noqa: E402
from harness.tune.search import TuneCache, tune_kernel  # noqa: E402
from harness.tune.search import candidates  # noqa: E402
from kernels.igemm_fast import igemm_fast_space  # noqa: E402
from kernels.tuning import Config, DeviceTraits  # noqa: E402
from kernels import KERNELS  # noqa: E402
from kernels.base import LaunchConfig, Operands, SwizzleBinding  # noqa: E402
from kernels.problem import ConvShape  # noqa: E402
from swizzles import SWIZZLES  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]

#: Beyond ResNet-50: a VGG-like 3x3, the 3x3 of the seed's big problem, a MobileNet-like 1x1
#: with few filters, and a layer odd in every size.
EXTRA = [
    ConvShape("vgg3", N=32, C=256, H=56, W=56, F=256, R=3, S=3, stride=1, padding=1),
    ConvShape("b128", N=128, C=256, H=58, W=58, F=256, R=3, S=3, stride=1, padding=0),
    ConvShape("mbv2", N=32, C=144, H=56, W=56, F=24, R=1, S=1, stride=1, padding=0),
    ConvShape("odd", N=3, C=37, H=29, W=29, F=45, R=5, S=5, stride=2, padding=2),
]
#: do_bench budget of one tuning trial (ms): short; the chosen config is re-timed at 25 / 100.
TUNE_WARMUP_MS, TUNE_REP_MS = 3, 12
IGEMM_DEFAULT = Config.make({"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64}, 8, 3)


def resnet_shapes() -> list[ConvShape]:
    import yaml

    preset = yaml.safe_load((ROOT / "conf/shape/resnet.yaml").read_text())
    out = []
    for entry in preset["shapes"]:
        entry = {k: v for k, v in entry.items() if k != "layer"}
        out.append(ConvShape(dtype=preset["dtype"], **entry))
    return out


def bench(fn, warmup_ms: float, rep_ms: float) -> tuple[float, float, float]:
    import triton.testing

    med, p20, p80 = triton.testing.do_bench(fn, warmup=warmup_ms, rep=rep_ms, quantiles=[0.5, 0.2, 0.8])
    return float(med), float(p20), float(p80)


def _compile_worker(task) -> list[str]:
    """Compile (by launching once) every config of one shape; return the failures."""
    shape, configs = task
    kernel = KERNELS["igemm_fast"]
    ops = make_operands(shape, False, 0, "cuda")
    binding = SwizzleBinding(SWIZZLES["identity"], 1, 8)
    errors = []
    for cfg in configs:
        try:
            run, _ = kernel.bind(ops, shape, cfg.tiles_dict, binding, LaunchConfig(cfg.num_warps, cfg.num_stages))
            run()
        except Exception as exc:  # reported, and the tuner will record it as a failed trial
            errors.append(f"{shape.name} {cfg.label}: {type(exc).__name__}: {str(exc).splitlines()[0][:200]}")
    torch.cuda.synchronize()
    return errors


def versions() -> dict:
    import triton

    try:
        smi = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,clocks.max.sm,memory.total",
                              "--format=csv,noheader"], capture_output=True, text=True).stdout.strip()
    except OSError:
        smi = "nvidia-smi not found"
    return {"device": torch.cuda.get_device_name(), "nvidia_smi": smi, "torch": torch.__version__,
            "cuda": torch.version.cuda, "cudnn": torch.backends.cudnn.version(), "triton": triton.__version__,
            "python": platform.python_version(), "sms": torch.cuda.get_device_properties(0).multi_processor_count}


def vendor_run(ops: Operands, shape: ConvShape):
    x = ops.x.contiguous(memory_format=torch.channels_last)
    w = ops.w.contiguous(memory_format=torch.channels_last)
    return lambda: F.conv2d(x, w, None, stride=shape.stride, padding=shape.padding)


def timed_bind(kernel, ops, shape, cfg: Config, swizzle: str = "identity", num_xcds: int = 1):
    run, out = kernel.bind(ops, shape, cfg.tiles_dict, SwizzleBinding(SWIZZLES[swizzle], num_xcds, 8),
                           LaunchConfig(cfg.num_warps, cfg.num_stages))
    out.fill_(math.nan)
    run()
    torch.cuda.synchronize()
    verdict = compare(kernel.output_as_nchw(out), reference(ops, shape), shape.dtype)
    if not verdict.ok:
        raise RuntimeError(f"{shape.name} {cfg.label} {swizzle}: {verdict.reason}")
    return run, verdict.max_rel_err


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--shapes", default=None, help="comma-separated names (default: ResNet-50 + extras)")
    ap.add_argument("--jobs", type=int, default=min(16, os.cpu_count() or 1))
    ap.add_argument("--no-extras", action="store_true")
    ap.add_argument("--quick", action="store_true", help="narrower space: 4 stages, the largest BLOCK_K only")
    ap.add_argument("--cache", default=None, help="tuning cache folder (default: OUT/tuning-cache)")
    ap.add_argument("--deadline-s", type=float, default=None,
                    help="start no new shape after this many seconds (results so far are kept)")
    args = ap.parse_args()
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    torch.backends.cudnn.allow_tf32 = False      # an fp32 reference, not a TF32 one
    torch.backends.cuda.matmul.allow_tf32 = False

    shapes = resnet_shapes() + ([] if args.no_extras else EXTRA)
    if args.shapes:
        wanted = args.shapes.split(",")
        shapes = [s for s in shapes if s.name in wanted]
    kernel = KERNELS["igemm_fast"]
    traits = DeviceTraits.of("cuda")
    meta = versions()
    print(json.dumps(meta), flush=True)

    # 1. Compile every candidate in parallel (the tuner's timings then exclude compiles).
    if args.quick:
        spaces = {s.name: igemm_fast_space(s, traits, stages_options=(4,), k_options=1) for s in shapes}
    else:
        spaces = {s.name: candidates(kernel.name, s, traits) for s in shapes}
    t0 = time.perf_counter()
    with mp.get_context("spawn").Pool(args.jobs) as pool:
        errors = [e for errs in pool.imap_unordered(_compile_worker, [(s, spaces[s.name]) for s in shapes])
                  for e in errs]
    compile_s = time.perf_counter() - t0
    n_cfg = sum(len(v) for v in spaces.values())
    print(f"compiled {n_cfg} (shape, config) pairs in {compile_s:.1f} s on {args.jobs} processes; "
          f"{len(errors)} failed", flush=True)
    for e in errors[:20]:
        print("  compile/launch failure:", e, flush=True)

    cache_dir = Path(args.cache) if args.cache else out_dir / "tuning-cache"
    cache = TuneCache(cache_dir)
    rows = []
    started = time.perf_counter()
    for shape in shapes:
        if args.deadline_s and time.perf_counter() - started > args.deadline_s:
            print(f"deadline: {shape.name} and later shapes not run", flush=True)
            break
        try:
            rows.append(measure_shape(kernel, shape, spaces[shape.name], cache))
        except Exception as exc:   # one shape's failure must not lose the others
            print(f"{shape.name}: FAILED {type(exc).__name__}: {str(exc)[:300]}", flush=True)
            continue
        (out_dir / "results.json").write_text(json.dumps({"meta": meta, "compile_s": compile_s,
                                                          "compile_errors": errors, "rows": rows}, indent=1))

    table = render(rows, meta, compile_s, n_cfg, args.jobs)
    (out_dir / "table.md").write_text(table)
    print(table)


def measure_shape(kernel, shape: ConvShape, space, cache: TuneCache) -> dict:
    """Tune, then time the chosen config, the vendor call, igemm's default and two swizzles."""
    identity = SwizzleBinding(SWIZZLES["identity"], 1, 8)
    ops = make_operands(shape, False, 0, "cuda")
    tune_time = lambda run: bench(run, TUNE_WARMUP_MS, TUNE_REP_MS)[0]  # noqa: E731
    t0 = time.perf_counter()
    tuned = tune_kernel(kernel, shape, ops, identity, tune_time, configs=space, cache=cache)
    tune_s = time.perf_counter() - t0
    again = tune_kernel(kernel, shape, ops, identity, tune_time, configs=space, cache=cache)
    assert again.from_cache and again.config == tuned.config, "the cache must return the same choice"
    cfg = tuned.config

    # 3. The chosen config only, as the harness times, beside the vendor call.
    run_nchw, err = timed_bind(kernel, ops, shape, cfg)
    ops_cl = Operands(ops.x.contiguous(memory_format=torch.channels_last), ops.w, None)
    run_cl, _ = timed_bind(kernel, ops_cl, shape, cfg)
    vendor = vendor_run(ops, shape)
    t_vendor = bench(vendor, 25, 100)
    t_nchw = bench(run_nchw, 25, 100)
    t_cl = bench(run_cl, 25, 100)
    t_vendor2 = bench(vendor, 25, 100)       # again: the spread of the baseline itself
    row = {"shape": shape.name, "dims": f"{shape.N} {shape.C} {shape.H}x{shape.W} {shape.F} "
           f"{shape.R}x{shape.S} s{shape.stride} p{shape.padding}", "flops": shape.flops,
           "config": cfg.as_dict(), "label": cfg.label, "max_rel_err": err,
           "tune_s": tune_s, "trials": len(tuned.trials),
           "failed_trials": [t.as_dict() for t in tuned.trials if t.time_ms is None][:5],
           "n_failed": sum(t.time_ms is None for t in tuned.trials),
           "top5": sorted(([t.time_ms, t.config.label] for t in tuned.trials if t.time_ms is not None))[:5],
           "vendor_ms": t_vendor, "vendor_ms_again": t_vendor2, "ours_nchw_ms": t_nchw, "ours_cl_ms": t_cl}
    # 4. Before (igemm default) and the other swizzles.
    try:
        run_old, _ = timed_bind(KERNELS["igemm"], ops, shape, IGEMM_DEFAULT)
        row["igemm_default_ms"] = bench(run_old, 25, 100)
    except Exception as exc:
        row["igemm_default_ms"] = None
        row["igemm_error"] = str(exc)[:200]
    for name, xcds in (("grouped", 1), ("xcd", 8)):
        try:
            run_sw, _ = timed_bind(kernel, ops, shape, cfg, name, xcds)
            row[f"{name}_ms"] = bench(run_sw, 25, 100)
        except Exception as exc:
            row[f"{name}_ms"] = None
            row[f"{name}_error"] = str(exc)[:200]
    print(f"{shape.name:5s} {row['dims']:32s} {cfg.label:55s} ours {t_nchw[0]*1e3:7.1f} us (cl {t_cl[0]*1e3:7.1f}) "
          f"vendor {t_vendor[0]*1e3:7.1f} us  ratio {t_vendor[0]/t_nchw[0]:.2f} (cl {t_vendor[0]/t_cl[0]:.2f})  "
          f"tune {tune_s:.1f} s / {len(tuned.trials)} trials ({row['n_failed']} failed)", flush=True)
    return row


def _geomean(values) -> float:
    values = [v for v in values if v and v > 0]
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else float("nan")


def render(rows, meta, compile_s, n_cfg, jobs) -> str:
    lines = [f"device {meta['device']} | {meta['nvidia_smi']} | torch {meta['torch']} (CUDA {meta['cuda']}, "
             f"cuDNN {meta['cudnn']}) | Triton {meta['triton']}",
             f"compile pass: {n_cfg} (shape, config) pairs in {compile_s:.0f} s on {jobs} processes", "",
             "| layer | N C HxW F RxS s p | chosen config | vendor us | ours us (NCHW in) | ratio | "
             "ours us (channels_last in) | ratio | igemm default us | grouped us | xcd(8) us | tune s (trials) |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        v = r["vendor_ms"][0]

        def us(t):
            return f"{t[0] * 1e3:.1f}" if t else "-"

        lines.append(f"| {r['shape']} | {r['dims']} | {r['label']} | {us(r['vendor_ms'])} | {us(r['ours_nchw_ms'])} | "
                     f"{v / r['ours_nchw_ms'][0]:.2f} | {us(r['ours_cl_ms'])} | {v / r['ours_cl_ms'][0]:.2f} | "
                     f"{us(r.get('igemm_default_ms'))} | {us(r.get('grouped_ms'))} | {us(r.get('xcd_ms'))} | "
                     f"{r['tune_s']:.1f} ({r['trials']}) |")
    resnet = [r for r in rows if r["shape"].startswith("l")]
    for label, subset in (("ResNet-50 (23 layers)", resnet), ("all rows", rows)):
        if not subset:
            continue
        g_nchw = _geomean(r["vendor_ms"][0] / r["ours_nchw_ms"][0] for r in subset)
        g_cl = _geomean(r["vendor_ms"][0] / r["ours_cl_ms"][0] for r in subset)
        worst = min(subset, key=lambda r: r["vendor_ms"][0] / r["ours_nchw_ms"][0])
        old = [r for r in subset if r.get("igemm_default_ms")]
        g_old = _geomean(r["vendor_ms"][0] / r["igemm_default_ms"][0] for r in old)
        lines.append(f"\n{label}: geomean vendor/ours = {g_nchw:.3f} (NCHW input, copy timed), "
                     f"{g_cl:.3f} (channels_last input); worst {worst['shape']} "
                     f"{worst['vendor_ms'][0] / worst['ours_nchw_ms'][0]:.2f}; igemm default {g_old:.3f}")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
