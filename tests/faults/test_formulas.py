"""User formulas (``swizzle=custom swizzle.expr=...``): one sweep over the valid ones on one
tiny shape, where a formula that is no permutation of the grid, or divides by zero on it, fails
the gate with the counts; a hostile one (dunder access, calls, lambdas, huge powers, a divisor
always 0) is a config error: the command is refused before anything is logged or compiled,
exit status 2, one line with its line, column and the allowed forms, and nothing it asks for
happens."""
from __future__ import annotations

import pytest

from swizzles.custom import ALLOWED_FORMS, parse_formula
from harness.errors import USER_ERROR_EXIT
from tests.faults import FAST, harness, job_lines, reason, runs_of

EXPERIMENT = "formulas"
#: formula -> start of its FAILED reason (tiny-t1 with 16x16 tiles has a grid of 2 x 1 = 2 pids)
NOT_PERMUTATIONS = {
    "pid * 0": "swizzle custom-",
    "(pid * 2) % num_pids": "swizzle custom-",
    "num_pids - pid": "swizzle custom-",
}
#: formula -> its divisor that is 0 at run time (undefined on a GPU: the gate refuses it on every device)
ZERO_DIVISORS = {
    "pid // (pid - pid)": "the divisor `pid - pid` of `//` is 0",
    "pid % (num_xcds - num_xcds)": "the divisor `num_xcds - num_xcds` of `%` is 0",
}
#: formula -> (column, what the refusal says)
HOSTILE = {
    "pid.__class__": (4, "attribute access `.` is not allowed"),
    "().__class__.__bases__[0].__subclasses__()": (3, "attribute access `.` is not allowed"),
    "__import__('os').system('touch PWNED')": (1, "name '__import__' is not allowed"),
    "exec('touch PWNED')": (6, "string literals are not allowed"),
    "(lambda: 1)()": (2, "keyword `lambda` is not allowed"),
    "pid ** 99999999": (5, "powers `**` are not allowed"),
    "pid // 0": (8, "division by zero: the divisor of `//` is always 0"),
}


@pytest.fixture(scope="module")
def sweep(seeded_store):
    formulas = [*NOT_PERMUTATIONS, *ZERO_DIVISORS]
    quoted = ",".join(f'"{f}"' for f in formulas)
    proc = harness(["-m", "swizzle=custom", f"swizzle.expr={quoted}", "shape=tiny", "shape.select=[t1]", *FAST,
                    f"tracking.uri={seeded_store.uri}", f"experiment={EXPERIMENT}",
                    f"hydra.sweep.dir={seeded_store.root}/{EXPERIMENT}"], cwd=seeded_store.root)
    assert proc.returncode == 0, proc.stderr[-3000:]
    runs = runs_of(seeded_store.uri, EXPERIMENT)
    assert len(runs) == len(formulas) == len(job_lines(proc))
    return proc, runs


@pytest.mark.parametrize("formula", list(NOT_PERMUTATIONS))
def test_non_permutation_fails_the_gate_with_counts(sweep, formula):
    _, runs = sweep
    run = next(r for r in runs if r.data.params.get("swizzle.formula") == parse_formula(formula).text)
    assert run.info.status == "FAILED"
    assert run.data.tags["failed_gate"] == "permutation"
    assert reason(run).startswith(NOT_PERMUTATIONS[formula])
    assert ": not a permutation of 2 pids: " in reason(run) and "never run" in reason(run)
    assert "max_rel_err" not in run.data.metrics       # never run past the gate


@pytest.mark.parametrize("formula", list(HOSTILE))
def test_hostile_formula_is_refused_with_position_and_allowed_forms(seeded_store, tmp_path, formula):
    column, problem = HOSTILE[formula]
    experiment = f"{EXPERIMENT}-hostile"
    proc = harness(["-m", "swizzle=custom", f"swizzle.expr={formula!r}", "shape=tiny", "shape.select=[t1]", *FAST,
                    f"tracking.uri={seeded_store.uri}", f"experiment={experiment}",
                    f"hydra.sweep.dir={tmp_path}/sweep"], cwd=tmp_path)
    assert proc.returncode == USER_ERROR_EXIT, proc.stderr[-2000:]
    assert proc.stdout == "" and len(proc.stderr.splitlines()) == 1, proc.stderr[-2000:]
    line = proc.stderr.strip()
    assert line.startswith(f"error: swizzle.expr={formula!r}: swizzle formula: line 1, column {column}: {problem}")
    assert line.endswith(f"; {ALLOWED_FORMS}"), line
    assert runs_of(seeded_store.uri, experiment, kind=None) == []
    assert not list(tmp_path.rglob("PWNED")) and not list(seeded_store.root.rglob("PWNED"))


@pytest.mark.parametrize("formula", list(ZERO_DIVISORS))
def test_division_by_zero_at_run_time_fails_the_gate(sweep, formula):
    _, runs = sweep
    run = next(r for r in runs if r.data.params.get("swizzle.formula") == parse_formula(formula).text)
    assert run.info.status == "FAILED" and run.data.tags["failed_gate"] == "permutation"
    assert reason(run).startswith("swizzle custom-")
    assert f": division by zero at pid 0: {ZERO_DIVISORS[formula]}; never run" in reason(run), reason(run)
    assert "max_rel_err" not in run.data.metrics


def test_each_gate_failure_is_one_line(sweep):
    """Each job line has its run's reason's first line."""
    proc, runs = sweep
    bodies = sorted(line.split(" FAILED ", 1)[1].strip() for line in job_lines(proc))
    assert bodies == sorted(reason(r).partition("\n")[0] for r in runs)
