"""Environment variables set for a moment: a spawned child's GPU visibility, MLflow's
HTTP retry settings during a probe."""
from __future__ import annotations

import contextlib
import os
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
