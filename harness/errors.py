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
prints those as the same one line with the same exit status, and so Hydra's own errors (an
unknown option of a config group, an override it cannot parse).  A misspelled name is
answered with the closest valid one (``did you mean xcd?``, :func:`did_you_mean`).  A key
unknown to a group without a schema (``swizzle.formula=x``) lists the keys of the option
chosen and those the group's other options take, read from its YAML files
(:func:`open_unknown_key`).
``-v`` on the command line is ``HYDRA_FULL_ERROR=1`` (:func:`take_verbose_flag`).
"""
from __future__ import annotations

import difflib
import os
import re
import sys
from contextlib import contextmanager
from dataclasses import fields, is_dataclass
from typing import Any, Callable, Iterable, Iterator, Mapping

from hydra.core.utils import JobReturn, JobStatus
from hydra.errors import HydraException, MissingConfigException, OverrideParseException
from hydra.experimental.callback import Callback
from omegaconf import DictConfig, Node
from omegaconf.errors import ConfigAttributeError, ConfigKeyError, OmegaConfBaseException

#: Exit status of a command stopped by a user error (2, as argparse does for bad usage).
USER_ERROR_EXIT = 2
FULL_ERROR_ENV = "HYDRA_FULL_ERROR"
#: Command-line flags asking for full error reports (tracebacks, a formula's caret excerpt).
VERBOSE_FLAGS = ("-v", "--verbose")
#: A dataclass field's metadata key holding what values it takes (text, or a callable giving it).
VALID_METADATA = "valid"
#: Least similarity (difflib's ratio) of a name suggested for a misspelled one.
SIMILAR = 0.6


class UserError(ValueError):
    """A mistake in the command line or config (bad select, unknown name, invalid value);
    the message says what is valid.  A ValueError, so callers catching those still do."""


def full_error_requested() -> bool:
    """True when ``HYDRA_FULL_ERROR=1`` asks for the full traceback."""
    return os.environ.get(FULL_ERROR_ENV, "") == "1"


def take_verbose_flag(argv: list[str]) -> None:
    """Remove ``-v``/``--verbose`` from ``argv`` (Hydra knows no such flag) and set
    ``HYDRA_FULL_ERROR=1`` in its place, for this process and the jobs it starts."""
    if any(arg in VERBOSE_FLAGS for arg in argv[1:]):
        argv[1:] = [arg for arg in argv[1:] if arg not in VERBOSE_FLAGS]
        os.environ[FULL_ERROR_ENV] = "1"


def did_you_mean(name: object, valid: Iterable[str]) -> str:
    """``did you mean X? `` naming the valid name closest to ``name``, or ``""`` when none is
    close: one equal to it but for case and leading zeros (``l3``: ``l03``), else the most
    similar by difflib's ratio (at least 0.6; the first listed wins a tie)."""
    name, valid = str(name), [str(v) for v in valid]
    same = [v for v in valid if _loose(v) == _loose(name)]
    scored = [(difflib.SequenceMatcher(None, name, v).ratio(), v) for v in valid]
    best = max(scored, key=lambda pair: pair[0], default=(0.0, ""))
    close = same[0] if same else best[1] if best[0] >= SIMILAR else None
    return f"did you mean {close}? " if close else ""


def _loose(name: str) -> str:
    """``name`` in lower case with each number's leading zeros dropped."""
    return re.sub(r"\d+", lambda number: str(int(number.group())), name.casefold())


def valid_names(names: Iterable[object], valid: Iterable[str]) -> str:
    """``did you mean X? valid: a, b, c``: the closest valid name to the first of ``names``
    that has one, then every valid name."""
    valid = [str(v) for v in valid]
    hint = next((h for h in (did_you_mean(n, valid) for n in names) if h), "")
    return f"{hint}valid: {', '.join(valid)}"


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


def unknown_key(full_key: str, valid: Iterable[str], elsewhere: Mapping[str, Iterable[str]] | None = None) -> str:
    """The message for a key that a config group does not declare: the closest name, every
    valid key, and the keys that only other options of the group take (``elsewhere``: key ->
    those options), each with its options (``expr, file, fn, label (swizzle=custom)``)."""
    group, _, name = full_key.rpartition(".")
    group, valid = group or "the config", sorted(valid)
    others: dict[tuple[str, ...], list[str]] = {}
    for key, options in sorted((elsewhere or {}).items()):
        if key not in valid:
            others.setdefault(tuple(sorted(options)), []).append(key)
    hint = did_you_mean(name, valid + [key for keys in others.values() for key in keys])
    text = f"{full_key} is not a key of {group}; {hint}valid: {', '.join(valid)}"
    if others:
        text += f"; other {group} options take: " + "; ".join(
            f"{', '.join(keys)} ({group}={', '.join(options)})" for options, keys in sorted(others.items(), key=lambda o: o[1]))
    return text


def group_option_keys(group: str) -> dict[str, list[str]]:
    """Each top-level key that an option of the config group ``group`` sets (its YAML file in
    the shipped config tree, ``conf/<group>/``) -> those options; {} for a group without a
    folder there (a nested node such as ``kernel.tiles``).  What an untyped group (``kernel``,
    ``swizzle``) takes, where no dataclass says."""
    import importlib.resources

    import yaml

    folder = importlib.resources.files("swizzlebench_conf").joinpath(*group.split("."))
    keys: dict[str, list[str]] = {}
    if not folder.is_dir():
        return keys
    for path in sorted(folder.iterdir(), key=lambda p: p.name):
        data = yaml.safe_load(path.read_text()) if path.name.endswith(".yaml") else None
        for key in data if isinstance(data, dict) else ():
            if key != "defaults":
                keys.setdefault(str(key), []).append(path.name.removesuffix(".yaml"))
    return keys


def missing_option(exc: MissingConfigException) -> str:
    """One line for an option a config group lacks (``swizzle=xdc``): the group, the name, the
    closest option and every option; or Hydra's first line when it names no group option."""
    group, _, name = str(exc.missing_cfg_file or "").rpartition("/")
    if not group or not exc.options:
        return str(exc).strip().splitlines()[0]
    return f"{group}={name}: no {group} option {name!r}; {valid_names([name], exc.options)}"


def schema_values(schema: object, key: object) -> str | None:
    """What a typed field takes, when its schema says: its ``valid`` metadata (text, or a
    callable giving it), ``true, false`` for a bool; None when it does not say."""
    field = next((f for f in fields(schema) if f.name == key), None) if is_dataclass(schema) else None
    if field is None:
        return None
    valid = field.metadata.get(VALID_METADATA)
    if valid is not None:
        return valid() if callable(valid) else str(valid)
    return "true, false" if field.type in (bool, "bool") else None


def undecodable_file(exc: UnicodeDecodeError) -> str:
    """One line for a config file that is not UTF-8 text: the file (Hydra's file config source
    reads each YAML as UTF-8, and its error names none: it is the innermost frame's
    ``full_path``), the line and the bytes that are not UTF-8."""
    path, tb = None, exc.__traceback__
    while tb is not None:
        path = tb.tb_frame.f_locals.get("full_path", path)
        tb = tb.tb_next
    try:
        raw = open(path, "rb").read() if path else b""
        raw.decode("utf-8")
    except UnicodeDecodeError as exact:   # the file's own offsets, not those of a chunk Hydra read
        line = raw.count(b"\n", 0, exact.start) + 1
        bad = " ".join(f"{byte:#04x}" for byte in raw[exact.start:exact.end])
        return f"{path}, line {line}: not UTF-8 text (byte {bad}: {exact.reason}); save the file as UTF-8"
    except OSError:
        pass
    return f"a config file is not UTF-8 text ({exc}); save it as UTF-8"


def compose_error_line(exc: HydraException | UnicodeDecodeError) -> str:
    """One line for a refused composition: for the schema's refusals (a value of the wrong
    type, an unknown key) the key, the value and what is valid; for an option a group lacks
    the closest and every option; for a config file that is not UTF-8, the file and line;
    else Hydra's message, its line breaks folded (its config search path dropped)."""
    if isinstance(exc, UnicodeDecodeError):
        return undecodable_file(exc)
    if isinstance(exc, MissingConfigException):
        return missing_option(exc)
    if isinstance(exc, OverrideParseException):   # its second line points to Hydra's grammar page
        return f"cannot parse the override {exc.override!r}: {exc.message.strip().splitlines()[0]}"
    cause = exc.__cause__ or exc.__context__   # a preset file's bad value: raised during the merge, not from it
    if not isinstance(cause, OmegaConfBaseException) or not getattr(cause, "full_key", None):
        text = str(exc).split("\nConfig search path:")[0]
        return " ".join(line.strip() for line in text.splitlines() if line.strip())
    schema = getattr(cause, "object_type", None)
    if isinstance(cause, (ConfigAttributeError, ConfigKeyError)):
        if is_dataclass(schema):
            return unknown_key(cause.full_key, [f.name for f in fields(schema)])
        return open_unknown_key(cause.full_key, getattr(cause, "parent_node", None))
    reason = str(getattr(cause, "msg", cause)).splitlines()[0]
    value = cause.value._value() if isinstance(cause.value, Node) else cause.value   # e.g. AnyNode(42)
    valid = schema_values(schema, getattr(cause, "key", None))
    return f"{cause.full_key}={value!r} is invalid: {reason}" + (f"; valid: {valid}" if valid else "")


def open_unknown_key(full_key: str, parent: object) -> str:
    """:func:`unknown_key` for a node without a dataclass (``swizzle``, ``kernel``, a node
    under them): valid are the keys of the composed node (``parent``: the chosen option's),
    and, for a config group, the keys its other options take (:func:`group_option_keys`)."""
    group = full_key.rpartition(".")[0]
    elsewhere = group_option_keys(group) if group else {}
    valid = [str(k) for k in parent.keys()] if isinstance(parent, DictConfig) else []
    return unknown_key(full_key, valid or elsewhere, elsewhere)


@contextmanager
def one_line_compose_errors(on_refused: Callable[[str], None] = lambda reason: None) -> Iterator[None]:
    """While open, a composition Hydra or the schema refuses exits with :func:`one_line` and
    status 2 (``HYDRA_FULL_ERROR=1``: Hydra's report), after ``on_refused(message)`` (a
    multirun's sweep run is ended with it).  Hydra prints composition errors in
    ``hydra._internal.utils.run_and_report``, which has no hook: this wraps it."""
    import hydra._internal.utils as hydra_utils

    report = hydra_utils.run_and_report

    def run_and_report(func: Callable[[], Any]) -> Any:
        def refuse_in_one_line() -> Any:
            try:
                return func()
            except (HydraException, UnicodeDecodeError) as exc:   # ConfigCompositionException, a YAML not UTF-8, ...
                if full_error_requested():
                    raise
                line = compose_error_line(exc)
                on_refused(line)
                print(one_line(UserError(line)), file=sys.stderr, flush=True)
                raise SystemExit(USER_ERROR_EXIT) from None
        return report(refuse_in_one_line)

    hydra_utils.run_and_report = run_and_report
    try:
        yield
    finally:
        hydra_utils.run_and_report = report
