"""Where a line lives in the simulated L2: its set and its home partition.

A line id is a byte address divided by the L2's line size (``line_bytes``); a block is
:data:`BLOCK_BYTES` of consecutive bytes, ``block_lines = BLOCK_BYTES // line_bytes`` lines
(NVIDIA's 32 B sectors: 4 per block).  Both placements are computed from the block, so the
sectors of one 128 B line share a home and sit in neighbouring sets.
"""
from __future__ import annotations

import numpy as np

from harness.profilers.sim.lru import jit

#: Granularity of the home-partition and set hashes (bytes): a 128 B line's sectors share a home.
BLOCK_BYTES = 128


@jit
def home(line, block_lines, partitions):
    """Home partition of ``line`` (0 .. ``partitions - 1``): a multiplicative hash of its block."""
    if partitions == 1:
        return 0
    return ((np.int64(line) // block_lines) * 2654435761 >> 20) % partitions


def set_index(lines: np.ndarray, l2_sets: int, block_lines: int, set_hash: bool) -> np.ndarray:
    """The L2 set of each line (int64, same shape): its number modulo the sets, or with
    ``set_hash`` a hash of its 128 B block (the block's sectors in neighbouring sets), as
    NVIDIA's L2 spreads addresses so that a strided stream (every other pixel of a stride-2
    conv) still uses every set.  Computed once per launch, outside the replay loop."""
    lines = np.asarray(lines, dtype=np.int64)
    groups = l2_sets // block_lines
    if not set_hash or groups == 0:
        return lines % l2_sets
    block = lines // block_lines
    h = ((block & 0xFFFFFFFF) * 2654435761) & 0xFFFFFFFF     # Fibonacci hashing, 32 bits
    h ^= h >> 16
    return (h % groups) * block_lines + (lines - block * block_lines)

