"""Bad input, one line: user errors through the real CLI print ``error: ...`` without a
traceback (HYDRA_FULL_ERROR=1 still gives it), and launch values are checked against the
target's rules on the CPU too (harness.pipeline.launch_limits).  More CLI cases ride on tests that
already run the CLI: a missing profiler (test_profiler_pipeline.py) and ``devices`` with
``isolation.mode=none`` in a multirun, whose sweep run ends FAILED (test_scaleout.py)."""
from __future__ import annotations

import importlib.resources

import pytest
from hydra.core.utils import JobReturn, JobStatus
from omegaconf import OmegaConf

from harness.errors import USER_ERROR_EXIT, OneLineUserErrors, UserError
from harness.pipeline.launch_limits import LIMITS, check_num_warps, check_tiles
from kernels import get_kernel
from tests.test_cli import _harness


def test_bad_select_is_one_line_and_logs_nothing(tmp_path):
    proc = _harness(["shape=tiny", "shape.select=[l99]", f"tracking.uri=sqlite:///{tmp_path}/s.db"],
                    cwd=tmp_path, timeout=300)
    assert proc.returncode == USER_ERROR_EXIT
    assert proc.stderr.splitlines() == ["error: shape.select names ['l99'] not in preset 'tiny'; valid: t1, t2, t3"]
    assert not (tmp_path / "s.db").exists()     # refused before the store is opened


def test_full_error_env_gives_the_traceback(tmp_path):
    """num_warps=3 FINISHED on the CPU before: now refused for the target (mi300x: AMD)."""
    proc = _harness(["shape=tiny", "launch.num_warps=3", f"tracking.uri=sqlite:///{tmp_path}/s.db"],
                    cwd=tmp_path, timeout=300, env={"HYDRA_FULL_ERROR": "1"})
    assert proc.returncode != 0
    assert "Traceback" in proc.stderr
    assert "UserError: launch.num_warps=3 is invalid for target mi300x" in proc.stderr


@pytest.mark.parametrize("vendor, valid, invalid", [("nvidia", [1, 4, 32], [3, 64, 0, 6]),
                                                    ("amd", [1, 8, 16], [32, 12, -4])])
def test_num_warps_per_vendor(vendor, valid, invalid):
    for n in valid:
        assert check_num_warps(n, LIMITS[vendor], "t") == n
    for n in invalid:
        with pytest.raises(UserError, match=f"launch.num_warps={n} is invalid for target t"):
            check_num_warps(n, LIMITS[vendor], "t")
    with pytest.raises(UserError):
        check_num_warps(True, LIMITS[vendor], "t")


def test_tiles_against_the_target():
    igemm = get_kernel("igemm")
    tiles = {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 8}
    assert check_tiles(igemm, tiles, LIMITS["amd"], "mi300x") == tiles          # AMD: FMA fallback, any K
    with pytest.raises(UserError, match=r"kernel.tiles.BLOCK_K=8 is too small .* h100 .*K must be >= 16"):
        check_tiles(igemm, tiles, LIMITS["nvidia"], "h100", ["bfloat16"])
    assert check_tiles(igemm, tiles, LIMITS["nvidia"], "h100", ["float32"]) == tiles
    with pytest.raises(UserError, match="2048 x 1024 tl.dot block .* at most 1048576"):
        check_tiles(igemm, {"BLOCK_M": 2048, "BLOCK_N": 16, "BLOCK_K": 1024}, LIMITS["amd"], "mi300x")
    with pytest.raises(UserError, match="kernel.interpret_tiles: kernel 'igemm': tile BLOCK_M=12 must be a power"):
        check_tiles(igemm, {**tiles, "BLOCK_M": 12}, None, "mi300x", key="kernel.interpret_tiles")
    direct = get_kernel("direct")   # no tl.dot: only its own rules
    assert check_tiles(direct, {"BLOCK_N": 1, "BLOCK_F": 2, "BLOCK_H": 2, "BLOCK_W": 2, "BLOCK_C": 2},
                       LIMITS["nvidia"], "h100")


def test_callback_exits_on_user_errors_only(capsys, monkeypatch):
    callback = OneLineUserErrors()
    failed = JobReturn(status=JobStatus.FAILED, _return_value=UserError("bad\n  value"))
    with pytest.raises(SystemExit) as stop:
        callback.on_job_end(config=None, job_return=failed)
    assert stop.value.code == USER_ERROR_EXIT and capsys.readouterr().err == "error: bad value\n"
    callback.on_job_end(config=None, job_return=JobReturn(status=JobStatus.FAILED, _return_value=KeyError("bug")))
    monkeypatch.setenv("HYDRA_FULL_ERROR", "1")
    callback.on_job_end(config=None, job_return=failed)      # Hydra reports it, traceback included
    assert capsys.readouterr().err == ""


def test_user_errors_callback_runs_after_the_sweep_callback():
    """Hydra calls on_job_end in reverse order: the sweep's run is ended FAILED before the exit."""
    config = OmegaConf.load(str(importlib.resources.files("swizzlebench_conf") / "config.yaml"))
    assert list(config.hydra.callbacks) == ["user_errors", "mlflow_sweep"]
