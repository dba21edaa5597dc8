"""benchmarks/best_of_tables.py as a user runs it: the stored runs behind the committed tables,
and ``--check`` on them (what it builds is tested in tests/kernels/test_igemm_best.py)."""
from __future__ import annotations

from kernels.tuned import load_table
from tests.benchmarks.scripts import load, run


def test_runs_prints_the_command_and_versions_of_every_run_the_tables_come_from():
    """The full commands live with the rows, not in the tables' ``how``: ``--runs`` shows them."""
    proc = run("best_of_tables.py", "--runs")
    assert proc.returncode == 0, proc.stderr
    script = load("best_of_tables.py")
    lines = {line.split(":", 1)[0]: line for line in proc.stdout.splitlines()}
    assert set(script.WS_RUNS + script.FAST_RUNS + sum(script.H200_RUNS.values(), ())) <= set(lines)
    for name, line in lines.items():
        assert "python benchmarks/conv_speed.py" in line and "Triton " in line and "torch " in line, line


def test_check_passes_on_the_committed_tables_and_writes_nothing():
    before = load_table("igemm_best", "h100")
    proc = run("best_of_tables.py", "--check")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "out of date" not in proc.stdout
    assert load_table("igemm_best", "h100") == before
