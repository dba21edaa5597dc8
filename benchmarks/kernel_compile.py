"""Compile one kernel config for a target (sm_90 by default, or gfx942) on a machine with no
GPU, and print what the compiler made of it: registers, spills, shared memory / LDS,
occupancy, and the instruction mix that decides speed (wgmma / MFMA, TMA or cp.async,
global loads and stores by width).  The job pipeline's compile stage does the same for
every job (:mod:`harness.compile.build`); this is its one-config form, for kernel work.

    python benchmarks/kernel_compile.py --shape 32,64,56,56,64,3,3,1,1 \
        --tiles BLOCK_M=128,BLOCK_N=64,BLOCK_K=64,SPLIT_K=1,PACK_K=0,PERSISTENT=0,TMA=1 --warps 4 --stages 4
    python benchmarks/kernel_compile.py --arch gfx942 --shape 32,64,56,56,64,3,3,1,1 --tiles BLOCK_M=128,BLOCK_N=128

Tiles left out take the kernel config's defaults (``conf/kernel/<kernel>.yaml``).  Costs no
device time: use it before spending any.
"""
from __future__ import annotations

import argparse
import json
import os

import yaml

from harness.compile.build import compile_spec
from harness.job.spec import JobSpec
from kernels.problem import ConvShape

SHAPE_FIELDS = ("N", "C", "H", "W", "F", "R", "S", "stride", "padding")
CONF = os.path.join(os.path.dirname(__file__), "..", "conf", "kernel")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shape", required=True, help="N,C,H,W,F,R,S,stride,padding")
    ap.add_argument("--tiles", default="", help="KEY=VALUE,... (the rest: the kernel config's defaults)")
    ap.add_argument("--kernel", default="igemm_fast")
    ap.add_argument("--swizzle", default="identity")
    ap.add_argument("--arch", default="sm_90", help="sm_90 or gfx942")
    ap.add_argument("--warps", type=int, default=4)
    ap.add_argument("--stages", type=int, default=3)
    args = ap.parse_args()
    shape = ConvShape("cli", **dict(zip(SHAPE_FIELDS, map(int, args.shape.split(",")))))
    tiles = yaml.safe_load(open(os.path.join(CONF, f"{args.kernel}.yaml")))["tiles"]
    tiles.update({k: int(v) for k, v in (kv.split("=") for kv in args.tiles.split(",") if kv)})
    spec = JobSpec(kernel=args.kernel, tiles=tuple(tiles.items()), swizzle=args.swizzle, num_xcds=8, group_size=8,
                   shape=shape, shape_preset="cli", num_warps=args.warps, num_stages=args.stages, target=args.arch,
                   seed=0)
    print(json.dumps(compile_spec(spec, args.arch).to_dict(), indent=1))


if __name__ == "__main__":
    main()
