"""Conv2d kernel families, one module each; the names are the ``kernel`` config choices."""
from __future__ import annotations

from kernels.base import ConvKernel
from kernels.direct import DirectConv
from kernels.igemm import ImplicitGemmConv
from kernels.igemm_fast import FastImplicitGemmConv
from kernels.patch import PatchConv

KERNELS: dict[str, ConvKernel] = {k.name: k for k in (DirectConv(), PatchConv(), ImplicitGemmConv(),
                                                       FastImplicitGemmConv())}


def get_kernel(name: str) -> ConvKernel:
    """Return the kernel family called ``name`` or raise listing the valid names."""
    try:
        return KERNELS[name]
    except KeyError:
        raise ValueError(f"unknown kernel {name!r}; valid kernels: {', '.join(sorted(KERNELS))}") from None
