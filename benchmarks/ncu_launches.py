"""Every profiled launch of a job, as ncu counted it: the spread a job's mean hides.

    python benchmarks/ncu_launches.py REPORT/ncu.csv [REPORT2/ncu.csv ...] --repeats 8 --shapes l19 l23

The worker launches a job with a baseline in ABBA pairs (candidate, baseline, baseline,
candidate, ...; :func:`harness.profilers.worker.launch_schedule`), ``repeats`` pairs per shape,
shapes in the order of ``--shapes``; a job without one (identity) launches its kernel
``repeats`` times per shape.  Prints one line per launch: its arm, the all-traffic hit rate
(``lts__t_sector_hit_rate.pct``, %), the read-lookup hit rate (%), the duration (us) and the
DRAM bytes read (MB); then per shape and arm the mean and standard deviation of both rates.
"""
from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from harness.profilers.ncu import parse_ncu_csv  # noqa: E402
from harness.profilers.worker import ProfileRequest, launch_schedule  # noqa: E402


def arms(num_launches: int, repeats: int, shapes: list[str]) -> list[tuple[str, str]]:
    """(shape, arm) of each launch: paired (ABBA) when there are two launches per repeat."""
    paired = num_launches == 2 * repeats * len(shapes)
    if not paired and num_launches != repeats * len(shapes):
        raise SystemExit(f"{num_launches} launches: neither {repeats} nor {2 * repeats} per shape "
                         f"for {len(shapes)} shapes ({', '.join(shapes)})")
    requests = [ProfileRequest(key=s, plan=None, repeats=repeats, paired=paired) for s in shapes]
    return launch_schedule(requests)


def _sd(values) -> str:
    """Sample standard deviation, or "-" for a single value."""
    return f"{statistics.stdev(values):.2f}" if len(values) > 1 else "-"


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("reports", nargs="+", type=Path, help="ncu.csv of one profiler launch each")
    ap.add_argument("--repeats", type=int, required=True, help="profiler.repeats of the run")
    ap.add_argument("--shapes", nargs="+", required=True, help="the job's shapes, in its order")
    args = ap.parse_args(argv)
    for report in args.reports:
        launches = parse_ncu_csv(report.read_text())
        print(f"## {report}")
        print("| launch | shape | arm | hit % (all) | read hit % | us | DRAM MB |")
        print("|---:|---|---|---:|---:|---:|---:|")
        rates: dict[tuple[str, str], list[tuple[float, float]]] = {}
        for d, (shape, arm) in zip(launches, arms(len(launches), args.repeats, args.shapes)):
            read = 100.0 * d.l2_hits / (d.l2_hits + d.l2_misses)
            rates.setdefault((shape, arm), []).append((d.l2_hit_rate, read))
            print(f"| {d.dispatch_index} | {shape} | {arm} | {d.l2_hit_rate:.2f} | {read:.2f} | "
                  f"{d.duration_ns / 1e3:.1f} | {d.dram_read_bytes / 1e6:.2f} |")
        print("\n| shape | arm | launches | hit % mean | sd | read hit % mean | sd |")
        print("|---|---|---:|---:|---:|---:|---:|")
        for (shape, arm), values in rates.items():
            hit, read = zip(*values)
            print(f"| {shape} | {arm} | {len(values)} | {statistics.mean(hit):.2f} | {_sd(hit)} | "
                  f"{statistics.mean(read):.2f} | {_sd(read)} |")
        print()


if __name__ == "__main__":
    main()
