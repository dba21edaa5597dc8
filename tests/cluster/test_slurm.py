"""A sweep through a real SLURM cluster (``hydra/launcher=submitit_slurm``, every job an
``sbatch`` array task on the one-node cluster of :mod:`tests.services.slurm`), a job cancelled
with ``scancel``, and the sweep run again: the real CLI on the CPU (interpreter, tiny shape,
16x16x16 tiles, no profiler), checked through MLflow, SLURM's own job states and submitit's
job folders.

The first sweep (identity, xcd) hangs its xcd job (``fault.kind=hang``); once identity has
FINISHED and its SLURM task COMPLETED, the xcd task is cancelled.  SLURM sends the job's
processes SIGTERM (then SIGKILL after KillWait=5 s): the task stops its job (its isolated
worker killed), whose run ends KILLED with the signal and its sender as the reason, not
FAILED as a crash, and the launching command closes the sweep and writes its report.
The rerun, without the fault, skips identity (its spec's hash is FINISHED in the store) and
runs xcd, through SLURM again."""
from __future__ import annotations

import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pytest

from harness.run.interrupt import SLURM_SENDER
from tests.faults import FAST, cli_env, reason, runs_of
from tests.services.slurm import SlurmCluster, running_slurm

pytestmark = pytest.mark.cluster
pytest.importorskip("hydra_plugins.hydra_submitit_launcher", reason="needs hydra-submitit-launcher (extra 'cluster')")

EXPERIMENT = "slurm"
HUNG = "igemm/xcd/tiny-t1/w8"
DONE = "igemm/identity/tiny-t1/w8"
#: The launcher overrides of docs/gpu-nodes.md's tested recipe (partition ``debug``: the test cluster's).
LAUNCHER = ["hydra/launcher=submitit_slurm", "hydra.launcher.partition=debug", "hydra.launcher.timeout_min=10",
            "hydra.launcher.cpus_per_task=1", "hydra.launcher.array_parallelism=2"]
SWEEP_TIMEOUT_S = 300


@dataclass
class Story:
    root: Path
    uri: str
    cancelled: subprocess.CompletedProcess      # the first sweep, one of whose jobs was cancelled
    cancelled_task: str                         # its SLURM task id (<array id>_<index>)
    slurm_after_cancel: dict[str, str]          # SLURM task id -> state, after the first sweep
    rerun: subprocess.CompletedProcess
    slurm_after_rerun: dict[str, str]


@pytest.fixture(scope="module")
def slurm(tmp_path_factory):
    with running_slurm(tmp_path_factory.mktemp("slurm")) as cluster:
        yield cluster


def _sweep_args(root: Path, uri: str, folder: str) -> list[str]:
    return [sys.executable, "-m", "harness", "-m", *LAUNCHER, "swizzle=identity,xcd", "shape=tiny",
            "shape.select=[t1]", *FAST, "isolation.mode=process", "isolation.timeout_s=600", f"tracking.uri={uri}",
            f"experiment={EXPERIMENT}", f"hydra.sweep.dir={root}/{folder}"]


def _cancel_the_hung_job(slurm: SlurmCluster, uri: str, proc: subprocess.Popen) -> str:
    """Wait until the hung job's run is RUNNING and the other task COMPLETED, then scancel it."""
    deadline = time.monotonic() + SWEEP_TIMEOUT_S
    while time.monotonic() < deadline:
        assert proc.poll() is None, "the sweep ended before its job could be cancelled"
        status = {r.data.tags.get("job"): r.info.status for r in runs_of(uri, EXPERIMENT)}
        tasks = {state: task for task, _, state in slurm.jobs()}
        if status.get(HUNG) == "RUNNING" and status.get(DONE) == "FINISHED" and set(tasks) == {"COMPLETED",
                                                                                           "RUNNING"}:
            slurm.run("scancel", tasks["RUNNING"])
            return tasks["RUNNING"]
        time.sleep(1)
    pytest.fail(f"no RUNNING {HUNG} beside a COMPLETED task after {SWEEP_TIMEOUT_S} s: {slurm.jobs()}")


@pytest.fixture(scope="module")
def story(slurm, tmp_path_factory) -> Story:
    root = tmp_path_factory.mktemp("slurm-sweeps")
    uri = f"sqlite:///{root}/store.db"
    env = cli_env(**slurm.env)
    with open(root / "cancelled.log", "w+") as log:
        proc = subprocess.Popen([*_sweep_args(root, uri, "first"), "fault.kind=hang", "fault.swizzle=xcd"], cwd=root,
                                env=env, stdout=log, stderr=subprocess.STDOUT, text=True)
        try:
            cancelled_task = _cancel_the_hung_job(slurm, uri, proc)
            proc.wait(SWEEP_TIMEOUT_S)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        log.seek(0)
        cancelled = subprocess.CompletedProcess(proc.args, proc.returncode, log.read(), "")
    after_cancel = {task: state for task, _, state in slurm.jobs()}
    rerun = subprocess.run(_sweep_args(root, uri, "rerun"), cwd=root, env=env, capture_output=True, text=True,
                           timeout=SWEEP_TIMEOUT_S)
    return Story(root, uri, cancelled, cancelled_task, after_cancel, rerun, {task: state for task, _, state in slurm.jobs()})


def _job_lines(folder: Path) -> list[str]:
    """The ``[job N | i/n] ...`` lines the SLURM tasks printed (submitit's per-task logs)."""
    return [ln for log in sorted(folder.glob(".submitit/*/*_log.out"))
            for ln in log.read_text().splitlines() if ln.startswith("[job ")]


def _report(proc: subprocess.CompletedProcess, root: Path) -> Path:
    lines = [ln.split("Sweep report: ")[1].strip() for ln in (proc.stdout + proc.stderr).splitlines()
             if "Sweep report: " in ln]
    assert len(lines) == 1, (proc.stdout + proc.stderr)[-3000:]
    return root / lines[0]


def test_the_jobs_ran_as_slurm_array_tasks(story):
    """Each Hydra job was one task of an sbatch array: SLURM lists them (COMPLETED, the
    cancelled one CANCELLED), and submitit's folder holds each task's log and result."""
    first = {t: s for t, s in story.slurm_after_cancel.items()}
    assert sorted(first.values()) == ["CANCELLED", "COMPLETED"], first
    second = {t: s for t, s in story.slurm_after_rerun.items() if t not in first}
    assert sorted(second.values()) == ["COMPLETED", "COMPLETED"], story.slurm_after_rerun
    for folder, tasks in (("first", first), ("rerun", second)):
        for task in tasks:
            assert "_" in task, task        # <array id>_<index>
            assert list((story.root / folder / ".submitit" / task).glob(f"{task}_0_log.out")), (folder, task)


def test_the_cancelled_job_ends_killed_with_its_reason_and_the_sweep_is_closed(story):
    assert story.cancelled.returncode == 0, story.cancelled.stdout[-3000:]
    runs = {r.info.run_id: r for r in runs_of(story.uri, EXPERIMENT)}
    first_sweep = min(runs_of(story.uri, EXPERIMENT, kind="sweep"), key=lambda r: r.info.start_time)
    first = {r.data.tags.get("job"): r for r in runs.values()
             if r.data.tags["mlflow.parentRunId"] == first_sweep.info.run_id}
    assert sorted(first) == [DONE, HUNG], sorted(first)
    assert first[HUNG].info.status == "KILLED", (first[HUNG].info.status, reason(first[HUNG]))
    assert reason(first[HUNG]).startswith(f"killed: SIGTERM received mid-job ({SLURM_SENDER}); re-run"), \
        reason(first[HUNG])
    assert first[DONE].info.status == "FINISHED"
    assert first_sweep.info.status == "FINISHED"
    task_logs = (story.root / "first" / ".submitit" / story.cancelled_task).glob(f"{story.cancelled_task}_0_log.*")
    assert "job stopped by SIGTERM" in "".join(log.read_text() for log in task_logs)
    assert _report(story.cancelled, story.root).is_file()


def test_the_rerun_skips_the_finished_job_and_runs_the_cancelled_one(story):
    assert story.rerun.returncode == 0, (story.rerun.stdout + story.rerun.stderr)[-3000:]
    lines = _job_lines(story.root / "rerun")
    assert len(lines) == 2, lines
    skipped, = [ln for ln in lines if " SKIPPED " in ln]
    assert DONE in skipped and "already FINISHED as run" in skipped
    ran, = [ln for ln in lines if " SKIPPED " not in ln]
    assert HUNG in ran and " FINISHED " in ran
    runs = runs_of(story.uri, EXPERIMENT)
    finished = Counter(r.data.tags["spec_hash"] for r in runs if r.info.status == "FINISHED")
    assert len(finished) == 2 and set(finished.values()) == {1}, finished
    assert not [r.info.run_name for r in runs_of(story.uri, EXPERIMENT, kind=None) if r.info.status == "RUNNING"]


def test_the_reruns_report_has_both_cells(story):
    import pandas as pd

    table = pd.read_csv(_report(story.rerun, story.root).parent / "table.csv", dtype=str, keep_default_na=False)
    assert sorted(table["swizzle"]) == ["identity", "xcd"]
    finished = {r.info.run_id for r in runs_of(story.uri, EXPERIMENT) if r.info.status == "FINISHED"}
    assert set(table["run_id"]) == finished
