"""The partition-map probe's analysis (benchmarks/probes/l2_partition_map.py), on synthetic
counters: the GPU half is tested on the device."""
from __future__ import annotations

import numpy as np

from tests.benchmarks.scripts import load

probe = load("probes/l2_partition_map.py")


def _record(true_part: list[int], flip: tuple[int, int] | None = None) -> list[dict]:
    """Fabric hits as the probe measures them: the reference's own 200, and SM b's re-read adds
    about half the region's 1024 sectors when b is in the other partition (noise of +-40)."""
    rng = np.random.default_rng(0)
    out = []
    for r, b in probe.cases():
        other = b is not None and true_part[b] != true_part[r]
        if flip == (r, b):
            other = not other
        hits = 200 + (512 if other else 0) + float(rng.integers(-40, 44))
        out.append({"reference": r, "second": b, probe.FABRIC_HITS: hits})
    return out


def test_the_map_is_read_relative_to_sm_0_and_checked_from_sm_66():
    rng = np.random.default_rng(1)
    true_part = [int(v) for v in rng.integers(0, 2, probe.PROGRAMS)]
    result = probe.partition_map(_record(true_part))
    assert result["sm_partition"] == [p ^ true_part[0] for p in true_part]
    assert result["disagree"] == []
    # One launch of the second sweep that says the opposite: that SM is flagged.
    flipped = probe.partition_map(_record(true_part, flip=(66, 5)))
    assert flipped["sm_partition"] == result["sm_partition"] and flipped["disagree"] == [5]
