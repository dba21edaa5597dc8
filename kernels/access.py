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
:func:`tensor_bases`), so that lines of different tensors never coincide.  Only
*loads* are modelled; the output store is not part of the trace (the profilers'
hit rates are read hit rates too: ncu's ``lts__t_sector_op_read_*``).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

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
    x_bytes = shape.N * shape.C * shape.H * shape.W * eb
    w_bytes = shape.F * shape.C * shape.R * shape.S * eb
    bases = {"x": 0, "w": _align(x_bytes)}
    if with_bias:
        bases["b"] = _align(bases["w"] + w_bytes)
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

    def access_model(self, line_bytes: int) -> "AccessModel":
        """The distinct ``line_bytes`` cache lines of every (operand row, step), packed."""
        counts, lines, first_row = [], [], []
        next_row = 0
        for op in self.operands:
            first_row.append(next_row)
            next_row += op.num_rows
            # Rows are processed in chunks that keep the scratch arrays bounded.
            # (A run spans one or two lines in the common cases: hence the factor 2.)
            width = 2 * op.runs_per_step * self.num_steps
            chunk = max(1, _CHUNK_ELEMENTS // max(1, width))
            for lo in range(0, op.num_rows, chunk):
                rows = np.arange(lo, min(op.num_rows, lo + chunk), dtype=np.int64)
                start, length = op.runs(rows)
                c, l = _distinct_lines(start, length, line_bytes)
                counts.append(c)
                lines.append(l)
        offsets = np.zeros(next_row * self.num_steps + 1, dtype=np.int64)
        np.cumsum(np.concatenate(counts), out=offsets[1:])
        tile_rows = np.stack([op.row_of_tile + base for op, base in zip(self.operands, first_row)], axis=1)
        return AccessModel(num_steps=self.num_steps, line_bytes=line_bytes,
                           operand_names=tuple(op.name for op in self.operands),
                           tile_rows=np.ascontiguousarray(tile_rows, dtype=np.int64),
                           offsets=offsets, lines=np.concatenate(lines).astype(np.int64, copy=False))


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


def _distinct_lines(start: np.ndarray, length: np.ndarray, line_bytes: int) -> tuple[np.ndarray, np.ndarray]:
    """Distinct lines per (row, step) of a block of runs.

    ``start``/``length`` are ``(rows, steps, runs)``.  Returns ``counts``
    (``rows * steps``,) and the lines of every (row, step) in order, each group sorted.
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
    keep[:, 1:] &= cand[:, 1:] != cand[:, :-1]
    return keep.sum(axis=1), cand[keep]


def step_grid(*extents: int) -> list[np.ndarray]:
    """The loop counters of every step, outermost first, as int64 arrays of length
    ``prod(extents)`` (step k is the k-th iteration of the nested loops)."""
    total = math.prod(extents)
    out, inner = [], total
    for e in extents:
        inner //= e
        out.append((np.arange(total, dtype=np.int64) // inner) % e)
    return out
