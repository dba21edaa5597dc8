"""Probe: the warp-specialized Gluon implicit GEMM (kernels/igemm_ws.py) against cuDNN, config
by config, outside the harness.

The kernel, its configs (``kernels.igemm_ws.CONFIGS``, indexed as in benchmarks/kernel_notes.md,
"v4 probe") and the box rule live in :mod:`kernels.igemm_ws`; this script runs each config on
real layers of the presets, launched as the family launches it (identity swizzle):

    python benchmarks/probes/gluon_igemm.py compile               # sm_90a build, no GPU needed
    python benchmarks/probes/gluon_igemm.py check --shapes l17,l23 --presets resnet   # GPU
    python benchmarks/probes/gluon_igemm.py time --shapes l17,l23 --presets resnet    # GPU
    ncu --profile-from-start off --section SpeedOfLight ... \
        python benchmarks/probes/gluon_igemm.py once --shapes l23 --configs 0,15        # GPU

``compile`` needs Triton 3.6 (the harness's compile stage, meta tensors); ``check`` and ``time``
need the project (``. benchmarks/gpu_setup.sh``) and a Hopper GPU.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kernels.igemm_ws import CONFIGS, IgemmWsConv  # noqa: E402
from kernels.problem import ConvShape  # noqa: E402

KERNEL = IgemmWsConv()


def _binding():
    from kernels.base import SwizzleBinding
    from swizzles import SWIZZLES

    return SwizzleBinding(SWIZZLES["identity"], 1, 1)


def _label(cfg) -> str:
    """The probe's short name of a config, e.g. ``128x64x64 s4 w8 tmaC pers r80``."""
    t = cfg.tiles_dict
    flags = [" tmaC" if t["TMA_STORE"] else " stC", " pers" if t["PERSISTENT"] else "",
             f" r{t['MAXNREG']}" if t["MAXNREG"] else "", f" sk{t['SPLIT_K']}" if t["SPLIT_K"] > 1 else ""]
    return f"{t['BLOCK_M']}x{t['BLOCK_N']}x{t['BLOCK_K']} s{cfg.num_stages} w{cfg.num_warps}" + "".join(flags)


# -----------------------------------------------------------
# compile: the sm_90a build without a GPU (the harness's compile stage on meta tensors).

def compile_check(args) -> None:
    """Build each config for sm_90 on an l17-sized layer (then l23- and l08-sized ones) and
    print what the build holds (registers, shared memory, spills, wgmma and TMA counts)."""
    from harness.compile.build import compile_launch, meta_operands, recording_launches
    from harness.hardware.arch import arch_limits
    from kernels.base import LaunchConfig

    shapes = [ConvShape("l17", 32, 256, 14, 14, 256, 3, 3, 1, 1), ConvShape("l23", 32, 512, 7, 7, 512, 3, 3, 1, 1),
              ConvShape("l08", 32, 128, 28, 28, 512, 1, 1, 1, 0)]
    for shape in shapes[:args.layers]:
        for i, cfg in _configs(args):
            try:
                with recording_launches() as launches:
                    run, _ = KERNEL.bind(meta_operands(shape, False, "channels_last"), shape, cfg.tiles_dict,
                                         _binding(), LaunchConfig(cfg.num_warps, cfg.num_stages))
                    run()
                build = compile_launch(launches[0], arch_limits("sm_90"))
                print(f"{shape.name} box {KERNEL.box(shape, cfg.tiles_dict)} [{i}] {_label(cfg)}: regs "
                      f"{build.registers}, shared {build.shared_bytes} B, spills {build.spills}, {build.counts}",
                      flush=True)
            except Exception as exc:  # noqa: BLE001 (a probe: report and go on)
                print(f"{shape.name} [{i}] {_label(cfg)}: FAILED {type(exc).__name__}: {exc}", flush=True)
                if args.verbose:
                    raise


# -----------------------------------------------------------
# check and time: GPU.

def bind(x, w, shape: ConvShape, cfg):
    """The family's launch closure for channels_last ``x`` (N, C, H, W) and weights (F, C, R,
    S) of a stride-1 layer.  Returns (run, out, box) with ``out`` (N, P, Q, F), NHWC; with
    split-K ``run`` is two launches (the conv into the fp32 workspace, then the sum)."""
    from kernels.base import LaunchConfig, Operands

    run, out = KERNEL.bind(Operands(x, w, None), shape, cfg.tiles_dict, _binding(),
                           LaunchConfig(cfg.num_warps, cfg.num_stages))
    return run, out, KERNEL.box(shape, cfg.tiles_dict)


def _layers(args):
    from conv_speed import preset_shapes

    keep = args.shapes.split(",")
    shapes = [s for s in preset_shapes(args.presets.split(",")) if s.name.split("/")[1] in keep]
    for shape in shapes:
        if shape.stride != 1:
            print(f"{shape.name}: stride {shape.stride}, skipped (stride-1 layers only)", flush=True)
            continue
        yield shape


def _operands(shape):
    import torch

    g = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn(shape.N, shape.C, shape.H, shape.W, device="cuda", dtype=torch.float16, generator=g).contiguous(
        memory_format=torch.channels_last)
    w = torch.randn(shape.F, shape.C, shape.R, shape.S, device="cuda", dtype=torch.float16, generator=g)
    return x, w / (shape.C * shape.R * shape.S) ** 0.5


TOLERANCE = 1e-2      # max |ours - fp32 reference| over max |reference|; fp16 rounding is ~1e-3


def _rel_err(out, ref) -> float:
    """Largest error of ``out`` relative to the reference's largest magnitude (NaN if any NaN)."""
    return ((out.float() - ref).abs().max() / ref.abs().max()).item()


def _first_run(run, name: str, limit_s: float = 20.0) -> None:
    """Launch once and wait at most ``limit_s`` seconds: a barrier bug shows as a kernel that
    never ends, and this exits the process naming the config instead of hanging the GPU call
    (the driver ends the kernel with the process)."""
    import os
    import time

    import torch

    run()
    done = torch.cuda.Event()
    done.record()
    start = time.monotonic()
    while not done.query():
        if time.monotonic() - start > limit_s:
            print(f"{name}: HANG (no completion after {limit_s:.0f} s); exiting. Rerun without it (--configs).",
                  flush=True)
            os._exit(3)
        time.sleep(0.01)


def _configs(args):
    keep = set(args.configs.split(",")) if args.configs else None
    return [(i, c) for i, c in enumerate(CONFIGS) if keep is None or str(i) in keep]


def check(args) -> None:
    """Every config on every layer: compile, run, and compare with torch's fp32 conv (max
    error relative to the output's largest magnitude)."""
    import torch
    import torch.nn.functional as F

    torch.backends.cudnn.allow_tf32 = False       # an fp32 reference, not TF32
    for shape in _layers(args):
        x, w = _operands(shape)
        ref = F.conv2d(x.float(), w.float(), None, padding=shape.padding).permute(0, 2, 3, 1)
        for i, cfg in _configs(args):
            try:
                run, out, box = bind(x, w, shape, cfg)
                out.fill_(float("nan"))
                _first_run(run, f"{shape.name} [{i}] {_label(cfg)}")
                err = _rel_err(out, ref)
                verdict = "ok" if err < TOLERANCE else "WRONG"     # NaN (rows never written) is WRONG
                print(f"{shape.name:14s} [{i}] {_label(cfg):34s} box {box}: max rel err {err:.2e} {verdict}",
                      flush=True)
            except Exception as exc:  # noqa: BLE001 (a probe: report and go on)
                print(f"{shape.name:14s} [{i}] {_label(cfg):34s}: {type(exc).__name__} {str(exc)[:300]}", flush=True)


def time_layers(args) -> None:
    """Ours (each correct config) vs cuDNN in benchmark mode: CUPTI kernel durations with the L2
    flushed before each launch, interleaved rounds (conv_speed's CuptiRounds)."""
    import torch
    import torch.nn.functional as F
    from conv_speed import CuptiRounds

    torch.backends.cudnn.benchmark = True
    torch.backends.cudnn.allow_tf32 = False
    timer = CuptiRounds()
    print(f"{'layer':14s} {'contender':36s} {'ms':>9s} {'cudnn ms':>9s} {'cudnn/ours':>10s} {'TFLOP/s':>8s}")
    for shape in _layers(args):
        x, w = _operands(shape)
        wc = w.contiguous(memory_format=torch.channels_last)
        ref = F.conv2d(x.float(), w.float(), None, padding=shape.padding).permute(0, 2, 3, 1)
        fns = {"cudnn": lambda: F.conv2d(x, wc, None, padding=shape.padding)}
        for i, cfg in _configs(args):
            try:
                run, out, box = bind(x, w, shape, cfg)
                _first_run(run, f"{shape.name} [{i}] {_label(cfg)}")
                if not _rel_err(out, ref) < TOLERANCE:
                    print(f"{shape.name:14s} [{i}] {_label(cfg)}: WRONG, not timed", flush=True)
                    continue
                fns[f"[{i}] {_label(cfg)}"] = run
            except Exception as exc:  # noqa: BLE001
                print(f"{shape.name:14s} [{i}] {_label(cfg)}: {type(exc).__name__} {str(exc)[:200]}", flush=True)
        ms = timer.medians(fns, rounds=args.rounds, launches=args.launches)
        for name in sorted(ms, key=ms.get):
            print(f"{shape.name:14s} {name:36s} {ms[name]:9.4f} {ms['cudnn']:9.4f} {ms['cudnn'] / ms[name]:10.3f} "
                  f"{shape.flops / ms[name] / 1e9:8.1f}", flush=True)
        ours = [k for k in ms if k != "cudnn"]
        if ours:
            best = min(ours, key=ms.get)
            print(f"{shape.name:14s} BEST {best}: cudnn/ours {ms['cudnn'] / ms[best]:.3f}", flush=True)


def once(args) -> None:
    """For ncu (``--profile-from-start off``): warm each config and cuDNN, then one launch of
    each inside a CUDA profiler range, in the order printed."""
    import torch
    import torch.nn.functional as F

    torch.backends.cudnn.benchmark = True
    runs = []
    for shape in _layers(args):
        x, w = _operands(shape)
        wc = w.contiguous(memory_format=torch.channels_last)
        runs.append((f"{shape.name} cudnn", lambda x=x, wc=wc, p=shape.padding: F.conv2d(x, wc, None, padding=p)))
        for i, cfg in _configs(args):
            runs.append((f"{shape.name} [{i}] {_label(cfg)}", bind(x, w, shape, cfg)[0]))
    for _, fn in runs:
        for _ in range(3):
            fn()
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStart()
    for name, fn in runs:
        print(f"profiled: {name}", flush=True)
        fn()
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("mode", choices=("compile", "check", "time", "once"))
    ap.add_argument("--presets", default="resnet,holdout")
    ap.add_argument("--shapes", default="l17,l23,l11,l03,l08,vgg3,big")
    ap.add_argument("--configs", default="", help="indices into CONFIGS, comma-separated (default: all)")
    ap.add_argument("--layers", type=int, default=1, help="compile: how many of the built-in layers")
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--launches", type=int, default=10)
    ap.add_argument("--verbose", action="store_true")
    args = ap.parse_args()
    {"compile": compile_check, "check": check, "time": time_layers, "once": once}[args.mode](args)


if __name__ == "__main__":
    main()
