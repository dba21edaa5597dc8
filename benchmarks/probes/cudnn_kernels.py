"""What cuDNN runs on a layer, beside ours: the kernels cuDNN launches in benchmark mode (their
names carry the tile shape and the split), and one launch of each side under a CUDA profiler
range, for ``ncu --profile-from-start off`` to read the limiter of both.

    python benchmarks/probes/cudnn_kernels.py names --shapes l23,l19 [--presets resnet]
    ncu --profile-from-start off --section SpeedOfLight ... \
        python benchmarks/probes/cudnn_kernels.py once --shapes l23 [--kernel igemm_best]

GPU only.  Inputs as conv_speed.py makes them (channels_last fp16).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from conv_speed import IDENTITY, preset_shapes  # noqa: E402
from harness.measure.correctness import make_operands  # noqa: E402
from kernels import KERNELS  # noqa: E402
from kernels.base import LaunchConfig  # noqa: E402
from kernels.tuned import TunedTable  # noqa: E402
from kernels.tuning import Config, DeviceTraits  # noqa: E402


def cudnn_call(shape, ops):
    w = ops.w.contiguous(memory_format=torch.channels_last)
    return lambda: F.conv2d(ops.x, w, None, stride=shape.stride, padding=shape.padding)


def names(shapes) -> None:
    """Per layer: the CUDA kernels of one cuDNN benchmark-mode call, with their durations (us)."""
    torch.backends.cudnn.benchmark = True
    for shape in shapes:
        call = cudnn_call(shape, make_operands(shape, False, 0, "cuda", "channels_last"))
        for _ in range(5):
            call()
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(10):
                call()
            torch.cuda.synchronize()
        kernels = {}
        for e in prof.events():
            if e.device_type == torch.autograd.DeviceType.CUDA:
                kernels.setdefault(e.name, []).append(e.device_time)
        for name, times in kernels.items():
            print(f"{shape.name}\t{sorted(times)[len(times) // 2]:.1f} us\tx{len(times) // 10}\t{name}", flush=True)


def once(shapes, family: str, table: TunedTable) -> None:
    """Warm ours (the table's config of ``family``) and cuDNN, then one launch of each inside a
    profiler range."""
    torch.backends.cudnn.benchmark = True
    kernel, traits, runs = KERNELS[family], DeviceTraits.of("cuda"), []
    for shape in shapes:
        ops = make_operands(shape, False, 0, "cuda", "channels_last")
        space = {kernel.canonical(c) for c in kernel.tune_space(shape, traits)}
        cfg: Config = table.lookup(shape, accept=lambda c: kernel.canonical(c) in space).config
        run, _ = kernel.bind(ops, shape, cfg.tiles_dict, IDENTITY, LaunchConfig(cfg.num_warps, cfg.num_stages))
        print(f"{shape.name}: ours {cfg.label}", flush=True)
        runs += [run, cudnn_call(shape, ops)]
    for fn in runs:
        for _ in range(3):
            fn()
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStart()
    for fn in runs:
        fn()
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("mode", choices=("names", "once"))
    ap.add_argument("--presets", default="resnet")
    ap.add_argument("--shapes", required=True)
    ap.add_argument("--kernel", default="igemm_best", help="our family (default: the main command's, igemm_best)")
    ap.add_argument("--table", default=None, help="its table (default kernels/tuned/<kernel>_h100.json)")
    args = ap.parse_args()
    keep = args.shapes.split(",")
    shapes = [s for s in preset_shapes(args.presets.split(",")) if s.name.split("/")[1] in keep]
    torch.backends.cudnn.allow_tf32 = False
    if args.mode == "names":
        names(shapes)
    else:
        once(shapes, args.kernel, TunedTable.load(Path(args.table or f"kernels/tuned/{args.kernel}_h100.json")))


if __name__ == "__main__":
    main()
