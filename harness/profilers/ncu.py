"""Nsight Compute (``ncu``) backend: build the command line, parse its CSV output.

Everything here is a pure function of strings and paths, so it runs (and is tested)
on machines without a GPU.  The process itself is started elsewhere.

How ncu reports a run
---------------------
``ncu --csv --metrics A,B,... -- app`` profiles every kernel launch whose name matches
the ``-k`` filter, replaying each launch as often as the metrics need, and prints the
*details page* as CSV in "long" form: one row per (launch, metric)::

    "ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream",
    "Block Size","Grid Size","Device","CC","Section Name","Metric Name","Metric Unit",
    "Metric Value"
    "0","4242","python","host","conv2d_kernel","1","7","(128, 1, 1)","(512, 1, 1)",
    "0","9.0","Command line profiler metrics","gpu__time_duration.sum","nsecond","13,760"

``ID`` numbers the profiled launches in order, so grouping rows by ``ID`` gives one
record per dispatch.  Values carry thousands separators, units are auto-scaled
(``nsecond``/``usecond``, ``byte``/``Kbyte``/``Mbyte``, even ``Ksector``) and
unavailable metrics read ``n/a``.  The tool's own messages start with ``==PROF==``,
``==WARNING==`` or ``==ERROR==`` and, on stdout, interleave with whatever the profiled
program prints -- the parser therefore looks for the header line instead of assuming
the CSV starts at line 1.

The profiler keeps ncu's report file of each launch (``ncu.ncu-rep``, ``--export``) and reads
the counters back out of it (:mod:`harness.profilers.ncu_rep`): the CSV parsed here is then
``ncu --import``'s, of the very file a user opens in Nsight Compute.

Length: the command line, the CSV format with its units and the backend that joins them
are one tool's interface, kept together; reading the report file is in ``ncu_rep``.
"""
from __future__ import annotations

import csv
import glob
import os
import re
import shutil
import logging
import subprocess
from pathlib import Path

from harness.profilers.wrapped import ProcessWrappingProfiler
from harness.profilers.base import DispatchCounters, lookup_hit_rate
from harness.profilers.ncu_rep import import_csv, read_launches_isolated
from harness.storage.field_names import Metric, Tag

log = logging.getLogger("swizzlebench")

# The metrics every dispatch is asked for.  The L2 ("lts") figures: ncu's own hit rate over
# all sectors, the read-lookup hits / misses coming from the SM's texture/L1 path (where a conv
# kernel's operand loads go), and the lookup hits / misses of all traffic (reads, stores, the
# partition fabric).  The hit rate a job reports is hits / (hits + misses) of those last two:
# ncu's percentage divides lookup hits by a sector count it collects in another replay pass of
# the launch, so it carries the pass-to-pass change of the traffic (an H100 probe of a 3x3 conv:
# 82-103 % for launches whose lookup hit rate was 92.6-93.8 %; docs/profilers.md).  The percentage is still parsed (the rate when
# the lookup counters are missing, and kept in ``extra``).
METRIC_L2_HIT_RATE = "lts__t_sector_hit_rate.pct"
METRIC_L2_READ_HITS = "lts__t_sectors_srcunit_tex_op_read_lookup_hit.sum"
METRIC_L2_READ_MISSES = "lts__t_sectors_srcunit_tex_op_read_lookup_miss.sum"
METRIC_DURATION = "gpu__time_duration.sum"
METRIC_DRAM_READ = "dram__bytes_read.sum"
METRIC_L2_LOOKUP_HITS = "lts__t_sectors_lookup_hit.sum"
METRIC_L2_LOOKUP_MISSES = "lts__t_sectors_lookup_miss.sum"

NCU_METRICS = [METRIC_L2_HIT_RATE, METRIC_L2_READ_HITS, METRIC_L2_READ_MISSES,
               METRIC_DURATION, METRIC_DRAM_READ, METRIC_L2_LOOKUP_HITS, METRIC_L2_LOOKUP_MISSES]

#: What a job's ``l2_hit_rate`` is made of under ncu (the ``l2_hit_rate_counters`` tag).
L2_HIT_RATE_COUNTERS = f"{METRIC_L2_LOOKUP_HITS} / ({METRIC_L2_LOOKUP_HITS} + {METRIC_L2_LOOKUP_MISSES})"

CACHE_CONTROL_CHOICES = ("all", "none")
CLOCK_CONTROL_CHOICES = ("base", "none")

# The long-format columns the parser relies on (the others are carried along unused).
_LONG_COLUMNS = ("ID", "Kernel Name", "Metric Name", "Metric Unit", "Metric Value")


# %%
# Building the command
# --------------------
#
# ``--cache-control all`` (ncu's default) flushes every cache before each replay, so the
# hit rates are cold-L2 figures and do not depend on what ran before; ``none`` keeps the
# previous state.  ``--clock-control base`` locks the clocks to base frequency; the
# default has changed between ncu versions, which is why it is always passed explicitly.
#
# With ``--log-file`` ncu sends all of its own output -- the CSV included, together with
# its ``==PROF==`` lines -- to that file, while the profiled program keeps its stdout.
# That is the usual way to get a clean CSV out of ncu; ``parse_ncu_csv`` still copes with
# stray lines, so reading stdout (``report_csv=None``) works as well.
#
# ``export`` also saves the report file (``--export``, replacing an older one: ``--force-overwrite``).
# It holds ``NCU_METRICS`` alone: with ``--metrics`` and no ``--set`` / ``--section`` ncu collects
# no section set, so the file stays small and the replay passes are those of the metrics.

def build_ncu_command(worker_cmd: list[str], report_csv: Path | None, kernel_regex: str,
                      cache_control: str = "all", clock_control: str = "base",
                      executable: str = "ncu", export: Path | None = None) -> list[str]:
    """The argv that profiles ``worker_cmd`` under ncu, collecting ``NCU_METRICS`` for
    every kernel launch whose name matches ``kernel_regex``; the CSV goes to
    ``report_csv`` when given, else to stdout; the report file to ``export`` when given."""
    if cache_control not in CACHE_CONTROL_CHOICES:
        raise ValueError(f"cache_control={cache_control!r} is not valid for ncu --cache-control; "
                         f"choose one of {', '.join(CACHE_CONTROL_CHOICES)}")
    if clock_control not in CLOCK_CONTROL_CHOICES:
        raise ValueError(f"clock_control={clock_control!r} is not valid for ncu --clock-control; "
                         f"choose one of {', '.join(CLOCK_CONTROL_CHOICES)}")
    if not worker_cmd:
        raise ValueError("worker_cmd is empty: ncu needs a program to launch")
    cmd = [executable, "--csv", "--metrics", ",".join(NCU_METRICS),
           "--cache-control", cache_control, "--clock-control", clock_control,
           # Base units ("18874368 byte", not "18.87 Mbyte"): no precision lost to scaling.
           "--print-units", "base",
           "-k", f"regex:{kernel_regex}"]
    if report_csv is not None:
        cmd += ["--log-file", str(report_csv)]
    if export is not None:
        cmd += ["--export", str(export), "--force-overwrite"]
    return cmd + ["--", *worker_cmd]


# %%
# Numbers and units
# -----------------
#
# ncu scales a value into a readable unit before printing it.  Everything is brought
# back to one base unit per quantity: nanoseconds for time, bytes for sizes (ncu's
# ``Kbyte``/``Mbyte`` are decimal, 1000-based), plain counts for sectors and requests.

_TIME_TO_NS = {"nsecond": 1.0, "ns": 1.0, "usecond": 1e3, "us": 1e3, "msecond": 1e6,
               "ms": 1e6, "second": 1e9, "s": 1e9}
_SIZE_TO_BYTES = {"byte": 1.0, "Kbyte": 1e3, "Mbyte": 1e6, "Gbyte": 1e9, "Tbyte": 1e12,
                  "KB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12,
                  "KiB": 2.0**10, "MiB": 2.0**20, "GiB": 2.0**30}
# Count units that ncu may prefix with K/M/G ("Ksector", "Minst"); unprefixed they are 1.
_COUNT_UNITS = ("sector", "request", "inst", "cycle", "warp", "thread", "block")
_SI_PREFIX = {"K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}


def _unit_factor(unit: str) -> float | None:
    """Factor taking a value in ``unit`` to its base unit, or None for a unit not known."""
    unit = unit.strip()
    if unit in ("", "%"):
        return 1.0
    if unit in _TIME_TO_NS:
        return _TIME_TO_NS[unit]
    if unit in _SIZE_TO_BYTES:
        return _SIZE_TO_BYTES[unit]
    if unit in _COUNT_UNITS:
        return 1.0
    if unit[:1] in _SI_PREFIX and unit[1:] in _COUNT_UNITS:
        return _SI_PREFIX[unit[:1]]
    return None


def _parse_number(text: str) -> float | None:
    """``"13,760"`` -> 13760.0; ``"n/a"``, empty or non-numeric text -> None."""
    text = text.strip().replace(",", "")
    if not text or text.lower() in ("n/a", "na", "nan", "-"):
        return None
    try:
        return float(text)
    except ValueError:
        return None


def _to_base_unit(metric: str, value: str, unit: str, strict: bool) -> float | None:
    """The value of one metric in its base unit.  For the metrics this module relies on
    (``strict``) an unknown unit is an error rather than a silently wrong number."""
    number = _parse_number(value)
    if number is None:
        return None
    factor = _unit_factor(unit)
    if factor is None:
        if strict:
            raise ValueError(f"ncu reported {metric} in unit {unit!r}, which this parser cannot "
                             "convert (expected a time, byte, % or count unit)")
        return number
    return number * factor


# %%
# Finding the CSV in the output
# -----------------------------
#
# The header is the first line whose first two cells are ``ID`` and ``Process ID``.
# After it, a line is a data row only if it has an integer ``ID`` and every cell up to
# ``Metric Value`` (raw page: every column): that drops the tool's ``==`` lines and the
# worker's own prints, which can appear after the header too when ncu writes to stdout.

_TOOL_LINE = re.compile(r"^==(PROF|WARNING|ERROR|WARN)==")


def _is_header(cells: list[str]) -> bool:
    return len(cells) >= 2 and cells[0].strip() == "ID" and cells[1].strip() == "Process ID"


def _tool_messages(lines: list[str]) -> list[str]:
    return [line.rstrip() for line in lines if _TOOL_LINE.match(line.strip())]


def _split_csv(text: str) -> tuple[list[str], list[str] | None, list[list[str]]]:
    """(header, units row or None, data rows) of the CSV inside ncu's output; ValueError
    if there is none.  Only the ``--page raw`` format has a units row: the first row
    after the header, with an empty ``ID``."""
    lines = text.splitlines()
    header: list[str] | None = None
    needed = 0                     # cells a data row must have
    units: list[str] | None = None
    rows: list[list[str]] = []
    for line in lines:
        if not line.strip() or _TOOL_LINE.match(line.strip()):
            continue
        cells = next(csv.reader([line]))
        if _is_header(cells):
            # Several processes (``--target-processes all``) each print a header: keep one.
            header = header or [c.strip() for c in cells]
            # Long rows may stop after "Metric Value" (the rule columns are left empty,
            # often with just a trailing comma); raw-page rows fill every column.
            needed = (header.index("Metric Value") + 1 if "Metric Value" in header
                      else len(header) - 1)
            continue
        if header is None or len(cells) < needed:
            continue
        if cells[0].strip().isdigit():
            rows.append(cells)
        elif not cells[0].strip() and units is None and not rows:
            units = cells
    if header is None:
        messages = _tool_messages(lines)
        said = "\n".join(messages) if messages else "\n".join(lines[:10]) or "(no output at all)"
        raise ValueError("ncu output contains no CSV header (no line starting with "
                         "\"ID\",\"Process ID\"), so nothing was profiled or ncu failed. "
                         f"ncu said:\n{said}")
    return header, units, rows


# %%
# Parsing
# -------
#
# The long format has one row per metric; rows are grouped by launch ``ID`` and pivoted
# into one ``DispatchCounters`` each.  ``--page raw`` prints the wide format instead --
# one row per launch, a column per metric, and a first row holding the units -- which
# is accepted too.

def parse_ncu_csv(text: str) -> list[DispatchCounters]:
    """Dispatches in ``text`` (ncu's ``--csv`` output, long or ``--page raw`` format),
    in launch order; values in ns, bytes, %, sectors (see ``DispatchCounters``)."""
    header, units, rows = _split_csv(text)
    if "Metric Name" in header:
        launches = _pivot_long(header, rows)
    else:
        launches = _read_wide(header, units, rows)
    return dispatches_of(launches)


def dispatches_of(launches: list[_Launch]) -> list[DispatchCounters]:
    """One ``DispatchCounters`` per launch (kernel name, {metric: (value text, unit)}), in order."""
    return [_dispatch(index, name, metrics) for index, (name, metrics) in enumerate(launches)]


def read_ncu_report(report: Path, executable: str | None = None, timeout_s: float = 300) -> list[DispatchCounters] | None:
    """The dispatches of a saved ``.ncu-rep`` read with NVIDIA's ``ncu_report`` module in a child
    process (:func:`harness.profilers.ncu_rep.read_launches_isolated`); None where it is not
    installed."""
    launches = read_launches_isolated(report, executable, NCU_METRICS, timeout_s)
    return None if launches is None else dispatches_of(launches)


# A launch before conversion: (kernel name, {metric: (value text, unit)}).
_Launch = tuple[str, dict[str, tuple[str, str]]]


def _pivot_long(header: list[str], rows: list[list[str]]) -> list[_Launch]:
    missing = [c for c in _LONG_COLUMNS if c not in header]
    if missing:
        raise ValueError(f"ncu CSV header lacks column(s) {missing}; header was {header}")
    col = {name: header.index(name) for name in _LONG_COLUMNS}
    pid_col = header.index("Process ID")

    # Keyed by (ID, process) so that two processes' launches never merge; ordered by ID,
    # then by first appearance.
    launches: dict[tuple[int, str], _Launch] = {}
    for cells in rows:
        cells = cells + [""] * (len(header) - len(cells))
        metric = cells[col["Metric Name"]].strip()
        if not metric:
            continue          # a rule/advice row of a section, not a metric
        key = (int(cells[col["ID"]]), cells[pid_col].strip())
        name, metrics = launches.setdefault(key, (cells[col["Kernel Name"]], {}))
        # A metric listed in two sections keeps its first value.
        metrics.setdefault(metric, (cells[col["Metric Value"]], cells[col["Metric Unit"]]))
    return [launches[key] for key in sorted(launches, key=lambda k: k[0])]


def _read_wide(header: list[str], units: list[str] | None, rows: list[list[str]]) -> list[_Launch]:
    if "Kernel Name" not in header:
        raise ValueError(f"ncu CSV header has neither 'Metric Name' (long format) nor "
                         f"'Kernel Name' (raw page); header was {header}")
    name_col = header.index("Kernel Name")
    # Metric columns are the ones named like metrics: "unit__counter.rollup".
    metric_cols = [(i, name) for i, name in enumerate(header) if "__" in name]
    units = (units or []) + [""] * len(header)
    launches: list[_Launch] = []
    for cells in rows:
        cells = cells + [""] * (len(header) - len(cells))
        launches.append((cells[name_col], {name: (cells[i], units[i]) for i, name in metric_cols}))
    return launches


def _dispatch(index: int, kernel_name: str, metrics: dict[str, tuple[str, str]]) -> DispatchCounters:
    def value(metric: str) -> float | None:
        if metric not in metrics:
            return None
        text, unit = metrics[metric]
        return _to_base_unit(metric, text, unit, strict=True)

    extra: dict[str, float] = {}
    for metric, (text, unit) in metrics.items():
        if metric in NCU_METRICS:
            continue
        number = _to_base_unit(metric, text, unit, strict=False)
        if number is not None:
            extra[metric] = number
    # All traffic's hit rate from its lookup hits and misses (their ratio held within 1.2 points
    # over 8 H100 launches where ncu's percentage spanned 21); ncu's percentage (lookup hits over
    # another pass's sector count) only where they are missing.
    pct = value(METRIC_L2_HIT_RATE)
    hits, misses = value(METRIC_L2_LOOKUP_HITS), value(METRIC_L2_LOOKUP_MISSES)
    rate = lookup_hit_rate(hits, misses)
    if rate is None:
        rate = pct
    else:
        extra.update({METRIC_L2_LOOKUP_HITS: hits, METRIC_L2_LOOKUP_MISSES: misses})
        if pct is not None:
            extra[METRIC_L2_HIT_RATE] = pct
    return DispatchCounters(
        kernel_name=kernel_name,
        dispatch_index=index,
        l2_hit_rate=rate,
        l2_hits=value(METRIC_L2_READ_HITS),
        l2_misses=value(METRIC_L2_READ_MISSES),
        duration_ns=value(METRIC_DURATION),
        dram_read_bytes=value(METRIC_DRAM_READ),
        extra=extra,
    )


# %%
# Finding ncu and its version
# ---------------------------

def find_ncu() -> str | None:
    """Path of an ncu executable: PATH first, then the newest standalone Nsight Compute
    under /opt/nvidia/nsight-compute, then the CUDA toolkit's; None if there is none."""
    on_path = shutil.which("ncu")
    if on_path:
        return on_path
    # Standalone installs are named by version (/opt/nvidia/nsight-compute/2025.3.1/ncu);
    # sort by the numeric parts so that 2025.10 ranks above 2025.9.
    def version_key(path: str) -> list[int]:
        return [int(part) for part in re.findall(r"\d+", Path(path).parent.name)]

    candidates = sorted(glob.glob("/opt/nvidia/nsight-compute/*/ncu"), key=version_key, reverse=True)
    candidates.append("/usr/local/cuda/bin/ncu")
    for path in candidates:
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    return None


def ncu_version(executable: str = "ncu") -> str:
    """Version of ncu as it prints it (``ncu --version`` -> ``"2025.3.1.0"``).

    ncu prints three lines -- the product name, a copyright, and
    ``Version 2025.3.1.0 (build 36398880) (public-release)`` -- and the number is taken
    from the last one; any other output comes back whole.
    """
    proc = subprocess.run([executable, "--version"], capture_output=True, text=True, timeout=60)
    output = (proc.stdout + proc.stderr).strip()
    if proc.returncode != 0:
        raise RuntimeError(f"{executable} --version failed with exit code {proc.returncode}: {output}")
    match = re.search(r"Version\s+(\d+(?:\.\d+)+)", output)
    return match.group(1) if match else output


# %%
# The backend
# -----------


class NcuProfiler(ProcessWrappingProfiler):
    """Nsight Compute around the worker: cold (``cache_control=all``) or warm L2 per launch.
    Each launch's files in its folder: ``ncu.ncu-rep`` (the report), ``ncu_log.txt`` (ncu's
    messages), ``ncu.csv`` (the report's details page)."""

    name = "ncu"
    REPORT, LOG, CSV = "ncu.ncu-rep", "ncu_log.txt", "ncu.csv"
    #: How this launch's counters were read: ``ncu_report`` (NVIDIA's module), ``csv``, None (not read).
    reader: str | None = None

    def __init__(self, executable: str, cache_control: str = "all", clock_control: str = "base",
                 timeout_s: float = 1800.0):
        super().__init__(executable, timeout_s)
        # Validate now (fail fast) by building a throw-away command.
        build_ncu_command(["true"], None, ".", cache_control, clock_control, executable)
        self.cache_control = cache_control
        self.clock_control = clock_control

    reads_counted = True

    def read_version(self) -> str:
        return ncu_version(self.executable)

    def profile(self, requests, workdir: Path) -> dict:
        """As every wrapped profiler, plus ``l2_read_hit_rate`` (%): ncu's read-only sector
        lookups (``l2_hits`` / ``l2_misses``, the tex-unit read lookups) beside the
        all-traffic ``l2_hit_rate`` (stores included): the simulator predicts both."""
        self.reader = None
        outcomes = super().profile(requests, workdir)
        for outcome in outcomes.values():
            if self.reader is not None:   # the counters were read from this launch's report file
                outcome.tags[Tag.NCU_READER] = self.reader
            reading = outcome.reading
            if reading is not None and reading.l2_hits is not None and reading.l2_misses:
                lookups = reading.l2_hits + reading.l2_misses
                outcome.metrics[Metric.L2_READ_HIT_RATE] = 100.0 * reading.l2_hits / lookups
        return outcomes

    def tags(self) -> dict[str, str]:
        return {Tag.PROFILER: self.name, Tag.PROFILER_VERSION: self.version(),
                Tag.CACHE_CONTROL: self.cache_control, Tag.CLOCK_CONTROL: self.clock_control,
                Tag.L2_HIT_RATE_COUNTERS: L2_HIT_RATE_COUNTERS}

    def command(self, worker_cmd: list[str], workdir: Path, kernel_regex: str) -> list[str]:
        return build_ncu_command(worker_cmd, workdir / self.LOG, kernel_regex, self.cache_control,
                                 self.clock_control, self.executable, export=workdir / self.REPORT)

    def read_dispatches(self, workdir: Path, stdout: str) -> list[DispatchCounters]:
        """The launch's dispatches from its report file: with ``ncu_report`` where it loads,
        else from ``ncu --import``'s CSV (written to ``ncu.csv`` in both cases).  Without a
        report file (nothing profiled) the error quotes what ncu said."""
        report, log_file = workdir / self.REPORT, workdir / self.LOG
        if not report.exists():
            return parse_ncu_csv(log_file.read_text() if log_file.exists() else stdout)
        csv_text = import_csv(report, self.executable, self.timeout_s)
        (workdir / self.CSV).write_text(csv_text)
        try:
            from_module = read_ncu_report(report, self.executable, self.timeout_s)
        except Exception as exc:   # NVIDIA's module failed on this file: the CSV is the same measurement
            log.warning("ncu_report could not read %s (%s: %s); reading ncu's CSV", report, type(exc).__name__, exc)
            from_module = None
        self.reader = "csv" if from_module is None else "ncu_report"
        return parse_ncu_csv(csv_text) if from_module is None else from_module

    def raw_files(self, workdir: Path) -> list[Path]:
        return [p for p in (workdir / name for name in (self.CSV, self.LOG, self.REPORT)) if p.exists()]

    def report_file(self, workdir: Path) -> Path:
        return workdir / self.REPORT
