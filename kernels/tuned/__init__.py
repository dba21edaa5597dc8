"""Committed tuning tables: the launch config a kernel runs on each layer of a target when no
tuning happens at run time (``tune=table``, the main command's default).

One JSON file per (kernel, target) beside this module, ``<kernel>_<target>.json``:
``{"device": ..., "how": ..., "entries": {shape key: {"shape": {...}, "config": {...}}}}``.
Each table's ``how`` says how it was made, in one line of at most :data:`HOW_MAX_CHARS`
characters: the H100's and the H200's by timing on that GPU (an H200 entry the H200 did not
tune keeps the H100's, marked ``"tuned_on": "H100"``), the MI300X's by compiling for gfx942
only (no MI300X was timed).  Its head, the text before the first ``:``, is what a job's
``tune`` tag quotes.  The commands that made each table are in docs/benchmarks.md, "Kernel
speed".

A layer outside the table gets the config of its *nearest* entry (:meth:`TunedTable.lookup`):
among the entries with the same filter size, stride and padding, the one closest in
log C, log F and log(output pixels), whose config the caller accepts for this layer (its
flags must make sense there: a 1x1-only or fold-only config is never carried to another
kind of layer); where no entry has the layer's kind (a 1x7 filter, say), the nearest kind's
nearest entry whose config the caller accepts, and the choice says so; none: the kernel's
configured default.  An entry may also hold a ``fallback``
config, which the layer runs where its own config is refused (igemm_best's igemm_ws entries
fall back to igemm_fast's config, e.g. under a Triton whose Gluon API igemm_ws was not written
for).
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from kernels.problem import ConvShape
from kernels.tuning import Config

HERE = Path(__file__).resolve().parent
#: The longest ``how`` a table may carry (characters, one line): a summary, not a log.
HOW_MAX_CHARS = 200
_DIMS = ("N", "C", "H", "W", "F", "R", "S", "stride", "padding")


def shape_key(shape: ConvShape) -> str:
    """A layer's key in a table: its dimensions and dtype, e.g. ``32x64x56x56-64x3x3-s1p1-float16``."""
    return (f"{shape.N}x{shape.C}x{shape.H}x{shape.W}-{shape.F}x{shape.R}x{shape.S}-"
            f"s{shape.stride}p{shape.padding}-{shape.dtype}")


@dataclass(frozen=True)
class TableChoice:
    """The config a table gives a layer: from its own entry (``exact``) or the nearest one's
    (``source``: that entry's layer name and key); ``refused``: the own entry's config, where
    the caller refused it and its fallback config is given instead."""

    config: Config
    exact: bool
    source: str
    refused: Config | None = None
    #: The GPU the entry was tuned on where it is not the table's own (an H200 table keeps the
    #: H100's entry for a layer no H200 run tuned); None: the table's own device.
    tuned_on: str | None = None


@dataclass
class TunedTable:
    """One target's table: ``entries`` maps :func:`shape_key` to ``{"shape": dims, "config": ...}``."""

    device: str
    entries: dict[str, dict]
    how: str = ""

    @classmethod
    def load(cls, path: Path) -> "TunedTable":
        data = json.loads(Path(path).read_text())
        return cls(data["device"], data["entries"], data.get("how", ""))

    def save(self, path: Path) -> None:
        """Write the table to ``path``; refuses a ``how`` that is not one line of at most
        :data:`HOW_MAX_CHARS` characters."""
        if "\n" in self.how or len(self.how) > HOW_MAX_CHARS:
            raise ValueError(f"{Path(path).name}: its how must be one line of at most {HOW_MAX_CHARS} characters "
                             f"(got {len(self.how)} characters, {self.how.count(chr(10)) + 1} lines); put the "
                             "commands in docs/benchmarks.md")
        Path(path).write_text(json.dumps({"device": self.device, "how": self.how,
                                          "entries": dict(sorted(self.entries.items()))}, indent=1) + "\n")

    def configs(self) -> list[Config]:
        """The distinct configs of the table, in key order."""
        return list(dict.fromkeys(Config.from_dict(e["config"]) for _, e in sorted(self.entries.items())))

    @staticmethod
    def entry(shape: ConvShape, config: Config) -> dict:
        return {"shape": {"name": shape.name, "dtype": shape.dtype, **{d: getattr(shape, d) for d in _DIMS}},
                "config": config.as_dict()}

    def lookup(self, shape: ConvShape, accept: Callable[[Config], bool] = lambda cfg: True) -> TableChoice | None:
        """``shape``'s own entry (its ``fallback`` config where the caller refuses its config and
        accepts that one), else the nearest accepted entry of its kind (module doc), else of the
        nearest kind (:func:`_kind_distance`; its ``source`` says so), else None."""
        own = self.entries.get(shape_key(shape))
        if own is not None:
            source = f"{own['shape']['name']} ({shape_key(shape)})"
            config = Config.from_dict(own["config"])
            fallback = Config.from_dict(own["fallback"]) if "fallback" in own else None
            if fallback is not None and not accept(config) and accept(fallback):
                return TableChoice(fallback, True, f"{source}, its fallback config", config, own.get("tuned_on"))
            return TableChoice(config, True, source, tuned_on=own.get("tuned_on"))
        near = []
        for key, e in self.entries.items():
            s = e["shape"]
            cfg = Config.from_dict(e["config"])
            if s["dtype"] == shape.dtype and accept(cfg):
                near.append((_kind_distance(shape, s), _distance(shape, s), key, s["name"], cfg, e.get("tuned_on")))
        if not near:
            return None
        kind_gap, _, key, name, cfg, tuned_on = min(near)
        other_kind = ", the nearest kind's (no entry of this kind)" if kind_gap else ""
        return TableChoice(cfg, False, f"{name} ({key}){other_kind}", tuned_on=tuned_on)


def _kind_distance(shape: ConvShape, dims: dict) -> float:
    """How far a layer's kind (filter R x S, stride, padded or not) lies from an entry's: 0 for
    the same kind; else log filter-size ratios plus one per differing stride or padding, so a
    1x7 layer takes a 1x1 or 3x3 entry before a 7x7 stride-2 one."""
    return (abs(math.log(shape.R / dims["R"])) + abs(math.log(shape.S / dims["S"]))
            + (shape.stride != dims["stride"]) + ((shape.padding > 0) != (dims["padding"] > 0)))


def _distance(shape: ConvShape, dims: dict) -> float:
    """Distance in log channels, log filters and log output pixels (N * P * Q)."""
    other = ConvShape("other", **{d: dims[d] for d in _DIMS}, dtype=dims["dtype"])
    pixels = (shape.N * shape.P * shape.Q, other.N * other.P * other.Q)
    return (abs(math.log(shape.C / other.C)) + abs(math.log(shape.F / other.F))
            + abs(math.log(pixels[0] / pixels[1])))


def table_path(kernel: str, target: str) -> Path:
    """Where the committed table of ``kernel`` on ``target`` lives (it may not exist)."""
    return HERE / f"{kernel}_{target}.json"


def load_table(kernel: str, target: str) -> TunedTable | None:
    """The committed table of ``kernel`` on ``target``, or None where there is none."""
    path = table_path(kernel, target)
    return TunedTable.load(path) if path.exists() else None
