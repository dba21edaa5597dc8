"""rocprofv3 backend: command line, CSV reading (fixtures in tests/fixtures/rocprofv3),
tool queries, and a full run through the stand-ins (tests/standins/rocprofv3*).  CPU only."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from harness.profilers.base import L2Reading
from harness.profilers.rocprofv3 import (ROCPROF_COUNTERS, build_rocprofv3_command, check_counters, pass_input,
                                         read_rocprofv3_output, rocprofv3_version)
from harness.profilers.tcc import counter_passes
from tests.standin_workload import JOB, expected_counters, fake_worker, run

FIXTURES = Path(__file__).parents[1] / "fixtures" / "rocprofv3"
STANDINS = Path(__file__).parents[1] / "standins"
STANDIN_ROCPROF = STANDINS / "rocprofv3"
STANDIN_AVAIL = STANDINS / "rocprofv3-avail"
CONV = "conv2d_implicit_gemm_kernel"


def rate(hits: float, misses: float) -> float:
    return 100 * hits / (hits + misses)


# %% build_rocprofv3_command

def test_default_counters():
    # the hit rate's two and FETCH_SIZE's two terms (DRAM read bytes): four TCC counters, one pass
    assert ROCPROF_COUNTERS == ["TCC_HIT_sum", "TCC_MISS_sum", "TCC_EA0_RDREQ_sum", "TCC_EA0_RDREQ_32B_sum"]
    assert counter_passes(ROCPROF_COUNTERS) == [ROCPROF_COUNTERS]


def test_build_command():
    cmd = build_rocprofv3_command(["python", "-m", "harness.worker"], Path("/tmp/prof"), "job7", "conv2d_.*",
                                  counters=["TCC_HIT_sum", "TCC_MISS_sum"])
    assert cmd == ["rocprofv3", "--pmc", "TCC_HIT_sum", "TCC_MISS_sum", "--kernel-trace",
                   "--kernel-include-regex", "conv2d_.*", "--output-format", "csv",
                   "-d", "/tmp/prof", "-o", "job7", "--", "python", "-m", "harness.worker"]


def test_build_command_with_other_counters_and_executable():
    cmd = build_rocprofv3_command(["./w"], Path("out"), "n", "k",
                                  counters=["TCC_HIT_sum", "TCC_MISS_sum", "TCC_EA0_RDREQ_sum"],
                                  executable="/opt/rocm/bin/rocprofv3")
    assert cmd[:5] == ["/opt/rocm/bin/rocprofv3", "--pmc", "TCC_HIT_sum", "TCC_MISS_sum", "TCC_EA0_RDREQ_sum"]
    assert cmd[-2:] == ["--", "./w"]


@pytest.mark.parametrize("worker, counters, message", [
    (["./w"], [], "counters is empty"),
    ([], ROCPROF_COUNTERS, "worker_cmd is empty"),
])
def test_build_command_rejects_empty_lists(worker, counters, message):
    with pytest.raises(ValueError, match=message):
        build_rocprofv3_command(worker, Path("out"), "n", "k", counters=counters)


# %% read_rocprofv3_output: schemas and layouts

def test_current_schema():
    first, second, third = read_rocprofv3_output(FIXTURES / "current")
    # Sorted by Dispatch_Id (2, 4, 5) although the file lists 4 first; fill kernels that are
    # only in the trace do not appear.
    assert [d.dispatch_index for d in (first, second, third)] == [0, 1, 2]
    assert first.kernel_name == second.kernel_name == CONV
    assert (first.l2_hits, first.l2_misses) == (1_206_784, 147_456)
    assert first.l2_hit_rate == pytest.approx(rate(1_206_784, 147_456))
    assert first.duration_ns == 41_222                    # from the trace, not the counter rows (+4000)
    assert first.extra == {"TCC_EA0_RDREQ_sum": 36_864}
    assert first.dram_read_bytes is None                  # requests are not bytes
    assert second.l2_hit_rate == pytest.approx(rate(1_210_112, 144_128))
    assert second.duration_ns == 41_674 and second.extra == {}


def test_very_long_kernel_name_with_commas():
    long_name = (FIXTURES / "long_kernel_name.txt").read_text().strip()
    assert len(long_name) > 1000 and "," in long_name
    third = read_rocprofv3_output(FIXTURES / "current")[2]
    assert third.kernel_name == long_name
    assert third.l2_hit_rate == 100.0 and third.duration_ns == 12_345


def test_counters_without_trace_take_counter_timestamps():
    (dispatch,) = read_rocprofv3_output(FIXTURES / "counters_only")
    assert dispatch.duration_ns == 3200098838472303 - 3200098838431081
    assert dispatch.l2_hit_rate == pytest.approx(90.0)


def test_old_schema_in_host_pid_layout():
    first, second = read_rocprofv3_output(FIXTURES / "old_schema")
    assert (first.kernel_name, first.l2_hits, first.l2_misses) == (CONV, 65_536, 16_384)
    assert first.l2_hit_rate == pytest.approx(80.0)
    assert second.l2_hit_rate == pytest.approx(87.5)
    # Joined on Dispatch_Id (1, 2), not on Correlation_Id (0, 1).
    assert (first.duration_ns, second.duration_ns) == (41_222, 40_700)


def test_schema_with_kernel_id_but_no_accum_vgpr_and_no_timestamps():
    (dispatch,) = read_rocprofv3_output(FIXTURES / "mid_schema")
    assert dispatch.l2_hit_rate == pytest.approx(75.0)
    assert dispatch.duration_ns is None


def test_pmc_passes_are_merged_per_dispatch():
    first, second = read_rocprofv3_output(FIXTURES / "multipass")
    assert (first.l2_hits, first.l2_misses) == (1_206_784, 147_456)      # pmc_1 + pmc_2
    assert first.l2_hit_rate == pytest.approx(rate(1_206_784, 147_456))
    assert first.extra == {"TCC_EA0_RDREQ_sum": 36_864}
    assert second.extra == {"TCC_EA0_RDREQ_sum": 36_100}
    assert (first.duration_ns, second.duration_ns) == (41_222, 41_674)  # pass 1's trace


def test_pass_folders_of_json_input_are_merged_too(tmp_path):
    for n in (1, 2):
        shutil.copytree(FIXTURES / "multipass" / f"pmc_{n}", tmp_path / f"pass_{n}")
    assert read_rocprofv3_output(tmp_path) == read_rocprofv3_output(FIXTURES / "multipass")


def test_several_processes_in_one_pass_are_kept_apart(tmp_path):
    source = FIXTURES / "old_schema" / "gpu-node-07"
    host = tmp_path / "gpu-node-07"
    host.mkdir()
    for name in ("counter_collection", "kernel_trace"):
        text = (source / f"5619_{name}.csv").read_text()
        (host / f"5619_{name}.csv").write_text(text)
        (host / f"5700_{name}.csv").write_text(text.replace(",5619,5619,", ",5700,5700,"))
    dispatches = read_rocprofv3_output(tmp_path)
    assert [d.dispatch_index for d in dispatches] == [0, 1, 2, 3]
    assert [d.l2_hit_rate for d in dispatches] == pytest.approx([80.0, 87.5, 80.0, 87.5])


def test_several_processes_and_several_passes_is_an_error(tmp_path):
    for n in (1, 2):
        for pid in ("100", "200"):
            target = tmp_path / f"pmc_{n}" / "host" / f"{pid}_counter_collection.csv"
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(FIXTURES / "mid_schema" / "run_counter_collection.csv", target)
    with pytest.raises(ValueError, match="several processes per pass"):
        read_rocprofv3_output(tmp_path)


def test_trace_without_dispatch_id_joins_on_correlation_id(tmp_path):
    # The 2024-07 kernel_trace had no Dispatch_Id column (rocprofiler-sdk 785cc39).
    (tmp_path / "run_counter_collection.csv").write_text(
        '"Correlation_Id","Dispatch_Id","Agent_Id","Queue_Id","Process_Id","Thread_Id","Grid_Size",'
        '"Kernel_Name","Workgroup_Size","LDS_Block_Size","Scratch_Size","VGPR_Count","SGPR_Count",'
        '"Counter_Name","Counter_Value"\n'
        '7,1,1,1,5619,5619,1024,"k",64,0,0,8,16,"TCC_HIT_sum",30\n'
        '7,1,1,1,5619,5619,1024,"k",64,0,0,8,16,"TCC_MISS_sum",10\n')
    (tmp_path / "run_kernel_trace.csv").write_text(
        '"Kind","Agent_Id","Queue_Id","Kernel_Id","Kernel_Name","Correlation_Id","Start_Timestamp",'
        '"End_Timestamp","Private_Segment_Size","Group_Segment_Size","Workgroup_Size_X","Workgroup_Size_Y",'
        '"Workgroup_Size_Z","Grid_Size_X","Grid_Size_Y","Grid_Size_Z"\n'
        '"KERNEL_DISPATCH",1,1,15,"k",1,100,900,0,0,64,1,1,1024,1,1\n'
        '"KERNEL_DISPATCH",1,1,15,"k",7,1000,1250,0,0,64,1,1,1024,1,1\n')
    (dispatch,) = read_rocprofv3_output(tmp_path)
    assert dispatch.duration_ns == 250 and dispatch.l2_hit_rate == pytest.approx(75.0)


def test_zero_hits_and_misses_give_no_rate(tmp_path):
    text = (FIXTURES / "mid_schema" / "run_counter_collection.csv").read_text()
    (tmp_path / "run_counter_collection.csv").write_text(text.replace(",300\n", ",0\n").replace(",100\n", ",0\n"))
    (dispatch,) = read_rocprofv3_output(tmp_path)
    assert (dispatch.l2_hits, dispatch.l2_misses, dispatch.l2_hit_rate) == (0, 0, None)


def test_parsed_dispatches_aggregate_into_an_l2_reading():
    reading = L2Reading.from_dispatches(read_rocprofv3_output(FIXTURES / "multipass"))
    assert reading.samples == 2
    assert reading.l2_hit_rate == pytest.approx((rate(1_206_784, 147_456) + rate(1_210_112, 144_128)) / 2)
    assert reading.profiled_time_ms == pytest.approx((41_222 + 41_674) / 2 / 1e6)


# %% read_rocprofv3_output: errors

def test_no_counter_file_lists_what_was_found(tmp_path):
    (tmp_path / "host").mkdir()
    (tmp_path / "host" / "123_kernel_trace.csv").write_text('"Kind"\n')
    (tmp_path / "host" / "123_agent_info.csv").write_text('"Node_Id"\n')
    with pytest.raises(ValueError) as err:
        read_rocprofv3_output(tmp_path)
    message = str(err.value)
    assert "no *counter_collection.csv or rocpd database below" in message
    assert "host/123_agent_info.csv" in message and "host/123_kernel_trace.csv" in message


def test_missing_or_empty_directory(tmp_path):
    with pytest.raises(ValueError, match="does not exist"):
        read_rocprofv3_output(tmp_path / "nowhere")
    with pytest.raises(ValueError, match="directory is empty"):
        read_rocprofv3_output(tmp_path)


def test_counter_file_without_counter_columns(tmp_path):
    (tmp_path / "run_counter_collection.csv").write_text('"Dispatch_Id","Kernel_Name"\n1,"k"\n')
    with pytest.raises(ValueError, match=r"missing column\(s\) \['Counter_Name', 'Counter_Value'\]"):
        read_rocprofv3_output(tmp_path)


# %% check_counters / rocprofv3_version

def test_check_counters_accepts_a_set_that_fits():
    assert check_counters(ROCPROF_COUNTERS, executable=str(STANDIN_AVAIL)) is None
    assert check_counters(ROCPROF_COUNTERS + ["TCC_EA0_RDREQ_sum"], executable=str(STANDIN_AVAIL)) is None


def test_check_counters_reports_unknown_counter():
    error = check_counters(["TCC_HIT_sum", "TCC_HITRATE"], executable=str(STANDIN_AVAIL))
    assert error is not None
    assert "Fatal error: Invalid counter name" in error and "exit code 1" in error


def test_a_set_that_needs_two_passes_is_split_and_each_pass_checked(tmp_path):
    # five TCC counters do not fit one pass on gfx942 (the stand-in's pmc-check rejects them
    # together): they are split at four, each pass is checked alone, and the command reads
    # its passes from an input file of pmc: lines
    five = ["TCC_HIT_sum", "TCC_MISS_sum", "TCC_REQ_sum", "TCC_EA0_RDREQ_sum", "TCC_EA0_RDREQ_32B_sum"]
    passes = counter_passes(five)
    assert passes == [five[:4], five[4:]]
    assert check_counters(five, executable=str(STANDIN_AVAIL)) is None
    import subprocess
    together = subprocess.run([str(STANDIN_AVAIL), "pmc-check", *five], capture_output=True, text=True)
    assert together.returncode != 0 and "not collected on agent gfx942" in together.stderr
    assert pass_input(five) == ("pmc: TCC_HIT_sum TCC_MISS_sum TCC_REQ_sum TCC_EA0_RDREQ_sum\n"
                                "pmc: TCC_EA0_RDREQ_32B_sum\n")
    cmd = build_rocprofv3_command(["./w"], Path("out"), "n", "k", counters=five, input_file=tmp_path / "in.txt")
    assert cmd[1:3] == ["-i", str(tmp_path / "in.txt")] and "--pmc" not in cmd
    with pytest.raises(ValueError, match="need 2 passes"):
        build_rocprofv3_command(["./w"], Path("out"), "n", "k", counters=five)
    # FETCH_SIZE costs its two EA0 terms
    assert counter_passes(["TCC_HIT_sum", "TCC_MISS_sum", "TCC_REQ_sum", "FETCH_SIZE", "SQ_WAVES"]) == [
        ["TCC_HIT_sum", "TCC_MISS_sum", "TCC_REQ_sum", "SQ_WAVES"], ["FETCH_SIZE"]]


def test_check_counters_without_the_tool_checks_nothing():
    assert check_counters(ROCPROF_COUNTERS, executable="rocprofv3-avail-not-installed-here") is None


def test_rocprofv3_version_of_the_stand_in():
    assert rocprofv3_version(str(STANDIN_ROCPROF)) == "1.0.0 (ROCm 7.0.0)"


def test_rocprofv3_version_failure_raises(tmp_path):
    old = tmp_path / "rocprofv3"
    old.write_text("#!/bin/sh\necho 'rocprofv3: error: unrecognized arguments: --version' >&2\nexit 2\n")
    old.chmod(0o755)
    with pytest.raises(RuntimeError, match="exit code 2: rocprofv3: error: unrecognized arguments"):
        rocprofv3_version(str(old))


# %% the rocprofv3 stand-in, end to end

FAKE_WORKER = fake_worker(("zero_fill_kernel", [16, 1, 1], [256, 1, 1]), (CONV, [7, 3, 1], [128, 1, 1]))


def _counters(grid: list[int]) -> tuple[int, int, int]:
    c = expected_counters(grid, JOB)
    return c["l2_hits"], c["l2_misses"], c["duration_ns"]


def test_stand_in_output_parses(tmp_path):
    outdir = tmp_path / "prof"
    proc = run(build_rocprofv3_command(FAKE_WORKER, outdir, "job", "conv2d", executable=str(STANDIN_ROCPROF)))
    assert proc.returncode == 0, proc.stderr
    assert "worker: running" in proc.stdout
    assert sorted(p.name for p in outdir.iterdir()) == ["job_counter_collection.csv", "job_kernel_trace.csv"]
    (dispatch,) = read_rocprofv3_output(outdir)         # only the conv dispatch was counted...
    assert len((outdir / "job_kernel_trace.csv").read_text().splitlines()) == 3   # ...both were traced
    hits, misses, duration = _counters([7, 3, 1])
    assert dispatch.kernel_name == CONV and dispatch.dispatch_index == 0
    assert (dispatch.l2_hits, dispatch.l2_misses, dispatch.duration_ns) == (hits, misses, duration)
    assert dispatch.l2_hit_rate == pytest.approx(rate(hits, misses))


def test_stand_in_multi_pass_and_host_pid_layout(tmp_path):
    # Two --pmc groups (newer rocprofv3's multi-pass CLI), no -o: pmc_N/<host>/<pid>_*.csv.
    cmd = [str(STANDIN_ROCPROF), "--pmc", "TCC_HIT_sum", "--pmc", "TCC_MISS_sum", "TCC_EA0_RDREQ_sum",
           "--kernel-trace", "--kernel-include-regex", ".*", "--output-format", "csv", "-d", str(tmp_path),
           "--", *FAKE_WORKER]
    assert run(cmd).returncode == 0
    files = sorted(str(p.relative_to(tmp_path)).split("/")[0] for p in tmp_path.rglob("*_counter_collection.csv"))
    assert files == ["pmc_1", "pmc_2"]
    fill, conv = read_rocprofv3_output(tmp_path)
    assert (fill.kernel_name, conv.kernel_name) == ("zero_fill_kernel", CONV)
    for dispatch, grid in ((fill, [16, 1, 1]), (conv, [7, 3, 1])):
        hits, misses, duration = _counters(grid)
        assert (dispatch.l2_hits, dispatch.l2_misses, dispatch.duration_ns) == (hits, misses, duration)
        assert dispatch.extra == {"TCC_EA0_RDREQ_sum": misses}


def test_stand_in_passes_exit_code(tmp_path):
    proc = run(build_rocprofv3_command(FAKE_WORKER, tmp_path, "job", "conv2d", executable=str(STANDIN_ROCPROF)),
               FAKE_WORKER_EXIT="5")
    assert proc.returncode == 5


def test_stand_in_rejects_unknown_counter(tmp_path):
    proc = run(build_rocprofv3_command(FAKE_WORKER, tmp_path, "job", "conv2d", counters=["TCC_BOGUS"],
                                       executable=str(STANDIN_ROCPROF)))
    assert proc.returncode == 1 and "TCC_BOGUS" in proc.stderr
