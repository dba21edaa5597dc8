"""Live progress on a CPU: each shape's line is printed when that shape is done, not in one
burst at the end of its Hydra job (issue 55), because the simulator profiles a verified shape at
once (``Profiler.batched`` is False for it)."""
from __future__ import annotations

import os
import re
import subprocess
import sys
import time

from mlflow.tracking import MlflowClient

#: Five small layers (a few programs each under the interpreter).
FIVE = "shape.shapes=[" + ",".join(f"{{name:s{i},N:1,C:16,H:{8 + 2 * i},W:8,F:16,R:3,S:3,stride:1,padding:1}}"
                                   for i in range(5)) + "]"


def test_a_five_layer_cpu_sweep_prints_each_shape_as_it_finishes(tmp_path):
    uri = f"sqlite:///{tmp_path}/store.db"
    cmd = [sys.executable, "-m", "harness", "-m", "swizzle=xcd", "shape=tiny", FIVE, "kernel=igemm",
           "kernel.tiles.BLOCK_M=16", "kernel.tiles.BLOCK_N=16", "kernel.tiles.BLOCK_K=16",
           f"tracking.uri={uri}", "experiment=live", f"hydra.sweep.dir={tmp_path}/multirun"]
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONUNBUFFERED": "1"}
    seen = []   # (wall time the line arrived, the line)
    with subprocess.Popen(cmd, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                          text=True) as proc:
        for line in proc.stdout:
            if line.startswith("[job"):
                seen.append((time.time(), line))
        assert proc.wait(timeout=600) == 0
    assert len(seen) == 5, seen
    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name("live")
    jobs = sorted((r for r in client.search_runs([exp.experiment_id])
                   if r.data.tags.get("swizzlebench.kind") == "job"), key=lambda r: r.info.end_time)
    starts = sorted(r.info.start_time for r in jobs)
    assert seen[0][0] - jobs[0].info.end_time / 1000 < 10, "the first shape's line came over 10 s after its run ended"
    assert seen[0][0] < starts[-1] / 1000, "the first shape's line waited until the last shape had started"
    assert starts[-1] > jobs[0].info.end_time, "every shape's run started before the first one ended"


def _under_a_terminal(cmd: list[str], cwd, env: dict) -> tuple[int, str]:
    """Run ``cmd`` with stdin, stdout and stderr on a new pseudo-terminal (as in a user's
    terminal, but one that says no size); its exit status and everything it wrote there."""
    import pty  # noqa: F401  (POSIX only: the module says so when imported elsewhere)

    master, slave = os.openpty()
    with subprocess.Popen(cmd, cwd=cwd, env=env, stdin=slave, stdout=slave, stderr=slave) as proc:
        os.close(slave)
        out = b""
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:   # EIO: the terminal's last writer has gone
                break
            if not chunk:
                break
            out += chunk
        status = proc.wait(timeout=600)
    os.close(master)
    return status, out.decode(errors="replace")


def test_a_sweep_on_a_terminal_shows_jobs_shapes_failures_and_eta(tmp_path):
    """On a terminal the sweep shows one live line (harness.run.live): jobs done / total,
    shapes done / expected, the failures so far and the time left; the job lines are still
    printed as each shape ends, above it.  seed_xcd is no permutation of the small grids: its
    three shapes FAIL."""
    cmd = [sys.executable, "-m", "harness", "-m", "kernel=igemm", "swizzle=identity,seed_xcd", "shape=tiny",
           "kernel.tiles.BLOCK_M=16", "kernel.tiles.BLOCK_N=16", "kernel.tiles.BLOCK_K=16",
           f"tracking.uri=sqlite:///{tmp_path}/store.db", "experiment=tty", f"hydra.sweep.dir={tmp_path}/multirun"]
    status, out = _under_a_terminal(cmd, tmp_path, {**os.environ, "TRITON_INTERPRET": "1"})
    assert status == 0, out[-3000:]
    states = [s.strip() for s in out.replace("\n", "\r").split("\r") if " shapes [" in s]
    assert states and states[-1].startswith("jobs 2/2 100%") and "| 6/6 shapes [" in states[-1], states[-3:]
    assert states[-1].endswith(", 3 failed]"), states[-1]
    assert any(re.search(r"jobs 1/2 .* 3/6 shapes \[\d\d:\d\d<\d\d:\d\d, 0 failed\]", s) for s in states), states
    lines = [seg for seg in out.replace("\n", "\r").split("\r") if seg.startswith("[job ")]
    assert len(lines) == 6 and all(" FAILED " in ln for ln in lines[3:]), lines
    # the first shape's line came before the display counted it, and before the second job's
    assert out.index("[job 0 | 1/3]") < out.index("1/6 shapes") < out.index("[job 1 | 1/3]")
