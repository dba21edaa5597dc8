"""What the target's Triton backend accepts for a launch, checked before any job runs.

The Triton interpreter (the CPU path) runs any ``num_warps`` and any ``tl.dot`` size, so a
config the GPU would reject used to FINISH on the CPU.  These are the rules of the
compilers a job is meant for, applied on every machine to the target's vendor
(``target.vendor``: ``target=auto`` on the CPU is the MI300X, i.e. AMD):

* ``num_warps``: a power of two (Triton 3.x, ``backends/{nvidia,amd}/compiler.py``), and
  at most 1024 threads per program: 32 warps of 32 threads on NVIDIA, 16 wavefronts of 64
  on AMD.
* tile sizes: powers of two (``tl.arange``), within the kernel's own rules
  (``ConvKernel.check_tiles``).  For the ``tl.dot`` of a kernel that has one
  (``ConvKernel.dot_tiles``: the M, N, K tile names): the backend's smallest dot
  (``min_dot_size``: K >= 16 for 16-bit operands on NVIDIA, 32 for 8-bit, 8 for 32-bit;
  none on AMD, which falls back to FMA), and at most 2**20 elements per operand or
  accumulator block (``TRITON_MAX_TENSOR_NUMEL``).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterable, Mapping

from harness.errors import UserError

if TYPE_CHECKING:   # the kernels import torch; these checks need only the kernel's methods
    from kernels.base import ConvKernel

#: Largest number of elements of one Triton block (``triton._utils.TRITON_MAX_TENSOR_NUMEL``).
MAX_BLOCK_NUMEL = 1 << 20
#: Bits per element of the dtypes a shape may have.
DTYPE_BITS = {"float16": 16, "bfloat16": 16, "float32": 32, "float8_e4m3fn": 8, "float8_e5m2": 8}


@dataclass(frozen=True)
class BackendLimits:
    """One vendor's launch limits (see the module docstring)."""

    vendor: str
    warp_size: int                       # threads per warp (NVIDIA) or wavefront (AMD)
    max_threads: int                     # threads per program (CUDA block, HIP workgroup)
    min_dot_k: Mapping[int, int]         # element bits -> smallest K of tl.dot (missing: 1)

    @property
    def max_num_warps(self) -> int:
        return self.max_threads // self.warp_size


LIMITS = {
    "nvidia": BackendLimits("nvidia", warp_size=32, max_threads=1024, min_dot_k={8: 32, 16: 16, 32: 8, 64: 4}),
    "amd": BackendLimits("amd", warp_size=64, max_threads=1024, min_dot_k={}),
}


def is_power_of_two(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0 and not value & (value - 1)


def limits_for(vendor: str | None, target: str) -> BackendLimits:
    """The limits of ``vendor``; a target with no known vendor is a UserError."""
    try:
        return LIMITS[str(vendor)]
    except KeyError:
        raise UserError(f"target {target!r} has vendor={vendor!r}; valid vendors: {', '.join(LIMITS)}") from None


def valid_num_warps(limits: BackendLimits) -> list[int]:
    """The ``num_warps`` values ``limits`` allows: powers of two up to its maximum."""
    return [1 << i for i in range(limits.max_num_warps.bit_length())]


def num_warps_values() -> str:
    """What ``launch.num_warps`` takes on each vendor's targets, e.g. ``1, 2, 4, 8, 16 (amd),
    up to 32 (nvidia)``: the schema's answer to a value that is no integer."""
    ordered = sorted(LIMITS.values(), key=lambda limits: limits.max_num_warps)
    return ", ".join(map(str, valid_num_warps(ordered[0]))) + f" ({ordered[0].vendor})" + "".join(
        f", up to {limits.max_num_warps} ({limits.vendor})" for limits in ordered[1:])


def check_num_warps(num_warps: object, limits: BackendLimits, target: str) -> int:
    """``num_warps`` as an int, or a UserError naming the valid values for the target."""
    valid = valid_num_warps(limits)
    if not is_power_of_two(num_warps) or num_warps > limits.max_num_warps:
        raise UserError(f"launch.num_warps={num_warps!r} is invalid for target {target} ({limits.vendor}: "
                        f"{limits.warp_size} threads per warp, at most {limits.max_threads} per program); "
                        f"valid: {', '.join(map(str, valid))}")
    return int(num_warps)


def check_tiles(kernel: ConvKernel, tiles: Mapping[str, int], limits: BackendLimits | None, target: str,
                dtypes: Iterable[str] = ("float16",), key: str = "kernel.tiles") -> dict[str, int]:
    """The kernel's tiles after its own check and, with ``limits``, the target's ``tl.dot``
    rules for every dtype in ``dtypes``; a UserError naming the bad entry otherwise."""
    try:
        checked = kernel.check_tiles(tiles)
    except ValueError as exc:
        raise UserError(f"{key}: {exc}") from None
    if limits is None or kernel.dot_tiles is None:
        return checked
    m, n, k = (checked[name] for name in kernel.dot_tiles)
    for a, b in ((m, k), (k, n), (m, n)):
        if a * b > MAX_BLOCK_NUMEL:
            raise UserError(f"{key}: a {a} x {b} tl.dot block of kernel {kernel.name!r} has {a * b} elements; "
                            f"Triton allows at most {MAX_BLOCK_NUMEL}")
    for dtype in sorted(set(dtypes)):
        min_k = limits.min_dot_k.get(DTYPE_BITS.get(dtype, 16), 1)
        if k < min_k:
            raise UserError(f"{key}.{kernel.dot_tiles[2]}={k} is too small for tl.dot on target {target} "
                            f"({limits.vendor}, {dtype}): K must be >= {min_k}")
    return checked
