"""Offline spool: runs kept on local disk while the MLflow tracking store is unreachable,
and the command that names how to log them later (harness.storage.sync does it).

When ``harness.storage.tracking.Tracker`` cannot reach or write the store (connection refused, a
timeout, an ``MlflowException`` from the REST store, SQLite ``database is locked`` after
retries), it writes each run's complete record here instead of losing it::

    mlflow-spool/                               (config ``tracking.spool_dir``)
      job-20261122T023510-spool-1f0c....json    one record per run (SpoolRecord as JSON)
      spool-1f0c.../profiler/ncu.csv            the run's file artifacts, copied
      synced/                                   records already logged, kept for reference

Replay them into a store (the one they were meant for, or another)::

    python -m harness.storage.sync [--spool DIR] [--tracking-uri URI]      (harness/storage/sync.py)

Sync is idempotent: a record moves to ``synced/`` once logged; a record whose run is
already in the store (tag ``swizzlebench.spool_id``) is not logged twice; a job whose
spec hash already has a FINISHED run in the experiment is not duplicated.  A sweep
(parent) run spooled while offline is created first, and its jobs are nested under it.
"""
from __future__ import annotations

import dataclasses
import json
import os
import shutil
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

#: Default spool directory (relative to the directory the sweep was launched from).
DEFAULT_SPOOL_DIR = "mlflow-spool"
#: Prefix of the ids handed out for runs that exist only in the spool.
SPOOL_ID_PREFIX = "spool-"
SYNCED_DIR = "synced"
#: How sync's lines name what it did with a record.
OUTCOME_WORDS = {"logged": "LOGGED", "already_logged": "PRESENT", "duplicate": "SKIPPED"}
RECORD_VERSION = 1

JOB = "job"
SWEEP = "sweep"


def new_spool_id() -> str:
    """A fresh id for a run that exists only in the spool (never a valid MLflow run id)."""
    return SPOOL_ID_PREFIX + uuid.uuid4().hex[:16]


def is_spool_id(run_id: str | None) -> bool:
    """Whether ``run_id`` names a spooled run rather than a run in a store."""
    return bool(run_id) and run_id.startswith(SPOOL_ID_PREFIX)


def now_ms() -> int:
    return int(time.time() * 1000)


@dataclass
class SpoolRecord:
    """Everything needed to log one run later, exactly as it would have been logged.

    ``run_id`` is the run's id in the store when the run was created there before the
    store failed (sync then completes that run); None when it never reached the store.
    ``parent_run_id`` is the sweep's run: a store run id or, when the sweep itself was
    spooled, that sweep record's ``record_id``.  ``files`` are (artifact folder, path
    relative to the spool directory) of the copied file artifacts.
    """

    record_id: str
    kind: str                      # JOB or SWEEP
    tracking_uri: str
    experiment: str
    run_name: str
    status: str                    # RUNNING, FINISHED, FAILED
    start_time_ms: int
    end_time_ms: int | None = None
    run_id: str | None = None
    parent_run_id: str | None = None
    params: dict[str, str] = field(default_factory=dict)
    metrics: dict[str, float] = field(default_factory=dict)
    tags: dict[str, str] = field(default_factory=dict)
    artifacts: dict[str, str] = field(default_factory=dict)        # file name -> text
    files: list[tuple[str, str]] = field(default_factory=list)      # (artifact folder, spool-relative path)
    reason: str = ""               # why the run was spooled
    version: int = RECORD_VERSION

    @property
    def spec_hash(self) -> str | None:
        return self.tags.get("spec_hash")

    @property
    def file_name(self) -> str:
        stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime(self.start_time_ms / 1000))
        return f"{self.kind}-{stamp}-{self.record_id}.json"

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), indent=1, sort_keys=True)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "SpoolRecord":
        known = {f.name for f in dataclasses.fields(cls)}
        fields = {k: v for k, v in data.items() if k in known}
        fields["files"] = [tuple(f) for f in fields.get("files", [])]
        return cls(**fields)


class Spool:
    """A spool directory: writes records (copying their files), lists those pending,
    and moves them to ``synced/`` once logged."""

    def __init__(self, directory: str | Path):
        self.directory = Path(directory).absolute()

    @property
    def synced_directory(self) -> Path:
        return self.directory / SYNCED_DIR

    def write(self, record: SpoolRecord, files: Sequence[tuple[str, Path]] = ()) -> Path:
        """Write ``record`` (replacing an earlier version of it), copying ``files``
        (artifact folder, local path) under ``<spool>/<record_id>/``.  Returns its path."""
        self.directory.mkdir(parents=True, exist_ok=True)
        for folder, source in files:
            source = Path(source)
            if not source.is_file():
                continue
            relative = Path(record.record_id) / (folder or ".") / source.name
            (self.directory / relative).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, self.directory / relative)
            record.files.append((folder, relative.as_posix()))
        path = self.directory / record.file_name
        _write_atomically(path, record.to_json())
        return path

    def find(self, record_id: str) -> tuple[Path, SpoolRecord] | None:
        """The pending record with this id, if any."""
        for path in self.directory.glob(f"*-{record_id}.json"):
            return path, self.load(path)
        return None

    @staticmethod
    def load(path: Path) -> SpoolRecord:
        """The record at ``path``; a byte that is not UTF-8 (a record of a command line's raw
        bytes) is read as a lone surrogate, which the tracker stores escaped."""
        return SpoolRecord.from_dict(json.loads(path.read_bytes().decode("utf-8", "surrogateescape")))

    def pending(self) -> list[tuple[Path, SpoolRecord | Exception]]:
        """Records not yet synced: sweeps first (their jobs need their run ids), then by
        start time.  A file that cannot be read comes back with the error."""
        if not self.directory.is_dir():
            return []
        out: list[tuple[Path, SpoolRecord | Exception]] = []
        for path in sorted(self.directory.glob("*.json")):
            try:
                out.append((path, self.load(path)))
            except (OSError, ValueError, TypeError, KeyError) as exc:
                out.append((path, exc))
        return sorted(out, key=lambda item: (0, 0, "") if isinstance(item[1], Exception) else
                      (item[1].kind != SWEEP, item[1].start_time_ms, item[0].name))

    def synced_runs(self) -> dict[str, str]:
        """record id -> run id in the store, for every record already synced."""
        runs = {}
        for path in self.synced_directory.glob("*.json"):
            try:
                data = json.loads(path.read_text())
            except (OSError, ValueError):
                continue
            if data.get("synced_run_id"):
                runs[data["record_id"]] = data["synced_run_id"]
        return runs

    def mark_synced(self, path: Path, record: SpoolRecord, run_id: str, outcome: str, uri: str) -> Path:
        """Move a logged record (and its files) to ``synced/``, noting where it went."""
        self.synced_directory.mkdir(parents=True, exist_ok=True)
        data = json.loads(record.to_json())
        data.update(synced_run_id=run_id, synced_outcome=outcome, synced_uri=uri, synced_at_ms=now_ms())
        target = self.synced_directory / path.name
        _write_atomically(target, json.dumps(data, indent=1, sort_keys=True))
        path.unlink()
        files = self.directory / record.record_id
        if files.is_dir():
            shutil.rmtree(self.synced_directory / record.record_id, ignore_errors=True)
            files.rename(self.synced_directory / record.record_id)
        return target


def _write_atomically(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def spool_dir_for(spool_dir: str | None, base: str | Path | None = None) -> Path:
    """The spool directory ``tracking.spool_dir`` (None: the default): a relative path
    is taken from ``base``, by default the directory the sweep was launched from (Hydra's
    ``hydra.runtime.cwd``) whatever the job's working directory, else the cwd."""
    configured = Path(str(spool_dir or DEFAULT_SPOOL_DIR)).expanduser()
    if configured.is_absolute():
        return configured
    if base is None:
        from hydra.core.hydra_config import HydraConfig

        base = HydraConfig.get().runtime.cwd if HydraConfig.initialized() else Path.cwd()
    return Path(str(base)) / configured


def sync_command(spool_dir: Path, tracking_uri: str | None = None) -> str:
    """The command that logs the records of ``spool_dir`` (for messages)."""
    command = f"python -m harness.storage.sync --spool {spool_dir}"
    return command + (f" --tracking-uri {tracking_uri}" if tracking_uri else "")


#: Names of the runs this process could keep neither in the store nor in the spool (their
#: records were printed as JSON lines): the job then ends non-zero (harness.callbacks).
_UNKEPT: list[str] = []


def note_unkept(run_name: str) -> None:
    _UNKEPT.append(run_name)


def take_unkept() -> list[str]:
    """The runs noted by ``note_unkept`` since the last call (and forget them)."""
    names = list(_UNKEPT)
    _UNKEPT.clear()
    return names
