"""Space-filling curves over the tile plane: Hilbert and Morton (Z-order) in blocks.

A curve of order ``k`` visits a ``2**k x 2**k`` square so that tiles close in visiting
order are close on the plane, in both axes at once: programs that run together share
row-tiles *and* column-tiles.  Grids are rarely square powers of two, so the plane is
cut into ``2**k x 2**k`` blocks visited row-major (the super-tiles of
:mod:`swizzles.tiled`); a full block is walked along the curve, and a block cut by the
bottom or right edge of the grid is walked column by column.  Every block is permuted
within itself, so the remap is a permutation for every grid size, with no cycle
walking (which would send edge tiles far from their neighbours).

Both decoders turn a rank ``d`` inside the block into offsets ``(x, y)`` (column, row),
one bit pair per level, unrolled at compile time (``ORDER`` is a constexpr).
"""
import triton
import triton.language as tl

from swizzles.tiled import supertile


@triton.jit
def hilbert_xy(d, ORDER: tl.constexpr):
    """The classic ``d2xy``: per level, pick the quadrant and rotate/reflect the
    coordinates found so far into it."""
    x = d * 0
    y = d * 0
    t = d
    for level in tl.static_range(ORDER):
        side = 1 << level
        rx = (t // 2) & 1
        ry = (t ^ rx) & 1
        flip = (ry == 0) & (rx == 1)
        x_flipped = tl.where(flip, side - 1 - x, x)
        y_flipped = tl.where(flip, side - 1 - y, y)
        swap = ry == 0
        x = tl.where(swap, y_flipped, x_flipped) + side * rx
        y = tl.where(swap, x_flipped, y_flipped) + side * ry
        t = t // 4
    return x, y


@triton.jit
def morton_xy(d, ORDER: tl.constexpr):
    """Z-order: even bits of ``d`` are the column offset, odd bits the row offset."""
    x = d * 0
    y = d * 0
    for level in tl.static_range(ORDER):
        x += ((d >> (2 * level)) & 1) << level
        y += ((d >> (2 * level + 1)) & 1) << level
    return x, y


@triton.jit
def blocked_curve(pid, num_pid_m, num_pid_n, ORDER: tl.constexpr, HILBERT: tl.constexpr):
    """Tile of ``pid``: blocks of ``2**ORDER`` tiles a side, row-major; Hilbert
    (``HILBERT = 1``) or Morton (``0``) inside full blocks, column-major in cut ones."""
    first_m, first_n, height, width, inner = supertile(pid, num_pid_m, num_pid_n, 1 << ORDER, 1 << ORDER)
    if HILBERT:
        dx, dy = hilbert_xy(inner, ORDER)
    else:
        dx, dy = morton_xy(inner, ORDER)
    full = (height == (1 << ORDER)) & (width == (1 << ORDER))
    pid_m = first_m + tl.where(full, dy, inner % height)
    pid_n = first_n + tl.where(full, dx, inner // height)
    return pid_m * num_pid_n + pid_n
