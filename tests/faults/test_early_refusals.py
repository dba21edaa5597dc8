"""Refusals before any run (issue 42, item 5; issue 40, item 3; issue 55, item 3): an empty
shape list, ``shape.select=[]``, a malformed preset file, a padding the CPU check cannot fit, a
misspelled option of a config group (``swizzle=xdc``, ``shape=resnte``), a ``shape.select``
naming no layer of the preset, a value of the wrong type (``launch.num_warps=four``),
``swizzle=custom`` without a formula or with one outside the language, a formula file over the
size limit read from ``/proc`` (its size reads 0), a family parameter out of range, a
``swizzle.label`` that cannot name runs: each is one line ``error: ...`` on stderr and nothing
else, no INFO line before it (the closest valid name where one is close, the valid values where
the schema knows them), exit status 2, within the bounds below (CPU time, wall time, the
child's maximum RSS), and nothing is logged: a multirun is refused before its sweep's run is
created.  A formula's caret excerpt is in the traceback under ``-v``."""
from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from harness.errors import USER_ERROR_EXIT
from tests.faults import FAST, cli_env, harness, runs_of

#: Bounds on one refused command: CPU seconds (user + sys: the wall time of an idle machine;
#: this project's 2 shared cores run several suites at once), wall seconds on such a loaded
#: machine, and maximum resident memory (MB).
REFUSAL_CPU_S = 10
REFUSAL_WALL_S = 60
REFUSAL_RSS_MB = 500
#: case -> (overrides, what the one line must say)
CASES = {
    "empty_shapes": (["shape=tiny", "shape.shapes=[]"], "preset 'tiny' has no shape to run: it has no shapes"),
    "select_nothing": (["shape=tiny", "shape.select=[]"],
                       "preset 'tiny' has no shape to run: shape.select=[] selects no shapes; valid: t1, t2, t3"),
    "huge_padding": (["shape=tiny", "shape.shapes=[{name:pad,N:1,C:4,H:5,W:5,F:4,R:3,S:3,padding:20000}]"],
                     "shape 'pad': padding=20000 cannot be checked on the CPU: its down-scaled instance keeps "
                     "the padding and has a 39999 x 39999 output"),
    "misspelled_swizzle": (["shape=tiny", "swizzle=xdc"], "swizzle=xdc: no swizzle option 'xdc'; did you mean xcd? "
                                                          "valid: colmajor, custom, grouped,"),
    "misspelled_preset": (["shape=resnte"], "shape=resnte: no shape option 'resnte'; did you mean resnet? "
                                            "valid: calibrate, holdout, kinds, resnet,"),
    "unknown_layer": (["shape=resnet", "shape.select=[l99]"],
                      "shape.select names ['l99'] not in preset 'resnet'; did you mean l09? valid: l01, l02,"),
    "baseline_misspelled": (["shape=tiny", "compare.baseline=xdc"],
                            "compare.baseline='xdc' is neither a built-in swizzle (did you mean xcd? colmajor,"),
    "baseline_bad_formula": (["shape=tiny", "compare.baseline=pid +"],
                             "compare.baseline='pid +' is neither a built-in swizzle (colmajor, "),
    "num_warps_not_a_number": (["shape=tiny", "launch.num_warps=four"],
                               "launch.num_warps='four' is invalid: Value 'four' of type 'str' could not be "
                               "converted to Integer; valid: 1, 2, 4, 8, 16 (amd), up to 32 (nvidia)"),
    "custom_without_formula": (["shape=tiny", "swizzle=custom"],
                               "swizzle=custom needs exactly one of swizzle.expr=\"...\", swizzle.file=PATH or "
                               "swizzle.fn=package.module:function (got expr=None, file=None, fn=None)"),
    "custom_bad_formula": (["shape=tiny", "swizzle=custom", "swizzle.expr=pid,pid +"],   # the second job's
                           "swizzle.expr='pid +': swizzle formula: line 1, column 6: syntax error: invalid syntax; "
                           "allowed forms: a single expression (the new pid), or one assignment"),
}
#: case -> (overrides, what the one line must say) of single runs (no ``-m``), through the fork server
SINGLE_RUN_CASES = {
    "select_nothing": CASES["select_nothing"],
    "unknown_layer": CASES["unknown_layer"],
    "custom_without_formula": CASES["custom_without_formula"],
    "custom_hostile_formula": (["shape=tiny", "swizzle=custom", "swizzle.expr=pid.__class__"],
                               "swizzle.expr='pid.__class__': swizzle formula: line 1, column 4: attribute access "
                               "`.` is not allowed; allowed forms: "),
    "formula_file_missing": (["shape=tiny", "swizzle=custom", "swizzle.file=nope.txt"],
                             "swizzle formula: formula file 'nope.txt' does not exist"),
    "formula_file_over_the_limit": (["shape=tiny", "swizzle=custom", "swizzle.file=/proc/self/maps"],
                                    "swizzle formula: formula file '/proc/self/maps' is too large (the limit is "
                                    "4000 characters)"),
    "family_out_of_range": (["shape=tiny", "swizzle=grouped_m", "swizzle.group_size=0"],
                            "swizzle family grouped_m: group_size=0 is invalid; valid: an integer from 1"),
    "label_with_slash": (["shape=tiny", "swizzle=custom", "swizzle.expr=pid", "swizzle.label=a/b"],
                         "swizzle.label='a/b' has a '/' or white space"),
    "label_of_a_builtin": (["shape=tiny", "swizzle=custom", "swizzle.expr=pid", "swizzle.label=xcd"],
                           "swizzle.label='xcd' names a built-in swizzle"),
}


@dataclass(frozen=True)
class Refusal:
    line: str        # the one ``error: ...`` line
    cpu_s: float     # the child's user + sys seconds
    wall_s: float
    rss_mb: float    # the child's maximum resident set


def _high_water_kb(pid: int) -> int:
    """The process's peak resident set since its exec (``VmHWM``), kB; 0 once it has exited.
    Not ``ru_maxrss``: a child started with vfork keeps, across its exec, the high-water mark
    of the memory it shared with this test process (the pytest worker's, torch and all)."""
    try:
        with open(f"/proc/{pid}/status") as fh:
            return next((int(line.split()[1]) for line in fh if line.startswith("VmHWM:")), 0)
    except OSError:
        return 0


#: A shape too large for this machine (issue 54): refused within REFUSAL_CPU_S under this
#: resident memory (MB), the issue's bound: its check builds the kernel's launch plans.
MEMORY_REFUSAL_RSS_MB = 1024
#: case -> (overrides, what the one line must say): what would not fit the machine.
MEMORY_CASES = {
    "shape_over_memory": (["shape.shapes.0.N=256", "shape.shapes.0.C=1024", "shape.shapes.0.H=512",
                           "shape.shapes.0.W=512", "shape.shapes.0.F=1024"],
                          "shape 'seed' (N256 C1024 H512 W512 F1024): the simulated L2 would need about "),
    "sim_budget": (["shape=tiny", *FAST[:-1], "profiler=sim", "profiler.sim_memory_gib=0.05"],
                   "shape 't1' (N1 C5 H6 W5 F10): the simulated L2 would need about 0.1 GiB ("),
    "sim_budget_invalid": (["shape=tiny", "profiler.sim_memory_gib=0"],
                           "profiler.sim_memory_gib=0.0 is invalid; the simulated L2's memory budget is a positive"),
}


def _refused(args: list[str], cwd: Path, rss_mb: float = REFUSAL_RSS_MB) -> Refusal:
    """Run the CLI, measure that one child (``os.wait4``), check exit 2 and one line."""
    out, err = cwd / "refusal.out", cwd / "refusal.err"
    start = time.monotonic()
    with out.open("w") as stdout, err.open("w") as stderr:
        proc = subprocess.Popen([sys.executable, "-m", "harness", *args], cwd=cwd, env=cli_env(), stdout=stdout,
                                stderr=stderr)
        peak_kb, done = 0, 0
        while not done:
            peak_kb = max(peak_kb, _high_water_kb(proc.pid))
            done, status, usage = os.wait4(proc.pid, os.WNOHANG)
            time.sleep(0.005)
    wall = time.monotonic() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    stderr_text = err.read_text()
    assert proc.returncode == USER_ERROR_EXIT, (proc.returncode, stderr_text[-2000:])
    refusal = Refusal(_one_error_line(out.read_text(), stderr_text), usage.ru_utime + usage.ru_stime, wall,
                      peak_kb / 1024)
    assert refusal.cpu_s < REFUSAL_CPU_S and refusal.wall_s < REFUSAL_WALL_S, refusal
    assert refusal.rss_mb < rss_mb, refusal
    return refusal


def _one_error_line(stdout: str, stderr: str) -> str:
    """The refusal's ``error: ...`` line, after checking that it is all the command printed
    (no INFO line before it, nothing on stdout)."""
    assert stdout == "" and len(stderr.splitlines()) == 1 and stderr.startswith("error: "), (stdout, stderr[-2000:])
    return stderr.strip()


@pytest.mark.parametrize("case", list(CASES))
def test_refused_in_one_line_quickly(seeded_store, case):
    """As a multirun (``-m``): refused before the sweep's run is created."""
    overrides, words = CASES[case]
    experiment = f"refuse-{case}"
    refusal = _refused(["-m", *overrides, *FAST, f"tracking.uri={seeded_store.uri}", f"experiment={experiment}",
                        f"hydra.sweep.dir={seeded_store.root}/{experiment}"], seeded_store.root)
    assert words in refusal.line, refusal.line
    assert runs_of(seeded_store.uri, experiment, kind=None) == []


@pytest.mark.parametrize("case", list(MEMORY_CASES))
def test_too_large_for_the_machine_is_refused_in_one_line(seeded_store, case):
    """Issue 54, item 2: the ~137 GB shape (its simulated L2 alone ~600 GiB) and a simulation
    over ``profiler.sim_memory_gib`` are refused before the sweep's run, in under 1 GB."""
    overrides, words = MEMORY_CASES[case]
    experiment = f"refuse-{case}"
    refusal = _refused(["-m", *overrides, f"tracking.uri={seeded_store.uri}", f"experiment={experiment}",
                        f"hydra.sweep.dir={seeded_store.root}/{experiment}"], seeded_store.root, MEMORY_REFUSAL_RSS_MB)
    assert words in refusal.line, refusal.line
    assert runs_of(seeded_store.uri, experiment, kind=None) == []


def test_malformed_preset_file_is_refused_in_one_line(seeded_store, tmp_path):
    """A preset file of the user's own config dir with ``shapes: 42``."""
    (tmp_path / "shape").mkdir()
    (tmp_path / "shape" / "broken.yaml").write_text("name: broken\nshapes: 42\n")
    refusal = _refused([f"--config-dir={tmp_path}", "shape=broken", *FAST, f"tracking.uri={seeded_store.uri}",
                        "experiment=refuse-broken-preset", f"hydra.run.dir={tmp_path}/run"], tmp_path)
    assert refusal.line.startswith("error: shape.shapes=42 is invalid"), refusal.line


@pytest.mark.parametrize("case", list(SINGLE_RUN_CASES))
def test_single_run_refused_in_one_line_logs_nothing(seeded_store, tmp_path, case):
    """As a single run: refused before the job opens the store; a formula file over the limit
    whatever its reported size (``/proc/self/maps`` reads 0), a label that would split the run's
    name or take another swizzle's."""
    overrides, words = SINGLE_RUN_CASES[case]
    experiment = f"refuse-single-{case}"
    proc = harness([*overrides, *FAST, f"tracking.uri={seeded_store.uri}", f"experiment={experiment}",
                    f"hydra.run.dir={tmp_path}/run"], cwd=tmp_path)
    assert proc.returncode == USER_ERROR_EXIT, proc.stderr[-2000:]
    assert words in _one_error_line(proc.stdout, proc.stderr), proc.stderr
    assert runs_of(seeded_store.uri, experiment, kind=None) == []


@pytest.mark.parametrize("verbose", [False, True])
def test_formula_error_is_one_line_and_its_caret_under_v(seeded_store, tmp_path, verbose):
    """A formula's error: one line with its position and the allowed forms; with ``-v`` the
    traceback, whose chained error shows the formula's line with a caret under the offending
    token.  Nothing is logged either way."""
    experiment = f"formula-line-{verbose}"
    proc = harness([*(["-v"] if verbose else []), "shape=tiny", "shape.select=[t1]", "swizzle=custom",
                    "swizzle.expr=pid.__class__", *FAST, f"tracking.uri={seeded_store.uri}",
                    f"experiment={experiment}", f"hydra.run.dir={tmp_path}/run"], cwd=tmp_path)
    assert proc.returncode != 0
    if verbose:
        assert "\n    pid.__class__\n       ^\n" in proc.stderr, proc.stderr[-2000:]
    else:
        line = _one_error_line(proc.stdout, proc.stderr)
        assert line.startswith("error: swizzle.expr='pid.__class__': swizzle formula: line 1, column 4: attribute "
                               "access `.` is not allowed; allowed forms: "), line
        assert "^" not in line
    assert runs_of(seeded_store.uri, experiment, kind=None) == []
