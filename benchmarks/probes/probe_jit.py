"""Triton helpers the GPU probes share: the SM's cycle counter, its id, and a spin-wait.

Imported by ``l2_sharing.py``, ``l2_partition_map.py`` and ``sm_placement.py`` on the GPU node
(the CPU-side parts of those probes do not import it).  Each reads a special register with
inline PTX; ``is_pure=False`` keeps the compiler from merging or hoisting the reads.
"""
from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def clock(dummy):
    """The SM's cycle counter (``%clock64``); ``dummy`` is any value of the program."""
    return tl.inline_asm_elementwise("mov.u64 $0, %clock64;", "=l,r", [dummy], dtype=tl.int64,
                                     is_pure=False, pack=1)


@triton.jit
def smid(dummy):
    """The id of the SM the program runs on (``%smid``)."""
    return tl.inline_asm_elementwise("mov.u32 $0, %smid;", "=r,r", [dummy], dtype=tl.int32,
                                     is_pure=False, pack=1)


@triton.jit
def wait_cycles(pid, delay):
    """Spin ``delay`` SM cycles.  Returns (0, the last clock read): add the 0 to the addresses
    of the loads that must not be issued before the wait ends."""
    start = clock(pid)
    now = start
    while now - start < delay:
        now = clock(pid)
    return (now - start < 0).to(tl.int64), now
