"""benchmarks/remeasure_table.py as a user runs it: the same cells measured twice."""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from tests.benchmarks.scripts import run as script


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
