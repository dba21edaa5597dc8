"""Job runs from MLflow into data frames: paged queries, one row per run, sweep listing
and run lookups.  Every failure to find what was asked for is a ``LookupError`` with one
line saying what was not found and how to list what exists.
"""
from __future__ import annotations

import re
import shlex
import urllib.parse
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterable

import pandas as pd
from mlflow.entities import Run
from mlflow.exceptions import MlflowException
from mlflow.tracking import MlflowClient

from harness.storage.tracking import search_all_runs

KIND_TAG = "swizzlebench.kind"
SWEEP_KIND, JOB_KIND = "sweep", "job"

_RUN_ID_RE = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


# --------------------------------------------------------------------------------------
# MLflow queries
# --------------------------------------------------------------------------------------
def quote_filter_value(value: str) -> str:
    """A run id (or invocation id) for an MLflow filter string; rejects anything but id
    characters so a value can never change the filter's meaning."""
    if not _RUN_ID_RE.match(value):
        raise ValueError(f"not a valid MLflow run id: {value!r}")
    return f"'{value}'"


def runs_to_frame(runs: Iterable[Run]) -> pd.DataFrame:
    """One row per run: run_id, run_name, status, start_ms / end_ms (epoch ms), artifact_uri
    (where the run's artifacts are), then ``params.<key>``, ``tags.<key>``, ``metrics.<key>``
    (latest value)."""
    rows = []
    for run in runs:
        row: dict[str, object] = {
            "run_id": run.info.run_id, "run_name": run.info.run_name or "",
            "status": run.info.status, "start_ms": run.info.start_time, "end_ms": run.info.end_time,
            "artifact_uri": run.info.artifact_uri or "",
        }
        row.update({f"params.{k}": v for k, v in run.data.params.items()})
        row.update({f"tags.{k}": v for k, v in run.data.tags.items()})
        row.update({f"metrics.{k}": v for k, v in run.data.metrics.items()})
        rows.append(row)
    frame = pd.DataFrame(rows, columns=None if rows else ["run_id", "run_name", "status", "start_ms", "end_ms"])
    for col in ("start_ms", "end_ms"):
        frame[col] = pd.to_numeric(frame[col], errors="coerce")
    return frame


def artifact_href(location: str, tracking_uri: str = "") -> str:
    """A link to the artifact at ``location`` (a run's ``artifact_uri``, ``/``, its path): a
    ``file://`` URL for an artifact store on this disk, the tracking server's download address
    for one it serves (``mlflow-artifacts:``: ``<server>/api/2.0/mlflow-artifacts/artifacts/...``),
    else ``location`` itself (``s3://...``)."""
    parsed = urllib.parse.urlparse(location)
    if parsed.scheme in ("", "file"):
        return Path(urllib.parse.unquote(parsed.path)).resolve().as_uri()
    if parsed.scheme == "mlflow-artifacts":
        server = f"http://{parsed.netloc}" if parsed.netloc else tracking_uri
        if server.startswith(("http://", "https://")):
            return f"{server.rstrip('/')}/api/2.0/mlflow-artifacts/artifacts/{parsed.path.lstrip('/')}"
    return location


def tag_filter(tag: str, value: str) -> str:
    return f"tags.`{tag}` = {quote_filter_value(value)}"


def run_kind(run: Run) -> str:
    return run.data.tags.get(KIND_TAG, "")


def utc(ms: float | None) -> str:
    """Epoch milliseconds as ``YYYY-mm-dd HH:MM:SS UTC`` ("?" when unknown)."""
    if ms is None or pd.isna(ms):
        return "?"
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


# --------------------------------------------------------------------------------------
# Listing and lookups
# --------------------------------------------------------------------------------------
def list_command(experiment: str, tracking_uri: str) -> str:
    """The command that lists the experiment's sweep runs (quoted for a shell)."""
    return (f"python -m harness.report --experiment {shlex.quote(experiment)} --list-sweeps "
            f"--tracking-uri {shlex.quote(tracking_uri)}")


def experiment_id_of(client: MlflowClient, experiment: str) -> str:
    """The id of ``experiment``; LookupError naming the experiments that exist otherwise."""
    exp = client.get_experiment_by_name(experiment)
    if exp is None:
        names = sorted(e.name for e in client.search_experiments(max_results=1000))
        shown = ", ".join(map(repr, names[:20])) + (f" and {len(names) - 20} more" if len(names) > 20 else "")
        raise LookupError(f"no MLflow experiment named {experiment!r} in this store; it has: {shown or 'none'}")
    return exp.experiment_id


def sweep_runs(client: MlflowClient, experiment_id: str) -> list[Run]:
    """The experiment's sweep runs, newest first."""
    runs = search_all_runs(client, experiment_id, f"tags.`{KIND_TAG}` = '{SWEEP_KIND}'")
    return sorted(runs, key=lambda r: r.info.start_time or 0, reverse=True)


def list_sweeps(client: MlflowClient, experiment: str) -> list[str]:
    """One line per sweep run of ``experiment`` (newest first): id, start, status, name."""
    runs = sweep_runs(client, experiment_id_of(client, experiment))
    lines = [f"{r.info.run_id}  {utc(r.info.start_time)}  {r.info.status:<8}  {r.info.run_name or ''}"
             for r in runs]
    if not lines:
        lines.append(f"no sweep run in experiment {experiment!r}")
    lines.append("single runs (python -m harness without -m) have no sweep run: report them with "
                 "--experiment-view or --run RUN_ID")
    return lines


def get_run(client: MlflowClient, run_id: str, experiment: str, experiment_id: str, what: str,
             hint: str) -> Run:
    """Run ``run_id`` of this experiment, or a one-line LookupError naming it and ``hint``."""
    quote_filter_value(run_id)
    try:
        run = client.get_run(run_id)
    except MlflowException:
        raise LookupError(f"no {what} {run_id!r} in this tracking store; {hint}") from None
    if run.info.experiment_id != experiment_id:
        raise LookupError(f"{what} {run_id!r} belongs to experiment id {run.info.experiment_id}, not to "
                          f"{experiment!r} ({experiment_id}); {hint}")
    return run
