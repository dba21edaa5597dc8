"""Real gfx942 counters from public repositories (tests/fixtures/mi300x_public/README.md): the
copies are the named blobs, rocprofv3's reader reads the MI300X vcopy counters rocprof-compute
extracted from a rocpd database, and HipKittens' MI325X GEMM gives the published cells' figures."""
from __future__ import annotations

import csv
import gzip
import hashlib
import io
import shutil
from pathlib import Path

import pytest

from harness.profilers.rocprofv3 import read_rocprofv3_output
from harness.profilers.sim.published import CELLS, HIPKITTENS, HK_SWIZZLE, NOT_REPRODUCIBLE, hipkittens_counts

FIXTURES = Path(__file__).parents[1] / "fixtures" / "mi300x_public"
VCOPY = FIXTURES / "vcopy_MI300X_A1_rocpd_pmc_perf.csv.gz"
BLOBS = {
    "vcopy_MI300X_A1_rocpd_pmc_perf.csv.gz": "ba9a58679463a4c4f690d30d85389ab34976782b",
    "vcopy_MI300X_A1_rocpd_sysinfo.csv": "e3dc468846c3861cc2ab71d768f3c551b949f30a",
    "hipkittens_mi325x_gemm4096_no_swizzle_pmc_perf.csv.gz": "4b04f6679acae1faec03bae71a69d349f8d512dd",
    "hipkittens_mi325x_gemm4096_no_swizzle_sysinfo.csv": "82d65ebec2a73c1983c038bb3befa01d071e1046",
    "hipkittens_mi325x_gemm4096_swizzle_pmc_perf.csv.gz": "157bbcf049fc91cdaf9b4046302ba37e908b4312",
    "hipkittens_mi325x_gemm4096_swizzle_sysinfo.csv": "a2adc3e1b69a951828fff93203da5dd4c1a09588",
}


def _content(path: Path) -> bytes:
    return gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()


@pytest.mark.parametrize("name, blob", sorted(BLOBS.items()))
def test_each_copy_is_the_named_blob(name, blob):
    data = _content(FIXTURES / name)
    assert hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest() == blob
    assert name in (FIXTURES / "README.md").read_text()


def _long_rows(path: Path) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(_content(path).decode())))


def test_the_reader_reads_real_mi300x_counters_from_a_rocpd_extract(tmp_path):
    """rocprof-compute's long pmc_perf.csv is rocprofv3's counter table with ``Dispatch_ID``:
    named as rocprofv3 names its counter file, the reader takes it as it is."""
    (tmp_path / "vcopy_counter_collection.csv").write_bytes(_content(VCOPY))
    dispatches = read_rocprofv3_output(tmp_path)
    rows = _long_rows(VCOPY)
    assert len(dispatches) == len({r["Dispatch_ID"] for r in rows}) == 3
    for d, dispatch_id in zip(dispatches, sorted({int(r["Dispatch_ID"]) for r in rows})):
        mine = {r["Counter_Name"]: float(r["Counter_Value"]) for r in rows if int(r["Dispatch_ID"]) == dispatch_id}
        span = {int(r["End_Timestamp"]) - int(r["Start_Timestamp"]) for r in rows if int(r["Dispatch_ID"]) == dispatch_id}
        assert d.kernel_name.startswith("vecCopy(double*")
        assert (d.l2_hits, d.l2_misses) == (mine["TCC_HIT_sum"], mine["TCC_MISS_sum"])
        assert d.l2_hit_rate == pytest.approx(100 * d.l2_hits / (d.l2_hits + d.l2_misses))
        assert d.duration_ns in span                       # one replay pass's (each pass has its own timestamps)
        assert d.extra["TCC_REQ_sum"] == mine["TCC_REQ_sum"] and "TCC_HIT[0]" in d.extra


def test_vcopy_reads_whole_lines_and_writes_half_lines():
    """What the simulator's request sizes rest on (docs/simulator.md): 8 MiB of doubles read in
    128 B requests and written in 64 B ones, the first write of a line a miss (it allocates),
    the second a hit; the reads miss (each line is read once)."""
    rows = _long_rows(VCOPY)
    first = {r["Counter_Name"]: float(r["Counter_Value"]) for r in rows if r["Dispatch_ID"] == "1"}
    nbytes = int(rows[0]["Grid_Size"]) * 8
    assert first["TCP_TCC_READ_REQ_sum"] * 128 == nbytes
    assert first["TCP_TCC_WRITE_REQ_sum"] * 64 == nbytes
    lines = nbytes // 128
    other = first["TCC_REQ_sum"] - first["TCP_TCC_READ_REQ_sum"] - first["TCP_TCC_WRITE_REQ_sum"]
    assert 0 <= other < 0.05 * lines                     # other clients' few requests (instructions, scalars)
    assert lines * 2 <= first["TCC_MISS_sum"] <= lines * 2 + other
    assert lines <= first["TCC_HIT_sum"] <= lines + other


def test_the_hipkittens_cell_is_the_rate_of_its_60_dispatches():
    (cell,) = [c for c in CELLS if c.repo == HIPKITTENS]
    assert cell.run == HK_SWIZZLE and cell.device == "MI325X"
    hits, misses, dispatches = hipkittens_counts(FIXTURES / "hipkittens_mi325x_gemm4096_swizzle_pmc_perf.csv.gz")
    assert dispatches == 60
    assert cell.measured == round(100 * hits / (hits + misses), 2)
    assert cell.counts == (round(hits / dispatches), round(misses / dispatches))


def test_the_unswizzled_hipkittens_rate_is_the_one_the_record_names():
    hits, misses, dispatches = hipkittens_counts(FIXTURES / "hipkittens_mi325x_gemm4096_no_swizzle_pmc_perf.csv.gz")
    why = dict(NOT_REPRODUCIBLE)
    (cells,) = [c for c in why if "HipKittens" in c]
    assert f"{100 * hits / (hits + misses):.2f} over {dispatches} dispatches" in cells


def test_hipkittens_counts_rejects_a_file_without_the_kernel(tmp_path):
    path = tmp_path / "pmc_perf.csv"
    path.write_text("Dispatch_ID,Kernel_Name,TCC_HIT_sum,TCC_MISS_sum\n1,other_kernel,5,5\n")
    with pytest.raises(ValueError, match="no micro_tk dispatch"):
        hipkittens_counts(path)
