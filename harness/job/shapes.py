"""Shape presets (the ``shape`` config group) and the CPU down-scaling rule."""
from __future__ import annotations

import dataclasses
from typing import Any, Mapping, Sequence

from harness.errors import UserError, valid_names
from kernels.problem import ConvShape

_SIZE_KEYS = ("N", "C", "H", "W", "F", "R", "S", "stride", "padding")

#: Largest sizes the CPU-only path runs under the Triton interpreter (see ``downscale``).
INTERPRETER_LIMITS = {"N": 2, "C": 20, "F": 20, "P": 6, "Q": 6}


@dataclasses.dataclass(frozen=True)
class ShapeEntry:
    """One entry of a preset: a valid shape, or the reason it is not one."""

    preset: str
    name: str
    raw: dict
    shape: ConvShape | None
    error: str | None

    @property
    def label(self) -> str:
        return f"{self.preset}-{self.name}" if self.preset != self.name else self.name


def expand_preset(preset: Mapping[str, Any]) -> list[ShapeEntry]:
    """Turn a ``shape`` config node into one entry per shape, honouring ``select``.

    An invalid entry does not stop the others: it comes back with its error so the
    job can record it as a FAILED run.  A ``select`` naming no shape of the preset is a
    UserError.
    """
    preset_name = str(preset.get("name", "shape"))
    dtype = str(preset.get("dtype", "float16"))
    raw_shapes = preset.get("shapes") or []
    if isinstance(raw_shapes, str) or not isinstance(raw_shapes, Sequence) or not all(isinstance(e, Mapping) for e in raw_shapes):
        raise UserError(f"shape.shapes of preset {preset_name!r} must be a list of shapes "
                        f"({{name, N, C, H, W, F, R, S, ...}}), not {raw_shapes!r}")
    entries = [dict(e) for e in raw_shapes]
    names = [str(e.get("name", f"s{i}")) for i, e in enumerate(entries)]
    names_all = list(names)
    select = preset.get("select")
    if select is not None:
        wanted = [str(s) for s in select]
        unknown = [s for s in wanted if s not in names]
        if unknown:
            raise UserError(f"shape.select names {unknown} not in preset {preset_name!r}; "
                            f"{valid_names(unknown, names)}")
        entries = [e for e, n in zip(entries, names) if n in wanted]
        names = [n for n in names if n in wanted]
    if not entries:
        chosen = "shape.select=[] selects" if select is not None and names_all else "it has"
        raise UserError(f"preset {preset_name!r} has no shape to run: {chosen} no shapes; "
                        f"valid: {', '.join(names_all) or 'a preset with shapes (shape.shapes=[...])'}")
    out = []
    for raw, name in zip(entries, names):
        try:
            missing = [k for k in _SIZE_KEYS[:7] if k not in raw]
            if missing:
                raise ValueError(f"shape {name!r}: missing {missing}; every shape needs N, C, H, W, F, R, S")
            shape = ConvShape(name=name, dtype=str(raw.get("dtype", dtype)),
                              **{k: raw.get(k, 1 if k == "stride" else 0) for k in _SIZE_KEYS})
            out.append(ShapeEntry(preset_name, name, raw, shape, None))
        except (TypeError, ValueError) as exc:
            out.append(ShapeEntry(preset_name, name, raw, None, str(exc)))
    return out


def downscale(shape: ConvShape) -> ConvShape:
    """The down-scaled instance the CPU-only path verifies under the Triton interpreter.

    Rule: R, S, stride, padding and dtype are kept (they decide the indexing being
    verified); N, C and F are capped at 2, 20 and 20; the output is capped at 6 x 6 and
    H, W shrink to the smallest input giving that output,
    ``H' = (P' - 1) * stride + R - 2 * padding`` (at least 1).  Shapes already inside
    the caps are unchanged.  The permutation gate still uses the full-size grid.
    """
    lim = INTERPRETER_LIMITS
    P = min(shape.P, lim["P"])
    Q = min(shape.Q, lim["Q"])
    H = shape.H if P == shape.P else max(1, (P - 1) * shape.stride + shape.R - 2 * shape.padding)
    W = shape.W if Q == shape.Q else max(1, (Q - 1) * shape.stride + shape.S - 2 * shape.padding)
    return dataclasses.replace(shape, N=min(shape.N, lim["N"]), C=min(shape.C, lim["C"]),
                               F=min(shape.F, lim["F"]), H=H, W=W)


def check_interpreter_fit(entries: list[ShapeEntry]) -> None:
    """Refuse, before anything is allocated, a shape whose down-scaled instance (``downscale``)
    still exceeds the interpreter's output caps: padding is kept, so a large padding keeps a
    large output.  Arithmetic only; raises UserError naming the shape and the largest padding
    that fits."""
    lim = INTERPRETER_LIMITS
    for entry in entries:
        if entry.shape is None:
            continue
        small = downscale(entry.shape)
        if small.P > lim["P"] or small.Q > lim["Q"]:
            s = entry.shape
            fit = min(((lim["P"] - 1) * s.stride + s.R - 1) // 2, ((lim["Q"] - 1) * s.stride + s.S - 1) // 2)
            raise UserError(f"shape {entry.name!r}: padding={s.padding} cannot be checked on the CPU: its "
                            f"down-scaled instance keeps the padding and has a {small.P} x {small.Q} output "
                            f"(the interpreter's limit is {lim['P']} x {lim['Q']}); use padding <= {fit} "
                            "or a GPU")


def refuse_unrunnable(preset: Mapping[str, Any], on_cpu: bool) -> None:
    """The preset's checks that need no device nor pipeline: no shape to run, a malformed
    list, a bad ``select``, and on the CPU a shape the interpreter's check cannot fit.
    Raises UserError (one line, exit 2)."""
    entries = expand_preset(preset)
    if on_cpu:
        check_interpreter_fit(entries)
