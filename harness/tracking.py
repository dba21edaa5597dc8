"""MLflow tracking: one experiment per sweep name, one parent run per multirun, one
child run per (job, shape).  Uses ``MlflowClient`` (no global active-run state), so a
job can log while a sweep is in flight in the same process."""
from __future__ import annotations

import time

from mlflow.entities import Metric, Param, RunTag
from mlflow.tracking import MlflowClient

from harness.result import FAILED, FINISHED, JobResult

#: tag holding the one-line reason of a run's status (FAILED) or what was verified.
STATUS_REASON_TAG = "status_reason"
SWEEP_TAG = "swizzlebench.sweep_run_id"
PARENT_TAG = "mlflow.parentRunId"


class Tracker:
    """Logs runs to the MLflow store at ``uri`` under ``experiment``."""

    def __init__(self, uri: str, experiment: str):
        self.uri = uri
        self.client = MlflowClient(tracking_uri=uri)
        self.experiment_id = ensure_experiment(self.client, experiment)

    # -- sweep (parent) runs -------------------------------------------------------
    def start_sweep(self, run_name: str, params: dict[str, str], tags: dict[str, str]) -> str:
        run = self.client.create_run(self.experiment_id, run_name=run_name,
                                     tags={**tags, "swizzlebench.kind": "sweep"})
        self._log_batch(run.info.run_id, params=params)
        return run.info.run_id

    def end_sweep(self, run_id: str, status: str = FINISHED) -> None:
        self.client.set_terminated(run_id, status)

    # -- job (child) runs ------------------------------------------------------------
    def start_job(self, run_name: str, parent_run_id: str | None, tags: dict[str, str]) -> str:
        """Create the job's run as RUNNING before any work: a crash leaves a visible trace."""
        tags = {**tags, "swizzlebench.kind": "job"}
        if parent_run_id:
            tags.update({PARENT_TAG: parent_run_id, SWEEP_TAG: parent_run_id})
        run = self.client.create_run(self.experiment_id, run_name=run_name, tags=tags)
        return run.info.run_id

    def finish_job(self, run_id: str, result: JobResult) -> None:
        tags = {**result.tags, STATUS_REASON_TAG: result.reason[:5000]}
        self._log_batch(run_id, params=result.params, metrics=result.metrics, tags=tags)
        for name, text in result.artifacts.items():
            self.client.log_text(run_id, text, name)
        for folder, path in result.files:
            if path.exists():
                self.client.log_artifact(run_id, str(path), folder)
        self.client.set_terminated(run_id, FINISHED if result.status == FINISHED else FAILED)

    # -- resume ---------------------------------------------------------------------
    def find_finished(self, spec_hash: str) -> str | None:
        """Run id of a FINISHED job run with this spec hash in the experiment, if any."""
        runs = self.client.search_runs(
            [self.experiment_id], max_results=1,
            filter_string=f"tags.spec_hash = '{spec_hash}' and attributes.status = 'FINISHED'")
        return runs[0].info.run_id if runs else None

    def close_stale(self, spec_hash: str) -> int:
        """Mark RUNNING runs of this spec (left by a killed sweep) as KILLED before the job
        runs again, so each spec ends with exactly one live result.  Returns how many."""
        runs = self.client.search_runs(
            [self.experiment_id], max_results=1000,
            filter_string=f"tags.spec_hash = '{spec_hash}' and attributes.status = 'RUNNING'")
        for run in runs:
            self.client.set_tag(run.info.run_id, STATUS_REASON_TAG, "killed: the sweep stopped mid-job; re-run")
            self.client.set_terminated(run.info.run_id, "KILLED")
        return len(runs)

    def _log_batch(self, run_id: str, params: dict | None = None, metrics: dict | None = None,
                   tags: dict | None = None) -> None:
        now = int(time.time() * 1000)
        p = [Param(k, str(v)[:6000]) for k, v in (params or {}).items()]
        m = [Metric(k, float(v), now, 0) for k, v in (metrics or {}).items()]
        t = [RunTag(k, str(v)[:5000]) for k, v in (tags or {}).items()]
        # MLflow caps one batch at 100 params / 1000 metrics / 100 tags.
        for i in range(0, max(len(p), len(m), len(t), 1), 100):
            self.client.log_batch(run_id, metrics=m[i:i + 100], params=p[i:i + 100], tags=t[i:i + 100])


def ensure_experiment(client: MlflowClient, name: str) -> str:
    """Return the id of experiment ``name``, creating it if needed (tolerating a
    concurrent creator)."""
    exp = client.get_experiment_by_name(name)
    if exp is not None:
        return exp.experiment_id
    try:
        return client.create_experiment(name)
    except Exception:
        exp = client.get_experiment_by_name(name)
        if exp is None:
            raise
        return exp.experiment_id


def resolve_tracking_uri(uri: str, base: str | None = None) -> str:
    """``uri`` with a relative SQLite path made absolute against ``base``: by default the
    directory the sweep was launched from (Hydra's ``hydra.runtime.cwd``), else the cwd.

    ``sqlite:///mlflow.db`` names a file relative to the process's working directory, which
    under a launcher need not be where the user typed the command (``hydra.job.chdir=true``,
    a SLURM job started elsewhere), so every job and the sweep's parent run would otherwise
    risk writing to different stores.  Absolute paths (``sqlite:////abs/mlflow.db``), the
    in-memory ``sqlite://`` and every other scheme (``http://host:5000``...) pass unchanged."""
    from pathlib import Path  # imports kept local: this section is appended to the module

    prefix = "sqlite:///"
    if not uri.startswith(prefix):
        return uri
    path, sep, query = uri[len(prefix):].partition("?")
    if not path or path.startswith("/") or path.startswith(":memory:"):
        return uri
    if base is None:
        base = _launch_directory()
    return f"{prefix}{Path(base).resolve() / path}{sep}{query}"


def _launch_directory() -> str:
    """Hydra's original working directory when a Hydra app is running, else the cwd."""
    import os

    from hydra.core.hydra_config import HydraConfig

    return str(HydraConfig.get().runtime.cwd) if HydraConfig.initialized() else os.getcwd()
