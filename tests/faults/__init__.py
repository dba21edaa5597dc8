"""Fault-injection suite: the real CLI (``python -m harness`` in a subprocess, under the
Triton interpreter, tiny shapes and 16x16x16 tiles) fed bad shapes, unknown config names,
bad values, non-permutation and hostile formulas, missing profilers, an unreachable
tracking server, stores that cannot be opened or die mid-job (with no writable spool either),
a full TMPDIR under the store's artifact writes, spool records sync must log or refuse one
by one, crashing and hanging jobs, a sweep killed mid-way then resumed (and its report), and
two sweeps started together in a fresh folder.

Every case asserts (i) a clear message: what was wrong, which value, what would be valid;
and (ii) that no earlier result was lost: one finished sweep is logged first into the
SQLite store every case shares (``conftest.seeded_store``), and after each case its runs
are compared, field by field, with what they were (``conftest`` checks it after every
test).  Each case experiment has its own experiment in that store, so ``resume`` never
mixes their runs.  At the session's end no SQLite store the suite used has a run RUNNING or
FAILED without a reason (``conftest.suite_folders``).  The number of cases handled is
printed at the end of the session.

This module holds what the cases share: running the CLI and reading the store.
"""
from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from mlflow.entities import Run
from mlflow.tracking import MlflowClient

from tests.cli_fork import run_cli

#: Small tiles and no profiler keep a job to about a second under the interpreter.
FAST = ["kernel=igemm", "kernel.tiles.BLOCK_M=16", "kernel.tiles.BLOCK_N=16", "kernel.tiles.BLOCK_K=16", "profiler=none"]
CLI_TIMEOUT_S = 240


def cli_env(**extra: str) -> dict[str, str]:
    return {**os.environ, "TRITON_INTERPRET": "1", "PYTHONUNBUFFERED": "1", "MLFLOW_DISABLE_TELEMETRY": "true",
            **extra}


def harness(args: list[str], cwd: Path, env: dict[str, str] | None = None,
            timeout: float = CLI_TIMEOUT_S) -> subprocess.CompletedProcess:
    """``python -m harness ARGS`` from ``cwd``; its output is captured as text (tests.cli_fork)."""
    return run_cli(args, cwd, env or cli_env(), timeout)


def spool_sync(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    """``python -m harness.storage.sync ARGS``."""
    return run_cli(args, cwd, cli_env(), CLI_TIMEOUT_S, module="harness.storage.sync")


def job_lines(proc: subprocess.CompletedProcess) -> list[str]:
    """The progress lines (``[job N | i/n] name STATUS ...``) a sweep printed."""
    return [line for line in proc.stdout.splitlines() if line.startswith("[job ")]


def runs_of(uri: str, experiment: str, kind: str | None = "job") -> list[Run]:
    """Every run of ``experiment`` (only those of ``kind``: job or sweep; None: all)."""
    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name(experiment)
    if exp is None:
        return []
    runs, token = [], None
    while True:
        page = client.search_runs([exp.experiment_id], max_results=1000, page_token=token)
        runs.extend(page)
        token = page.token
        if not token:
            break
    return [r for r in runs if kind is None or r.data.tags.get("swizzlebench.kind") == kind]


@dataclass(frozen=True)
class RunState:
    """Everything a run holds that a later fault must not change."""

    name: str
    status: str
    end_time: int | None
    params: tuple
    metrics: tuple
    tags: tuple
    artifacts: tuple

    @classmethod
    def of(cls, run: Run, client: MlflowClient) -> "RunState":
        return cls(run.data.tags.get("job", run.info.run_name), run.info.status, run.info.end_time,
                   tuple(sorted(run.data.params.items())),
                   tuple(sorted(run.data.metrics.items())), tuple(sorted(run.data.tags.items())),
                   tuple(sorted(a.path for a in client.list_artifacts(run.info.run_id))))


def snapshot(uri: str, experiment: str) -> dict[str, RunState]:
    """run id -> RunState of every run (jobs and the sweep) of ``experiment``."""
    client = MlflowClient(tracking_uri=uri)
    return {r.info.run_id: RunState.of(r, client) for r in runs_of(uri, experiment, kind=None)}


def reason(run: Run) -> str:
    return run.data.tags.get("status_reason", "")
