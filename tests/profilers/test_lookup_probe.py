"""benchmarks/probes/run_l2_lookups.py's argument parsing (the ncu half runs on the device:
benchmarks/README.md, "What the counters count, probed")."""
from __future__ import annotations

import importlib.util
from pathlib import Path

_PATH = Path(__file__).resolve().parents[2] / "benchmarks" / "probes" / "run_l2_lookups.py"
_spec = importlib.util.spec_from_file_location("run_l2_lookups", _PATH)
probe = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(probe)


def test_orders_split_at_commas_outside_a_family_label():
    assert probe.split_orders("identity,colmajor") == ["identity", "colmajor"]
    assert probe.split_orders("identity,hilbert[num_xcds=1,chunk=0,order=3],grouped") == [
        "identity", "hilbert[num_xcds=1,chunk=0,order=3]", "grouped"]
    assert probe.split_orders("morton[num_xcds=8,chunk=2,order=4]") == ["morton[num_xcds=8,chunk=2,order=4]"]
