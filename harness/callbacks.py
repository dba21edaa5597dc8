"""Hydra callback: one MLflow parent run around each multirun.

``on_multirun_start`` runs once in the launching process before any job: it creates
the experiment (so parallel jobs never race to create it) and the sweep's parent run,
and hands the parent's id to the jobs two ways: in ``SWIZZLEBENCH_SWEEP_RUN_ID`` (which
the joblib and submitit launchers' workers inherit), and in ``sweep_run.json`` in the sweep
directory, for jobs whose environment is not the launcher's (a SLURM site that starts jobs
with ``--export=NONE``).  A job asks :func:`sweep_run_id`.  ``on_multirun_end`` closes it.

The store is probed once, at the sweep's start: one found down is marked so for the
sweep's jobs (``harness.storage.probe``), which spool without waiting on it.  A job whose
results could be kept neither in the store nor in the spool (printed as JSON lines) ends
with a one-line error and a non-zero exit (:class:`ResultsNotKept`).

It also checks the ``devices`` config before any job starts.  (Hydra 1.3 turns an
exception in a callback into a warning, so a bad value then also fails each job, in
``make_runner``, with the same message.)
"""
from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import socket
import time
from pathlib import Path
from typing import TYPE_CHECKING, Collection, Sequence

from hydra.core.hydra_config import HydraConfig
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.experimental.callback import Callback
from hydra.core.utils import JobReturn, JobStatus
from hydra.errors import HydraException
from hydra.types import RunMode
from omegaconf import DictConfig

from harness.errors import UserError
from harness.hardware.pinning import parse_devices, require_isolation
from harness.storage.provenance import git_commit
from harness.job.result import FAILED, FINISHED
from harness.run.interrupt import Interrupted
from harness.storage.field_names import Param, Tag
from harness.storage.probe import clear_down, mark_down
from harness.storage.spool import is_spool_id, spool_dir_for, sync_command, take_unkept

if TYPE_CHECKING:
    from harness.storage.tracking import Tracker

SWEEP_ENV = "SWIZZLEBENCH_SWEEP_RUN_ID"
SWEEP_FILE = "sweep_run.json"
SWEEP_NAME_MAX = 80
log = logging.getLogger(__name__)


def sweep_run_name(overrides: Sequence[str], groups: Collection[str] = ()) -> str:
    """A short readable name for a sweep's run: each swept axis with its number of values
    (last key component), then the config-group choices among the fixed overrides, e.g.
    ``sweep swizzle[3] num_warps[2] resnet`` for ``swizzle=identity,xcd,grouped
    launch.num_warps=4,8 shape=resnet``; at most 80 characters.  The whole override string
    stays in the run's param ``sweep.overrides`` and its description."""
    axes, choices = [], []
    for override in OverridesParser.create().parse_overrides(list(overrides)):
        key = override.key_or_group
        if override.is_sweep_override():
            try:
                size = f"[{len(list(override.sweep_string_iterator()))}]"
            except HydraException:   # glob(...): its size needs the group's options
                size = "[*]"
            axes.append(key.replace("/", ".").rsplit(".", 1)[-1] + size)
        elif key in groups:
            choices.append(override.get_value_element_as_str())
    name = " ".join(["sweep", *axes, *choices])
    return name if len(name) <= SWEEP_NAME_MAX else name[:SWEEP_NAME_MAX - 3] + "..."


def sweep_run_id() -> str | None:
    """The id of the sweep's parent run, for a job: from ``SWIZZLEBENCH_SWEEP_RUN_ID``, else
    from ``sweep_run.json`` in the multirun's sweep directory; None outside a multirun."""
    run_id = os.environ.get(SWEEP_ENV)
    if run_id:
        return run_id
    if not HydraConfig.initialized():
        return None
    hydra_cfg = HydraConfig.get()
    if hydra_cfg.mode != RunMode.MULTIRUN:
        return None
    return read_sweep_file(Path(str(hydra_cfg.runtime.cwd)) / str(hydra_cfg.sweep.dir))


def read_sweep_file(sweep_dir: Path) -> str | None:
    """The run id recorded in ``sweep_dir/sweep_run.json``; None when there is no such file."""
    try:
        return json.loads((sweep_dir / SWEEP_FILE).read_text())["run_id"]
    except FileNotFoundError:
        return None


def write_sweep_file(sweep_dir: Path, run_id: str, tracking_uri: str, experiment: str) -> Path | None:
    """Record the sweep's parent run in ``sweep_dir/sweep_run.json``; returns the file, or
    None (and a warning) when a live sweep of another process already records its run there
    (two sweeps given one ``hydra.sweep.dir``: each job then finds its sweep in the environment)."""
    from harness.storage.claims import process_alive

    sweep_dir.mkdir(parents=True, exist_ok=True)
    path = sweep_dir / SWEEP_FILE
    try:
        pid = int(json.loads(path.read_text()).get("pid", 0))
    except (OSError, ValueError, AttributeError):
        pid = 0
    if pid and pid != os.getpid() and process_alive(pid):
        log.warning("%s records the run of a live sweep (process %d): left as it is; this sweep's run is %s",
                    path, pid, run_id)
        return None
    path.write_text(json.dumps({"run_id": run_id, "tracking_uri": tracking_uri, "experiment": experiment,
                                "pid": os.getpid()}, indent=2) + "\n")
    return path


class ResultsNotKept(UserError):
    """Results that neither the store nor the spool could keep (printed as JSON lines)."""


#: The sweep run this process started and has not ended: run id -> its tracker.
_OPEN_SWEEPS: dict[str, "Tracker"] = {}


def _tracking():
    """:mod:`harness.storage.tracking`, imported when a sweep first uses its store: it loads
    MLflow (and through it torch), so a command refused before then stays small and quick."""
    from harness.storage import tracking

    return tracking


def end_refused_sweep(reason: str) -> None:
    """End FAILED, with ``reason``, the sweep run this process started: for a multirun whose
    job config Hydra refused to compose (harness.errors.one_line_compose_errors), where no
    job ran, so no ``on_job_end`` could; nothing outside a multirun."""
    for run_id in list(_OPEN_SWEEPS):
        _OPEN_SWEEPS.pop(run_id).end_sweep(run_id, FAILED, reason=reason)
        os.environ.pop(SWEEP_ENV, None)


class MlflowSweepCallback(Callback):
    def on_multirun_start(self, config: DictConfig, **kwargs) -> None:
        from harness.preflight import overrides_as_typed, refuse_before_sweep

        refuse_before_sweep(config)   # a refused command logs no run: one line, exit 2, before the sweep's run
        tracking = _tracking()
        require_isolation(parse_devices(config.get("devices")), str(config.isolation.mode))
        uri = tracking.resolve_tracking_uri(str(config.tracking.uri), str(config.hydra.runtime.cwd))
        clear_down()
        tracker = tracking.Tracker(uri, config.experiment,
                          spool_dir=spool_dir_for(config.tracking.get("spool_dir"), config.hydra.runtime.cwd))
        if tracker.offline:   # found once: the sweep's jobs spool without probing again
            mark_down(uri, str(tracker.offline_reason))
        overrides = overrides_as_typed(config.hydra.overrides.task)
        run_id = tracker.start_sweep(
            run_name=sweep_run_name(overrides, set(config.hydra.runtime.choices)),
            params={Param.SWEEP_OVERRIDES: " ".join(overrides)},
            tags={Tag.GIT_COMMIT: git_commit(), Tag.SWEEP_DIR: str(config.hydra.sweep.dir),
                  Tag.RUN_NOTE: f"python -m harness -m {' '.join(overrides)}"})
        if take_unkept():   # printed as a JSON line; each job's own results then end it non-zero
            log.warning("the sweep's run could be kept neither in the store nor in the spool (printed above)")
        os.environ[SWEEP_ENV] = run_id
        _OPEN_SWEEPS[run_id] = tracker
        write_sweep_file(Path(str(config.hydra.sweep.dir)), run_id, uri, str(config.experiment))
        log.info("MLflow sweep run %s in experiment %r at %s", run_id, config.experiment, uri)
        from harness.run.progress import verdict_legend

        log.info(verdict_legend(float(config.compare.min_effect), float(config.compare.min_l2_delta)))

    def on_job_end(self, config: DictConfig, job_return: JobReturn, **kwargs) -> None:
        """A job that raised (a bad config value, a missing profiler) makes Hydra abort the
        multirun without calling ``on_multirun_end``: end the sweep's run as FAILED, with the
        error, rather than leave it RUNNING forever.  Later jobs of the batch still log under it.
        A job whose results could not be kept anywhere fails with :class:`ResultsNotKept`."""
        unkept = take_unkept()
        if unkept and job_return.status != JobStatus.FAILED:
            job_return.status = JobStatus.FAILED
            job_return.return_value = ResultsNotKept(
                f"{len(unkept)} result(s) of this job could be kept neither in the tracking store nor in the "
                f"spool: each is printed above as one JSON line (stdout); fix tracking.uri or tracking.spool_dir")
        run_id = sweep_run_id()
        if job_return.status != JobStatus.FAILED or not run_id:
            return
        tracking = _tracking()
        error = getattr(job_return, "_return_value", None)  # the property re-raises it
        reason = f"job {config.hydra.job.get('num', '?')} raised {type(error).__name__}: {error}"
        uri = tracking.resolve_tracking_uri(str(config.tracking.uri), str(config.hydra.runtime.cwd))
        tracker = tracking.Tracker(uri, config.experiment,
                          spool_dir=spool_dir_for(config.tracking.get("spool_dir"), config.hydra.runtime.cwd))
        tracker.end_sweep(run_id, FAILED, reason=reason)

    def on_multirun_end(self, config: DictConfig, **kwargs) -> None:
        run_id = os.environ.pop(SWEEP_ENV, None)
        _OPEN_SWEEPS.pop(str(run_id), None)
        if run_id:
            tracking = _tracking()
            uri = tracking.resolve_tracking_uri(str(config.tracking.uri), str(config.hydra.runtime.cwd))
            spool_dir = spool_dir_for(config.tracking.get("spool_dir"), config.hydra.runtime.cwd)
            _end_sweep(tracking.Tracker(uri, config.experiment, spool_dir=spool_dir), run_id)


def end_interrupted_sweep(stop: Interrupted) -> None:
    """End KILLED, with the signal as its reason, the sweep run this process started (a
    multirun stopped by SIGTERM or SIGINT: harness.run.interrupt), after listing its job runs
    one line each; then write the report of what finished.  Nothing outside a multirun."""
    for run_id in list(_OPEN_SWEEPS):
        tracker = _OPEN_SWEEPS.pop(run_id)
        os.environ.pop(SWEEP_ENV, None)
        _stop_local_jobs(tracker, run_id, stop)
        runs = tracker.job_runs_of(run_id)
        print(f"[stopped] {stop.name} received: {len(runs)} run(s) of sweep run {run_id}:", flush=True)
        for run in runs:
            print(f"  {run.info.status:<8} {run.info.run_name}  run {run.info.run_id}", flush=True)
        _end_sweep(tracker, run_id, "KILLED", stop.reason("mid-sweep"))


#: Seconds a stopping sweep gives the jobs its launcher runs in worker processes of this host
#: to end their runs KILLED, after SIGTERM, before it kills them.
JOB_STOP_S = 3.0


def _held_here(tracker: Tracker, run_id: str) -> dict[str, int]:
    """The RUNNING job runs of the sweep ``run_id`` that another process of this host holds
    (a launcher's worker: joblib's, submitit_local's): run id -> its pid (tag ``swizzlebench.pid``)."""
    from harness.storage.claims import HOST_TAG, PID_TAG

    host, held = socket.gethostname(), {}
    for run in tracker.job_runs_of(run_id):
        pid = run.data.tags.get(PID_TAG, "")
        if run.info.status == "RUNNING" and run.data.tags.get(HOST_TAG) == host and pid.isdigit() \
                and int(pid) != os.getpid():
            held[run.info.run_id] = int(pid)
    return held


def _stop_local_jobs(tracker: Tracker, run_id: str, stop: Interrupted) -> None:
    """End the jobs of the sweep ``run_id`` that a launcher runs in worker processes of this
    host (``hydra/launcher=joblib``).  A worker under this process that still runs gets
    SIGTERM and ends its runs KILLED itself (harness.run.interrupt.stop_job_on_sigterm); one
    still holding a run after :data:`JOB_STOP_S` is killed with every process under it.  The
    runs of workers gone (joblib's pool kills its workers when the sweep is interrupted) are
    ended KILLED here.  Jobs that run on other hosts (SLURM tasks) are left to their scheduler."""
    from harness.hardware.processes import descendants, kill_tree
    from harness.storage.claims import process_alive

    mine = descendants(os.getpid())
    held = {run: pid for run, pid in _held_here(tracker, run_id).items() if pid in mine}
    for pid in set(held.values()):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + JOB_STOP_S
    while held and time.monotonic() < deadline:
        time.sleep(0.2)
        held = {run: pid for run, pid in _held_here(tracker, run_id).items() if pid in mine}
    for pid in set(held.values()):
        kill_tree(pid)
    for run, pid in _held_here(tracker, run_id).items():
        if not process_alive(pid):
            tracker.kill_run(run, stop.reason("mid-job (its launcher's worker process ended with the sweep)"))


def _end_sweep(tracker: Tracker, run_id: str, status: str = FINISHED, reason: str | None = None) -> None:
    """End the sweep's run with ``status`` (and ``reason``), say how to look at its runs in
    MLflow, and write its report (unless its runs are spooled: then say how to log them)."""
    tracking = _tracking()
    clear_down()
    spooled = tracker.hold_spooled_runs(run_id)   # no run of the ended sweep left RUNNING
    uri, experiment, spool_dir = tracker.uri, tracker.experiment, tracker.spool.directory
    if spooled:
        names = ", ".join(record.run_name for record in spooled)
        log.warning("%d result(s) of this sweep are only in the spool %s, not in the store nor its report: %s. "
                    "Log them with `%s`, then rebuild the report with: python -m harness.report --experiment %s "
                    "--sweep %s --tracking-uri %s", len(spooled), spool_dir, names, sync_command(spool_dir),
                    experiment, run_id, uri)
    tracker.end_sweep(run_id, status, reason)
    if tracker.experiment_id:   # the address opens on this sweep's job runs (Tracker.share_sweep_view)
        log.info("%s", tracking.mlflow_ui_hint(uri, tracker.experiment_id, tracker.share_sweep_view(run_id)))
    if tracker.offline or is_spool_id(run_id):
        log.warning("Sweep report skipped: the sweep's runs are spooled in %s (tracking store %s "
                    "unreachable). Log them with `%s`, then build the report with: python -m harness.report "
                    "--experiment %s --tracking-uri %s", spool_dir, uri, sync_command(spool_dir), experiment, uri)
        return
    # The comparison report; its failure is logged and never fails the sweep.
    try:
        from harness import report

        path = report.build_report(uri, experiment, run_id, Path("reports") / experiment / run_id)
        log.info("Sweep report: %s", path)
    except Exception:
        log.exception("Sweep report for run %s failed (rebuild it with: python -m harness.report "
                      "--experiment %s --sweep %s --tracking-uri %s)", run_id, experiment, run_id, uri)
