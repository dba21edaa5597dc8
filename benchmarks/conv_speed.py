"""Our fast conv against the vendor's, layer by layer: igemm_fast (or ``--kernel igemm_ws``) tuned
per layer, cuDNN with
its heuristic algorithm choice and with ``torch.backends.cudnn.benchmark`` on, and
(``--inductor``) PyTorch Inductor's ``max-autotune`` conv, all timed by CUPTI kernel
durations with the L2 cleared before every launch (launch latency excluded).  It also
writes the per-target tuning table the harness launches by default (``kernels/tuned/``).

    python benchmarks/conv_speed.py --out OUT [--presets resnet,unseen] [--shapes l03,l19]
        [--table kernels/tuned/h100.json]   # time the table's configs instead of tuning
        [--inductor] [--jobs 16] [--deadline-s 500]
        [--merge-into kernels/tuned/igemm_fast_h100.json]   # also write that table, re-tuned layers replaced
        [--kernel igemm_ws]   # another family; layers outside its space are listed and skipped

Per layer (every layer of the named shape presets, duplicates by dimensions merged):

1. tune: every candidate of the kernel's own space (its family's ``tune_space``) is
   compiled first, in ``--jobs`` processes; each is checked against an fp32 conv2d and timed
   in one short CUPTI round; the ``--finalists`` fastest are timed again in interleaved CUPTI
   rounds, and the lowest median wins;
2. time: the winner, cuDNN (heuristic), cuDNN (benchmark mode; its algorithm search runs
   before the timed rounds), and Inductor, in interleaved rounds of ``--launches`` launches,
   by CUPTI: the median kernel time per launch.

Inputs are channels_last fp16 (the harness's default ``input_layout``), the same tensor for
every contender.  Writes ``results.json``, ``table.md`` (printed last) and
``<kernel>_<device>.json`` (a table of :mod:`kernels.tuned`) under ``--out``.
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
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
import yaml  # noqa: E402
from torch.profiler import ProfilerActivity, profile  # noqa: E402

from harness.measure.correctness import compare, make_operands, reference  # noqa: E402
from harness.measure.cupti import LAUNCH_RANGE, gc_paused, kineto_launch_kernel_ms  # noqa: E402
from harness.measure.timing import FLUSH_BYTES  # noqa: E402
from kernels import KERNELS  # noqa: E402
from kernels.base import LaunchConfig, SwizzleBinding  # noqa: E402
from kernels.problem import ConvShape  # noqa: E402
from kernels.tuned import TunedTable, shape_key  # noqa: E402
from kernels.tuning import Config, DeviceTraits  # noqa: E402
from swizzles import SWIZZLES  # noqa: E402

IDENTITY = SwizzleBinding(SWIZZLES["identity"], 1, 8)


def preset_shapes(names: list[str]) -> list[ConvShape]:
    """Every layer of the named presets (``conf/shape/<name>.yaml``), first occurrence of each
    set of dimensions kept (named ``<preset>/<layer>``)."""
    out, seen = [], set()
    for name in names:
        preset = yaml.safe_load((ROOT / "conf" / "shape" / f"{name}.yaml").read_text())
        for entry in preset.get("shapes") or []:
            dims = {k: v for k, v in entry.items() if k not in ("layer", "name")}
            shape = ConvShape(f"{name}/{entry['name']}", dtype=entry.get("dtype", preset.get("dtype", "float16")),
                              **{k: v for k, v in dims.items() if k != "dtype"})
            if shape_key(shape) not in seen:
                seen.add(shape_key(shape))
                out.append(shape)
    return out


def table_how(device: str) -> str:
    """The ``how`` of a table this script writes or merges into: one line, the same for every
    run on ``device`` (each run's command and versions are in its ``results.json``; the
    commands behind the committed tables are in docs/benchmarks.md, "Kernel speed")."""
    return (f"timed on an {device}: per layer, by CUPTI kernel durations against cuDNN "
            "(benchmarks/conv_speed.py; commands and versions: docs/benchmarks.md)")


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


# -----------------------------------------------------------
# Timing: CUPTI kernel durations of interleaved launches, the L2 cleared before each.

class CuptiRounds:
    """Interleaved rounds over named contenders: each round launches every contender
    ``launches`` times (L2 cleared before each launch), all under one torch.profiler session;
    :meth:`medians` reads each launch's kernel time from CUPTI's records (ms)."""

    def __init__(self) -> None:
        self.flush = torch.empty(FLUSH_BYTES // 4, dtype=torch.int32, device="cuda")

    def medians(self, fns: dict, rounds: int, launches: int) -> dict[str, float]:
        for fn in fns.values():          # warm: compiles, cuDNN's algorithm search, autotuning
            for _ in range(3):
                fn()
        torch.cuda.synchronize()
        order, n = [], 0
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            for r in range(rounds):
                names = list(fns) if r % 2 == 0 else list(reversed(fns))
                for name in names:
                    for _ in range(launches):
                        self.flush.zero_()
                        with torch.profiler.record_function(f"{LAUNCH_RANGE}{n}"):
                            fns[name]()
                        order.append(name)
                        n += 1
            torch.cuda.synchronize()
        with gc_paused():
            times = kineto_launch_kernel_ms(prof.profiler.kineto_results.events(), n)
        per: dict[str, list[float]] = {name: [] for name in fns}
        for name, t in zip(order, times):
            per[name].append(t)
        return {name: sorted(v)[len(v) // 2] for name, v in per.items()}


# -----------------------------------------------------------
# Tuning.

def _compile_worker(task) -> list[tuple[str, str, str]]:
    """Launch every config of one shape once (Triton's disk cache then serves the trials);
    ``(layer, config label, why)`` of each that failed, left out of the timing.  A CUDA error
    (an illegal address) leaves the process's CUDA context unusable: the chunk's later configs
    come back as not tried (the pool gives every task a fresh process)."""
    name, shape, configs = task
    kernel = KERNELS[name]
    ops = make_operands(shape, False, 0, "cuda", "channels_last")
    errors = []
    for i, cfg in enumerate(configs):
        try:
            run, _ = kernel.bind(ops, shape, cfg.tiles_dict, IDENTITY, LaunchConfig(cfg.num_warps, cfg.num_stages))
            run()
            torch.cuda.synchronize()
        except Exception as exc:  # noqa: BLE001 (recorded and left out of the timing)
            errors.append((shape.name, cfg.label, f"{type(exc).__name__}: {str(exc).splitlines()[0][:160]}"))
            if isinstance(exc, torch.AcceleratorError):
                errors += [(shape.name, c.label, f"not tried: the CUDA context died at {cfg.label}")
                           for c in configs[i + 1:]]
                break
    return errors


def verified_run(kernel, shape: ConvShape, ops, ref, cfg: Config):
    """The launch closure of ``cfg`` on ``ops``, after its output matched the fp32 reference."""
    run, out = kernel.bind(ops, shape, cfg.tiles_dict, IDENTITY, LaunchConfig(cfg.num_warps, cfg.num_stages))
    out.fill_(math.nan)
    run()
    torch.cuda.synchronize()
    verdict = compare(kernel.output_as_nchw(out), ref, shape.dtype)
    if not verdict.ok:
        raise RuntimeError(verdict.reason)
    return run


def tune(kernel, shape: ConvShape, ops, ref, space: list[Config], timer: CuptiRounds,
         finalists: int) -> tuple[Config, list]:
    """The fastest verified config of ``space``: one short CUPTI round over all, then
    interleaved CUPTI rounds over the ``finalists`` fastest; the lowest median wins."""
    runs = {}
    for cfg in space:
        try:
            runs[cfg.label] = (cfg, verified_run(kernel, shape, ops, ref, cfg))
        except Exception:  # noqa: BLE001 (a failing candidate is skipped, as the tuner does)
            continue
    if not runs:
        raise RuntimeError("no candidate compiled and verified")
    first = timer.medians({label: run for label, (_, run) in runs.items()}, rounds=1, launches=3)
    top = sorted(first, key=first.get)[:finalists]
    final = timer.medians({label: runs[label][1] for label in top}, rounds=4, launches=10)
    best = min(top, key=final.get)
    return runs[best][0], [(final[label] * 1e3, label) for label in top]


# -----------------------------------------------------------
# The contenders beside ours.

def cudnn_runs(shape: ConvShape, ops) -> dict:
    """cuDNN through F.conv2d, heuristic choice and benchmark mode (same tensors)."""
    x, w = ops.x, ops.w.contiguous(memory_format=torch.channels_last)

    def call():
        F.conv2d(x, w, None, stride=shape.stride, padding=shape.padding)

    def heuristic():
        torch.backends.cudnn.benchmark = False
        call()

    def benchmark():
        torch.backends.cudnn.benchmark = True
        call()
        torch.backends.cudnn.benchmark = False

    return {"cudnn": heuristic, "cudnn_bench": benchmark}


def inductor_run(shape: ConvShape, ops):
    """Inductor's max-autotune compile of a Conv2d module (no bias), channels_last."""
    conv = torch.nn.Conv2d(shape.C, shape.F, (shape.R, shape.S), stride=shape.stride, padding=shape.padding,
                           bias=False).to(device="cuda", dtype=ops.x.dtype).to(memory_format=torch.channels_last)
    with torch.no_grad():
        conv.weight.copy_(ops.w)
    compiled = torch.compile(conv, mode="max-autotune", dynamic=False)

    def run():
        with torch.no_grad():
            compiled(ops.x)

    run()
    return run


def add_inductor(row: dict, shape: ConvShape, timer: CuptiRounds, args) -> None:
    """Time Inductor's conv on ``row``'s layer in rounds interleaved with ours (its own config)."""
    ops = make_operands(shape, False, 0, "cuda", "channels_last")
    try:
        ours = verified_run(shape, ops, reference(ops, shape), Config.from_dict(row["config"]))
        med = timer.medians({"ours": ours, "inductor": inductor_run(shape, ops)}, args.rounds, args.launches)
    except Exception as exc:  # noqa: BLE001 (Inductor is a peer where it runs)
        print(f"{shape.name}: inductor failed: {type(exc).__name__}: {str(exc)[:200]}", flush=True)
        return
    row["inductor_ms"], row["ratio_inductor"] = med["inductor"], med["inductor"] / med["ours"]
    print(f"{shape.name:18s} inductor {med['inductor'] * 1e3:7.1f} us, ours {med['ours'] * 1e3:7.1f} us", flush=True)


def geomean(values) -> float:
    values = [v for v in values if v and v > 0 and math.isfinite(v)]
    return math.exp(sum(map(math.log, values)) / len(values)) if values else float("nan")


def render(rows: list[dict], meta: dict, command: str) -> str:
    lines = [f"`{command}`", "",
             f"{meta['device']} | {meta['nvidia_smi']} | torch {meta['torch']} (CUDA {meta['cuda']}, cuDNN "
             f"{meta['cudnn']}) | Triton {meta['triton']} | channels_last fp16 | CUPTI kernel time, L2 cleared",
             "", "| layer | N C HxW F RxS s p | config | ours us | cuDNN us | cuDNN bench us | Inductor us | "
             "vs best cuDNN | vs Inductor |", "|---|---|---|---:|---:|---:|---:|---:|---:|"]

    def us(v):
        return f"{v * 1e3:.1f}" if v else "-"

    for r in rows:
        vs_inductor = f"{r['ratio_inductor']:.3f}" if r.get("ratio_inductor") else "-"
        lines.append(f"| {r['shape']} | {r['dims']} | {r['label']} | {us(r['ours_ms'])} | {us(r['cudnn_ms'])} | "
                     f"{us(r['cudnn_bench_ms'])} | {us(r.get('inductor_ms'))} | {r['ratio']:.3f} | {vs_inductor} |")
    lines.append("")
    for p in preset_lines(rows):
        lines.append(f"- {p.preset} ({p.layers} layers): geomean vs best cuDNN **{p.geomean:.3f}**, "
                     f"worst {p.worst} {p.worst_ratio:.3f}; vs heuristic cuDNN {p.heuristic:.3f}")
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class PresetLine:
    """One preset's rows (``all``: every row): their count, the geomean of cuDNN / ours against
    the faster cuDNN mode and against the heuristic one, the worst layer and its ratio."""

    preset: str
    layers: int
    geomean: float
    heuristic: float
    worst: str
    worst_ratio: float


def preset_lines(rows: list[dict]) -> list[PresetLine]:
    """``all`` first, then each preset (the part of a row's ``shape`` before ``/``) by name."""
    groups: dict[str, list[dict]] = {}
    for r in rows:
        groups.setdefault(r["shape"].split("/")[0], []).append(r)
    out = []
    for name, rs in [("all", rows)] + sorted(groups.items()):
        worst = min(rs, key=lambda r: r["ratio"])
        out.append(PresetLine(name, len(rs), geomean(r["ratio"] for r in rs),
                              geomean(r["cudnn_ms"] / r["ours_ms"] for r in rs), worst["shape"], worst["ratio"]))
    return out


def space_for(shape: ConvShape, space: list[Config], table: TunedTable | None, seeds: list[Config],
              canonical: Callable[[Config], Config]) -> list[Config]:
    """What to time on ``shape``: the table's choice (``--table``), the seed table's configs
    that are in the layer's own space (``--seeded-from``; the whole space if none is), or the
    whole space.  Configs are compared as ``canonical`` completes them (a table may leave out
    a tile that has a default)."""
    known = {canonical(cfg) for cfg in space}
    if table is not None:
        return [table.lookup(shape, accept=lambda cfg: canonical(cfg) in known).config]
    seeded = [cfg for cfg in seeds if canonical(cfg) in known]
    return seeded or space


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--kernel", default="igemm_fast", help="the family to tune and time (default igemm_fast)")
    ap.add_argument("--presets", default="resnet")
    ap.add_argument("--shapes", default=None, help="comma-separated layer names (of the presets) to keep")
    ap.add_argument("--table", default=None, help="time this tuning table's configs instead of tuning")
    ap.add_argument("--seeded-from", default=None,
                    help="tune over this table's configs only (those valid for the layer; none: the full space)")
    ap.add_argument("--inductor", action="store_true")
    ap.add_argument("--jobs", type=int, default=min(16, os.cpu_count() or 1))
    ap.add_argument("--finalists", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--launches", type=int, default=10)
    ap.add_argument("--merge-into", default=None,
                    help="also write OUT/merged.json: this table with the layers tuned here replaced")
    ap.add_argument("--deadline-s", type=float, default=None,
                    help="start no new layer after this many seconds from the start (compiles included)")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    command = "python benchmarks/conv_speed.py " + " ".join(sys.argv[1:])
    shapes = preset_shapes(args.presets.split(","))
    if args.shapes:
        keep = set(args.shapes.split(","))
        shapes = [s for s in shapes if s.name.split("/")[1] in keep]
    kernel, traits, meta = KERNELS[args.kernel], DeviceTraits.of("cuda"), versions()
    print(json.dumps(meta), flush=True)
    table = TunedTable.load(Path(args.table)) if args.table else None
    seeds = TunedTable.load(Path(args.seeded_from)).configs() if args.seeded_from else []
    spaces = {s.name: space_for(s, kernel.tune_space(s, traits), table, seeds, kernel.canonical) for s in shapes}
    outside = [s.name for s in shapes if not spaces[s.name]]
    if outside:
        print(f"{args.kernel} cannot run {len(outside)} layers (empty space), skipped: {' '.join(outside)}", flush=True)
    shapes = [s for s in shapes if spaces[s.name]]
    t0 = started = time.perf_counter()
    tasks = [(args.kernel, s, spaces[s.name][i::8]) for s in shapes for i in range(8) if spaces[s.name][i::8]]
    with mp.get_context("spawn").Pool(args.jobs, maxtasksperchild=1) as pool:   # configs over every process
        failed = [e for es in pool.imap_unordered(_compile_worker, tasks) for e in es]
    print(f"compiled {sum(map(len, spaces.values()))} (layer, config) pairs in {time.perf_counter() - t0:.0f} s; "
          f"{len(failed)} failed", flush=True)
    errors = [f"{layer} {label}: {why}" for layer, label, why in failed]
    for line in errors:
        print(f"  left out: {line}", flush=True)
    dropped = {(layer, label) for layer, label, _ in failed}
    spaces = {n: [c for c in space if (n, c.label) not in dropped] for n, space in spaces.items()}
    timer, rows = CuptiRounds(), []
    merged = TunedTable.load(Path(args.merge_into)) if args.merge_into else None
    tuned = TunedTable(meta["device"], {}, how=table_how(meta["device"]))
    for shape in shapes:
        if args.deadline_s and time.perf_counter() - started > args.deadline_s:
            print(f"deadline: {shape.name} and later layers not run", flush=True)
            break
        try:
            rows.append(measure(kernel, shape, spaces[shape.name], timer, args, tuned))
        except Exception as exc:  # noqa: BLE001 (one layer's failure must not lose the others)
            print(f"{shape.name}: FAILED {type(exc).__name__}: {str(exc)[:300]}", flush=True)
        (out / "results.json").write_text(json.dumps({"meta": meta, "command": command, "rows": rows,
                                                      "compile_errors": errors[:200]}, indent=1))
        tuned.save(out / f"{args.kernel}_{meta['device'].split()[1].lower()}.json")
        if merged is not None:
            merged.entries.update(tuned.entries)
            merged.how = tuned.how
            merged.save(out / "merged.json")
    if args.inductor:
        for row in rows:
            if args.deadline_s and time.perf_counter() - started > args.deadline_s:
                print(f"deadline: Inductor not run from {row['shape']} on", flush=True)
                break
            add_inductor(row, {s.name: s for s in shapes}[row["shape"]], timer, args)
        (out / "results.json").write_text(json.dumps({"meta": meta, "command": command, "rows": rows,
                                                      "compile_errors": errors[:200]}, indent=1))
    text = render(rows, meta, command)
    (out / "table.md").write_text(text)
    print(text)


def measure(kernel, shape: ConvShape, space: list[Config], timer: CuptiRounds, args, tuned: TunedTable) -> dict:
    t0 = time.perf_counter()
    ops = make_operands(shape, False, 0, "cuda", "channels_last")
    ref = reference(ops, shape)
    best, top = tune(kernel, shape, ops, ref, space, timer, args.finalists)
    tune_s = time.perf_counter() - t0
    tuned.entries[shape_key(shape)] = tuned.entry(shape, best)
    fns = {"ours": verified_run(kernel, shape, ops, ref, best), **cudnn_runs(shape, ops)}
    med = timer.medians(fns, args.rounds, args.launches)
    best_cudnn = min(med["cudnn"], med["cudnn_bench"])
    row = {"shape": shape.name, "dims": f"{shape.N} {shape.C} {shape.H}x{shape.W} {shape.F} {shape.R}x{shape.S} "
           f"s{shape.stride} p{shape.padding}", "flops": shape.flops, "config": best.as_dict(), "label": best.label,
           "candidates": len(space), "top": top, "tune_s": tune_s,
           "ours_ms": med["ours"], "cudnn_ms": med["cudnn"], "cudnn_bench_ms": med["cudnn_bench"],
           "inductor_ms": None, "ratio": best_cudnn / med["ours"], "ratio_inductor": None}
    print(f"{shape.name:18s} {row['dims']:30s} ours {med['ours'] * 1e3:7.1f} cudnn {med['cudnn'] * 1e3:7.1f} "
          f"bench {med['cudnn_bench'] * 1e3:7.1f} "
          f"ratio {row['ratio']:.3f}  {best.label}  ({len(space)} cand, {tune_s:.1f} s)", flush=True)
    return row


if __name__ == "__main__":
    main()
