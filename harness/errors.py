"""User errors: a mistake in what was asked for, reported as one line.

A bad ``shape.select``, an unknown name, an invalid ``launch.num_warps`` or tile size is
the user's to fix, not a bug: ``python -m harness`` prints it as ``error: <message>`` on
stderr and exits with status 2, without a traceback.  ``HYDRA_FULL_ERROR=1`` gives
Hydra's full report instead, traceback included, as for any other error.

Hydra catches a task's exception and prints it with a traceback; the one place that
sees the exception before that in the launching process is a callback's
``on_job_end`` (called in single runs and multiruns alike), so :class:`OneLineUserErrors`
does it there.  It is listed before ``mlflow_sweep`` in ``hydra.callbacks``: Hydra calls
``on_job_end`` in reverse order, so the sweep's run is ended FAILED first.  In a multirun
the sweep stops at the first job with a user error (every later job would repeat it; a
fixed command resumes the finished ones).  Jobs run by another process (joblib,
submitit) keep Hydra's report.

A value of the wrong type or an unknown key is refused earlier, while Hydra composes the
config onto its schema (harness.schema), outside any job: :func:`one_line_compose_errors`
prints those as the same one line with the same exit status.  Hydra's own composition errors
(an unknown group option) keep Hydra's message, which lists the valid options.
"""
from __future__ import annotations

import os
import sys
from contextlib import contextmanager
from dataclasses import fields, is_dataclass
from typing import Any, Callable, Iterable, Iterator

from hydra.core.utils import JobReturn, JobStatus
from hydra.errors import ConfigCompositionException
from hydra.experimental.callback import Callback
from omegaconf import DictConfig, Node
from omegaconf.errors import ConfigAttributeError, ConfigKeyError, OmegaConfBaseException

#: Exit status of a command stopped by a user error (2, as argparse does for bad usage).
USER_ERROR_EXIT = 2
FULL_ERROR_ENV = "HYDRA_FULL_ERROR"


class UserError(ValueError):
    """A mistake in the command line or config (bad select, unknown name, invalid value);
    the message says what is valid.  A ValueError, so callers catching those still do."""


def full_error_requested() -> bool:
    """True when ``HYDRA_FULL_ERROR=1`` asks for the full traceback."""
    return os.environ.get(FULL_ERROR_ENV, "") == "1"


def one_line(exc: BaseException) -> str:
    """``error: <message>`` with the message's line breaks folded into spaces."""
    return "error: " + " ".join(str(exc).split())


class OneLineUserErrors(Callback):
    """Print a job's :class:`UserError` as one line and exit (see the module docstring)."""

    def __init__(self) -> None:
        self._pid = os.getpid()   # a copy of this callback in a launcher's worker process does nothing

    def on_job_end(self, config: DictConfig, job_return: JobReturn, **kwargs) -> None:
        error = getattr(job_return, "_return_value", None)   # the property would re-raise it
        if (job_return.status == JobStatus.FAILED and isinstance(error, UserError)
                and os.getpid() == self._pid and not full_error_requested()):
            print(one_line(error), file=sys.stderr, flush=True)
            raise SystemExit(USER_ERROR_EXIT)   # not an Exception: Hydra's handlers let it through


def unknown_key(full_key: str, valid: Iterable[str]) -> str:
    """The message for a key that a typed config group does not declare."""
    group = full_key.rpartition(".")[0] or "the config"
    return f"{full_key} is not a key of {group}; valid: {', '.join(sorted(valid))}"


def compose_error_line(exc: ConfigCompositionException) -> str | None:
    """One line for a composition refused by the schema (a value of the wrong type, an
    unknown key): the key, the value and what is valid; None for Hydra's own errors."""
    cause = exc.__cause__ or exc.__context__   # a preset file's bad value: raised during the merge, not from it
    if not isinstance(cause, OmegaConfBaseException) or not getattr(cause, "full_key", None):
        return None
    if isinstance(cause, (ConfigAttributeError, ConfigKeyError)):
        schema = getattr(cause, "object_type", None)
        return unknown_key(cause.full_key, [f.name for f in fields(schema)] if is_dataclass(schema) else [])
    reason = str(getattr(cause, "msg", cause)).splitlines()[0]
    value = cause.value._value() if isinstance(cause.value, Node) else cause.value   # e.g. AnyNode(42)
    return f"{cause.full_key}={value!r} is invalid: {reason}"


@contextmanager
def one_line_compose_errors(on_refused: Callable[[str], None] = lambda reason: None) -> Iterator[None]:
    """While open, a composition the schema refuses exits with :func:`one_line` and status 2
    (``HYDRA_FULL_ERROR=1``: Hydra's report), after ``on_refused(message)`` (a multirun's
    sweep run is ended with it).  Hydra prints composition errors in
    ``hydra._internal.utils.run_and_report``, which has no hook: this wraps it."""
    import hydra._internal.utils as hydra_utils

    report = hydra_utils.run_and_report

    def run_and_report(func: Callable[[], Any]) -> Any:
        def refuse_in_one_line() -> Any:
            try:
                return func()
            except ConfigCompositionException as exc:
                line = compose_error_line(exc)
                if line is None or full_error_requested():
                    raise
                on_refused(line)
                print(one_line(UserError(line)), file=sys.stderr, flush=True)
                raise SystemExit(USER_ERROR_EXIT) from None
        return report(refuse_in_one_line)

    hydra_utils.run_and_report = run_and_report
    try:
        yield
    finally:
        hydra_utils.run_and_report = report
