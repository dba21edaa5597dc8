"""benchmarks/probes/run_l2_lookups.py's argument parsing (the ncu half runs on the device)."""
from __future__ import annotations

import pytest

from tests.benchmarks.scripts import load

probe = load("probes/run_l2_lookups.py")


def test_orders_split_at_commas_outside_a_family_label():
    assert probe.split_orders("identity,colmajor") == ["identity", "colmajor"]
    assert probe.split_orders("identity,hilbert[num_xcds=1,chunk=0,order=3],grouped") == [
        "identity", "hilbert[num_xcds=1,chunk=0,order=3]", "grouped"]
    assert probe.split_orders("morton[num_xcds=8,chunk=2,order=4]") == ["morton[num_xcds=8,chunk=2,order=4]"]


def test_metric_sets_from_the_command_line(tmp_path):
    metrics, out, jobs = probe.parse_args([str(tmp_path), "l12:identity,colmajor"])
    assert metrics == probe.METRICS and out == tmp_path and jobs == ["l12:identity,colmajor"]
    metrics, _, _ = probe.parse_args(["--metrics=lts__t_sector_hit_rate.pct,profiler__replayer_passes", str(tmp_path),
                                      "l12:identity"])
    assert metrics == ["lts__t_sector_hit_rate.pct", "profiler__replayer_passes"]
    from harness.profilers.ncu import NCU_METRICS
    assert probe.parse_args(["--harness-metrics", str(tmp_path), "l12:identity"])[0] == NCU_METRICS
    with pytest.raises(SystemExit, match="names no metric"):
        probe.parse_args(["--metrics=", str(tmp_path), "l12:identity"])
    with pytest.raises(SystemExit, match="usage"):
        probe.parse_args([str(tmp_path)])
