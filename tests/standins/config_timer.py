"""A stand-in GPU timer (``compare.timer=tests.standins.config_timer:time_ms``) for best vs
best: tune mode's trials (arms ``tune:<swizzle>:<config label>``) favour a *different* config
per swizzle, and in the paired rounds the candidate is :data:`CANDIDATE_GAIN` faster.

* the baseline's swizzle (``identity``) is fastest on the largest ``BLOCK_M x BLOCK_N`` tile;
* every other swizzle is fastest on the smallest one;

so a best-vs-best job must launch two different configs, one per arm."""
from __future__ import annotations

import re

import numpy as np

BASE_MS = 0.020
#: Baseline time / candidate time in the paired rounds.
CANDIDATE_GAIN = 1.05
VENDOR_FACTOR = 1.1
NOISE = 0.002


def tile_area(label: str) -> int:
    """BLOCK_M x BLOCK_N of a config label such as ``M64 N32 K16 w4 s3``."""
    m = re.search(r"\bM(\d+)\b", label)
    n = re.search(r"\bN(\d+)\b", label)
    return int(m.group(1)) * int(n.group(1)) if m and n else 1


def time_ms(arm: str, placement: int, round_index: int, rng: np.random.Generator) -> float:
    """One launch's made-up time, ms (trials: exact; rounds: with 0.2 % noise)."""
    if arm.startswith("tune:"):
        _, swizzle, label = arm.split(":", 2)
        area = tile_area(label)
        return BASE_MS * (1e4 / area if swizzle == "identity" else area / 1e2)
    t = BASE_MS / CANDIDATE_GAIN if arm == "candidate" else BASE_MS * (VENDOR_FACTOR if arm == "vendor" else 1.0)
    return t * (1 + NOISE * rng.standard_normal())
