"""What a program reads: the address model the simulated L2 replays.

Every kernel family describes its loads as a :class:`LoadPlan`.  A program (one
tile) runs ``num_steps`` steps, one iteration of its innermost loop each (for the
implicit-GEMM and direct kernels one ``(r, s, channel block)``; for the patch kernel
one ``(column block, r, s, channel block)``), and at every step it loads a few blocks
of each operand.  Two facts make the description small and fast to build:

* An operand's loads depend on one coordinate of the tile only: the input on the
  pixel tile, the weights on the filter tile.  So each operand is a *table* with one
  row per value of that coordinate, and a tile points at one row of each table
  (``row_of_tile``).  The 2 x 10^5 tiles of a big layer share a few thousand rows.
* A load is a set of *runs*: byte ranges that are contiguous in memory (a row of
  ``BLOCK_K`` channels in NHWC, or a single element).  A run of ``n`` bytes touches
  ``ceil(n / line)`` or one more cache lines, whatever the line size.

From runs we derive both things the simulator and its proof need:

* :meth:`LoadPlan.tile_addresses`: the byte address of every element one program
  loads, per step, for comparison with what the Triton interpreter records;
* :meth:`LoadPlan.access_model`: the distinct cache lines of every (row, step),
  packed into an :class:`AccessModel`.

Addresses are "simulated" addresses: each tensor gets a base (see
:func:`tensor_bases` and :func:`place_tensors`), so that lines of different tensors
never coincide.

Beyond the loads of its K loop, a launch is described by a :class:`LaunchPlan`:

* its :class:`Schedule`: how many programs start and which *work items* each one walks
  (a work item is one split of one tile's K steps; without split-K and without a
  persistent grid, program ``p`` computes work item ``p`` and nothing else);
* its :class:`Epilogue`: what a work item reads and writes after its last K step (the
  output tile's stores; with split-K the fp32 partials and the arrival counter), and
  what the *last* split of a tile to arrive does besides (``SPLIT_SUM``: read every
  partial back and store the sum).

A job's timed run may be several launches (igemm_fast's fold pass before the conv, its
split-K sum pass after): :meth:`kernels.base.ConvKernel.launch_plans` lists them in
launch order.  :meth:`LaunchPlan.access_model` turns a plan into the cache lines the
simulator replays (:class:`LaunchModel`).

Length: loads, epilogues and schedules share one representation (tables of byte runs
reduced to distinct lines, :func:`_distinct_lines`); every family builds on all of it.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Mapping

import numpy as np

from kernels.problem import ConvShape

#: Every tensor starts on a multiple of this many bytes in the simulated address
#: space (a multiple of any cache line size considered: 32 B sectors to 128 B lines).
TENSOR_ALIGN = 4096

#: Storage bytes of one element per dtype name.
ELEMENT_BYTES = {"float16": 2, "bfloat16": 2, "float32": 4}

#: Upper bound on the elements of one scratch array while building an access model
#: (int64: 8 bytes each), to keep memory bounded on the largest layers.
_CHUNK_ELEMENTS = 1 << 22

_SENTINEL = np.iinfo(np.int64).max


def element_bytes(shape: ConvShape) -> int:
    """Bytes per element of the shape's storage dtype."""
    return ELEMENT_BYTES[shape.dtype]


def tensor_bases(shape: ConvShape, with_bias: bool, elem_bytes: int | None = None) -> dict[str, int]:
    """Base byte address of each operand in the simulated address space.

    The input ``x`` starts at 0, the weights ``w`` at the first multiple of
    :data:`TENSOR_ALIGN` after it, the bias ``b`` (if any) likewise after the weights.
    The names are the kernels' pointer arguments without ``_ptr``.
    """
    eb = elem_bytes or element_bytes(shape)
    sizes = {"x": shape.N * shape.C * shape.H * shape.W * eb, "w": shape.F * shape.C * shape.R * shape.S * eb}
    if with_bias:
        sizes["b"] = shape.F * eb
    return place_tensors(sizes)


def place_tensors(sizes: Mapping[str, int]) -> dict[str, int]:
    """Base byte address of each tensor of ``sizes`` (name -> bytes), in the given order:
    the first at 0, each next one at the first multiple of :data:`TENSOR_ALIGN` past the
    end of the one before."""
    bases, end = {}, 0
    for name, nbytes in sizes.items():
        bases[name] = _align(end)
        end = bases[name] + int(nbytes)
    return bases


def _align(nbytes: int) -> int:
    return -(-nbytes // TENSOR_ALIGN) * TENSOR_ALIGN


#: ``runs(rows)`` -> ``(start, length)``, both int64 of shape ``(len(rows), num_steps,
#: runs_per_step)``: the first byte address of each run and its length in bytes
#: (0 for a run the load's mask switches off).
RunsFn = Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]


@dataclass(frozen=True)
class OperandLoads:
    """How one operand is read: a table of rows; a tile reads row ``row_of_tile[tile]``."""

    name: str                 # "x", "w" or "b"
    num_rows: int
    row_of_tile: np.ndarray   # (num_tiles,) int64
    runs_per_step: int
    runs: RunsFn
    #: Loaded in bulk by a tensor descriptor (NVIDIA TMA), not by the threads' own loads: the
    #: L2 merges such requests more (measured on an H100: docs/simulator.md), and the simulator can
    #: give them their own merge window.
    bulk: bool = False
    #: Written, not read (an output tile the address model lists among its steps' accesses, as
    #: the published MI300X problems do): with a store request size its lookups are counted per
    #: request (:func:`_operand_lines`' ``piece_bytes``).
    store: bool = False


@dataclass(frozen=True)
class LoadPlan:
    """A kernel launch's loads: every tile runs ``num_steps`` steps and reads each operand."""

    num_steps: int
    elem_bytes: int
    operands: tuple[OperandLoads, ...]

    @property
    def num_tiles(self) -> int:
        return len(self.operands[0].row_of_tile)

    def tile_addresses(self, tile: int) -> list[np.ndarray]:
        """Byte addresses (sorted, distinct, int64) of the elements tile ``tile`` loads, per step."""
        per_operand = []
        for op in self.operands:
            start, length = op.runs(np.array([op.row_of_tile[tile]], dtype=np.int64))
            per_operand.append(_run_elements(start[0], length[0], self.elem_bytes))
        return [np.unique(np.concatenate([steps[k] for steps in per_operand]))
                for k in range(self.num_steps)]

    def access_model(self, line_bytes: int, request_bytes: int = 0, store_request_bytes: int = 0) -> "AccessModel":
        """The distinct ``line_bytes`` cache lines of every (operand row, step), packed; with
        ``request_bytes`` (> ``line_bytes``), which of them open a run's second request
        (:attr:`AccessModel.split_heads`); with ``store_request_bytes`` (< ``line_bytes``), a
        ``store`` operand's line once per distinct request-sized piece of it the step writes."""
        counts, lines, heads, first_row = [], [], [], []
        next_row = 0
        for op in self.operands:
            first_row.append(next_row)
            next_row += op.num_rows
            c, l, h = _operand_lines(op, self.num_steps, line_bytes, request_bytes=request_bytes,
                                     piece_bytes=store_request_bytes if op.store else 0)
            counts.append(c)
            lines.append(l)
            heads.append(h)
        offsets = np.zeros(next_row * self.num_steps + 1, dtype=np.int64)
        np.cumsum(np.concatenate(counts), out=offsets[1:])
        tile_rows = np.stack([op.row_of_tile + base for op, base in zip(self.operands, first_row)], axis=1)
        return AccessModel(num_steps=self.num_steps, line_bytes=line_bytes,
                           operand_names=tuple(op.name for op in self.operands),
                           operand_bulk=tuple(op.bulk for op in self.operands),
                           tile_rows=np.ascontiguousarray(tile_rows, dtype=np.int64),
                           offsets=offsets, lines=np.concatenate(lines).astype(np.int64, copy=False),
                           split_heads=np.concatenate(heads) if request_bytes > line_bytes else None)


@dataclass(frozen=True)
class AccessModel:
    """The cache lines every tile reads at every step, in compressed-row form.

    Operand tables are stacked into one list of *global rows*; ``tile_rows[t, o]`` is
    the global row tile ``t`` reads operand ``o`` from.  The lines of global row ``g``
    at step ``k`` are ``lines[offsets[g * num_steps + k] : offsets[g * num_steps + k + 1]]``
    (line ids = simulated byte address // ``line_bytes``, sorted, distinct).  A step's
    accesses are the concatenation over operands, input first.
    """

    num_steps: int
    line_bytes: int
    operand_names: tuple[str, ...]
    tile_rows: np.ndarray   # (num_tiles, num_operands) int64
    offsets: np.ndarray     # (num_global_rows * num_steps + 1,) int64
    lines: np.ndarray       # (total row-step lines,) int64
    operand_bulk: tuple[bool, ...] = ()   # per operand: loaded by a tensor descriptor (TMA); () none
    #: Parallel to ``lines`` (None: not modelled): the line is the first past a 128 B boundary
    #: that one of the step's runs crosses, so the L1 sends it in a second request.  ncu's L2
    #: read-lookup counters count one more hit for such a request when it misses (measured on an H100:
    #: docs/simulator.md).
    split_heads: np.ndarray | None = None

    @property
    def num_tiles(self) -> int:
        return self.tile_rows.shape[0]

    def step_lines(self, tile: int, step: int) -> np.ndarray:
        """Line ids tile ``tile`` reads at step ``step`` (one access each)."""
        parts = []
        for g in self.tile_rows[tile]:
            seg = int(g) * self.num_steps + step
            parts.append(self.lines[self.offsets[seg]:self.offsets[seg + 1]])
        return np.concatenate(parts)

    def tile_lines(self, tile: int) -> list[np.ndarray]:
        """``step_lines`` for every step of tile ``tile``."""
        return [self.step_lines(tile, k) for k in range(self.num_steps)]

    def row_accesses(self) -> np.ndarray:
        """Line accesses of each global row over all its steps, (num_global_rows,) int64."""
        ends = self.offsets[self.num_steps::self.num_steps]
        starts = self.offsets[:-1:self.num_steps]
        return ends - starts

    @property
    def num_accesses(self) -> int:
        """Line accesses of the whole launch (every tile, every step, every operand)."""
        return int(self.row_accesses()[self.tile_rows].sum())


def _operand_lines(op: OperandLoads, num_steps: int, line_bytes: int, per_run: bool = False,
                   request_bytes: int = 0, piece_bytes: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """Distinct lines of every (row, step) of one operand table: counts ``(num_rows *
    num_steps,)``, the lines, row-major, and with ``request_bytes`` each line's split-head
    flag (:func:`_split_heads`; else None).  ``per_run``: see :func:`_distinct_lines`.
    ``piece_bytes`` (a divisor of ``line_bytes`` below it; 0: off): a line is listed once per
    distinct ``piece_bytes``-byte piece of it the (row, step) touches, each piece one L2
    request (the MI300X's store requests: docs/simulator.md).  Rows are processed in chunks
    that keep the scratch arrays bounded (a run spans one or two lines in the common cases:
    hence the 2; a line is several pieces)."""
    pieces_per_line = line_bytes // piece_bytes if 0 < piece_bytes < line_bytes else 1
    width = 2 * op.runs_per_step * num_steps * pieces_per_line
    chunk = max(1, _CHUNK_ELEMENTS // max(1, width))
    counts, lines = [np.zeros(0, dtype=np.int64)], [np.zeros(0, dtype=np.int64)]
    heads = [np.zeros(0, dtype=np.bool_)]
    for lo in range(0, op.num_rows, chunk):
        rows = np.arange(lo, min(op.num_rows, lo + chunk), dtype=np.int64)
        start, length, c, l = _rows_lines(op, rows, line_bytes, per_run, piece_bytes)
        counts.append(c)
        lines.append(l)
        if request_bytes > line_bytes:
            heads.append(_split_heads(start, length, line_bytes, request_bytes, c, l))
    split = np.concatenate(heads) if request_bytes > line_bytes else None
    return np.concatenate(counts), np.concatenate(lines), split


def _rows_lines(op: OperandLoads, rows: np.ndarray, line_bytes: int, per_run: bool,
                piece_bytes: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The runs of ``rows`` of ``op`` (start, length) and their distinct lines per (row,
    step): counts and lines (:func:`_operand_lines`' ``per_run`` and ``piece_bytes``)."""
    start, length = op.runs(rows)
    if 0 < piece_bytes < line_bytes:
        c, pieces = _distinct_lines(start, length, piece_bytes, per_run)
        l = pieces // (line_bytes // piece_bytes)           # sorted pieces: a line's stay together
    else:
        c, l = _distinct_lines(start, length, line_bytes, per_run)
    return start, length, c, l


#: Rows of an operand table that :func:`sampled_lines` reads (evenly spaced, first and last included).
SAMPLE_ROWS = 64


@dataclass(frozen=True)
class LineSample:
    """Line accesses of a launch estimated from a sample of its operand rows (no trace built)."""

    accesses: int   # line accesses of the K loop (one per row and step) and of the epilogues (one per key)
    max_line: int   # the largest line id the sample met: the end of the simulated address space, lines


def sampled_lines(op: OperandLoads, num_steps: int, line_bytes: int, per_key: bool = False,
                  per_run: bool = False, piece_bytes: int = 0) -> LineSample:
    """Estimated line accesses of ``op`` without building its lines: the mean over
    :data:`SAMPLE_ROWS` evenly spaced rows (fewer where one row is long), times the rows
    (a K loop's table, whose lines are stored once per row) or, ``per_key``, times the keys of
    ``row_of_tile`` (an epilogue's, stored once per key)."""
    index = op.row_of_tile if per_key else None
    total = len(index) if index is not None else op.num_rows
    if total == 0:
        return LineSample(0, 0)
    width = 2 * op.runs_per_step * num_steps * max(1, line_bytes // piece_bytes if piece_bytes else 1)
    count = max(2, min(SAMPLE_ROWS, _CHUNK_ELEMENTS // max(1, width)))
    picks = np.unique(np.linspace(0, total - 1, min(total, count)).astype(np.int64))
    rows = np.asarray(index, dtype=np.int64)[picks] if index is not None else picks
    _, _, c, l = _rows_lines(op, rows, line_bytes, per_run, piece_bytes)
    mean = float(c.sum()) / len(rows)
    return LineSample(int(math.ceil(mean * total)), int(l.max()) if len(l) else 0)


def _run_elements(start: np.ndarray, length: np.ndarray, elem_bytes: int) -> list[np.ndarray]:
    """Expand the runs of one row, ``(num_steps, runs)``, into element addresses per step."""
    out = []
    for k in range(start.shape[0]):
        on = length[k] > 0
        s, n = start[k][on], length[k][on] // elem_bytes
        if len(s) == 0:
            out.append(np.zeros(0, dtype=np.int64))
            continue
        # Element j of a run is at start + j * elem_bytes.
        j = np.arange(int(n.max()), dtype=np.int64)
        addr = s[:, None] + j[None, :] * elem_bytes
        out.append(addr[j[None, :] < n[:, None]])
    return out


def _distinct_lines(start: np.ndarray, length: np.ndarray, line_bytes: int,
                    per_run: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Distinct lines per (row, step) of a block of runs.

    ``start``/``length`` are ``(rows, steps, runs)``.  Returns ``counts``
    (``rows * steps``,) and the lines of every (row, step) in order, each group sorted.
    ``per_run``: distinct within each run only, a line two runs touch is listed twice (a
    store of each output row is its own request).
    """
    groups = start.shape[0] * start.shape[1]
    start = start.reshape(groups, -1)
    length = length.reshape(groups, -1)
    on = length > 0
    first = start // line_bytes
    span = np.where(on, (start + length - 1) // line_bytes - first + 1, 0)
    max_span = int(span.max()) if span.size else 0
    # A run touches ``span`` consecutive lines: its k-th line goes to column block k.
    cand = np.concatenate([np.where(span > k, first + k, _SENTINEL) for k in range(max(1, max_span))], axis=1)
    # Sorting each group puts duplicates side by side and the switched-off runs last.
    cand.sort(axis=1)
    keep = cand != _SENTINEL
    if not per_run:
        keep[:, 1:] &= cand[:, 1:] != cand[:, :-1]
    return keep.sum(axis=1), cand[keep]


def _split_heads(start: np.ndarray, length: np.ndarray, line_bytes: int, request_bytes: int,
                 counts: np.ndarray, lines: np.ndarray) -> np.ndarray:
    """For each line of ``_distinct_lines(start, length, line_bytes)`` (``counts``, ``lines``),
    whether it opens the second request of a run that crosses a ``request_bytes`` boundary:
    the first line past the boundary.  (An L1 sends one request per 128 B line a warp's
    access touches; see :attr:`AccessModel.split_heads`.)"""
    groups = start.shape[0] * start.shape[1]
    start = start.reshape(groups, -1)
    length = length.reshape(groups, -1)
    crosses = (length > 0) & (start // request_bytes != (start + length - 1) // request_bytes)
    head = ((start // request_bytes + 1) * request_bytes) // line_bytes
    group = np.broadcast_to(np.arange(groups, dtype=np.int64)[:, None], start.shape)
    heads = group[crosses] * _KEY_SPAN + head[crosses]
    keys = np.repeat(np.arange(groups, dtype=np.int64), counts) * _KEY_SPAN + lines
    return np.isin(keys, heads)


#: Line ids stay below this in a key ``group * _KEY_SPAN + line`` (2^36 lines of 32 B: 2 TB).
_KEY_SPAN = np.int64(1) << 36


def step_grid(*extents: int) -> list[np.ndarray]:
    """The loop counters of every step, outermost first, as int64 arrays of length
    ``prod(extents)`` (step k is the k-th iteration of the nested loops)."""
    total = math.prod(extents)
    out, inner = [], total
    for e in extents:
        inner //= e
        out.append((np.arange(total, dtype=np.int64) // inner) % e)
    return out


# -----------------------------------------------------------
# Beyond the K loop: which programs run which work items, and what a work item
# stores (and, with split-K, reads back) once its K steps are done.

def launched_programs(num_work: int, persistent: bool, slots: int) -> int:
    """Programs a launch starts: one per work item, or (persistent) ``min(num_work, slots)``,
    where ``slots`` is what the kernel sizes a persistent grid by (igemm_fast: the device's
    SM / CU count, ``multi_processor_count``)."""
    return min(num_work, slots) if persistent else num_work


@dataclass(frozen=True)
class Schedule:
    """Which work items exist and which program walks which.

    Work item ``w`` is split ``w // num_tiles`` of launch-order tile ``w % num_tiles``; the
    swizzle maps the launch-order tile to the tile computed.  Split ``s`` runs the K steps
    ``s * steps_per_split`` up to the next split's first step, the last split up to
    ``num_steps``; possibly none.  ``split_len`` sets ``steps_per_split`` (0: ``ceil(num_steps
    / splits)``; less makes the last split the longest).  A launch of ``P`` programs hands
    program ``p`` the items ``p, p + P, p + 2P, ...`` in that order (the kernel's ``for work in
    range(pid, num_work, num_programs)``); a program that is not persistent gets exactly one.
    """

    num_tiles: int
    num_steps: int
    splits: int = 1
    persistent: bool = False
    split_len: int = 0

    @property
    def num_work(self) -> int:
        return self.num_tiles * self.splits

    @property
    def steps_per_split(self) -> int:
        return self.split_len or -(-self.num_steps // self.splits)

    def split_steps(self, split: int) -> range:
        """The K steps split ``split`` runs."""
        first = min(split * self.steps_per_split, self.num_steps)
        return range(first, self.num_steps if split == self.splits - 1 else
                     min(first + self.steps_per_split, self.num_steps))

    def num_programs(self, slots: int) -> int:
        """Programs launched on a device with ``slots`` SMs / CUs (see :func:`launched_programs`)."""
        return launched_programs(self.num_work, self.persistent, slots)

    def walk(self, program: int, num_programs: int) -> list[int]:
        """Work items of ``program``, in the order it computes them."""
        return list(range(program, self.num_work, num_programs))


@dataclass(frozen=True)
class Epilogue:
    """What a work item accesses after its last K step, keyed by an integer (the conv's
    epilogue: ``tile * splits + split``; the last-arrival part: ``tile``).  ``parts`` are
    in program order, each a table of byte runs (an :class:`OperandLoads` whose rows are
    looked up by key through ``row_of_tile``, one step) and whether the part writes."""

    parts: tuple[tuple[OperandLoads, bool], ...]

    @property
    def num_keys(self) -> int:
        return len(self.parts[0][0].row_of_tile)

    def addresses(self, key: int, elem_bytes: int) -> list[tuple[bool, np.ndarray]]:
        """``(writes, sorted distinct element byte addresses)`` of each part for ``key``
        (``elem_bytes``: the element size the runs are counted in, for expanding them)."""
        out = []
        for op, write in self.parts:
            start, length = op.runs(np.array([op.row_of_tile[key]], dtype=np.int64))
            out.append((write, np.unique(_run_elements(start[0], length[0], elem_bytes)[0])))
        return out

    def access_list(self, line_bytes: int, row_stores: bool = False, store_request_bytes: int = 0) -> "AccessList":
        """The distinct lines of every key's parts, in part order (each part's sorted).
        ``row_stores``: a writing part's lines are distinct per run (an output row) only,
        each row's store its own request (:func:`_distinct_lines`).  ``store_request_bytes``
        (< ``line_bytes``; 0: off): a writing part's line is listed once per distinct piece of
        that size it writes (:func:`_operand_lines`' ``piece_bytes``)."""
        keys, lines, writes = [], [], []
        for op, write in self.parts:
            counts, part_lines, _ = _operand_lines(op, 1, line_bytes, per_run=row_stores and write,
                                                   piece_bytes=store_request_bytes if write else 0)
            row_offsets = np.zeros(op.num_rows + 1, dtype=np.int64)
            np.cumsum(counts, out=row_offsets[1:])
            rows = np.asarray(op.row_of_tile, dtype=np.int64)
            per_key = row_offsets[rows + 1] - row_offsets[rows]
            # Gather the rows' lines key after key: index of the j-th line of key k.
            total = int(per_key.sum())
            first = np.repeat(row_offsets[rows] - (np.cumsum(per_key) - per_key), per_key)
            lines.append(part_lines[first + np.arange(total, dtype=np.int64)])
            keys.append(np.repeat(np.arange(len(rows), dtype=np.int64), per_key))
            writes.append(np.full(total, write, dtype=np.bool_))
        key = np.concatenate(keys)
        order = np.argsort(key, kind="stable")            # by key; parts keep their order
        offsets = np.zeros(self.num_keys + 1, dtype=np.int64)
        np.cumsum(np.bincount(key, minlength=self.num_keys), out=offsets[1:])
        return AccessList(offsets, np.concatenate(lines)[order], np.concatenate(writes)[order])


@dataclass(frozen=True)
class AccessList:
    """Line accesses per key in compressed-row form: key ``k`` accesses
    ``lines[offsets[k]:offsets[k + 1]]`` in order, each a write where ``writes`` says so."""

    offsets: np.ndarray   # (num_keys + 1,) int64
    lines: np.ndarray     # int64 line ids
    writes: np.ndarray    # bool, parallel to lines

    @classmethod
    def empty(cls, num_keys: int) -> "AccessList":
        return cls(np.zeros(num_keys + 1, dtype=np.int64), np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.bool_))

    @property
    def num_keys(self) -> int:
        return len(self.offsets) - 1

    def of(self, key: int) -> tuple[np.ndarray, np.ndarray]:
        """Lines and write flags of ``key``."""
        lo, hi = self.offsets[key], self.offsets[key + 1]
        return self.lines[lo:hi], self.writes[lo:hi]


@dataclass(frozen=True)
class LaunchPlan:
    """One kernel launch of a job's timed run, in bytes.

    ``loads`` are the K loop's loads per tile and step; ``epilogue`` (keyed by ``tile *
    splits + split``) what every work item accesses after its last step; ``last`` (keyed by
    tile) what the split of a tile that arrives last accesses after that (None: nothing).
    ``swizzled``: the launch-order tile goes through the job's remap table (the conv) or
    not (a helper pass: identity).  ``profiled``: the launch a hardware profiler measures
    (the harness filters ncu / rocprofv3 to the conv kernel's name).
    """

    name: str
    schedule: Schedule
    loads: LoadPlan
    epilogue: Epilogue | None = None
    last: Epilogue | None = None
    swizzled: bool = True
    profiled: bool = True

    def sampled_lines(self, line_bytes: int, request_bytes: int = 0, store_request_bytes: int = 0) -> LineSample:
        """What :meth:`access_model` would hold, estimated from a sample of rows
        (:func:`sampled_lines`) without building it: its line accesses and largest line id."""
        rows = request_bytes > 0
        parts = [sampled_lines(op, self.loads.num_steps, line_bytes, piece_bytes=store_request_bytes if op.store else 0)
                 for op in self.loads.operands]
        for epilogue in (self.epilogue, self.last):
            parts += [sampled_lines(op, 1, line_bytes, per_key=True, per_run=rows and write,
                                    piece_bytes=store_request_bytes if write else 0)
                      for op, write in (epilogue.parts if epilogue is not None else ())]
        return LineSample(sum(p.accesses for p in parts), max(p.max_line for p in parts))

    def access_model(self, line_bytes: int, request_bytes: int = 0, store_request_bytes: int = 0) -> "LaunchModel":
        """The plan in ``line_bytes`` lines.  ``request_bytes`` (NVIDIA: 128): the L1's request
        size, which marks the loads' split heads (:attr:`AccessModel.split_heads`) and makes
        every output row's store its own request (:meth:`Epilogue.access_list`).
        ``store_request_bytes`` (MI300X: 32): the size of a store's L2 requests, each a lookup
        (:meth:`Epilogue.access_list`)."""
        s = self.schedule
        rows = request_bytes > 0
        return LaunchModel(
            name=self.name, schedule=s, loads=self.loads.access_model(line_bytes, request_bytes, store_request_bytes),
            epilogue=(self.epilogue.access_list(line_bytes, rows, store_request_bytes) if self.epilogue is not None
                      else AccessList.empty(s.num_work)),
            last=(self.last.access_list(line_bytes, rows, store_request_bytes) if self.last is not None
                  else AccessList.empty(s.num_tiles)),
            swizzled=self.swizzled, profiled=self.profiled)


@dataclass(frozen=True)
class LaunchModel:
    """A :class:`LaunchPlan` in cache lines: what the simulator replays."""

    name: str
    schedule: Schedule
    loads: AccessModel
    epilogue: AccessList
    last: AccessList
    swizzled: bool = True
    profiled: bool = True

    @classmethod
    def loads_only(cls, model: AccessModel, name: str = "conv") -> "LaunchModel":
        """One program per tile, every step, no epilogue: the loads of ``model`` and nothing else."""
        schedule = Schedule(model.num_tiles, model.num_steps)
        return cls(name, schedule, model, AccessList.empty(schedule.num_work), AccessList.empty(model.num_tiles))

    @property
    def max_line(self) -> int:
        return max([0] + [int(a.max()) for a in (self.loads.lines, self.epilogue.lines, self.last.lines) if len(a)])
