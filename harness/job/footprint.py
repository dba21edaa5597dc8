"""The memory a job's correctness gate and rounds take, from its shape alone (bytes).

On a GPU the gate and the rounds run the job's own shape: its operands and output in the
storage dtype, the vendor call's output, the fp32 reference (the operands converted and its
output) and the comparison's fp32 copy of the output and its error, all on the device; the
operands are drawn in fp32 on the host first (harness.measure.correctness.make_operands).  On
the CPU the interpreter runs the down-scaled instance (harness.job.shapes.downscale), host
memory only.  The operand placements of the rounds (``compare.placements``) are made only
while the device has room (harness.measure.correctness.placed_copies) and are not counted.
"""
from __future__ import annotations

from dataclasses import dataclass

from harness.job.shapes import downscale
from kernels.access import element_bytes
from kernels.problem import ConvShape

#: Bytes of an fp32 element (the reference's and the host's draw).
FP32_BYTES = 4


@dataclass(frozen=True)
class JobMemory:
    """Peak memory of one shape's gate and rounds, bytes."""

    host_bytes: int     # host RAM
    device_bytes: int   # GPU memory (0 on the CPU)


def tensor_elements(shape: ConvShape) -> tuple[int, int, int]:
    """Elements of the input, the weights and the output of ``shape``."""
    return (shape.N * shape.C * shape.H * shape.W, shape.F * shape.C * shape.R * shape.S,
            shape.N * shape.F * shape.P * shape.Q)


def gate_bytes(shape: ConvShape) -> int:
    """Bytes the gate and the rounds hold where they run: operands and output in the storage
    dtype, the vendor call's output, the fp32 reference's operands and output, and the fp32
    output and error of the comparison (the bias, F elements, is left out)."""
    x, w, out = tensor_elements(shape)
    storage = element_bytes(shape) * (x + w + 2 * out)
    return storage + FP32_BYTES * (x + w + out) + 2 * FP32_BYTES * out


def job_memory(shape: ConvShape, on_gpu: bool) -> JobMemory:
    """Peak memory of ``shape``'s gate and rounds on a GPU (``on_gpu``) or under the interpreter."""
    if not on_gpu:
        return JobMemory(host_bytes=gate_bytes(downscale(shape)) + _draw_bytes(downscale(shape)), device_bytes=0)
    return JobMemory(host_bytes=_draw_bytes(shape), device_bytes=gate_bytes(shape))


def _draw_bytes(shape: ConvShape) -> int:
    """Host bytes of the operands' fp32 draw (input and weights)."""
    x, w, _ = tensor_elements(shape)
    return FP32_BYTES * (x + w)
