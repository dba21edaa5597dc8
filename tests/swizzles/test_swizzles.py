"""The permutation gate over real remap tables, against independent Python oracles."""
import numpy as np
import pytest

from swizzles import SWIZZLES, get_swizzle
from swizzles.permutation import check_permutation, remap_table

# (num_pid_m, num_pid_n): multiples of 8, grids that are not, degenerate ones.
GRIDS = [(1, 1), (1, 7), (3, 7), (5, 5), (4, 2), (8, 8), (13, 11), (125, 8), (9, 1), (64, 1)]
VALID = ["identity", "grouped", "xcd", "xcd_grouped", "colmajor", "scatter", "identity_copy"]


def _oracle(name, pid, m, n, nx=8):
    """Pure-Python transcriptions of the seed formulas (from shared/seeds/README.md)."""
    nb = m * n
    if name == "seed_xcd":
        return (pid // nx + (pid % nx) * (nb // nx)) % nb
    if name == "seed_attempt1":
        return ((pid // nx) % nx) * (nb // nx) + pid % nx
    if name == "seed_attempt2":
        per = nb // nx
        if per == 0:
            return None  # division by zero: undefined
        return ((pid // per) % nx) * per + (pid % per) // nx
    if name == "seed_patch":
        return (pid % n) * (pid // n)
    raise KeyError(name)


@pytest.mark.parametrize("name", VALID)
@pytest.mark.parametrize("grid", GRIDS)
def test_valid_swizzles_are_permutations(name, grid):
    table = remap_table(get_swizzle(name), *grid, num_xcds=8, group_size=4)
    verdict = check_permutation(table)
    assert verdict.ok, verdict.reason
    assert sorted(table.tolist()) == list(range(grid[0] * grid[1]))


@pytest.mark.parametrize("name", ["seed_xcd", "seed_attempt1", "seed_attempt2", "seed_patch"])
@pytest.mark.parametrize("grid", GRIDS)
def test_seed_formulas_rejected_exactly_where_not_permutations(name, grid):
    m, n = grid
    expected = [_oracle(name, p, m, n) for p in range(m * n)]
    table = remap_table(get_swizzle(name), m, n, num_xcds=8, group_size=4)
    if None not in expected:
        assert table.tolist() == expected  # the jit function computes the seed's formula
        oracle_is_perm = sorted(expected) == list(range(m * n))
    else:
        oracle_is_perm = False
    verdict = check_permutation(table)
    if m * n == 1 and None in expected:
        return  # 1 pid with a division by zero: undefined on a GPU, nothing to assert
    assert verdict.ok == oracle_is_perm, (name, grid, verdict.reason)
    if not verdict.ok:
        assert verdict.reason.startswith(f"not a permutation of {m * n} pids:")


def test_seed_xcd_valid_only_on_multiples_of_8():
    fn = get_swizzle("seed_xcd")
    assert check_permutation(remap_table(fn, 125, 8, 8, 4)).ok            # 1000 pids
    bad = check_permutation(remap_table(fn, 1001, 1, 8, 4))
    assert not bad.ok and bad.never_run > 0 and bad.run_twice > 0


def test_rejection_reason_names_counts_and_first_collision():
    table = np.array([0, 0, 1, 1, 2])
    v = check_permutation(table)
    assert v.reason == ("not a permutation of 5 pids: 2 never run, 2 run twice; "
                        "first collision pid 1 -> 0 (as pid 0)")
    v = check_permutation(np.array([0, 7, 2]))
    assert not v.ok and v.out_of_range == 1 and "pid 1 -> 7" in v.reason


def test_xcd_gives_each_xcd_one_contiguous_chunk():
    """pids dealt to XCD x (pid % 8 == x) must cover one contiguous run of tiles, the first
    num_pids % 8 XCDs getting one more (aiter remap_xcd)."""
    num_pids = 8 * 12 + 5
    table = remap_table(get_swizzle("xcd"), num_pids, 1, num_xcds=8, group_size=4)
    start = 0
    for xcd in range(8):
        tiles = table[xcd::8]
        assert tiles.tolist() == list(range(start, start + len(tiles)))
        assert len(tiles) == (13 if xcd < 5 else 12)
        start += len(tiles)


def test_grouped_walks_columns_of_group_size_rows():
    table = remap_table(get_swizzle("grouped"), 4, 3, num_xcds=8, group_size=2)
    # Tutorial order for 4x3 tiles, GROUP_SIZE_M=2: (0,0) (1,0) (0,1) (1,1) (0,2) (1,2) (2,0) ...
    pairs = [(t // 3, t % 3) for t in table.tolist()]
    assert pairs[:6] == [(0, 0), (1, 0), (0, 1), (1, 1), (0, 2), (1, 2)]


def test_unknown_swizzle_lists_valid_names():
    with pytest.raises(ValueError, match="valid swizzles: colmajor, grouped, identity"):
        get_swizzle("zigzag")
    assert set(VALID) <= set(SWIZZLES)


def _scatter_oracle(n: int) -> list[int]:
    """Independent transcription of swizzles/scatter.py: a = first integer >= 0.618 n coprime to n."""
    import math
    a = max(n * 40503 // 65536, 1)
    while math.gcd(a, n) != 1:
        a += 1
    return [(pid * a) % n for pid in range(n)]


@pytest.mark.parametrize("grid", [(1, 2), (2, 2), (16, 16), (8, 32), (3, 7), (97, 1), (128, 3), (1, 1000), (7, 143)])
def test_controls_match_oracles_and_scatter_is_never_identity(grid):
    m, n = grid
    col = remap_table(get_swizzle("colmajor"), m, n, num_xcds=1, group_size=8)
    assert col.tolist() == [(p % m) * n + p // m for p in range(m * n)]
    sc = remap_table(get_swizzle("scatter"), m, n, num_xcds=1, group_size=8)
    assert sc.tolist() == _scatter_oracle(m * n)
    if m * n > 2:  # powers of two included: a fixed multiplier like 65537 would be the identity there
        assert sc.tolist() != list(range(m * n))
