"""Bad input, one line: user errors through the real CLI print ``error: ...`` without a
traceback (HYDRA_FULL_ERROR=1 still gives it), and launch values are checked against the
target's rules on the CPU too (harness.job.launch_limits).  More CLI cases ride on tests that
already run the CLI: a missing profiler (test_profiler_pipeline.py) and ``devices`` with
``isolation.mode=none`` in a multirun, whose sweep run ends FAILED (test_scaleout.py)."""
from __future__ import annotations

import importlib.resources

import pytest
from hydra.core.utils import JobReturn, JobStatus
from omegaconf import OmegaConf

from harness.errors import USER_ERROR_EXIT, OneLineUserErrors, UserError
from harness.job.launch_limits import LIMITS, check_num_warps, check_tiles
from kernels import get_kernel
from tests.test_cli import _harness


def test_bad_select_is_one_line_and_logs_nothing(tmp_path):
    proc = _harness(["shape=tiny", "shape.select=[l99]", f"tracking.uri=sqlite:///{tmp_path}/s.db"],
                    cwd=tmp_path, timeout=300)
    assert proc.returncode == USER_ERROR_EXIT
    assert proc.stderr.splitlines() == ["error: shape.select names ['l99'] not in preset 'tiny'; valid: t1, t2, t3"]
    assert not (tmp_path / "s.db").exists()     # refused before the store is opened


#: override -> the one line the schema's refusal prints (harness/schema.py; nothing runs)
SCHEMA_REFUSALS = {
    "compare.min_effect=abc": "compare.min_effect='abc' is invalid: Value 'abc' of type 'str' could not be "
                              "converted to Float",
    "launch.num_warps=four": "launch.num_warps='four' is invalid: Value 'four' of type 'str' could not be "
                             "converted to Integer; valid: 1, 2, 4, 8, 16 (amd), up to 32 (nvidia)",
    "resume=maybe": "resume='maybe' is invalid: Value 'maybe' is not a valid bool (type str); valid: true, false",
    "launch.num_wraps=4": "launch.num_wraps is not a key of launch; did you mean num_warps? valid: num_stages, "
                          "num_warps",
    "isolation.mode=proces": "isolation.mode='proces' is invalid; did you mean process? valid: auto, process, none",
    "shape.select=[l99": "cannot parse the override 'shape.select=[l99': no viable alternative at input '[l99'",
    "+swizzle=xcd": "Multiple values for swizzle. To override a value use 'override swizzle: xcd'",
    "compare.bogus=1": "compare.bogus is not a key of compare; valid: baseline, check_every, ci_method, configs, "
                       "launches_per_round, max_rounds, max_time_s, min_effect, min_l2_delta, min_rounds, "
                       "placements, target_precision, timer, warmup_ms",
    "+tune.bogus=1": "tune.bogus is not a key of tune; valid: cache_dir, compile_jobs, final_placements, "
                     "final_rounds, finalists, max_final_rounds, min_finalists, name, on_cpu, rounds, tie_band, "
                     "tie_tolerance, warmup_ms",
    "compare.min_effect=3": "compare.min_effect=3.0 must be a fraction in [0, 1), e.g. 0.01 for 1 %",
    "isolation.timeout_s=[1]": "isolation.timeout_s=[1] is invalid: Value '[1]' of type 'list' could not be "
                               "converted to Float",
}


@pytest.mark.parametrize("override", list(SCHEMA_REFUSALS))
def test_schema_refuses_bad_types_and_unknown_keys_in_one_line(tmp_path, override):
    """Typed groups (harness/schema.py): a value of the wrong type or a key the group lacks is
    refused while Hydra composes (``+key=`` additions when the job starts), a range check in
    ``__post_init__``; each one line, exit 2, before the store is opened."""
    proc = _harness(["shape=tiny", override, f"tracking.uri=sqlite:///{tmp_path}/s.db"], cwd=tmp_path, timeout=300)
    assert proc.returncode == USER_ERROR_EXIT, proc.stderr[-2000:]
    assert proc.stderr.splitlines() == [f"error: {SCHEMA_REFUSALS[override]}"]
    assert not (tmp_path / "s.db").exists()


def test_refused_sweep_value_logs_nothing(tmp_path):
    """A swept value the schema refuses is composed per job: every job's config is checked
    before the sweep's run is created, so the refusal logs nothing."""
    proc = _harness(["-m", "shape=tiny", "compare.min_effect=abc,0.1", f"tracking.uri=sqlite:///{tmp_path}/s.db",
                     "experiment=refused", f"hydra.sweep.dir={tmp_path}/sweep"], cwd=tmp_path, timeout=300)
    assert proc.returncode == USER_ERROR_EXIT, proc.stderr[-2000:]
    assert proc.stderr.splitlines() == [f"error: {SCHEMA_REFUSALS['compare.min_effect=abc']}"]
    assert not (tmp_path / "s.db").exists()     # refused before the store is opened


@pytest.mark.parametrize("ask", ["HYDRA_FULL_ERROR=1", "-v"])
def test_schema_refusal_with_full_error_env_is_hydras_report(tmp_path, ask):
    flags, env = (["-v"], None) if ask == "-v" else ([], {"HYDRA_FULL_ERROR": "1"})
    proc = _harness([*flags, "compare.min_effect=abc"], cwd=tmp_path, timeout=300, env=env)
    assert proc.returncode not in (0, USER_ERROR_EXIT)
    assert "Traceback" in proc.stderr and "ValidationError" in proc.stderr


@pytest.mark.parametrize("flag", ["-v", "--verbose"])
def test_misspelled_option_in_full_is_hydras_report(tmp_path, flag):
    proc = _harness([flag, "swizzle=xdc"], cwd=tmp_path, timeout=300)
    assert proc.returncode not in (0, USER_ERROR_EXIT)
    assert "Could not find 'swizzle/xdc'" in proc.stderr and "Available options in 'swizzle':" in proc.stderr


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
    assert list(config.hydra.callbacks)[:2] == ["user_errors", "mlflow_sweep"]
