"""benchmarks/calibration_table.py: how it reads the verdicts of the A/A and known-bad controls.

Since the job line names a same-permutation cell's verdict as the swizzle's code ("same tile
order; code cost x0.999 [0.998, 1.001] (no difference detected)"), every identity_copy verdict
reads that way; the table once counted all of them as false positives (30 of 30)."""
from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd
import pytest

from tests.cli_fork import run_script

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "calibration_table.py"
sys.path.insert(0, str(SCRIPT.parent))
import calibration_table as ct  # noqa: E402


@pytest.mark.parametrize("verdict, outcome", [
    ("slower (x0.8345 [0.8307, 0.8380])", "slower"),
    ("no difference detected", "no difference detected"),
    ("same tile order; code cost x0.999 [0.998, 1.001] (no difference detected)",
     "same order: no difference detected"),
    ("same tile order; code cost x0.979 [0.971, 0.987] (slower)", "same order: slower"),
    ("same tile order: the swizzle's code, not its order (higher)", "same order: higher"),
])
def test_word_is_the_outcome(verdict, outcome):
    assert ct.word(verdict) == outcome


def test_false_positives_count_only_a_and_a_cells_with_an_effect():
    same = "same tile order; code cost x1.000 [0.998, 1.002] (no difference detected)"
    l2_same = "same tile order: the swizzle's code, not its order (no difference detected)"
    runs = pd.DataFrame({
        "swizzle": ["identity_copy", "identity_copy", "identity_copy", "scatter"],
        "verdict": [same, "same tile order; code cost x0.990 [0.985, 0.995] (slower)", same, "slower"],
        "l2_verdict": [l2_same, l2_same, "same tile order: the swizzle's code, not its order (higher)", "lower"],
    })
    assert ct.false_positives(runs) == (1, 1, 3)


def test_a_missing_store_is_named_and_not_created(tmp_path):
    got = run_script(SCRIPT, ["nothing_here.db"], cwd=tmp_path, timeout=120)
    assert got.returncode != 0 and "no such MLflow store: nothing_here.db" in got.stderr
    assert list(tmp_path.iterdir()) == []
