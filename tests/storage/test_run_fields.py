"""The one mapping from a JobResult to its MLflow run: the typed fields reach the tag names
and values the report, the docs and the stores read."""
from harness.job.result import FINISHED, Comparison, JobResult
from harness.storage.run_fields import run_metrics, run_params, run_tags


def test_typed_fields_are_written_under_their_tag_names():
    result = JobResult(run_name="igemm/grouped/tiny-t1/w4", status=FINISHED, params={"num_warps": 4},
                       metrics={"speedup": 1}, tags={"verdict": "faster (x1.050)", "timer": "events"})
    result.comparison = Comparison(role="candidate", same_order=True, question="same config")
    assert run_tags(result) == {"verdict": "faster (x1.050)", "timer": "events", "compare.role": "candidate",
                                "compare.same_order": "true", "compare.question": "same config"}
    assert run_params(result) == {"num_warps": "4"} and run_metrics(result) == {"speedup": 1.0}
    result.comparison.same_order = False
    assert run_tags(result)["compare.same_order"] == "false"


def test_a_failed_gate_and_a_missing_comparison():
    result = JobResult(run_name="r", tags={"verdict": "not timed"}).fail("baseline failed", gate="permutation")
    assert run_tags(result) == {"verdict": "not timed", "failed_gate": "permutation"}
    result.comparison = Comparison(role="candidate", missing="baseline identity failed the permutation gate: x")
    tags = run_tags(result)
    assert tags["verdict"] == "no comparison: baseline identity failed the permutation gate: x"
    assert tags["compare.role"] == "candidate" and "compare.same_order" not in tags
    assert not result.comparison.compared and Comparison(role="candidate").compared


def test_a_job_without_a_baseline_carries_no_comparison_tags():
    assert run_tags(JobResult(run_name="r", status=FINISHED)) == {}
