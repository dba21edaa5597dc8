"""profiler=ncu keeps each launch's Nsight Compute report file (``ncu.ncu-rep``): ncu is asked to
export it, the counters are read back out of it (``ncu --import`` CSV, or NVIDIA's ``ncu_report``
module where it loads), it is an artifact of every job run it measured, and the HTML report links
it.  CPU only: the ncu stand-in (tests/standins/ncu) writes a report file of its own format."""
from __future__ import annotations

import json
import os
import shlex
import sys
import urllib.parse
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from harness.profilers.ncu import NCU_METRICS, NcuProfiler, build_ncu_command, parse_ncu_csv, read_ncu_report
from harness.profilers.ncu_rep import build_import_command, import_csv, load_ncu_report_module
from harness.report.build import build_report
from harness.report.data import artifact_href
from tests.cli_fork import run_cli
from tests.standin_workload import JOB, expected_counters, fake_worker, run

STANDINS = Path(__file__).parents[1] / "standins"
STANDIN_NCU = STANDINS / "ncu"
FAKE_MODULE = Path(__file__).parents[1] / "fixtures" / "ncu" / "fake_ncu_report"
SMALL_TILES = ["kernel.tiles.BLOCK_M=16", "kernel.tiles.BLOCK_N=16", "kernel.tiles.BLOCK_K=16"]
FAKE_WORKER = fake_worker(("conv2d_implicit_gemm_kernel", [7, 3, 1], [128, 1, 1]),
                          ("conv2d_implicit_gemm_kernel", [5, 2, 1], [128, 1, 1]))


@pytest.fixture
def no_ncu_report_module(monkeypatch):
    """Neither NVIDIA's module nor the fake is importable (whatever this machine has)."""
    monkeypatch.delitem(sys.modules, "ncu_report", raising=False)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if "extras/python" not in p and p != str(FAKE_MODULE)])
    yield
    sys.modules.pop("ncu_report", None)


def _profiled_launch(workdir: Path) -> Path:
    """Run the stand-in the way the profiler does, exporting the report; its path."""
    profiler = NcuProfiler(str(STANDIN_NCU))
    proc = run(profiler.command(FAKE_WORKER, workdir, "conv2d.*"))
    assert proc.returncode == 0, proc.stderr
    return workdir / NcuProfiler.REPORT


def test_the_command_exports_the_report_and_the_counters_are_imported_from_it(tmp_path):
    cmd = NcuProfiler("/opt/ncu").command(["./w"], tmp_path, "k")
    report = str(tmp_path / "ncu.ncu-rep")
    assert cmd[cmd.index("--export") + 1] == report and "--force-overwrite" in cmd
    assert cmd[cmd.index("--metrics") + 1] == ",".join(NCU_METRICS) and "--set" not in cmd and "--section" not in cmd
    assert cmd[cmd.index("--log-file") + 1] == str(tmp_path / "ncu_log.txt") and cmd[-2:] == ["--", "./w"]
    assert "--export" not in build_ncu_command(["./w"], None, "k")
    assert build_import_command(Path(report), "/opt/ncu") == ["/opt/ncu", "--import", report, "--csv", "--page",
                                                              "details", "--print-units", "base"]


def test_counters_come_from_the_saved_report(tmp_path, no_ncu_report_module):
    report = _profiled_launch(tmp_path)
    log = (tmp_path / "ncu_log.txt").read_text()
    assert report.stat().st_size > 0 and f"Report: {report}" in log
    assert '"ID","Process ID"' not in log          # the stand-in printed no counters: only the file has them
    profiler = NcuProfiler(str(STANDIN_NCU))
    first, second = profiler.read_dispatches(tmp_path, stdout="")
    assert profiler.reader == "csv"
    assert parse_ncu_csv((tmp_path / "ncu.csv").read_text()) == [first, second]   # ncu --import's CSV, kept
    assert first.l2_hits == expected_counters([7, 3, 1], JOB)["l2_hits"]
    assert second.l2_hits == expected_counters([5, 2, 1], JOB)["l2_hits"]
    assert {p.name for p in profiler.raw_files(tmp_path)} == {"ncu.csv", "ncu_log.txt", "ncu.ncu-rep"}


def test_ncu_report_module_reads_the_same_counters_as_the_csv(tmp_path, no_ncu_report_module, monkeypatch):
    report = _profiled_launch(tmp_path)
    from_csv = parse_ncu_csv(import_csv(report, str(STANDIN_NCU), 60))
    assert read_ncu_report(report, str(STANDIN_NCU)) is None    # no module: the CSV path
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(FAKE_MODULE), os.environ.get("PYTHONPATH", "")]))
    assert read_ncu_report(report, str(STANDIN_NCU)) == from_csv    # read in a child Python
    profiler = NcuProfiler(str(STANDIN_NCU))
    assert profiler.read_dispatches(tmp_path, stdout="") == from_csv and profiler.reader == "ncu_report"


def test_an_ncu_report_module_that_crashes_costs_nothing_but_the_cross_check(tmp_path, no_ncu_report_module, monkeypatch):
    """NVIDIA's module is native code; one that dies of SIGSEGV (as it did on an H200 node) does
    so in the reader's child: the job reads the CSV of the same report and says so."""
    report = _profiled_launch(tmp_path)
    crashing = tmp_path / "crashing"
    crashing.mkdir()
    (crashing / "ncu_report.py").write_text("import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)\n")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(crashing), os.environ.get("PYTHONPATH", "")]))
    with pytest.raises(RuntimeError, match="signal 11"):
        read_ncu_report(report, str(STANDIN_NCU))
    profiler = NcuProfiler(str(STANDIN_NCU))
    assert profiler.read_dispatches(tmp_path, stdout="") == parse_ncu_csv(import_csv(report, str(STANDIN_NCU), 60))
    assert profiler.reader == "csv"


def test_ncu_report_module_is_found_beside_the_executable(tmp_path, no_ncu_report_module):
    extras = tmp_path / "nsight-compute" / "extras" / "python"
    extras.mkdir(parents=True)
    (extras / "ncu_report.py").write_text((FAKE_MODULE / "ncu_report.py").read_text())
    exe = tmp_path / "nsight-compute" / "ncu"
    exe.write_text("#!/bin/sh\n")
    exe.chmod(0o755)
    link = tmp_path / "ncu"                        # as /usr/local/cuda/bin/ncu may be
    link.symlink_to(exe)
    module = load_ncu_report_module(str(link))
    assert module is not None and Path(module.__file__).parent == extras
    assert load_ncu_report_module(None) is not None     # now importable as is


def test_unreadable_report_is_a_profile_error_naming_ncu(tmp_path, no_ncu_report_module):
    (tmp_path / "ncu.ncu-rep").write_text("not a report")
    with pytest.raises(ValueError, match="--import .* exited with code 1: ==ERROR== Failed to open report file"):
        NcuProfiler(str(STANDIN_NCU)).read_dispatches(tmp_path, stdout="")


@pytest.mark.parametrize("location, tracking, expected", [
    ("/data/mlruns/1/abc/artifacts/profiler/ncu.ncu-rep", "", "file:///data/mlruns/1/abc/artifacts/profiler/ncu.ncu-rep"),
    ("file:///data/a%20b/ncu.ncu-rep", "", "file:///data/a%20b/ncu.ncu-rep"),
    ("mlflow-artifacts:/1/abc/artifacts/profiler/ncu.ncu-rep", "http://127.0.0.1:5000/",
     "http://127.0.0.1:5000/api/2.0/mlflow-artifacts/artifacts/1/abc/artifacts/profiler/ncu.ncu-rep"),
    ("mlflow-artifacts://srv:8080/1/abc/artifacts/x.ncu-rep", "sqlite:///m.db",
     "http://srv:8080/api/2.0/mlflow-artifacts/artifacts/1/abc/artifacts/x.ncu-rep"),
    ("s3://bucket/1/abc/artifacts/x.ncu-rep", "http://srv", "s3://bucket/1/abc/artifacts/x.ncu-rep"),
])
def test_artifact_links(location, tracking, expected):
    assert artifact_href(location, tracking) == expected


def test_sweep_keeps_each_cells_report_as_an_artifact_and_the_report_links_it(tmp_path, no_ncu_report_module):
    uri = f"sqlite:///{tmp_path}/store.db"
    env = {**os.environ, "TRITON_INTERPRET": "1", "PATH": f"{STANDINS}{os.pathsep}{os.environ['PATH']}"}
    # two shapes in the job's one ncu launch: the second's results follow the first's
    proc = run_cli(["-m", "swizzle=grouped", "shape=tiny", "shape.select=[t1,t2]", *SMALL_TILES, "profiler=ncu",
                    "profiler.repeats=2",
                    f"tracking.uri={uri}", "experiment=rep", f"hydra.sweep.dir={tmp_path}/multirun"],
                   tmp_path, env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]

    (command,) = (tmp_path / "multirun").rglob("command.txt")    # one launch for the job's shapes
    argv = shlex.split(command.read_text())
    launch_report = command.parent / "ncu.ncu-rep"
    assert argv[argv.index("--export") + 1] == str(launch_report) and "--force-overwrite" in argv

    client = MlflowClient(tracking_uri=uri)
    experiment = client.get_experiment_by_name("rep")
    jobs = [r for r in client.search_runs([experiment.experiment_id])
            if r.data.tags.get("swizzlebench.kind") == "job"]
    assert len(jobs) == 2
    results = set()
    for run_ in jobs:
        tags = run_.data.tags
        assert run_.info.status == "FINISHED", tags.get("status_reason")
        assert tags["profiler_report"] == "profiler/ncu.ncu-rep" and tags["ncu_reader"] == "csv"
        results.add(tags["profiler_report.results"])
        kept = Path(client.download_artifacts(run_.info.run_id, "profiler/ncu.ncu-rep", str(tmp_path / run_.info.run_id)))
        assert kept.stat().st_size > 0 and kept.read_bytes() == launch_report.read_bytes()
    # grouped paired with identity, 2 pairs per shape: the shapes' results are 0-3 and 4-7
    assert results == {"0-3", "4-7"}

    page = build_report(uri, "rep", out_dir=tmp_path / "report")
    html = page.read_text()
    cells = json.loads((page.parent / "results.json").read_text())
    linked = []
    for cell in cells:
        run_ = client.get_run(cell["run_id"])
        assert cell["profiler_report"] == f"{run_.info.artifact_uri}/profiler/ncu.ncu-rep"
        assert cell["profiler_report_results"] == run_.data.tags["profiler_report.results"]
        href = artifact_href(cell["profiler_report"])
        assert f'<a href="{href}">' in html
        linked.append(Path(urllib.parse.unquote(urllib.parse.urlparse(href).path)))
    assert len(linked) == 2 and all(p.read_bytes() == launch_report.read_bytes() for p in linked)
    assert "open with ncu-ui ncu.ncu-rep" in html
