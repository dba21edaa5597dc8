"""The proposer protocol end to end: ``python -m harness.search.propose`` in a subprocess on 10
formulas (valid, not permutations, syntax errors, hostile) -> 10 JSON lines with the right
verdicts, one MLflow run each, and nothing executed."""
import json
import os

import pytest
from mlflow.tracking import MlflowClient

from tests.cli_fork import run_cli

SMALL_TILES = ["kernel.tiles.BLOCK_M=16", "kernel.tiles.BLOCK_N=16", "kernel.tiles.BLOCK_K=16"]
# shape tiny-t1 with 16x16 tiles: a grid of 2 x 1 programs, the same full-size and down-scaled.
XCD_PROGRAM = ("xcd = pid % num_xcds\nlarger = num_pids % num_xcds\nper = num_pids // num_xcds\n"
               "new_pid = min(xcd, larger) * (per + 1) + max(xcd - larger, 0) * per + pid // num_xcds")


def _formulas(marker):
    return [
        ("pid", "accepted"),
        ("(pid + 1) % num_pids", "accepted"),
        ("num_pids - 1 - pid", "accepted"),
        (XCD_PROGRAM, "accepted"),
        ("pid * 0", "not_a_permutation"),
        ("pid // 2", "not_a_permutation"),
        ("pid +", "syntax_error"),
        (f"__import__('os').system('touch {marker}')", "syntax_error"),
        (f"open('{marker}', 'w')", "syntax_error"),
        (f"(lambda: __import__('os').system('touch {marker}'))() + ${{oc.env:HOME}}", "syntax_error"),
    ]


@pytest.fixture(scope="module")
def proposed(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("propose")
    marker = tmp / "MARKER"
    formulas = _formulas(marker)
    stdin = "".join(json.dumps({"id": f"f{i}", "formula": f}) + "\n" for i, (f, _) in enumerate(formulas))
    uri = f"sqlite:///{tmp}/store.db"
    env = {**os.environ, "TRITON_INTERPRET": "1", "SWIZZLEBENCH_CACHE": str(tmp / "cache")}
    proc = run_cli(["--jsonl", "kernel=igemm", "shape=tiny", "shape.select=[t1]", *SMALL_TILES, f"tracking.uri={uri}",
                    "experiment=propose-test"], tmp, env, timeout=600, module="harness.search.propose", input=stdin)
    return proc, formulas, marker, uri, tmp


def test_one_json_line_per_formula_with_the_right_verdict(proposed):
    proc, formulas, _, _, _ = proposed
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    assert len(lines) == len(formulas) == 10
    verdicts = [json.loads(line) for line in lines]   # stdout holds nothing but JSON
    for i, (verdict, (formula, expected)) in enumerate(zip(verdicts, formulas)):
        assert verdict["index"] == i and verdict["id"] == f"f{i}" and verdict["formula"] == formula
        assert verdict["verdict"] == expected, verdict["error"]
        assert verdict["accepted"] == (expected == "accepted")
        assert len(verdict["run_ids"]) == 1
        assert verdict["speedup"] is None and verdict["timing_verdict"].startswith("not timed")   # CPU: not timed
        if expected == "accepted":
            assert verdict["error"] is None and 0 < verdict["l2_hit_rate"] <= 100 and verdict["l2_source"] == "sim"
        else:
            assert verdict["error"] and verdict["l2_hit_rate"] is None


def test_errors_are_exact(proposed):
    proc, _, _, _, _ = proposed
    v = [json.loads(line) for line in proc.stdout.splitlines()]
    assert "not a permutation of 2 pids: 1 never run, 1 run twice; first collision pid 1 -> 0 (as pid 0)" in v[4]["error"]
    assert "line 1, column 6: syntax error" in v[6]["error"]
    assert "name '__import__' is not allowed" in v[7]["error"]
    assert "column 6: string literals are not allowed" in v[8]["error"]
    assert "allowed forms:" in v[9]["error"]


def test_nothing_executed(proposed):
    proc, _, marker, _, tmp = proposed
    assert not marker.exists() and not (tmp / "MARKER").exists()
    # Only formulas that parse reach code generation: 4 accepted + 2 non-permutations.
    generated = list((tmp / "cache" / "formulas").glob("*.py"))
    assert len(generated) == 6
    for path in generated:
        assert not any(word in path.read_text() for word in ("__import__", "system", "open(", "lambda", "oc.env"))


def test_every_formula_is_a_run_under_one_parent(proposed):
    proc, _, _, uri, _ = proposed
    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name("propose-test")
    runs = client.search_runs([exp.experiment_id], max_results=100)
    parents = [r for r in runs if r.data.tags.get("swizzlebench.kind") == "sweep"]
    children = [r for r in runs if r.data.tags.get("swizzlebench.kind") == "job"]
    assert len(parents) == 1 and parents[0].info.status == "FINISHED"
    assert len(children) == 10
    assert all(r.data.tags["mlflow.parentRunId"] == parents[0].info.run_id for r in children)
    ids = {json.loads(line)["run_ids"][0] for line in proc.stdout.splitlines()}
    assert ids == {r.info.run_id for r in children}
    assert sum(r.info.status == "FINISHED" for r in children) == 4
