"""A swizzle of your own: a ``@triton.jit`` remap with the built-ins' signature
(swizzles/__init__.py), selected by ``conf/swizzle/snake.yaml`` or on the command line
with ``swizzle=custom swizzle.fn=myremaps:snake``.

``pid`` is the launch-order program id (a scalar in the kernel, a block of pids in the
permutation gate), ``num_pid_m x num_pid_n`` the tile grid; the result is the tile the
program computes, read row-major by the kernel.  swizzlebench checks that it is a
permutation of the job's real grid and that the kernel's output stays correct with it.
"""
import triton
import triton.language as tl


@triton.jit
def snake(pid, num_pid_m, num_pid_n, NUM_XCDS: tl.constexpr, GROUP_SIZE: tl.constexpr):
    # Boustrophedon: rows of tiles in order, every other row walked right to left, so
    # consecutive programs at a row's end share a column tile (the same filters).
    # A permutation of every grid.  NUM_XCDS and GROUP_SIZE are unused here.
    row = pid // num_pid_n
    col = pid % num_pid_n
    odd = row % 2
    col = col + odd * (num_pid_n - 1 - 2 * col)    # col on even rows, num_pid_n - 1 - col on odd ones
    return row * num_pid_n + col
