"""rocprofv3 (ROCm rocprofiler-sdk) backend: build the command line, read its output (CSV
files, or the ``rocpd`` SQLite database that rocprofv3 writes by default: harness.profilers.rocpd).

Everything here is a pure function of strings and paths (plus two optional tool
queries), so it runs and is tested on machines without a GPU.

How rocprofv3 reports a run
---------------------------
``rocprofv3 --pmc TCC_HIT_sum TCC_MISS_sum --kernel-trace --output-format csv -d DIR -o
NAME -- app`` writes, among others:

* ``NAME_counter_collection.csv`` -- long form, one row per (dispatch, counter)::

      "Correlation_Id","Dispatch_Id","Agent_Id","Queue_Id","Process_Id","Thread_Id",
      "Grid_Size","Kernel_Id","Kernel_Name","Workgroup_Size","LDS_Block_Size",
      "Scratch_Size","VGPR_Count","Accum_VGPR_Count","SGPR_Count","Counter_Name",
      "Counter_Value","Start_Timestamp","End_Timestamp"
      1,1,"Agent 1",1,15606,15606,1048576,17,"conv2d_kernel",256,0,0,8,0,16,
      "TCC_HIT_sum",16384.000000,3200098838431081,3200098838483232

* ``NAME_kernel_trace.csv`` -- one row per dispatch with ``Start_Timestamp`` and
  ``End_Timestamp`` in ns, joined to the counters by ``Dispatch_Id``.

Where the files land varies between versions and options: ``DIR/NAME_*.csv``; without
``-o`` ``DIR/<host>/<pid>_*.csv``; and with several counter passes (or, in some
versions, any ``--pmc``) one ``pmc_N/`` (or ``pass_N/``) folder per pass.  The reader
therefore searches the whole tree below ``DIR``.  The columns drifted too: older files
lack ``Accum_VGPR_Count`` and ``Kernel_Id``, ``Agent_Id`` went from ``1`` to
``"Agent 1"``, and the trace once had ``Private_Segment_Size``/``Group_Segment_Size``
and no ``Stream_Id``.  Only the columns named below are read, so all of these parse
alike.  A ``*.db`` rocpd database below ``DIR`` (rocprofv3 run without ``--output-format
csv``) is read the same way.
"""
from __future__ import annotations

import csv
import re
import shutil
import subprocess
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from harness.profilers.wrapped import ProcessWrappingProfiler
from harness.profilers.base import DispatchCounters, lookup_hit_rate
from harness.profilers.rocpd import RawDispatch as _Dispatch, is_rocpd, read_rocpd
from harness.profilers.tcc import DEFAULT_COUNTERS, TCC_HIT, TCC_MISS, counter_passes, dram_read_bytes
from harness.storage.field_names import Tag

# %%
# Which counters
# --------------
#
# MI300X (gfx942) defines no derived L2 hit-rate counter, so the rate is computed the
# way rocprof-compute does: ``100 * TCC_HIT_sum / (TCC_HIT_sum + TCC_MISS_sum)``; both are
# sums over all TCC (L2) channels, in requests.  The DRAM read bytes are rocprofiler-sdk's
# ``FETCH_SIZE`` for gfx942, from its two terms ``TCC_EA0_RDREQ_sum`` and
# ``TCC_EA0_RDREQ_32B_sum`` (harness.profilers.tcc).  The four fill one pass (gfx942 takes at
# most four TCC counters per pass); a longer list is split into passes
# (:func:`harness.profilers.tcc.counter_passes`), each a separate run of the program.
ROCPROF_COUNTERS = list(DEFAULT_COUNTERS)


def build_rocprofv3_command(worker_cmd: list[str], outdir: Path, name: str, kernel_regex: str,
                            counters: Sequence[str] = ROCPROF_COUNTERS,
                            executable: str = "rocprofv3", input_file: Path | None = None) -> list[str]:
    """The argv that profiles ``worker_cmd`` under rocprofv3: ``counters`` for every
    dispatch whose kernel name matches ``kernel_regex``, plus a kernel trace (for the
    durations), as CSV files below ``outdir`` named after ``name``.  Counters that need
    several passes (:func:`harness.profilers.tcc.counter_passes`) are read from
    ``input_file``, which the caller writes with :func:`pass_input`; rocprofv3 then writes
    each pass to ``outdir/pmc_N/``."""
    if not counters:
        raise ValueError("counters is empty: rocprofv3 --pmc needs at least one counter")
    if not worker_cmd:
        raise ValueError("worker_cmd is empty: rocprofv3 needs a program to launch")
    passes = counter_passes(counters)
    if len(passes) > 1 and input_file is None:
        raise ValueError(f"counters {list(counters)} need {len(passes)} passes: give an input_file")
    # ``--output-format csv`` matters: newer rocprofv3 writes a SQLite (rocpd) database
    # by default.  ``--kernel-include-regex`` filters counter collection only; the kernel
    # trace still lists every dispatch, which the reader handles by joining on the id.
    select = ["--pmc", *counters] if len(passes) == 1 else ["-i", str(input_file)]
    return [executable, *select, "--kernel-trace",
            "--kernel-include-regex", kernel_regex,
            "--output-format", "csv", "-d", str(outdir), "-o", name, "--", *worker_cmd]


def pass_input(counters: Sequence[str]) -> str:
    """rocprofv3's text input file for ``counters``: one ``pmc:`` line per pass."""
    return "".join(f"pmc: {' '.join(p)}\n" for p in counter_passes(counters))


# %%
# Reading the output
# ------------------
#
# 1. Find every ``*counter_collection.csv`` below ``outdir`` and, next to each, its
#    ``*kernel_trace.csv`` (same folder, same prefix).
# 2. Pivot the long counter rows into one record per dispatch, keyed by ``Dispatch_Id``
#    (``Correlation_Id`` in files that have no ``Dispatch_Id``).
# 3. Take each dispatch's duration from the trace (``End - Start``, ns); files without a
#    trace fall back to the timestamps on the counter rows, where the version has them.
# 4. Merge the passes: the ``pmc_N`` folders are separate runs of the same program, so
#    dispatch *k* of one pass is dispatch *k* of the others.

# Per-pass folders: ``pmc_N`` for a text input file (``pmc:`` lines), ``pass_N`` for a
# JSON/YAML one (``jobs:``), as rocprofv3.py names them.
_PASS_DIR = re.compile(r"^(?:pmc|pass)_(\d+)$")


def read_rocprofv3_output(outdir: Path) -> list[DispatchCounters]:
    """Dispatches profiled in the rocprofv3 output below ``outdir`` (CSV files, else rocpd
    databases), ordered by Dispatch_Id; hit rate in %, hits/misses in TCC requests,
    durations in ns, DRAM read bytes where the counters give them."""
    outdir = Path(outdir)
    # Numeric pass order (pmc_2 before pmc_10): on a conflict the earlier pass wins.
    counter_files = sorted(outdir.rglob("*counter_collection.csv"),
                           key=lambda path: (_pass_of(path, outdir), str(path)))
    if not counter_files:
        counter_files = sorted((p for p in outdir.rglob("*.db") if is_rocpd(p)),
                               key=lambda path: (_pass_of(path, outdir), str(path)))
    if not counter_files:
        raise ValueError(f"no *counter_collection.csv or rocpd database below {outdir}: {_describe_tree(outdir)}")

    # Passes are matched up by dispatch id alone (process ids differ between runs),
    # which is only sound when every pass profiled a single process.
    files_per_pass = Counter(_pass_of(path, outdir) for path in counter_files)
    several_passes = len(files_per_pass) > 1
    if several_passes and max(files_per_pass.values()) > 1:
        raise ValueError(f"{outdir} holds several pmc passes and several processes per pass: "
                         "the dispatches of different processes cannot be matched across passes")

    by_key: dict[tuple[int, int], _Dispatch] = {}
    for path in counter_files:
        if path.suffix == ".db":
            dispatches = read_rocpd(path)
        else:
            trace = _trace_beside(path)
            dispatches = _read_counter_file(path, _read_trace(trace) if trace else {})
        for (process, dispatch_id), dispatch in dispatches.items():
            key = (0 if several_passes else process, dispatch_id)
            merged = by_key.setdefault(key, _Dispatch(dispatch.kernel_name))
            for counter, value in dispatch.counters.items():
                merged.counters.setdefault(counter, value)   # first pass wins
            if merged.duration_ns is None:
                merged.duration_ns = dispatch.duration_ns

    ordered = sorted(by_key.items())
    return [_to_record(index, d) for index, (_, d) in enumerate(ordered)]


# The columns a counter row and a trace row can be joined on, best first.  Dispatch ids
# number the dispatches; correlation ids number API calls and, in some older files,
# differ from the dispatch id of the same row, so the two are never mixed.  ``Dispatch_ID``
# is rocprof-compute's name for the dispatch id in its long extract of a rocpd database
# (``pmc_perf.csv`` of a workload profiled with ``--format-rocprof-output rocpd``).
_ID_COLUMNS = ("Dispatch_Id", "Dispatch_ID", "Correlation_Id")
_Durations = dict[str, dict[int, float]]     # {id column: {id: duration in ns}}


def _read_counter_file(path: Path, durations: _Durations) -> dict[tuple[int, int], _Dispatch]:
    """{(process, dispatch id): dispatch} of one counter_collection file."""
    with path.open(newline="") as f:
        reader = csv.DictReader(f)
        columns = reader.fieldnames or []
        id_column = next((c for c in _ID_COLUMNS if c in columns), _ID_COLUMNS[0])
        join_column = next((c for c in _ID_COLUMNS if c in columns and c in durations), None)
        required = [id_column, "Kernel_Name", "Counter_Name", "Counter_Value"]
        missing = [c for c in required if c not in columns]
        if missing:
            raise ValueError(f"{path}: missing column(s) {missing}; header is {columns}")
        dispatches: dict[tuple[int, int], _Dispatch] = {}
        for row in reader:
            key = (int(row.get("Process_Id") or 0), int(row[id_column]))
            dispatch = dispatches.get(key)
            if dispatch is None:
                dispatch = dispatches[key] = _Dispatch(row["Kernel_Name"])
                traced = durations[join_column].get(int(row[join_column])) if join_column else None
                dispatch.duration_ns = traced if traced is not None else _span(row)
            value = _number(row["Counter_Value"])
            if value is not None:
                dispatch.counters.setdefault(row["Counter_Name"], value)
    return dispatches


def _read_trace(path: Path) -> _Durations:
    """End_Timestamp - Start_Timestamp (ns) of every dispatch in one kernel_trace file,
    by each id column the file has."""
    with path.open(newline="") as f:
        reader = csv.DictReader(f)
        columns = [c for c in _ID_COLUMNS if c in (reader.fieldnames or [])]
        durations: _Durations = {c: {} for c in columns}
        for row in reader:
            span = _span(row)
            if span is not None:
                for c in columns:
                    durations[c][int(row[c])] = span
    return durations


def _trace_beside(counter_file: Path) -> Path | None:
    """The kernel trace written by the same process: same folder, same prefix; else the
    only trace in that folder."""
    twin = counter_file.with_name(counter_file.name.replace("counter_collection", "kernel_trace"))
    if twin.is_file():
        return twin
    traces = sorted(counter_file.parent.glob("*kernel_trace.csv"))
    return traces[0] if len(traces) == 1 else None


def _pass_of(path: Path, outdir: Path) -> int:
    """N of the ``pmc_N``/``pass_N`` folder holding ``path`` (0 when it is in none)."""
    for part in path.relative_to(outdir).parts[:-1]:
        match = _PASS_DIR.match(part)
        if match:
            return int(match.group(1))
    return 0


def _span(row: dict[str, str]) -> float | None:
    """End_Timestamp - Start_Timestamp of a row, in ns, when the row has both."""
    start, end = row.get("Start_Timestamp"), row.get("End_Timestamp")
    if not start or not end:
        return None
    return float(int(end) - int(start))


def _number(text: str | None) -> float | None:
    try:
        return float(text) if text not in (None, "") else None
    except ValueError:
        return None


def _to_record(index: int, d: _Dispatch) -> DispatchCounters:
    hits, misses = d.counters.get(TCC_HIT), d.counters.get(TCC_MISS)
    rate = lookup_hit_rate(hits, misses)
    extra = {name: value for name, value in d.counters.items() if name not in (TCC_HIT, TCC_MISS)}
    return DispatchCounters(kernel_name=d.kernel_name, dispatch_index=index, l2_hit_rate=rate,
                            l2_hits=hits, l2_misses=misses, duration_ns=d.duration_ns,
                            dram_read_bytes=dram_read_bytes(d.counters), extra=extra)


def _describe_tree(outdir: Path) -> str:
    """A short listing of what is below ``outdir``, for error messages."""
    if not outdir.exists():
        return "the directory does not exist"
    files = sorted(str(p.relative_to(outdir)) for p in outdir.rglob("*") if p.is_file())
    if not files:
        return "the directory is empty (did the profiled program run any matching kernel?)"
    shown = ", ".join(files[:20]) + (f", ... ({len(files)} files)" if len(files) > 20 else "")
    return f"found {shown}"


# %%
# Tool queries
# ------------
#
# ``rocprofv3-avail pmc-check C1 C2 ...`` prints
# ``Following input counters can be collected together on GPU:0<TAB>C1<TAB>C2`` and
# exits 0 when the set fits one pass; otherwise it writes ``Fatal error: ...`` to stderr
# (``Invalid counter name``, or ``C1 C2 not collected on agent gfx942``) and exits 1.

def check_counters(counters: Sequence[str], executable: str = "rocprofv3-avail") -> str | None:
    """None when each pass of ``counters`` (:func:`harness.profilers.tcc.counter_passes`)
    can be collected together (or when ``executable`` is not installed, so nothing can be
    checked); else the tool's reason for the first pass it rejects."""
    path = shutil.which(executable)
    if path is None:
        return None
    for group in counter_passes(counters):
        proc = subprocess.run([path, "pmc-check", *group], capture_output=True, text=True, timeout=120)
        output = "\n".join(part.strip() for part in (proc.stdout, proc.stderr) if part.strip())
        if proc.returncode != 0 or "Fatal error" in output:
            return (f"{executable} pmc-check {' '.join(group)} rejected the counter set "
                    f"(exit code {proc.returncode}): {output or '(no output)'}")
    return None


def rocprofv3_version(executable: str = "rocprofv3") -> str:
    """Version of rocprofv3 (``"1.0.0 (ROCm 7.0.0)"``).

    ``rocprofv3 --version`` prints one ``key: value`` line per build fact (``version``,
    ``git_revision``, ..., ``rocm_version``); the rocprofiler-sdk version and the ROCm
    release are taken from it.  Older releases without ``--version`` fail, which raises.
    """
    proc = subprocess.run([executable, "--version"], capture_output=True, text=True, timeout=60)
    output = (proc.stdout + proc.stderr).strip()
    if proc.returncode != 0:
        raise RuntimeError(f"{executable} --version failed with exit code {proc.returncode}: {output}")
    facts = dict(re.findall(r"^\s*(\w+)\s*:\s*(.*?)\s*$", proc.stdout, flags=re.MULTILINE))
    if "version" not in facts:
        return output
    rocm = facts.get("rocm_version")
    return f"{facts['version']} (ROCm {rocm})" if rocm else facts["version"]


class Rocprofv3Profiler(ProcessWrappingProfiler):
    """rocprofv3 around the worker: TCC hit/miss counters plus the kernel trace's durations.
    rocprofv3 does not flush caches between dispatches, so readings are warm-L2 figures."""

    name = "rocprofv3"

    def __init__(self, executable: str, counters: Sequence[str] = ROCPROF_COUNTERS, timeout_s: float = 1800.0):
        super().__init__(executable, timeout_s)
        self.counters = list(counters)
        problem = check_counters(self.counters, executable=str(Path(executable).with_name("rocprofv3-avail")))
        if problem:
            raise ValueError(f"profiler=rocprofv3: counters {self.counters} cannot be collected: {problem}")

    def read_version(self) -> str:
        return rocprofv3_version(self.executable)

    def tags(self) -> dict[str, str]:
        return {Tag.PROFILER: self.name, Tag.PROFILER_VERSION: self.version(), Tag.CACHE_CONTROL: "none",
                Tag.COUNTERS: ",".join(self.counters)}

    def command(self, worker_cmd: list[str], workdir: Path, kernel_regex: str) -> list[str]:
        # Triton kernels on AMD may carry a ".kd" suffix in the dispatch's kernel name.
        regex = kernel_regex[:-1] + r"(\.kd)?$" if kernel_regex.endswith("$") else kernel_regex
        input_file = None
        if len(counter_passes(self.counters)) > 1:   # one pmc: line per pass
            input_file = workdir / "rocprof_passes.txt"
            workdir.mkdir(parents=True, exist_ok=True)
            input_file.write_text(pass_input(self.counters))
        return build_rocprofv3_command(worker_cmd, workdir / "rocprof", "swizzlebench", regex,
                                       self.counters, self.executable, input_file)

    def read_dispatches(self, workdir: Path, stdout: str) -> list[DispatchCounters]:
        return read_rocprofv3_output(workdir / "rocprof")

    def raw_files(self, workdir: Path) -> list[Path]:
        out = workdir / "rocprof"
        return sorted([*out.rglob("*.csv"), *out.rglob("*.db")]) if out.exists() else []
