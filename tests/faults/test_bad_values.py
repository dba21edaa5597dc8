"""Bad config values.  A value the whole job depends on stops the command before any run,
the sweep's own included (harness.preflight), with a message naming the value and the valid
ones; a value that concerns each shape is a FAILED run per shape."""
from __future__ import annotations

import pytest

from tests.faults import FAST, harness, job_lines, reason, runs_of

#: override -> what the error must say (the job stops before any run)
FAIL_FAST = {
    "isolation.mode=bogus": "isolation.mode='bogus' is invalid; valid: auto, process, none",
    "fault.kind=bogus": "fault.kind='bogus' is invalid; valid kinds: segv, hang, illegal_address, raise",
    "shape.select=[t1,nope]": "shape.select names ['nope'] not in preset 'tiny'; valid: t1, t2, t3",
    # checked for the target before any job runs (harness/job/launch_limits.py)
    "kernel.tiles.BLOCK_M=48": "kernel.tiles: kernel 'igemm': tile BLOCK_M=48 must be a power of two >= 1",
}
#: override -> what each shape's FAILED reason must say
PER_SHAPE = {
    "shape.dtype=float64": "dtype='float64' is invalid; valid dtypes: float16, bfloat16",
}


def _run(seeded_store, override: str, experiment: str):
    extra = [o for o in FAST if o.split("=")[0] != override.split("=")[0]]
    return harness(["-m", "shape=tiny", override, *extra, f"tracking.uri={seeded_store.uri}",
                    f"experiment={experiment}", f"hydra.sweep.dir={seeded_store.root}/{experiment}"],
                   cwd=seeded_store.root)


@pytest.mark.parametrize("override", list(FAIL_FAST))
def test_job_wide_bad_value_stops_the_job_with_the_valid_values(seeded_store, override):
    experiment = "bad-" + override.split("=")[0]
    proc = _run(seeded_store, override, experiment)
    assert proc.returncode != 0
    assert f"error: {FAIL_FAST[override]}" in proc.stderr and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert runs_of(seeded_store.uri, experiment, kind=None) == []   # not even the sweep's run


@pytest.mark.parametrize("override", list(PER_SHAPE))
def test_per_shape_bad_value_fails_each_run_with_the_valid_values(seeded_store, override):
    experiment = "bad-" + override.split("=")[0]
    proc = _run(seeded_store, override, experiment)
    assert proc.returncode == 0, proc.stderr[-2000:]
    runs = runs_of(seeded_store.uri, experiment)
    assert len(runs) == 3
    for run in runs:
        assert run.info.status == "FAILED"
        assert PER_SHAPE[override] in reason(run), reason(run)
    assert all(PER_SHAPE[override] in line for line in job_lines(proc))
    sweep, = runs_of(seeded_store.uri, experiment, kind="sweep")
    assert sweep.info.status == "FINISHED"
