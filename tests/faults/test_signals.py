"""A sweep stopped by SIGTERM (what SLURM and ``timeout`` send) or by Ctrl-C (SIGINT to its
process group) while a job runs, after an earlier job finished: the command ends within
5 s with 143 / 130 and no traceback, the run in flight and the sweep's run are KILLED with
the signal as their reason (no run left RUNNING), the sweep's runs are listed one line each,
its report covers the finished cells, and no process the sweep started is left; also
under ``hydra/launcher=joblib``, whose worker processes run the jobs.

The job in flight is ``fault.kind=hang``: it sleeps in the job's worker process
(``isolation.mode=process``; the fault needs it), so that the signal lands mid-job.  On a
GPU (marked ``gpu``) the sweep is also stopped while ncu profiles; no process of the sweep
may then be left on the GPU (``nvidia-smi``)."""
from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from pathlib import Path

import pandas as pd
import pytest

from tests.cli_fork import StartedCli, start_cli
from tests.faults import FAST, cli_env, reason, runs_of

EXPERIMENT = "signals"
HUNG = "igemm/xcd/tiny-t1/w8"
FINISHED_FIRST = ["igemm/identity/tiny-t1/w8"]   # one shape: the sweep is shape.select=[t1]
STOP_LIMIT_S = 5.0
START_LIMIT_S = 240


def descendants(pid: int) -> set[int]:
    """The processes under ``pid`` now (children, their children, ...), from /proc."""
    parents: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents[int(stat.parent.name)] = int(fields[1])
    found, frontier = set(), {pid}
    while frontier:
        frontier = {child for child, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


def alive(pids: set[int]) -> set[int]:
    """Those of ``pids`` that still run (a zombie does not)."""
    out = set()
    for pid in pids:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z":
            out.add(pid)
    return out


def start_sweep(root: Path, uri: str, *extra: str, profiler: str = "none",
                env: dict[str, str] | None = None) -> StartedCli | subprocess.Popen:
    """The sweep in a session of its own (so a test can signal its process group, as a
    terminal's Ctrl-C does), a fork of the warm CLI server (tests.cli_fork.start_cli; a real
    process where its environment does not fit the server); output to ``root/sweep.out`` and
    ``sweep.err``."""
    fast = [arg for arg in FAST if not arg.startswith("profiler=")] + [f"profiler={profiler}"]
    args = ["-m", "swizzle=identity,xcd", "shape=tiny", "shape.select=[t1]", *fast, f"tracking.uri={uri}",
            f"experiment={EXPERIMENT}", f"hydra.sweep.dir={root}/sweep", "fault.kind=hang", "fault.swizzle=xcd",
            *extra]
    return start_cli(args, root, env or cli_env(), root / "sweep.out", err_log=root / "sweep.err")


def wait_until(proc: StartedCli | subprocess.Popen, ready, what: str) -> set[int]:
    """Poll until ``ready()``; returns every process seen under the sweep meanwhile."""
    seen: set[int] = set()
    deadline = time.monotonic() + START_LIMIT_S
    try:
        while time.monotonic() < deadline:
            assert proc.poll() is None, f"the sweep ended before {what}"
            seen |= descendants(proc.pid)
            if ready():
                return seen | descendants(proc.pid)
            time.sleep(0.2)
        pytest.fail(f"no {what} after {START_LIMIT_S} s")
    except BaseException:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        raise


def hung_run_running(root: Path, uri: str) -> bool:
    """Whether the hanging job's run is RUNNING (asked once the sweep has made its store:
    a client opening a new store meanwhile would race it to create the tables)."""
    return ("MLflow sweep run" in (root / "sweep.out").read_text()
            and any(r.data.tags.get("job") == HUNG and r.info.status == "RUNNING" for r in runs_of(uri, EXPERIMENT)))


def cpu_ticks(pid: int) -> int:
    """User + system CPU time of ``pid``, in clock ticks (0 once it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0
    return int(fields[11]) + int(fields[12])


def worker_hangs(proc: StartedCli | subprocess.Popen) -> bool:
    """Whether the job's worker process (multiprocessing's spawn) sits in its hang: started
    (its imports took CPU time) and using none over half a second."""
    workers = [p for p in descendants(proc.pid) if "spawn_main" in _cmdline(p)]
    before = {p: cpu_ticks(p) for p in workers}
    time.sleep(0.5)
    return any(ticks > 0 and cpu_ticks(p) == ticks for p, ticks in before.items())


def stop(proc: StartedCli | subprocess.Popen, signum: int, group: bool) -> tuple[int, float]:
    """Send ``signum`` to the sweep (its process group when ``group``); (exit status, seconds to exit)."""
    start = time.monotonic()
    if group:
        os.killpg(proc.pid, signum)
    else:
        os.kill(proc.pid, signum)
    try:
        code = proc.wait(60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    return code, time.monotonic() - start


def check_stopped(root: Path, uri: str, code: int, seconds: float, signum: int, processes: set[int]) -> None:
    """Everything a stop must leave (the module docstring)."""
    name = signal.Signals(signum).name
    out, err = (root / "sweep.out").read_text(), (root / "sweep.err").read_text()
    assert code == 128 + signum, f"exit {code}\n{out[-2000:]}\n{err[-3000:]}"
    assert seconds < STOP_LIMIT_S, f"{seconds:.1f} s from {name} to exit"
    assert "Traceback" not in out + err, err[-3000:]
    assert err.strip().splitlines()[-1].startswith(f"stopped by {name}:"), err[-1000:]

    runs = runs_of(uri, EXPERIMENT)
    states = {r.data.tags.get("job"): r for r in runs}
    assert sorted(states) == sorted(FINISHED_FIRST + [HUNG]), sorted(states)
    assert all(states[n].info.status == "FINISHED" for n in FINISHED_FIRST)
    assert states[HUNG].info.status == "KILLED"
    assert reason(states[HUNG]).startswith(f"killed: {name} received mid-job"), reason(states[HUNG])
    sweep, = runs_of(uri, EXPERIMENT, kind="sweep")
    assert sweep.info.status == "KILLED" and reason(sweep).startswith(f"killed: {name} received"), reason(sweep)
    for run in runs:   # one line each
        assert f"  {run.info.status:<8} {run.info.run_name}  run {run.info.run_id}" in out.splitlines(), out[-2000:]

    report, = [line.split("Sweep report: ")[1].strip() for line in out.splitlines() if "Sweep report: " in line]
    table = pd.read_csv((root / report).parent / "table.csv", dtype=str, keep_default_na=False)
    assert sorted(table["run_id"]) == sorted(states[n].info.run_id for n in FINISHED_FIRST)

    deadline = time.monotonic() + 2   # a helper that exits on its own once its pipe to the sweep closes
    while alive(processes) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not alive(processes), [Path(f"/proc/{p}/cmdline").read_text() for p in alive(processes)]


@pytest.mark.parametrize("signum, group", [
    (signal.SIGTERM, False),   # kill -TERM <pid>, as SLURM and timeout do
    (signal.SIGINT, True),     # Ctrl-C: the whole process group, which the job's worker is not in
], ids=["sigterm", "sigint-group"])
def test_a_signal_stops_the_sweep_cleanly(tmp_path, signum, group):
    uri = f"sqlite:///{tmp_path}/store.db"
    proc = start_sweep(tmp_path, uri, "isolation.mode=process")
    processes = wait_until(proc, lambda: hung_run_running(tmp_path, uri) and worker_hangs(proc), f"RUNNING {HUNG}")
    code, seconds = stop(proc, signum, group)
    check_stopped(tmp_path, uri, code, seconds, signum, processes | {proc.pid})


@pytest.mark.parametrize("launcher", [
    ("joblib", "hydra_plugins.hydra_joblib_launcher", "hydra.launcher.n_jobs=2"),
    pytest.param(("submitit_local", "hydra_plugins.hydra_submitit_launcher"), marks=pytest.mark.slow),
], ids=["joblib", "submitit_local"])
def test_sigterm_stops_a_sweep_whose_jobs_run_in_worker_processes(tmp_path, launcher):
    """``hydra/launcher=joblib`` (two worker processes) and ``submitit_local``: the jobs run
    in processes of the launcher's.  SIGTERM to the sweep while the xcd job hangs (the
    identity job FINISHED): those processes and the job's isolated worker are gone, the hung
    run ends KILLED with the signal (not left RUNNING: joblib kills its pool at once, and the
    sweep ends its run; a submitit_local job gets SIGTERM and ends it itself), and the rest is
    as for the default launcher."""
    name, plugin, *options = launcher
    pytest.importorskip(plugin, reason=f"needs the {name} launcher (extra 'cluster')")
    uri = f"sqlite:///{tmp_path}/store.db"
    proc = start_sweep(tmp_path, uri, "isolation.mode=process", f"hydra/launcher={name}", *options)

    def ready() -> bool:
        if not hung_run_running(tmp_path, uri):
            return False
        states = {r.data.tags.get("job"): r.info.status for r in runs_of(uri, EXPERIMENT)}
        return all(states.get(name) == "FINISHED" for name in FINISHED_FIRST) and worker_hangs(proc)

    processes = wait_until(proc, ready, f"RUNNING {HUNG} beside {FINISHED_FIRST} FINISHED")
    code, seconds = stop(proc, signal.SIGTERM, group=False)
    check_stopped(tmp_path, uri, code, seconds, signal.SIGTERM, processes | {proc.pid})


def _on_gpu(pids: set[int]) -> set[int]:
    listed = subprocess.run(["nvidia-smi", "--query-compute-apps=pid", "--format=csv,noheader"],
                            capture_output=True, text=True, check=True).stdout
    return {int(p) for p in listed.split()} & pids


@pytest.mark.gpu
@pytest.mark.parametrize("profiler", ["ncu", "none"])
def test_sigterm_on_a_gpu_leaves_no_process_on_it(tmp_path, profiler):
    """Compiled kernels on the GPU: with ``profiler=ncu`` the sweep is stopped while ncu
    profiles the first job's shapes (their runs, waiting for their profile, end KILLED), with
    ``profiler=none`` while the second job hangs in its worker (holding its CUDA context).
    ncu, its target process and the job's worker are gone, and nvidia-smi lists no process
    of the sweep."""
    uri = f"sqlite:///{tmp_path}/store.db"
    env = {k: v for k, v in cli_env().items() if k != "TRITON_INTERPRET"}
    proc = start_sweep(tmp_path, uri, "isolation.mode=process", profiler=profiler, env=env)
    if profiler == "ncu":
        processes = wait_until(proc, lambda: any("harness.profilers.worker" in _cmdline(p)
                                                 for p in descendants(proc.pid)), "ncu profiling")
    else:
        processes = wait_until(proc, lambda: hung_run_running(tmp_path, uri) and worker_hangs(proc),
                               f"RUNNING {HUNG}")
    code, seconds = stop(proc, signal.SIGTERM, group=False)
    out, err = (tmp_path / "sweep.out").read_text(), (tmp_path / "sweep.err").read_text()
    assert code == 143 and "Traceback" not in out + err, err[-3000:]
    assert seconds < STOP_LIMIT_S, f"{seconds:.1f} s from SIGTERM to exit"
    assert not [r.info.run_name for r in runs_of(uri, EXPERIMENT, kind=None) if r.info.status == "RUNNING"]
    time.sleep(1)
    assert not alive(processes), [_cmdline(p) for p in alive(processes)]
    assert not _on_gpu(processes | {proc.pid})


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_text().replace("\0", " ")
    except OSError:
        return ""
