"""A stand-in GPU timer (``compare.timer=tests.standins.placement_timer:time_ms``) whose
candidate arm is exactly as fast as its baseline on average, but not on every placement of
its operands: on each placement it is a fixed few per cent faster or slower (as kernels are
on an H100 whose buffers land on other DRAM channels), plus 0.2 % round-to-round noise.

One placement alone therefore shows a "significant" effect that is an accident of where
the buffers landed; the effects over :data:`PLACEMENT_EFFECTS` average to zero."""
from __future__ import annotations

import numpy as np

#: Candidate time / baseline time on placement i (cycled), fractions: mean 0.
PLACEMENT_EFFECTS = (0.03, -0.025, 0.01, -0.015, 0.02, -0.03, 0.005, 0.005)
BASE_MS = 0.020
VENDOR_FACTOR = 1.1
NOISE = 0.002


def time_ms(arm: str, placement: int, round_index: int, rng: np.random.Generator) -> float:
    """One launch's made-up time, ms."""
    t = BASE_MS
    if arm == "candidate":
        t *= 1 + PLACEMENT_EFFECTS[placement % len(PLACEMENT_EFFECTS)]
    elif arm == "vendor":
        t *= VENDOR_FACTOR
    return t * (1 + NOISE * rng.standard_normal())
