"""The stage list's rule (harness.run.steps): stages run in order, a stage that does not
apply is skipped, one whose ``run`` returns False ends the job as it stands, an unexpected
error ends it FAILED at the stage's name with the exception's first line and the traceback;
and the list documented in docs/development.md is the one the code runs."""
import re
from pathlib import Path

from harness.hardware.device import describe_device
from harness.job.result import FAILED, FINISHED
from harness.run import steps
from harness.run.steps import Stage
from harness.storage.field_names import Tag
from tests.run.test_steps import SHAPES, _spec

ROOT = Path(__file__).resolve().parents[2]
CPU = describe_device("interpreter")
OPTIONS = steps.JobOptions(interpret_tiles={"BLOCK_M": 16, "BLOCK_N": 16, "BLOCK_K": 16})
SPEC = _spec("igemm", "identity", SHAPES["igemm"])


def _recording(name, seen, go_on=True):
    def run(job, ctx, result):
        seen.append(name)
        return go_on
    return Stage(name, run)


def test_stages_run_in_order_and_a_false_ends_the_job(monkeypatch):
    seen = []

    def finish(job, ctx, result):   # a stage that ends the job FINISHED, as compile.only does
        seen.append("b")
        result.status, result.reason = FINISHED, "done at b"
        return False

    monkeypatch.setattr(steps, "STAGES", (_recording("a", seen), Stage("skipped", finish, lambda job, ctx: False),
                                          Stage("b", finish), _recording("never", seen)))
    result = steps.run_job(SPEC, CPU, OPTIONS)
    assert seen == ["a", "b"] and (result.status, result.reason) == (FINISHED, "done at b")
    assert result.tags[Tag.SPEC_HASH] == SPEC.spec_hash


def test_an_unexpected_error_fails_the_job_at_the_stage(monkeypatch):
    seen = []

    def broken(job, ctx, result):
        raise ValueError("no such value\nsecond line")

    monkeypatch.setattr(steps, "STAGES", (_recording("a", seen), Stage("boom", broken), _recording("never", seen)))
    result = steps.run_job(SPEC, CPU, OPTIONS)
    assert seen == ["a"] and result.status == FAILED and result.failed_gate == "boom"
    assert result.reason == "boom error: ValueError: no such value"
    assert "ValueError" in result.artifacts["traceback.txt"] and "broken" in result.artifacts["traceback.txt"]


def test_the_real_list_finishes_a_job_verified():
    result = steps.run_job(SPEC, CPU, OPTIONS)
    assert result.status == FINISHED, result.reason
    assert result.reason == f"verified: {result.tags[Tag.GATE_PERMUTATION]}; {result.tags[Tag.GATE_CORRECTNESS]}"


def test_the_documented_stage_list_is_the_one_run():
    text = (ROOT / "docs" / "development.md").read_text()
    rows = re.findall(r"^\| \d+ \| `(\w+)` \| [^|]+ \| `([\w.]+)`", text, re.M)
    assert [name for name, _ in rows] == [stage.name for stage in steps.STAGES]
    bodies = [stage.run.__doc__ for stage in steps.STAGES]
    assert all(body for body in bodies)
