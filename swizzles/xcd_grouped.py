"""XCD chunking composed with grouped ordering: each XCD gets a contiguous chunk of
the grid, and inside the chunk tiles are visited in GROUP_SIZE_M order."""
import triton
import triton.language as tl

from swizzles.grouped import remap as grouped_remap
from swizzles.xcd import remap as xcd_remap


@triton.jit
def remap(pid, num_pid_m, num_pid_n, NUM_XCDS: tl.constexpr, GROUP_SIZE: tl.constexpr):
    chunked = xcd_remap(pid, num_pid_m, num_pid_n, NUM_XCDS, GROUP_SIZE)
    return grouped_remap(chunked, num_pid_m, num_pid_n, NUM_XCDS, GROUP_SIZE)
