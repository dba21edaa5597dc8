"""rocprofv3's two output formats on published material: the rocpd SQLite database (built
from rocprofiler-sdk's schema, tests/fixtures/rocprofv3/rocpd/README.md says why) and a real
CSV (rocprofiler-sdk's published counter_collection sample), read by the same reader."""
import sqlite3
from pathlib import Path

import pytest

from harness.profilers.rocpd import is_rocpd, read_rocpd
from harness.profilers.rocprofv3 import read_rocprofv3_output
from harness.profilers.tcc import dram_read_bytes

FIXTURES = Path(__file__).parents[1] / "fixtures" / "rocprofv3"
ADD = "void addition_kernel<float>(float*, float const*, float const*, int, int)"
KERNELS = [ADD, "subtract_kernel(float*, float const*, float const*, int, int)",
           "multiply_kernel(float*, float const*, float const*, int, int)",
           "divide_kernel(float*, float const*, float const*, int, int)"]
DURATIONS = [52_151, 49_780, 46_818, 48_151]   # End - Start of the published sample's rows, ns


def _rocpd(tmp_path: Path) -> Path:
    """The fixture database where rocprofv3 puts it without -o: DIR/<host>/<pid>_results.db."""
    path = tmp_path / "out" / "fixture-host" / "15606_results.db"
    path.parent.mkdir(parents=True)
    con = sqlite3.connect(path)
    con.executescript((FIXTURES / "rocpd" / "schema.sql").read_text())
    con.executescript((FIXTURES / "rocpd" / "data.sql").read_text())
    con.commit()
    con.close()
    return path


def test_a_rocpd_database_is_read_like_the_csv(tmp_path):
    db = _rocpd(tmp_path)
    assert is_rocpd(db)
    dispatches = read_rocprofv3_output(tmp_path / "out")
    assert [d.kernel_name for d in dispatches] == KERNELS          # display names, by dispatch id
    assert [d.duration_ns for d in dispatches] == DURATIONS        # end - start of the dispatch
    first, second, third, _ = dispatches
    # the counters' per-XCD rows are summed per dispatch (rocpd's counters_collection view does too)
    assert (first.l2_hits, first.l2_misses) == (8 * 2400 + 28, 8 * 600 + 28)
    assert first.l2_hit_rate == pytest.approx(100 * 19_228 / (19_228 + 4_828))
    # DRAM read bytes from FETCH_SIZE's two terms: 32 B per 32 B request, 64 B per other
    assert first.dram_read_bytes == 32 * 828 + 64 * (4_028 - 828)
    assert third.dram_read_bytes == 32 * 2_428 + 64 * (7_228 - 2_428)
    assert first.extra["SQ_WAVES"] == 16_384 and first.extra["TCC_EA0_RDREQ_sum"] == 4_028
    # a dispatch without the TCC counters has no rate and no bytes
    assert second.l2_hit_rate is None and second.dram_read_bytes is None and second.extra == {"SQ_WAVES": 16_384}


def test_the_published_csv_sample(tmp_path):
    dispatches = read_rocprofv3_output(FIXTURES / "published")
    assert [d.kernel_name for d in dispatches] == KERNELS
    assert [d.duration_ns for d in dispatches] == DURATIONS        # no trace file: the counter rows' timestamps
    assert all(d.extra == {"SQ_WAVES": 16_384} and d.l2_hit_rate is None and d.dram_read_bytes is None
               for d in dispatches)
    # the same run in both formats gives the same dispatches
    _rocpd(tmp_path)
    from_db = read_rocprofv3_output(tmp_path / "out")
    assert [(d.kernel_name, d.duration_ns, d.extra["SQ_WAVES"]) for d in from_db] == \
        [(d.kernel_name, d.duration_ns, d.extra["SQ_WAVES"]) for d in dispatches]


def test_a_csv_beside_a_database_is_read_and_the_database_left(tmp_path):
    _rocpd(tmp_path)
    csv = tmp_path / "out" / "fixture-host" / "15606_counter_collection.csv"
    csv.write_text((FIXTURES / "published" / "run_counter_collection.csv").read_text())
    assert len(read_rocprofv3_output(tmp_path / "out")) == 4        # not 8: one format per run


def test_files_that_are_not_rocpd(tmp_path):
    (tmp_path / "notes.db").write_text("not sqlite")
    other = tmp_path / "other.db"
    sqlite3.connect(other).execute("CREATE TABLE t (x)").connection.commit()
    assert not is_rocpd(tmp_path / "notes.db") and not is_rocpd(other)
    with pytest.raises(ValueError, match="not a rocpd database"):
        read_rocpd(other)
    with pytest.raises(ValueError, match="no \\*counter_collection.csv or rocpd database"):
        read_rocprofv3_output(tmp_path)


@pytest.mark.parametrize("counters, expected", [
    ({"FETCH_SIZE": 2.5}, 2560.0),                                     # kilobytes
    ({"TCC_EA0_RDREQ_sum": 10, "TCC_EA0_RDREQ_32B_sum": 4}, 4 * 32 + 6 * 64),
    ({"TCC_EA0_RDREQ_sum": 10}, None),                                 # requests alone are not bytes
    ({}, None),
])
def test_dram_read_bytes(counters, expected):
    assert dram_read_bytes(counters) == expected
