"""MLflow tracking: one experiment per sweep name, one parent run per multirun, one
child run per (job, shape).  Uses ``MlflowClient`` (no global active-run state), so a
job can log while a sweep is in flight in the same process.

No result is lost to the store: writes that hit SQLite's ``database is locked`` are
retried with backoff, and when the store cannot be reached or written (connection
refused, a timeout, an ``MlflowException``) the run's complete record goes to the offline
spool (``harness.storage.spool``) with one line saying where; ``python -m harness.storage.sync``
logs it later.  A store that cannot be opened is found in seconds (``harness.storage.probe``);
when the spool cannot be written either, the record is printed as one JSON line on stdout
(and the job ends non-zero: ``harness.callbacks``).  A job's run is its claim on its spec
(``harness.storage.claims``): a spec RUNNING in another live sweep is not run twice.

Length: one class, the Tracker, because every way of writing a run (start, finish, sweep
parent, replay from the spool) shares the same store-error fallback; split, each part
would repeat it.
"""
from __future__ import annotations

import dataclasses
import json
import os
import random
import re
import socket
import sqlite3
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, TypeVar

import requests
import sqlalchemy.exc
from mlflow.entities import Metric, Param, Run, RunTag, ViewType
from mlflow.exceptions import MlflowException
from mlflow.tracking import MlflowClient

from harness.job.result import FAILED, FINISHED, JobResult
from harness.storage.claims import (HEARTBEAT, HOST_TAG, PID_TAG, is_live, owner_tags, process_alive,
                                    store_lock)
from harness.storage.new_store import seed_new_store
from harness.storage.probe import bound_store_waits, known_down, sqlite_path, store_problem
from harness.storage.run_fields import (FIRST_VIEW_COLUMNS, FIRST_VIEW_WIDTHS, JOB_NAME_TAG, SORT_BY_NAME, run_metrics,
                                        run_params, run_tags, store_run_name)
from harness.storage.run_names import label_filter, names_apart, swizzle_code
from harness.storage.spool import (DEFAULT_SPOOL_DIR, JOB, SWEEP, Spool, SpoolRecord, is_spool_id, new_spool_id, now_ms,
                                   note_unkept, sync_command)

#: tag holding the one-line reason of a run's status (FAILED) or what was verified.
STATUS_REASON_TAG = "status_reason"
SWEEP_TAG = "swizzlebench.sweep_run_id"
PARENT_TAG = "mlflow.parentRunId"
#: tag shared by the job runs one Tracker logs, i.e. by the runs of one Hydra job (all the
#: shapes of one ``python -m harness`` without -m, which has no sweep run to group them).
INVOCATION_TAG = "swizzlebench.invocation"
#: tag naming the spool record a run was logged from (``harness.storage.sync``).
SPOOL_TAG = "swizzlebench.spool_id"
#: tag of a job run created in the store whose result could not be written there (a full
#: TMPDIR under MLflow's artifact writes, a store that failed mid-job): the run is ended
#: KILLED, its status_reason says so, and the tag names the spool record holding the whole
#: result, which ``harness.storage.sync`` logs into this run (then it drops the tag).
SPOOL_PENDING_TAG = "swizzlebench.spool_pending"
#: prefix of the sweep run's tags naming the runs it reused instead of running their spec
#: again (resume, or a spec running in another live sweep): ``swizzlebench.reused.<run id>``.
REUSED_TAG_PREFIX = "swizzlebench.reused."
#: MLflow 3's experiment type: the UI opens a ``genai_development`` experiment (or one with
#: no kind) on the GenAI overview, a ``custom_model_development`` one ("Machine learning")
#: on its runs table.  MLflow's Python package has no constant for it: the names are the
#: UI's ExperimentKind enum, which MLflow's own demo generator sets the same way.
EXPERIMENT_KIND_TAG = "mlflow.experimentKind"
EXPERIMENT_KIND = "custom_model_development"

#: The runs table's first view: a view state stored in the experiment, as the UI's "Share"
#: button stores one (tag ``mlflow.sharedViewState.<key>``, JSON), which the UI applies when
#: the address says ``viewStateShareKey=<key>`` (:func:`mlflow_ui_url`): the job runs, sorted
#: by name (so not folded under their sweep's run), with the display columns
#: (run_fields.FIRST_VIEW_COLUMNS) shown without picking them.  One for the experiment's job
#: runs (``swizzlebench``), and one per sweep for its own (``sweep-<run id>``: :func:`first_view`).
VIEW_TAG_PREFIX = "mlflow.sharedViewState."
FIRST_VIEW_KEY = "swizzlebench"
FIRST_VIEW_TAG = VIEW_TAG_PREFIX + FIRST_VIEW_KEY


#: The experiment's view as the UI lists it under "Views" (MLflow >= 3.15's saved views).
FIRST_VIEW_NAME = "swizzlebench: job runs and verdicts"


def first_view(sweep_run_id: str | None = None) -> str:
    """The view state (JSON) of the job runs of sweep run ``sweep_run_id``: the display
    columns next to the run name, sorted by it, each as wide as its texts (the UI sizes a
    column only where ``columnOrder`` lists it).  None: the experiment's job runs, as a saved view (MLflow
    >= 3.15 stores one as ``{"name", "createdAt", "state"}`` under the same tag, and lists it
    by name under "Views"; ``createdAt`` 0: the same text every time, so it is written once).
    A sweep's view is a plain view state, which the UI opens from the address but does not list
    (it allows 40 saved views per experiment, fewer than the sweeps of a long study)."""
    runs = f"tags.`{SWEEP_TAG}` = '{sweep_run_id}'" if sweep_run_id else "tags.`swizzlebench.kind` = 'job'"
    state = json.dumps({"selectedColumns": list(FIRST_VIEW_COLUMNS), "searchFilter": runs,
                        "orderByKey": SORT_BY_NAME, "orderByAsc": True,
                        "columnOrder": list(FIRST_VIEW_WIDTHS), "columnWidths": FIRST_VIEW_WIDTHS})
    return state if sweep_run_id else json.dumps({"name": FIRST_VIEW_NAME, "createdAt": 0, "state": state})


FIRST_VIEW = first_view()

#: What "the store cannot be reached or written" looks like: the REST store wraps
#: connection errors and timeouts in MlflowException; artifact uploads raise requests'
#: errors; the SQLite store raises SQLAlchemy / sqlite3 errors; local artifacts OSError.
STORE_ERRORS = (MlflowException, requests.exceptions.RequestException, sqlalchemy.exc.SQLAlchemyError,
                sqlite3.Error, OSError)

#: Retries of a write that hit SQLite's lock (each attempt already waits out MLflow's
#: 20 s busy timeout), with exponential backoff and jitter from LOCK_BACKOFF_S.
LOCK_RETRIES = 4
LOCK_BACKOFF_S = 0.25

T = TypeVar("T")


def is_database_locked(exc: BaseException) -> bool:
    return "database is locked" in str(exc)


def retry_when_locked(call: Callable[..., T], *args, **kwargs) -> T:
    """``call(*args, **kwargs)``, retried with backoff while SQLite says the database is locked."""
    for attempt in range(LOCK_RETRIES + 1):
        try:
            return call(*args, **kwargs)
        except STORE_ERRORS as exc:
            if attempt == LOCK_RETRIES or not is_database_locked(exc):
                raise
            time.sleep(LOCK_BACKOFF_S * 2 ** attempt * (0.5 + random.random()))
    raise AssertionError("unreachable")


def is_local_error(exc: BaseException) -> bool:
    """Whether a store write failed on this machine's disk (a full or unwritable TMPDIR,
    where MLflow stages artifacts), not in reaching the store: the store can still be told."""
    return isinstance(exc, OSError) and not isinstance(exc, requests.exceptions.RequestException)


def short_error(exc: BaseException) -> str:
    """A store error in one short line: ``cannot reach URL: [Errno 111] Connection refused``
    for the REST client's connection errors (whose text runs to several hundred
    characters), else ``Type: first line`` capped."""
    text = str(exc).strip()
    request = re.search(r"API request to (\S+) failed", text)
    cause = re.search(r"\[Errno -?\d+\][^'\"()]*|[Rr]ead timed out|timeout", text)
    if request and cause:
        return f"cannot reach {request.group(1).split('/api/')[0]}: {cause.group(0).strip()}"
    return f"{type(exc).__name__}: {text.splitlines()[0][:200] if text else repr(exc)}"


@dataclass(frozen=True)
class Reuse:
    """A spec this job does not run: ``run_id`` holds (or will hold) its result; ``why`` in
    words, e.g. ``already FINISHED as run <id> (resume=false to run again)``."""

    run_id: str
    why: str


def _finished_reuse(run_id: str) -> Reuse:
    return Reuse(run_id, f"already FINISHED as run {run_id} (resume=false to run again)")


@dataclass
class _RunStart:
    """What ``start_job`` knew about a run, kept until ``finish_job`` (spool record)."""

    run_name: str
    parent_run_id: str | None
    tags: dict[str, str] = field(default_factory=dict)
    start_time_ms: int = field(default_factory=now_ms)


class Tracker:
    """Logs runs to the MLflow store at ``uri`` under ``experiment``; runs the store cannot
    take go to the spool at ``spool_dir`` (see the module docstring).

    The store is probed once, when the tracker is made, in seconds (``harness.storage.probe``;
    a store the sweep's start found down is not probed again), then opened under its lock
    (a new SQLite database is created by one process at a time).  After the first failure
    the tracker is *offline* (``offline_reason`` says why) and spools the rest of its runs
    without waiting on the store again."""

    def __init__(self, uri: str, experiment: str, spool_dir: str | Path = DEFAULT_SPOOL_DIR):
        self.uri = uri
        self.experiment = experiment
        self.spool = Spool(spool_dir)
        self.offline_reason: str | None = None
        self.experiment_id: str | None = None
        self._runs: dict[str, _RunStart] = {}
        self.invocation_id = uuid.uuid4().hex
        self.client: MlflowClient | None = None
        bound_store_waits()
        self.offline_reason = known_down(uri) or store_problem(uri)
        if self.offline_reason:
            return
        try:
            with store_lock(uri):   # one process at a time makes a new SQLite database
                seed_new_store(uri)
                self.client = MlflowClient(tracking_uri=uri)
                self.experiment_id = retry_when_locked(ensure_experiment, self.client, experiment)
        except STORE_ERRORS as exc:
            self._go_offline(exc)

    @property
    def offline(self) -> bool:
        return self.offline_reason is not None

    # -- sweep (parent) runs -------------------------------------------------------
    def start_sweep(self, run_name: str, params: dict[str, str], tags: dict[str, str]) -> str:
        """The sweep's parent run id: a run in the store, or a spool id when offline.  The run
        is tagged with the launching host and process, so that a later sweep can tell it was
        killed (``close_dead_sweeps``)."""
        tags = {**storable_mapping(tags), "swizzlebench.kind": "sweep", HOST_TAG: socket.gethostname(),
                PID_TAG: str(os.getpid())}
        params, run_name = storable_mapping(params), storable(run_name)
        if not self.offline:
            self.close_dead_sweeps()
            try:
                run = retry_when_locked(self.client.create_run, self.experiment_id, run_name=run_name, tags=tags)
                self._log_batch(run.info.run_id, params=params)
                return run.info.run_id
            except STORE_ERRORS as exc:
                self._go_offline(exc)
        record = self._record(SWEEP, new_spool_id(), _RunStart(run_name, None, tags), "RUNNING")
        record.params = {k: str(v) for k, v in params.items()}
        path = self._keep(record)
        if path is not None:
            print(f"[spool] tracking store {self.uri} unavailable ({self.offline_reason}): the sweep's runs are "
                  f"kept on local disk under {self.spool.directory} (sweep record {path.name}); the sweep goes on. "
                  f"Log them later with: {sync_command(self.spool.directory)}", flush=True)
        return record.record_id

    def end_sweep(self, run_id: str, status: str = FINISHED, reason: str | None = None) -> None:
        """End the sweep's run with ``status`` (and ``reason`` as its status_reason tag)."""
        tags = {STATUS_REASON_TAG: storable(reason[:5000])} if reason else {}
        if is_spool_id(run_id):
            found = self.spool.find(run_id)
            if found is not None:
                _, record = found
                record.status, record.end_time_ms = status, now_ms()
                record.tags.update(tags)
                self._keep(record)
                return
            # Synced while the sweep ran: end the run it became in the store.
            run_id = self.spool.synced_runs().get(run_id, run_id)
            if is_spool_id(run_id):
                return
        if not self.offline:
            try:
                if tags:
                    self._log_batch(run_id, tags=tags)
                retry_when_locked(self.client.set_terminated, run_id, status)
                return
            except STORE_ERRORS as exc:
                self._go_offline(exc)
        record = self._record(SWEEP, new_spool_id(),
                              _RunStart("sweep", None, {"swizzlebench.kind": "sweep", **tags}), status, run_id=run_id)
        record.end_time_ms = now_ms()
        path = self._keep(record)
        if path is not None:
            print(f"[spool] the end of sweep run {run_id} was kept at {path} (tracking store {self.uri} "
                  f"unavailable: {self.offline_reason}); log it later with: {sync_command(self.spool.directory)}",
                  flush=True)

    def share_sweep_view(self, sweep_run_id: str) -> str:
        """Store the view of the sweep's job runs (:func:`first_view`) in the experiment; its
        key (``sweep-<run id>``), or the experiment's first view's where the store refused it."""
        key = f"sweep-{sweep_run_id}"
        if self.offline or is_spool_id(sweep_run_id):
            return FIRST_VIEW_KEY
        try:
            retry_when_locked(self.client.set_experiment_tag, self.experiment_id, VIEW_TAG_PREFIX + key,
                              first_view(sweep_run_id))
        except STORE_ERRORS:
            return FIRST_VIEW_KEY
        return key

    # -- job (child) runs ------------------------------------------------------------
    def start_job(self, run_name: str, parent_run_id: str | None, tags: dict[str, str]) -> str:
        """Create the job's run as RUNNING before any work: a crash leaves a visible trace.
        Offline (or under a spooled sweep) the run gets a spool id and is spooled at finish."""
        run_name = storable(run_name)
        start = _RunStart(run_name, parent_run_id, {**storable_mapping(tags), "swizzlebench.kind": "job",
                                                    INVOCATION_TAG: self.invocation_id, JOB_NAME_TAG: run_name})
        run_id = None
        if not self.offline and not is_spool_id(parent_run_id):
            tags = {**start.tags, **owner_tags()}
            if parent_run_id:
                tags.update({PARENT_TAG: parent_run_id, SWEEP_TAG: parent_run_id})
            try:
                run_id = retry_when_locked(self.client.create_run, self.experiment_id,
                                           run_name=store_run_name(run_name), tags=tags).info.run_id
                HEARTBEAT.add(run_id, self.client.set_tag)
            except STORE_ERRORS as exc:
                self._go_offline(exc)
        run_id = run_id or new_spool_id()
        self._runs[run_id] = start
        return run_id

    def claim_job(self, run_name: str, parent_run_id: str | None, tags: dict[str, str], spec_hash: str,
                  resume: bool = True) -> str | Reuse:
        """The job's run (``start_job``), or a :class:`Reuse` when its spec is not to be run:
        FINISHED already (with ``resume``), or RUNNING in another live sweep (a live claim,
        ``harness.storage.claims``).  Stale RUNNING runs of the spec are closed first.  On a
        SQLite store all of it happens under the store's lock."""
        tags = {**tags, "spec_hash": spec_hash}
        with store_lock(self.uri if not self.offline else ""):
            # RUNNING before FINISHED: a claim that ends between the two reads (its finish
            # takes no lock) is then seen in one of them, never in neither.
            live = self.close_stale(spec_hash)
            if resume:
                done = self.find_finished(spec_hash)
                if done:
                    return _finished_reuse(done)
                if live:
                    return self._running_elsewhere(live[0])
            run_id = self.start_job(run_name, parent_run_id, tags)
        if resume and not self.offline and not is_spool_id(run_id) and sqlite_path(self.uri) is None:
            return self._first_claim(run_id, spec_hash)
        return run_id

    def _first_claim(self, run_id: str, spec_hash: str) -> str | Reuse:
        """On a server (no lock), after creating the run: ``run_id``, or a Reuse of an earlier
        live claim of the spec, when there is one (the run just created is then deleted)."""
        live = self.close_stale(spec_hash)   # ours included: it is open here
        order = [(r.info.start_time, r.info.run_id) for r in live]
        mine = next((key for key in order if key[1] == run_id), None)
        earlier = [r for r, key in zip(live, order) if mine is not None and key < mine]
        done = None if earlier else self.find_finished(spec_hash)   # an earlier claim ended meanwhile
        if not earlier and not done:
            return run_id
        HEARTBEAT.remove(run_id)
        self._runs.pop(run_id, None)
        try:
            retry_when_locked(self.client.delete_run, run_id)
        except STORE_ERRORS as exc:
            self._go_offline(exc)
        return self._running_elsewhere(earlier[0]) if earlier else _finished_reuse(done)

    @staticmethod
    def _running_elsewhere(run) -> Reuse:
        tags = run.data.tags
        return Reuse(run.info.run_id, f"RUNNING in another sweep as run {run.info.run_id} (process "
                                      f"{tags.get(PID_TAG, '?')} on {tags.get(HOST_TAG, '?')}): not run twice")

    def link_reused(self, sweep_run_id: str | None, reuse: Reuse, run_name: str) -> None:
        """Tag the sweep's run with a run it reused (``REUSED_TAG_PREFIX``): its report shows it."""
        if not sweep_run_id or is_spool_id(sweep_run_id) or self.offline:
            return
        try:
            retry_when_locked(self.client.set_tag, sweep_run_id, REUSED_TAG_PREFIX + reuse.run_id,
                              storable(f"{run_name}: {reuse.why}")[:5000])
        except STORE_ERRORS as exc:
            self._go_offline(exc)

    def finish_job(self, run_id: str, result: JobResult) -> Path | None:
        """Log the job's result and end its run.  Returns None, or the path of the spool
        record when the store could not take it (a line saying so is printed).  Until it is
        ended, the run is open: ``kill_open_runs`` ends it KILLED.  A write that failed on
        this machine's disk (``is_local_error``) spools this result only: the store still
        answers, so the run is ended KILLED awaiting sync (``_hold_for_sync``) and the
        tracker's later runs still go to the store."""
        start = self._runs.get(run_id) or _RunStart(result.run_name, None)
        storable_result(result)
        renamed = start.run_name != result.run_name   # tune mode launched another config than the one asked
        start.run_name = result.run_name
        path, failure = None, None
        if not self.offline and not is_spool_id(run_id):
            try:
                if renamed:
                    retry_when_locked(self.client.update_run, run_id, name=store_run_name(result.run_name))
                self._finish_in_store(run_id, result)
                self._name_apart(run_id, result)
            except STORE_ERRORS as exc:
                failure = exc if is_local_error(exc) else None
                if failure is None:
                    self._go_offline(exc)
        if failure is not None:
            why = f"tracking store {self.uri} could not take it: {short_error(failure)} (on this machine's disk)"
            path, record_id = self._spool_job(run_id, start, result, why)
            if path is not None:
                self._hold_for_sync(run_id, record_id, result.run_name, why)
            else:   # printed as a JSON line (stdout): nothing for sync to complete it with
                self._end_quietly(run_id, f"result kept neither in the store ({why}) nor in the spool "
                                          f"{self.spool.directory}: printed on stdout as one JSON line", FAILED)
        elif self.offline or is_spool_id(run_id):
            path, _ = self._spool_job(run_id, start, result)
        self._runs.pop(run_id, None)
        HEARTBEAT.remove(run_id)
        return path

    def _name_apart(self, run_id: str, result: JobResult) -> None:
        """Where the label of this finished run's swizzle names runs of other code too, rename
        them all ``kernel/label#<digest>/...`` (harness.storage.run_names), this one included
        (``result.run_name`` then says so).  A store that fails here leaves the names as they
        were, with a warning: the result is already in the store."""
        label = result.params.get("swizzle", "")
        search = label_filter(label)
        if not swizzle_code(result.params) or search is None:
            return
        try:
            for other, name in names_apart(search_all_runs(self.client, self.experiment_id, search), label).items():
                retry_when_locked(self.client.update_run, other, name=store_run_name(name))
                retry_when_locked(self.client.set_tag, other, JOB_NAME_TAG, name)
                if other == run_id:
                    result.run_name = name
        except STORE_ERRORS as exc:
            print(f"[warning] runs under the label {label!r}, shared by another formula, could not be renamed "
                  f"apart: {short_error(exc)}", file=sys.stderr, flush=True)

    def _hold_for_sync(self, run_id: str, record_id: str, run_name: str, why: str) -> bool:
        """End KILLED the store's run ``run_id``, whose whole result is the spool record
        ``record_id``, tagged with that record (``SPOOL_PENDING_TAG``) and the reason; one line
        says so.  Returns whether the store took it (if not, the run stays RUNNING and the
        sweep's end, or the next claim of its spec, closes it)."""
        reason = (f"result only in the spool ({why}); spool record "
                  f"{record_id} holds it, and `{sync_command(self.spool.directory)}` completes this run")
        try:
            retry_when_locked(self.client.set_tag, run_id, SPOOL_PENDING_TAG, record_id)
        except STORE_ERRORS:
            return False
        if not self._end_quietly(run_id, reason):
            return False
        print(f"[spool] run {run_name} (run {run_id}) ended KILLED in the store until sync logs its result "
              f"(spool record {record_id})", flush=True)
        return True

    def _end_quietly(self, run_id: str, reason: str, status: str = "KILLED") -> bool:
        """End the run ``run_id`` with ``status`` and ``reason``; whether the store took it."""
        try:
            self._kill(run_id, reason[:5000], status=status)
        except STORE_ERRORS:
            return False
        return True

    def hold_spooled_runs(self, sweep_run_id: str) -> list[SpoolRecord]:
        """The job records of sweep run ``sweep_run_id`` still pending in the spool (their
        results are not in the store); each whose run the store still shows RUNNING is ended
        KILLED awaiting sync (``_hold_for_sync``), so that no run of an ended sweep stays RUNNING."""
        records = [record for _, record in self.spool.pending()
                   if isinstance(record, SpoolRecord) and record.kind == JOB and record.parent_run_id == sweep_run_id]
        if self.client is None:
            return records
        for record in records:
            try:
                running = self._running_run(record.run_id) is not None
            except STORE_ERRORS:
                running = False
            if running:
                self._hold_for_sync(record.run_id, record.record_id, record.run_name, record.reason)
        return records

    def kill_open_runs(self, reason: str) -> None:
        """End KILLED, with ``reason``, every job run this tracker started and has not ended
        (the job was interrupted: harness.run.interrupt).  A run that has only a spool id
        was never written anywhere: it is dropped."""
        for run_id in list(self._runs):
            self._runs.pop(run_id)
            HEARTBEAT.remove(run_id)
            if self.offline or is_spool_id(run_id):
                continue
            try:
                self._kill(run_id, reason)
            except STORE_ERRORS as exc:   # left RUNNING: the next sweep's claim closes it as stale
                self._go_offline(exc)

    def kill_run(self, run_id: str, reason: str) -> None:
        """End KILLED, with ``reason``, a job run that another process held and left RUNNING
        (a launcher's worker of this host that the stopping sweep had to kill); left as it is
        when the store cannot be written (the next claim of its spec finds it stale)."""
        if self.offline or is_spool_id(run_id):
            return
        try:
            self._kill(run_id, reason)
        except STORE_ERRORS as exc:
            self._go_offline(exc)

    def job_runs_of(self, sweep_run_id: str) -> list[Run]:
        """The job runs of the sweep run ``sweep_run_id`` in the store (MLflow Runs), oldest
        first; none when offline."""
        if self.offline or is_spool_id(sweep_run_id):
            return []
        try:
            runs = search_all_runs(self.client, self.experiment_id, f"tags.`{SWEEP_TAG}` = '{sweep_run_id}'")
        except STORE_ERRORS as exc:
            self._go_offline(exc)
            return []
        return sorted(runs, key=lambda r: (r.info.start_time, r.info.run_id))

    def _finish_in_store(self, run_id: str, result: JobResult) -> None:
        tags = {**run_tags(result), STATUS_REASON_TAG: result.reason[:5000]}
        self._log_batch(run_id, params=run_params(result), metrics=run_metrics(result), tags=tags)
        for name, text in result.artifacts.items():
            retry_when_locked(self.client.log_text, run_id, text, name)
        for folder, path in result.files:
            if path.exists():
                retry_when_locked(self.client.log_artifact, run_id, str(path), folder)
        retry_when_locked(self.client.set_terminated, run_id, FINISHED if result.status == FINISHED else FAILED)

    def _spool_job(self, run_id: str, start: _RunStart, result: JobResult,
                   why: str | None = None) -> tuple[Path | None, str]:
        """Spool the job's whole result (``why``: the reason, by default the tracker's offline
        reason or its spooled sweep); returns the record's path (None: it could be kept
        nowhere and was printed) and its id."""
        in_store = not is_spool_id(run_id)
        record = self._record(JOB, new_spool_id() if in_store else run_id, start,
                              FINISHED if result.status == FINISHED else FAILED, run_id=run_id if in_store else None,
                              reason=why)
        record.end_time_ms = now_ms()
        record.params = run_params(result)
        record.metrics = run_metrics(result)
        record.tags.update({**run_tags(result), STATUS_REASON_TAG: result.reason[:5000]})
        record.artifacts = dict(result.artifacts)
        path = self._keep(record, files=result.files)
        if path is None:
            return None, record.record_id
        why = why or (f"tracking store {self.uri} unavailable: {self.offline_reason}" if self.offline
                      else f"its sweep run {start.parent_run_id} is spooled")
        print(f"[spool] run {result.run_name} ({record.status}) kept on local disk at {path} ({why}); the sweep "
              f"goes on. Log it later with: {sync_command(self.spool.directory)}", flush=True)
        return path, record.record_id

    def _keep(self, record: SpoolRecord, files=()) -> Path | None:
        """Write ``record`` to the spool; when the spool cannot be written either, print the
        record as one JSON line on stdout (a line on stderr says why) and note it
        (``spool.note_unkept``: the job then ends non-zero).  Returns the record's path or None."""
        try:
            return self.spool.write(record, files=files)
        except OSError as exc:
            print(f"[lost] {record.kind} run {record.run_name} ({record.status}): tracking store {self.uri} "
                  f"unavailable ({record.reason}) and spool {self.spool.directory} not writable "
                  f"({type(exc).__name__}: {exc}); its record is the next line of stdout (JSON)",
                  file=sys.stderr, flush=True)
            print(json.dumps(dataclasses.asdict(record), sort_keys=True), flush=True)
            note_unkept(record.run_name)
            return None

    def _record(self, kind: str, record_id: str, start: _RunStart, status: str,
                run_id: str | None = None, reason: str | None = None) -> SpoolRecord:
        return SpoolRecord(record_id=record_id, kind=kind, tracking_uri=self.uri, experiment=self.experiment,
                           run_name=start.run_name, status=status, start_time_ms=start.start_time_ms,
                           run_id=run_id, parent_run_id=start.parent_run_id, tags=dict(start.tags),
                           reason=reason or self.offline_reason or "its sweep run is spooled")

    def _go_offline(self, exc: BaseException) -> None:
        self.offline_reason = short_error(exc)

    def close_dead_sweeps(self) -> int:
        """Mark KILLED the RUNNING sweep runs of this host whose launching process is gone (a
        sweep killed midway never reaches ``on_multirun_end``).  Returns how many."""
        try:
            runs = self.client.search_runs(
                [self.experiment_id], max_results=1000,
                filter_string=f"tags.`swizzlebench.kind` = 'sweep' and attributes.status = 'RUNNING' "
                              f"and tags.`{HOST_TAG}` = '{socket.gethostname()}'")
        except STORE_ERRORS:
            return 0
        closed = 0
        for run in runs:
            pid = run.data.tags.get(PID_TAG, "")
            if pid.isdigit() and not process_alive(int(pid)):
                self.client.set_tag(run.info.run_id, STATUS_REASON_TAG,
                                    f"killed: launching process {pid} is gone; a later sweep closed this run")
                self.client.set_terminated(run.info.run_id, "KILLED")
                closed += 1
        return closed

    # -- resume ---------------------------------------------------------------------
    def find_finished(self, spec_hash: str) -> str | None:
        """Run id of a FINISHED job run with this spec hash in the experiment, if any
        (None when offline: the job runs, and sync drops it if the store has one)."""
        if self.offline:
            return None
        try:
            return self._find_finished(spec_hash)
        except STORE_ERRORS as exc:
            self._go_offline(exc)
            return None

    def _find_finished(self, spec_hash: str, exclude: str | None = None) -> str | None:
        runs = retry_when_locked(
            self.client.search_runs, [self.experiment_id], max_results=2,
            filter_string=f"tags.spec_hash = '{spec_hash}' and attributes.status = 'FINISHED'")
        return next((r.info.run_id for r in runs if r.info.run_id != exclude), None)

    def close_stale(self, spec_hash: str) -> list:
        """Mark KILLED the stale RUNNING runs of this spec (left by a killed sweep: no live
        claim, ``harness.storage.claims``) before the job runs again, so each spec ends with
        exactly one live result.  Returns the live ones (runs of other live sweeps)."""
        if self.offline:
            return []
        try:
            runs = retry_when_locked(
                self.client.search_runs, [self.experiment_id], max_results=1000,
                filter_string=f"tags.spec_hash = '{spec_hash}' and attributes.status = 'RUNNING'")
            open_here = HEARTBEAT.open()
            live = [r for r in runs if is_live(r.data.tags, open_here, r.info.run_id)]
            for run in runs:
                if run not in live:
                    self._kill(run.info.run_id, "killed: the sweep stopped mid-job; re-run")
        except STORE_ERRORS as exc:
            self._go_offline(exc)
            return []
        return sorted(live, key=lambda r: (r.info.start_time, r.info.run_id))

    def _kill(self, run_id: str, reason: str, status: str = "KILLED") -> None:
        retry_when_locked(self.client.set_tag, run_id, STATUS_REASON_TAG, reason)
        retry_when_locked(self.client.set_terminated, run_id, status)

    # -- replay of spooled records (harness.storage.sync) -----------------------------------
    def replay(self, record: SpoolRecord, parent_run_id: str | None) -> tuple[str, str]:
        """Log a spool record into the store; returns (outcome, run id).  Outcomes:
        ``already_logged`` (a run carries its spool id), ``duplicate`` (its spec hash is
        already FINISHED here: nothing logged) or ``logged``.  Raises STORE_ERRORS."""
        done = retry_when_locked(self.client.search_runs, [self.experiment_id], max_results=1,
                                 filter_string=f"tags.`{SPOOL_TAG}` = '{record.record_id}'")
        if done:
            return "already_logged", done[0].info.run_id
        existing = self._running_run(record.run_id, held_for=record.record_id)
        if record.kind == SWEEP and record.run_id and existing is None:
            return "already_logged", record.run_id   # the end of a sweep run that has ended (or is not here)
        if record.kind == JOB and record.spec_hash:
            finished = self._find_finished(record.spec_hash, exclude=record.run_id)
            if finished:
                if existing:
                    self._kill(existing.info.run_id, f"superseded by FINISHED run {finished} of the same spec")
                    self._release_hold(existing)
                return "duplicate", finished
        tags = {**storable_mapping(record.tags), SPOOL_TAG: record.record_id}
        if parent_run_id:
            tags.update({PARENT_TAG: parent_run_id, SWEEP_TAG: parent_run_id})
        params, metrics = storable_mapping(record.params), record.metrics
        if existing is None:
            run_id = retry_when_locked(self.client.create_run, self.experiment_id, start_time=record.start_time_ms,
                                       tags=tags, run_name=storable(store_run_name(record.run_name) if record.kind == JOB
                                                                    else record.run_name)).info.run_id
        else:   # created before the store failed: complete it, logging only what it lacks
            run_id = existing.info.run_id
            params = {k: v for k, v in params.items() if k not in existing.data.params}
            metrics = {k: v for k, v in metrics.items() if k not in existing.data.metrics}
        try:
            self._complete(run_id, record, params, metrics, tags)
            if existing is not None:
                self._release_hold(existing)
        except Exception as exc:   # the record stays in the spool; the run it began ends FAILED, hidden
            if existing is None:
                self._withdraw(run_id, f"sync: the store refused spool record {record.record_id}: {short_error(exc)}")
            raise
        return "logged", run_id

    def _withdraw(self, run_id: str, reason: str) -> None:
        """End a run sync began but could not complete FAILED, with ``reason``, and delete it."""
        try:
            self._kill(run_id, reason[:5000], status=FAILED)
            retry_when_locked(self.client.delete_run, run_id)
        except STORE_ERRORS:
            pass

    def _complete(self, run_id: str, record: SpoolRecord, params: dict, metrics: dict, tags: dict) -> None:
        """Log what the run lacks of ``record`` and end it with its status."""
        self._log_batch(run_id, params=params, metrics=metrics, tags=tags)
        for name, text in storable_mapping(record.artifacts).items():
            retry_when_locked(self.client.log_text, run_id, text, name)
        for folder, relative in record.files:
            retry_when_locked(self.client.log_artifact, run_id, str(self.spool.directory / relative), folder or None)
        if record.status != "RUNNING":
            retry_when_locked(self.client.set_terminated, run_id, record.status, end_time=record.end_time_ms)

    def _release_hold(self, run) -> None:
        """Drop the run's ``SPOOL_PENDING_TAG`` (its spool record is logged or superseded)."""
        if SPOOL_PENDING_TAG in run.data.tags:
            retry_when_locked(self.client.delete_tag, run.info.run_id, SPOOL_PENDING_TAG)

    def _running_run(self, run_id: str | None, held_for: str | None = None):
        """The store's run ``run_id`` if it exists here and is still RUNNING (or, with
        ``held_for``, ended awaiting that spool record: ``SPOOL_PENDING_TAG``), else None."""
        if not run_id:
            return None
        try:
            run = retry_when_locked(self.client.get_run, run_id)
        except MlflowException as exc:
            if "RESOURCE_DOES_NOT_EXIST" in str(exc.error_code) or "not found" in str(exc).lower():
                return None
            raise
        open_ = run.info.status == "RUNNING" or (held_for and run.data.tags.get(SPOOL_PENDING_TAG) == held_for)
        return run if open_ and run.info.experiment_id == self.experiment_id else None

    def _log_batch(self, run_id: str, params: dict | None = None, metrics: dict | None = None,
                   tags: dict | None = None) -> None:
        now = int(time.time() * 1000)
        p = [Param(k, str(v)[:6000]) for k, v in (params or {}).items()]
        m = [Metric(k, float(v), now, 0) for k, v in (metrics or {}).items()]
        t = [RunTag(k, str(v)[:5000]) for k, v in (tags or {}).items()]
        # MLflow caps one batch at 100 params / 1000 metrics / 100 tags.
        for i in range(0, max(len(p), len(m), len(t), 1), 100):
            retry_when_locked(self.client.log_batch, run_id, metrics=m[i:i + 100], params=p[i:i + 100],
                              tags=t[i:i + 100])


def search_all_runs(client: MlflowClient, experiment_id: str, filter_string: str) -> list[Run]:
    """Every active run of the experiment matching ``filter_string``, 1,000 per query."""
    runs: list[Run] = []
    token: str | None = None
    while True:
        page = client.search_runs([experiment_id], filter_string=filter_string,
                                  run_view_type=ViewType.ACTIVE_ONLY, max_results=1000,
                                  page_token=token)
        runs.extend(page)
        token = page.token
        if not token:
            return runs


def ensure_experiment(client: MlflowClient, name: str) -> str:
    """Return the id of experiment ``name``, creating it if needed (tolerating a
    concurrent creator), with its kind set so that the MLflow UI opens it on the runs
    table (``EXPERIMENT_KIND_TAG``) and the table's first view (``FIRST_VIEW_TAG``); both
    also set on an experiment made before they were."""
    exp = client.get_experiment_by_name(name)
    if exp is None:
        try:
            return client.create_experiment(name, tags={EXPERIMENT_KIND_TAG: EXPERIMENT_KIND,
                                                        FIRST_VIEW_TAG: FIRST_VIEW})
        except Exception:
            exp = client.get_experiment_by_name(name)
            if exp is None:
                raise
    for tag, value in ((EXPERIMENT_KIND_TAG, EXPERIMENT_KIND), (FIRST_VIEW_TAG, FIRST_VIEW)):
        if exp.tags.get(tag) != value:
            client.set_experiment_tag(exp.experiment_id, tag, value)
    return exp.experiment_id


def storable(text: str) -> str:
    """``text`` made encodable as UTF-8: a lone surrogate (a non-UTF-8 byte of the command
    line, a YAML escape) becomes its ``\\udcXX`` escape, so that neither the store, the spool
    nor the terminal fails on the user's text."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8") if isinstance(text, str) else text


def storable_mapping(mapping: dict) -> dict:
    """``mapping`` with its str keys and values made :func:`storable`."""
    return {storable(k): storable(v) for k, v in mapping.items()}


def storable_result(result: JobResult) -> None:
    """Make the result's text (run name, params, tags, reason, text artifacts) storable, in place."""
    result.params, result.tags = storable_mapping(result.params), storable_mapping(result.tags)
    result.artifacts = storable_mapping(result.artifacts)
    result.reason, result.run_name = storable(result.reason), storable(result.run_name)


def mlflow_ui_url(base: str, experiment_id: str, charts: bool = False, view: str = FIRST_VIEW_KEY) -> str:
    """The experiment's runs table in the MLflow UI served at ``base`` (``http://host:5000``);
    ``charts``: its chart view instead.  The address says ``workflowType=machine_learning``:
    MLflow 3.17's UI takes an experiment's kind from a per-browser GenAI / Model training
    switch (GenAI by default), not from ``EXPERIMENT_KIND_TAG``, and would open the GenAI
    overview; and ``viewStateShareKey``: the stored view ``view`` (``FIRST_VIEW_KEY``: the
    experiment's job runs; ``Tracker.share_sweep_view``: a sweep's).  The address holds no
    search parameter of its own: with one, the UI ignores the stored view."""
    query = (f"workflowType=machine_learning&viewStateShareKey={view}"
             + ("&compareRunsMode=CHART" if charts else ""))
    return f"{base.rstrip('/')}/#/experiments/{experiment_id}/runs?{query}"


#: Where ``mlflow ui`` serves by default.
MLFLOW_UI_DEFAULT = "http://127.0.0.1:5000"


def mlflow_ui_hint(uri: str, experiment_id: str, view: str = FIRST_VIEW_KEY) -> str:
    """What the end of a sweep says to look at its runs: for a tracking server the address
    of the view ``view`` (:func:`mlflow_ui_url`); for a store on disk (SQLite, a folder) the
    ``mlflow ui`` command that serves it and the view's address once it runs (its default port)."""
    if uri.startswith(("http://", "https://")):
        return f"MLflow UI (verdict columns): {mlflow_ui_url(uri, experiment_id, view=view)}"
    return (f"MLflow UI: run `mlflow ui --backend-store-uri {uri}`, then open "
            f"{mlflow_ui_url(MLFLOW_UI_DEFAULT, experiment_id, view=view)} (the verdict columns)")


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

