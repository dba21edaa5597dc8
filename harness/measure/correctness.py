"""The correctness gate: the kernel's output against ``torch.nn.functional.conv2d`` in fp32.

Inputs are fresh seeded random numbers (never zeros: zeros hide unwritten outputs and
wrong indexing), the output buffer is poisoned with NaN before the launch (see
``ConvKernel.bind``), and the error is measured relative to the reference's largest
magnitude, with a tolerance that depends on the storage dtype.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from harness.measure.layouts import INPUT_LAYOUTS as LAYOUT_NAMES
from kernels.base import Operands
from kernels.problem import ConvShape

#: max |out - ref| / max |ref| allowed per storage dtype: a few output roundings
#: (fp16 has an 11-bit significand, bf16 an 8-bit one); a dropped channel block or a
#: wrong tap gives errors of order 1.
TOLERANCE = {"float16": 5e-3, "bfloat16": 3e-2}


@dataclass(frozen=True)
class CorrectnessVerdict:
    ok: bool
    max_rel_err: float            # max |out - ref| / max |ref| (NaN if any element unwritten)
    tolerance: float
    unwritten: int                # elements still NaN after the launch
    worst_index: tuple[int, int, int, int] | None  # (n, f, p, q) of the largest error
    reason: str


#: Memory formats the job's input may come in (config ``input_layout``).
INPUT_LAYOUTS = {name: getattr(torch, memory_format) for name, memory_format in LAYOUT_NAMES.items()}


def make_operands(shape: ConvShape, with_bias: bool, seed: int, device: torch.device | str,
                  layout: str = "nchw") -> Operands:
    """Seeded standard-normal inputs, N,C,H,W / F,C,R,S, drawn on the CPU so every device
    sees the same numbers for the same seed.  ``layout``: the input's memory format
    (:data:`INPUT_LAYOUTS`); the kernel and the vendor call both get this very tensor."""
    if layout not in INPUT_LAYOUTS:
        raise ValueError(f"input_layout={layout!r} is invalid; valid: {', '.join(INPUT_LAYOUTS)}")
    gen = torch.Generator().manual_seed(seed)
    dtype = getattr(torch, shape.dtype)
    x = (torch.randn((shape.N, shape.C, shape.H, shape.W), generator=gen).to(device=device, dtype=dtype)
         .contiguous(memory_format=INPUT_LAYOUTS[layout]))
    # Scale weights so outputs stay O(1) whatever C*R*S is: keeps fp16 far from overflow.
    w = (torch.randn((shape.F, shape.C, shape.R, shape.S), generator=gen)
         / (shape.C * shape.R * shape.S) ** 0.5).to(device=device, dtype=dtype)
    bias = torch.randn((shape.F,), generator=gen).to(device=device, dtype=dtype) if with_bias else None
    return Operands(x=x, w=w, bias=bias)


def copy_operands(ops: Operands) -> Operands:
    """A copy of ``ops`` at new addresses on their device: the same values, shapes, strides
    and memory format (``Tensor.clone`` keeps a dense tensor's strides)."""
    return Operands(x=ops.x.clone(), w=ops.w.clone(), bias=None if ops.bias is None else ops.bias.clone())


#: Free device memory below which no more operand placements are made, bytes.
PLACEMENT_FREE_BYTES = 4 * 1024**3


def placed_copies(ops: Operands, count: int, seed: int) -> list[tuple[Operands, torch.Tensor]]:
    """``count`` placements of ``ops``: for each, a spacer of a random size (0 to 16 MiB, whole
    4 KiB pages; ``seed``) and then a copy of the operands (:func:`copy_operands`), so that
    each copy sits at other addresses (other DRAM channels, L2 slices, TLB pages) as a user's
    program would meet them.  Returns ``(copy, spacer)`` pairs: keep the spacer alive as long
    as the copy, so the allocator cannot hand its blocks back.  Fewer on a GPU with less than
    :data:`PLACEMENT_FREE_BYTES` free (the job's own work keeps its memory)."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(count):
        if ops.x.device.type == "cuda" and torch.cuda.mem_get_info()[0] < PLACEMENT_FREE_BYTES:
            break
        spacer = torch.empty(int(rng.integers(0, 4096)) * 4096 + 1, dtype=torch.uint8, device=ops.x.device)
        out.append((copy_operands(ops), spacer))
    return out


def reference(ops: Operands, shape: ConvShape) -> torch.Tensor:
    """The conv2d of the (rounded) inputs computed in fp32, N, F, P, Q."""
    bias = ops.bias.float() if ops.bias is not None else None
    return F.conv2d(ops.x.float(), ops.w.float(), bias, stride=shape.stride, padding=shape.padding)


def compare(out_nchw: torch.Tensor, ref: torch.Tensor, dtype: str) -> CorrectnessVerdict:
    """Compare a kernel's N, F, P, Q output with the fp32 reference."""
    tol = TOLERANCE[dtype]
    if tuple(out_nchw.shape) != tuple(ref.shape):
        return CorrectnessVerdict(False, float("nan"), tol, -1, None,
                                  f"output shape {tuple(out_nchw.shape)} != reference {tuple(ref.shape)}")
    out = out_nchw.float()
    unwritten = int(torch.isnan(out).sum())
    err = (out - ref).abs()
    scale = float(ref.abs().max()) or 1.0
    if unwritten:
        first = tuple(int(i) for i in torch.nonzero(torch.isnan(out))[0].tolist())
        return CorrectnessVerdict(False, float("nan"), tol, unwritten, first,
                                  f"output wrong: {unwritten} of {out.numel()} elements never written "
                                  f"(first at n,f,p,q={first})")
    flat = int(torch.argmax(err))
    worst = tuple(int(i) for i in np.unravel_index(flat, tuple(err.shape)))   # torch's would import sympy (0.4 s)
    max_rel = float(err.max()) / scale
    if max_rel > tol:
        return CorrectnessVerdict(False, max_rel, tol, 0, worst,
                                  f"output wrong: max relative error {max_rel:.3g} > tolerance {tol:g} "
                                  f"at n,f,p,q={worst} (got {float(out[worst]):.4g}, "
                                  f"expected {float(ref[worst]):.4g})")
    return CorrectnessVerdict(True, max_rel, tol, 0, worst,
                              f"output matches conv2d: max relative error {max_rel:.3g} <= {tol:g}")
