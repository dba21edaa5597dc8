"""The MI300X tuning table of igemm_fast, chosen from gfx942 compile reports on a machine with
no GPU: nothing here is timed, on an MI300X or anywhere.

    python benchmarks/amd_table.py [--presets resnet,unseen] [--jobs 2] [--deadline-s 3000]
        [--out kernels/tuned/igemm_fast_mi300x.json]
        [--candidates benchmarks/results/amd_table/candidates.csv.xz]

For every layer of the named shape presets (default: every preset; duplicates by dimensions
merged, as in ``benchmarks/conv_speed.py``; in the order of :func:`layer_order`), every config of
the kernel's AMD candidate space (``tune_space`` with the traits of ``mi300x``, gfx942, 304
CUs) is compiled for gfx942 by the harness's compile stage (:mod:`harness.compile.build`,
through the report cache of :mod:`harness.compile.client`; Triton's own cache
serves the binaries that several layers share: the kernel takes most shape sizes as
run-time arguments).  The layer's config is then chosen by this rule (:func:`rank`; docs/compile.md):

1. it compiled, with no VGPR spills and no scratch memory, in every kernel of its launch;
2. its LDS fits the CU's 64 KB;
3. at least :data:`MIN_WAVES` waves per SIMD (occupancy of the main kernel, from its VGPRs,
   SGPRs and LDS), where any candidate keeps them;
4. the largest output tile, BLOCK_M x BLOCK_N (more reuse per loaded byte); then the most
   waves per SIMD;
5. the simplest: fewest AMD compiler knobs, fewest pipeline stages, fewest kernels per
   launch (split-K sum, fold pass), no split-K, not persistent; then the deeper BLOCK_K
   (fewer K steps); then the space's own order.

Writes the table (:mod:`kernels.tuned` format; each entry also keeps its compile figures and
how many candidates each step left) and one CSV row per candidate, and prints one line per
layer.  With ``--deadline-s`` it stops starting layers at the deadline: the layers left out
take their nearest entry at run time (:meth:`kernels.tuned.TunedTable.lookup`).
"""
from __future__ import annotations

import argparse
import csv
import lzma
import multiprocessing as mp
import re
import sys
import time
from dataclasses import dataclass, fields
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from conv_speed import preset_shapes  # noqa: E402
from harness.hardware.arch import arch_limits  # noqa: E402
from harness.compile.build import CompileFailed  # noqa: E402
from harness.compile.client import CompileClient  # noqa: E402
from harness.job.spec import JobSpec  # noqa: E402
from kernels import KERNELS  # noqa: E402
from kernels.igemm_fast import AMD_OPTIONS  # noqa: E402
from kernels.problem import ConvShape  # noqa: E402
from kernels.tuned import TunedTable, shape_key, table_path  # noqa: E402
from kernels.tuning import Config, DeviceTraits  # noqa: E402

KERNEL = "igemm_fast"
TARGET, ARCH, CUS = "mi300x", "gfx942", 304
TRAITS = DeviceTraits.for_target(TARGET, ARCH, CUS)
LDS_BYTES = arch_limits(ARCH).shared_per_cu
#: Waves per SIMD a config must keep (where any candidate keeps them) before tile size counts:
#: two waves let one hide the other's memory latency; beyond that, a larger tile reuses each
#: load more (the most-waves-first rule picked 64x64 tiles on 83 of 91 layers).
MIN_WAVES = 2
CANDIDATES_CSV = ROOT / "benchmarks" / "results" / "amd_table" / "candidates.csv.xz"


@dataclass(frozen=True)
class Candidate:
    """One config's gfx942 compile, as the rule reads it.  ``error``: why it did not compile
    (the other fields are then 0)."""

    config: Config
    error: str = ""
    waves_per_simd: int = 0     # waves of the main kernel resident per SIMD (occupancy)
    vgprs: int = 0              # VGPRs + AGPRs per lane, main kernel
    lds_bytes: int = 0          # LDS per workgroup, bytes, main kernel
    spills: int = 0             # VGPRs spilled, summed over the launch's kernels
    scratch_bytes: int = 0      # scratch per lane, bytes, the launch's largest
    kernels: int = 1            # jit kernels one launch runs
    binary: str = ""            # Triton's hash of the main kernel's binary (first 16 hex digits)

    @property
    def eligible(self) -> bool:
        """Steps 1-2 of the rule: compiled, nothing spilled, LDS within the CU's."""
        return not self.error and not self.spills and not self.scratch_bytes and self.lds_bytes <= LDS_BYTES


def rank(c: Candidate) -> tuple:
    """Steps 3-6 of the rule as a sort key (smallest is chosen)."""
    t = c.config.tiles_dict
    knobs = sum(1 for k in AMD_OPTIONS if t.get(k))
    return (-min(c.waves_per_simd, MIN_WAVES), -t["BLOCK_M"] * t["BLOCK_N"], -c.waves_per_simd, knobs,
            c.config.num_stages, c.kernels, t["SPLIT_K"], t["PERSISTENT"], -t["BLOCK_K"])


def choose(cands: list[Candidate]) -> tuple[Candidate | None, dict[str, int]]:
    """The rule's pick among ``cands`` (in the space's order; the first of equal rank wins),
    and how many candidates each step left."""
    ok = [c for c in cands if c.eligible]
    steps = {"candidates": len(cands), "compiled": sum(1 for c in cands if not c.error),
             "no_spills": sum(1 for c in cands if not c.error and not c.spills and not c.scratch_bytes),
             "eligible": len(ok)}
    if not ok:
        return None, steps
    best = min(ok, key=rank)
    steps["enough_waves"] = sum(1 for c in ok if rank(c)[:1] == rank(best)[:1])
    steps["largest_tile"] = sum(1 for c in ok if rank(c)[:2] == rank(best)[:2])
    return best, steps


def compile_candidate(client: CompileClient, shape: ConvShape, cfg: Config) -> Candidate:
    """``cfg`` on ``shape`` through the compile stage for gfx942 (swizzle identity)."""
    spec = JobSpec(kernel=KERNEL, tiles=cfg.tiles, swizzle="identity", num_xcds=8, group_size=8, shape=shape,
                   shape_preset=shape.name.split("/")[0], num_warps=cfg.num_warps, num_stages=cfg.num_stages,
                   target=TARGET, seed=0)
    try:
        report = client.compile(spec, ARCH)
    except CompileFailed as exc:
        return Candidate(cfg, error=str(exc))
    m = report.main
    occ = m.occupancy or {}
    return Candidate(cfg, waves_per_simd=int(occ.get("waves_per_simd") or 0), vgprs=int(m.registers or 0),
                     lds_bytes=m.shared_bytes, spills=sum(k.spills for k in report.kernels),
                     scratch_bytes=max(k.spill_bytes for k in report.kernels), kernels=len(report.kernels),
                     binary=m.triton_hash[:16])


# -----------------------------------------------------------
# The candidates' CSV: one row per (layer, config).

COLUMNS = ["layer", "key", "config"] + [f.name for f in fields(Candidate) if f.name != "config"]


def config_from_label(label: str) -> Config:
    """The inverse of :attr:`Config.label` (``M128 N64 K64 SPLIT_K1 ... w4 s2``)."""
    *tiles, warps, stages = label.split()
    long = {"M": "BLOCK_M", "N": "BLOCK_N", "K": "BLOCK_K"}
    pairs = [re.fullmatch(r"([A-Z_]+?)(\d+)", t).groups() for t in tiles]
    return Config.make({long.get(k, k): int(v) for k, v in pairs}, int(warps[1:]), int(stages[1:]))


def candidate_rows(shape: ConvShape, cands: list[Candidate]) -> list[dict]:
    return [{"layer": shape.name, "key": shape_key(shape), "config": c.config.label,
             **{f: getattr(c, f) for f in COLUMNS[3:]}} for c in cands]


def read_candidates(path: Path) -> dict[str, list[Candidate]]:
    """The CSV back, by layer key, in the space's order."""
    out: dict[str, list[Candidate]] = {}
    ints = [f.name for f in fields(Candidate) if f.type in ("int", int)]
    with lzma.open(path, "rt", newline="") as fh:
        for row in csv.DictReader(fh):
            out.setdefault(row["key"], []).append(Candidate(
                config_from_label(row["config"]), error=row["error"], binary=row["binary"],
                **{k: int(row[k]) for k in ints}))
    return out


# -----------------------------------------------------------

_CLIENT: CompileClient | None = None


def _work(item: tuple[ConvShape, Config]) -> Candidate:
    global _CLIENT
    if _CLIENT is None:
        _CLIENT = CompileClient()
    return compile_candidate(_CLIENT, *item)


def entry(shape: ConvShape, best: Candidate, steps: dict[str, int]) -> dict:
    """The table entry: :meth:`TunedTable.entry` plus the chosen config's compile figures and
    how many candidates each step of the rule left."""
    return {**TunedTable.entry(shape, best.config),
            "compile": {"waves_per_simd": best.waves_per_simd, "vgprs": best.vgprs, "lds_bytes": best.lds_bytes,
                        "spills": best.spills, "scratch_bytes": best.scratch_bytes, "kernels": best.kernels},
            "rule": steps}


def layer_kind(shape: ConvShape) -> tuple:
    """What :meth:`TunedTable.lookup` matches a layer's nearest entry on."""
    return shape.R, shape.S, shape.stride, shape.padding > 0, shape.dtype


def layer_order(shapes: list[ConvShape]) -> list[ConvShape]:
    """ResNet-50's layers first, then one layer of each kind (:func:`layer_kind`) the table
    has no entry of yet, then the rest: a run cut short leaves no kind without an entry."""
    first = [s for s in shapes if s.name.startswith("resnet/")]
    kinds = {layer_kind(s) for s in first}
    for s in shapes:
        if layer_kind(s) not in kinds:
            kinds.add(layer_kind(s))
            first.append(s)
    return first + [s for s in shapes if s not in first]


def main() -> None:
    import triton

    names = sorted(p.stem for p in (ROOT / "conf" / "shape").glob("*.yaml"))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--presets", default=",".join(["resnet"] + [n for n in names if n != "resnet"]))
    ap.add_argument("--out", type=Path, default=table_path(KERNEL, TARGET))
    ap.add_argument("--candidates", type=Path, default=CANDIDATES_CSV)
    ap.add_argument("--jobs", type=int, default=1, help="compile processes")
    ap.add_argument("--deadline-s", type=float, default=None, help="start no layer after this many seconds")
    args = ap.parse_args()

    start = time.perf_counter()
    shapes = layer_order(preset_shapes(args.presets.split(",")))
    how = (f"compiled for gfx942 with Triton {triton.__version__} and not timed on an MI300X "
           "(amd_table.py), chosen by the compile report: the rule in docs/compile.md")
    table = TunedTable(f"AMD Instinct MI300X ({ARCH}, {CUS} CUs): compiled only", {}, how)
    args.candidates.parent.mkdir(parents=True, exist_ok=True)
    left_out, binaries, total = [], set(), 0
    pool = mp.Pool(args.jobs) if args.jobs > 1 else None
    with lzma.open(args.candidates, "wt", newline="") as fh:
        writer = csv.DictWriter(fh, COLUMNS)
        writer.writeheader()
        for shape in shapes:
            if args.deadline_s is not None and time.perf_counter() - start > args.deadline_s:
                left_out.append(shape.name)
                continue
            t0 = time.perf_counter()
            space = KERNELS[KERNEL].tune_space(shape, TRAITS)
            items = [(shape, cfg) for cfg in space]
            cands = list(pool.imap(_work, items)) if pool else [_work(i) for i in items]
            writer.writerows(candidate_rows(shape, cands))
            fh.flush()
            total += len(cands)
            binaries.update(c.binary for c in cands if c.binary)
            best, steps = choose(cands)
            if best is None:
                print(f"{shape.name}: no eligible config of {len(cands)} ({steps})", flush=True)
                continue
            table.entries[shape_key(shape)] = entry(shape, best, steps)
            table.save(args.out)
            print(f"{shape.name} {shape_key(shape)}: {best.config.label}  {best.waves_per_simd} waves/SIMD, "
                  f"{best.vgprs} VGPR, {best.lds_bytes} B LDS  {steps}  ({time.perf_counter() - t0:.0f} s)", flush=True)
    if pool:
        pool.close()
    table.save(args.out)
    print(f"{len(table.entries)} layers, {total} candidates ({len(binaries)} distinct binaries) in "
          f"{time.perf_counter() - start:.0f} s; wrote {args.out} and {args.candidates}")
    if left_out:
        print(f"left out (deadline; they take their nearest entry): {', '.join(left_out)}")


if __name__ == "__main__":
    main()
