"""Conv2d kernel families, one module each; the names are the ``kernel`` config choices.

The families are loaded on first use (``KERNELS``, :func:`get_kernel`): they import torch and
triton, which a light submodule (``kernels.problem``, read by a command's early checks) does
not need."""
from __future__ import annotations

import functools
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kernels.base import ConvKernel


@functools.cache
def _families() -> dict[str, ConvKernel]:
    """Every kernel family by name (``KERNELS``); under the Triton interpreter, lightened first
    (:mod:`kernels.interpreted`)."""
    from kernels.direct import DirectConv
    from kernels.igemm import ImplicitGemmConv
    from kernels.igemm_best import BestImplicitGemmConv
    from kernels.igemm_fast import FastImplicitGemmConv
    from kernels.igemm_ws import IgemmWsConv
    from kernels.interpreted import lighten_interpreter
    from kernels.patch import PatchConv

    lighten_interpreter()
    return {k.name: k for k in (DirectConv(), PatchConv(), ImplicitGemmConv(), FastImplicitGemmConv(), IgemmWsConv(),
                                  BestImplicitGemmConv())}


def __getattr__(name: str) -> object:
    if name == "KERNELS":
        return _families()
    raise AttributeError(f"module 'kernels' has no attribute {name!r}")


def get_kernel(name: str) -> ConvKernel:
    """Return the kernel family called ``name`` or raise listing the valid names."""
    try:
        return _families()[name]
    except KeyError:
        raise ValueError(f"unknown kernel {name!r}; valid kernels: {', '.join(sorted(_families()))}") from None
