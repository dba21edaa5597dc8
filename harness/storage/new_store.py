"""A new SQLite tracking store starts as a copy of an empty one.

MLflow makes a new SQLite store by running its whole chain of Alembic migrations (over a
hundred scripts), about 2 s of CPU, in the first process that opens a path where no database
is yet.  The tables it leaves depend only on the MLflow version, so that work is done once per
version into a template in a cache folder, and a new store is a copy of the template: MLflow
then opens it as any existing store (same tables, same schema revision) and adds its
``Default`` experiment itself, with the artifact location of the process that opens it.

The template lies in :func:`harness.cache_home.cache_root`.  Where that cannot be written, nothing is copied and MLflow makes the
store as usual: the template only saves time.  Callers hold the store's lock
(:func:`harness.storage.claims.store_lock`), so two processes never make the same store.
"""
from __future__ import annotations

import os
import shutil
import sqlite3
import tempfile
from pathlib import Path

from harness.cache_home import cache_root
from harness.storage.probe import sqlite_path


def template_path() -> Path:
    """The empty store of the installed MLflow version."""
    import mlflow

    return cache_root() / f"mlflow-{mlflow.__version__}-empty.db"


def _make_template(path: Path) -> None:
    """Let MLflow make a store in a scratch file, drop the one experiment it adds (``Default``,
    whose artifact location names the scratch folder), and move the file to ``path`` in one
    step (a process that finds ``path`` finds it whole)."""
    from mlflow.tracking import MlflowClient

    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=path.parent) as scratch:
        made = Path(scratch) / "store.db"
        MlflowClient(tracking_uri=f"sqlite:///{made}")
        with sqlite3.connect(made) as db:
            db.execute("DELETE FROM experiments")
        db.close()
        os.replace(made, path)


def seed_new_store(uri: str) -> bool:
    """Copy the template to the SQLite store at ``uri`` when no database is there yet; True
    when copied.  Other stores, an existing database and an unwritable cache: False."""
    path = sqlite_path(uri)
    if path is None or (path.exists() and path.stat().st_size > 0):
        return False
    template = template_path()
    try:
        if not template.exists():
            _make_template(template)
        path.parent.mkdir(parents=True, exist_ok=True)
        scratch = path.with_name(f".{path.name}.new")
        shutil.copyfile(template, scratch)
        os.replace(scratch, path)
    except OSError:
        return False
    return True
