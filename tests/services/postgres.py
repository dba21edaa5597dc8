"""A throwaway PostgreSQL cluster for the ``cluster`` tests (Debian's ``postgresql``): ``initdb``
into a fresh temporary folder, ``postgres`` in the foreground on a free port of 127.0.0.1
(and a socket in that folder), trust authentication, no fsync; stopped with ``pg_ctl stop -m
fast`` and its folder removed at the end.  PostgreSQL refuses to run as root: under root the
cluster belongs to, and runs as, the ``postgres`` user the Debian package creates.

Each store is a database of its own (:meth:`PostgresCluster.create_database`), served to the
harness by ``mlflow server --backend-store-uri postgresql://...``: SQLAlchemy >= 2.1 opens
``postgresql://`` with psycopg 3 (``psycopg[binary]``, in the dev extra; ``postgresql+psycopg2://``
would need psycopg2)."""
from __future__ import annotations

import contextlib
import glob
import os
import pwd
import re
import shutil
import subprocess
import tempfile
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import pytest

from tests.mlflow_server import free_port
from tests.services import log_tails, start_daemon, stop_daemon, wait_until

BINARIES = ("initdb", "postgres", "pg_ctl", "pg_isready")
#: The user the cluster runs as when the tests run as root (Debian's package creates it).
SYSTEM_USER = "postgres"
ROLE = "swizzlebench"


def _binaries() -> dict[str, str]:
    """name -> path, from PATH or Debian's /usr/lib/postgresql/<version>/bin (newest); skips if absent."""
    folders = [*os.environ.get("PATH", "").split(os.pathsep),
               *sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=lambda p: int(p.split("/")[-2]), reverse=True)]
    found = {}
    for name in BINARIES:
        found[name] = next((str(Path(f) / name) for f in folders if f and os.access(Path(f) / name, os.X_OK)), None)
    missing = sorted(n for n, path in found.items() if path is None)
    if missing:
        pytest.skip(f"needs {', '.join(missing)} (Debian package postgresql: apt-get install -y postgresql; "
                    ".ci/run installs it)")
    return found  # type: ignore[return-value]


@dataclass
class PostgresCluster:
    """A running cluster: databases are created by :meth:`create_database`."""

    root: Path
    port: int
    bins: dict[str, str]
    user: str | None          # the system user it runs as (None: this process's)

    @property
    def log(self) -> Path:
        return self.root / "postgres.log"

    def url(self, database: str) -> str:
        """SQLAlchemy URL of ``database`` (what ``mlflow server --backend-store-uri`` takes)."""
        return f"postgresql://{ROLE}@127.0.0.1:{self.port}/{database}"

    def create_database(self, name: str) -> str:
        """Create the empty database ``name``; its URL."""
        import psycopg

        with psycopg.connect(host="127.0.0.1", port=self.port, user=ROLE, dbname="postgres", connect_timeout=10,
                             autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def ready(self) -> bool:
        return subprocess.run([self.bins["pg_isready"], "-q", "-h", "127.0.0.1", "-p", str(self.port)],
                              timeout=30).returncode == 0


def _as_user(user: str | None) -> dict:
    """Popen's arguments that run a command as ``user`` (nothing for None)."""
    if user is None:
        return {}
    entry = pwd.getpwnam(user)
    return {"user": entry.pw_uid, "group": entry.pw_gid, "extra_groups": [],
            "env": {**os.environ, "HOME": entry.pw_dir, "USER": user, "LOGNAME": user}}


@contextlib.contextmanager
def running_postgres() -> Iterator[PostgresCluster]:
    """Start a throwaway cluster (skips without Debian's postgresql); stop it and remove its folder after."""
    bins = _binaries()
    user = SYSTEM_USER if os.geteuid() == 0 else None
    if user is not None:
        try:
            pwd.getpwnam(user)
        except KeyError:
            pytest.skip(f"PostgreSQL refuses to run as root and there is no '{user}' user "
                        "(apt-get install -y postgresql creates it)")
    # Under /tmp, not pytest's tmp_path: that is private to root, and the cluster's user must enter it.
    root = Path(tempfile.mkdtemp(prefix="swizzlebench-pg-"))
    cluster = PostgresCluster(root, free_port(), bins, user)
    daemon = None
    try:
        if user is not None:
            shutil.chown(root, user)
        init = subprocess.run([bins["initdb"], "-D", str(root / "data"), "-U", ROLE, "--auth=trust", "-E", "UTF8",
                               "--no-sync"], capture_output=True, text=True, timeout=120, **_as_user(user))
        if init.returncode:
            pytest.fail(f"initdb exited {init.returncode}:\n{init.stdout[-2000:]}\n{init.stderr[-2000:]}")
        daemon = start_daemon([bins["postgres"], "-D", str(root / "data"), "-p", str(cluster.port), "-k", str(root),
                               "-c", "listen_addresses=127.0.0.1", "-c", "fsync=off", "-c", "max_connections=200"],
                              cluster.log, **_as_user(user))
        wait_until(cluster.ready, "postgres", [cluster.log], [daemon])
        yield cluster
    finally:
        if daemon is not None and daemon.poll() is None:
            subprocess.run([bins["pg_ctl"], "stop", "-D", str(root / "data"), "-m", "fast", "-w", "-t", "30"],
                           capture_output=True, timeout=60, **_as_user(user))
            stop_daemon(daemon)
        if daemon is not None and daemon.returncode not in (0, None):
            print(f"postgres exited {daemon.returncode}:\n{log_tails([cluster.log])}")
        shutil.rmtree(root, ignore_errors=True)


@contextlib.contextmanager
def mlflow_server_on_postgres(cluster: PostgresCluster, workdir: Path) -> Iterator[str]:
    """Base URL of an ``mlflow server`` over a new database of ``cluster`` (its log and artifacts
    in ``workdir``, whose name names the database); stopped after."""
    from tests.mlflow_server import running_mlflow_server

    name = re.sub(r"\W", "_", f"mlflow_{workdir.name}_{uuid.uuid4().hex[:8]}").lower()[-63:]
    with running_mlflow_server(cluster.create_database(name), workdir) as base:
        yield base
