"""GROUP_SIZE_N ordering: the Triton tutorial's grouping with the two tile axes swapped.

Consecutive programs walk along a row of ``GROUP_SIZE`` column-tiles (filters) before
moving down to the next row-tile (output pixels).  Where the filter tiles are the larger
operand (late ResNet layers: many filters, few pixels), the programs running together
then share those filter tiles in L2.  It is :mod:`swizzles.grouped` run on the transposed
grid (``num_pid_n x num_pid_m``) with its tile read back transposed, so like it, it is a
permutation for every grid (the last group is narrower when ``num_pid_n`` is not a
multiple of ``GROUP_SIZE``).
"""
import triton
import triton.language as tl

from swizzles.grouped import remap as grouped_remap


@triton.jit
def remap(pid, num_pid_m, num_pid_n, NUM_XCDS: tl.constexpr, GROUP_SIZE: tl.constexpr):
    transposed = grouped_remap(pid, num_pid_n, num_pid_m, NUM_XCDS, GROUP_SIZE)
    pid_n = transposed // num_pid_m
    pid_m = transposed % num_pid_m
    return pid_m * num_pid_n + pid_n
