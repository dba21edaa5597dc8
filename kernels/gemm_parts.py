"""Pieces the implicit-GEMM families share: the tensor-core product and the decode of a
tile's rows into output pixels.  Kept in one place so the two kernels cannot drift."""
from __future__ import annotations

import torch
import triton
import triton.language as tl


@triton.jit
def mma(a, b, acc, DOT_IN_FP32: tl.constexpr):
    """``acc + a @ b`` in fp32.  The Triton interpreter's ``tl.dot`` returns garbage for bf16
    operands (errors ~1e10 with Triton 3.9); on the CPU path only, bf16 tiles are multiplied
    as fp32, which is what the tensor cores compute anyway (bf16 products are exact in fp32)."""
    if DOT_IN_FP32:
        return tl.dot(a.to(tl.float32), b.to(tl.float32), acc)
    else:
        return tl.dot(a, b, acc)


def dot_in_fp32(x: torch.Tensor, dtype: str) -> bool:
    """Whether :func:`mma` must upcast: bf16 operands under the CPU interpreter."""
    return x.device.type == "cpu" and dtype == "bfloat16"


@triton.jit
def output_pixels(offs_m, P, Q, stride, padding):
    """Rows ``offs_m`` of the M = N*P*Q x F output matrix are output pixels (n, p, q);
    return ``n`` and the top-left input position ``(ih0, iw0)`` of each pixel's receptive
    field (negative inside the padding)."""
    q = offs_m % Q
    p = (offs_m // Q) % P
    n = offs_m // (P * Q)
    return n, p * stride - padding, q * stride - padding
