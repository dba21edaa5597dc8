"""benchmarks/probes/run_l2_lookups.py's argument parsing and sector_balance.py on saved probe
output (the ncu half runs on the device: benchmarks/README.md, "What the counters count, probed")."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

_PATH = Path(__file__).resolve().parents[2] / "benchmarks" / "probes" / "run_l2_lookups.py"
_spec = importlib.util.spec_from_file_location("run_l2_lookups", _PATH)
probe = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(probe)


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


_ROOT = Path(__file__).resolve().parents[2]
_PASSES = _ROOT / "benchmarks/results/sim_validation_h100/simval_unseen10/lookups/passes"


def test_sector_balance_on_a_real_probe_shows_the_pass_mixed_percentage():
    """The H100 probe of unseen10/yolo3s3 (8 launches, identity and grouped alternating) with ncu's
    all-traffic percentage and its parts: the percentage went above 100 % on one launch (hits and
    sectors from different replay passes), while the lookup hit rate held within 2 points."""
    import sys

    sys.path.insert(0, str(_ROOT / "benchmarks" / "probes"))
    from sector_balance import balance

    text = (_PASSES / "harness" / "probe_unseen10_yolo3s3.txt").read_text()
    rows = balance(text)
    assert [r["order"] for r in rows] == ["identity", "grouped"] * 4
    rates = [r["lookup_hit_rate"] for r in rows]
    pct = [r["all_traffic_pct"] for r in rows]
    assert max(rates) - min(rates) < 2.0 and max(pct) - min(pct) > 10.0
    # The decomposition run: ncu's own lookup hits exceed its own sector count on the first launch.
    names, data = probe.parse_raw((_PASSES / "decomp" / "probe_unseen10_yolo3s3.txt").read_text())
    first = dict(zip(names, data[0]))
    value = {k: float(v.replace(",", "")) for k, v in first.items() if k.startswith("lts__")}
    assert value["lts__t_sector_hit_rate.pct"] > 100.0
    assert value["lts__t_sectors_lookup_hit.sum"] > value["lts__t_sectors.sum"]
