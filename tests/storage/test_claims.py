"""A spec is run once even when the sweep that claimed it ends mid-check.

Another live sweep's claim (a RUNNING run of the spec, tagged with a live process of this
host) ends FINISHED right after the claimer's first read of the store: the claimer must
still see it and skip the job.  ``tests/faults/test_concurrent_sweeps.py`` runs two real
sweeps together; this test pins the interleaving that made that test fail once in CI
(2026-11-27: one spec FINISHED twice).  Each case runs on a SQLite store and, as a
``cluster`` test, through an ``mlflow server`` over a real PostgreSQL."""
from __future__ import annotations

import os

import pytest

from harness.storage.claims import owner_tags
from harness.storage.tracking import Reuse, Tracker

SPEC = "racespec0000"


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.cluster)])
def store(request, tmp_path):
    """A tracker on a SQLite store, or (``cluster``) on a server over PostgreSQL, in an
    experiment of its own."""
    if request.param == "sqlite":
        uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    else:
        uri = request.getfixturevalue("postgres_mlflow_server")
    tracker = Tracker(uri, f"claims-{tmp_path.name}", spool_dir=tmp_path / "spool")
    assert not tracker.offline, tracker.offline_reason
    return tracker


def _other_sweeps_claim(tracker: Tracker) -> str:
    """A RUNNING run of SPEC owned by a live process of this host (pytest's parent)."""
    tags = {**owner_tags(), "swizzlebench.pid": str(os.getppid()), "spec_hash": SPEC, "swizzlebench.kind": "job"}
    return tracker.client.create_run(tracker.experiment_id, run_name="other", tags=tags).info.run_id


def _finish_after_first_read(tracker: Tracker, run_id: str) -> None:
    """The other sweep finishes its run just after the claimer's first search of the store."""
    search = tracker.client.search_runs
    reads = []

    def search_then_finish(*args, **kwargs):
        found = search(*args, **kwargs)
        reads.append(kwargs.get("filter_string"))
        if len(reads) == 1:
            tracker.client.set_terminated(run_id, "FINISHED")
        return found

    tracker.client.search_runs = search_then_finish


@pytest.mark.parametrize("ends", [False, True], ids=["claim-still-running", "claim-ends-mid-check"])
def test_a_claim_of_another_live_sweep_is_never_run_twice(store, ends):
    other = _other_sweeps_claim(store)
    if ends:
        _finish_after_first_read(store, other)
    claimed = store.claim_job("igemm/identity/t1/w8", None, {}, SPEC)
    assert isinstance(claimed, Reuse), f"the job ran although run {other} of its spec was claimed: {claimed}"
    assert claimed.run_id == other
    runs = store.client.search_runs([store.experiment_id], filter_string=f"tags.spec_hash = '{SPEC}'")
    assert [r.info.run_id for r in runs] == [other]


def test_without_resume_the_spec_runs_again(store):
    other = _other_sweeps_claim(store)
    store.client.set_terminated(other, "FINISHED")
    claimed = store.claim_job("igemm/identity/t1/w8", None, {}, SPEC, resume=False)
    assert isinstance(claimed, str) and claimed != other
