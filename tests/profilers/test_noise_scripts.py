"""benchmarks/ncu_launches.py and benchmarks/remeasure_table.py as a user runs them: the per-launch
table of a real ncu report (ABBA pairs told apart), and the same cells measured twice."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "fixtures" / "ncu" / "abba_l19_l23_h100.csv"


def script(name: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "benchmarks" / name), *args], capture_output=True, text=True,
                          timeout=120)


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


def _cells(path: Path, measured: list[float], predicted: list[float]) -> Path:
    pd.DataFrame({"half": "holdout", "kernel": "igemm", "shape": ["a", "b"], "swizzle": "scatter",
                  "measured_hit": measured, "pred_hit": predicted, "measured_read": measured,
                  "pred_read": predicted, "measured_delta": measured, "pred_delta": predicted,
                  "measured_read_delta": measured, "pred_read_delta": predicted}).to_csv(path, index=False)
    return path


def test_remeasure_table_by_hand(tmp_path):
    first = _cells(tmp_path / "first.csv", [1.0, -2.0], [9.0, 9.0])
    second = _cells(tmp_path / "second.csv", [2.0, 0.0], [1.0, 1.0])     # the model of the second file
    got = script("remeasure_table.py", str(first), str(second), "--pairs", "1", "3")
    assert got.returncode == 0, got.stderr
    row = next(line for line in got.stdout.splitlines() if line.startswith("| delta, all traffic"))
    cells = [c.strip() for c in row.split("|")[1:-1]]
    # |1-2| and |-2-0|: 1.5 apart; model (1, 1) vs first: 0 and 3; vs second: 1 and 1;
    # pooled (1*m1 + 3*m2) / 4 = 1.75 and -0.5: |0.75| and |1.5|.
    assert cells[1:] == ["2", "1.50", "1.50", "1.00", "1.12"]


def test_remeasure_table_pools_the_baselines_as_sim_calibrate_does(tmp_path):
    # One layer, two candidates, each measured twice.  Paired baselines (hit - delta): first run
    # 50 and 52 (pooled 51), second run 49 and 51 (pooled 50).  Pooled deltas: first 52-51 = +1 and
    # 51-51 = 0; second 52-50 = +2 and 49-50 = -1; model +1 and 0: vs first 0, vs second 1.
    def run(path: Path, hits: list[float], deltas: list[float]) -> Path:
        pd.DataFrame({"half": "holdout", "kernel": "igemm", "shape": "a", "config": "c", "baseline": "identity",
                      "swizzle": ["grouped", "xcd"], "delta_source": "paired", "measured_hit": hits,
                      "pred_hit": 0.0, "measured_read": hits, "pred_read": 0.0, "measured_delta": deltas,
                      "delta_ci_lo": [d - 1 for d in deltas], "delta_ci_hi": [d + 1 for d in deltas],
                      "pred_delta": [1.0, 0.0], "measured_read_delta": deltas, "pred_read_delta": [1.0, 0.0],
                      }).to_csv(path, index=False)
        return path

    first = run(tmp_path / "first.csv", [52.0, 51.0], [2.0, -1.0])
    second = run(tmp_path / "second.csv", [52.0, 49.0], [3.0, -2.0])
    rows = {}
    for how in ("pooled", "paired"):
        got = script("remeasure_table.py", str(first), str(second), "--delta", how)
        assert got.returncode == 0, got.stderr
        row = next(line for line in got.stdout.splitlines() if line.startswith("| delta, all traffic"))
        rows[how] = [c.strip() for c in row.split("|")[2:6]]
    assert rows["pooled"] == ["2", "1.00", "0.00", "1.00"]
    assert rows["paired"] == ["2", "1.00", "1.00", "2.00"]   # |2-3|, |-1+2|; |2-1|, |-1-0|; |3-1|, |-2-0|
