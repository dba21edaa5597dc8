"""Probe: where split-K's time goes on the small-grid layers, kernel by kernel (CUPTI).

For each layer, igemm_ws's split-K config (the conv into the fp32 workspace, then
``split_k_sum_kernel``), its unsplit 128 x 64 config, its configs that add the splits in the
kernel (``SPLIT_ADD``; each first checked against conv2d over three launches in a row, since
the tiles' flags must be left at zero for the next) and cuDNN (benchmark mode), each launch
after an L2 clear; then the sum pass again on the partials the conv just wrote (still in L2)
with other (BLOCK, num_warps) ("split_k_sum_kernel #2"; the first is the shipped one, in the
same rounds).  Prints median microseconds per kernel name:

    . benchmarks/gpu_setup.sh && python benchmarks/probes/split_k_cost.py --shapes l23,vgg11c51,r18l4
"""
from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

SUM_VARIANTS = ((1024, 4), (2048, 4), (4096, 8), (8192, 8), (512, 4))


def kernel_us(fns: dict, rounds: int, flush) -> dict[str, dict[str, float]]:
    """Median CUPTI duration (us) of each kernel each contender launches, L2 cleared before each."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    for fn in fns.values():
        fn()
    torch.cuda.synchronize()
    out: dict[str, dict[str, list[float]]] = {}
    for name, fn in fns.items():
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(rounds):
                flush.zero_()
                fn()
            torch.cuda.synchronize()
        per: dict[str, list[float]] = {}
        seen: dict[str, int] = {}
        events = sorted((e for e in prof.events() if e.device_type.name == "CUDA"), key=lambda e: e.time_range.start)
        for e in events:
            if "Fill" in e.name:          # the L2 clear: a new round
                seen = {}
                continue
            base = e.name[:40]
            seen[base] = seen.get(base, 0) + 1
            key = base if seen[base] == 1 else f"{base} #{seen[base]}"
            per.setdefault(key, []).append(e.time_range.elapsed_us())
        out[name] = {k: statistics.median(v) for k, v in per.items()}
    return out


def main() -> None:
    import torch
    import torch.nn.functional as F
    import triton

    from gluon_igemm import KERNEL, _binding, _operands
    from conv_speed import preset_shapes
    from harness.measure.timing import FLUSH_BYTES
    from kernels.base import LaunchConfig, Operands
    from kernels.igemm import nhwc
    from kernels.igemm_fast import split_k_sum_kernel
    from kernels.igemm_ws import CONFIGS

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--presets", default="resnet,unseen9,unseen10")
    ap.add_argument("--shapes", default="l23,vgg11c51,r18l4")
    ap.add_argument("--split", type=int, default=21, help="index into CONFIGS of the split-K config")
    ap.add_argument("--unsplit", type=int, default=5, help="index into CONFIGS of the unsplit config")
    ap.add_argument("--add", default="", help="indices into CONFIGS of SPLIT_ADD configs, comma-separated")
    ap.add_argument("--rounds", type=int, default=30)
    args = ap.parse_args()
    torch.backends.cudnn.benchmark = True
    flush = torch.empty(FLUSH_BYTES // 4, dtype=torch.int32, device="cuda")
    keep = args.shapes.split(",")
    for shape in [s for s in preset_shapes(args.presets.split(",")) if s.name.split("/")[1] in keep]:
        x, w = _operands(shape)
        ops = Operands(x, w, None)
        wc = w.contiguous(memory_format=torch.channels_last)
        fns = {"cudnn": lambda x=x, wc=wc, shape=shape: F.conv2d(x, wc, None, stride=shape.stride,
                                                                padding=shape.padding)}
        want = F.conv2d(x.float(), w.float(), None, stride=shape.stride, padding=shape.padding).permute(0, 2, 3, 1)
        adds = [("add", int(i)) for i in args.add.split(",") if i]
        for label, idx in (("split", args.split), ("unsplit", args.unsplit), *adds):
            cfg = CONFIGS[idx]
            try:
                fn, out = KERNEL.bind(ops, shape, cfg.tiles_dict, _binding(),
                                      LaunchConfig(cfg.num_warps, cfg.num_stages))
            except ValueError as exc:           # a split the layer's K steps cannot take
                print(f"{shape.name} {label} {cfg.label}: refused: {exc}", flush=True)
                continue
            errs = []
            for _ in range(3):
                out.zero_()
                fn()
                torch.cuda.synchronize()
                errs.append(float((out.float() - want).abs().max() / want.abs().max()))
            print(f"{shape.name} {label} {cfg.label}: max rel err over 3 launches "
                  + " ".join(f"{e:.1e}" for e in errs), flush=True)
            fns[f"{label} {cfg.label}"] = fn
        cfg = CONFIGS[args.split]
        tiles, launch = KERNEL.check_tiles(cfg.tiles_dict), LaunchConfig(cfg.num_warps, cfg.num_stages)
        bound = KERNEL.prepare(ops, shape, tiles)
        (_, ws), out = bound.operands, bound.out
        xn = nhwc(x)
        for block, warps in SUM_VARIANTS:
            def run(block=block, warps=warps):
                KERNEL.launch((xn, *bound.operands), out, shape, tiles, _binding(), launch)
                split_k_sum_kernel[(triton.cdiv(out.numel(), block),)](ws, out, out.numel(), SPLIT_K=tiles["SPLIT_K"],
                                                                      BLOCK=block, num_warps=warps)
            fns[f"sum BLOCK={block} w{warps}"] = run
        for name, kernels in kernel_us(fns, args.rounds, flush).items():
            print(f"{shape.name} {name}: " + ", ".join(f"{k} {v:.2f} us" for k, v in kernels.items()), flush=True)


if __name__ == "__main__":
    main()
