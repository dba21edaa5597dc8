"""Per launch of a lookup probe's ncu output: the L2 read sectors the SMs sent, the read lookups
(hits + misses), the read-lookup hit rate and ncu's all-traffic hit rate.

    python benchmarks/probes/sector_balance.py tests/fixtures/ncu/lookup_passes/harness/probe_*.txt

ncu replays a launch in several passes to collect 35 metrics, so the sector count and the lookup
counts can come from different executions of the same launch; their difference ("not looked up",
% of the sectors, negative where the lookups' pass saw more) is how much such counts move from one
execution to the next.  The lookup hit rate comes from one pair of counters and holds within about
a point between launches of one order; ncu's all-traffic percentage swings far more on some grids
(docs/profilers.md).
"""
from __future__ import annotations

import gzip
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from run_l2_lookups import parse_raw  # noqa: E402

from harness.profilers.ncu import METRIC_L2_HIT_RATE as ALL_PCT  # noqa: E402
from harness.profilers.ncu import METRIC_L2_READ_HITS as HITS, METRIC_L2_READ_MISSES as MISSES  # noqa: E402

#: The read sectors the SMs sent the L2 (the 35-metric probe collects it; the harness does not).
SECTORS = "lts__t_sectors_srcunit_tex_op_read.sum"


def balance(text: str) -> list[dict]:
    """One record per profiled launch of a probe's saved output: its order (from the probe's
    ``launched LAYER ORDER`` lines), read sectors and the share of them not looked up (%; None
    when the probe did not collect the sector count), read lookups (sectors), the read-lookup hit
    rate and ncu's all-traffic hit rate (%)."""
    orders = [line.split(maxsplit=2)[2] for line in text.splitlines() if line.startswith("launched ")]
    names, rows = parse_raw(text)
    out = []
    for i, row in enumerate(rows):
        value = {n: float(v.replace(",", "")) for n, v in zip(names, row) if n in (SECTORS, HITS, MISSES, ALL_PCT)}
        if not {HITS, MISSES} <= value.keys():
            continue
        lookups = value[HITS] + value[MISSES]
        sectors = value.get(SECTORS)
        out.append({"order": orders[i] if i < len(orders) else "?", "sectors": sectors, "lookups": lookups,
                    "not_looked_up_pct": None if sectors is None else 100.0 * (sectors - lookups) / sectors,
                    "lookup_hit_rate": 100.0 * value[HITS] / lookups, "all_traffic_pct": value.get(ALL_PCT)})
    return out


def main(paths: list[str]) -> None:
    for path in paths:
        text = gzip.open(path, "rt").read() if path.endswith(".gz") else Path(path).read_text()
        print(path)
        for r in balance(text):
            pct = "-" if r["all_traffic_pct"] is None else f"{r['all_traffic_pct']:6.2f}"
            sectors = "" if r["sectors"] is None else (f"read sectors {r['sectors']:>11,.0f}  not looked up "
                                                         f"{r['not_looked_up_pct']:5.1f} %  ")
            print(f"  {r['order'][:12]:12s} {sectors}lookups {r['lookups']:>11,.0f}  lookup hit rate "
                  f"{r['lookup_hit_rate']:6.2f} %  ncu all-traffic {pct} %")


if __name__ == "__main__":
    main(sys.argv[1:])
