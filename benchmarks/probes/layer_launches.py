"""Probe: one layer's table config, launched a few times, for a profiler to read (GPU only).

Binds the config that ``--table`` holds for the layer, as ``kernel=igemm_best tune=table`` launches
it (the member named by the entry's ``WS`` tile), checks one output against conv2d, then launches
``--launches`` more times on the same channels_last inputs, so that e.g.

    . benchmarks/gpu_setup.sh && ncu --set full -k regex:igemm -c 1 --print-details all \\
        python benchmarks/probes/layer_launches.py --preset unseen4 --shape c24

profiles exactly the launch the table makes.  Prints the config and whether it verified.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from conv_speed import preset_shapes  # noqa: E402
from harness.measure.correctness import compare, make_operands, reference  # noqa: E402
from kernels import KERNELS  # noqa: E402
from kernels.base import LaunchConfig, SwizzleBinding  # noqa: E402
from kernels.tuned import TunedTable  # noqa: E402
from swizzles import SWIZZLES  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", required=True)
    ap.add_argument("--shape", required=True, help="the layer's name in the preset, e.g. c24")
    ap.add_argument("--table", default="kernels/tuned/igemm_best_h200.json")
    ap.add_argument("--launches", type=int, default=3)
    ap.add_argument("--config", default=None,
                    help="launch this igemm_ws config instead of the table's: TILE=V,...;num_warps;num_stages")
    args = ap.parse_args()
    (shape,) = [s for s in preset_shapes([args.preset]) if s.name.split("/")[1] == args.shape]
    ops = make_operands(shape, False, 0, "cuda", "channels_last")
    if args.config:
        tiles_text, warps, stages = args.config.split(";")
        tiles = {k: int(v) for k, v in (kv.split("=") for kv in tiles_text.split(","))}
        kernel, launch, label = KERNELS["igemm_ws"], LaunchConfig(int(warps), int(stages)), args.config
    else:
        choice = TunedTable.load(Path(args.table)).lookup(shape)
        tiles, kernel = choice.config.tiles_dict, KERNELS["igemm_best"]
        launch = LaunchConfig(choice.config.num_warps, choice.config.num_stages)
        label = f"{choice.config.label} ({choice.source})"
    run, out = kernel.bind(ops, shape, tiles, SwizzleBinding(SWIZZLES["identity"], 1, 8), launch)
    run()
    torch.cuda.synchronize()
    verdict = compare(kernel.output_as_nchw(out), reference(ops, shape), shape.dtype)
    print(f"{shape.name}: {kernel.name} {label}: verified {verdict.ok}", flush=True)
    for _ in range(args.launches):
        run()
    torch.cuda.synchronize()


if __name__ == "__main__":
    main()
