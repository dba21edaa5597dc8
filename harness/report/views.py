"""Which job runs a report covers (its *view*), loaded from MLflow into one data frame.

Views (:class:`Selection`):

* ``latest``: the experiment's latest sweep run (a Hydra multirun's parent run); an
  experiment with no sweep run falls back to the experiment view;
* ``sweeps``: the job runs of one or more named sweep runs, with the runs each reused
  instead of running their spec again (resume; a spec running in another live sweep:
  the sweep run's ``swizzlebench.reused.<run id>`` tags), each marked "from run <id>, <date>";
* ``experiment``: over the whole experiment, the latest FINISHED job run of every
  ``spec_hash`` (a spec that never finished: its latest run, listed with the failures);
  single runs (``python -m harness`` without ``-m``, which have no sweep run) included;
* ``runs``: named runs.  A sweep run stands for its job runs; a job run for every run of
  its Hydra job (tag ``swizzlebench.invocation``), i.e. all the shapes one single
  ``python -m harness ...`` logged; a run from before that tag stands for itself.

Every failure to find what was asked for is a ``LookupError`` with one line saying what
was not found and how to list what exists.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Literal

import pandas as pd
from mlflow.entities import Run
from mlflow.exceptions import MlflowException
from mlflow.tracking import MlflowClient

from harness.report.data import (JOB_KIND, KIND_TAG, SWEEP_KIND, experiment_id_of, get_run, list_command, run_kind,
                                 runs_to_frame, sweep_runs, tag_filter, utc)
from harness.storage.field_names import Param, Tag, tag_column
from harness.storage.run_fields import JOB_NAME_TAG
from harness.storage.tracking import INVOCATION_TAG, REUSED_TAG_PREFIX, SWEEP_TAG, search_all_runs

#: Tag column set on a reused run's row (not stored): "from run <id>, <date>" (its end, else start).
REUSED_FROM_TAG = "swizzlebench.reused_from"

ViewKind = Literal["latest", "sweeps", "experiment", "runs"]


@dataclass(frozen=True)
class Selection:
    """What to report: ``kind`` (see the module docstring) and, for ``sweeps`` and
    ``runs``, the run ids."""

    kind: ViewKind = "latest"
    ids: tuple[str, ...] = ()

    @classmethod
    def sweep(cls, sweep_run_id: str | None) -> "Selection":
        """One named sweep, or the latest one when ``sweep_run_id`` is None."""
        return cls("latest") if sweep_run_id is None else cls("sweeps", (sweep_run_id,))


@dataclass(frozen=True)
class ReportRuns:
    """The job runs a report is about, and how they were chosen."""

    experiment: str
    experiment_id: str
    title: str                      # what the page's title names: "sweep <id>", "experiment view", ...
    out_name: str                   # default folder under reports/<experiment>/
    runs: pd.DataFrame              # one row per job run: run_id, run_name, status, start_ms, end_ms,
                                    # params.<k>, tags.<k>, metrics.<k>
    facts: list[tuple[str, str]] = field(default_factory=list)   # how the runs were chosen
    attach_run_id: str | None = None    # the sweep run the report is attached to (one sweep only)
    sweeps: pd.DataFrame = field(default_factory=pd.DataFrame)    # the sweep runs of these job runs
    tracking_uri: str = ""          # the store they were read from (links to a tracking server's artifacts)


# --------------------------------------------------------------------------------------
# Views
# --------------------------------------------------------------------------------------
def _sweep_facts(sweep: Run, n_jobs: int) -> list[tuple[str, str]]:
    facts = [("Sweep run", f"{sweep.info.run_id} ({sweep.info.run_name or 'unnamed'}, status "
                           f"{sweep.info.status}, started {utc(sweep.info.start_time)}): {n_jobs} job runs")]
    overrides = sweep.data.params.get(Param.SWEEP_OVERRIDES)
    if overrides is not None:
        facts.append(("Sweep overrides", overrides or "(none)"))
    return facts


def _jobs_of_sweep(client: MlflowClient, experiment_id: str, sweep: Run) -> list[Run]:
    return search_all_runs(client, experiment_id, tag_filter(SWEEP_TAG, sweep.info.run_id))


def _reused_by(client: MlflowClient, experiment_id: str, sweep: Run, have: set[str]) -> list[Run]:
    """The runs ``sweep`` reused (its ``REUSED_TAG_PREFIX`` tags) that still exist in the
    experiment and are not in ``have``, each tagged ``REUSED_FROM_TAG`` (in memory)."""
    found = []
    for key in sorted(sweep.data.tags):
        run_id = key[len(REUSED_TAG_PREFIX):]
        if not key.startswith(REUSED_TAG_PREFIX) or run_id in have:
            continue
        try:
            run = client.get_run(run_id)
        except MlflowException:
            continue   # deleted since
        if run.info.experiment_id == experiment_id:
            run.data.tags[REUSED_FROM_TAG] = f"from run {run_id}, {utc(run.info.end_time or run.info.start_time)}"
            found.append(run)
            have.add(run_id)
    return found


def _sweeps_view(client: MlflowClient, experiment: str, experiment_id: str, sweeps: list[Run]) -> ReportRuns:
    jobs: list[Run] = []
    facts: list[tuple[str, str]] = []
    for sweep in sweeps:
        found = _jobs_of_sweep(client, experiment_id, sweep)
        jobs.extend(found)
        facts += _sweep_facts(sweep, len(found))
    have = {r.info.run_id for r in jobs}
    for sweep in sweeps:
        reused = _reused_by(client, experiment_id, sweep, have)
        jobs.extend(reused)
        if reused:
            facts.append(("Reused runs", f"{len(reused)} job runs of earlier or concurrent sweeps that sweep "
                                         f"{sweep.info.run_id} did not run again (already FINISHED, or running in another sweep): their cells are marked "
                                         "\"from run <id>, <date>\""))
    ids = [s.info.run_id for s in sweeps]
    if len(sweeps) == 1:
        return ReportRuns(experiment, experiment_id, f"sweep {ids[0]}", ids[0], runs_to_frame(jobs), facts,
                          attach_run_id=ids[0])
    return ReportRuns(experiment, experiment_id, f"{len(ids)} sweeps", "sweeps-" + "-".join(i[:8] for i in ids),
                      runs_to_frame(jobs), [("View", f"{len(ids)} sweeps, all their job runs")] + facts)


def latest_per_spec(frame: pd.DataFrame) -> pd.DataFrame:
    """Per ``tags.spec_hash`` (runs without one: per run name), the latest FINISHED run, or
    the latest run when none finished."""
    if frame.empty:
        return frame
    key = frame.get(tag_column(Tag.SPEC_HASH), pd.Series(index=frame.index, dtype=object))
    key = key.where(key.notna(), "name:" + frame["run_name"].astype(str))
    order = frame.assign(_key=key, _finished=frame["status"] == "FINISHED")
    order = order.sort_values(["_finished", "start_ms"], kind="stable", na_position="first")
    return order.drop_duplicates("_key", keep="last").drop(columns=["_key", "_finished"]).sort_index()


def experiment_view(client: MlflowClient, experiment: str, experiment_id: str,
                    why: str | None = None) -> ReportRuns:
    """The latest FINISHED job run per spec over the whole experiment (see ``latest_per_spec``)."""
    every = runs_to_frame(search_all_runs(client, experiment_id, f"tags.`{KIND_TAG}` = '{JOB_KIND}'"))
    chosen = latest_per_spec(every)
    sweep_ids = every.get(f"tags.{SWEEP_TAG}", pd.Series(index=every.index, dtype=object))
    n_sweeps, n_single = sweep_ids.nunique(), int(sweep_ids.isna().sum())
    text = (f"experiment view: the latest FINISHED run of each spec (spec_hash), over {len(every)} job runs "
            f"({n_sweeps} sweeps, {n_single} runs outside any sweep); {len(every) - len(chosen)} older or "
            f"superseded runs left out")
    facts = ([("Sweep run", why)] if why else []) + [("View", text)]
    return ReportRuns(experiment, experiment_id, "experiment view", "experiment", chosen, facts)


def job_name(run: Run) -> str:
    """A job run's name as its job line prints it (its ``job`` tag; the store's run name is the
    short one made for the MLflow UI, :mod:`harness.storage.run_fields`)."""
    return run.data.tags.get(JOB_NAME_TAG) or run.info.run_name


def _runs_view(client: MlflowClient, experiment: str, experiment_id: str, run_ids: tuple[str, ...],
               hint: str) -> ReportRuns:
    """Named runs: a sweep run stands for its job runs, a job run for its Hydra job's runs."""
    jobs: dict[str, Run] = {}
    described: list[str] = []
    for run_id in run_ids:
        run = get_run(client, run_id, experiment, experiment_id, "run", hint)
        if run_kind(run) == SWEEP_KIND:
            found = _jobs_of_sweep(client, experiment_id, run)
            described.append(f"{run_id}: sweep run, {len(found)} job runs")
        elif run.data.tags.get(INVOCATION_TAG):
            found = search_all_runs(client, experiment_id, tag_filter(INVOCATION_TAG, run.data.tags[INVOCATION_TAG]))
            described.append(f"{run_id} ({job_name(run)}): job run, with the {len(found)} run(s) of its "
                             "Hydra job")
        else:
            found = [run]
            described.append(f"{run_id} ({job_name(run)}): job run")
        jobs.update((r.info.run_id, r) for r in found if run_kind(r) != SWEEP_KIND)
    name = f"run-{run_ids[0]}" if len(run_ids) == 1 else "runs-" + "-".join(i[:8] for i in run_ids)
    title = f"run {run_ids[0]}" if len(run_ids) == 1 else f"{len(run_ids)} runs"
    return ReportRuns(experiment, experiment_id, title, name, runs_to_frame(jobs.values()),
                      [("View", "; ".join(described))])


def load_runs(client: MlflowClient, experiment: str, selection: Selection, tracking_uri: str) -> ReportRuns:
    """The job runs ``selection`` names (see the module docstring), with the sweep runs
    they belong to (their tags say e.g. which sweeps were searches)."""
    experiment_id = experiment_id_of(client, experiment)
    chosen = replace(_select(client, experiment, experiment_id, selection, tracking_uri), tracking_uri=tracking_uri)
    ids = set(chosen.runs.get(f"tags.{SWEEP_TAG}", pd.Series(dtype=object)).dropna())
    if not ids:
        return chosen
    return replace(chosen, sweeps=runs_to_frame(r for r in sweep_runs(client, experiment_id) if r.info.run_id in ids))


def _select(client: MlflowClient, experiment: str, experiment_id: str, selection: Selection,
            tracking_uri: str) -> ReportRuns:
    """The job runs of ``selection``."""
    hint = f"list the sweeps with: {list_command(experiment, tracking_uri)}"
    if selection.kind == "experiment":
        return experiment_view(client, experiment, experiment_id)
    if selection.kind == "runs":
        return _runs_view(client, experiment, experiment_id, selection.ids, hint)
    if selection.kind == "latest":
        latest = sweep_runs(client, experiment_id)[:1]
        if not latest:
            return experiment_view(client, experiment, experiment_id,
                                   why="none in this experiment: the report is the experiment view")
        return _sweeps_view(client, experiment, experiment_id, latest)
    sweeps = []
    for run_id in dict.fromkeys(selection.ids):
        run = get_run(client, run_id, experiment, experiment_id, "sweep run", hint)
        if run_kind(run) != SWEEP_KIND:
            raise LookupError(f"run {run_id!r} ({run.info.run_name}) is a {run_kind(run) or 'non-swizzlebench'} run, "
                              f"not a sweep run: report it with --run {run_id}, or {hint}")
        sweeps.append(run)
    return _sweeps_view(client, experiment, experiment_id, sweeps)
