"""XCD chunking with a chunk size, in the manner of ROCm/aiter's ``remap_xcd_chunked``.

MI300X deals workgroups round-robin to its XCDs: launch-order pid ``p`` runs on XCD
``p % NUM_XCDS``.  This stage renumbers the pids so that each XCD receives runs of
``CHUNK`` consecutive *virtual* pids: in every window of ``NUM_XCDS * CHUNK`` pids, XCD
``x`` gets virtual pids ``x*CHUNK .. x*CHUNK + CHUNK - 1`` of that window.  A later
ordering stage (grouped, tiled, a space-filling curve) maps virtual pids to tiles, so
neighbouring tiles of that order share an XCD and so an L2.  Small chunks keep every
XCD working on the same region of the grid at the same time; ``CHUNK = 0`` gives each
XCD one contiguous chunk of the whole grid (:mod:`swizzles.xcd`).

aiter leaves the last, incomplete window in launch order.  Here the tail window is
split evenly with :mod:`swizzles.xcd` instead (the first ``tail % NUM_XCDS`` XCDs get one
pid more), so the tail keeps its XCD affinity and the stage is a permutation for every
grid size: full windows are permuted within themselves and the tail within itself.
"""
import triton
import triton.language as tl

from swizzles.xcd import remap as xcd_remap


@triton.jit
def xcd_chunk(pid, num_pids, NUM_XCDS: tl.constexpr, CHUNK: tl.constexpr):
    """Virtual pid of launch-order ``pid`` (``0 <= pid < num_pids``)."""
    if CHUNK == 0:
        virtual = xcd_remap(pid, num_pids, 1, NUM_XCDS, 1)
    else:
        window = NUM_XCDS * CHUNK
        full = (num_pids // window) * window          # pids in complete windows
        xcd = pid % NUM_XCDS
        local = pid // NUM_XCDS                       # the pid's rank on its XCD
        chunked = (local // CHUNK) * window + xcd * CHUNK + local % CHUNK
        # `full` is a multiple of NUM_XCDS, so pid - full still runs on XCD pid % NUM_XCDS.
        tail = full + xcd_remap(pid - full, num_pids - full, 1, NUM_XCDS, 1)
        virtual = tl.where(pid < full, chunked, tail)
    return virtual
