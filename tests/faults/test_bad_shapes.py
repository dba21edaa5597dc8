"""Bad shapes in an override of the ``tiny`` preset: each is a FAILED run saying which
value is wrong and what would be valid, and the valid shapes of the same job still run."""
from __future__ import annotations

import pytest

from tests.faults import FAST, harness, job_lines, reason, runs_of

EXPERIMENT = "bad-shapes"
OK = "{name:ok,N:1,C:4,H:5,W:5,F:4,R:3,S:3,stride:1,padding:1}"
#: shape name -> (entry of the override, what its FAILED reason must say)
BAD = {
    "big_r": ("{name:big_r,N:1,C:4,H:5,W:5,F:4,R:9,S:3,padding:1}",
              ["filter larger than padded input on H/R: 9 > 5 + 2*1", "need R <= H + 2*padding"]),
    "no_batch": ("{name:no_batch,N:0,C:4,H:5,W:5,F:4,R:3,S:3}", ["N=0 is invalid", "N must be a positive integer"]),
    "neg_c": ("{name:neg_c,N:1,C:-1,H:5,W:5,F:4,R:3,S:3}", ["C=-1 is invalid", "C must be a positive integer"]),
    "stride0": ("{name:stride0,N:1,C:4,H:5,W:5,F:4,R:3,S:3,stride:0}",
                ["stride=0 is invalid", "stride must be a positive integer"]),
    "partial": ("{name:partial,N:1,C:4,H:5}",
                ["missing ['W', 'F', 'R', 'S']", "every shape needs N, C, H, W, F, R, S"]),
    "neg_pad": ("{name:neg_pad,N:1,C:4,H:5,W:5,F:4,R:3,S:3,padding:-1}",
                ["padding=-1 is invalid", "padding must be an integer >= 0"]),
    "frac_h": ("{name:frac_h,N:1,C:4,H:5.5,W:5,F:4,R:3,S:3}", ["H=5.5 is invalid", "H must be a positive integer"]),
    "huge": ("{name:huge,N:4096,C:64,H:4096,W:4096,F:4096,R:3,S:3,padding:1}",
             ["programs exceeds 2147483647", "use a smaller shape or larger tiles"]),
}


@pytest.fixture(scope="module")
def sweep(seeded_store):
    """One job over the bad shapes, with a valid one in the middle."""
    entries = [e for e, _ in list(BAD.values())[:4]] + [OK] + [e for e, _ in list(BAD.values())[4:]]
    proc = harness(["-m", "shape=tiny", *FAST, f"shape.shapes=[{','.join(entries)}]",
                    f"tracking.uri={seeded_store.uri}", f"experiment={EXPERIMENT}",
                    f"hydra.sweep.dir={seeded_store.root}/{EXPERIMENT}"], cwd=seeded_store.root)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc, {r.data.tags["job"].split("/")[2].removeprefix("tiny-"): r
                  for r in runs_of(seeded_store.uri, EXPERIMENT)}


@pytest.mark.parametrize("name", list(BAD))
def test_bad_shape_is_a_failed_run_naming_the_value(sweep, name):
    proc, runs = sweep
    run = runs[name]
    assert run.info.status == "FAILED"
    assert run.data.tags["failed_gate"] == "shape"
    for words in BAD[name][1]:
        assert words in reason(run), reason(run)
    assert f"shape '{name}'" in reason(run)
    line = next(ln for ln in job_lines(proc) if f"/tiny-{name}/" in ln)
    assert "FAILED" in line and BAD[name][1][0] in line


def test_the_valid_shape_of_the_same_job_still_runs(sweep):
    proc, runs = sweep
    assert runs["ok"].info.status == "FINISHED", reason(runs["ok"])
    assert runs["ok"].data.metrics["max_rel_err"] < 5e-3
    assert len(job_lines(proc)) == len(BAD) + 1
