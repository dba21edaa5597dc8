"""Probe: every config of a family's space on some layers, each launch checked against conv2d,
one process per config.  An illegal memory access leaves a process's CUDA context unusable, so
a crash names its (config, layer) and the config's remaining layers go on in a fresh process.
Prints one line per (config, layer) that failed or crashed, then a count:

    . benchmarks/gpu_setup.sh && python benchmarks/probes/config_check.py --kernel igemm_ws \\
        --presets unseen10 --shapes incv3m6a,vgg11c51

GPU only.  Inputs as conv_speed.py makes them (channels_last, the layer's dtype).
"""
from __future__ import annotations

import argparse
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def layers(presets: str, names: str):
    from conv_speed import preset_shapes

    keep = set(names.split(","))
    return [s for s in preset_shapes(presets.split(",")) if s.name.split("/")[1] in keep]


def child(kernel_name: str, presets: str, names: str, index: int, start: int) -> None:
    """Config ``index`` of each layer's space on layers ``start...``: prints ``ok``, ``bad`` (wrong
    output) or ``error`` per layer; a CUDA error ends the process (its context is gone)."""
    import torch

    from conv_speed import verified_run
    from harness.measure.correctness import make_operands, reference
    from kernels import KERNELS
    from kernels.tuning import DeviceTraits

    kernel, traits = KERNELS[kernel_name], DeviceTraits.of("cuda")
    for i, shape in enumerate(layers(presets, names)):
        space = kernel.tune_space(shape, traits)
        if i < start or index >= len(space):
            continue
        ops = make_operands(shape, False, 0, "cuda", "channels_last")
        print(f"start\t{i}", flush=True)
        try:
            verified_run(kernel, shape, ops, reference(ops, shape), space[index])
            print(f"ok\t{i}\t{shape.name}\t{space[index].label}", flush=True)
        except torch.AcceleratorError as exc:
            print(f"crash\t{i}\t{shape.name}\t{space[index].label}\t{str(exc).splitlines()[0]}", flush=True)
            raise SystemExit(3)
        except Exception as exc:  # noqa: BLE001 (the probe reports every failure)
            print(f"bad\t{i}\t{shape.name}\t{space[index].label}\t{type(exc).__name__}: "
                  f"{str(exc).splitlines()[0][:200]}", flush=True)


def run_config(args, index: int) -> list[str]:
    """Config ``index`` over every layer, a fresh process after each crash."""
    lines, start = [], 0
    while True:
        proc = subprocess.run([sys.executable, __file__, "--kernel", args.kernel, "--presets", args.presets,
                               "--shapes", args.shapes, "--child", str(index), "--start", str(start)],
                              capture_output=True, text=True, timeout=600)
        out = proc.stdout.splitlines()
        lines += [line for line in out if line.startswith(("ok", "bad", "crash"))]
        started = [int(line.split("\t")[1]) for line in out if line.startswith("start")]
        if proc.returncode == 0:
            return lines
        if not started:
            return lines + [f"crash\t-\t-\tconfig {index}\t{proc.stderr.strip().splitlines()[-1:]}"]
        if not any(line.startswith("crash") and line.split("\t")[1] == str(started[-1]) for line in out):
            lines.append(f"crash\t{started[-1]}\t-\tconfig {index}\t{proc.stderr.strip().splitlines()[-1:]}")
        start = started[-1] + 1


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kernel", default="igemm_ws")
    ap.add_argument("--presets", required=True)
    ap.add_argument("--shapes", required=True)
    ap.add_argument("--jobs", type=int, default=16)
    ap.add_argument("--child", type=int, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--start", type=int, default=0, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child is not None:
        child(args.kernel, args.presets, args.shapes, args.child, args.start)
        return
    from kernels import KERNELS
    from kernels.tuning import DeviceTraits

    import torch  # noqa: F401 (DeviceTraits reads the GPU)

    size = max(len(KERNELS[args.kernel].tune_space(s, DeviceTraits.of("cuda")))
               for s in layers(args.presets, args.shapes))
    with ThreadPoolExecutor(args.jobs) as pool:
        results = list(pool.map(lambda i: run_config(args, i), range(size)))
    lines = [line for res in results for line in res]
    for line in lines:
        if not line.startswith("ok"):
            print(line, flush=True)
    print(f"{sum(line.startswith('ok') for line in lines)} ok, {sum(line.startswith('bad') for line in lines)} "
          f"wrong or refused, {sum(line.startswith('crash') for line in lines)} crashed "
          f"({size} configs, {len(layers(args.presets, args.shapes))} layers)", flush=True)


if __name__ == "__main__":
    main()
