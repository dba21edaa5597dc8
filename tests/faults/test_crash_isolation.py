"""Jobs that crash under ``isolation.mode=process``: a SIGSEGV, a hang past
``isolation.timeout_s`` and a Python exception on one shape each fail that run with what
happened, and the other shapes of the same job still run and finish."""
from __future__ import annotations

import pytest

from tests.faults import FAST, harness, job_lines, reason, runs_of

EXPERIMENT = "crash"
TIMEOUT_S = 4   # the hang waits this long (worker start-up not counted); a tiny job in a ready worker
               # takes under 1 s, on a loaded 2-core machine too
FAULTED = "igemm/identity/tiny-t2/w8"
#: fault kind -> what the faulted run's reason must say
EXPECTED = {
    "segv": "isolation: worker process killed by signal SIGSEGV",
    "hang": f"isolation: job timed out after {TIMEOUT_S} s (hang?); worker killed, sweep continues",
    "raise": f"plan error: RuntimeError: injected fault for {FAULTED}",
}


@pytest.fixture(scope="module")
def sweep(seeded_store):
    proc = harness(["-m", f"fault.kind={','.join(EXPECTED)}", "fault.shape=t2", "isolation.mode=process",
                    f"isolation.timeout_s={TIMEOUT_S}", "resume=false", "shape=tiny", *FAST,
                    f"tracking.uri={seeded_store.uri}", f"experiment={EXPERIMENT}",
                    f"hydra.sweep.dir={seeded_store.root}/{EXPERIMENT}"], cwd=seeded_store.root)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc, runs_of(seeded_store.uri, EXPERIMENT)


@pytest.mark.parametrize("kind", list(EXPECTED))
def test_crashed_job_fails_with_what_happened_and_the_others_finish(sweep, kind):
    proc, runs = sweep
    faulted = [r for r in runs if r.data.tags.get("job") == FAULTED]
    run, = [r for r in faulted if EXPECTED[kind] in reason(r)]
    assert run.info.status == "FAILED"
    job = list(EXPECTED).index(kind)
    lines = [ln for ln in job_lines(proc) if ln.startswith(f"[job {job} |")]
    assert [ln.split()[5] for ln in lines] == ["FINISHED", "FAILED", "FINISHED"], lines
    assert EXPECTED[kind] in lines[1]


def test_all_other_runs_finished(sweep):
    _, runs = sweep
    others = [r for r in runs if r.data.tags.get("job") != FAULTED]
    assert len(others) == 6 and all(r.info.status == "FINISHED" for r in others)
