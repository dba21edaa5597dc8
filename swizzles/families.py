"""Parametric swizzle families: a swizzle per parameter set, named by a canonical label.

A family instance is written ``family[param=value,...]`` with every parameter present, in
the family's order, e.g. ``hilbert[num_xcds=8,chunk=4,order=3]``.  That label is the job's
``swizzle`` field, so the JobSpec hash covers every parameter, and it is all the harness
needs to rebuild the remap (:func:`swizzles.get_swizzle` accepts labels).

Every family is two stages, each a small ``@triton.jit`` function of its own module:

1. **XCD chunking** (:mod:`swizzles.xcd_chunked`), ``num_xcds`` and ``chunk``: which virtual
   pids each XCD runs (``num_xcds=1``: none, virtual pid = launch pid);
2. an **order** over the tile plane: ``grouped_m`` (:mod:`swizzles.grouped`), ``grouped_n``
   (:mod:`swizzles.grouped_n`), ``tiled`` (:mod:`swizzles.tiled`), ``hilbert`` and
   ``morton`` (:mod:`swizzles.curve`).

Both stages are permutations for every grid size, so every instance is.  Kernels call a
remap with the fixed signature ``remap(pid, num_pid_m, num_pid_n, NUM_XCDS, GROUP_SIZE)``;
a family needs more parameters, so each instance gets a *generated* remap with that
signature whose body calls the two stages with the instance's values as literal constexprs
(:func:`generate_source`; loaded by :mod:`swizzles.generated`).  The kernel and the
permutation gate are handed that same function object, and the job's
``kernel_source.py`` artifact shows it.  The generated remap ignores its ``NUM_XCDS`` and
``GROUP_SIZE`` arguments: the label is the single source of the parameters.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Mapping

if TYPE_CHECKING:
    from triton.runtime.interpreter import InterpretedFunction
    from triton.runtime.jit import JITFunction


@dataclass(frozen=True)
class Param:
    """An integer parameter: its valid range and the values a search tries by default."""

    name: str
    minimum: int
    maximum: int
    choices: tuple[int, ...]
    doc: str

    def check(self, family: str, value: object) -> int:
        """``value`` as an int, or a ValueError naming the family, parameter and valid range."""
        if isinstance(value, bool) or not isinstance(value, int) or not self.minimum <= value <= self.maximum:
            raise ValueError(f"swizzle family {family}: {self.name}={value!r} is invalid; valid: an integer "
                             f"from {self.minimum} to {self.maximum} ({self.doc})")
        return value


#: The XCD stage's parameters, shared by every family (first in every label).
XCD_PARAMS = (
    Param("num_xcds", 1, 64, (1, 8), "XCDs the pids are chunked over; 1 = no XCD stage"),
    Param("chunk", 0, 2**20, (0, 1, 2, 4, 8, 16, 32, 64),
          "consecutive virtual pids per XCD per window; 0 = one chunk of the whole grid per XCD"),
)

_POWERS = (1, 2, 4, 8, 16, 32, 64)


@dataclass(frozen=True)
class Family:
    """An order over the tile plane; its remap is ``call`` with the order's parameters
    formatted in as literals, applied to the virtual pid ``virtual``."""

    name: str
    doc: str
    module: str                   # module of the order's jit function
    function: str                 # its name there
    call: str                     # format string of the call, over the parameter names
    params: tuple[Param, ...]     # the order's parameters (after XCD_PARAMS)

    @property
    def all_params(self) -> tuple[Param, ...]:
        return XCD_PARAMS + self.params


_GROUP = Param("group_size", 1, 2**20, _POWERS, "tiles per group")
FAMILIES: dict[str, Family] = {f.name: f for f in (
    Family("grouped_m", "GROUP_SIZE_M ordering: group_size row-tiles per column sweep",
           "swizzles.grouped", "remap", "order(virtual, num_pid_m, num_pid_n, 1, {group_size})", (_GROUP,)),
    Family("grouped_n", "GROUP_SIZE_N ordering: group_size column-tiles per row sweep",
           "swizzles.grouped_n", "remap", "order(virtual, num_pid_m, num_pid_n, 1, {group_size})", (_GROUP,)),
    Family("tiled", "tiled raster: tile_m x tile_n super-tiles row-major, column-major inside",
           "swizzles.tiled", "tiled", "order(virtual, num_pid_m, num_pid_n, {tile_m}, {tile_n})",
           (Param("tile_m", 1, 2**20, _POWERS, "row-tiles per super-tile"),
            Param("tile_n", 1, 2**20, _POWERS, "column-tiles per super-tile"))),
    Family("hilbert", "Hilbert curve in 2**order x 2**order blocks, blocks row-major",
           "swizzles.curve", "blocked_curve", "order(virtual, num_pid_m, num_pid_n, {order}, 1)",
           (Param("order", 0, 10, (1, 2, 3, 4, 5), "log2 of the block side"),)),
    Family("morton", "Morton (Z-order) curve in 2**order x 2**order blocks, blocks row-major",
           "swizzles.curve", "blocked_curve", "order(virtual, num_pid_m, num_pid_n, {order}, 0)",
           (Param("order", 0, 10, (1, 2, 3, 4, 5), "log2 of the block side"),)),
)}

_LABEL = re.compile(r"([a-z_]+)\[([a-z_]+=-?[0-9]+(?:,[a-z_]+=-?[0-9]+)*)\]\Z")


@dataclass(frozen=True)
class FamilyInstance:
    """One parameter set of a family; ``values`` in the family's parameter order."""

    family: str
    values: tuple[tuple[str, int], ...]

    @property
    def label(self) -> str:
        """The canonical name: ``family[p1=v1,p2=v2,...]``."""
        return f"{self.family}[{','.join(f'{k}={v}' for k, v in self.values)}]"

    @property
    def params(self) -> dict[str, int]:
        return dict(self.values)


def family_instance(family: str, values: Mapping[str, object]) -> FamilyInstance:
    """Check ``values`` against ``family`` (every parameter present, none unknown, each in range)."""
    spec = FAMILIES.get(family)
    if spec is None:
        raise ValueError(f"unknown swizzle family {family!r}; valid families: {', '.join(FAMILIES)}")
    names = [p.name for p in spec.all_params]
    missing = [n for n in names if n not in values]
    unknown = [n for n in values if n not in names]
    if missing or unknown:
        raise ValueError(f"swizzle family {family}: parameters must be exactly {names}; "
                         f"missing {missing}, unknown {unknown}")
    return FamilyInstance(family, tuple((p.name, p.check(family, values[p.name])) for p in spec.all_params))


def is_family_label(name: str) -> bool:
    """Whether ``name`` is written like a family label (``word[...]``)."""
    return name.endswith("]") and "[" in name


def parse_label(label: str) -> FamilyInstance:
    """The instance a label names; ValueError unless the label is canonical (see module doc)."""
    match = _LABEL.match(label)
    if match is None:
        raise ValueError(f"swizzle label {label!r} is not of the form family[param=int,...], e.g. "
                         f"{example_label('hilbert')}")
    family, body = match.groups()
    pairs = [item.split("=") for item in body.split(",")]
    values = {k: int(v) for k, v in pairs}
    if len(values) != len(pairs):
        raise ValueError(f"swizzle label {label!r} repeats a parameter")
    instance = family_instance(family, values)
    if instance.label != label:
        raise ValueError(f"swizzle label {label!r} is not canonical: write it {instance.label!r} "
                         "(parameters in the family's order)")
    return instance


def example_label(family: str) -> str:
    """A valid label of ``family``, each parameter at its first search choice but num_xcds=8."""
    spec = FAMILIES[family]
    return family_instance(family, {p.name: (8 if p.name == "num_xcds" else p.choices[0])
                                    for p in spec.all_params}).label


_MODULE_TEMPLATE = '''\
"""Swizzle family instance {label}; generated by swizzles.families, do not edit."""
import triton
import triton.language as tl

from swizzles.xcd_chunked import xcd_chunk
from {module} import {function} as order


@triton.jit
def remap(pid, num_pid_m, num_pid_n, NUM_XCDS: tl.constexpr, GROUP_SIZE: tl.constexpr):
    """{doc}; parameters from the label, NUM_XCDS and GROUP_SIZE unused."""
{xcd_stage}
    return {call}
'''


def generate_source(instance: FamilyInstance) -> str:
    """Python source of the module defining the instance's ``@triton.jit`` ``remap``.  Only
    checked integers and this module's own constants go into it."""
    spec = FAMILIES[instance.family]
    params = instance.params
    if params["num_xcds"] == 1:
        xcd_stage = "    virtual = pid"
    else:
        xcd_stage = (f"    virtual = xcd_chunk(pid, num_pid_m * num_pid_n, {params['num_xcds']}, "
                     f"{params['chunk']})")
    return _MODULE_TEMPLATE.format(label=instance.label, module=spec.module, function=spec.function,
                                   doc=spec.doc, xcd_stage=xcd_stage, call=spec.call.format(**params))


def family_remap(label: str) -> JITFunction | InterpretedFunction:
    """The generated jit remap of the instance ``label`` (the same object for the same label)."""
    from swizzles.generated import load_generated

    return load_generated(generate_source(parse_label(label)))
