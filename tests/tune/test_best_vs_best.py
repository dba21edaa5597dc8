"""Best vs best (``compare.configs=tuned_each``, harness/tune/best_vs_best.py): the
candidate and the baseline each tuned with their own swizzle, each timed on its own config,
and the job line, the run and the report saying which question the verdict answers."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pandas as pd
import pytest
from mlflow.tracking import MlflowClient

from harness.errors import USER_ERROR_EXIT, UserError
from harness.tune.best_vs_best import compare_configs
from harness.job.spec import JobSpec
from kernels.problem import ConvShape
from tests.standins.config_timer import CANDIDATE_GAIN, tile_area
from tests.test_cli import _harness
from tests.cli_fork import run_cli

ROOT = Path(__file__).resolve().parents[2]
STANDIN = "tests.standins.config_timer:time_ms"
T1 = ConvShape("t1", N=1, C=5, H=6, W=5, F=10, R=3, S=3, stride=1, padding=1)


def _sweep(tmp_path: Path) -> tuple[subprocess.CompletedProcess, list, Path]:
    """One multirun through the real CLI: the same comparison (scatter vs identity on a layer
    whose grid has many tiles, tuned on the CPU, timed by the stand-in) asked both ways, same
    config and best vs best."""
    uri = f"sqlite:///{tmp_path}/bvb.db"
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(ROOT)}
    proc = run_cli(["-m", "kernel=igemm", "swizzle=scatter", "shape=resnet",
                   "shape.select=[l03]", "profiler=none", "target=h100", f"compare.timer={STANDIN}",
                   "compare.placements=2", "tune=fastest", "tune.on_cpu=true",
                   f"tune.cache_dir={tmp_path}/tunecache", "compare.configs=same,tuned_each",
                   f"tracking.uri={uri}", "experiment=bvb", f"hydra.sweep.dir={tmp_path}/multirun"],
                   tmp_path, env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name("bvb")
    runs = [r for r in client.search_runs([exp.experiment_id]) if r.data.tags.get("swizzlebench.kind") == "job"]
    return proc, runs, next((tmp_path / "reports").rglob("index.html"))


def test_best_vs_best_tunes_each_arm_and_says_so(tmp_path):
    """The stand-in timer makes identity fastest on the largest tile and scatter on the smallest:
    best vs best launches the two different configs and compares them; same config launches the
    baseline on the candidate's config (identity's choice).  Both modes sit side by side in the
    report, each with the configs it was measured on."""
    proc, runs, page = _sweep(tmp_path)
    assert len(runs) == 2
    by_mode = {r.data.params.get("compare.configs", "same"): r for r in runs}
    assert set(by_mode) == {"same", "tuned_each"}
    for run in runs:
        assert run.info.status == "FINISHED", run.data.tags.get("status_reason")

    bvb, same = by_mode["tuned_each"].data, by_mode["same"].data
    # best vs best: the candidate on scatter's favourite (smallest) tile, the baseline on identity's (largest)
    cand_cfg, base_cfg = bvb.params["tune.config"], bvb.params["baseline_config"]
    assert cand_cfg != base_cfg
    assert tile_area(cand_cfg) < tile_area(base_cfg)
    assert bvb.params["baseline.tune.config"] == base_cfg                 # the baseline's own tuning record
    assert bvb.params["tile.BLOCK_M"] == cand_cfg.split()[0][1:]          # the job launched its own config
    assert bvb.tags["compare.question"] == "best vs best"
    assert bvb.tags["verdict"] == "faster" and bvb.tags["compare.same_order"] == "false"
    assert bvb.metrics["speedup"] == pytest.approx(CANDIDATE_GAIN, rel=0.01)
    assert "baseline identity tuned: " in bvb.tags["tune"]
    assert bvb.tags["baseline.gate.compile"] and "baseline.gate.compile" not in same.tags   # compiled for h100 too
    # same config: one tuning, with identity fixed, whose choice both arms run on
    assert same.params["baseline_config"] == same.params["tune.config"] == base_cfg
    assert same.tags["compare.question"] == "same config"
    assert "baseline.tune.config" not in same.params
    # the job lines say which question each verdict answers
    lines = [line for line in proc.stdout.splitlines() if "FINISHED" in line]
    assert sum(f"| best vs best: {cand_cfg} vs identity on {base_cfg}: x1.0" in line for line in lines) == 1
    assert sum("| vs identity: x1.0" in line and line.endswith("faster") for line in lines) == 1

    table = pd.read_csv(page.parent / "table.csv").set_index("question")
    assert table.loc["best vs best", "config"] == cand_cfg
    assert table.loc["best vs best", "baseline_config"] == base_cfg
    assert table.loc["best vs best", "verdict_detail"] == "best vs best: faster"
    assert table.loc["same config", "config"] == table.loc["same config", "baseline_config"] == base_cfg
    assert table.loc["same config", "verdict_detail"] == "faster"
    text = page.read_text()
    assert f"best vs best: {cand_cfg}; identity: {base_cfg}" in text


@pytest.mark.parametrize("overrides, message", [
    (["compare.configs=tuned_each"], "compare.configs=tuned_each (best vs best) needs tune mode"),
    (["compare.configs=tuned_each", "tune=fastest", "compare.baseline=null"], "needs a baseline to compare with"),
    (["compare.configs=best"], "compare.configs='best' is invalid; valid: same, tuned_each"),
])
def test_a_combination_without_meaning_is_refused_in_one_line(tmp_path, overrides, message):
    proc = _harness(["shape=tiny", *overrides, f"tracking.uri=sqlite:///{tmp_path}/s.db"], cwd=tmp_path, timeout=300)
    assert proc.returncode == USER_ERROR_EXIT
    assert len(proc.stderr.strip().splitlines()) == 1 and message in proc.stderr
    assert not (tmp_path / "s.db").exists()


def test_compare_configs_values():
    assert compare_configs({"baseline": "identity"}, "none") is None
    assert compare_configs({"configs": "same", "baseline": None}, "none") is None
    assert compare_configs({"configs": "tuned_each", "baseline": "identity"}, "fastest") == "tuned_each"
    with pytest.raises(UserError):
        compare_configs({"configs": "tuned_each", "baseline": "none"}, "fastest")


def test_the_baseline_spec_runs_on_its_own_config_and_round_trips():
    spec = JobSpec(kernel="igemm", tiles=(("BLOCK_M", 64), ("BLOCK_N", 32), ("BLOCK_K", 32)), swizzle="scatter",
                   num_xcds=1, group_size=8, shape=T1, shape_preset="tiny", num_warps=4, num_stages=2,
                   target="h100", seed=0, baseline="identity")
    assert spec.baseline_spec().tiles == spec.tiles                           # same config: the job's own
    unset_hash = spec.spec_hash   # unchanged by the new fields while unset: tests/test_byo.py
    bvb = spec.with_baseline_config({"BLOCK_M": 128, "BLOCK_N": 32, "BLOCK_K": 64}, 8, 3)
    base = bvb.baseline_spec()
    assert (base.tiles_dict, base.num_warps, base.num_stages) == ({"BLOCK_M": 128, "BLOCK_N": 32, "BLOCK_K": 64}, 8, 3)
    assert base.swizzle == "identity" and base.baseline is None and base.baseline_tiles is None
    assert JobSpec.from_dict(bvb.to_dict()) == bvb                             # as the profiler worker gets it
    assert bvb.spec_hash != unset_hash
