"""Tiled raster: the tile plane cut into super-tiles of ``TILE_M x TILE_N`` tiles.

Super-tiles are visited row-major; inside one, tiles are visited column by column
(down ``TILE_M`` row-tiles, then the next column).  Programs that run together then
touch at most ``TILE_M`` row-tiles (input pixels) and ``TILE_N`` column-tiles (filters),
a working set the caller sizes to the L2.  Super-tiles on the bottom and right edges
are cut to what is left of the grid, so this is a permutation for every grid size.
With ``TILE_N >= num_pid_n`` it is exactly :mod:`swizzles.grouped` with
``GROUP_SIZE = TILE_M``; with ``TILE_M = TILE_N = 1`` it is the identity.
"""
import triton
import triton.language as tl


@triton.jit
def supertile(pid, num_pid_m, num_pid_n, TILE_M: tl.constexpr, TILE_N: tl.constexpr):
    """Where ``pid`` falls: (first row-tile, first column-tile, height, width) of its
    super-tile and its rank ``inner`` among the ``height * width`` pids of that super-tile."""
    band_pids = TILE_M * num_pid_n                    # pids in one full band of super-tiles
    band = pid // band_pids
    first_m = band * TILE_M
    height = tl.minimum(num_pid_m - first_m, TILE_M)  # the last band may be lower
    local = pid - band * band_pids
    column = local // (height * TILE_N)
    first_n = column * TILE_N
    width = tl.minimum(num_pid_n - first_n, TILE_N)   # the last super-tile may be narrower
    inner = local - column * (height * TILE_N)
    return first_m, first_n, height, width, inner


@triton.jit
def tiled(pid, num_pid_m, num_pid_n, TILE_M: tl.constexpr, TILE_N: tl.constexpr):
    first_m, first_n, height, width, inner = supertile(pid, num_pid_m, num_pid_n, TILE_M, TILE_N)
    pid_m = first_m + inner % height
    pid_n = first_n + inner // height
    return pid_m * num_pid_n + pid_n
