"""benchmarks/ncu_launches.py as a user runs it: the per-launch table of a real ncu report (ABBA pairs
told apart)."""
from __future__ import annotations

from tests.benchmarks.scripts import FIXTURES
from tests.benchmarks.scripts import run as script

FIXTURE = FIXTURES / "ncu" / "abba_l19_l23_h100.csv"


def test_launches_of_a_real_abba_report():
    got = script("ncu_launches.py", str(FIXTURE), "--repeats", "8", "--shapes", "l19", "l23")
    assert got.returncode == 0, got.stderr
    rows = [line.split("|")[1:-1] for line in got.stdout.splitlines() if line.startswith("| ") and "---" not in line]
    launches = [[c.strip() for c in r] for r in rows if len(r) == 7 and r[0].strip().isdigit()]
    assert len(launches) == 32
    # ABBA: candidate, baseline, baseline, candidate, ... and l19's 16 launches before l23's.
    assert [r[2] for r in launches[:4]] == ["candidate", "baseline", "baseline", "candidate"]
    assert {r[1] for r in launches[:16]} == {"l19"} and {r[1] for r in launches[16:]} == {"l23"}
    assert launches[0][3:5] == ["78.71", "77.42"]              # the report's first launch, as ncu wrote it
    summary = {(r[0].strip(), r[1].strip()): [c.strip() for c in r] for r in rows if len(r) == 7
               and not r[0].strip().isdigit() and r[0].strip() != "shape"}
    # l23's identity (the baseline arm): the all-traffic rate spreads over points, the read rate not.
    assert summary[("l23", "baseline")][2:] == ["8", "85.68", "4.46", "84.00", "0.68"]
    assert summary[("l23", "candidate")][2:] == ["8", "86.73", "0.07", "86.12", "0.17"]


def test_launches_refuses_a_count_that_fits_no_schedule():
    got = script("ncu_launches.py", str(FIXTURE), "--repeats", "5", "--shapes", "l19", "l23")
    assert got.returncode != 0
    assert "32 launches: neither 5 nor 10 per shape for 2 shapes (l19, l23)" in got.stderr
