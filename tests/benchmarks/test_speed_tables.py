"""benchmarks/speed_tables.py as a user runs it: docs/kernel_speed.md is what the stored runs give."""
from __future__ import annotations

from tests.benchmarks.scripts import ROOT, load, run


def test_the_committed_page_is_what_the_stored_runs_give():
    proc = run("speed_tables.py", "--check")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_each_gpu_target_names_its_command_device_driver_cudnn_and_date_and_the_mi300x_is_compiled_only():
    page = (ROOT / "docs" / "kernel_speed.md").read_text()
    script = load("speed_tables.py")
    for target in script.TARGETS:
        section = page.split(f"## {target.name.upper()}\n", 1)[1].split("\n## ", 1)[0]
        assert "python benchmarks/conv_speed.py --kernel igemm_best --table" in section
        assert "580.159.04" in section and "cuDNN 9." in section and target.date in section
        assert "| resnet | 23 |" in section
    assert "Compiled only" in page.split("## MI300X", 1)[1]


def test_a_preset_line_is_the_geomean_and_worst_of_its_rows():
    script = load("speed_tables.py")
    rows = [{"shape": "a/x", "ratio": 2.0, "cudnn_ms": 2.0, "ours_ms": 1.0},
            {"shape": "a/y", "ratio": 0.5, "cudnn_ms": 0.5, "ours_ms": 1.0},
            {"shape": "b/z", "ratio": 1.1, "cudnn_ms": 1.1, "ours_ms": 1.0}]
    lines = {p.preset: p for p in script.preset_lines(rows)}
    assert lines["a"].layers == 2 and abs(lines["a"].geomean - 1.0) < 1e-12 and lines["a"].worst == "a/y"
    assert lines["all"].layers == 3 and lines["all"].worst_ratio == 0.5
