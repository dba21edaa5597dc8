"""A trace-driven simulated L2: the profiler backend that needs no GPU.

What it models (MI300X by default; NVIDIA as one L2 domain):

* **Dispatch.**  Programs start in launch order, pid 0, 1, 2, ..., and run on XCD
  ``pid % num_xcds`` (round-robin, the SPX-mode rule).  Each XCD keeps
  ``compute_units / num_xcds * occupancy`` programs resident; when one finishes, the
  XCD's next program in launch order takes its place.
* **Work.**  A program walks its work items (:class:`kernels.access.Schedule`): one
  tile in the plain launch, where program ``pid`` computes tile ``table[pid]`` (the
  swizzle's remap table); with a persistent grid (``min(work, compute_units)`` programs,
  what igemm_fast launches: one per SM / CU) program ``pid`` stays resident and computes
  items ``pid, pid + P, ...`` one after the other; with split-K an item is one split of
  a tile's K steps.
* **Interleaving.**  Resident programs advance in lock step, round-robin: in each
  round every XCD in turn, and in each XCD every resident program in turn (in slot
  order), performs one step (one K-step of its tile, see :mod:`kernels.access`): it
  reads that step's distinct cache lines, input lines first.  The turn of an item's last
  step then performs its epilogue (the output tile's stores; split-K: the partial's
  stores, the arrival counter and, for the last split of a tile, the partials read back
  and the output stored).  A program that finishes is replaced in the same slot and
  performs its first step in the next round.
* **Caches.**  XCD ``x`` looks up L2 domain ``x * l2_domains // num_xcds``; each
  domain is its own set-associative LRU cache of ``l2_bytes`` (MI300X: 4 MB, 16 ways,
  128 B lines, one per XCD).  A store is a lookup like a load: a hit if the line is
  present, else a miss that allocates it (write-allocate, no fetch; write-backs are not
  modelled); on NVIDIA (``l2_writes: hit``) every store is a hit, as ncu counts it.
  Optionally, L2 read misses go on to one memory-side cache shared by all domains (the
  256 MB MI300X Infinity Cache, "MALL"), in the global order of the rounds.  Caches start
  cold.
* **Partitions** (NVIDIA: ``l2_partitions: 2``).  A domain's L2 is split into partitions
  joined by a fabric, and a line's home partition is a hash of its 128 B block.  A program
  reads through the partition of its SM's cluster (GPC); a miss there of a line homed in the
  other partition is looked up again at home (ncu counts it as an ``srcunit_ltcfabric``
  lookup) and the line is kept in both; stores go to the home partition, and one to a far
  home is a lookup in both partitions (``l2_writes: hit``: two write hits).  The read hit rate
  is that of the first lookups (ncu's tex-unit read lookups); the all-traffic rate counts
  the fabric lookups too.  Measured on an H100 (docs/simulator.md): every L1 sector request
  reaches the L2, far-homed misses cross the fabric.
* **Request coalescing** (NVIDIA, when calibrated).  Each slot keeps its program's clock in
  K-steps (a step lasts 1 +- ``step_jitter``); a read of a line that the same cluster
  already requested less than ``coalesce_window`` steps before (since the first request of
  the line's current burst) is merged with that request and is no lookup
  (``merged_reads``).  Fitted against ncu (docs/simulator.md).  Off by
  default: ``merge_unit: any`` with ``merge_cap`` (a lookup serves that many requests from
  any SM) and ``dispatch_gap`` (the first wave's starts apart), what the H100 sharing probe
  measured (docs/simulator.md).
* **Requests of 128 B** (NVIDIA: ``l2_request_bytes``).  A load's run across a 128 B boundary
  is two requests, and ncu counts one more read hit for the second when its line misses; each
  output row's store is its own request (a sector two rows share is looked up twice).
* **Register spills** (NVIDIA).  A job's kernel that spills (the compile stage's bytes per
  program) stores them once per work item: that many more write hits (:func:`spill_lookups`).
* **Sets** (NVIDIA: ``l2_set_hash``).  A line's set is a hash of its 128 B block
  (:func:`set_index`), not its number modulo the sets, so strided streams use every set.
* **Timed run.**  A job's run can be several launches (igemm_fast: the fold pass, the
  conv, the split-K sum pass).  The reading is the conv's, from cold caches, as ncu
  (``--cache-control all``, filtered to the conv kernel) measures it; the whole run,
  caches carried from launch to launch, is reported beside it (:func:`simulate_run`).

Outputs (:class:`SimResult`): hits and misses in line lookups, loads and stores together
(ncu's all-traffic lookups ``lts__t_sectors_lookup_hit`` / ``_miss``, rocprofv3's TCC_HIT /
TCC_MISS) and of the loads alone (ncu's tex-unit read lookups), per XCD and per domain hit rates
(%), bytes L2 fetched from below it (read misses x line size) and, with the MALL, bytes
read from memory (MALL misses x line size).

Speed: the replay loop is compiled with numba (see :mod:`.sim_cache`); the current
figures are in docs/benchmarks.md, "Simulator speed".

Length: the target, the result, the replay loop and the profiler backend are one chain
(the loop's arrays are the result's counters, the backend only calls the entry point);
split, a change to what the replay counts would be made in three files.
"""
from __future__ import annotations

import functools
import math
import os
import time
from dataclasses import dataclass, replace
from typing import Any, Mapping

import numpy as np

from harness.profilers.wrapped import Profiler
from harness.profilers.base import L2Reading
from harness.profilers.sim_cache import HAVE_NUMBA, CacheGeometry, jit, lru_access, lru_insert_last, tag_dtype
from kernels.access import AccessModel, LaunchModel, element_bytes

#: Workgroups resident per CU when neither the caller nor the target says: a big
#: implicit-GEMM tile (128 x 128 x 64 fp16, 8 warps) leaves room for about two.
DEFAULT_OCCUPANCY = 2

#: Associativity of the memory-side cache when the target does not give ``mall_ways``
#: (MI300X Infinity Cache: 16 ways).
DEFAULT_MALL_WAYS = 16

#: Spread of a K-step's duration, +- fraction of a step (see :class:`SimTarget`).  Fixed: with
#: coalescing, only the window relative to it matters, and the window is what is fitted.
STEP_JITTER = 0.2

#: Resolution of the programs' clocks in the merge state: ticks per K-step (int32 ticks hold
#: 2^31 / 4096 = 524288 steps, more than any launch's programs walk in a row).
CLOCK_TICKS = 4096

#: Granularity of the home-partition hash (bytes): a 128 B line's sectors share a home.
BLOCK_BYTES = 128
#: What the request coalescer may merge within (:attr:`SimTarget.merge_unit`).
MERGE_UNITS = ("cluster", "partition", "any")
#: Where a store's fill goes in its set's LRU order (:attr:`SimTarget.store_insert`).
STORE_INSERTS = ("mru", "lru")
#: Which free slot a later wave's next program takes (:attr:`SimTarget.refill`).
REFILLS = ("order", "clock")

#: Which replay implementation runs: "numba" (compiled) or "python" (interpreted).
ENGINE = "numba" if HAVE_NUMBA else "python"


def calibration(target: Mapping[str, Any]) -> Mapping[str, Any]:
    """The target's ``sim_calibration`` record (``conf/target/*.yaml``), written from a
    validation of the simulator against hardware counters (docs/simulator.md):
    the fitted ``l2_capacity_fraction`` and the held-out errors.  Empty: never validated."""
    return target.get("sim_calibration") or {}


@dataclass(frozen=True)
class PredictionError:
    """How far a prediction on a target is off, from the cells of its validation that no fit
    saw (% points; None: not measured): the +- half-width of the hit rate over all lookups, of
    its difference vs the baseline, and of the same two of the reads alone.  With ``coverage``
    each is the split-conformal band that held ``coverage`` of those cells (90 %: the truth of
    9 cells in 10 lies within prediction +- band); without, the mean absolute error (an older
    record), which about half the cells exceed."""

    hit_rate: float | None
    delta: float | None
    read_hit_rate: float | None
    read_delta: float | None
    validated: str                     # "validated on <device> ncu, N cells not fitted[; ± covers 90 %]" or "not validated ..."
    coverage: float | None = None      # the share of unfitted cells the +- covers (0.9); None: mean absolute errors


#: The classes of layer whose simulated figures carry error bands of their own (Mondrian
#: bands): the validation cells' errors differ by class (docs/simulator.md), so one band for
#: all would be too wide for most layers and too narrow for the rest.
LAYER_CLASSES = ("regular", "one-wave", "misaligned")


def layer_class(shape, line_bytes: int, num_work: int, resident: int) -> str:
    """Which band a job's simulated figures carry: ``misaligned`` when a pixel's channels or a
    pixel's filters are not a whole number of the L2's lines (``C`` or ``F`` elements times the
    element size, against ``line_bytes``: NVIDIA's 32 B sector), so rows straddle lines (the
    model is 10-20 points off on such layers: C = 3, 24, 37; F = 24, 40, 45), else ``one-wave``
    when every work item (a tile, or a split of one) is in flight at once (``num_work <=
    resident``, the target's SMs / CUs times the programs each holds: the coalescer's weak
    spot; a persistent grid that walks more tiles than that is not one wave), else ``regular``."""
    row = element_bytes(shape)
    if (shape.C * row) % line_bytes or (shape.F * row) % line_bytes:
        return "misaligned"
    return "one-wave" if num_work <= resident else "regular"


#: The ``class_bands`` key of the delta bands of :func:`order_blind` grids.
ORDER_BLIND = "order-blind"
#: What a job on such a grid says of its simulated delta (tag ``sim_order_blind``).
ORDER_BLIND_NOTE = "order-blind grid: every order reads the same blocks in the model"


def order_blind(loads: AccessModel) -> bool:
    """Whether no order of the tiles can change what the model sees: every operand is either
    read alike by all tiles (one block for all: the weights of a one-column grid) or by each
    tile alone (a block of its own that shares no line with another's: the input rows of a
    1x1 conv).  Every order then reads the same blocks, and has the same hits, misses and
    merges up to where addresses fall in sets and partitions and to the clocks'
    ``scatter_jitter``, so a simulated delta is about 0 (scatter's a little above it); what a
    GPU measures there is mostly timing (scatter on such grids: up to +2.9 points on an H100,
    higher on 24 of 26 cells).  A
    3x3 conv's input blocks overlap (the halo), so its one-column grid is not blind."""
    tile_rows = np.asarray(loads.tile_rows)
    steps = loads.num_steps
    for o in range(tile_rows.shape[1]):
        rows = np.sort(tile_rows[:, o])
        if rows[0] == rows[-1]:
            continue                     # one block read by every tile
        if (rows[1:] == rows[:-1]).any():
            return False                 # some tiles share a block, others do not
        # each tile a block of its own: blind only if no line is in two of them
        lo, hi = int(rows[0]), int(rows[-1]) + 1                  # the blocks' global rows, contiguous
        bounds = loads.offsets[np.arange(lo, hi + 1) * steps]
        lines = loads.lines[bounds[0]:bounds[-1]]
        owner = np.repeat(np.arange(lo, hi), np.diff(bounds))
        if len(rows) != hi - lo:         # rows no tile reads: leave their lines out
            read = np.zeros(hi - lo, dtype=bool)
            read[rows - lo] = True
            lines, owner = lines[read[owner - lo]], owner[read[owner - lo]]
        order = np.argsort(lines, kind="stable")
        lines, owner = lines[order], owner[order]
        if ((lines[1:] == lines[:-1]) & (owner[1:] != owner[:-1])).any():
            return False
    return True


def prediction_error(target: Mapping[str, Any], kernel: str, layer: str = "",
                     blind: bool = False) -> PredictionError:
    """The measured errors of a prediction of ``kernel`` on ``target`` for a layer of class
    ``layer`` (:func:`layer_class`), per measure the first the record has: the bands of the
    kernel family's layers of that class (``class_bands["<kernel>/<class>"]``), of the class
    (``class_bands[class]``), of the kernel family, of all cells; the bands (``*_band`` of the
    target's ``sim_calibration``, with ``band_coverage``) where the record has them, else the
    mean absolute errors (``*_mae``); all None for a target never validated.  ``blind``: the
    job's grid is :func:`order_blind`, and its two delta bands are those of such grids
    (``class_bands["order-blind"]``) where the record has them."""
    cal = calibration(target)
    if not cal.get("hit_rate_mae"):
        return PredictionError(None, None, None, None, f"not validated on {target.get('name', '?')} hardware")
    coverage = cal.get("band_coverage")
    kind = "band" if coverage is not None and cal.get("hit_rate_band") else "mae"
    classes = (cal.get("class_bands") or {}) if kind == "band" else {}
    own, by_class = classes.get(f"{kernel}/{layer}"), classes.get(layer)

    blind_bands = classes.get(ORDER_BLIND) if blind else None

    def pick(stem: str) -> float | None:
        for group in (blind_bands if stem.endswith("delta") else None, own, by_class):
            if group is not None and stem in group:
                value = group[stem]
                break
        else:
            table = cal.get(f"{stem}_{kind}") or {}
            value = table.get(kernel, table.get("all"))
        return None if value is None or not math.isfinite(float(value)) else float(value)

    validated = f"validated on {cal.get('validated_on', '?')}"
    if kind == "band":
        whose = f" of {kernel}'s {layer} layers" if own else f" of {layer} layers" if by_class else ""
        validated += f"; ± covers {100 * float(coverage):.0f} %{whose}"
        if blind_bands is not None:
            validated += f" (Δ: of {ORDER_BLIND} grids)"
    return PredictionError(pick("hit_rate"), pick("delta"), pick("read_hit_rate"), pick("read_delta"), validated,
                           float(coverage) if kind == "band" else None)


@dataclass(frozen=True)
class SimTarget:
    """The simulated machine: dispatch, residency and cache hierarchy."""

    num_xcds: int                 # programs are dealt round-robin to this many XCDs (dies)
    cus_per_xcd: int              # CUs (SMs) per XCD
    occupancy: int                # programs resident per CU
    l2_domains: int               # separate L2 caches; XCD x uses domain x * l2_domains // num_xcds
    l2: CacheGeometry             # geometry of each L2 domain
    mall: CacheGeometry | None    # shared memory-side cache behind the L2s, or None
    #: Stores count as hits whatever the L2 holds (NVIDIA: a store writes its bytes into the
    #: sector without fetching it, and ncu counts that lookup a hit); False: a store to an
    #: absent line is a miss that allocates it (the rule assumed for MI300X's TCC, unverified).
    writes_hit: bool = False
    #: Reads of a line that the reader's cluster requested less than this many K-steps earlier are
    #: merged before the L2 (NVIDIA's L2 request coalescer) and never counted as lookups; 0: off.
    coalesce_window: float = 0.0
    #: The window for operands loaded by a tensor descriptor (NVIDIA TMA; ``bulk`` in the access
    #: model), whose requests the L2 merges more (measured on an H100); None: ``coalesce_window``.
    #: The calibration record's ``tma_window``.
    bulk_window: float | None = None
    #: Each K-step of a program lasts 1 +- this (a fixed hash of pid and step), so programs
    #: drift apart as they run and later waves start out of step.  The hash is linear modulo
    #: 2^16: two programs' steps differ by one of two amounts that average 0, so their drift
    #: stays bounded (median 0.19 steps apart after 64 steps at 0.2, where independent steps
    #: would be 0.86 apart) and programs that share lines stay near the merge window; a jitter
    #: that differs between work items (``scatter_jitter``) breaks that balance.
    step_jitter: float = STEP_JITTER
    #: Extra step jitter (K-steps) of a work item whose tile reads some operand from a block
    #: that is neither the block nor a neighbour of the one the item launched just before reads
    #: (:func:`scattered_items`): programs whose DRAM reads are scattered run less in step than
    #: neighbours that stream one region (an H100 slows a one-column 1x1 layer by 25 % under
    #: the scatter order, and merges fewer of its shared reads).  The calibration record's
    #: ``scatter_jitter``; 0: off.
    scatter_jitter: float = 0.0
    #: The first wave's programs start this many K-steps apart, in launch order (the block
    #: dispatcher hands out one program every few cycles: about 6 SM cycles on an H100, against
    #: a merge window of about 100); 0: all at once.
    dispatch_gap: float = 0.0
    #: The L2 set of a line is a hash of its 128 B block (NVIDIA; target key ``l2_set_hash``)
    #: rather than its number modulo the sets, so strided streams spread over every set.
    set_hash: bool = False
    #: The L1's request size, bytes (NVIDIA: 128, target key ``l2_request_bytes``; 0: not
    #: modelled).  A load's run that crosses a multiple of it is two requests, and ncu's read
    #: lookup counters count one more hit for the second when its first line misses; a store of
    #: each output row is its own request, so a sector two rows share is looked up twice.  Both
    #: measured on an H100 (docs/simulator.md).
    request_bytes: int = 0
    #: Partitions of each L2 domain (NVIDIA H100 / H200: 2, joined by a fabric): ``l2`` is one
    #: partition's geometry.  A line's home partition is a hash of its address; a program reads
    #: through the partition of its cluster (GPC), and a miss there of a line homed in the other is
    #: looked up again in the home partition (ncu's ``srcunit_ltcfabric`` lookups) and kept in both.
    l2_partitions: int = 1
    #: Clusters of CUs (NVIDIA: GPCs) whose concurrent reads of one line the coalescer merges;
    #: cluster ``g`` reads through partition ``g * l2_partitions // clusters``.
    clusters: int = 1
    #: CUs (SMs) of one cluster in a row, in the order the first wave fills them: CU ``c`` is in
    #: cluster ``(c // cluster_run) % clusters`` (1: consecutive programs go to other clusters).
    cluster_run: int = 1
    #: What the request coalescer merges within: ``cluster`` (a line's requests from one GPC),
    #: ``partition`` (from every SM that reads through one L2 partition) or ``any`` (from every
    #: SM: what the H100 sharing probe measured).
    merge_unit: str = "cluster"
    #: With ``merge_unit: any``, the most requests one lookup serves (the first and up to
    #: ``merge_cap - 1`` merged with it); a request past that starts a new lookup and burst.
    #: 0: no cap.  Measured on an H100: 4 (132 SMs reading one sector at once: 35 lookups).
    merge_cap: int = 0
    #: Which partition each CU reads through, in the order the first wave fills them: 0, the
    #: partition of its cluster (``g * l2_partitions // clusters``); ``k`` > 0, CU ``c`` reads
    #: through partition ``(c // k) % l2_partitions`` (H100, measured: the dispatcher deals SM
    #: pairs round-robin over 8 GPCs, 4 GPCs per partition, so 8 in a row share one).  The
    #: target key ``partition_run``, or the calibration record's when it sets one (a fitted
    #: point; fitted on the H100 and not kept).
    partition_run: int = 0
    #: The measured layout (NVIDIA, target keys ``sm_partition`` and ``sm_dispatch``): for each
    #: grid size measured, the L2 partition of each first-wave program in launch order (the
    #: partition of the SM the dispatcher put it on); () when not measured.  With
    #: ``partition_run`` 0 it decides which partition each slot reads through (the list of the
    #: smallest measured grid that holds the first wave; :meth:`partition_of_slot`).
    slot_partitions: tuple[tuple[int, tuple[int, ...]], ...] = ()
    #: Where a store puts a line the L2 does not hold: ``mru`` (most recently used, like a
    #: read's fill) or ``lru`` (least recently used: the set's next fill evicts it, so an
    #: output written once takes one way of its set rather than displacing inputs).
    store_insert: str = "mru"
    #: Which free slot (CU) a later wave's next program takes: ``order``, the slots in the order
    #: the replay finds them free (a wave's programs finish in the same round, so consecutive
    #: programs land on neighbouring CUs, in one cluster); ``clock``, the slots freed in a round
    #: in the order their programs finished by the clocks (the dispatcher hands the next
    #: program to the SM that frees first; with step jitter, consecutive programs of a later wave
    #: land on CUs far apart).
    refill: str = "order"

    def __post_init__(self) -> None:
        for name in ("num_xcds", "cus_per_xcd", "occupancy", "l2_domains", "l2_partitions", "clusters",
                     "cluster_run"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise ValueError(f"simulated target: {name}={value!r} must be a positive integer")
        if not isinstance(self.partition_run, int) or isinstance(self.partition_run, bool) or self.partition_run < 0:
            raise ValueError(f"simulated target: partition_run={self.partition_run!r} must be a whole number >= 0 "
                             "(0: each cluster's partition)")
        if self.l2_domains > self.num_xcds:
            raise ValueError(f"simulated target: l2_domains={self.l2_domains} > num_xcds={self.num_xcds}; "
                             "each L2 domain serves one or more whole XCDs")
        if self.mall is not None and self.mall.line_bytes != self.l2.line_bytes:
            raise ValueError("simulated target: the MALL and the L2 must use the same line size")
        if self.merge_unit not in MERGE_UNITS:
            raise ValueError(f"simulated target: merge_unit={self.merge_unit!r} is invalid; valid: "
                             + ", ".join(MERGE_UNITS))
        if not isinstance(self.merge_cap, int) or isinstance(self.merge_cap, bool) or self.merge_cap < 0:
            raise ValueError(f"simulated target: merge_cap={self.merge_cap!r} must be a whole number >= 0 "
                             "(0: no cap)")
        if self.merge_cap and self.merge_unit != "any":
            raise ValueError(f"simulated target: merge_cap={self.merge_cap} needs merge_unit='any' "
                             f"(not {self.merge_unit!r}): the cap counts a line's requests from every SM")
        if self.store_insert not in STORE_INSERTS:
            raise ValueError(f"simulated target: store_insert={self.store_insert!r} is invalid; valid: "
                             + ", ".join(STORE_INSERTS))
        if self.refill not in REFILLS:
            raise ValueError(f"simulated target: refill={self.refill!r} is invalid; valid: " + ", ".join(REFILLS))
        if self.clusters > 31:
            raise ValueError(f"simulated target: clusters={self.clusters} > 31 (one bit each in the merge state)")
        if self.bulk_window is not None and not 0 <= self.bulk_window:
            raise ValueError(f"simulated target: bulk_window={self.bulk_window!r} must be >= 0")
        if not 0 <= self.dispatch_gap:
            raise ValueError(f"simulated target: dispatch_gap={self.dispatch_gap!r} must be >= 0 (K-steps)")
        if not 0 <= self.scatter_jitter or not self.step_jitter + self.scatter_jitter < 1:
            raise ValueError(f"simulated target: scatter_jitter={self.scatter_jitter!r} must be >= 0, and with "
                             f"step_jitter={self.step_jitter!r} below 1 (a step must last more than 0)")
        if not 0 <= self.coalesce_window or not 0 <= self.step_jitter < 1:
            raise ValueError(f"simulated target: coalesce_window={self.coalesce_window!r} must be >= 0 and "
                             f"step_jitter={self.step_jitter!r} in [0, 1)")

    @property
    def slots_per_xcd(self) -> int:
        """Programs an XCD runs at once."""
        return self.cus_per_xcd * self.occupancy

    @property
    def line_bytes(self) -> int:
        return self.l2.line_bytes

    def cluster_of_slot(self) -> np.ndarray:
        """The cluster (GPC) of each of an XCD's slots, (slots_per_xcd,) int64: slot ``s`` runs
        on CU ``s % cus_per_xcd`` (the first wave fills every CU once, then again)."""
        cu = np.arange(self.slots_per_xcd, dtype=np.int64) % self.cus_per_xcd
        return (cu // self.cluster_run) % self.clusters

    def operand_windows(self, bulk: tuple[bool, ...], num_operands: int) -> np.ndarray:
        """Each operand's merge window (K-steps), (num_operands,) float64: ``bulk_window`` for
        an operand loaded by a tensor descriptor (``bulk``; () for none), else ``coalesce_window``."""
        bulk_window = self.coalesce_window if self.bulk_window is None else self.bulk_window
        return np.array([bulk_window if b else self.coalesce_window for b in (bulk or (False,) * num_operands)],
                        dtype=np.float64)

    def partition_of_slot(self, num_programs: int | None = None) -> np.ndarray:
        """The L2 partition each of an XCD's slots reads through, (slots_per_xcd,) int64, for a
        launch of ``num_programs`` (None: a full first wave).  With a measured layout
        (``slot_partitions``), slot ``s`` (the first wave's program ``s``, and whichever
        program takes its place) reads through the partition of the SM the dispatcher gave
        program ``s`` in a grid of the smallest measured size that holds the first wave (a
        small grid is spread over the GPCs differently from a full one)."""
        if self.partition_run == 0 and self.slot_partitions:
            wave = min(num_programs or self.slots_per_xcd, self.slots_per_xcd)
            sizes = [n for n, _ in self.slot_partitions]
            pick = next((i for i, n in enumerate(sizes) if n >= wave), len(sizes) - 1)
            seq = np.asarray(self.slot_partitions[pick][1], dtype=np.int64)
            return np.resize(seq, self.slots_per_xcd)      # repeated past the longest measured grid
        if self.partition_run == 0:
            return self.cluster_of_slot() * self.l2_partitions // self.clusters
        cu = np.arange(self.slots_per_xcd, dtype=np.int64) % self.cus_per_xcd
        return (cu // self.partition_run) % self.l2_partitions

    def merge_of_slot(self, num_programs: int | None = None) -> np.ndarray:
        """The unit whose requests the coalescer merges, per slot (its bit in the merge state):
        the slot's cluster, the partition it reads through, or one unit for all (``any``)."""
        if self.merge_unit == "any":
            return np.zeros(self.slots_per_xcd, dtype=np.int64)
        return self.cluster_of_slot() if self.merge_unit == "cluster" else self.partition_of_slot(num_programs)

    def domain_of_xcd(self) -> np.ndarray:
        """L2 domain of each XCD, (num_xcds,) int64."""
        return np.arange(self.num_xcds, dtype=np.int64) * self.l2_domains // self.num_xcds

    @classmethod
    def from_target(cls, target: Mapping[str, Any], occupancy: int | None = None,
                    line_bytes: int | None = None) -> "SimTarget":
        """Build from a ``target`` config record (``conf/target/*.yaml``).

        Uses ``num_xcds``, ``compute_units`` (total over the device), ``l2_bytes`` (per
        domain), ``l2_ways``, ``l2_line_bytes``, ``l2_domains`` (default: ``num_xcds``),
        ``mall_bytes`` (0 or missing: no MALL), ``mall_ways`` (default 16),
        ``l2_partitions`` (default 1; ``l2_bytes`` is split between them), ``clusters``
        (NVIDIA: GPCs; default 1) and ``occupancy`` (default :data:`DEFAULT_OCCUPANCY`);
        ``l2_writes: hit`` (NVIDIA) makes stores hits; the calibration record's
        ``coalesce_window`` turns on the request coalescer and its ``cluster_run`` sets which
        SMs form a cluster.  ``occupancy`` and ``line_bytes`` given here override the record
        (e.g. ``line_bytes=32`` to count NVIDIA's 32 B sectors).
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
        ways = need("l2_ways")
        # The calibrated share of the L2 the traffic can use (``sim_calibration``): whole sets.
        fraction = float(calibration(target).get("l2_capacity_fraction", 1.0))
        partitions = int(target.get("l2_partitions") or 1)
        l2_bytes = max(1, int(need("l2_bytes") * fraction / partitions) // (ways * line)) * ways * line
        return cls(
            num_xcds=num_xcds,
            cus_per_xcd=compute_units // num_xcds,
            occupancy=int(occupancy if occupancy is not None else (target.get("occupancy") or DEFAULT_OCCUPANCY)),
            l2_domains=int(target.get("l2_domains") or num_xcds),
            l2=CacheGeometry(l2_bytes, ways, line),
            mall=(CacheGeometry(mall_bytes, int(target.get("mall_ways") or DEFAULT_MALL_WAYS), line)
                  if mall_bytes else None),
            writes_hit=_write_policy(target) == "hit",
            coalesce_window=float(calibration(target).get("coalesce_window", 0.0)),
            bulk_window=(None if calibration(target).get("tma_window") is None
                         else float(calibration(target)["tma_window"])),
            l2_partitions=partitions,
            clusters=int(target.get("clusters") or 1),
            cluster_run=int(calibration(target).get("cluster_run", 1)),
            merge_unit=str(calibration(target).get("merge_unit", "cluster")),
            merge_cap=int(calibration(target).get("merge_cap", 0)),
            partition_run=int(calibration(target).get("partition_run", target.get("partition_run") or 0)),
            slot_partitions=_slot_partitions(target, partitions),
            store_insert=str(calibration(target).get("store_insert", "mru")),
            refill=str(calibration(target).get("refill", "order")),
            step_jitter=float(calibration(target).get("step_jitter", STEP_JITTER)),
            scatter_jitter=float(calibration(target).get("scatter_jitter", 0.0)),
            dispatch_gap=float(calibration(target).get("dispatch_gap", 0.0)),
            set_hash=bool(target.get("l2_set_hash", False)),
            request_bytes=int(target.get("l2_request_bytes") or 0),
        )


def _slot_partitions(target: Mapping[str, Any], partitions: int) -> tuple[tuple[int, tuple[int, ...]], ...]:
    """``SimTarget.slot_partitions`` from a target record's measured ``sm_partition`` (the
    partition of each SM) and ``sm_dispatch`` ({grid size: the SM of each program}); () when
    either is missing."""
    name = target.get("name", "?")
    sm_partition, dispatch = target.get("sm_partition"), target.get("sm_dispatch")
    if not sm_partition or not dispatch:
        return ()
    sm_partition = [int(p) for p in sm_partition]
    if any(not 0 <= p < partitions for p in sm_partition):
        raise ValueError(f"target {name!r}: sm_partition holds a partition outside 0..{partitions - 1}")
    out = []
    for size, sms in sorted((int(k), v) for k, v in dict(dispatch).items()):
        if len(sms) != size or any(not 0 <= int(sm) < len(sm_partition) for sm in sms):
            raise ValueError(f"target {name!r}: sm_dispatch[{size}] must list {size} SM ids in "
                             f"0..{len(sm_partition) - 1}")
        out.append((size, tuple(sm_partition[int(sm)] for sm in sms)))
    return tuple(out)


def _write_policy(target: Mapping[str, Any]) -> str:
    """``l2_writes`` of a target record: ``hit`` or ``allocate`` (the default)."""
    policy = str(target.get("l2_writes") or "allocate")
    if policy not in ("hit", "allocate"):
        raise ValueError(f"target {target.get('name', '?')!r}: l2_writes={policy!r} is invalid; valid: hit "
                         "(a store is a hit: NVIDIA), allocate (a store to an absent line is a miss)")
    return policy


@dataclass(frozen=True)
class SimResult:
    """What one simulated launch did to the caches.  Counts are line lookups, reads and
    writes (stores and atomics) together unless the name says ``read``; rates in % (NaN
    for an XCD or domain that received no program)."""

    hit_rate: float                       # 100 * hits / (hits + misses), all lookups, all L2 domains
    hits: int
    misses: int
    read_hits: int                        # the loads' lookups alone
    read_misses: int
    xcd_hits: tuple[int, ...]             # per XCD, all lookups
    xcd_misses: tuple[int, ...]
    domain_hits: tuple[int, ...]          # per L2 domain (== per XCD on MI300X)
    domain_misses: tuple[int, ...]
    line_bytes: int
    l2_miss_bytes: int                    # read misses x line_bytes: bytes the L2s fetched from below
    mall_hits: int | None                 # None without a MALL
    mall_misses: int | None
    dram_read_bytes: int                  # bytes read from memory (after the MALL, if any)
    num_programs: int
    slots_per_xcd: int
    replay_s: float                       # wall time of the replay loop, s
    engine: str                           # "numba" or "python"
    name: str = "conv"                    # which launch of the timed run (kernels.access.LaunchPlan)
    merged_reads: int = 0                 # reads merged with an earlier request of their cluster (no lookup)
    fabric_hits: int = 0                  # read misses looked up again in a far home partition: hits there
    fabric_misses: int = 0                # ... and misses there (fetched from memory)
    #: The job's whole timed run, when it is more than this launch: (launch name, result) in
    #: launch order, simulated one after the other with the caches carried over.
    timed_run: tuple[tuple[str, "SimResult"], ...] = ()
    #: The job's :func:`layer_class` (which error band its figures carry); "" outside a job.
    layer_class: str = ""
    #: The job's grid is :func:`order_blind`: every order of its tiles reads the same blocks in
    #: the model, so a simulated delta is about 0 whatever the GPU does (False outside a job).
    order_blind: bool = False

    @property
    def accesses(self) -> int:
        return self.hits + self.misses

    @property
    def read_hit_rate(self) -> float:
        """Hit rate of the loads' lookups in the partition they read through (ncu: the tex unit's
        read lookups, ``lts__t_sectors_srcunit_tex_op_read_lookup_hit / (hit + miss)``), %."""
        return _rate(self.read_hits, self.read_misses)

    @property
    def write_hits(self) -> int:
        return self.hits - self.read_hits - self.fabric_hits

    @property
    def write_misses(self) -> int:
        return self.misses - self.read_misses - self.fabric_misses

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
        """The result as a profiler reading: one exact sample, no spread.  The hit rate is
        over all lookups, stores included, as ncu's all-traffic lookup counters and
        rocprofv3's TCC_HIT / (TCC_HIT + TCC_MISS) count them."""
        return L2Reading(l2_hit_rate=self.hit_rate, l2_hit_rate_std=0.0, l2_hits=float(self.hits),
                         l2_misses=float(self.misses), profiled_time_ms=None,
                         dram_read_bytes=float(self.dram_read_bytes), samples=1)

    def as_metrics(self, prefix: str = "sim.") -> dict[str, float]:
        """The figures, flat, for logging: hit rates over all lookups (``l2_hit_rate``) and
        over loads alone (``l2_read_hit_rate``), %; lookups that wrote; per-XCD and MALL hit
        rates (%); bytes the L2s fetched (bytes); NaN rates of idle XCDs are left out.  With
        a timed run of several launches, each launch's two hit rates and those of the whole
        run (``timed.``) too."""
        out = {f"{prefix}l2_hit_rate": self.hit_rate, f"{prefix}l2_read_hit_rate": self.read_hit_rate,
               f"{prefix}l2_write_lookups": float(self.write_hits + self.write_misses),
               f"{prefix}l2_merged_reads": float(self.merged_reads),
               f"{prefix}l2_fabric_lookups": float(self.fabric_hits + self.fabric_misses),
               f"{prefix}l2_miss_bytes": float(self.l2_miss_bytes),
               f"{prefix}slots_per_xcd": float(self.slots_per_xcd)}
        out.update({f"{prefix}xcd{x}_hit_rate": r for x, r in enumerate(self.xcd_hit_rates) if not math.isnan(r)})
        if self.mall_hit_rate is not None and not math.isnan(self.mall_hit_rate):
            out[f"{prefix}mall_hit_rate"] = self.mall_hit_rate
        for name, part in self.timed_run:
            out[f"{prefix}{name}.l2_hit_rate"] = part.hit_rate
            out[f"{prefix}{name}.l2_read_hit_rate"] = part.read_hit_rate
        if self.timed_run:
            runs = [r for _, r in self.timed_run]
            out[f"{prefix}timed.l2_hit_rate"] = _rate(sum(r.hits for r in runs), sum(r.misses for r in runs))
            out[f"{prefix}timed.l2_read_hit_rate"] = _rate(sum(r.read_hits for r in runs),
                                                           sum(r.read_misses for r in runs))
        return {k: v for k, v in out.items() if not math.isnan(v)}


def _rate(hits: int, misses: int) -> float:
    return 100.0 * hits / (hits + misses) if hits + misses else math.nan


# -----------------------------------------------------------
# The replay loop.  Everything the loop touches is a flat array so that numba compiles it
# to plain machine code; without numba it runs as ordinary Python.
#
# A slot holds a resident program and where it is: its work item (split ``w // num_tiles``
# of launch-order tile ``w % num_tiles``), the tile that item computes and its next K step.
# A program's turn is one K step of its item (the step's loads); the turn that performs
# the item's last step (or, for an item with no steps, the item's only turn) then performs
# the item's epilogue, and, when this split is the last of its tile to arrive, the tile's
# last-arrival accesses.  The program then takes its next item (``w + num_programs``), or
# finishes and leaves the slot to the XCD's next program.
#
# ``counts[x]`` holds XCD x's read hits, read misses, write hits, write misses, merged
# reads, and fabric hits and misses (read misses looked up again in a far home partition).
# A write is a lookup like a read, in the line's home partition: a hit when the line is
# present (or always, with ``writes_hit``), else a miss that allocates the line
# (write-allocate, no fetch: it does not go on to the MALL).  With ``writes_hit`` a store
# to a line homed in another partition is one more write hit, in the program's partition,
# which it passes on its way over the fabric (an H100 counts 602 K write sectors for a conv
# that stores 401 K, the lookup probe of l02).
#
# Time: each slot keeps its program's clock, in K-steps.  A step lasts 1 + jitter * u, u in
# [-1, 1) a fixed hash of (pid, step), jitter the work item's (``item_jitter``: the step
# jitter, plus the scatter jitter where the item reads far from its launch-order predecessor),
# and a program that takes a slot starts at the time the slot's last one finished, so
# programs drift apart and later waves start out of step.  The
# order of the replay stays the rounds' (the L2's LRU order); the clocks only decide which
# reads are merged: with ``window > 0`` a line's requests form bursts (a burst begins with a
# request more than ``window`` steps, by the clocks, from the current one's first), and a
# read by a cluster that already requested the line in its burst is merged with that request
# before the L2 and counted in column 4, not as a lookup.  With ``merge_cap`` > 0 the merge
# state counts the burst's requests instead: a read merges while fewer than ``merge_cap`` share
# the burst's lookup, and the next one is a lookup that opens a new burst.  The first wave's
# clocks start ``dispatch_gap`` apart, in launch order.  A finished program's slot goes to the
# XCD's next program at once (``refill`` order), or, with ``refill`` clock, at the end of the
# round, the round's freed slots taking the next programs in the order their clocks finished.

@jit
def _home(line, block_lines, partitions):
    """Home partition of ``line``: a multiplicative hash of its 128 B block (sectors of one
    block share a home)."""
    if partitions == 1:
        return 0
    return ((np.int64(line) // block_lines) * 2654435761 >> 20) % partitions


def set_index(lines: np.ndarray, l2_sets: int, block_lines: int, set_hash: bool) -> np.ndarray:
    """The L2 set of each line (int64, same shape): its number modulo the sets, or with
    ``set_hash`` a hash of its 128 B block (the block's sectors in neighbouring sets), as
    NVIDIA's L2 spreads addresses so that a strided stream (every other pixel of a stride-2
    conv) still uses every set.  Computed once per launch, outside the replay loop."""
    lines = np.asarray(lines, dtype=np.int64)
    groups = l2_sets // block_lines
    if not set_hash or groups == 0:
        return lines % l2_sets
    block = lines // block_lines
    h = ((block & 0xFFFFFFFF) * 2654435761) & 0xFFFFFFFF     # Fibonacci hashing, 32 bits
    h ^= h >> 16
    return (h % groups) * block_lines + (lines - block * block_lines)


def scattered_items(table: np.ndarray, tile_rows: np.ndarray) -> np.ndarray:
    """Per launch-order work item (``len(table)``,) float64: 1.0 where the tile it computes reads
    some operand from a block (a row of ``tile_rows``: an M block of the input, an N block of
    the weights) that is neither the one the item launched before it reads nor a neighbour of
    it (a row number 1 away), else 0.0 (the first item: 0).  The dispatcher runs launch-order
    neighbours side by side, so this is their DRAM locality: identity jumps once per row of
    tiles, scatter at almost every item."""
    rows = np.asarray(tile_rows)[np.asarray(table, dtype=np.int64)]
    out = np.zeros(len(rows), dtype=np.float64)
    if len(rows) > 1:
        out[1:] = (np.abs(np.diff(rows, axis=0)) > 1).any(axis=1)
    return out


@jit
def _read_miss(line, lset, x, dom, part, partitions, block_lines, l2_tags, l2_sets, l2_ways, mall_tags, mall_sets,
               mall_ways, counts, mall_counts):
    """A read missed in partition ``part`` of domain ``dom`` (counted by the caller): a line
    homed in another partition is looked up there over the fabric (columns 5 and 6: fabric
    hits and misses) and stays in both; what misses at home goes on to the MALL, if any, or
    to memory."""
    home = _home(line, block_lines, partitions)
    if home != part:
        if lru_access(l2_tags, ((dom * partitions + home) * l2_sets + lset) * l2_ways, l2_ways, line):
            counts[x, 5] += 1
            return
        counts[x, 6] += 1
    if mall_sets > 0:
        if lru_access(mall_tags, (line % mall_sets) * mall_ways, mall_ways, line):
            mall_counts[0] += 1
        else:
            mall_counts[1] += 1


@jit
def _lookup(line, lset, write, x, dom, part, partitions, block_lines, l2_tags, l2_sets, l2_ways, mall_tags,
            mall_sets, mall_ways, counts, mall_counts, writes_hit, stores_last):
    """One access outside the K loop (epilogue, split-K arrival): a store goes to the line's
    home partition, a read through the program's partition ``part``.  A store to a line
    homed in another partition is also a lookup in ``part`` on its way over the fabric
    (ncu counts both: a srcunit_tex and a srcunit_ltcfabric write, each a hit)."""
    if write:
        home = _home(line, block_lines, partitions)
        if home != part and writes_hit:
            counts[x, 2] += 1
        base = (dom * partitions + home) * l2_sets
        set_base = (base + lset) * l2_ways
        present = (lru_insert_last(l2_tags, set_base, l2_ways, line) if stores_last
                   else lru_access(l2_tags, set_base, l2_ways, line))
        if present or writes_hit:
            counts[x, 2] += 1
        else:
            counts[x, 3] += 1
        return
    base = (dom * partitions + part) * l2_sets
    if lru_access(l2_tags, (base + lset) * l2_ways, l2_ways, line):
        counts[x, 0] += 1
    else:
        counts[x, 1] += 1
        _read_miss(line, lset, x, dom, part, partitions, block_lines, l2_tags, l2_sets, l2_ways, mall_tags,
                   mall_sets, mall_ways, counts, mall_counts)


@jit
def _replay(table, splits, steps_per_split, num_programs, tile_rows, offsets, lines, line_sets, split_heads,
            num_steps, epi_offsets, epi_lines, epi_sets, epi_writes, last_offsets, last_lines, last_sets, last_writes,
            num_xcds, slots, domain_of_xcd, partition_of_slot, merge_of_slot, partitions, block_lines, l2_tags,
            l2_sets, l2_ways, mall_tags, mall_sets, mall_ways, counts, mall_counts, writes_hit, stores_last, op_window,
            item_jitter, merge_cap, dispatch_gap, last, refill_by_clock):
    num_tiles = len(table)
    slot_t = np.zeros((num_xcds, slots), dtype=np.float64)   # each slot's clock, K-steps
    for x in range(num_xcds):                                # the first wave, dealt in launch order
        for sl in range(slots):
            slot_t[x, sl] = (sl * num_xcds + x) * dispatch_gap
    op_wq = op_window * CLOCK_TICKS                          # each operand's merge window, ticks
    num_work = num_tiles * splits
    num_operands = tile_rows.shape[1]
    arrived = np.zeros(num_tiles, dtype=np.int64)       # splits of each tile done so far
    # Slot state: the resident program (-1 = idle), its work item, tile, next and end step.
    slot_pid = np.full((num_xcds, slots), -1, dtype=np.int64)
    slot_work = np.zeros((num_xcds, slots), dtype=np.int64)
    slot_tile = np.zeros((num_xcds, slots), dtype=np.int64)
    slot_step = np.zeros((num_xcds, slots), dtype=np.int64)
    slot_stop = np.zeros((num_xcds, slots), dtype=np.int64)
    next_pid = np.arange(num_xcds, dtype=np.int64)   # XCD x runs pids x, x + num_xcds, ...
    freed = np.zeros((num_xcds, slots), dtype=np.int64)     # with refill_by_clock: slots freed this round
    num_freed = np.zeros(num_xcds, dtype=np.int64)
    active = 0
    for x in range(num_xcds):
        for sl in range(slots):
            if next_pid[x] < num_programs:
                pid = next_pid[x]
                next_pid[x] += num_xcds
                _start(pid, x, sl, table, num_tiles, steps_per_split, num_steps, slot_pid, slot_work,
                       slot_tile, slot_step, slot_stop)
                active += 1
    while active > 0:
        for x in range(num_xcds):                      # one round: every XCD in turn ...
            dom = domain_of_xcd[x]
            for sl in range(slots):                    # ... every resident program in turn
                pid = slot_pid[x, sl]
                if pid < 0:
                    continue
                part = partition_of_slot[sl]
                l2_base = (dom * partitions + part) * l2_sets   # the partition it reads through
                tile = slot_tile[x, sl]
                step = slot_step[x, sl]
                if step < slot_stop[x, sl]:            # ... performs one step
                    hits = 0                           # (the hot loop: _lookup's read path, inline)
                    misses = 0
                    merged = 0
                    t = slot_t[x, sl]
                    tq = np.int64(t * CLOCK_TICKS)     # the clock in ticks, as the merge state keeps it
                    bit = np.int32(1) << merge_of_slot[sl]   # the reader's merge unit, as the merge state keeps it
                    for o in range(num_operands):
                        seg = tile_rows[tile, o] * num_steps + step
                        wq = op_wq[o]
                        for i in range(offsets[seg], offsets[seg + 1]):
                            line = lines[i]
                            near = False
                            if wq > 0:                 # its merge unit requested it just now?
                                if abs(tq - last[line, 1]) < wq:
                                    if merge_cap == 0:
                                        near = (last[line, 0] & bit) != 0
                                        last[line, 0] |= bit
                                    elif last[line, 0] < merge_cap:   # the lookup serves one more
                                        near = True
                                        last[line, 0] += 1
                                    else:              # that lookup is full: a new one, a new burst
                                        last[line, 0] = 1
                                        last[line, 1] = tq
                                else:                  # the first request of a new burst
                                    last[line, 0] = bit if merge_cap == 0 else 1
                                    last[line, 1] = tq
                            if lru_access(l2_tags, (l2_base + line_sets[i]) * l2_ways, l2_ways, line):
                                if near:
                                    merged += 1
                                else:
                                    hits += 1
                            else:
                                misses += 1
                                if split_heads[i]:     # a split request: ncu counts one more hit
                                    hits += 1
                                _read_miss(line, line_sets[i], x, dom, part, partitions, block_lines, l2_tags,
                                           l2_sets, l2_ways, mall_tags, mall_sets, mall_ways, counts, mall_counts)
                    counts[x, 0] += hits
                    counts[x, 1] += misses
                    counts[x, 4] += merged
                    u = ((pid * 2654435761 + step * 40503 + 12345) % 65536) / 32768.0 - 1.0
                    slot_t[x, sl] = t + 1.0 + item_jitter[slot_work[x, sl] % num_tiles] * u
                    step += 1
                    slot_step[x, sl] = step
                if step < slot_stop[x, sl]:
                    continue
                work = slot_work[x, sl]                # the item's last step: its epilogue
                key = tile * splits + work // num_tiles
                for i in range(epi_offsets[key], epi_offsets[key + 1]):
                    _lookup(epi_lines[i], epi_sets[i], epi_writes[i], x, dom, part, partitions, block_lines,
                            l2_tags, l2_sets, l2_ways, mall_tags, mall_sets, mall_ways, counts, mall_counts,
                            writes_hit, stores_last)
                arrived[tile] += 1
                if arrived[tile] == splits:            # the tile's last split to arrive
                    for i in range(last_offsets[tile], last_offsets[tile + 1]):
                        _lookup(last_lines[i], last_sets[i], last_writes[i], x, dom, part, partitions,
                                block_lines, l2_tags, l2_sets, l2_ways, mall_tags, mall_sets, mall_ways, counts,
                                mall_counts, writes_hit, stores_last)
                if work + num_programs < num_work:     # persistent: the program's next item
                    _assign(work + num_programs, x, sl, table, num_tiles, steps_per_split, num_steps,
                            slot_work, slot_tile, slot_step, slot_stop)
                elif refill_by_clock:                  # finished: the slot waits for the round's end
                    slot_pid[x, sl] = -1
                    freed[x, num_freed[x]] = sl
                    num_freed[x] += 1
                elif next_pid[x] < num_programs:       # finished: the next program takes the slot
                    pid = next_pid[x]
                    next_pid[x] += num_xcds
                    _start(pid, x, sl, table, num_tiles, steps_per_split, num_steps, slot_pid, slot_work,
                           slot_tile, slot_step, slot_stop)
                else:
                    slot_pid[x, sl] = -1
                    active -= 1
        if not refill_by_clock:
            continue
        for x in range(num_xcds):                      # refill by clock: the slots freed this round,
            if num_freed[x] == 0:                      # the earliest finished first, take the next pids
                continue
            waiting = freed[x, :num_freed[x]]
            for sl in waiting[np.argsort(slot_t[x, waiting], kind="mergesort")]:
                if next_pid[x] < num_programs:
                    pid = next_pid[x]
                    next_pid[x] += num_xcds
                    _start(pid, x, sl, table, num_tiles, steps_per_split, num_steps, slot_pid, slot_work,
                           slot_tile, slot_step, slot_stop)
                else:
                    active -= 1
            num_freed[x] = 0


@jit
def _start(pid, x, sl, table, num_tiles, steps_per_split, num_steps, slot_pid, slot_work, slot_tile, slot_step,
           slot_stop):
    """Program ``pid`` becomes resident in slot (x, sl), at its first work item, ``pid``."""
    slot_pid[x, sl] = pid
    _assign(pid, x, sl, table, num_tiles, steps_per_split, num_steps, slot_work, slot_tile, slot_step, slot_stop)


@jit
def _assign(work, x, sl, table, num_tiles, steps_per_split, num_steps, slot_work, slot_tile, slot_step, slot_stop):
    """Slot (x, sl) starts work item ``work``: split ``work // num_tiles`` of the tile the
    remap table gives launch-order tile ``work % num_tiles``."""
    split = work // num_tiles
    first = min(split * steps_per_split, num_steps)
    slot_work[x, sl] = work
    slot_tile[x, sl] = table[work - split * num_tiles]
    slot_step[x, sl] = first
    slot_stop[x, sl] = min(first + steps_per_split, num_steps)


@dataclass
class CacheState:
    """The simulated caches' contents, carried from one launch of a timed run to the next."""

    l2_tags: np.ndarray
    mall_tags: np.ndarray

    @classmethod
    def cold(cls, target: SimTarget, dtype) -> "CacheState":
        mall = target.mall.empty_state(1, dtype) if target.mall is not None else np.zeros(1, dtype=dtype)
        return cls(target.l2.empty_state(target.l2_domains * target.l2_partitions, dtype), mall)


def simulate_l2(model: AccessModel | LaunchModel, table: np.ndarray, target: SimTarget,
                caches: CacheState | None = None, spill_bytes: int = 0) -> SimResult:
    """Replay a launch on the machine ``target``: the launch-order tile ``t`` of every work
    item computes tile ``table[t]``; a bare :class:`AccessModel` is a launch of one program
    per tile with loads only.  ``caches``: start from (and leave in) this state instead of
    cold caches.  ``spill_bytes``: bytes each work item stores to local memory (the compiled
    kernel's register spills, :func:`spill_lookups`).  The model's line size must equal the L2's."""
    launch = model if isinstance(model, LaunchModel) else LaunchModel.loads_only(model)
    loads, schedule = launch.loads, launch.schedule
    if loads.line_bytes != target.line_bytes:
        raise ValueError(f"access model uses {loads.line_bytes} B lines, the simulated L2 "
                         f"{target.line_bytes} B")
    table = np.ascontiguousarray(table, dtype=np.int64)
    if len(table) != schedule.num_tiles:
        raise ValueError(f"remap table has {len(table)} entries for {schedule.num_tiles} tiles")
    if len(table) and (table.min() < 0 or table.max() >= loads.num_tiles):
        raise ValueError(f"remap table sends a program outside the {loads.num_tiles} tiles")
    # Line ids and tags share one type, int32 whenever the ids fit (half the memory traffic).
    dtype = tag_dtype(launch.max_line) if caches is None else caches.l2_tags.dtype
    caches = caches if caches is not None else CacheState.cold(target, dtype)
    mall_sets, mall_ways = (target.mall.num_sets, target.mall.ways) if target.mall is not None else (0, 1)
    counts = np.zeros((target.num_xcds, 7), dtype=np.int64)
    # The merging's memory, per line: the clusters that requested it in its current burst (a
    # bit mask) and when the burst began (clock ticks), side by side so that one memory access
    # finds both; a single unused entry when merging is off.
    op_window = target.operand_windows(loads.operand_bulk, loads.tile_rows.shape[1])
    tracked = launch.max_line + 1 if op_window.max(initial=0.0) > 0 else 1
    last = np.empty((tracked, 2), dtype=np.int32)
    last[:, 0] = 0
    last[:, 1] = np.iinfo(np.int32).min // 2
    mall_counts = np.zeros(2, dtype=np.int64)
    domain_of_xcd = target.domain_of_xcd()
    num_programs = schedule.num_programs(target.num_xcds * target.cus_per_xcd)

    lines, epi_lines, last_lines = (a.astype(dtype, copy=False) for a in
                                    (loads.lines, launch.epilogue.lines, launch.last.lines))
    block_lines = max(1, BLOCK_BYTES // target.line_bytes)
    line_sets, epi_sets, last_sets = (set_index(a, target.l2.num_sets, block_lines, target.set_hash).astype(np.int32)
                                      for a in (loads.lines, launch.epilogue.lines, launch.last.lines))
    item_jitter = np.full(len(table), target.step_jitter)   # each work item's step jitter, K-steps
    if target.scatter_jitter:
        item_jitter += target.scatter_jitter * scattered_items(table, loads.tile_rows)
    started = time.perf_counter()
    split_heads = (loads.split_heads if loads.split_heads is not None
                   else np.zeros(len(loads.lines), dtype=np.bool_))
    _replay(table, schedule.splits, schedule.steps_per_split, num_programs, loads.tile_rows, loads.offsets,
            lines, line_sets, split_heads, loads.num_steps, launch.epilogue.offsets, epi_lines, epi_sets,
            launch.epilogue.writes,
            launch.last.offsets, last_lines, last_sets, launch.last.writes, target.num_xcds, target.slots_per_xcd,
            domain_of_xcd, target.partition_of_slot(num_programs), target.merge_of_slot(num_programs),
            target.l2_partitions, block_lines,
            caches.l2_tags, target.l2.num_sets, target.l2.ways, caches.mall_tags, mall_sets, mall_ways, counts,
            mall_counts, target.writes_hit, target.store_insert == "lru", op_window, item_jitter,
            target.merge_cap, target.dispatch_gap, last, target.refill == "clock")
    replay_s = time.perf_counter() - started
    counts[:, 2] += spill_lookups(spill_bytes, target) * np.bincount(
        np.arange(schedule.num_work) % target.num_xcds, minlength=target.num_xcds)
    return _result(launch.name, counts, mall_counts, target, num_programs, replay_s)


def spill_lookups(spill_bytes: int, target: SimTarget) -> int:
    """Write lookups in the L2 of one work item's register spills: ``spill_bytes`` stored to
    local memory, each line once, all hits, and a line homed in another partition looked up in
    both (as any store; :func:`_lookup`), so ``1 + (partitions - 1) / partitions`` lookups per
    line.  Only where stores are hits (NVIDIA: measured, an H100 sends every spilled line to the
    L2 and reads none back); 0 elsewhere.  The spilled lines take no room in the simulated L2."""
    if spill_bytes <= 0 or not target.writes_hit:
        return 0
    lines = -(-int(spill_bytes) // target.line_bytes)
    p = target.l2_partitions
    return lines + lines * (p - 1) // p


def _result(name: str, counts: np.ndarray, mall_counts: np.ndarray, target: SimTarget, num_programs: int,
            replay_s: float) -> SimResult:
    """Sum the replay's per-XCD counters into a :class:`SimResult`."""
    domain_of_xcd = target.domain_of_xcd()
    # All lookups: the reads through each program's partition, the stores, and the reads looked
    # up again in a far home partition (ncu counts those too, as srcunit_ltcfabric).
    xcd_hits = counts[:, 0] + counts[:, 2] + counts[:, 5]
    xcd_misses = counts[:, 1] + counts[:, 3] + counts[:, 6]
    domain_hits = np.bincount(domain_of_xcd, weights=xcd_hits, minlength=target.l2_domains).astype(np.int64)
    domain_misses = np.bincount(domain_of_xcd, weights=xcd_misses, minlength=target.l2_domains).astype(np.int64)
    hits, misses = int(xcd_hits.sum()), int(xcd_misses.sum())
    read_misses = int(counts[:, 1].sum())
    fabric_hits = int(counts[:, 5].sum())
    fetched = read_misses - fabric_hits       # read misses the far partition did not serve
    line = target.line_bytes
    with_mall = target.mall is not None
    return SimResult(
        hit_rate=_rate(hits, misses), hits=hits, misses=misses,
        read_hits=int(counts[:, 0].sum()), read_misses=read_misses,
        xcd_hits=tuple(int(v) for v in xcd_hits), xcd_misses=tuple(int(v) for v in xcd_misses),
        domain_hits=tuple(int(v) for v in domain_hits), domain_misses=tuple(int(v) for v in domain_misses),
        line_bytes=line, l2_miss_bytes=fetched * line,
        mall_hits=int(mall_counts[0]) if with_mall else None,
        mall_misses=int(mall_counts[1]) if with_mall else None,
        dram_read_bytes=int(mall_counts[1]) * line if with_mall else fetched * line,
        num_programs=num_programs, slots_per_xcd=target.slots_per_xcd, replay_s=replay_s, engine=ENGINE,
        name=name, merged_reads=int(counts[:, 4].sum()), fabric_hits=fabric_hits,
        fabric_misses=int(counts[:, 6].sum()))


def simulate_run(models, table: np.ndarray, target: SimTarget, spill_bytes: int = 0) -> SimResult:
    """Simulate a job's timed run, ``models`` (:meth:`kernels.base.ConvKernel.launch_models`).

    The result is the ``profiled`` launch (the conv) replayed from cold caches, as the
    hardware profilers measure it (ncu's ``--cache-control all`` flushes before the kernel
    it profiles; the fold and sum passes are filtered out by kernel name).  With more than
    one launch, ``timed_run`` holds every launch replayed in launch order with the caches
    carried over, as the timed launcher runs them.  The remap table applies to the
    ``swizzled`` launch; the others run their programs in launch order."""
    def table_of(m: LaunchModel) -> np.ndarray:
        return table if m.swizzled else np.arange(m.schedule.num_tiles, dtype=np.int64)

    profiled = next(m for m in models if m.profiled)
    alone = simulate_l2(profiled, table_of(profiled), target, spill_bytes=spill_bytes)
    if len(models) == 1:
        return alone
    caches = CacheState.cold(target, tag_dtype(max(m.max_line for m in models)))
    run = tuple((m.name, simulate_l2(m, table_of(m), target, caches, spill_bytes if m.profiled else 0))
                for m in models)
    return replace(alone, timed_run=run)


# -----------------------------------------------------------
# The entry point the harness calls for one job.

@functools.lru_cache(maxsize=4)
def _cached_models(kernel, shape, tiles: tuple[tuple[str, int], ...], line_bytes: int,
                   request_bytes: int = 0) -> tuple[LaunchModel, ...]:
    # A sweep simulates the same (kernel, shape, tiles) under several swizzles.
    return kernel.launch_models(shape, dict(tiles), line_bytes, request_bytes)


@functools.lru_cache(maxsize=4)
def _cached_blind(kernel, shape, tiles: tuple[tuple[str, int], ...], line_bytes: int, request_bytes: int = 0) -> bool:
    # ... and asks once per (kernel, shape, tiles) whether its grid is order-blind.
    models = _cached_models(kernel, shape, tiles, line_bytes, request_bytes)
    return order_blind(next(m for m in models if m.profiled).loads)


def simulate_job(kernel, shape, tiles: Mapping[str, int], swizzle_fn, num_xcds: int, group_size: int,
                 target: Mapping[str, Any], occupancy: int | None = None, *,
                 table: np.ndarray | None = None, line_bytes: int | None = None,
                 spill_bytes: int = 0) -> SimResult:
    """Simulate one job's launch on the target's L2.

    ``kernel`` is a :class:`kernels.base.ConvKernel` or its name; ``num_xcds`` and
    ``group_size`` are the swizzle's constexprs (the hardware's XCD count comes from
    ``target``).  The remap table is computed with :func:`swizzles.permutation.remap_table`
    unless given as ``table``; a table that is not a permutation is rejected with
    ``ValueError`` (such a job fails its gate before any profiler runs).  ``occupancy``
    and ``line_bytes`` override the target record (see :meth:`SimTarget.from_target`).
    ``spill_bytes``: bytes one program of the compiled kernel stores to local memory per work
    item (its threads times the compiler's spill bytes per thread; :func:`spill_lookups`).
    """
    from kernels import get_kernel
    from swizzles.permutation import check_permutation, remap_table

    kernel = get_kernel(kernel) if isinstance(kernel, str) else kernel
    tiles = kernel.check_tiles(tiles)
    sim_target = SimTarget.from_target(target, occupancy, line_bytes)
    grid = kernel.tile_grid(shape, tiles)
    if table is None:
        table = remap_table(swizzle_fn, grid.num_pid_m, grid.num_pid_n, num_xcds, group_size,
                            device=table_device())
    verdict = check_permutation(np.asarray(table))
    if not verdict.ok:
        raise ValueError(f"cannot simulate: the remap is {verdict.reason}")
    key = tuple(sorted(tiles.items()))
    models = _cached_models(kernel, shape, key, sim_target.line_bytes, sim_target.request_bytes)
    result = simulate_run(models, table, sim_target, spill_bytes)
    resident = sim_target.slots_per_xcd * sim_target.num_xcds
    num_work = next(m for m in models if m.profiled).schedule.num_work
    blind = _cached_blind(kernel, shape, key, sim_target.line_bytes, sim_target.request_bytes)
    return replace(result, layer_class=layer_class(shape, sim_target.line_bytes, num_work, resident),
                   order_blind=blind)


def table_device() -> str:
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
        from harness.job.spec import JobSpec

        outcomes = {}
        for req in requests:
            spec = JobSpec.from_dict(req.spec)
            try:
                occupancy = self.occupancy or getattr(req, "occupancy", None)   # compiled for the target
                spills = getattr(req, "spill_bytes", None) or 0                  # ... and its spills
                result = self._simulate(spec, occupancy, spills)
                # The baseline's own spills are not known here: it is taken to spill as much.
                baseline = (self._simulate(JobSpec.from_dict(req.baseline), occupancy, spills)
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
            err = prediction_error(self.target, spec.kernel, result.layer_class, result.order_blind)
            outcome.tags["sim_layer_class"] = result.layer_class
            if result.order_blind:   # the model cannot tell this grid's orders apart
                outcome.tags["sim_order_blind"] = ORDER_BLIND_NOTE
            outcome.tags["sim_validation"] = err.validated
            outcome.metrics["l2_read_hit_rate"] = result.read_hit_rate
            if err.hit_rate is not None:
                outcome.metrics["l2_hit_rate_err"] = err.hit_rate
            if err.read_hit_rate is not None:
                outcome.metrics["l2_read_hit_rate_err"] = err.read_hit_rate
            if err.coverage is not None:   # the ± are bands that held this share of unfitted cells (%)
                outcome.metrics["l2_err_coverage"] = 100.0 * err.coverage
            outcome.delta_error, outcome.read_delta_error = err.delta, err.read_delta
            if baseline is not None:   # deterministic: one pair is the exact difference
                outcome.baseline_reading = baseline.as_reading()
                outcome.pairs = [(outcome.reading.l2_hit_rate, outcome.baseline_reading.l2_hit_rate)]
                outcome.read_pairs = [(result.read_hit_rate, baseline.read_hit_rate)]
            outcomes[req.key] = outcome
        return outcomes

    def _residency(self, occupancy: int | None) -> int:
        """Programs per CU the simulation used."""
        return SimTarget.from_target(self.target, occupancy, self.line_bytes).occupancy

    def _simulate(self, spec, occupancy: int | None = None, spill_bytes: int = 0) -> SimResult:
        """``occupancy``: programs per CU, from the kernel compiled for the target (the
        compile stage) when the job has one, else the target's or DEFAULT_OCCUPANCY;
        ``spill_bytes``: what one program of it spills (bytes), from the same compile."""
        from harness.job.user_code import spec_kernel, spec_remap

        return simulate_job(spec_kernel(spec), spec.shape, spec.tiles_dict, spec_remap(spec), spec.num_xcds,
                            spec.group_size, self.target, occupancy, line_bytes=self.line_bytes,
                            spill_bytes=spill_bytes)
