"""The MI300X (gfx942) L2 counters as rocprofiler-sdk defines them, and what a dispatch's
counters give: its L2 hits and misses, its DRAM read bytes, and the passes a set of counters
needs.  Counts are TCC (L2) requests summed over every TCC instance of every XCD; bytes are
bytes.

Sources (ROCm/rocprofiler-sdk at 8ab1ed78d8c2afb25fedddb7684aff08d1233c5c,
``source/lib/rocprofiler-sdk/counters/xml/derived_counters.xml``; ``<gfx942 base="gfx940">``):

* ``TCC_HIT_sum = reduce(TCC_HIT, sum)``, ``TCC_MISS_sum = reduce(TCC_MISS, sum)``: no
  derived hit-rate counter, so the rate is ``100 * hit / (hit + miss)`` as rocprof-compute
  computes it;
* ``TCC_EA0_RDREQ_sum`` (read requests to the fabric, 32 or 64 B each) and
  ``TCC_EA0_RDREQ_32B_sum`` (those of 32 B), and
  ``FETCH_SIZE = (TCC_EA0_RDREQ_32B_sum * 32 + (TCC_EA0_RDREQ_sum - TCC_EA0_RDREQ_32B_sum) * 64) / 1024``
  (kilobytes): the DRAM read bytes.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence

TCC_HIT = "TCC_HIT_sum"
TCC_MISS = "TCC_MISS_sum"
EA_RDREQ = "TCC_EA0_RDREQ_sum"
EA_RDREQ_32B = "TCC_EA0_RDREQ_32B_sum"
FETCH_SIZE = "FETCH_SIZE"

#: The default set: the hit rate and the DRAM read bytes, four TCC counters (one pass on gfx942).
DEFAULT_COUNTERS = [TCC_HIT, TCC_MISS, EA_RDREQ, EA_RDREQ_32B]

#: TCC (L2) counters one pass can collect on gfx942 (rocprofv3-avail pmc-check is the authority
#: where it is installed: harness.profilers.rocprofv3.check_counters).
TCC_PER_PASS = 4


def tcc_cost(counter: str) -> int:
    """TCC counters a counter needs: ``TCC_*`` one, ``FETCH_SIZE`` two (its two EA0 terms), others 0."""
    if counter == FETCH_SIZE:
        return 2
    return 1 if counter.startswith("TCC_") else 0


def counter_passes(counters: Sequence[str], per_pass: int = TCC_PER_PASS) -> list[list[str]]:
    """``counters`` in passes of at most ``per_pass`` TCC counters each, in the given order;
    counters of other blocks ride in the first pass.  One pass when they fit."""
    passes: list[list[str]] = [[]]
    used = [0]
    for counter in counters:
        cost = tcc_cost(counter)
        if cost > per_pass:
            raise ValueError(f"{counter} alone needs {cost} TCC counters, more than one pass holds ({per_pass})")
        slot = next((i for i, u in enumerate(used) if u + cost <= per_pass), None)
        if slot is None:
            passes.append([])
            used.append(0)
            slot = len(passes) - 1
        passes[slot].append(counter)
        used[slot] += cost
    return passes


def dram_read_bytes(counters: Mapping[str, float]) -> float | None:
    """DRAM read bytes of one dispatch from its counters: ``FETCH_SIZE`` (KB) where collected,
    else its two terms; None when neither is there."""
    if counters.get(FETCH_SIZE) is not None:
        return 1024.0 * counters[FETCH_SIZE]
    total, small = counters.get(EA_RDREQ), counters.get(EA_RDREQ_32B)
    if total is None or small is None:
        return None
    return 32.0 * small + 64.0 * (total - small)
