"""benchmarks/repro_table.py as a user runs it: ``--help`` prints usage, and a store path that
does not exist is an error that names it, not a new empty MLflow store (once, ``--help``,
``-h`` and ``--out`` were taken for store paths and three empty SQLite stores were committed)."""
from __future__ import annotations

import subprocess
from pathlib import Path

from tests.cli_fork import run_script

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "repro_table.py"


def run(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    return run_script(SCRIPT, list(args), cwd=tmp_path, timeout=120)


def test_help_prints_usage_and_creates_no_store(tmp_path):
    got = run(tmp_path, "--help")
    assert got.returncode == 0, got.stderr
    assert "STORE_DB" in got.stdout
    assert list(tmp_path.iterdir()) == []


def test_a_missing_store_is_named_and_not_created(tmp_path):
    got = run(tmp_path, "nothing_here.db")
    assert got.returncode != 0
    assert "no such MLflow store: nothing_here.db" in got.stderr
    assert list(tmp_path.iterdir()) == []
