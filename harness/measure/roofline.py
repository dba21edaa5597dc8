"""What bounds a measured cell: its achieved throughput against the device's roofline.

"L2 -8 points, time unchanged" is no contradiction when the kernel is compute-bound: a
swizzle can only speed up what waits on memory.  So every timed cell is placed on the
roofline of its target (``peak_tflops`` and ``dram_bytes_per_s`` in ``conf/target/*.yaml``,
measured on the device, as the target file says):

* arithmetic intensity I = conv FLOP / compulsory DRAM bytes (input, weights and output
  once each: the least traffic any kernel of this conv can have), FLOP/byte;
* the ridge point = peak / bandwidth: above it the conv is *compute-bound* (the roofline is
  the peak), below it *memory-bound* (the roofline is I x bandwidth);
* achieved TFLOP/s as % of the peak and as % of the roofline at I.

A target without measured peaks gets no reading (nothing is assumed).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from harness.storage.field_names import Metric, Param
from kernels.problem import ConvShape

DTYPE_BYTES = {"float16": 2, "bfloat16": 2, "float32": 4}


@dataclass(frozen=True)
class Roofline:
    """A device's measured ceilings: dense peak (TFLOP/s) and DRAM bandwidth (bytes/s)."""

    peak_tflops: float
    dram_bytes_per_s: float

    @classmethod
    def of_target(cls, target: Mapping) -> "Roofline | None":
        """From a target config; None when it has no measured peaks."""
        peak, bw = target.get("peak_tflops"), target.get("dram_bytes_per_s")
        return cls(float(peak), float(bw)) if peak and bw else None

    def as_params(self) -> dict[str, str]:
        """The ceilings as run params: ``roofline.peak_tflops`` (TFLOP/s), ``roofline.dram_bytes_per_s``."""
        return {Param.ROOFLINE_PEAK_TFLOPS: f"{self.peak_tflops:g}",
                Param.ROOFLINE_DRAM_BYTES_PER_S: f"{self.dram_bytes_per_s:g}"}

    @property
    def ridge(self) -> float:
        """FLOP per DRAM byte above which a kernel can be compute-bound."""
        return self.peak_tflops * 1e12 / self.dram_bytes_per_s


def compulsory_bytes(shape: ConvShape) -> int:
    """Input + weights + output of the conv, each once, bytes."""
    elems = (shape.N * shape.C * shape.H * shape.W + shape.F * shape.C * shape.R * shape.S
             + shape.N * shape.F * shape.P * shape.Q)
    return elems * DTYPE_BYTES.get(shape.dtype, 2)


#: :attr:`RooflineReading.bound`: what bounds a cell.
COMPUTE, MEMORY = "compute", "memory"


@dataclass(frozen=True)
class RooflineReading:
    """One cell on the roofline (%, FLOP/byte)."""

    intensity: float          # FLOP per compulsory DRAM byte
    bound: str                # COMPUTE or MEMORY
    pct_of_peak: float        # achieved TFLOP/s / peak, %
    pct_of_roofline: float    # achieved / min(peak, intensity x bandwidth), %

    @property
    def text(self) -> str:
        """``compute-bound, at 64 % of peak`` / ``memory-bound, at 40 % of its roofline``."""
        if self.bound == COMPUTE:
            return f"{COMPUTE}-bound, at {self.pct_of_peak:.0f} % of peak"
        return f"{MEMORY}-bound, at {self.pct_of_roofline:.0f} % of its roofline"

    def as_metrics(self, prefix: str = "") -> dict[str, float]:
        return {prefix + Metric.ARITH_INTENSITY: self.intensity, prefix + Metric.PCT_OF_PEAK: self.pct_of_peak,
                prefix + Metric.PCT_OF_ROOFLINE: self.pct_of_roofline}


def place(shape: ConvShape, ms: float, roof: Roofline) -> RooflineReading:
    """Where a conv of ``shape`` taking ``ms`` milliseconds sits on ``roof``."""
    intensity = shape.flops / compulsory_bytes(shape)
    achieved = shape.flops / (ms * 1e-3) / 1e12                       # TFLOP/s
    ceiling = min(roof.peak_tflops, intensity * roof.dram_bytes_per_s / 1e12)
    return RooflineReading(intensity, COMPUTE if intensity >= roof.ridge else MEMORY,
                           100 * achieved / roof.peak_tflops, 100 * achieved / ceiling)
