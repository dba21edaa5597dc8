"""The GPU node's install (``benchmarks/gpu_setup.sh``) from a wheelhouse into a target folder,
offline: every ``hydra_plugins`` package survives it, and Hydra composes
``hydra/launcher=joblib`` and ``hydra/launcher=submitit_local`` from what it installed.

The wheelhouse holds the launchers' wheels, repacked from this environment's installed
distributions (no network).  The composing interpreter runs with ``-S`` and sees the target
folder plus a view of this environment's site-packages without any ``hydra_plugins`` and
without the project itself, so a launcher the install dropped cannot be found elsewhere.
"""
from __future__ import annotations

import importlib.metadata
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from harness.tools.wheelhouse import PROJECT_ROOT

LAUNCHERS = {"hydra-joblib-launcher": "hydra_joblib_launcher", "hydra-submitit-launcher": "hydra_submitit_launcher"}
#: What the node's copy of the checkout holds (the script installs it with pip).
CHECKOUT = ("pyproject.toml", "README.md", "harness", "kernels", "swizzles", "hydra_plugins", "conf",
            "benchmarks/gpu_setup.sh")
#: Left out of the view of this environment: the project (installed editable here) and every plugin.
HIDDEN = ("hydra_plugins", "harness", "kernels", "swizzles", "conf", "swizzlebench_conf")


def repack_wheel(name: str, out: Path) -> Path:
    """A wheel of the installed distribution ``name``, from its RECORD."""
    dist = importlib.metadata.distribution(name)
    stem = f"{dist.metadata['Name'].replace('-', '_')}-{dist.version}"
    path = out / f"{stem}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as zf:
        files = [f for f in dist.files if "__pycache__" not in str(f) and not str(f).startswith("..")]
        for f in files:
            if not str(f).endswith(("RECORD", "INSTALLER", "REQUESTED", "direct_url.json")):
                zf.write(f.locate(), str(f))
        zf.writestr(f"{stem}.dist-info/RECORD", "".join(f"{f},,\n" for f in files if "dist-info" not in str(f)))
    return path


def site_view(root: Path) -> Path:
    """A folder of links to this environment's site-packages entries, but for :data:`HIDDEN`,
    the project's editable hooks and ``.pth`` files."""
    view = root / "view"
    view.mkdir()
    for folder in [p for p in map(Path, sys.path) if p.name == "site-packages" and p.is_dir()]:
        for entry in folder.iterdir():
            name = entry.name
            if (name in HIDDEN or name.startswith(("__editable__", "swizzlebench")) or name.endswith(".pth")
                    or (view / name).exists()):
                continue
            (view / name).symlink_to(entry)
    return view


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> tuple[Path, Path, Path]:
    """(checkout copy, target folder, view): ``gpu_setup.sh`` run on a wheelhouse of the launchers."""
    root = tmp_path_factory.mktemp("gpu_setup")
    checkout, wheels, site = root / "checkout", root / "wheelhouse", root / "site"
    for part in CHECKOUT:
        src, dst = PROJECT_ROOT / part, checkout / part
        dst.parent.mkdir(parents=True, exist_ok=True)
        if src.is_dir():
            shutil.copytree(src, dst, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
        else:
            shutil.copy2(src, dst)
    wheels.mkdir()
    for name in LAUNCHERS:
        repack_wheel(name, wheels)
    env = {**os.environ, "SWIZZLEBENCH_SITE": str(site), "SWIZZLEBENCH_WHEELS": str(wheels),
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}", "PIP_NO_INDEX": "1"}
    for _ in range(2):   # idempotent: a second run over the first keeps every plugin
        proc = subprocess.run(["bash", "-c", ". benchmarks/gpu_setup.sh && echo \"PYTHONPATH=$PYTHONPATH\""],
                              cwd=checkout, env=env, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
        assert f"PYTHONPATH={site}" in proc.stdout
    return checkout, site, site_view(root)


def test_every_hydra_plugin_survives_the_install(installed):
    _, site, _ = installed
    plugins = {p.name for p in (site / "hydra_plugins").iterdir() if p.is_dir() and p.name != "__pycache__"}
    assert plugins == {"swizzlebench_search", *LAUNCHERS.values()}
    assert (site / "harness" / "app.py").is_file() and not (Path(f"{site}.own")).exists()


@pytest.mark.parametrize("launcher,target", [("joblib", "hydra_joblib_launcher.joblib_launcher.JoblibLauncher"),
                                             ("submitit_local", "hydra_submitit_launcher.submitit_launcher.LocalLauncher")])
def test_the_installed_copy_composes_each_launcher(installed, tmp_path, launcher, target):
    _, site, view = installed
    env = {**os.environ, "PYTHONPATH": f"{site}{os.pathsep}{view}"}
    proc = subprocess.run([sys.executable, "-S", "-m", "harness", f"hydra/launcher={launcher}", "--cfg", "hydra",
                           "--package", "hydra.launcher"], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert f"_target_: hydra_plugins.{target}" in proc.stdout


def test_without_the_launchers_composing_fails(installed, tmp_path):
    """Control: the view hides this environment's plugins; a target folder without the
    launchers cannot compose joblib."""
    _, site, view = installed
    bare = tmp_path / "bare"
    shutil.copytree(site, bare, ignore=shutil.ignore_patterns(*LAUNCHERS.values()))
    env = {**os.environ, "PYTHONPATH": f"{bare}{os.pathsep}{view}"}
    proc = subprocess.run([sys.executable, "-S", "-m", "harness", "hydra/launcher=joblib", "--cfg", "hydra",
                           "--package", "hydra.launcher"], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode != 0 and "joblib" in proc.stdout + proc.stderr
