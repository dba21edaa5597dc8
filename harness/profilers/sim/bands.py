"""The error bands of a simulated figure: which band a job's figures carry (its layer class,
whether its grid is order-blind) and how wide it is on a target (:func:`prediction_error`).

Bands and errors are in % points of hit rate; the records they come from are the target's
``sim_calibration`` (docs/simulator.md, "Validation").
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

from harness.job.verdict import NOT_VALIDATED
from harness.profilers.sim.target import calibration
from kernels.access import AccessModel, element_bytes


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
    #: The public record checked for a target without a calibration (the target's
    #: ``sim_published``: e.g. the MI300X table of docs/simulator.md), why it gives no band; "": none.
    published: str = ""

    @property
    def banded(self) -> bool:
        """Whether the hit rate carries a band (``hit_rate``); if not, ``validated`` says
        "not validated ...": a simulated figure always carries one of the two."""
        return self.hit_rate is not None


#: The classes of layer whose simulated figures carry error bands of their own (Mondrian
#: bands): the validation cells' errors differ by class, so one band for all would be too wide
#: for most layers and too narrow for the rest.
LAYER_CLASSES = ("regular", "one-wave", "misaligned")


def layer_class(shape, line_bytes: int, num_work: int, resident: int) -> str:
    """Which band a job's simulated figures carry: ``misaligned`` when a pixel's channels or a
    pixel's filters are not a whole number of the L2's lines (``C`` or ``F`` elements times the
    element size, against ``line_bytes``: NVIDIA's 32 B sector), so rows straddle lines, else ``one-wave``
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
    ``scatter_jitter``, so a simulated delta is about 0 (scatter's a little above it).  A 3x3
    conv's input blocks overlap (the halo), so its one-column grid is not blind."""
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
    mean absolute errors (``*_mae``); all None for a target never validated, or whose record
    has figures for other families only (the H200's: igemm_ws).  ``blind``: the
    job's grid is :func:`order_blind`, and its two delta bands are those of such grids
    (``class_bands["order-blind"]``) where the record has them."""
    cal = calibration(target)
    if not cal.get("hit_rate_mae"):
        return PredictionError(None, None, None, None, f"{NOT_VALIDATED} on {target.get('name', '?')} hardware",
                               published=str(target.get("sim_published") or ""))
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

    hit, delta, read_hit, read_delta = (pick(stem) for stem in ("hit_rate", "delta", "read_hit_rate", "read_delta"))
    if hit is None and delta is None:   # a record that validates other families only
        return PredictionError(None, None, None, None,
                               f"{NOT_VALIDATED} on {target.get('name', '?')} hardware for {kernel}",
                               published=str(target.get("sim_published") or ""))
    validated = f"validated on {cal.get('validated_on', '?')}"
    if kind == "band":
        whose = f" of {kernel}'s {layer} layers" if own else f" of {layer} layers" if by_class else ""
        validated += f"; ± covers {100 * float(coverage):.0f} %{whose}"
        if blind_bands is not None:
            validated += f" (Δ: of {ORDER_BLIND} grids)"
    return PredictionError(hit, delta, read_hit, read_delta, validated,
                           float(coverage) if kind == "band" else None)
