"""Where a result came from: code commit and library versions (logged as MLflow tags)."""
from __future__ import annotations

import functools
import os
import subprocess
from pathlib import Path


#: Written into the package by ``harness.tools.wheelhouse build`` (installs have no .git).
BUILD_COMMIT_FILE = "BUILD_COMMIT"


def build_commit_path() -> Path:
    """``harness/BUILD_COMMIT``: where a build (the wheelhouse, or a GPU session's carried
    file) records the commit, beside the package's ``__init__.py``."""
    return Path(__file__).resolve().parents[1] / BUILD_COMMIT_FILE


@functools.lru_cache(maxsize=1)
def git_commit() -> str:
    """The commit of the swizzlebench code: ``SWIZZLEBENCH_GIT_COMMIT`` if set, else the
    commit recorded at wheel-build time (only built wheels carry it), else the checkout's
    ``git rev-parse HEAD`` (``+dirty`` marks uncommitted changes), else ``unknown``."""
    if os.environ.get("SWIZZLEBENCH_GIT_COMMIT"):
        return os.environ["SWIZZLEBENCH_GIT_COMMIT"]
    recorded = build_commit_path()
    if recorded.exists():
        return recorded.read_text().strip()
    root = Path(__file__).resolve().parent.parent
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True,
                                text=True, timeout=10, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root,
                               capture_output=True, text=True, timeout=10).stdout.strip()
        return commit + ("+dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def library_versions() -> dict[str, str]:
    import torch
    import triton

    return {"torch_version": torch.__version__, "triton_version": triton.__version__}
