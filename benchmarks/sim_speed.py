"""How fast the simulated L2 is: line accesses per second on one core, and the wall
time of the whole ResNet-50 preset x 5 swizzles with the igemm kernel.

    python benchmarks/sim_speed.py                  # MI300X, igemm default tiles, 23 shapes x 5 swizzles
    python benchmarks/sim_speed.py --no-mall --hit-rates
    python benchmarks/sim_speed.py --target h100 --line-bytes 32 --json /tmp/sim.json

Nothing is sampled: every program of every shape is replayed in full.  The process
pins itself to one CPU core (and torch to one thread) before measuring.
Phases timed separately, in seconds of wall time:

* ``build``  the launch models of each shape (numpy), once per shape;
* ``table``  the remap table of each (shape, swizzle) (Triton interpreter on CPU);
* ``replay`` the simulation proper (numba): the conv from cold caches and, where the
  timed run has more launches (fold pass, split-K sum pass), all of them again in order;
  accesses/s = line lookups (loads and stores) / replay time.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from harness.hardware.device import select_execution_mode  # noqa: E402

select_execution_mode()          # the interpreter, for the remap tables, when there is no GPU

import yaml  # noqa: E402

from harness.profilers.sim.job import simulate_run, table_device  # noqa: E402
from harness.profilers.sim.lru import ENGINE  # noqa: E402
from harness.profilers.sim.replay import simulate_l2  # noqa: E402
from harness.profilers.sim.target import SimTarget  # noqa: E402
from harness.job.shapes import expand_preset  # noqa: E402
from kernels import get_kernel  # noqa: E402
from swizzles import get_swizzle  # noqa: E402
from swizzles.permutation import remap_table  # noqa: E402

#: (label, swizzle, group_size): the valid swizzles, and grouped with a smaller group.
SWIZZLE_CONFIGS = [("identity", "identity", 8), ("grouped", "grouped", 8), ("xcd", "xcd", 8),
                   ("xcd_grouped", "xcd_grouped", 8), ("grouped_g4", "grouped", 4)]


@dataclass
class Row:
    shape: str
    swizzle: str
    programs: int
    accesses: int
    hit_rate: float          # %, loads and stores
    read_hit_rate: float     # %, loads alone
    mall_hit_rate: float | None
    replay_s: float


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", default="mi300x", help="conf/target/<name>.yaml")
    parser.add_argument("--kernel", default="igemm", help="conf/kernel/<name>.yaml (its default tiles)")
    parser.add_argument("--shapes", default="resnet", help="conf/shape/<name>.yaml")
    parser.add_argument("--occupancy", type=int, default=None, help="programs per CU (default: the simulator's)")
    parser.add_argument("--line-bytes", type=int, default=None, help="override the target's line size")
    parser.add_argument("--no-mall", action="store_true", help="simulate without the memory-side cache")
    parser.add_argument("--hit-rates", action="store_true", help="print the hit rate of every shape x swizzle")
    parser.add_argument("--json", type=Path, default=None, help="write every figure to this file")
    args = parser.parse_args()

    _pin_one_core()
    target_cfg = yaml.safe_load((ROOT / "conf/target" / f"{args.target}.yaml").read_text())
    if args.no_mall:
        target_cfg["mall_bytes"] = 0
    target = SimTarget.from_target(target_cfg, args.occupancy, args.line_bytes)
    kernel_cfg = yaml.safe_load((ROOT / "conf/kernel" / f"{args.kernel}.yaml").read_text())
    kernel, tiles = get_kernel(args.kernel), kernel_cfg["tiles"]
    shapes = [e.shape for e in expand_preset(yaml.safe_load((ROOT / "conf/shape" / f"{args.shapes}.yaml").read_text()))]
    hardware_xcds = target.num_xcds

    _warm_up(target)
    rows: list[Row] = []
    build_s = table_s = 0.0
    started = time.perf_counter()
    for shape in shapes:
        t0 = time.perf_counter()
        models = kernel.launch_models(shape, tiles, target.line_bytes, target.request_bytes)
        build_s += time.perf_counter() - t0
        grid = kernel.tile_grid(shape, tiles)
        for label, name, group_size in SWIZZLE_CONFIGS:
            t0 = time.perf_counter()
            table = remap_table(get_swizzle(name), grid.num_pid_m, grid.num_pid_n, hardware_xcds, group_size,
                                device=table_device())
            table_s += time.perf_counter() - t0
            result = simulate_run(models, table, target)
            launches = [result] + [r for _, r in result.timed_run]   # every replay, the timed run's too
            rows.append(Row(shape.name, label, result.num_programs, sum(r.accesses for r in launches),
                            result.hit_rate, result.read_hit_rate, result.mall_hit_rate,
                            sum(r.replay_s for r in launches)))
    wall_s = time.perf_counter() - started

    accesses = sum(r.accesses for r in rows)
    replay_s = sum(r.replay_s for r in rows)
    biggest = max(rows, key=lambda r: r.accesses)
    summary = {
        "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores visible, pinned to 1; "
                   f"Python {platform.python_version()}",
        "engine": ENGINE, "target": args.target, "kernel": args.kernel, "tiles": tiles,
        "slots_per_xcd": target.slots_per_xcd, "line_bytes": target.line_bytes, "mall": target.mall is not None,
        "shapes": len(shapes), "swizzles": [c[0] for c in SWIZZLE_CONFIGS], "jobs": len(rows),
        "line_accesses": accesses, "replay_s": replay_s, "accesses_per_s": accesses / replay_s,
        "biggest_job": f"{biggest.shape}/{biggest.swizzle}: {biggest.accesses} accesses, "
                       f"{biggest.accesses / biggest.replay_s / 1e6:.1f} M/s",
        "build_s": build_s, "table_s": table_s, "wall_s": wall_s,
    }
    print(f"## Simulator speed ({summary['engine']}, {args.target}, {args.kernel} {tiles}, "
          f"{target.slots_per_xcd} programs/XCD, {'with' if target.mall else 'no'} MALL)")
    print(f"- {len(shapes)} shapes x {len(SWIZZLE_CONFIGS)} swizzles = {len(rows)} simulated launches, "
          f"{accesses / 1e6:.1f} M line accesses, none sampled")
    print(f"- replay: {replay_s:.2f} s -> {accesses / replay_s / 1e6:.1f} M line accesses/s on one core "
          f"(biggest job {summary['biggest_job']})")
    print(f"- access models: {build_s:.2f} s; remap tables: {table_s:.2f} s; wall, all phases: {wall_s:.2f} s")
    if args.hit_rates:
        _print_hit_rates(rows)
    if args.json:
        args.json.write_text(json.dumps({"summary": summary, "jobs": [asdict(r) for r in rows]}, indent=1))


def _pin_one_core() -> None:
    """Measure on one core: pin the process and keep torch (remap tables) to one thread."""
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    import torch

    torch.set_num_threads(1)


def _warm_up(target: SimTarget) -> None:
    """Compile (or load from numba's cache) the replay loop before anything is timed."""
    import numpy as np

    from kernels.access import AccessModel

    model = AccessModel(num_steps=1, line_bytes=target.line_bytes, operand_names=("x",),
                        tile_rows=np.zeros((1, 1), dtype=np.int64), offsets=np.array([0, 1], dtype=np.int64),
                        lines=np.array([7], dtype=np.int64))
    simulate_l2(model, np.zeros(1, dtype=np.int64), target)


def _print_hit_rates(rows: list[Row]) -> None:
    labels = [c[0] for c in SWIZZLE_CONFIGS]
    print("\n| shape | programs | M accesses | " + " | ".join(f"{s} %" for s in labels) + " |")
    print("|---|---:|---:|" + "---:|" * len(labels))
    by_shape: dict[str, dict[str, Row]] = {}
    for r in rows:
        by_shape.setdefault(r.shape, {})[r.swizzle] = r
    for shape, per in by_shape.items():
        first = next(iter(per.values()))
        print(f"| {shape} | {first.programs} | {first.accesses / 1e6:.2f} | "
              + " | ".join(f"{per[s].hit_rate:.1f}" for s in labels) + " |")


if __name__ == "__main__":
    main()
