"""The published MI300X table (docs/simulator.md, "MI300X: the published record"): its cells
are real permutations of the published kernels' programs, the seed direct conv's
predictions are pinned (the GEMM's take minutes: ``python -m harness.profilers.sim.published``),
and the mi300x target's provenance says how thin the table is."""
import re
from pathlib import Path

import numpy as np
import pytest
import yaml

from harness.profilers.sim.published import (CELLS, HIPKITTENS, HIPKITTENS_GEMM, PROBLEMS, REPO, SOURCES,
                                             TRITONBLAS, TRITONBLAS_WS, Gemm, SeedDirectConv, predict, replay)

ROOT = Path(__file__).resolve().parents[2]
TARGET = yaml.safe_load((ROOT / "conf" / "target" / "mi300x.yaml").read_text())


def test_every_cell_is_a_permutation_of_its_programs_with_a_source():
    for cell in CELLS:
        problem = PROBLEMS[cell.problem]()
        table = problem.table(cell.order)
        assert sorted(table) == list(range(len(table))), cell
        assert cell.repo in (REPO, TRITONBLAS, HIPKITTENS) and cell.url.startswith(cell.repo + "/blob/")
        assert cell.split in ("fit", "held-out")
        assert cell.device == ("MI325X" if cell.repo == HIPKITTENS else "MI300X")
    assert {c.split for c in CELLS} == {"fit", "held-out"}
    assert SOURCES == ("AMDResearch/intelliperf", "ROCm/tritonBLAS", "HazyResearch/HipKittens")


def test_a_rate_from_published_counts_is_their_ratio():
    counted = [c for c in CELLS if c.counts]
    assert counted and all(c.repo in (TRITONBLAS, HIPKITTENS) for c in counted)
    for cell in counted:
        hit, miss = cell.counts
        assert cell.measured == round(100 * hit / (hit + miss), 2), cell


def test_the_orders_are_the_published_formulas():
    conv = SeedDirectConv()
    assert conv.dims == (2, 4, 2, 2)                                  # 32 programs
    # seed formula 1 deals each XCD (pid % 8) a chunk of 4 consecutive tiles
    chunk = conv.table("xcd-chunk")
    assert [sorted(chunk[np.arange(32) % 8 == x]) for x in range(2)] == [[0, 1, 2, 3], [4, 5, 6, 7]]
    gemm = Gemm()
    assert gemm.grid == (64, 32)
    grouped = gemm.table("grouped")
    assert list(grouped[:3]) == [0, 32, 64]                           # GROUP_SIZE_M 8: down a column first


def test_tritonblas_work_stealing_gives_each_xcd_an_8_by_16_block():
    """Its per-XCD counters hand XCD x tiles x * 128 .. x * 128 + 127 (of 1024) in turn, then
    GROUP_SIZE_M 8 maps them: XCD x computes rows 8 (x // 2) .. +7, columns 16 (x % 2) .. +15."""
    assert TRITONBLAS_WS.grid == (32, 32)
    table = TRITONBLAS_WS.table("xcd-chunk-then-grouped")
    pid = np.arange(1024)
    for x in range(8):
        tiles = table[pid % 8 == x]
        rows, cols = set(tiles // 32), set(tiles % 32)
        assert rows == set(range(8 * (x // 2), 8 * (x // 2) + 8)) and cols == set(range(16 * (x % 2), 16 * (x % 2) + 16))
    assert list(table[:16:8]) == [0, 32]                               # XCD 0's first two claims: down a column


def test_the_seed_conv_cells_as_the_docs_table_gives_them():
    preds = {c.order: predict(c, TARGET, 1) for c in CELLS if c.problem == "direct-seed"}
    assert preds["identity"] == pytest.approx(87.93, abs=0.01)
    assert preds["xcd-chunk"] == pytest.approx(92.45, abs=0.01)
    assert preds["xcd-chunk-inverse"] == pytest.approx(88.91, abs=0.01)
    docs = (ROOT / "docs" / "simulator.md").read_text()
    for value in ("87.93", "92.45", "88.91"):
        assert value in docs
    # before the store requests (one lookup per written line), as the docs give them too
    per_line = {c.order: predict(c, {**TARGET, "l2_store_request_bytes": 0}, 1) for c in CELLS
                if c.problem == "direct-seed" and c.iteration == "0"}
    assert per_line["identity"] == pytest.approx(85.01, abs=0.01) and "85.01" in docs


def test_hipkittens_gemm_is_the_kernels_tile_walk():
    """B as an (N, K) matrix: a tile reads 256 rows of 128 B per K-step, as A does; the swizzle
    gives each XCD a 4 x 8 block of C's tiles (seed formula 1 on the workgroup id, WGM 4)."""
    gemm = HIPKITTENS_GEMM
    assert gemm.grid == (16, 16) and gemm.b_layout == "nk"
    table = gemm.table("xcd-chunk-then-grouped")
    pid = np.arange(256)
    for x in range(8):
        tiles = table[pid % 8 == x]
        assert len(set(tiles // 16)) == 4 and len(set(tiles % 16)) == 8
    model = gemm.plan().access_model(128)
    assert model.step_lines(0, 0).size == 256 + 256                    # A's and B's lines, none of C
    with pytest.raises(ValueError, match="b_layout='km' is invalid; valid: kn, nk"):
        Gemm(b_layout="km")


def test_the_hipkittens_cell_as_the_docs_table_gives_it():
    """The third source (about 3 s): the replay's lookups are the kernel's loads (one per 128 B
    line per K-step, as its TCP_TCC_READ_REQ_sum counts them) and C's stores in 32 B requests."""
    (cell,) = [c for c in CELLS if c.repo == HIPKITTENS]
    result = replay(cell, TARGET, 1)
    assert result.hits + result.misses == 256 * 64 * 512 + 4096 * 4096 * 2 // 32
    assert result.hit_rate == pytest.approx(80.56, abs=0.01)
    docs = (ROOT / "docs" / "simulator.md").read_text()
    assert f"| {cell.measured:g} | 80.56 | {80.56 - cell.measured:+.2f} | held-out |" in docs


@pytest.mark.slow
def test_the_tritonblas_cells_as_the_docs_table_gives_them():
    """The held-out second source (about 20 s): its prediction, and the loads' lookups the
    published counters pin (one per 128 B line per K-step; C's stores in 32 B requests)."""
    cells = [c for c in CELLS if c.repo == TRITONBLAS]
    assert {(c.problem, c.order, c.split) for c in cells} == {("gemm-tritonblas-ws", "xcd-chunk-then-grouped", "held-out")}
    result = replay(cells[0], TARGET, 1)
    assert result.hit_rate == pytest.approx(79.78, abs=0.01)
    assert result.hits + result.misses == 1024 * 128 * (256 + 256) + 8192 * 8192 * 2 // 32
    docs = (ROOT / "docs" / "simulator.md").read_text()
    for cell in cells:
        assert f"| {cell.measured:g} | 79.78 | {79.78 - cell.measured:+.2f} | held-out |" in docs


def test_the_targets_provenance_counts_the_table():
    cells, sources = re.search(r"(\d+) cells from (\d+) source", TARGET["sim_published"]).groups()
    assert int(cells) == len(CELLS) and int(sources) == len(SOURCES)
    assert not TARGET.get("sim_calibration")                          # too thin: no band, "not validated"
