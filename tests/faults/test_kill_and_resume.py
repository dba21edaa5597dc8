"""A sweep killed mid-way (SIGKILL to its process group while a job hangs), then the same
sweep run again: what had FINISHED is skipped (SKIPPED lines, runs untouched), the run the
kill interrupted is marked KILLED with the reason, and every spec ends with exactly one
FINISHED run.

The first run adds ``fault.kind=hang`` on one shape so that the kill lands mid-job; fault
options are not part of a job's spec (its hash), so the second run is the same sweep.
"""
from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import time
from collections import Counter
from dataclasses import dataclass

import pytest

from tests.cli_fork import start_cli
from tests.faults import FAST, RunState, cli_env, harness, reason, runs_of
from tests.faults.test_signals import alive, descendants

EXPERIMENT = "resume"
HUNG = "igemm/xcd/tiny-t2/w8"
KILL_DEADLINE_S = 240


@dataclass
class Story:
    before: dict[str, RunState]          # run id -> state when the sweep was killed
    resumed: subprocess.CompletedProcess


def _wait_for_hung_run(uri: str, proc) -> None:
    deadline = time.monotonic() + KILL_DEADLINE_S
    while time.monotonic() < deadline:
        assert proc.poll() is None, "the sweep ended before it could be killed"
        if any(r.data.tags.get("job") == HUNG and r.info.status == "RUNNING" for r in runs_of(uri, EXPERIMENT)):
            return
        time.sleep(0.5)
    pytest.fail(f"no RUNNING {HUNG} after {KILL_DEADLINE_S} s")


@pytest.fixture(scope="module")
def story(seeded_store) -> Story:
    from mlflow.tracking import MlflowClient

    root, uri = seeded_store.root, seeded_store.uri
    sweep = ["-m", "swizzle=identity,xcd,grouped", "shape=tiny", "shape.select=[t1,t2]", *FAST,
             "isolation.mode=process", "isolation.timeout_s=600", f"tracking.uri={uri}", f"experiment={EXPERIMENT}",
             f"hydra.sweep.dir={root}/{EXPERIMENT}"]
    # a fork of the warm CLI server, the leader of a session of its own (tests.cli_fork.start_cli)
    proc = start_cli([*sweep, "fault.kind=hang", "fault.shape=t2", "fault.swizzle=xcd"], root, cli_env(),
                     root / "killed-sweep.log")
    try:
        _wait_for_hung_run(uri, proc)
    finally:
        worker = descendants(proc.pid)           # the job's worker runs in a session of its own
        os.killpg(proc.pid, signal.SIGKILL)      # the sweep
        proc.wait(30)
        deadline = time.monotonic() + 10         # the kernel ends the hung worker with its sweep
        while alive(worker) and time.monotonic() < deadline:
            time.sleep(0.05)
        left = alive(worker)
        for pid in left:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        assert not left, f"the job's worker {left} outlived its kill -9'd sweep"
    client = MlflowClient(tracking_uri=uri)
    before = {r.info.run_id: RunState.of(r, client) for r in runs_of(uri, EXPERIMENT)}
    resumed = harness(sweep, cwd=root)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    return Story(before, resumed)


def test_finished_runs_were_skipped_not_rerun(story, seeded_store):
    from mlflow.tracking import MlflowClient

    finished = {i: s for i, s in story.before.items() if s.status == "FINISHED"}
    assert sorted(s.name for s in finished.values()) == ["igemm/identity/tiny-t1/w8", "igemm/identity/tiny-t2/w8",
                                                         "igemm/xcd/tiny-t1/w8"]
    skipped = [ln for ln in story.resumed.stdout.splitlines() if " SKIPPED " in ln]
    assert sorted(ln.split()[4] for ln in skipped) == sorted(s.name for s in finished.values())
    for line in skipped:
        assert "already FINISHED as run" in line and line.split("as run ")[1].split()[0] in finished
    client = MlflowClient(tracking_uri=seeded_store.uri)
    for run_id, state in finished.items():
        assert RunState.of(client.get_run(run_id), client) == state


def test_the_interrupted_run_is_marked_killed(story, seeded_store):
    hung = [i for i, s in story.before.items() if s.name == HUNG]
    assert len(hung) == 1 and story.before[hung[0]].status == "RUNNING"
    run = next(r for r in runs_of(seeded_store.uri, EXPERIMENT) if r.info.run_id == hung[0])
    assert run.info.status == "KILLED"
    assert reason(run) == "killed: the sweep stopped mid-job; re-run"


def test_every_spec_ends_with_exactly_one_finished_run(story, seeded_store):
    runs = runs_of(seeded_store.uri, EXPERIMENT)
    finished = Counter(r.data.tags["spec_hash"] for r in runs if r.info.status == "FINISHED")
    assert len(finished) == 6 and set(finished.values()) == {1}
    assert Counter(r.info.status for r in runs) == {"FINISHED": 6, "KILLED": 1}
    ran = [ln for ln in story.resumed.stdout.splitlines() if ln.startswith("[job ") and " SKIPPED " not in ln]
    assert len(ran) == 3 and all(" FINISHED " in ln for ln in ran)


def test_the_killed_sweeps_parent_run_is_closed_by_the_next_sweep(story, seeded_store):
    """The killed sweep never reached on_multirun_end; the re-run finds its launching
    process gone and marks its parent run KILLED, while the re-run's own sweep FINISHED."""
    sweeps = sorted(runs_of(seeded_store.uri, EXPERIMENT, kind="sweep"), key=lambda r: r.info.start_time)
    assert [r.info.status for r in sweeps] == ["KILLED", "FINISHED"]
    assert reason(sweeps[0]).startswith("killed: launching process")


def test_the_resumed_sweeps_report_has_every_cell_of_the_sweep(story, seeded_store):
    """The rerun's report is the whole sweep's: the 6 cells (3 swizzles x 2 shapes, the identity
    baseline's included), the 3 it skipped marked "from run <id>, <date>" and linked from its
    sweep run (tags swizzlebench.reused.<run id>)."""
    import pandas as pd

    report, = [ln.split("Sweep report: ")[1].strip() for ln in story.resumed.stdout.splitlines()
               if "Sweep report: " in ln]
    html = seeded_store.root / report
    table = pd.read_csv(html.parent / "table.csv", dtype=str, keep_default_na=False)
    runs = runs_of(seeded_store.uri, EXPERIMENT)
    finished = {r.info.run_id: r for r in runs if r.info.status == "FINISHED"}
    assert sorted(zip(table["swizzle"], table["shape"])) == sorted(
        (s, f"tiny-t{i}") for s in ("identity", "xcd", "grouped") for i in (1, 2))
    assert set(table["run_id"]) == set(finished)
    skipped = {i for i, s in story.before.items() if s.status == "FINISHED"}
    reused = table[table["reused_from"] != ""]
    assert set(reused["run_id"]) == skipped
    page = html.read_text()
    for run_id, marker in zip(reused["run_id"], reused["reused_from"]):
        assert re.fullmatch(rf"from run {run_id}, \d{{4}}-\d\d-\d\d \d\d:\d\d:\d\d UTC", marker), marker
        assert marker in page
    sweep = max(runs_of(seeded_store.uri, EXPERIMENT, kind="sweep"), key=lambda r: r.info.start_time)
    assert {k.removeprefix("swizzlebench.reused.") for k in sweep.data.tags
            if k.startswith("swizzlebench.reused.")} == skipped
