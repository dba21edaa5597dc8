"""Scale-out on existing engines: Hydra's joblib launcher (one node), the submitit launcher
(its local executor standing in for SLURM), GPU pinning with ``devices``, and a shared
``mlflow server`` as the tracking store.  Every sweep is the real CLI in a subprocess on
the CPU (Triton interpreter), checked through MLflow."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from harness.callbacks import SWEEP_ENV, read_sweep_file, sweep_run_id, write_sweep_file
from harness.errors import USER_ERROR_EXIT
from harness.hardware.pinning import (DeviceLock, DevicePin, PinningError, default_lock_dir, device_for_job,
                             parse_devices, pinned_environment, require_isolation, visible_devices)
from harness.storage.tracking import resolve_tracking_uri
from tests.test_cli import SMALL_TILES, _harness
from tests.mlflow_server import rest_get, rest_post, running_mlflow_server
from tests.profilers.test_profiler_pipeline import STANDINS

pytest.importorskip("hydra_plugins.hydra_joblib_launcher", reason="needs hydra-joblib-launcher (extra 'cluster')")
pytest.importorskip("hydra_plugins.hydra_submitit_launcher", reason="needs hydra-submitit-launcher (extra 'cluster')")

SWEEP = ["swizzle=identity,xcd", "shape=tiny", *SMALL_TILES]   # 2 jobs x 3 shapes
EXPECTED_RUNS = {f"igemm/{swizzle}/tiny-t{i}/w8" for swizzle in ("identity", "xcd") for i in (1, 2, 3)}


def _sweep(args: list[str], cwd: Path, timeout: int = 300) -> subprocess.CompletedProcess:
    proc = _harness(["-m", "kernel=igemm", *args, f"hydra.sweep.dir={cwd}/multirun"], cwd=cwd, timeout=timeout)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    return proc


def _runs(uri: str, experiment: str) -> tuple[object, list]:
    """(the sweep's parent run, its job runs) in ``experiment``, asserting there is one sweep."""
    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name(experiment)
    runs = client.search_runs([exp.experiment_id], max_results=1000)
    sweeps = [r for r in runs if r.data.tags.get("swizzlebench.kind") == "sweep"]
    assert len(sweeps) == 1, [r.info.run_name for r in sweeps]
    return sweeps[0], [r for r in runs if r.data.tags.get("swizzlebench.kind") == "job"]


def _assert_one_sweep(sweep, jobs, expected: set[str] = EXPECTED_RUNS) -> None:
    """All 6 job runs (or those ``expected``) present exactly once, FINISHED, each a child of
    the one sweep run."""
    names = sorted(r.data.tags["job"] for r in jobs)
    assert names == sorted(expected), names
    assert sweep.info.status == "FINISHED"
    for run in jobs:
        assert run.data.tags["mlflow.parentRunId"] == sweep.info.run_id, run.info.run_name
        assert run.info.status == "FINISHED", run.data.tags.get("status_reason")


# -- (a) one node, several workers: hydra/launcher=joblib -------------------------------------
def test_joblib_launcher_logs_every_job_once_under_one_sweep_run(tmp_path):
    """The one-node recipe: two joblib (loky) workers, each job pinned to a GPU.  ``devices``
    makes the jobs spawn isolated workers from inside loky workers, which only works because
    IsolatedRunner hides loky's start method from its child (harness.run.isolation).  No L2
    profiler: the simulated L2 runs in the loky worker itself and starts no process."""
    uri = f"sqlite:///{tmp_path}/store.db"
    proc = _sweep(["hydra/launcher=joblib", "hydra.launcher.n_jobs=2", *SWEEP, "shape.select=[t1]", "devices=[0,1]",
                   "profiler=none", f"tracking.uri={uri}", "experiment=joblib"], tmp_path)
    assert "Joblib.Parallel(n_jobs=2" in proc.stderr + proc.stdout
    sweep, jobs = _runs(uri, "joblib")
    _assert_one_sweep(sweep, jobs, {"igemm/identity/tiny-t1/w8", "igemm/xcd/tiny-t1/w8"})   # one shape each
    assert {r.data.tags["visible_devices"] for r in jobs} == {"0", "1"}
    assert read_sweep_file(tmp_path / "multirun") == sweep.info.run_id


# -- (b) clusters: hydra/launcher=submitit_local (the SLURM launcher's local twin) -----------
@pytest.mark.slow   # ~30 s each: a whole multirun through another launcher (python -m pytest -m slow)
def test_submitit_local_launcher_with_chdir_and_a_relative_sqlite_uri(tmp_path):
    """Jobs run as separate submitit processes and, with hydra.job.chdir=true, in their own
    output folders: the relative ``sqlite:///store.db`` must still be the launch folder's."""
    _sweep(["hydra/launcher=submitit_local", "hydra.launcher.timeout_min=3", *SWEEP,
            "tracking.uri=sqlite:///store.db", "hydra.job.chdir=true", "experiment=submitit"], tmp_path)
    assert sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*.db")) == ["store.db"]
    assert list((tmp_path / "multirun" / ".submitit").glob("*/*_result.pkl"))  # submitit ran the jobs
    sweep, jobs = _runs(f"sqlite:///{tmp_path}/store.db", "submitit")
    _assert_one_sweep(sweep, jobs)


def test_submitit_local_runs_a_job_in_the_default_test_run(tmp_path):
    """The cheap twin of the test above, in the default run (CI): one job on one shape, no L2
    profiler, through submitit's local executor with hydra.job.chdir=true and a relative
    SQLite URI: submitit ran it, in its own folder, into the launch folder's store."""
    _sweep(["hydra/launcher=submitit_local", "hydra.launcher.timeout_min=3", "swizzle=xcd", "shape=tiny",
            "shape.select=[t1]", "profiler=none", *SMALL_TILES, "tracking.uri=sqlite:///store.db",
            "hydra.job.chdir=true", "experiment=submitit"], tmp_path)
    assert sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*.db")) == ["store.db"]
    assert list((tmp_path / "multirun" / ".submitit").glob("*/*_result.pkl"))  # submitit ran the job
    sweep, jobs = _runs(f"sqlite:///{tmp_path}/store.db", "submitit")
    assert [r.data.tags["job"] for r in jobs] == ["igemm/xcd/tiny-t1/w8"] and sweep.info.status == "FINISHED"
    assert jobs[0].info.status == "FINISHED" and jobs[0].data.tags["mlflow.parentRunId"] == sweep.info.run_id


# -- (c) GPU pinning: devices=[...] ------------------------------------------------------------
def test_pinning_environment_per_job_number():
    devices = parse_devices([0, 1])
    assert [device_for_job(j, devices) for j in range(5)] == [0, 1, 0, 1, 0]
    assert pinned_environment(0, devices) == {"CUDA_VISIBLE_DEVICES": "0", "HIP_VISIBLE_DEVICES": "0"}
    assert pinned_environment(3, devices) == {"CUDA_VISIBLE_DEVICES": "1", "HIP_VISIBLE_DEVICES": "1"}
    assert pinned_environment(7, parse_devices([2, 5, 6])) == {"CUDA_VISIBLE_DEVICES": "5",
                                                                "HIP_VISIBLE_DEVICES": "5"}
    assert pinned_environment(3, parse_devices(None)) == {}   # null: visibility left alone
    assert "ROCR_VISIBLE_DEVICES" not in pinned_environment(1, devices)
    assert DevicePin.for_job(3, devices, Path("/unused")).environment() == pinned_environment(3, devices)


@pytest.mark.parametrize("value, message", [
    ([], "use devices=null"),
    (0, "with brackets"),
    ("0,1", "give a list of GPU ids"),
    ([0, -1], "not a GPU id"),
    ([0, "a"], "not a GPU id"),
    ([True], "not a GPU id"),
    ([1, 1], "lists GPU 1 twice"),
])
def test_invalid_devices_are_refused_with_a_reason(value, message):
    with pytest.raises(PinningError, match=message):
        parse_devices(value)


def test_pinning_needs_isolation():
    with pytest.raises(PinningError, match="isolation.mode=none"):
        require_isolation((0, 1), "none")
    require_isolation((0, 1), "auto")
    require_isolation((), "none")


def test_visible_devices_tag():
    assert visible_devices({"CUDA_VISIBLE_DEVICES": "1", "HIP_VISIBLE_DEVICES": "1"}) == "1"
    assert visible_devices({"CUDA_VISIBLE_DEVICES": "1", "HIP_VISIBLE_DEVICES": "1",
                            "ROCR_VISIBLE_DEVICES": "4,5"}) == "1 ROCR_VISIBLE_DEVICES=4,5"
    assert visible_devices({"CUDA_VISIBLE_DEVICES": "0,1"}) == "CUDA_VISIBLE_DEVICES=0,1"   # e.g. SLURM's
    assert visible_devices({"PATH": "/bin"}) is None


def test_a_gpu_lock_makes_a_second_job_wait(tmp_path):
    first, second = DeviceLock(tmp_path / "gpu0.lock", "GPU 0"), DeviceLock(tmp_path / "gpu0.lock", "GPU 0")
    first.acquire()
    waiter = threading.Thread(target=second.acquire, daemon=True)
    waiter.start()
    waiter.join(0.5)
    assert waiter.is_alive() and not second.held     # blocked while the first job holds GPU 0
    first.release()
    waiter.join(10)
    assert not waiter.is_alive() and second.held
    second.release()
    with DeviceLock(tmp_path / "gpu1.lock", "GPU 1"):  # another GPU is independent
        with DeviceLock(tmp_path / "gpu2.lock", "GPU 2"):
            pass


def _recording_ncu(folder: Path) -> Path:
    """An ``ncu`` that notes the GPU visibility it was started with, and whether its GPU's
    lock was held meanwhile, in ``pinning.json`` (its cwd), then runs the ncu stand-in."""
    folder.mkdir()
    script = folder / "ncu"
    script.write_text(f"""#!{sys.executable}
import fcntl, json, os, sys
from pathlib import Path
if "--version" not in sys.argv:
    gpu = os.environ.get("CUDA_VISIBLE_DEVICES")
    with open(Path({str(default_lock_dir())!r}) / f"gpu{{gpu}}.lock", "ab") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            held = False
        except BlockingIOError:
            held = True
    Path("pinning.json").write_text(json.dumps({{"cuda": gpu, "hip": os.environ.get("HIP_VISIBLE_DEVICES"),
                                                "lock_held": held}}))
os.execv(sys.executable, [sys.executable, {str(STANDINS / "ncu")!r}, *sys.argv[1:]])
""")
    script.chmod(0o755)
    return folder


@pytest.mark.slow   # ~30 s each: a whole multirun through another launcher (python -m pytest -m slow)
def test_devices_pin_each_jobs_workers_end_to_end(tmp_path, monkeypatch):
    """On the CPU too, ``devices`` forces isolated workers.  Each job worker reports the GPU
    visibility it really had (job 0 -> 0, job 1 -> 1: two jobs one after the other in one
    process, so job 0's setting must not leak into job 1's worker), and the profiler's
    worker is started pinned too, holding the GPU's lock."""
    monkeypatch.setenv("PATH", f"{_recording_ncu(tmp_path / 'bin')}{os.pathsep}{os.environ['PATH']}")
    uri = f"sqlite:///{tmp_path}/store.db"
    _sweep([*SWEEP, "devices=[0,1]", "profiler=ncu", "profiler.repeats=1", f"tracking.uri={uri}",
            "experiment=pinned"], tmp_path)
    sweep, jobs = _runs(uri, "pinned")
    _assert_one_sweep(sweep, jobs)
    for run in jobs:
        expected = "0" if run.data.params["swizzle"] == "identity" else "1"   # job 0, job 1
        assert run.data.tags["visible_devices"] == expected, run.info.run_name
        assert "l2_hit_rate" in run.data.metrics        # profiled through the stand-in
    for job in (0, 1):
        seen = json.loads((tmp_path / "multirun" / str(job) / "profiler" / "launch000" / "pinning.json").read_text())
        assert seen == {"cuda": str(job), "hip": str(job), "lock_held": True}


def test_devices_with_isolation_none_fails_with_a_clear_message(tmp_path):
    proc = _harness(["-m", "swizzle=identity", "shape=tiny", "devices=[0]", "isolation.mode=none",
                     f"tracking.uri=sqlite:///{tmp_path}/store.db", f"hydra.sweep.dir={tmp_path}/multirun"],
                    cwd=tmp_path, timeout=120)
    assert proc.returncode == USER_ERROR_EXIT and "Traceback" not in proc.stderr
    error = proc.stderr.splitlines()[-1]      # one line (after the callback's warning)
    assert error.startswith("error: ") and "isolation.mode=none" in error and "devices=[0]" in error
    assert "[job 0" not in proc.stdout


# -- parent run id and tracking URI plumbing ----------------------------------------------------
def test_sweep_run_id_falls_back_to_the_sweep_file(tmp_path, monkeypatch):
    """A job whose environment lacks SWIZZLEBENCH_SWEEP_RUN_ID (SLURM with --export=NONE)
    finds the parent run in ``<sweep dir>/sweep_run.json``, resolved against hydra.runtime.cwd."""
    from hydra import compose, initialize_config_module
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode
    from omegaconf import open_dict

    monkeypatch.delenv(SWEEP_ENV, raising=False)
    write_sweep_file(tmp_path / "multirun", "abc123", "sqlite:///x.db", "exp")
    with initialize_config_module("swizzlebench_conf", version_base="1.3"):
        cfg = compose("config", overrides=["hydra.sweep.dir=multirun"], return_hydra_config=True)
    with open_dict(cfg):
        cfg.hydra.mode = RunMode.MULTIRUN
        cfg.hydra.runtime.cwd = str(tmp_path)
    try:
        HydraConfig.instance().set_config(cfg)
        assert sweep_run_id() == "abc123"
        monkeypatch.setenv(SWEEP_ENV, "from-env")
        assert sweep_run_id() == "from-env"          # the environment wins when present
    finally:
        HydraConfig.instance().cfg = None
    monkeypatch.delenv(SWEEP_ENV)
    assert sweep_run_id() is None                    # outside Hydra: no parent


def test_resolve_tracking_uri(tmp_path):
    base = str(tmp_path)
    assert resolve_tracking_uri("sqlite:///mlflow.db", base) == f"sqlite:///{tmp_path}/mlflow.db"
    assert resolve_tracking_uri("sqlite:///sub/m.db?timeout=30", base) == f"sqlite:///{tmp_path}/sub/m.db?timeout=30"
    for unchanged in ("sqlite:////abs/mlflow.db", "sqlite://", "sqlite:///:memory:", "http://127.0.0.1:5000",
                      "databricks", "file:///abs/mlruns"):
        assert resolve_tracking_uri(unchanged, base) == unchanged
    assert resolve_tracking_uri("sqlite:///m.db") == f"sqlite:///{Path.cwd()}/m.db"   # no Hydra: the cwd


# -- (d) a shared tracking server -----------------------------------------------------------------
@pytest.fixture
def tracking_server(tmp_path):
    """Base URL of a fresh ``mlflow server`` (SQLite backend) on a free port of 127.0.0.1."""
    with running_mlflow_server(f"sqlite:///{tmp_path}/server/server.db", tmp_path / "server") as base:
        yield base


@pytest.mark.slow   # ~30 s each: a whole multirun through another launcher (python -m pytest -m slow)
def test_two_parallel_jobs_log_to_a_shared_tracking_server(tracking_server, tmp_path):
    base = tracking_server
    _sweep(["hydra/launcher=joblib", "hydra.launcher.n_jobs=2", *SWEEP, f"tracking.uri={base}",
            "experiment=shared"], tmp_path)
    exp = rest_get(base, "/api/2.0/mlflow/experiments/get-by-name", experiment_name="shared")["experiment"]
    runs = rest_post(base, "/api/2.0/mlflow/runs/search",
                 {"experiment_ids": [exp["experiment_id"]], "max_results": 1000})["runs"]
    tags = [{t["key"]: t["value"] for t in r["data"].get("tags", [])} for r in runs]
    sweeps = [r for r, t in zip(runs, tags) if t.get("swizzlebench.kind") == "sweep"]
    jobs = [(r, t) for r, t in zip(runs, tags) if t.get("swizzlebench.kind") == "job"]
    assert len(sweeps) == 1 and sweeps[0]["info"]["status"] == "FINISHED"
    assert sorted(t["job"] for _, t in jobs) == sorted(EXPECTED_RUNS)
    assert all(t["mlflow.parentRunId"] == sweeps[0]["info"]["run_id"] for _, t in jobs)
    assert all(r["info"]["status"] == "FINISHED" for r, _ in jobs)
    one = jobs[0][0]["info"]["run_id"]     # artifacts went through the server too
    listed = rest_get(base, "/api/2.0/mlflow/artifacts/list", run_id=one)
    assert {"config.yaml", "kernel_source.py"} <= {f["path"] for f in listed.get("files", [])}
    assert not list(tmp_path.glob("*.db"))  # nothing fell back to a local store
