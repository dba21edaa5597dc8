"""Compose every config option the way Hydra does (lightning-hydra-template style)."""
import re
from pathlib import Path

import pytest
from hydra import compose, initialize_config_module
from omegaconf import OmegaConf

import swizzlebench_conf
from harness.job.shapes import expand_preset

CONF = Path(swizzlebench_conf.__file__).parent


def _options(group):
    return sorted(p.stem for p in (CONF / group).glob("*.yaml"))


def _compose(*overrides):
    with initialize_config_module("swizzlebench_conf", version_base="1.3"):
        return compose("config", overrides=list(overrides))


def test_groups_have_the_documented_options():
    assert _options("kernel") == ["direct", "igemm", "igemm_best", "igemm_fast", "igemm_ws", "patch"]
    assert set(_options("swizzle")) >= {"colmajor", "custom", "grouped", "identity", "identity_copy", "scatter",
                                        "seed_attempt1", "seed_attempt2", "seed_patch", "seed_xcd", "xcd",
                                        "xcd_grouped"}
    from swizzles.families import FAMILIES
    assert set(FAMILIES) <= set(_options("swizzle"))   # one option per parametric family
    assert _options("shape") == ["calibrate", "holdout", "kinds", "resnet", "seed", "tiny", "unseen", "unseen10", "unseen2", "unseen3", "unseen4", "unseen5", "unseen6", "unseen7", "unseen8", "unseen9"]
    assert _options("tune") == ["fastest", "none", "table"]
    assert _options("study") == ["calibrate"]
    assert _options("target") == ["auto", "h100", "h200", "mi300x"]
    assert set(_options("profiler")) >= {"auto", "ncu", "none", "rocprofv3"}


@pytest.mark.parametrize("profiler", ["auto", "ncu", "none", "rocprofv3"])
def test_profiler_options(profiler):
    cfg = _compose(f"profiler={profiler}")
    assert cfg.profiler.name == profiler
    if profiler != "none":
        assert cfg.profiler.repeats == 5 and cfg.profiler.batch is True
    if profiler == "ncu":
        assert cfg.profiler.cache_control == "all" and cfg.profiler.clock_control == "base"


def test_defaults():
    cfg = _compose()
    assert cfg.kernel.name == "igemm_best" and cfg.tune.name == "table" and cfg.swizzle.name == "identity" and cfg.shape.name == "seed"
    assert cfg.target.name == "auto" and cfg.tracking.uri == "sqlite:///mlflow.db"
    assert cfg.launch.num_warps == cfg.kernel.num_warps


@pytest.mark.parametrize("kernel", ["direct", "igemm", "igemm_best", "igemm_fast", "igemm_ws", "patch"])
def test_kernel_options(kernel):
    cfg = _compose(f"kernel={kernel}")
    from kernels import KERNELS
    family = KERNELS[cfg.kernel.name]
    assert family.check_tiles(cfg.kernel.tiles) and family.check_tiles(cfg.kernel.interpret_tiles)
    assert cfg.launch.num_warps in (4, 8)


@pytest.mark.parametrize("swizzle", ["grouped", "identity", "seed_attempt1", "seed_attempt2", "seed_patch",
                                     "seed_xcd", "xcd", "xcd_grouped"])
def test_swizzle_options(swizzle):
    from swizzles import SWIZZLES
    cfg = _compose(f"swizzle={swizzle}", "target=mi300x")
    assert cfg.swizzle.name in SWIZZLES
    assert cfg.swizzle.num_xcds == 8  # from the target
    assert _compose(f"swizzle={swizzle}", "target=h100").swizzle.num_xcds == 1
    assert _compose(f"swizzle={swizzle}", "swizzle.num_xcds=4").swizzle.num_xcds == 4


@pytest.mark.parametrize("target", ["auto", "h100", "h200", "mi300x"])
def test_target_options(target):
    cfg = _compose(f"target={target}")
    assert {"name", "vendor", "num_xcds", "compute_units", "l2_bytes", "l2_ways", "l2_line_bytes"} <= set(cfg.target)
    if target == "mi300x":
        assert (cfg.target.num_xcds, cfg.target.compute_units, cfg.target.l2_bytes, cfg.target.l2_ways,
                cfg.target.l2_line_bytes) == (8, 304, 4 * 2**20, 16, 128)


def test_shape_seed():
    (entry,) = expand_preset(_compose("shape=seed").shape)
    s = entry.shape
    assert (s.N, s.C, s.H, s.W, s.F, s.R, s.S, s.stride, s.padding, s.dtype) == (32, 32, 32, 32, 64, 3, 3, 1, 0, "float16")


def test_shape_resnet_has_every_distinct_layer():
    entries = expand_preset(_compose("shape=resnet").shape)
    shapes = [e.shape for e in entries]
    assert len(shapes) == 23 and all(s is not None for s in shapes)
    keys = {(s.C, s.H, s.F, s.R, s.stride) for s in shapes}
    assert len(keys) == 23 and all(s.N == 32 for s in shapes)
    assert (3, 224, 64, 7, 2) in keys                                   # 7x7 stem
    assert {s.R for s in shapes} == {1, 3, 7}
    assert sum(s.stride == 2 for s in shapes) == 7                       # stem + 3 x (3x3 s2 + downsample)
    assert {(s.P, s.Q) for s in shapes} == {(112, 112), (56, 56), (28, 28), (14, 14), (7, 7)}


def test_shape_select_and_dtype():
    entries = expand_preset(_compose("shape=resnet", "shape.select=[l03,l12]", "shape.dtype=bfloat16").shape)
    assert [e.name for e in entries] == ["l03", "l12"] and entries[0].shape.dtype == "bfloat16"
    with pytest.raises(ValueError, match="valid: l01, l02"):
        expand_preset(_compose("shape=resnet", "shape.select=[l99]").shape)


def test_tiny_shapes_fit_the_interpreter_unscaled():
    from harness.job.shapes import downscale
    for e in expand_preset(_compose("shape=tiny").shape):
        assert downscale(e.shape) == e.shape


def test_launch_is_sweepable():
    cfg = _compose("launch.num_warps=4", "launch.num_stages=2", "kernel.tiles.BLOCK_M=64")
    assert (cfg.launch.num_warps, cfg.launch.num_stages, cfg.kernel.tiles.BLOCK_M) == (4, 2, 64)


def test_tracking_uri_overridable():
    assert _compose("tracking.uri=http://host:5000").tracking.uri == "http://host:5000"


def test_hydra_job_name_is_not_main():
    with initialize_config_module("swizzlebench_conf", version_base="1.3"):
        cfg = compose("config", return_hydra_config=True)
    assert cfg.hydra.job.name == "swizzlebench"
    assert "mlflow_sweep" in cfg.hydra.callbacks
    OmegaConf.resolve  # noqa: B018 (documented API used by the app)


def test_every_config_group_is_packaged():
    """A non-editable install ships only the packages pyproject lists: every group must be there."""
    import tomllib
    project = tomllib.loads((CONF.parent / "pyproject.toml").read_text())
    packaged = set(project["tool"]["setuptools"]["packages"])
    groups = {p.name for p in CONF.iterdir() if p.is_dir() and not p.name.startswith("__")}
    assert {f"swizzlebench_conf.{g}" for g in groups} <= packaged


def test_wheel_ships_every_module_and_config(tmp_path):
    """Build the real wheel (as an offline GPU node installs it) and compare its files with the tree."""
    import subprocess
    import sys
    import zipfile
    import shutil
    root = CONF.parent
    src = tmp_path / "src"  # a clean copy: a stale build/ folder must not hide a missing package
    src.mkdir()
    for name in ("pyproject.toml", "README.md", "harness", "kernels", "swizzles", "hydra_plugins", "conf"):
        copy = shutil.copytree if (root / name).is_dir() else shutil.copy
        copy(root / name, src / name, **({"ignore": shutil.ignore_patterns("__pycache__")}
                                       if (root / name).is_dir() else {}))
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                    "-w", str(tmp_path), str(src)], check=True, capture_output=True)
    (wheel,) = tmp_path.glob("swizzlebench-*.whl")
    shipped = set(zipfile.ZipFile(wheel).namelist())
    root = src
    expected = {str(p.relative_to(root)) for pkg in ("harness", "kernels", "swizzles", "hydra_plugins")
                for p in (root / pkg).rglob("*.py") if "__pycache__" not in p.parts}
    expected |= {"swizzlebench_conf/" + str(p.relative_to(CONF)) for p in CONF.rglob("*.yaml")}
    assert expected - shipped == set()


def test_custom_swizzle_option():
    from harness.job.spec_config import swizzle_choice
    cfg = _compose("swizzle=custom", "swizzle.expr='pid % num_xcds * (num_pids // num_xcds) + pid // num_xcds'")
    label, formula = swizzle_choice(cfg.swizzle)
    assert label.startswith("custom-") and formula.startswith("new_pid = ")
    assert swizzle_choice(_compose("swizzle=custom", "swizzle.expr=pid", "swizzle.label=mine").swizzle)[0] == "mine"
    with pytest.raises(ValueError, match="needs exactly one of swizzle.expr"):
        swizzle_choice(_compose("swizzle=custom").swizzle)


@pytest.mark.parametrize("label, problem", [
    ("mine", None), ("formula:rot[k=1]", None),   # a search formula's label (harness.search.space) is its own
    ("a/b", "has a '/' or white space"), ("my remap", "has a '/' or white space"), ("", "is empty"),
    ("xcd", "names a built-in swizzle"), ("grouped_m[num_xcds=8,chunk=0,group_size=8]", "names a built-in swizzle"),
])
def test_a_label_must_name_runs_of_its_own(label, problem):
    from harness.job.spec_config import check_label
    from harness.search.space import FORMULA_PREFIX

    assert "formula:rot[k=1]".startswith(FORMULA_PREFIX)
    if problem is None:
        assert check_label(label) == label
    else:
        with pytest.raises(ValueError, match=re.escape(f"swizzle.label={label!r} {problem}")):
            check_label(label)
