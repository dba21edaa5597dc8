"""GROUP_SIZE_M ordering from Triton's matrix-multiplication tutorial.

Consecutive programs walk down a column of ``GROUP_SIZE`` row-tiles before moving
to the next column, so programs that run at the same time share both their
row-tiles (input pixels) and their column-tiles (filters) in L2.
"""
import triton
import triton.language as tl


@triton.jit
def remap(pid, num_pid_m, num_pid_n, NUM_XCDS: tl.constexpr, GROUP_SIZE: tl.constexpr):
    num_pid_in_group = GROUP_SIZE * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * GROUP_SIZE
    # The last group may be shorter than GROUP_SIZE when num_pid_m is not a multiple.
    group_size_m = tl.minimum(num_pid_m - first_pid_m, GROUP_SIZE)
    pid_m = first_pid_m + (pid % num_pid_in_group) % group_size_m
    pid_n = (pid % num_pid_in_group) // group_size_m
    return pid_m * num_pid_n + pid_n
