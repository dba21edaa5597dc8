"""Stream-K on a GPU: every STREAM_K candidate of the tune space, on the layers it is offered for,
under three swizzles, launched ``--launches`` times on the same buffers (the arrival counters must
be back at 0 after each launch), each output compared with cuDNN's fp32-accumulated reference.

Under the interpreter the programs run one after another, so the hand-off between programs that
share a tile (the partials, the acq_rel arrival, the last one's sum) is only exercised for real
here, where they run at once.  Prints one line per (layer, config, swizzle) and exits 1 on any
mismatch.  Usage (GPU node): ``python benchmarks/probes/streamk_check.py [--launches 20]``.
"""
from __future__ import annotations

import argparse
import sys

import torch

from harness.measure.correctness import compare, make_operands, reference
from kernels import KERNELS
from kernels.base import LaunchConfig, SwizzleBinding
from kernels.igemm_fast import stream_k_space
from kernels.problem import ConvShape
from kernels.tuning import DeviceTraits
from swizzles import SWIZZLES

LAYERS = (
    ConvShape("l16", N=32, C=1024, H=14, W=14, F=256, R=1, S=1),
    ConvShape("l20", N=32, C=512, H=7, W=7, F=2048, R=1, S=1),
    ConvShape("l22", N=32, C=2048, H=7, W=7, F=512, R=1, S=1),
    ConvShape("aspp", N=8, C=2048, H=33, W=33, F=256, R=1, S=1),
    ConvShape("goog5b", N=32, C=832, H=7, W=7, F=384, R=1, S=1),
    ConvShape("l23", N=32, C=512, H=7, W=7, F=512, R=3, S=3, stride=1, padding=1),
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--launches", type=int, default=20, help="launches per case, same buffers")
    args = parser.parse_args()
    kernel = KERNELS["igemm_fast"]
    traits = DeviceTraits.of(torch.device("cuda"))
    bad = 0
    for shape in LAYERS:
        configs = stream_k_space(shape, traits)
        ops = make_operands(shape, False, seed=11, device="cuda")
        ref = reference(ops, shape)
        for cfg in configs:
            for swizzle in ("identity", "grouped", "scatter"):
                run, out = kernel.bind(ops, shape, cfg.tiles_dict, SwizzleBinding(SWIZZLES[swizzle], 1, 8),
                                       LaunchConfig(cfg.num_warps, cfg.num_stages))
                worst, ok = 0.0, True
                for _ in range(args.launches):
                    out.fill_(float("nan"))
                    run()
                    torch.cuda.synchronize()
                    verdict = compare(kernel.output_as_nchw(out), ref, shape.dtype)
                    ok &= verdict.ok
                    worst = max(worst, verdict.max_rel_err)
                bad += not ok
                tiles = cfg.tiles_dict
                print(f"{shape.name:7s} M{tiles['BLOCK_M']} N{tiles['BLOCK_N']} TMA{tiles['TMA']} "
                      f"w{cfg.num_warps} s{cfg.num_stages} {swizzle:8s} {'ok' if ok else 'MISMATCH'} "
                      f"max_rel_err {worst:.2e} over {args.launches} launches", flush=True)
    print(f"{bad} mismatching case(s)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
