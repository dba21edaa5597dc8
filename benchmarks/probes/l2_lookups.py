"""Probe: what do an H100's L2 read-lookup counters count?  (issue 18, GPU only)

The simulator issues, per program and K-step, every distinct sector of its A and B tiles;
ncu's ``lts__t_sectors_srcunit_tex_op_read_lookup_{hit,miss}`` count only 50-90 % of them.
This script launches igemm on one ResNet-50 layer under several tile orders, once each
after a compile warm-up, so that ``ncu`` run around it (see ``STAGE=probe`` in
``benchmarks/gpu_sim_validation_session.sh``) can read, per order, the L1 and L2 counters
that tell where the missing lookups went: L1 hits of the loads, requests vs sectors, the
partition fabric.

    ncu --csv --metrics <list> -k regex:igemm python benchmarks/probes/l2_lookups.py l12 identity colmajor

A layer is a ResNet-50 preset name (``l12``) or ``preset/name`` of another preset under
``conf/shape/`` (``unseen3/effb0b2``).  It may name its kernel and config: ``l02@igemm_fast@BLOCK_M=64,BLOCK_N=64,...,TMA=1/w4/s2``
(the config as ``benchmarks/sim_calibrate.py``'s cells.csv writes it); the default is igemm
with 128 x 128 x 64 tiles, 8 warps, 3 stages.
"""
from __future__ import annotations

import sys

import torch
import yaml

from harness.measure.correctness import make_operands
from kernels import get_kernel
from kernels.base import LaunchConfig, SwizzleBinding
from kernels.problem import ConvShape
from swizzles import resolve_swizzle


def parse_config(text: str) -> tuple[dict[str, int], LaunchConfig]:
    """``BLOCK_M=64,BLOCK_N=64,TMA=1/w4/s2`` -> (tiles, LaunchConfig(4, 2))."""
    tiles_text, warps, stages = text.split("/")
    tiles = {k: int(v) for k, v in (kv.split("=") for kv in tiles_text.split(","))}
    return tiles, LaunchConfig(int(warps.lstrip("w")), int(stages.lstrip("s")))


def main(argv: list[str]) -> None:
    spec, orders = argv[0], argv[1:]
    layer, kernel_name, config = (spec.split("@") + [None, None])[:3]
    preset_name, _, layer = layer.rpartition("/")
    preset = yaml.safe_load(open(f"conf/shape/{preset_name or 'resnet'}.yaml"))["shapes"]
    row = next(s for s in preset if s["name"] == layer)
    shape = ConvShape(**{k: v for k, v in row.items() if k not in ("layer", "name")}, name=layer)
    kernel = get_kernel(kernel_name or "igemm")
    tiles, launch = ({"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64}, LaunchConfig(8, 3)) if config is None \
        else parse_config(config)
    ops = make_operands(shape, kernel.has_bias, 0, "cuda", "channels_last")
    shared, runs = None, []
    for order in orders:
        binding = SwizzleBinding(resolve_swizzle(order, None), 1, 8)
        run, _ = kernel.bind(ops, shape, tiles, binding, launch, share=shared)
        shared = run.bound
        runs.append(run)
    torch.cuda.synchronize()
    for order, run in zip(orders, runs):
        run()                      # one profiled launch per order, in argument order
        torch.cuda.synchronize()
        print(f"launched {layer} {order}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
