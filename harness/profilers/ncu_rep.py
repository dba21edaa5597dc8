"""Nsight Compute's saved report (``.ncu-rep``): what ncu writes with ``--export``, and how the
counters are read back out of it.

The profiling launch writes the report file (``ncu --export FILE --force-overwrite ...``); the
counters come from that file, so the report a user opens in Nsight Compute (``ncu-ui FILE``)
and the figures the job logs are the same measurement, never a second profiling run.  Two
readers, one measurement:

* NVIDIA's ``ncu_report`` Python module, where it can be imported: on the Python path (the
  ``ncu-report`` package, or ``PYTHONPATH=<nsight-compute>/extras/python``), else from the
  ``extras/python`` folder beside the ncu executable, where Nsight Compute ships it.  It is
  not a dependency of this project: without it the CSV path below is used;
* ``ncu --import FILE --csv --page details --print-units base``: the details page as CSV
  (:func:`harness.profilers.ncu.parse_ncu_csv`), written next to the report as ``ncu.csv``
  in both cases, the readable raw file.

Both give a launch as (kernel name, {metric: (value text, unit)}), in the report's result
order (ncu's ``ID``), which is the worker's launch order.
"""
from __future__ import annotations

import importlib
import json
import logging
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

log = logging.getLogger("swizzlebench")

#: A launch as the readers give it: (kernel name, {metric: (value text, unit)}).
Launch = tuple[str, dict[str, tuple[str, str]]]


def build_import_command(report: Path, executable: str = "ncu") -> list[str]:
    """The argv that prints ``report``'s details page as CSV, units not scaled (ns, bytes)."""
    return [executable, "--import", str(report), "--csv", "--page", "details", "--print-units", "base"]


def import_csv(report: Path, executable: str, timeout_s: float) -> str:
    """ncu's CSV of the saved ``report`` (:func:`build_import_command`); ValueError saying
    what ncu said when it cannot read the file."""
    cmd = build_import_command(report, executable)
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        raise ValueError(f"`{' '.join(cmd)}` did not finish in {timeout_s:.0f} s") from None
    if proc.returncode != 0:
        tail = " | ".join((proc.stderr or proc.stdout).strip().splitlines()[-3:])
        raise ValueError(f"`{' '.join(cmd)}` exited with code {proc.returncode}: {tail}")
    return proc.stdout


def _extras_dirs(ncu: Path) -> Iterator[Path]:
    """Folders holding ``ncu_report.py`` for the ncu at ``ncu`` (a resolved path): its own
    ``extras/python``; where ``ncu`` is CUDA's launcher script in ``<cuda>/bin``, that of the
    Nsight Compute install it starts, beside CUDA (``<cuda>/nsight-compute-<version>``) or in
    NVIDIA's default place (``/opt/nvidia/nsight-compute/<version>``), newest version first."""
    installs = [*ncu.parent.parent.glob("nsight-compute*"), *Path("/opt/nvidia/nsight-compute").glob("*")]
    for folder in (ncu.parent / "extras" / "python",
                   *(p / "extras" / "python" for p in sorted(installs, key=lambda p: p.name, reverse=True))):
        if (folder / "ncu_report.py").is_file():
            yield folder


def load_ncu_report_module(executable: str | None = None) -> ModuleType | None:
    """NVIDIA's ``ncu_report`` module: importable as is, else from ``extras/python`` beside
    ``executable`` (symbolic links followed); None where neither loads."""
    try:
        return importlib.import_module("ncu_report")
    except ImportError:
        pass
    found = shutil.which(executable) if executable else None
    if not found:
        return None
    extras = next(_extras_dirs(Path(os.path.realpath(found))), None)
    if extras is None:
        return None
    sys.path.append(str(extras))
    try:
        return importlib.import_module("ncu_report")
    except Exception as exc:   # a build of the module this Python cannot load: the CSV path stays
        log.info("ncu_report in %s did not load (%s: %s); reading ncu's CSV instead", extras, type(exc).__name__, exc)
        return None


def read_launches_isolated(report: Path, executable: str | None, metrics: list[str],
                           timeout_s: float) -> list[Launch] | None:
    """:func:`read_launches` in a child Python (``python -m harness.profilers.ncu_rep``): NVIDIA's
    module is native code, and a build that crashes in this Python (seen: SIGSEGV on an H200
    node's Python 3.12 beside torch) must not take the sweep with it.  None where the module is
    not installed; raises ``RuntimeError`` naming the child's end where it failed."""
    cmd = [sys.executable, "-m", "harness.profilers.ncu_rep", str(report), executable or "", *metrics]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
    if proc.returncode != 0:
        end = f"signal {-proc.returncode}" if proc.returncode < 0 else f"exit {proc.returncode}"
        raise RuntimeError(f"the ncu_report reader ended with {end}: {proc.stderr.strip()[-300:]}")
    found = json.loads(proc.stdout)
    return None if found is None else [(name, {k: tuple(v) for k, v in values.items()}) for name, values in found]


def read_launches(module: ModuleType, report: Path, metrics: list[str]) -> list[Launch]:
    """The ``metrics`` of every result in ``report``, read with ``module`` (``ncu_report``),
    in result order; a metric the result lacks is left out (as the CSV's ``n/a``)."""
    context = module.load_report(str(report))
    launches: list[Launch] = []
    for r in range(context.num_ranges()):
        results = context.range_by_idx(r)
        for a in range(results.num_actions()):
            action = results.action_by_idx(a)
            values: dict[str, tuple[str, str]] = {}
            for name in metrics:
                metric = action.metric_by_name(name)
                if metric is not None:
                    values[name] = (repr(metric.as_double()), metric.unit())
            launches.append((action.name(), values))
    return launches


if __name__ == "__main__":   # the child of read_launches_isolated: REPORT EXECUTABLE METRIC...
    _module = load_ncu_report_module(sys.argv[2] or None)
    print(json.dumps(None if _module is None else read_launches(_module, Path(sys.argv[1]), sys.argv[3:])))
