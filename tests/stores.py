"""A migrated, empty MLflow SQLite store to start a CLI run's store from.  MLflow migrates a
new SQLite store (alembic: every revision script loaded and run) in the first process that
opens it, 1.5-3 s of CPU per CLI run; a copy of one store migrated per test process skips it."""
from __future__ import annotations

import atexit
import functools
import shutil
import tempfile
from pathlib import Path

SQLITE_URI = "tracking.uri=sqlite:///"


@functools.cache
def _migrated_store() -> Path:
    from mlflow.tracking import MlflowClient

    folder = Path(tempfile.mkdtemp(prefix="swizzlebench-store-"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    path = folder / "store.db"
    MlflowClient(tracking_uri=f"sqlite:///{path}").search_experiments()
    return path


def seed_stores(args: list[str]) -> None:
    """Copies the migrated empty store to each absolute ``tracking.uri=sqlite:///PATH`` override
    in ``args`` whose file does not exist yet (an existing store is left as it is)."""
    for arg in args:
        if arg.startswith(SQLITE_URI):
            path = Path(arg.removeprefix(SQLITE_URI))
            if path.is_absolute() and path.parent.is_dir() and not path.exists():
                shutil.copyfile(_migrated_store(), path)
