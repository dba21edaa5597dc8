"""Run names of remaps that share a label.

A job is named ``kernel/label/shape/wN`` (JobSpec.run_name: its job line's name and its run's
tag ``job``; the store names the run ``label·shape·wN·kernel``,
harness.storage.run_fields.store_run_name).  Two remaps can share a label: ``swizzle.label``
given alike in two YAMLs or overrides, or two import paths whose YAMLs have one ``name``.
The report then names their cells ``label#<digest>``, the digest of each one's formula or
import path (harness.report.labels.swizzle_label).  Their runs are renamed alike,
``kernel/label#<digest>/shape/wN`` (tag ``job``; the store's name alike), every run of the
experiment under that label, once a run of another code under it is finished in the store
(the Tracker does it: harness.storage.tracking).  The later of two such runs always sees the
other, as each searches after logging its own params; a label that names one remap leaves
run names as they are.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping

from mlflow.entities import Run

from harness.job.spec import code_digest
from harness.storage.field_names import Param
from harness.storage.run_fields import JOB_NAME_TAG

#: The run params that hold a swizzle's code (harness.storage.run_fields.spec_params).
CODE_PARAMS = (Param.SWIZZLE_FORMULA, Param.SWIZZLE_FN)


def swizzle_code(params: Mapping[str, str]) -> str:
    """A run's swizzle code, its formula or import path; empty for a built-in."""
    return next((params[key] for key in CODE_PARAMS if params.get(key)), "")


def label_filter(label: str) -> str | None:
    """The MLflow search filter of the runs under ``label`` (None for a label a quoted
    string cannot hold)."""
    return None if "'" in label else f"params.swizzle = '{label}'"


def job_name(run: Run) -> str:
    """A job run's name as its job line says it, ``kernel/label/shape/wN``: its tag ``job``
    (the store's name is :func:`harness.storage.run_fields.store_run_name`), else, for a run
    logged before that tag, its name."""
    return run.data.tags.get(JOB_NAME_TAG) or run.info.run_name or ""


def names_apart(runs: Iterable[Run], label: str) -> dict[str, str]:
    """run id -> new job name (:func:`job_name`), for the ``runs`` under ``label`` that must be
    renamed so that each code under it has names of its own: none when they share one code;
    else each run with a code whose name still shows the bare label."""
    runs = [run for run in runs if run.data.params.get("swizzle") == label]
    if len({swizzle_code(run.data.params) for run in runs}) < 2:
        return {}
    renamed = {}
    for run in runs:
        parts, code = job_name(run).split("/"), swizzle_code(run.data.params)
        if code and len(parts) >= 4 and parts[1] == label:
            parts[1] = f"{label}#{code_digest(code)}"
            renamed[run.info.run_id] = "/".join(parts)
    return renamed
