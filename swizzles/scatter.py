"""Scattered tile order (a multiplicative hash): a *calibration control*, not a proposal.

``new_pid = (a * pid) mod num_pids`` with ``a`` coprime to ``num_pids`` visits every tile
exactly once, and consecutive programs land about ``0.618 * num_pids`` tiles apart
(Fibonacci hashing): programs that run together share almost no operand tiles, so when
the working set exceeds the L2 the kernel must get slower and miss more.  It is the
known-bad order a harness has to detect.

Why ``a`` is computed in the kernel: the remap only sees the grid, and a fixed multiplier
(say 7919) fails for grids it divides, and is ``1 mod num_pids`` (identity) for every
power of two that divides ``a - 1``.  Starting from ``round(0.618 * num_pids)`` and
stepping up to the next integer coprime to ``num_pids`` (Euclid's algorithm) makes the
map a permutation for every grid size.  The cost is a few dozen scalar integer
operations per program, negligible beside a conv tile's work.
"""
import triton
import triton.language as tl


@triton.jit
def _gcd(a, b):
    # Euclid on non-negative scalars; gcd(a, 0) = a.
    while b != 0:
        t = b
        b = a % b
        a = t
    return a


@triton.jit
def remap(pid, num_pid_m, num_pid_n, NUM_XCDS: tl.constexpr, GROUP_SIZE: tl.constexpr):
    num_pids = (num_pid_m * num_pid_n).to(tl.int64)
    # 40503 / 65536 ~ 0.618 (the golden ratio's fractional part).
    a = tl.maximum((num_pids * 40503) // 65536, 1)
    while _gcd(a, num_pids) != 1:
        a += 1
    return ((pid.to(tl.int64) * a) % num_pids).to(tl.int32)
