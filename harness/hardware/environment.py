"""Environment variables set for a moment: a spawned child's GPU visibility, MLflow's
HTTP retry settings during a probe; the import path a ``python -m`` child needs."""
from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator, Mapping


@contextlib.contextmanager
def temporary_environment(values: Mapping[str, str]) -> Iterator[None]:
    """Set ``values`` in ``os.environ`` for the ``with`` block, then restore what was there
    (removing the variables that were unset before)."""
    saved = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def child_pythonpath(environ: Mapping[str, str] = os.environ) -> dict[str, str]:
    """``PYTHONPATH`` for a ``python -m`` child started in another directory, so that it
    imports what this process imports: this process's ``sys.path`` entries outside the
    interpreter's own prefixes (the launch directory, where a user's kernels and swizzles
    named by import path live, PYTHONPATH, editable installs), in order, then the inherited
    ``PYTHONPATH``."""
    prefixes = tuple(os.path.join(os.path.realpath(p), "") for p in {sys.prefix, sys.base_prefix, sys.exec_prefix})
    entries = [os.path.realpath(p or os.curdir) for p in sys.path]
    mine = [p for p in entries if os.path.isdir(p) and not os.path.join(p, "").startswith(prefixes)]
    inherited = [p for p in environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    return {"PYTHONPATH": os.pathsep.join(dict.fromkeys(mine + inherited))}
