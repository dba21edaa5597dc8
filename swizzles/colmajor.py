"""Column-major tile order: a *calibration control*, not a proposal.

Consecutive programs walk down a column of output tiles (all pixel tiles of one filter
tile) before moving to the next column.  For an implicit-GEMM conv the input is the large
operand: row-major order reuses each input (pixel) tile across every filter tile while it
is still in L2, column-major order re-reads the whole input once per filter tile.  When
the input does not fit in L2 this order must be measurably slower, with a lower L2 hit
rate: a harness that cannot see that cannot be trusted to see a real swizzle's effect.

A permutation for every grid: ``pid -> (pid % num_pid_m, pid // num_pid_m)`` is a
bijection of ``[0, num_pid_m * num_pid_n)`` onto the tile plane.
"""
import triton
import triton.language as tl


@triton.jit
def remap(pid, num_pid_m, num_pid_n, NUM_XCDS: tl.constexpr, GROUP_SIZE: tl.constexpr):
    pid_m = pid % num_pid_m
    pid_n = pid // num_pid_m
    return pid_m * num_pid_n + pid_n
