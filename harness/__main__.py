"""``python -m harness``: the Hydra entry point.

    python -m harness -m swizzle=xcd,grouped shape=resnet

``-v`` (``--verbose``) asks for full error reports: Hydra's traceback, a formula error's
caret excerpt (harness.errors.take_verbose_flag).  SIGTERM and SIGINT stop it within seconds,
its runs ended KILLED and the report written; SIGTERM sent to a job that a launcher runs in
a process of its own (a SLURM task cancelled with ``scancel``) ends its runs KILLED and the
sweep goes on (harness.run.interrupt).
"""
import sys

from harness.hardware.device import select_execution_mode

# Decide GPU vs interpreter before anything imports triton (see harness.hardware.device).
MODE = select_execution_mode()

import hydra  # noqa: E402
from hydra.core.plugins import Plugins  # noqa: E402
from omegaconf import DictConfig  # noqa: E402

import hydra_plugins.swizzlebench_search as search_plugin  # noqa: E402
from harness.callbacks import end_interrupted_sweep, end_refused_sweep  # noqa: E402
from harness.errors import one_line_compose_errors, take_verbose_flag  # noqa: E402
from harness.run.interrupt import stop_job_on_sigterm, stop_on_signals  # noqa: E402
from harness.schema import register  # noqa: E402

# Hydra finds plugins by walking the hydra_plugins namespace package, which an editable
# install (pip install -e .) hides from it: register the search sweeper explicitly.
Plugins.instance().register(search_plugin.SwizzleSearchSweeper)
register()   # the config's schema, Hydra's base_config (also stored when conf/ is imported)


@hydra.main(version_base="1.3", config_path="pkg://swizzlebench_conf", config_name="config")
def main(cfg: DictConfig) -> list:
    """The task: the job's results (one JobResult per shape run, none for a shape skipped by
    resume), which Hydra hands to the sweeper as ``JobReturn.return_value``; none when a
    launcher's worker process (a SLURM task: scancel, its time limit) got SIGTERM, its open runs
    then ended KILLED."""
    from harness.hardware.device import describe_device
    from harness.preflight import checked_job, task_overrides

    checked = checked_job(cfg, describe_device(MODE), task_overrides())   # before the pipeline's imports: fast and small
    from harness.app import run_hydra_job

    with stop_job_on_sigterm():   # in the launching process: nothing (stop_on_signals stops the sweep)
        return run_hydra_job(checked, MODE)
    return []


if __name__ == "__main__":
    take_verbose_flag(sys.argv)
    with (stop_on_signals(on_stop=end_interrupted_sweep),   # SIGTERM / SIGINT: runs KILLED, report, exit 143 / 130
          one_line_compose_errors(on_refused=end_refused_sweep)):   # refused by the schema: one line, exit 2
        main()
