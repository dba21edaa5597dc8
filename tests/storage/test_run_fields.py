"""The one mapping from a JobResult to its MLflow run: the typed fields reach the tag names
and values the report, the docs and the stores read."""
import math
from dataclasses import replace
from math import inf, nan

import pytest

from harness.job.result import FINISHED, Comparison, JobResult
from harness.job.verdict import L2, TIME, Kind, Verdict
from harness.storage.run_fields import (bound_column, display_tags, parse_verdict, run_metrics, run_params, run_tags,
                                        store_run_name, validated, verdict_text)


def test_typed_fields_are_written_under_their_tag_names():
    result = JobResult(run_name="igemm/grouped/tiny-t1/w4", status=FINISHED, params={"num_warps": 4},
                       metrics={"speedup": 1}, tags={"verdict": "faster (x1.050)", "timer": "events"})
    result.comparison = Comparison(role="candidate", same_order=True, question="same config")
    assert run_tags(result) == {"verdict": "faster (x1.050)", "timer": "events", "compare.role": "candidate",
                                "compare.same_order": "true", "compare.question": "same config",
                                "job": "igemm/grouped/tiny-t1/w4", "display.speedup": "1.00x"}
    assert run_params(result) == {"num_warps": "4"} and run_metrics(result) == {"speedup": 1.0}
    result.comparison.same_order = False
    assert run_tags(result)["compare.same_order"] == "false"


def test_a_failed_gate_and_a_missing_comparison():
    result = JobResult(run_name="r", tags={"verdict": "not timed"}).fail("baseline failed", gate="permutation")
    assert run_tags(result) == {"verdict": "not timed", "failed_gate": "permutation", "job": "r",
                                "display.verdict": "FAILED (permutation)"}
    result.comparison = Comparison(role="candidate", missing="baseline identity failed the permutation gate: x")
    tags = run_tags(result)
    assert tags["verdict"] == "no comparison: baseline identity failed the permutation gate: x"
    assert tags["compare.role"] == "candidate" and "compare.same_order" not in tags
    assert not result.comparison.compared and Comparison(role="candidate").compared


def test_a_job_without_a_baseline_carries_no_comparison_tags():
    assert run_tags(JobResult(run_name="r", status=FINISHED)) == {"job": "r"}


def test_display_tags_round_and_show_the_verdict_that_decides():
    """The first view's columns: on a GPU the time verdict and the speedup to two decimals;
    on a CPU (not timed) the L2 verdict, said to be a prediction where simulated."""
    gpu = JobResult(run_name="r", status=FINISHED, metrics={"speedup": 1.03125, "l2_delta_pts": 3.7381})
    gpu.comparison = Comparison(role="candidate", same_order=False)
    gpu.verdict, gpu.l2_verdict = Verdict(TIME, Kind.FASTER, 1.03125, 1.01, 1.05), Verdict(L2, Kind.HIGHER, 3.7381)
    assert display_tags(gpu) == {"display.verdict": "faster", "display.speedup": "1.03x",
                                 "display.l2": "+3.7 pts (higher)"}
    cpu = JobResult(run_name="r", status=FINISHED, metrics={"l2_delta_pts": -10.32377}, tags={"l2_source": "sim"})
    cpu.comparison = Comparison(role="candidate", same_order=False)
    cpu.verdict, cpu.l2_verdict = Verdict(TIME, Kind.NOT_TIMED, detail="no GPU"), Verdict(L2, Kind.PREDICTED, -10.32)
    assert display_tags(cpu) == {"display.verdict": "L2 predicted, not validated",
                                 "display.l2": "-10.3 pts (predicted, not validated)"}
    cpu.l2_verdict = Verdict(L2, Kind.LOWER, -10.32)   # a target the model held a band on
    assert display_tags(cpu)["display.l2"] == "-10.3 pts (predicted lower)"
    baseline = JobResult(run_name="r", status=FINISHED, comparison=Comparison(role="baseline"))
    assert display_tags(baseline) == {"display.verdict": "baseline"}


def test_store_run_names_put_the_swizzle_first():
    assert store_run_name("igemm_best/grouped/resnet-l03/w8") == "grouped·resnet-l03·w8·igemm_best"
    assert store_run_name("k/a/b/tiny-t1/w4") == "a/b·tiny-t1·w4·k"     # a label with a slash stays whole
    for other in ("sweep swizzle[3] igemm tiny", "igemm/custom/pid + x", "r"):
        assert store_run_name(other) == other


# Every form a verdict tag takes (as stores written before the typed verdict hold them too):
# text -> (axis, kind, estimate, ci_lo, ci_hi, same_order, detail).
_STORED_VERDICTS = {
    "faster": (TIME, Kind.FASTER, nan, nan, nan, False, ""),
    "slower": (TIME, Kind.SLOWER, nan, nan, nan, False, ""),
    f"{Kind.NO_DIFFERENCE.word} (CI [0.9950, 1.0100])": (TIME, Kind.NO_DIFFERENCE, nan, 0.995, 1.01, False, ""),
    f"{Kind.NO_DIFFERENCE.word} (CI [-inf, inf])": (TIME, Kind.NO_DIFFERENCE, nan, -inf, inf, False, ""),
    "same tile order; code cost x0.983 [0.978, 0.988] (slower)": (TIME, Kind.SLOWER, 0.983, 0.978, 0.988, True, ""),
    "not timed (no GPU: correctness checked under the Triton interpreter)":
        (TIME, Kind.NOT_TIMED, nan, nan, nan, False, "no GPU: correctness checked under the Triton interpreter"),
    "no comparison: baseline identity failed the permutation gate: x":
        (TIME, Kind.NO_COMPARISON, nan, nan, nan, False, "baseline identity failed the permutation gate: x"),
    "higher": (L2, Kind.HIGHER, nan, nan, nan, False, ""),
    f"{Kind.NO_DIFFERENCE.word} (CI [-0.40, +0.60] pts)": (L2, Kind.NO_DIFFERENCE, nan, -0.4, 0.6, False, ""),
    "predicted, not validated (+3.70 pts)": (L2, Kind.PREDICTED, 3.7, nan, nan, False, ""),
    "same tile order: the swizzle's code, not its order (lower)": (L2, Kind.LOWER, nan, nan, nan, True, ""),
    "same tile order: the swizzle's code, not its order (predicted, not validated)":
        (L2, Kind.PREDICTED, nan, nan, nan, True, ""),
    "not profiled (profiler=none)": (L2, Kind.NOT_PROFILED, nan, nan, nan, False, "profiler=none"),
}


@pytest.mark.parametrize("text", list(_STORED_VERDICTS))
def test_a_stored_verdict_reads_back_as_the_verdict_that_writes_it(text):
    axis, kind, estimate, lo, hi, same, detail = _STORED_VERDICTS[text]
    verdict = parse_verdict(text, axis)
    assert (verdict.axis, verdict.kind, verdict.same_order, verdict.detail) == (axis, kind, same, detail)
    for got, want in ((verdict.estimate, estimate), (verdict.ci_lo, lo), (verdict.ci_hi, hi)):
        assert got == want or (math.isnan(got) and math.isnan(want)), (text, verdict)
    if kind == Kind.NO_DIFFERENCE:   # its estimate is a metric, not part of the text
        verdict = replace(verdict, estimate=1.0)
    assert verdict_text(verdict) == text


def test_no_tag_and_an_unknown_one():
    assert parse_verdict("", TIME) is None and parse_verdict(None, L2) is None and parse_verdict(nan, L2) is None
    assert parse_verdict("much quicker", TIME) == Verdict(TIME, Kind.OTHER, detail="much quicker")


def test_the_typed_verdicts_are_written_under_their_tags():
    result = JobResult(run_name="r", status=FINISHED, comparison=Comparison(role="candidate"),
                       verdict=Verdict(TIME, Kind.FASTER, 1.05, 1.02, 1.08),
                       l2_verdict=Verdict(L2, Kind.PREDICTED, 3.7), not_timed=None)
    tags = run_tags(result)
    assert tags["verdict"] == "faster" and tags["l2_verdict"] == "predicted, not validated (+3.70 pts)"
    result.comparison.missing = "baseline identity failed the correctness gate: y"
    assert run_tags(result)["verdict"] == "no comparison: baseline identity failed the correctness gate: y"
    assert run_tags(JobResult(run_name="r", not_timed="no GPU"))["timing"] == "not measured: no GPU"


def test_the_bound_tag_reads_back_as_what_bounds_the_cell():
    import pandas as pd

    from harness.measure.roofline import COMPUTE, MEMORY, RooflineReading

    texts = [RooflineReading(10.0, b, 40.0, 60.0).text for b in (COMPUTE, MEMORY)]
    assert list(bound_column(pd.Series([*texts, None]))) == [COMPUTE, MEMORY, ""]


def test_a_validation_tag_reads_back_as_validated_or_not():
    assert validated("validated on H100 ncu, 3 cells not fitted; ± covers 90 %")
    assert not validated("not validated on mi300x hardware") and not validated("") and not validated(float("nan"))
