"""The folder of swizzlebench's caches on this machine: ``$SWIZZLEBENCH_CACHE``, else
``$XDG_CACHE_HOME/swizzlebench``, else ``~/.cache/swizzlebench``.  Each cache is a subfolder
(``tuning``, ``compile``, ``sass``) or a file (the empty MLflow store) under it; deleting any of them
costs only time.  ``swizzles.generated`` keeps generated formula modules in ``formulas/`` under
the same root (it does not import the harness)."""
from __future__ import annotations

import os
from pathlib import Path


def cache_root() -> Path:
    """The caches' folder (see the module docstring); not created here."""
    if os.environ.get("SWIZZLEBENCH_CACHE"):
        return Path(os.environ["SWIZZLEBENCH_CACHE"]).expanduser()
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache").expanduser() / "swizzlebench"
