"""benchmarks/probes/sector_balance.py on saved probe output of an H100 (tests/fixtures/ncu/lookup_passes)."""
from __future__ import annotations

from tests.benchmarks.scripts import FIXTURES, load

probe = load("probes/run_l2_lookups.py")
_PASSES = FIXTURES / "ncu" / "lookup_passes"


def test_sector_balance_on_a_real_probe_shows_the_pass_mixed_percentage():
    """The H100 probe of unseen10/yolo3s3 (8 launches, identity and grouped alternating) with ncu's
    all-traffic percentage and its parts: the percentage went above 100 % on one launch (hits and
    sectors from different replay passes), while the lookup hit rate held within 2 points."""
    balance = load("probes/sector_balance.py").balance
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
