"""The real CLI in a subprocess, from a directory outside the checkout, against a
temporary SQLite MLflow store, asserted through MlflowClient."""
import os
import subprocess
import sys

import pytest
from mlflow.tracking import MlflowClient

SMALL_TILES = ["kernel.tiles.BLOCK_M=16", "kernel.tiles.BLOCK_N=16", "kernel.tiles.BLOCK_K=16"]


def _harness(args, cwd, timeout=600, env=None):
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONUNBUFFERED": "1", **(env or {})}
    return subprocess.run([sys.executable, "-m", "harness", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("cli")
    from tests.stores import seed_stores

    uri = f"sqlite:///{tmp}/store.db"
    args = ["-m", "kernel=igemm", "swizzle=identity,seed_xcd,xcd", "shape=tiny", *SMALL_TILES,
            f"tracking.uri={uri}", "experiment=cli-test", f"hydra.sweep.dir={tmp}/multirun"]
    seed_stores(args)
    proc = _harness(args, cwd=tmp)
    assert proc.returncode == 0, proc.stderr[-3000:]
    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name("cli-test")
    runs = client.search_runs([exp.experiment_id], max_results=1000)
    return proc, client, runs


def test_one_parent_run_per_multirun(sweep):
    _, _, runs = sweep
    parents = [r for r in runs if r.data.tags.get("swizzlebench.kind") == "sweep"]
    assert len(parents) == 1 and parents[0].info.status == "FINISHED"
    assert parents[0].info.run_name == "sweep swizzle[3] igemm tiny"      # short: axes, then group choices
    assert "swizzle=identity,seed_xcd,xcd" in parents[0].data.params["sweep.overrides"]
    assert parents[0].data.tags["mlflow.note.content"].startswith("python -m harness -m kernel=igemm swizzle=")
    experiment = sweep[1].get_experiment(parents[0].info.experiment_id)
    assert experiment.tags["mlflow.experimentKind"] == "custom_model_development"


def test_one_child_run_per_job_and_shape(sweep):
    _, _, runs = sweep
    parent = next(r for r in runs if r.data.tags.get("swizzlebench.kind") == "sweep")
    children = [r for r in runs if r.data.tags.get("swizzlebench.kind") == "job"]
    assert len(children) == 9
    assert all(r.data.tags["mlflow.parentRunId"] == parent.info.run_id for r in children)
    names = sorted(r.data.tags["mlflow.runName"] for r in children)
    assert "igemm/xcd/tiny-t2/w8" in names and "igemm/seed_xcd/tiny-t1/w8" in names


def test_valid_jobs_finished_rejected_jobs_failed_with_reason(sweep):
    _, _, runs = sweep
    for r in runs:
        if r.data.tags.get("swizzlebench.kind") != "job":
            continue
        tags, params, metrics = r.data.tags, r.data.params, r.data.metrics
        if params["swizzle"] == "seed_xcd":   # 2-pid grids: seed formula 1 is no permutation
            assert r.info.status == "FAILED"
            assert tags["status_reason"].startswith("swizzle seed_xcd: not a permutation of 2 pids")
            assert "max_rel_err" not in metrics
        else:
            assert r.info.status == "FINISHED", tags["status_reason"]
            assert metrics["max_rel_err"] < 5e-3
            assert tags["timing"].startswith("not measured")
            assert "time_ms_median" not in metrics
        for key in ("shape.N", "shape.C", "shape.H", "shape.W", "shape.F", "shape.R", "shape.S", "shape.stride",
                    "shape.padding", "shape.dtype", "kernel", "swizzle", "num_warps", "tile.BLOCK_M", "num_xcds"):
            assert key in params
        for key in ("git_commit", "device", "torch_version", "triton_version", "spec_hash", "status_reason"):
            assert tags.get(key), key


def test_artifacts_hold_config_and_kernel_source(sweep):
    _, client, runs = sweep
    run = next(r for r in runs if r.data.tags.get("mlflow.runName") == "igemm/xcd/tiny-t1/w8")
    files = {a.path for a in client.list_artifacts(run.info.run_id)}
    assert {"config.yaml", "kernel_source.py"} <= files
    local = client.download_artifacts(run.info.run_id, "kernel_source.py")
    source = open(local).read()
    assert "def igemm_conv2d_kernel" in source and "def remap" in source and '"BLOCK_M": 16' in source


def test_progress_line_per_job(sweep):
    proc, _, _ = sweep
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("[job ")]
    assert len(lines) == 9
    assert any("igemm/seed_xcd/tiny-t1/w8" in ln and "FAILED" in ln for ln in lines)


def test_help_lists_config_groups(tmp_path):
    proc = _harness(["--help"], cwd=tmp_path, timeout=120)
    assert proc.returncode == 0
    for line in ("kernel: direct, igemm, igemm_fast, patch", "shape: calibrate, holdout, resnet, seed, tiny", "study: calibrate", "tune: fastest, none", "target: auto, h100, h200, mi300x"):
        assert line in proc.stdout


def test_unknown_option_lists_valid_ones(tmp_path):
    proc = _harness(["kernel=winograd"], cwd=tmp_path, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == ["error: kernel=winograd: no kernel option 'winograd'; "
                                        "valid: direct, igemm, igemm_fast, patch"]


def test_custom_formulas_run_gated_and_hostile_ones_fail_cleanly(tmp_path):
    """A user formula runs through the same gate; a hostile one is a FAILED run with the
    position and the allowed forms, and the other jobs of the sweep still run."""
    uri = f"sqlite:///{tmp_path}/store.db"
    formulas = tmp_path / "xcd.txt"
    formulas.write_text("# chunked XCD remap\nq = num_pids // num_xcds\nr = num_pids % num_xcds\n"
                        "x = pid % num_xcds\nnew_pid = min(x, r) * (q + 1) + max(x - r, 0) * q + pid // num_xcds\n")
    proc = _harness(["-m", "swizzle=custom", f"swizzle.file={formulas}", "shape=tiny", *SMALL_TILES,
                     f"tracking.uri={uri}", "experiment=custom", f"hydra.sweep.dir={tmp_path}/a"], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    proc = _harness(["-m", "swizzle=custom", "swizzle.expr='pid.__class__','pid // 0','(pid * 2) % num_pids'",
                     "shape=tiny", "shape.select=[t1]", *SMALL_TILES, f"tracking.uri={uri}", "experiment=custom",
                     f"hydra.sweep.dir={tmp_path}/b"], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    client = MlflowClient(tracking_uri=uri)
    runs = client.search_runs([client.get_experiment_by_name("custom").experiment_id],
                              "tags.`swizzlebench.kind` = 'job'", max_results=100)
    by_status = {}
    for r in runs:
        by_status.setdefault(r.info.status, []).append(r)
    assert len(by_status["FINISHED"]) == 3           # the file formula on t1..t3
    assert all(r.data.params["swizzle"].startswith("custom-") for r in by_status["FINISHED"])
    reasons = sorted(r.data.tags["status_reason"] for r in by_status["FAILED"])
    assert len(reasons) == 3
    assert any("attribute access" in x and "allowed forms" in x and "column" in x for x in reasons)
    assert any("division by zero" in x.lower() or "by zero" in x for x in reasons)
    assert any("not a permutation" in x for x in reasons)   # (pid*2) % 2 pids on t1: 0, 0


def test_every_job_is_compiled_for_the_target(sweep):
    """No GPU: target=auto is the MI300X, and every job that passed its gates was compiled for
    gfx942 first (harness/compile/build.py)."""
    _, _, runs = sweep
    finished = [r for r in runs if r.data.tags.get("swizzlebench.kind") == "job" and r.info.status == "FINISHED"]
    assert finished
    for r in finished:
        assert r.data.params["compile.arch"] == "gfx942"
        assert r.data.metrics["compile.registers"] > 0 and r.data.metrics["compile.programs_per_cu"] >= 1
