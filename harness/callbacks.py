"""Hydra callback: one MLflow parent run around each multirun.

``on_multirun_start`` runs once in the launching process before any job: it creates
the experiment (so parallel jobs never race to create it) and the sweep's parent run,
and exports the parent's id in ``SWIZZLEBENCH_SWEEP_RUN_ID`` for the jobs (launchers
that start worker processes pass the environment on).  ``on_multirun_end`` closes it.
"""
from __future__ import annotations

import logging
import os
from pathlib import Path

from hydra.core.hydra_config import HydraConfig
from hydra.experimental.callback import Callback
from omegaconf import DictConfig

from harness.provenance import git_commit
from harness.tracking import Tracker

SWEEP_ENV = "SWIZZLEBENCH_SWEEP_RUN_ID"
log = logging.getLogger(__name__)


class MlflowSweepCallback(Callback):
    def on_multirun_start(self, config: DictConfig, **kwargs) -> None:
        tracker = Tracker(config.tracking.uri, config.experiment)
        overrides = list(config.hydra.overrides.task)
        run_id = tracker.start_sweep(
            run_name=f"sweep {' '.join(overrides)}"[:250] or "sweep",
            params={"sweep.overrides": " ".join(overrides)},
            tags={"git_commit": git_commit(), "sweep_dir": str(config.hydra.sweep.dir)})
        os.environ[SWEEP_ENV] = run_id
        log.info("MLflow sweep run %s in experiment %r at %s", run_id, config.experiment, config.tracking.uri)

    def on_multirun_end(self, config: DictConfig, **kwargs) -> None:
        run_id = os.environ.pop(SWEEP_ENV, None)
        if run_id:
            Tracker(config.tracking.uri, config.experiment).end_sweep(run_id)
            # The comparison report; its failure is logged and never fails the sweep.
            try:
                from harness import report

                out_dir = Path("reports") / str(config.experiment) / run_id
                path = report.build_report(config.tracking.uri, str(config.experiment), run_id, out_dir)
                log.info("Sweep report: %s", path)
            except Exception:
                log.exception("Sweep report for run %s failed (rebuild it with: python -m harness.report "
                              "--experiment %s --sweep %s --tracking-uri %s)", run_id, config.experiment,
                              run_id, config.tracking.uri)
