"""Parametric swizzle families: every instance is a permutation of every grid, the generated
jit remap computes exactly an independent Python transcription, and labels are strict."""
import pytest

from swizzles import get_swizzle
from swizzles.families import FAMILIES, family_instance, generate_source, parse_label
from swizzles.permutation import check_permutation, remap_table

# num_pids 1, 2, 7, 13, 97, 100, 127, 1000 and 2-D grids that are not multiples of 8.
GRIDS = [(1, 1), (2, 1), (1, 2), (7, 1), (1, 13), (97, 1), (10, 10), (127, 1), (1000, 1), (100, 10),
         (13, 7), (5, 20), (31, 33), (8, 8), (3, 64)]

INSTANCES = [
    ("grouped_m", {"group_size": 1}), ("grouped_m", {"group_size": 4}), ("grouped_m", {"group_size": 64}),
    ("grouped_n", {"group_size": 3}), ("grouped_n", {"group_size": 8}),
    ("tiled", {"tile_m": 4, "tile_n": 2}), ("tiled", {"tile_m": 1, "tile_n": 16}), ("tiled", {"tile_m": 32, "tile_n": 32}),
    ("hilbert", {"order": 1}), ("hilbert", {"order": 3}), ("morton", {"order": 2}), ("morton", {"order": 5}),
]
XCD_STAGES = [{"num_xcds": 1, "chunk": 0}, {"num_xcds": 8, "chunk": 0}, {"num_xcds": 8, "chunk": 3},
              {"num_xcds": 8, "chunk": 16}]


# ---------------------------------------------------------------- oracles (plain Python)

def _xcd_even(pid, n, x):
    per, larger = divmod(n, x)
    xcd, local = pid % x, pid // x
    return min(xcd, larger) * (per + 1) + max(xcd - larger, 0) * per + local


def _xcd_stage(pid, n, x, chunk):
    if x == 1:
        return pid
    if chunk == 0:
        return _xcd_even(pid, n, x)
    window = x * chunk
    full = n // window * window
    if pid >= full:
        return full + _xcd_even(pid - full, n - full, x)
    local = pid // x
    return local // chunk * window + pid % x * chunk + local % chunk


def _supertile(pid, m, n, th, tw):
    band, local = divmod(pid, th * n)
    height = min(m - band * th, th)
    column, inner = divmod(local, height * tw)
    return band * th, column * tw, height, min(n - column * tw, tw), inner


def _hilbert(d, order):
    x = y = 0
    for level in range(order):
        s = 1 << level
        rx = (d // 2) & 1
        ry = (d ^ rx) & 1
        if ry == 0:
            if rx == 1:
                x, y = s - 1 - x, s - 1 - y
            x, y = y, x
        x, y, d = x + s * rx, y + s * ry, d // 4
    return x, y


def _morton(d, order):
    x = sum(((d >> (2 * i)) & 1) << i for i in range(order))
    y = sum(((d >> (2 * i + 1)) & 1) << i for i in range(order))
    return x, y


def _order(family, p, v, m, n):
    if family == "grouped_m":
        g = p["group_size"]
        first = v // (g * n) * g
        size = min(m - first, g)
        return (first + v % (g * n) % size) * n + v % (g * n) // size
    if family == "grouped_n":
        g = p["group_size"]
        first = v // (g * m) * g
        size = min(n - first, g)
        return v % (g * m) // size * n + first + v % (g * m) % size
    if family == "tiled":
        fm, fn, h, _, inner = _supertile(v, m, n, p["tile_m"], p["tile_n"])
        return (fm + inner % h) * n + fn + inner // h
    side = 1 << p["order"]
    fm, fn, h, w, inner = _supertile(v, m, n, side, side)
    if h == side and w == side:
        dx, dy = (_hilbert if family == "hilbert" else _morton)(inner, p["order"])
    else:
        dx, dy = inner // h, inner % h
    return (fm + dy) * n + fn + dx


def _oracle(family, params, m, n):
    return [_order(family, params, _xcd_stage(pid, m * n, params["num_xcds"], params["chunk"]), m, n)
            for pid in range(m * n)]


# ---------------------------------------------------------------- tests

@pytest.mark.parametrize("xcd", XCD_STAGES, ids=lambda x: f"x{x['num_xcds']}c{x['chunk']}")
@pytest.mark.parametrize("family,params", INSTANCES, ids=lambda v: str(v))
def test_every_instance_is_a_permutation_equal_to_the_oracle(family, params, xcd):
    label = family_instance(family, {**xcd, **params}).label
    remap = get_swizzle(label)
    for m, n in GRIDS:
        table = remap_table(remap, m, n, num_xcds=8, group_size=8)
        verdict = check_permutation(table)
        assert verdict.ok, f"{label} on {m}x{n}: {verdict.reason}"
        assert table.tolist() == _oracle(family, {**xcd, **params}, m, n), f"{label} on {m}x{n}"


def test_hilbert_steps_are_unit_moves_in_full_blocks():
    table = remap_table(get_swizzle("hilbert[num_xcds=1,chunk=0,order=3]"), 8, 8, 8, 8)
    cells = [divmod(int(t), 8) for t in table]
    assert all(abs(a[0] - b[0]) + abs(a[1] - b[1]) == 1 for a, b in zip(cells, cells[1:]))


def test_xcd_stage_keeps_the_dispatch_xcd_of_each_chunk():
    # With chunk 2 on 8 XCDs, XCD x runs virtual pids 2x, 2x+1 of every 16-pid window.
    table = remap_table(get_swizzle("grouped_m[num_xcds=8,chunk=2,group_size=1]"), 40, 1, 8, 8)
    for pid, tile in enumerate(table.tolist()):
        if pid < 32:
            assert tile // 2 % 8 == pid % 8


def test_labels_are_strict_and_errors_name_the_value():
    assert parse_label("tiled[num_xcds=8,chunk=0,tile_m=4,tile_n=2]").params["tile_n"] == 2
    with pytest.raises(ValueError, match=r"group_size=0 is invalid; valid: an integer from 1 to"):
        parse_label("grouped_m[num_xcds=8,chunk=0,group_size=0]")
    with pytest.raises(ValueError, match=r"not canonical: write it 'hilbert\[num_xcds=8,chunk=0,order=3\]'"):
        parse_label("hilbert[chunk=0,num_xcds=8,order=3]")
    with pytest.raises(ValueError, match=r"missing \['order'\], unknown \['side'\]"):
        parse_label("morton[num_xcds=8,chunk=0,side=3]")
    with pytest.raises(ValueError, match="unknown swizzle family 'zigzag'; valid families: grouped_m"):
        parse_label("zigzag[num_xcds=8]")
    with pytest.raises(ValueError, match="is not of the form"):
        parse_label("hilbert[order=__import__('os')]")
    with pytest.raises(ValueError, match=r"or a family label such as grouped_m\[num_xcds=8"):
        get_swizzle("zigzag")


def test_generated_source_holds_the_literal_parameters():
    source = generate_source(parse_label("tiled[num_xcds=8,chunk=4,tile_m=16,tile_n=2]"))
    assert "virtual = xcd_chunk(pid, num_pid_m * num_pid_n, 8, 4)" in source
    assert "return order(virtual, num_pid_m, num_pid_n, 16, 2)" in source
    assert "virtual = pid\n" in generate_source(parse_label("tiled[num_xcds=1,chunk=0,tile_m=16,tile_n=2]"))


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_config_group_composes_the_canonical_label(family):
    from hydra import compose, initialize_config_module

    with initialize_config_module(config_module="swizzlebench_conf", version_base="1.3"):
        cfg = compose(config_name="config", overrides=[f"swizzle={family}", "target=mi300x", "swizzle.chunk=2"])
    label = str(cfg.swizzle.name)
    instance = parse_label(label)
    assert instance.family == family and instance.params["chunk"] == 2 and instance.params["num_xcds"] == 8
