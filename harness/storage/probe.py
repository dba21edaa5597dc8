"""Store probes: whether a tracking store can be opened, answered in seconds, once per sweep.

MLflow's own clients wait minutes on a store that is not there: the SQLite store retries
opening its engine 10 times with exponential backoff (about 100 s), the REST client retries
a request 7 times with a 120 s timeout.  Before the Tracker touches a store:

* :func:`bound_store_waits` bounds both, for the whole process: HTTP retries, backoff and
  timeout from ``STORE_HTTP_ENV`` (a value the user set wins), SQLite's engine retries to
  ``SQLITE_OPEN_ATTEMPTS``; a store that dies mid-job then fails its request in at most
  ``STORE_HTTP_ENV``'s timeout x attempts plus backoff (under 10 s) and the run is spooled;
* :func:`store_problem` answers, without MLflow, why a store cannot be opened: a SQLite path
  that is a folder, under a file, not writable, or not a SQLite file; an HTTP server that
  does not answer ``/health`` within ``HTTP_PROBE_TIMEOUT_S``;
* :func:`mark_down` / :func:`known_down`: the sweep's start records a store it found down in
  ``STORE_DOWN_ENV``, which its jobs (in process, or in a launcher's workers, which inherit
  the environment) and its end read instead of probing again.
"""
from __future__ import annotations

import os
import re
from pathlib import Path

#: MLflow's REST client settings while swizzlebench runs (each a default: the user's wins).
#: A refused connection fails at once; a server that accepts but never answers in
#: 2 attempts x 3 s (the first retry waits no backoff).
STORE_HTTP_ENV = {"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "1", "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1",
                  "MLFLOW_HTTP_REQUEST_BACKOFF_JITTER": "0.5", "MLFLOW_HTTP_REQUEST_TIMEOUT": "3"}
#: Attempts of MLflow's SQLite engine creation (MLflow's own: 10, about 100 s of backoff);
#: 2 attempts wait 0.1 s.
SQLITE_OPEN_ATTEMPTS = 2
#: The HTTP probe's timeout (connect and read), s.
HTTP_PROBE_TIMEOUT_S = 3.0
#: Set by a sweep's start for its jobs: ``<tracking uri>\t<why it is down>``.
STORE_DOWN_ENV = "SWIZZLEBENCH_STORE_DOWN"
#: The first bytes of every SQLite 3 database file.
SQLITE_HEADER = b"SQLite format 3\x00"
SQLITE_PREFIX = "sqlite:///"


def bound_store_waits() -> None:
    """Bound MLflow's waits on a store that is not there (see the module docstring)."""
    for name, value in STORE_HTTP_ENV.items():
        os.environ.setdefault(name, value)
    from mlflow.store.db import utils as db_utils

    db_utils.MAX_RETRY_COUNT = min(db_utils.MAX_RETRY_COUNT, SQLITE_OPEN_ATTEMPTS)


def sqlite_path(uri: str) -> Path | None:
    """The database file of a ``sqlite:///`` URI (None: in memory, or not SQLite)."""
    if not uri.startswith(SQLITE_PREFIX):
        return None
    path = uri[len(SQLITE_PREFIX):].partition("?")[0]
    return None if not path or path.startswith(":memory:") else Path(path)


def sqlite_problem(path: Path) -> str | None:
    """Why the SQLite database ``path`` cannot be opened for writing, or None."""
    if path.is_dir():
        return f"SQLite store {path} is a folder, not a database file"
    if path.exists():
        if not os.access(path, os.R_OK | os.W_OK):
            return f"SQLite store {path} is not readable and writable by this user"
        with open(path, "rb") as f:
            head = f.read(len(SQLITE_HEADER))
        if head and head != SQLITE_HEADER:
            return f"{path} is not a SQLite database (its first bytes are {head[:8]!r})"
        return None
    parent = path.parent
    while not parent.exists():   # MLflow creates missing folders: the first existing one must take them
        parent = parent.parent
    if not parent.is_dir():
        return f"SQLite store {path} cannot be created: {parent} is a file, not a folder"
    if not os.access(parent, os.W_OK | os.X_OK):
        return f"SQLite store {path} cannot be created: folder {parent} is not writable"
    return None


def http_problem(uri: str) -> str | None:
    """Why the tracking server at ``uri`` does not answer (``GET /health`` within
    ``HTTP_PROBE_TIMEOUT_S``), or None: any HTTP answer means it is there."""
    import requests

    base = uri.rstrip("/")
    try:
        requests.get(f"{base}/health", timeout=HTTP_PROBE_TIMEOUT_S)
    except requests.exceptions.Timeout:
        return f"cannot reach {base}: no answer within {HTTP_PROBE_TIMEOUT_S:g} s"
    except requests.exceptions.RequestException as exc:
        errno = re.search(r"\[Errno -?\d+\][^'\"()]*", str(exc))
        return f"cannot reach {base}: {errno.group(0).strip() if errno else type(exc).__name__}"
    return None


def store_problem(uri: str) -> str | None:
    """Why the store at ``uri`` cannot be opened, found in seconds without MLflow; None when
    nothing is known to be wrong (MLflow may still refuse it: the Tracker then goes offline)."""
    path = sqlite_path(uri)
    if path is not None:
        return sqlite_problem(path)
    if uri.startswith(("http://", "https://")):
        return http_problem(uri)
    return None


def mark_down(uri: str, reason: str) -> None:
    """Record for this process and its children that the store at ``uri`` is down."""
    os.environ[STORE_DOWN_ENV] = f"{uri}\t{reason}"


def clear_down() -> None:
    os.environ.pop(STORE_DOWN_ENV, None)


def known_down(uri: str) -> str | None:
    """Why the store at ``uri`` was found down by this sweep's start, or None."""
    marked, _, reason = os.environ.get(STORE_DOWN_ENV, "").partition("\t")
    return reason if marked == uri and reason else None
