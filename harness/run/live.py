"""The sweep's live progress display: one line on stderr, redrawn as the sweep runs, e.g.

    jobs 1/2  50%|██████████          | 3/6 shapes [00:09<00:09, 3 failed]

jobs done / jobs of the sweep, shapes done / shapes expected (those of the jobs started, plus
the jobs still to start at the mean so far), the failures so far (FAILED shape runs, and jobs
that raised), the time spent and the time left at the rate so far (the ETA).

A Hydra callback (:class:`LiveProgress`) starts it when the multirun starts, counts each job
as it ends and closes it when the multirun ends; the job (``harness.app``) says how many shapes
it has and each shape as its line is printed (:func:`shape_done`).  It is shown only when
stderr is a terminal and the jobs run in the launching process (Hydra's default launcher):
a log, a pipe or CI sees the job lines alone, as before; under joblib or submitit the jobs
run in other processes, which cannot reach it, and it is off.

While it is shown, the lines written to the terminal (job lines, log records) are written
above it: :class:`_AboveBar` clears the display, writes the line and draws it again.
"""
from __future__ import annotations

import atexit
import logging
import shutil
import sys
import threading
from dataclasses import dataclass

from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.utils import JobReturn, JobStatus
from hydra.experimental.callback import Callback
from omegaconf import DictConfig

#: Hydra's default launcher, the one that runs the jobs in the launching process.
BASIC_LAUNCHER = "hydra._internal.core_plugins.basic_launcher.BasicLauncher"
BASIC_SWEEPER = "hydra._internal.core_plugins.basic_sweeper.BasicSweeper"
#: Seconds between two redraws while no shape ends (the elapsed time and the ETA move on).
REDRAW_S = 1.0


@dataclass
class SweepCounts:
    """What the display says: jobs (``jobs_total`` None: unknown, e.g. a search sweeper),
    shapes of the jobs started, shapes done, failures (FAILED shapes, jobs that raised)."""

    jobs_total: int | None
    jobs_done: int = 0
    jobs_started: int = 0
    shapes_started_jobs: int = 0
    shapes_done: int = 0
    failed: int = 0

    def shapes_expected(self) -> int | None:
        """Shapes of the jobs started, plus the jobs not started at the mean so far; None
        before the first job says how many it has, or with no job total."""
        if not self.jobs_started or self.jobs_total is None:
            return None
        left = max(self.jobs_total - self.jobs_started, 0)
        return self.shapes_started_jobs + round(left * self.shapes_started_jobs / self.jobs_started)

    def jobs_text(self) -> str:
        return f"jobs {self.jobs_done}/{'?' if self.jobs_total is None else self.jobs_total}"

    def failed_text(self) -> str:
        return f"{self.failed} failed"


class SweepDisplay:
    """The display (a ``tqdm`` bar on the terminal's stderr) and the streams it writes above."""

    def __init__(self, jobs_total: int | None):
        from tqdm import tqdm

        self.counts = SweepCounts(jobs_total)
        self.lock = threading.RLock()
        size = shutil.get_terminal_size((100, 24))   # a terminal that says no size (a new pty): 100 x 24
        self.bar = tqdm(total=None, file=sys.stderr, ncols=size.columns, nrows=size.lines,
                        bar_format="{desc} {percentage:3.0f}%|{bar:20}| {n_fmt}/{total_fmt} shapes "
                                   "[{elapsed}<{remaining}{postfix}]",
                        desc=self.counts.jobs_text(), postfix=self.counts.failed_text())
        self._swapped = _write_above(self)
        self._stop = threading.Event()
        self._ticker = threading.Thread(target=self._tick, name="sweep-progress", daemon=True)
        self._ticker.start()

    def _tick(self) -> None:
        while not self._stop.wait(REDRAW_S):
            with self.lock:
                if not self.bar.disable:
                    self.bar.refresh()

    def update(self, jobs_started: int = 0, shapes: int = 0, done: int = 0, failed: int = 0,
               jobs_done: int = 0) -> None:
        """Count ``jobs_started`` more jobs (of ``shapes`` shapes), ``done`` more shapes done,
        ``failed`` more failures, ``jobs_done`` more jobs ended; redraw."""
        with self.lock:
            c = self.counts
            c.jobs_started += jobs_started
            c.shapes_started_jobs += shapes
            c.shapes_done += done
            c.failed += failed
            c.jobs_done += jobs_done
            expected = c.shapes_expected()
            self.bar.total = None if expected is None else max(expected, c.shapes_done)
            self.bar.set_description_str(c.jobs_text(), refresh=False)
            self.bar.set_postfix_str(c.failed_text(), refresh=False)
            self.bar.update(done)
            self.bar.refresh()

    def clear(self) -> None:
        self.bar.clear()

    def redraw(self) -> None:
        self.bar.refresh()

    def close(self, leave: bool = True) -> None:
        """Stop redrawing, give the streams back, and leave the last state on the screen
        (``leave``) or clear it."""
        self._stop.set()
        with self.lock:
            _restore(self._swapped)
            self.bar.leave = leave
            self.bar.close()


class _AboveBar:
    """A terminal stream whose complete lines are written above the display."""

    def __init__(self, wrapped, display: SweepDisplay):
        self._wrapped, self._display, self._buf = wrapped, display, ""

    def write(self, text: str) -> int:
        display = self._display
        if display is None:
            return self._wrapped.write(text)
        head, newline, self._buf = (self._buf + text).rpartition("\n")
        if newline:
            with display.lock:
                display.clear()
                self._wrapped.write(head + newline)
                self._wrapped.flush()
                display.redraw()
        return len(text)

    def flush(self) -> None:
        self._wrapped.flush()

    def detach_display(self) -> None:
        """Write what is buffered; from now on a plain stream."""
        self._display = None
        if self._buf:
            self._wrapped.write(self._buf)
            self._buf = ""
        self._wrapped.flush()

    def __getattr__(self, name):
        return getattr(self._wrapped, name)


def _write_above(display: SweepDisplay) -> list:
    """Put sys.stdout / sys.stderr (those that are terminals) and the logging handlers that
    write to them behind :class:`_AboveBar`; what to restore."""
    swapped = []
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        if stream.isatty():
            wrapper = _AboveBar(stream, display)
            setattr(sys, name, wrapper)
            swapped.append((name, stream, wrapper))
    originals = {id(stream): wrapper for _, stream, wrapper in swapped}
    loggers = [logging.getLogger(), *(lg for lg in logging.Logger.manager.loggerDict.values()
                                      if isinstance(lg, logging.Logger))]
    for handler in (h for lg in loggers for h in lg.handlers):
        if isinstance(handler, logging.StreamHandler) and id(handler.stream) in originals:
            original = handler.setStream(originals[id(handler.stream)])
            swapped.append((handler, original, None))
    return swapped


def _restore(swapped: list) -> None:
    for target, original, wrapper in reversed(swapped):
        if isinstance(target, logging.StreamHandler):
            target.setStream(original)
        else:
            if getattr(sys, target) is wrapper:
                setattr(sys, target, original)
            wrapper.detach_display()   # handlers made during the sweep (Hydra's per-job logging) keep it


#: The display of this process's sweep, while shown.
_ACTIVE: SweepDisplay | None = None


def job_started(shapes: int) -> None:
    """A job of ``shapes`` shapes started (in this process)."""
    if _ACTIVE is not None:
        _ACTIVE.update(jobs_started=1, shapes=shapes)


def shape_done(failed: bool) -> None:
    """A shape's job line was printed: ``failed``, its run FAILED."""
    if _ACTIVE is not None:
        _ACTIVE.update(done=1, failed=int(failed))


class LiveProgress(Callback):
    """Hydra callback: the sweep's live display (module docstring), where it can be shown."""

    @staticmethod
    def sweep_jobs(config: DictConfig) -> int | None:
        """How many jobs the multirun launches: the product of its swept values under Hydra's
        basic sweeper; None for another sweeper, or a sweep whose size needs the config groups
        (``glob(...)``)."""
        from hydra._internal.core_plugins.basic_sweeper import BasicSweeper

        if str(config.hydra.sweeper.get("_target_", "")) != BASIC_SWEEPER:
            return None
        params = config.hydra.sweeper.get("params") or {}
        overrides = [*(f"{k}={v}" for k, v in params.items()), *config.hydra.overrides.task]
        try:
            batches = BasicSweeper.split_arguments(OverridesParser.create().parse_overrides(overrides), None)
        except Exception:   # a glob(...), a sweep Hydra refuses later with its own error
            return None
        return sum(len(batch) for batch in batches)

    def on_multirun_start(self, config: DictConfig, **kwargs) -> None:
        global _ACTIVE
        if _ACTIVE is not None or not sys.stderr.isatty():
            return
        if str(config.hydra.launcher.get("_target_", "")) != BASIC_LAUNCHER:
            return
        _ACTIVE = SweepDisplay(self.sweep_jobs(config))
        # a sweep ended by an error (harness.errors: one line, then exit) gives the terminal back
        # with that line last
        atexit.register(_close, False)

    def on_job_end(self, config: DictConfig, job_return: JobReturn, **kwargs) -> None:
        if _ACTIVE is not None:
            _ACTIVE.update(jobs_done=1, failed=int(job_return.status == JobStatus.FAILED))

    def on_multirun_end(self, config: DictConfig, **kwargs) -> None:
        _close()


def _close(leave: bool = True) -> None:
    global _ACTIVE
    display, _ACTIVE = _ACTIVE, None
    if display is not None:
        display.close(leave)
