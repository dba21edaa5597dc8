"""Nsight Compute backend: command line, CSV parsing (fixtures in tests/fixtures/ncu),
and a full run through the ncu stand-in (tests/standins/ncu).  CPU only."""
from __future__ import annotations

from pathlib import Path

import pytest

from harness.profilers import ncu
from harness.profilers.base import L2Reading
from harness.profilers.ncu import NCU_METRICS, build_ncu_command, find_ncu, ncu_version, parse_ncu_csv
from tests.standin_workload import JOB, expected_counters, fake_worker, run

FIXTURES = Path(__file__).parents[1] / "fixtures" / "ncu"
STANDINS = Path(__file__).parents[1] / "standins"
STANDIN_NCU = STANDINS / "ncu"

HEADER = ('"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size",'
          '"Grid Size","Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"')


def one_metric_csv(metric: str, unit: str, value: str) -> str:
    """A long-format CSV with one launch and one metric."""
    return (HEADER + "\n" + f'"0","1","python","h","k","1","7","(1, 1, 1)","(1, 1, 1)","0","9.0",'
            f'"Command line profiler metrics","{metric}","{unit}","{value}"\n')


# %% build_ncu_command

def test_metrics_list_is_the_agreed_one():
    assert NCU_METRICS == ["lts__t_sector_hit_rate.pct", "lts__t_sectors_srcunit_tex_op_read_lookup_hit.sum",
                           "lts__t_sectors_srcunit_tex_op_read_lookup_miss.sum", "gpu__time_duration.sum",
                           "dram__bytes_read.sum", "lts__t_sectors_lookup_hit.sum", "lts__t_sectors_lookup_miss.sum"]


def test_build_command_with_log_file():
    cmd = build_ncu_command(["python", "-m", "harness.worker", "--job", "a b"], Path("/tmp/r.csv"),
                            "conv2d_.*kernel")
    assert cmd == ["ncu", "--csv", "--metrics", ",".join(NCU_METRICS), "--cache-control", "all",
                   "--clock-control", "base", "--print-units", "base", "-k", "regex:conv2d_.*kernel", "--log-file", "/tmp/r.csv",
                   "--", "python", "-m", "harness.worker", "--job", "a b"]


def test_build_command_to_stdout_with_options():
    cmd = build_ncu_command(["./w"], None, "k", cache_control="none", clock_control="none",
                            executable="/opt/nvidia/nsight-compute/2025.3.1/ncu")
    assert cmd == ["/opt/nvidia/nsight-compute/2025.3.1/ncu", "--csv", "--metrics", ",".join(NCU_METRICS),
                   "--cache-control", "none", "--clock-control", "none", "--print-units", "base", "-k", "regex:k", "--", "./w"]
    assert "--log-file" not in cmd


@pytest.mark.parametrize("kwargs, bad, option", [
    ({"cache_control": "flush"}, "'flush'", "--cache-control"),
    ({"clock_control": "boost"}, "'boost'", "--clock-control"),
])
def test_build_command_rejects_bad_control_values(kwargs, bad, option):
    with pytest.raises(ValueError) as err:
        build_ncu_command(["./w"], None, "k", **kwargs)
    message = str(err.value)
    assert bad in message and option in message
    assert ("all, none" if option == "--cache-control" else "base, none") in message


def test_build_command_rejects_empty_worker():
    with pytest.raises(ValueError, match="worker_cmd is empty"):
        build_ncu_command([], None, "k")


# %% parse_ncu_csv: the long format with everything mixed in

def test_long_format_with_noise_units_and_missing_values():
    dispatches = parse_ncu_csv((FIXTURES / "long_mixed.csv").read_text())
    assert [(d.dispatch_index, d.kernel_name) for d in dispatches] == [
        (0, "conv2d_implicit_gemm_kernel"), (1, "zero_fill_kernel"), (2, "conv2d_implicit_gemm_kernel")]

    first, fill, second = dispatches
    assert first.l2_hit_rate == pytest.approx(89.61)
    assert first.l2_hits == 1_206_784                       # "1,206,784" sector
    assert first.l2_misses == pytest.approx(147_460)       # "147.46" Ksector
    assert first.duration_ns == pytest.approx(41_220)      # "41.22" usecond
    assert first.dram_read_bytes == pytest.approx(18_870_000)   # "18.87" Mbyte (decimal)
    assert first.extra == {}

    assert fill.duration_ns == 2_912                       # "2,912" nsecond
    assert fill.dram_read_bytes == pytest.approx(512_000)  # "512.00" Kbyte
    assert (fill.l2_hit_rate, fill.l2_hits, fill.l2_misses) == (0.0, 0.0, 0.0)

    assert second.duration_ns == pytest.approx(1_020_000)  # "1.02" msecond
    assert second.l2_hit_rate == pytest.approx(90.05)
    assert second.l2_hits == 1_210_112
    assert second.l2_misses is None                        # "n/a"
    assert second.dram_read_bytes is None                  # no row at all


def test_parsed_dispatches_aggregate_into_an_l2_reading():
    conv = [d for d in parse_ncu_csv((FIXTURES / "long_mixed.csv").read_text())
            if d.kernel_name == "conv2d_implicit_gemm_kernel"]
    reading = L2Reading.from_dispatches(conv)
    assert reading.samples == 2
    assert reading.l2_hit_rate == pytest.approx((89.61 + 90.05) / 2)
    assert reading.l2_misses == pytest.approx(147_460)     # the n/a one is left out of the mean
    assert reading.profiled_time_ms == pytest.approx((0.04122 + 1.02) / 2)


@pytest.mark.parametrize("metric, unit, value, expected", [
    ("gpu__time_duration.sum", "nsecond", "13,760", 13_760),
    ("gpu__time_duration.sum", "ns", "406,240", 406_240),
    ("gpu__time_duration.sum", "usecond", "13.76", 13_760),
    ("gpu__time_duration.sum", "us", "1.5", 1_500),
    ("gpu__time_duration.sum", "msecond", "2.25", 2_250_000),
    ("gpu__time_duration.sum", "second", "0.5", 500_000_000),
    ("dram__bytes_read.sum", "byte", "1,048,576", 1_048_576),
    ("dram__bytes_read.sum", "Kbyte", "1.02", 1_020),
    ("dram__bytes_read.sum", "Mbyte", "2.36", 2_360_000),
    ("dram__bytes_read.sum", "Gbyte", "1.10", 1_100_000_000),
    ("dram__bytes_read.sum", "KB", "4", 4_000),
    ("dram__bytes_read.sum", "MB", "3", 3_000_000),
    ("lts__t_sectors_srcunit_tex_op_read_lookup_hit.sum", "Msector", "1.25", 1_250_000),
    ("lts__t_sectors_srcunit_tex_op_read_lookup_miss.sum", "", "7", 7),
    ("lts__t_sector_hit_rate.pct", "%", "99.5", 99.5),
])
def test_units_are_converted_to_base_units(metric, unit, value, expected):
    (dispatch,) = parse_ncu_csv(one_metric_csv(metric, unit, value))
    field = {"gpu__time_duration.sum": "duration_ns", "dram__bytes_read.sum": "dram_read_bytes",
             "lts__t_sector_hit_rate.pct": "l2_hit_rate",
             "lts__t_sectors_srcunit_tex_op_read_lookup_hit.sum": "l2_hits",
             "lts__t_sectors_srcunit_tex_op_read_lookup_miss.sum": "l2_misses"}[metric]
    assert getattr(dispatch, field) == pytest.approx(expected)


def test_unknown_unit_of_a_relied_on_metric_is_an_error():
    with pytest.raises(ValueError, match="gpu__time_duration.sum in unit 'fortnight'"):
        parse_ncu_csv(one_metric_csv("gpu__time_duration.sum", "fortnight", "1"))


def test_other_metrics_land_in_extra():
    (dispatch,) = parse_ncu_csv(one_metric_csv("sm__throughput.avg.pct_of_peak_sustained_elapsed", "%", "61.5"))
    assert dispatch.extra == {"sm__throughput.avg.pct_of_peak_sustained_elapsed": 61.5}
    assert dispatch.l2_hit_rate is None


# %% parse_ncu_csv: other layouts

def test_raw_page_wide_format():
    first, second = parse_ncu_csv((FIXTURES / "raw_page.csv").read_text())
    assert (first.dispatch_index, second.dispatch_index) == (0, 1)
    assert first.kernel_name == "conv2d_implicit_gemm_kernel"
    assert first.duration_ns == pytest.approx(41_220)          # usecond, from the units row
    assert first.dram_read_bytes == pytest.approx(18_870_000)  # Mbyte
    assert first.l2_hits == 1_206_784 and first.l2_misses == 147_460
    assert second.l2_hit_rate == pytest.approx(89.12)
    assert second.l2_misses is None


def test_section_output_with_rule_rows_and_trailing_commas():
    (dispatch,) = parse_ncu_csv((FIXTURES / "sections_with_rules.csv").read_text())
    assert dispatch.kernel_name == "void implicit_conv<float, 3, 3>(float const*, float const*, float*, int)"
    assert dispatch.l2_hit_rate is None and dispatch.duration_ns is None
    assert dispatch.extra == pytest.approx({
        "DRAM Frequency": 2619023151.76,          # "hz": not converted, kept as printed
        "Memory Throughput": 64.18,
        "DRAM Throughput": 0.74,
        "Duration": 406_240,                      # "ns"
        "Elapsed Cycles": 508_757,
        "Registers Per Thread": 168,
        "Shared Memory Configuration Size": 233_470,   # "233.47" Kbyte
    })


def test_repeated_header_from_a_second_process_is_skipped():
    text = (FIXTURES / "long_mixed.csv").read_text()
    header = text.splitlines()[9]
    assert header.startswith('"ID","Process ID"')
    other_process = ('"3","48299","python3.11","gpu-node-03","conv2d_implicit_gemm_kernel","1","7",'
                     '"(256, 1, 1)","(784, 1, 1)","0","9.0","Command line profiler metrics",'
                     '"lts__t_sector_hit_rate.pct","%","88.00"')
    dispatches = parse_ncu_csv(text + "==PROF== Connected to process 48299\n" + header + "\n" + other_process)
    assert len(dispatches) == 4
    assert dispatches[3].l2_hit_rate == 88.0 and dispatches[3].dispatch_index == 3


# %% parse_ncu_csv: no CSV at all

def test_no_kernels_profiled_is_an_error_quoting_ncu():
    with pytest.raises(ValueError) as err:
        parse_ncu_csv((FIXTURES / "no_kernels.txt").read_text())
    message = str(err.value)
    assert "no CSV header" in message
    assert "==WARNING== No kernels were profiled." in message
    assert "==PROF== Connected to process 5120" in message
    assert "[swizzlebench]" not in message          # the worker's own lines are left out


def test_permission_error_is_reported():
    with pytest.raises(ValueError, match="ERR_NVGPUCTRPERM"):
        parse_ncu_csv((FIXTURES / "permission_error.txt").read_text())


def test_empty_output_is_an_error():
    with pytest.raises(ValueError, match=r"no output at all"):
        parse_ncu_csv("")


# %% ncu_version / find_ncu

def test_ncu_version_of_the_stand_in():
    assert ncu_version(str(STANDIN_NCU)) == "2025.3.1.0"


def test_ncu_version_failure_raises(tmp_path):
    failing = tmp_path / "ncu"
    failing.write_text("#!/bin/sh\necho 'ncu: cannot load libcuda' >&2\nexit 7\n")
    failing.chmod(0o755)
    with pytest.raises(RuntimeError, match="exit code 7: ncu: cannot load libcuda"):
        ncu_version(str(failing))


def test_find_ncu_prefers_path(monkeypatch):
    monkeypatch.setenv("PATH", str(STANDINS))
    assert find_ncu() == str(STANDIN_NCU)


def test_find_ncu_falls_back_to_newest_standalone_install(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    installs = []
    for version in ("2025.9.0", "2025.10.1", "2024.3.2"):
        exe = tmp_path / version / "ncu"
        exe.parent.mkdir()
        exe.write_text("#!/bin/sh\n")
        exe.chmod(0o755)
        installs.append(str(exe))
    monkeypatch.setattr(ncu.glob, "glob", lambda pattern: installs)
    assert find_ncu() == str(tmp_path / "2025.10.1" / "ncu")


# %% the ncu stand-in, end to end

FAKE_WORKER = fake_worker(("conv2d_implicit_gemm_kernel", [7, 3, 1], [128, 1, 1]),
                          ("zero_fill_kernel", [16, 1, 1], [256, 1, 1]))


def assert_matches_expectation(dispatch, grid, job):
    for field, value in expected_counters(grid, job).items():
        assert getattr(dispatch, field) == pytest.approx(value), field


def test_stand_in_writes_log_file_that_parses(tmp_path):
    report = tmp_path / "report.csv"
    proc = run(build_ncu_command(FAKE_WORKER, report, "conv2d", executable=str(STANDIN_NCU)))
    assert proc.returncode == 0, proc.stderr
    assert "worker: running" in proc.stdout          # the program keeps its stdout
    assert "==PROF==" not in proc.stdout             # ncu's own output went to the log file
    (dispatch,) = parse_ncu_csv(report.read_text())
    assert dispatch.kernel_name == "conv2d_implicit_gemm_kernel" and dispatch.dispatch_index == 0
    assert_matches_expectation(dispatch, [7, 3, 1], JOB)


def test_stand_in_stdout_mixed_with_worker_output_parses():
    proc = run(build_ncu_command(FAKE_WORKER, None, ".*", cache_control="none", executable=str(STANDIN_NCU)))
    assert proc.returncode == 0, proc.stderr
    conv, fill = parse_ncu_csv(proc.stdout)
    assert (conv.kernel_name, fill.kernel_name) == ("conv2d_implicit_gemm_kernel", "zero_fill_kernel")
    assert fill.dispatch_index == 1
    assert_matches_expectation(conv, [7, 3, 1], JOB)
    assert_matches_expectation(fill, [16, 1, 1], JOB)


def test_stand_in_passes_exit_code_and_reports_no_kernels(tmp_path):
    report = tmp_path / "report.csv"
    proc = run(build_ncu_command(FAKE_WORKER, report, "no_such_kernel", executable=str(STANDIN_NCU)),
               FAKE_WORKER_EXIT="3")
    assert proc.returncode == 3
    with pytest.raises(ValueError, match="No kernels were profiled"):
        parse_ncu_csv(report.read_text())


def test_stand_in_rejects_bad_cache_control():
    proc = run([str(STANDIN_NCU), "--csv", "--cache-control", "sometimes", "--", *FAKE_WORKER])
    assert proc.returncode == 1 and "--cache-control" in proc.stderr


def test_read_pairs_follow_the_abba_schedule():
    """ncu's hits and misses are read lookups: each ABBA pair also gives the two read hit
    rates; rocprofv3's count all traffic, so it gives none."""
    from harness.profilers.base import DispatchCounters
    from harness.profilers.worker import ProfileRequest
    from harness.profilers.wrapped import attribute_by_dispatch_order

    req = ProfileRequest(key="job", plan=None, repeats=2, paired=True)   # attribution reads no plan
    # schedule: candidate, baseline (pair 0), then baseline, candidate (pair 1)
    reads = [(90, 10), (80, 20), (70, 30), (60, 40)]
    dispatches = [DispatchCounters("k", i, l2_hit_rate=50.0 + i, l2_hits=h, l2_misses=m)
                  for i, (h, m) in enumerate(reads)]
    ncu = attribute_by_dispatch_order([req], dispatches, [], reads_counted=True)["job"]
    assert ncu.pairs == [(50.0, 51.0), (53.0, 52.0)]
    assert ncu.read_pairs == [(90.0, 80.0), (60.0, 70.0)]
    assert attribute_by_dispatch_order([req], dispatches, [])["job"].read_pairs == []


def test_all_traffic_rate_comes_from_the_lookups_not_ncus_pass_mixed_percentage():
    """ncu's raw output from an H100 (unseen10/yolo3s3, 8 launches, benchmarks/probes/run_l2_lookups.py
    --metrics=...): its lts__t_sector_hit_rate.pct divides lookup hits by a sector count from another
    replay pass and read 103.08 % on the first launch.  The harness takes hits / (hits + misses) of
    the all-traffic lookups and keeps ncu's percentage beside it in ``extra``."""
    root = Path(__file__).resolve().parents[2]
    text = (root / "tests/fixtures/ncu/lookup_passes/decomp/probe_unseen10_yolo3s3.txt").read_text()
    dispatches = parse_ncu_csv(text)
    assert len(dispatches) == 8
    first = dispatches[0]
    assert first.extra["lts__t_sector_hit_rate.pct"] == pytest.approx(103.08)
    assert first.l2_hit_rate == pytest.approx(100 * 5_011_931 / (5_011_931 + 331_565))     # 93.79 %
    rates = [d.l2_hit_rate for d in dispatches]
    pcts = [d.extra["lts__t_sector_hit_rate.pct"] for d in dispatches]
    assert max(rates) - min(rates) < 1.5 and max(pcts) - min(pcts) > 20
    # Without the lookup counters (an older metric list), ncu's percentage is the rate, as before.
    old = parse_ncu_csv(one_metric_csv("lts__t_sector_hit_rate.pct", "%", "99.5"))[0]
    assert old.l2_hit_rate == 99.5 and old.extra == {}
