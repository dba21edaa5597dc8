"""GPU timing: quantiles over repetitions with the L2 flushed between them."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch
import torch.nn.functional as F

from kernels.base import Operands
from kernels.problem import ConvShape


@dataclass(frozen=True)
class Timing:
    """Kernel time over repetitions, in ms."""

    median_ms: float
    p20_ms: float
    p80_ms: float


def time_gpu(fn: Callable[[], None], warmup_ms: float, rep_ms: float) -> Timing:
    """Time ``fn`` with ``triton.testing.do_bench``: warm-up launches are excluded, and a
    256 MiB buffer is cleared before every repetition so each one starts with a cold L2."""
    import triton.testing

    median, p20, p80 = triton.testing.do_bench(fn, warmup=warmup_ms, rep=rep_ms,
                                               quantiles=[0.5, 0.2, 0.8])
    return Timing(float(median), float(p20), float(p80))


def vendor_conv(ops: Operands, shape: ConvShape) -> Callable[[], None]:
    """The vendor baseline: ``torch.nn.functional.conv2d`` on channels_last tensors
    (cuDNN / MIOpen pick their own algorithm)."""
    x = ops.x.contiguous(memory_format=torch.channels_last)
    w = ops.w.contiguous(memory_format=torch.channels_last)
    bias = ops.bias

    def run() -> None:
        F.conv2d(x, w, bias, stride=shape.stride, padding=shape.padding)

    return run


def tflops(shape: ConvShape, ms: float) -> float:
    return shape.flops / (ms * 1e-3) / 1e12
