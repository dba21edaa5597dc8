"""A trace-driven simulated L2: the profiler backend that needs no GPU.

What it models (MI300X by default; NVIDIA as one L2 domain):

* **Dispatch.**  Programs start in launch order, pid 0, 1, 2, ...; program ``pid``
  computes tile ``table[pid]`` (the swizzle's remap table) and runs on XCD
  ``pid % num_xcds`` (round-robin, the SPX-mode rule).  Each XCD keeps
  ``compute_units / num_xcds * occupancy`` programs resident; when one finishes, the
  XCD's next program in launch order takes its place.
* **Interleaving.**  Resident programs advance in lock step, round-robin: in each
  round every XCD in turn, and in each XCD every resident program in turn (in slot
  order), performs one step (one K-step of its tile, see :mod:`kernels.access`): it
  reads that step's distinct cache lines, input lines first.  A program that finishes
  is replaced in the same slot and performs its first step in the next round.
* **Caches.**  XCD ``x`` reads through L2 domain ``x * l2_domains // num_xcds``; each
  domain is its own set-associative LRU cache of ``l2_bytes`` (MI300X: 4 MB, 16 ways,
  128 B lines, one per XCD).  Optionally, L2 misses go on to one memory-side cache
  shared by all domains (the 256 MB MI300X Infinity Cache, "MALL"), in the global
  order of the rounds.  Only loads are simulated; caches start cold.

Outputs (:class:`SimResult`): hits and misses in line accesses, overall and per XCD
and per domain hit rates (%), bytes L2 fetched from below it (misses x line size) and,
with the MALL, bytes read from memory (MALL misses x line size).

Speed: the replay loop is compiled with numba (see :mod:`.sim_cache`); run
``python benchmarks/sim_speed.py`` for the current figures.
"""
from __future__ import annotations

import functools
import math
import os
import time
from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

from harness.profilers.wrapped import Profiler
from harness.profilers.base import L2Reading
from harness.profilers.sim_cache import HAVE_NUMBA, CacheGeometry, jit, lru_access, tag_dtype
from kernels.access import AccessModel

#: Workgroups resident per CU when neither the caller nor the target says: a big
#: implicit-GEMM tile (128 x 128 x 64 fp16, 8 warps) leaves room for about two.
DEFAULT_OCCUPANCY = 2

#: Associativity of the memory-side cache when the target does not give ``mall_ways``
#: (MI300X Infinity Cache: 16 ways).
DEFAULT_MALL_WAYS = 16

#: Which replay implementation runs: "numba" (compiled) or "python" (interpreted).
ENGINE = "numba" if HAVE_NUMBA else "python"


@dataclass(frozen=True)
class SimTarget:
    """The simulated machine: dispatch, residency and cache hierarchy."""

    num_xcds: int                 # programs are dealt round-robin to this many XCDs (dies)
    cus_per_xcd: int              # CUs (SMs) per XCD
    occupancy: int                # programs resident per CU
    l2_domains: int               # separate L2 caches; XCD x uses domain x * l2_domains // num_xcds
    l2: CacheGeometry             # geometry of each L2 domain
    mall: CacheGeometry | None    # shared memory-side cache behind the L2s, or None

    def __post_init__(self) -> None:
        for name in ("num_xcds", "cus_per_xcd", "occupancy", "l2_domains"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise ValueError(f"simulated target: {name}={value!r} must be a positive integer")
        if self.l2_domains > self.num_xcds:
            raise ValueError(f"simulated target: l2_domains={self.l2_domains} > num_xcds={self.num_xcds}; "
                             "each L2 domain serves one or more whole XCDs")
        if self.mall is not None and self.mall.line_bytes != self.l2.line_bytes:
            raise ValueError("simulated target: the MALL and the L2 must use the same line size")

    @property
    def slots_per_xcd(self) -> int:
        """Programs an XCD runs at once."""
        return self.cus_per_xcd * self.occupancy

    @property
    def line_bytes(self) -> int:
        return self.l2.line_bytes

    def domain_of_xcd(self) -> np.ndarray:
        """L2 domain of each XCD, (num_xcds,) int64."""
        return np.arange(self.num_xcds, dtype=np.int64) * self.l2_domains // self.num_xcds

    @classmethod
    def from_target(cls, target: Mapping[str, Any], occupancy: int | None = None,
                    line_bytes: int | None = None) -> "SimTarget":
        """Build from a ``target`` config record (``conf/target/*.yaml``).

        Uses ``num_xcds``, ``compute_units`` (total over the device), ``l2_bytes`` (per
        domain), ``l2_ways``, ``l2_line_bytes``, ``l2_domains`` (default: ``num_xcds``),
        ``mall_bytes`` (0 or missing: no MALL), ``mall_ways`` (default 16) and
        ``occupancy`` (default :data:`DEFAULT_OCCUPANCY`).  ``occupancy`` and
        ``line_bytes`` given here override the record (e.g. ``line_bytes=32`` to count
        NVIDIA's 32 B sectors).
        """
        name = target.get("name", "?")

        def need(key: str) -> int:
            value = target.get(key)
            if value is None:
                raise ValueError(f"target {name!r}: {key} is not set; the simulator needs num_xcds, "
                                 "compute_units, l2_bytes, l2_ways and l2_line_bytes "
                                 "(target=auto must be resolved to a preset first)")
            return int(value)

        num_xcds = need("num_xcds")
        compute_units = need("compute_units")
        if compute_units % num_xcds:
            raise ValueError(f"target {name!r}: compute_units={compute_units} is not a multiple of "
                             f"num_xcds={num_xcds}")
        line = int(line_bytes) if line_bytes is not None else need("l2_line_bytes")
        mall_bytes = int(target.get("mall_bytes") or 0)
        return cls(
            num_xcds=num_xcds,
            cus_per_xcd=compute_units // num_xcds,
            occupancy=int(occupancy if occupancy is not None else (target.get("occupancy") or DEFAULT_OCCUPANCY)),
            l2_domains=int(target.get("l2_domains") or num_xcds),
            l2=CacheGeometry(need("l2_bytes"), need("l2_ways"), line),
            mall=(CacheGeometry(mall_bytes, int(target.get("mall_ways") or DEFAULT_MALL_WAYS), line)
                  if mall_bytes else None),
        )


@dataclass(frozen=True)
class SimResult:
    """What one simulated launch did to the caches.  Counts are line accesses; rates in %
    (NaN for an XCD or domain that received no program)."""

    hit_rate: float                       # 100 * hits / (hits + misses), all L2 domains
    hits: int
    misses: int
    xcd_hits: tuple[int, ...]             # per XCD
    xcd_misses: tuple[int, ...]
    domain_hits: tuple[int, ...]          # per L2 domain (== per XCD on MI300X)
    domain_misses: tuple[int, ...]
    line_bytes: int
    l2_miss_bytes: int                    # misses x line_bytes: bytes the L2s fetched from below
    mall_hits: int | None                 # None without a MALL
    mall_misses: int | None
    dram_read_bytes: int                  # bytes read from memory (after the MALL, if any)
    num_programs: int
    slots_per_xcd: int
    replay_s: float                       # wall time of the replay loop, s
    engine: str                           # "numba" or "python"

    @property
    def accesses(self) -> int:
        return self.hits + self.misses

    @property
    def xcd_hit_rates(self) -> tuple[float, ...]:
        return tuple(_rate(h, m) for h, m in zip(self.xcd_hits, self.xcd_misses))

    @property
    def domain_hit_rates(self) -> tuple[float, ...]:
        return tuple(_rate(h, m) for h, m in zip(self.domain_hits, self.domain_misses))

    @property
    def mall_hit_rate(self) -> float | None:
        return None if self.mall_hits is None else _rate(self.mall_hits, self.mall_misses)

    def as_reading(self) -> L2Reading:
        """The result as a profiler reading: one exact sample, no spread."""
        return L2Reading(l2_hit_rate=self.hit_rate, l2_hit_rate_std=0.0, l2_hits=float(self.hits),
                         l2_misses=float(self.misses), profiled_time_ms=None,
                         dram_read_bytes=float(self.dram_read_bytes), samples=1)

    def as_metrics(self, prefix: str = "sim.") -> dict[str, float]:
        """The figures a reading does not carry, flat, for logging: per-XCD and MALL hit
        rates (%), bytes the L2s fetched (bytes); NaN rates of idle XCDs are left out."""
        out = {f"{prefix}l2_miss_bytes": float(self.l2_miss_bytes),
               f"{prefix}slots_per_xcd": float(self.slots_per_xcd)}
        out.update({f"{prefix}xcd{x}_hit_rate": r for x, r in enumerate(self.xcd_hit_rates) if not math.isnan(r)})
        if self.mall_hit_rate is not None and not math.isnan(self.mall_hit_rate):
            out[f"{prefix}mall_hit_rate"] = self.mall_hit_rate
        return out


def _rate(hits: int, misses: int) -> float:
    return 100.0 * hits / (hits + misses) if hits + misses else math.nan


# -----------------------------------------------------------
# The replay loop.  Everything the loop touches is a flat int64 array so that numba
# compiles it to plain machine code; without numba it runs as ordinary Python.

@jit
def _replay(table, tile_rows, offsets, lines, num_steps, num_xcds, slots, domain_of_xcd,
            l2_tags, l2_sets, l2_ways, mall_tags, mall_sets, mall_ways, xcd_hits, xcd_misses, mall_counts):
    num_programs = len(table)
    num_operands = tile_rows.shape[1]
    # Slot state: the resident program (-1 = idle) and its next step.
    slot_pid = np.full((num_xcds, slots), -1, dtype=np.int64)
    slot_step = np.zeros((num_xcds, slots), dtype=np.int64)
    next_pid = np.arange(num_xcds, dtype=np.int64)   # XCD x runs pids x, x + num_xcds, ...
    active = 0
    for x in range(num_xcds):
        for sl in range(slots):
            if next_pid[x] < num_programs:
                slot_pid[x, sl] = next_pid[x]
                next_pid[x] += num_xcds
                active += 1
    while active > 0:
        for x in range(num_xcds):                      # one round: every XCD in turn ...
            l2_base = domain_of_xcd[x] * l2_sets
            for sl in range(slots):                    # ... every resident program in turn
                pid = slot_pid[x, sl]
                if pid < 0:
                    continue
                tile = table[pid]
                step = slot_step[x, sl]
                for o in range(num_operands):          # ... performs one step
                    seg = tile_rows[tile, o] * num_steps + step
                    for i in range(offsets[seg], offsets[seg + 1]):
                        line = lines[i]
                        if lru_access(l2_tags, (l2_base + line % l2_sets) * l2_ways, l2_ways, line):
                            xcd_hits[x] += 1
                        else:
                            xcd_misses[x] += 1
                            if mall_sets > 0:
                                if lru_access(mall_tags, (line % mall_sets) * mall_ways, mall_ways, line):
                                    mall_counts[0] += 1
                                else:
                                    mall_counts[1] += 1
                step += 1
                if step == num_steps:                  # finished: the next program takes the slot
                    if next_pid[x] < num_programs:
                        slot_pid[x, sl] = next_pid[x]
                        next_pid[x] += num_xcds
                    else:
                        slot_pid[x, sl] = -1
                        active -= 1
                    step = 0
                slot_step[x, sl] = step


def simulate_l2(model: AccessModel, table: np.ndarray, target: SimTarget) -> SimResult:
    """Replay a launch: program ``pid`` computes tile ``table[pid]`` and reads what
    ``model`` says, on the machine ``target``.  ``model.line_bytes`` must equal the L2's."""
    if model.line_bytes != target.line_bytes:
        raise ValueError(f"access model uses {model.line_bytes} B lines, the simulated L2 "
                         f"{target.line_bytes} B")
    table = np.ascontiguousarray(table, dtype=np.int64)
    if len(table) and (table.min() < 0 or table.max() >= model.num_tiles):
        raise ValueError(f"remap table sends a program outside the {model.num_tiles} tiles")
    # Line ids and tags share one type, int32 whenever the ids fit (half the memory traffic).
    dtype = tag_dtype(int(model.lines.max()) if len(model.lines) else 0)
    lines = model.lines.astype(dtype, copy=False)
    l2_tags = target.l2.empty_state(target.l2_domains, dtype)
    if target.mall is not None:
        mall_tags = target.mall.empty_state(1, dtype)
        mall_sets, mall_ways = target.mall.num_sets, target.mall.ways
    else:
        mall_tags = np.zeros(1, dtype=dtype)
        mall_sets, mall_ways = 0, 1
    xcd_hits = np.zeros(target.num_xcds, dtype=np.int64)
    xcd_misses = np.zeros(target.num_xcds, dtype=np.int64)
    mall_counts = np.zeros(2, dtype=np.int64)
    domain_of_xcd = target.domain_of_xcd()

    started = time.perf_counter()
    _replay(table, model.tile_rows, model.offsets, lines, model.num_steps, target.num_xcds,
            target.slots_per_xcd, domain_of_xcd, l2_tags, target.l2.num_sets, target.l2.ways,
            mall_tags, mall_sets, mall_ways, xcd_hits, xcd_misses, mall_counts)
    replay_s = time.perf_counter() - started

    domain_hits = np.bincount(domain_of_xcd, weights=xcd_hits, minlength=target.l2_domains).astype(np.int64)
    domain_misses = np.bincount(domain_of_xcd, weights=xcd_misses, minlength=target.l2_domains).astype(np.int64)
    hits, misses = int(xcd_hits.sum()), int(xcd_misses.sum())
    line = target.line_bytes
    with_mall = target.mall is not None
    return SimResult(
        hit_rate=_rate(hits, misses), hits=hits, misses=misses,
        xcd_hits=tuple(int(v) for v in xcd_hits), xcd_misses=tuple(int(v) for v in xcd_misses),
        domain_hits=tuple(int(v) for v in domain_hits), domain_misses=tuple(int(v) for v in domain_misses),
        line_bytes=line, l2_miss_bytes=misses * line,
        mall_hits=int(mall_counts[0]) if with_mall else None,
        mall_misses=int(mall_counts[1]) if with_mall else None,
        dram_read_bytes=int(mall_counts[1]) * line if with_mall else misses * line,
        num_programs=len(table), slots_per_xcd=target.slots_per_xcd, replay_s=replay_s, engine=ENGINE)


# -----------------------------------------------------------
# The entry point the harness calls for one job.

@functools.lru_cache(maxsize=4)
def _cached_model(kernel, shape, tiles: tuple[tuple[str, int], ...], line_bytes: int) -> AccessModel:
    # A sweep simulates the same (kernel, shape, tiles) under several swizzles.
    return kernel.access_model(shape, dict(tiles), line_bytes)


def simulate_job(kernel, shape, tiles: Mapping[str, int], swizzle_fn, num_xcds: int, group_size: int,
                 target: Mapping[str, Any], occupancy: int | None = None, *,
                 table: np.ndarray | None = None, line_bytes: int | None = None) -> SimResult:
    """Simulate one job's launch on the target's L2.

    ``kernel`` is a :class:`kernels.base.ConvKernel` or its name; ``num_xcds`` and
    ``group_size`` are the swizzle's constexprs (the hardware's XCD count comes from
    ``target``).  The remap table is computed with :func:`swizzles.permutation.remap_table`
    unless given as ``table``; a table that is not a permutation is rejected with
    ``ValueError`` (such a job fails its gate before any profiler runs).  ``occupancy``
    and ``line_bytes`` override the target record (see :meth:`SimTarget.from_target`).
    """
    from kernels import get_kernel
    from swizzles.permutation import check_permutation, remap_table

    kernel = get_kernel(kernel) if isinstance(kernel, str) else kernel
    tiles = kernel.check_tiles(tiles)
    sim_target = SimTarget.from_target(target, occupancy, line_bytes)
    grid = kernel.tile_grid(shape, tiles)
    if table is None:
        table = remap_table(swizzle_fn, grid.num_pid_m, grid.num_pid_n, num_xcds, group_size,
                            device=_table_device())
    verdict = check_permutation(np.asarray(table))
    if not verdict.ok:
        raise ValueError(f"cannot simulate: the remap is {verdict.reason}")
    model = _cached_model(kernel, shape, tuple(sorted(tiles.items())), sim_target.line_bytes)
    return simulate_l2(model, table, sim_target)


def _table_device() -> str:
    """Where the remap-table kernel can run: the CPU under the interpreter, else the GPU."""
    if os.environ.get("TRITON_INTERPRET") == "1":
        return "cpu"
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


# %%
# The profiler backend
# --------------------
# ``profiler=sim`` (and ``profiler=auto`` with no GPU) predicts each verified job's L2
# figures in process: no worker, no repeats (the simulation is deterministic).


class SimProfiler(Profiler):
    """Predicted L2 hit rates from the trace-driven model of the target's L2s."""

    name = "sim"
    deterministic = True

    def __init__(self, target: Mapping[str, Any], occupancy: int | None = None, line_bytes: int | None = None):
        self.target = dict(target)
        self.occupancy = occupancy
        self.line_bytes = line_bytes
        SimTarget.from_target(self.target, occupancy, line_bytes)  # validate now: fail fast

    def tags(self) -> dict[str, str]:
        engine = "numba" if HAVE_NUMBA else "python"
        return {"profiler": self.name, "profiler_version": f"swizzlebench-sim/{engine}",
                "cache_control": "all", "sim_target": str(self.target.get("name", "?"))}

    def profile(self, requests, workdir) -> dict:
        from harness.profilers.wrapped import ProfileOutcome
        from harness.pipeline.spec import JobSpec

        outcomes = {}
        for req in requests:
            spec = JobSpec.from_dict(req.spec)
            try:
                occupancy = self.occupancy or getattr(req, "occupancy", None)   # compiled for the target
                result = self._simulate(spec, occupancy)
                baseline = (self._simulate(JobSpec.from_dict(req.baseline), occupancy)
                            if req.baseline is not None else None)
            except NotImplementedError as exc:   # a kernel with no address model: its message says what to use
                outcomes[req.key] = ProfileOutcome(None, str(exc))
                continue
            except (ValueError, MemoryError) as exc:
                outcomes[req.key] = ProfileOutcome(None, f"simulation failed: {exc}")
                continue
            rows = ["xcd,hits,misses,hit_rate_pct"] + [
                f"{x},{h},{m},{r:.4f}" for x, (h, m, r) in
                enumerate(zip(result.xcd_hits, result.xcd_misses, result.xcd_hit_rates))]
            outcome = ProfileOutcome(result.as_reading(), None, [],
                                     artifacts={"sim_per_xcd.csv": "\n".join(rows) + "\n"},
                                     metrics={**result.as_metrics(prefix="sim."),
                                              "sim.programs_per_cu": float(self._residency(occupancy))})
            if baseline is not None:   # deterministic: one pair is the exact difference
                outcome.baseline_reading = baseline.as_reading()
                outcome.pairs = [(outcome.reading.l2_hit_rate, outcome.baseline_reading.l2_hit_rate)]
            outcomes[req.key] = outcome
        return outcomes

    def _residency(self, occupancy: int | None) -> int:
        """Programs per CU the simulation used."""
        return SimTarget.from_target(self.target, occupancy, self.line_bytes).occupancy

    def _simulate(self, spec, occupancy: int | None = None) -> SimResult:
        """``occupancy``: programs per CU, from the kernel compiled for the target (the
        compile stage) when the job has one, else the target's or DEFAULT_OCCUPANCY."""
        from harness.pipeline.user_code import spec_kernel, spec_remap

        return simulate_job(spec_kernel(spec), spec.shape, spec.tiles_dict, spec_remap(spec), spec.num_xcds,
                            spec.group_size, self.target, occupancy, line_bytes=self.line_bytes)
