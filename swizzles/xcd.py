"""Chunked XCD remap, in the manner of ROCm/aiter's ``remap_xcd``.

MI300X deals workgroups round-robin to its XCDs: launch-order pid ``p`` runs on
XCD ``p % NUM_XCDS``.  We want each XCD to own one contiguous chunk of tiles, so
the programs that share an L2 also share data.  When the grid is not a multiple of
``NUM_XCDS`` the first ``num_pids % NUM_XCDS`` XCDs receive one extra pid; that keeps
the remap a permutation for every grid size.
"""
import triton
import triton.language as tl


@triton.jit
def remap(pid, num_pid_m, num_pid_n, NUM_XCDS: tl.constexpr, GROUP_SIZE: tl.constexpr):
    num_pids = num_pid_m * num_pid_n
    pids_per_xcd = num_pids // NUM_XCDS
    num_larger_xcds = num_pids % NUM_XCDS  # these XCDs own pids_per_xcd + 1 pids
    xcd = pid % NUM_XCDS
    local = pid // NUM_XCDS
    chunk_start = (tl.minimum(xcd, num_larger_xcds) * (pids_per_xcd + 1)
                   + tl.maximum(xcd - num_larger_xcds, 0) * pids_per_xcd)
    return chunk_start + local
