"""The simulated machine's parameters (:class:`SimTarget`), read from a target record
(``conf/target/*.yaml``) and its ``sim_calibration``.

Units: sizes in bytes, windows, jitters and gaps in K-steps (one step of a program's K loop),
counts of XCDs, CUs, programs, clusters and partitions as plain integers.

Length: one module for a target's simulator parameters: the record's keys, their checks and the typed SimTarget they build are read together when a key is added.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, NamedTuple

import numpy as np

from harness.profilers.sim.lru import CacheGeometry

#: Workgroups resident per CU when neither the caller nor the target says: a big
#: implicit-GEMM tile (128 x 128 x 64 fp16, 8 warps) leaves room for about two.
DEFAULT_OCCUPANCY = 2

#: Associativity of the memory-side cache when the target does not give ``mall_ways``
#: (MI300X Infinity Cache: 16 ways).
DEFAULT_MALL_WAYS = 16

#: Spread of a K-step's duration, +- fraction of a step (see :class:`SimTarget`).  Fixed: with
#: coalescing, only the window relative to it matters, and the window is what is fitted.
STEP_JITTER = 0.2

#: What the request coalescer may merge within (:attr:`SimTarget.merge_unit`).
MERGE_UNITS = ("cluster", "partition", "any")
#: A calibration record's ``tma_unit``: a merge unit turns :class:`BulkMerge` on, ``off`` leaves it off
#: (as no ``tma_unit`` does: a record can turn off a target's bulk merge).
TMA_UNITS = MERGE_UNITS + ("off",)
#: Where a store's fill goes in its set's LRU order (:attr:`SimTarget.store_insert`).
STORE_INSERTS = ("mru", "lru")
#: Which free slot a later wave's next program takes (:attr:`SimTarget.refill`).
REFILLS = ("order", "clock")
#: How the programs' step lengths are phased (:attr:`SimTarget.step_phase`).
STEP_PHASES = ("linear", "mixed", "one_wave", "one_wave_bulk")
#: The multiplier of the step hash, pid * STEP_HASH (Fibonacci hashing, 32 bits).
STEP_HASH = 2654435761


@dataclass(frozen=True)
class BulkMerge:
    """How the L2 merges the requests of operands a kernel loads in bulk through a tensor
    descriptor (NVIDIA TMA; ``bulk`` in the access model).  The TMA unit sends a box as one
    128 B request per box row (``BLOCK_K`` fp16 = 128 B: the row's four 32 B sectors asked for
    together, at one clock), not through the SM's L1 and its coalescer; measured on an H100,
    such loads become fewer L2 lookups per sector than ordinary ones (l12: 52 % against 70 %)
    with the same misses.  A bulk request of a line merges with the line's current burst (begun
    less than ``window`` K-steps before, by the clocks) when ``unit`` already requested it in
    that burst, or, with ``cap``, while fewer than ``cap`` requests share the burst's lookup."""

    window: float       # K-steps
    unit: str = "any"   # whose requests merge: one of MERGE_UNITS (cluster, partition, any)
    cap: int = 0        # with unit any: the most requests one lookup serves; 0: no cap

    def __post_init__(self) -> None:
        if not 0 <= self.window:
            raise ValueError(f"bulk merge: window={self.window!r} must be >= 0 (K-steps)")
        if self.unit not in MERGE_UNITS:
            raise ValueError(f"bulk merge: unit={self.unit!r} is invalid; valid: " + ", ".join(MERGE_UNITS))
        if not isinstance(self.cap, int) or isinstance(self.cap, bool) or self.cap < 0:
            raise ValueError(f"bulk merge: cap={self.cap!r} must be a whole number >= 0 (0: no cap)")
        if self.cap and self.unit != "any":
            raise ValueError(f"bulk merge: cap={self.cap} needs unit='any' (not {self.unit!r})")

    @classmethod
    def from_record(cls, cal: Mapping[str, Any]) -> "BulkMerge | None":
        """From a calibration record's ``tma_unit`` (which turns it on), ``tma_window`` (default:
        ``coalesce_window``) and ``tma_cap`` (default 0); None without ``tma_unit`` or with
        ``tma_unit: off``."""
        if cal.get("tma_unit") in (None, "off"):
            return None
        window = cal.get("tma_window", cal.get("coalesce_window", 0.0))
        return cls(float(window), str(cal["tma_unit"]), int(cal.get("tma_cap") or 0))


class OperandMerge(NamedTuple):
    """Each operand's coalescer rules, for the replay: its merge window (K-steps), its cap (0:
    merge by unit) and each slot's merge unit (its bit in the merge state)."""

    window: np.ndarray   # (operands,) float64
    cap: np.ndarray      # (operands,) int64
    unit: np.ndarray     # (operands, slots_per_xcd) int64


def calibration(target: Mapping[str, Any]) -> Mapping[str, Any]:
    """The target's ``sim_calibration`` record (``conf/target/*.yaml``), written from a
    validation of the simulator against hardware counters: the fitted parameters and the
    held-out errors (docs/simulator.md).  Empty: never validated."""
    return target.get("sim_calibration") or {}


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
    #: absent line is a miss that allocates it.
    writes_hit: bool = False
    #: Reads of a line that the reader's merge unit requested less than this many K-steps earlier
    #: are merged before the L2 (NVIDIA's L2 request coalescer) and never counted as lookups; 0: off.
    coalesce_window: float = 0.0
    #: The window (K-steps) for operands loaded by a tensor descriptor (NVIDIA TMA; ``bulk`` in
    #: the access model); None: ``coalesce_window``.  The calibration record's ``tma_window``.
    bulk_window: float | None = None
    #: The rules of bulk (TMA) loads, window, merge unit and cap of their own (:class:`BulkMerge`;
    #: the calibration record's ``tma_unit``, ``tma_window``, ``tma_cap``); None: ``bulk_window``
    #: under the target's unit and cap.
    bulk_merge: BulkMerge | None = None
    #: Each K-step of a program lasts 1 +- this (a fixed hash of pid and the program's step count,
    #: linear modulo 2^16, so two programs' drift stays bounded, over a persistent program's work
    #: items too), so programs drift apart as they run and later waves start out of step.
    step_jitter: float = STEP_JITTER
    #: Extra step jitter (K-steps) of a work item whose tile reads some operand from a block
    #: that is neither the block nor a neighbour of the one the item launched just before reads
    #: (:func:`harness.profilers.sim.dispatch.scattered_items`).  The calibration record's
    #: ``scatter_jitter``; 0: off.
    scatter_jitter: float = 0.0
    #: The first wave's programs start this many K-steps apart, in launch order; 0: all at once.
    dispatch_gap: float = 0.0
    #: The L2 set of a line is a hash of its 128 B block (NVIDIA; target key ``l2_set_hash``)
    #: rather than its number modulo the sets, so strided streams spread over every set.
    set_hash: bool = False
    #: The L1's request size, bytes (NVIDIA: 128, target key ``l2_request_bytes``; 0: not
    #: modelled).  A load's run that crosses a multiple of it is two requests, and ncu's read
    #: lookup counters count one more hit for the second when its first line misses; a store of
    #: each output row is its own request, so a sector two rows share is looked up twice.
    request_bytes: int = 0
    #: The size of a store's L2 requests, bytes (MI300X: 32, target key ``l2_store_request_bytes``;
    #: 0: one lookup per line): each distinct piece of that size a work item writes is a lookup,
    #: so a written line is looked up once per piece (the first, to an absent line, a miss that
    #: allocates; the others hits).  A divisor of the line below it.
    store_request_bytes: int = 0
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
    #: ``partition`` (from every SM that reads through one L2 partition) or ``any`` (from every SM).
    merge_unit: str = "cluster"
    #: With ``merge_unit: any``, the most requests one lookup serves (the first and up to
    #: ``merge_cap - 1`` merged with it); a request past that starts a new lookup and burst.
    #: 0: no cap.
    merge_cap: int = 0
    #: Which partition each CU reads through, in the order the first wave fills them: 0, the
    #: partition of its cluster (``g * l2_partitions // clusters``); ``k`` > 0, CU ``c`` reads
    #: through partition ``(c // k) % l2_partitions``.  The target key ``partition_run``, or the
    #: calibration record's when it sets one.
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
    #: in the order their programs finished by the clocks (the SM that frees first gets the next).
    refill: str = "order"
    #: The phase of each program's step lengths.  Step ``k`` of program ``pid`` (its k-th K-step,
    #: counted over all its work items: the kernel's ring position) lasts
    #: ``1 + jitter * u``, ``u = 2 frac((h(pid) + 40503 k + 12345) / 2^16) - 1`` (a golden-ratio
    #: sequence in k: the drift between two programs stays bounded), ``h`` from ``pid * STEP_HASH``: ``linear``,
    #: its low 16 bits, so programs 1 apart in launch order are 0.475 of a cycle apart and step in
    #: near antiphase (after one step about 0.19 K-steps apart: at the coalescer's window);
    #: ``mixed``, its bits 16-31 (phases spread as at random); ``one_wave``, mixed in a launch
    #: whose work items all start in the first wave, linear in one of several waves;
    #: ``one_wave_bulk``, as ``one_wave`` in a launch that loads an operand in bulk (by a tensor
    #: descriptor: ``OperandLoads.bulk``), linear in any other.
    step_phase: str = "linear"

    def __post_init__(self) -> None:
        for name in ("num_xcds", "cus_per_xcd", "occupancy", "l2_domains", "l2_partitions", "clusters",
                     "cluster_run"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise ValueError(f"simulated target: {name}={value!r} must be a positive integer")
        if not isinstance(self.partition_run, int) or isinstance(self.partition_run, bool) or self.partition_run < 0:
            raise ValueError(f"simulated target: partition_run={self.partition_run!r} must be a whole number >= 0 "
                             "(0: each cluster's partition)")
        if self.store_request_bytes and (self.store_request_bytes < 0 or self.store_request_bytes >= self.line_bytes
                                         or self.line_bytes % self.store_request_bytes):
            raise ValueError(f"simulated target: l2_store_request_bytes={self.store_request_bytes!r} must divide the "
                             f"{self.line_bytes} B line and be below it (e.g. 32 or 64), or 0 (one lookup per line)")
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
        if self.step_phase not in STEP_PHASES:
            raise ValueError(f"simulated target: step_phase={self.step_phase!r} is invalid; valid: "
                             + ", ".join(STEP_PHASES))
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

    def merge_of_slot(self, num_programs: int | None = None, unit: str | None = None) -> np.ndarray:
        """The unit whose requests the coalescer merges, per slot (its bit in the merge state):
        the slot's cluster, the partition it reads through, or one unit for all (``any``), by
        ``unit`` (None: :attr:`merge_unit`)."""
        unit = self.merge_unit if unit is None else unit
        if unit == "any":
            return np.zeros(self.slots_per_xcd, dtype=np.int64)
        return self.cluster_of_slot() if unit == "cluster" else self.partition_of_slot(num_programs)

    def operand_merge(self, bulk: tuple[bool, ...], num_operands: int, num_programs: int) -> OperandMerge:
        """The coalescer's rules per operand of a launch of ``num_programs``: a bulk operand
        (``bulk``; () for none) takes :attr:`bulk_merge` where set, else every operand the
        target's unit and cap, with its window from :meth:`operand_windows`."""
        bulk = bulk or (False,) * num_operands
        windows = self.operand_windows(bulk, num_operands)
        caps = np.full(num_operands, self.merge_cap, dtype=np.int64)
        units = np.tile(self.merge_of_slot(num_programs), (num_operands, 1))
        if self.bulk_merge is not None:
            for o in (o for o, b in enumerate(bulk) if b):
                windows[o], caps[o] = self.bulk_merge.window, self.bulk_merge.cap
                units[o] = self.merge_of_slot(num_programs, self.bulk_merge.unit)
        return OperandMerge(windows, caps, units)

    def phase_shift(self, num_work: int, bulk: bool = False) -> int:
        """The bits the step hash drops from ``pid * STEP_HASH`` (:attr:`step_phase`) in a launch
        of ``num_work`` work items, loading some operand in bulk when ``bulk``: 16 (mixed
        phases) or 0 (linear)."""
        one_wave = num_work <= self.slots_per_xcd * self.num_xcds
        mixed = {"linear": False, "mixed": True, "one_wave": one_wave, "one_wave_bulk": one_wave and bulk}
        return 16 if mixed[self.step_phase] else 0

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
        ``l2_partitions`` (default 1; ``l2_bytes`` is split between them), ``l2_store_request_bytes``
        (default 0: a store is one lookup per line), ``clusters``
        (NVIDIA: GPCs; default 1) and ``occupancy`` (default :data:`DEFAULT_OCCUPANCY`);
        ``l2_writes: hit`` (NVIDIA) makes stores hits; the calibration record's
        ``coalesce_window`` turns on the request coalescer and its ``cluster_run`` sets which
        SMs form a cluster.  ``occupancy`` and ``line_bytes`` given here override the record
        (e.g. ``line_bytes=32`` to count NVIDIA's 32 B sectors).
        """
        num_xcds = _need(target, "num_xcds")
        compute_units = _need(target, "compute_units")
        if compute_units % num_xcds:
            raise ValueError(f"target {target.get('name', '?')!r}: compute_units={compute_units} is not a "
                             f"multiple of num_xcds={num_xcds}")
        line = int(line_bytes) if line_bytes is not None else _need(target, "l2_line_bytes")
        mall_bytes = int(target.get("mall_bytes") or 0)
        ways = _need(target, "l2_ways")
        # The calibrated share of the L2 the traffic can use: whole sets.
        fraction = float(calibration(target).get("l2_capacity_fraction", 1.0))
        partitions = int(target.get("l2_partitions") or 1)
        l2_bytes = max(1, int(_need(target, "l2_bytes") * fraction / partitions) // (ways * line)) * ways * line
        return cls(
            num_xcds=num_xcds,
            cus_per_xcd=compute_units // num_xcds,
            occupancy=int(occupancy if occupancy is not None else (target.get("occupancy") or DEFAULT_OCCUPANCY)),
            l2_domains=int(target.get("l2_domains") or num_xcds),
            l2=CacheGeometry(l2_bytes, ways, line),
            mall=(CacheGeometry(mall_bytes, int(target.get("mall_ways") or DEFAULT_MALL_WAYS), line)
                  if mall_bytes else None),
            writes_hit=_write_policy(target) == "hit",
            l2_partitions=partitions,
            clusters=int(target.get("clusters") or 1),
            slot_partitions=_slot_partitions(target, partitions),
            set_hash=bool(target.get("l2_set_hash", False)),
            request_bytes=int(target.get("l2_request_bytes") or 0),
            store_request_bytes=_store_request_bytes(target, line),
            **_calibrated(target),
        )


def _need(target: Mapping[str, Any], key: str) -> int:
    """A key of the target record the simulator cannot do without."""
    value = target.get(key)
    if value is None:
        raise ValueError(f"target {target.get('name', '?')!r}: {key} is not set; the simulator needs num_xcds, "
                         "compute_units, l2_bytes, l2_ways and l2_line_bytes "
                         "(target=auto must be resolved to a preset first)")
    return int(value)


def _calibrated(target: Mapping[str, Any]) -> dict[str, Any]:
    """The :class:`SimTarget` fields the calibration record sets (the coalescer, the clocks,
    the dispatch), each its default where the record has none."""
    cal = calibration(target)
    return dict(
        coalesce_window=float(cal.get("coalesce_window", 0.0)),
        bulk_window=None if cal.get("tma_window") is None else float(cal["tma_window"]),
        bulk_merge=BulkMerge.from_record(cal),
        cluster_run=int(cal.get("cluster_run", 1)),
        merge_unit=str(cal.get("merge_unit", "cluster")),
        merge_cap=int(cal.get("merge_cap", 0)),
        partition_run=int(cal.get("partition_run", target.get("partition_run") or 0)),
        store_insert=str(cal.get("store_insert", "mru")),
        refill=str(cal.get("refill", "order")),
        step_phase=str(cal.get("step_phase", "linear")),
        step_jitter=float(cal.get("step_jitter", STEP_JITTER)),
        scatter_jitter=float(cal.get("scatter_jitter", 0.0)),
        dispatch_gap=float(cal.get("dispatch_gap", 0.0)),
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


def _store_request_bytes(target: Mapping[str, Any], line_bytes: int) -> int:
    """``l2_store_request_bytes`` of a target record, checked against its ``l2_line_bytes``, for
    simulated lines of ``line_bytes`` (0 when unset, or when those lines are no larger than a
    request: each is then one lookup anyway)."""
    size = int(target.get("l2_store_request_bytes") or 0)
    line = int(target.get("l2_line_bytes") or line_bytes)
    if size and not (0 < size < line and line % size == 0):
        raise ValueError(f"target {target.get('name', '?')!r}: l2_store_request_bytes={size} must divide the "
                         f"{line} B line and be below it (e.g. 32 or 64), or 0 (one lookup per line)")
    return size if size < line_bytes else 0


def _write_policy(target: Mapping[str, Any]) -> str:
    """``l2_writes`` of a target record: ``hit`` or ``allocate`` (the default)."""
    policy = str(target.get("l2_writes") or "allocate")
    if policy not in ("hit", "allocate"):
        raise ValueError(f"target {target.get('name', '?')!r}: l2_writes={policy!r} is invalid; valid: hit "
                         "(a store is a hit: NVIDIA), allocate (a store to an absent line is a miss)")
    return policy
