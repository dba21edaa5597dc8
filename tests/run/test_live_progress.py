"""Live progress on a CPU: each shape's line is printed when that shape is done, not in one
burst at the end of its Hydra job (issue 55), because the simulator profiles a verified shape at
once (``Profiler.batched`` is False for it); on a terminal, one live line counts jobs, shapes,
failures and the time left (harness.run.live).  One sweep of five layers, run on a
pseudo-terminal, shows both."""
from __future__ import annotations

import os
import re
import threading
import time

from mlflow.tracking import MlflowClient

from tests.cli_fork import run_cli

#: Five small layers (a few programs each under the interpreter).
FIVE = "shape.shapes=[" + ",".join(f"{{name:s{i},N:1,C:16,H:{8 + 2 * i},W:8,F:16,R:3,S:3,stride:1,padding:1}}"
                                   for i in range(5)) + "]"


def _under_a_terminal(args: list[str], cwd, env: dict) -> tuple[int, str, list[tuple[float, int]]]:
    """Run ``python -m harness ARGS`` (a fork of the warm CLI server: tests.cli_fork) with stdin,
    stdout and stderr on a new pseudo-terminal (as in a user's terminal, but one that says no
    size); its exit status, everything it wrote there, and when each part arrived: (wall time,
    length of the output so far)."""
    import pty  # noqa: F401  (POSIX only: the module says so when imported elsewhere)

    master, slave = os.openpty()
    arrivals, out = [], bytearray()

    def read() -> None:
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:   # EIO: the terminal's last writer has gone
                break
            if not chunk:
                break
            out.extend(chunk)
            arrivals.append((time.time(), len(out)))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        status = run_cli(args, cwd, env, timeout=600, tty=os.ttyname(slave)).returncode
    finally:
        os.close(slave)   # the run's own ends are closed: the reader sees EIO once it has read everything
        reader.join(60)
        os.close(master)
    return status, out.decode(errors="replace"), arrivals


def test_a_five_layer_sweep_on_a_terminal_prints_each_shape_as_it_finishes_with_jobs_failures_and_eta(tmp_path):
    """Job 0 (identity) verifies and simulates five layers; job 1 (seed_xcd, no permutation of
    these small grids) FAILS all five.  The first shape's line reaches the terminal within 10 s
    of its run's end and before the last layer starts; the live line shows jobs done / total,
    shapes done / expected, the failures so far and the time left, and the job lines are still
    printed as each shape ends, above it."""
    uri = f"sqlite:///{tmp_path}/store.db"
    args = ["-m", "kernel=igemm", "swizzle=identity,seed_xcd", "shape=tiny", FIVE,
            "kernel.tiles.BLOCK_M=16", "kernel.tiles.BLOCK_N=16", "kernel.tiles.BLOCK_K=16",
            f"tracking.uri={uri}", "experiment=tty", f"hydra.sweep.dir={tmp_path}/multirun"]
    status, out, arrivals = _under_a_terminal(args, tmp_path, {**os.environ, "TRITON_INTERPRET": "1"})
    assert status == 0, out[-3000:]

    # each shape as it finishes: when the first shape's line (all of it, as bytes) arrived
    end_of_first = len(out[:out.index("\n", out.index("[job 0 | 1/5]"))].encode())
    first_seen = next(t for t, length in arrivals if length >= end_of_first)
    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name("tty")
    jobs = sorted((r for r in client.search_runs([exp.experiment_id])
                   if r.data.tags.get("swizzlebench.kind") == "job" and r.data.params.get("swizzle") == "identity"),
                  key=lambda r: r.info.end_time)
    assert len(jobs) == 5, [r.info.run_name for r in jobs]
    starts = sorted(r.info.start_time for r in jobs)
    assert first_seen - jobs[0].info.end_time / 1000 < 10, "the first shape's line came over 10 s after its run ended"
    assert first_seen < starts[-1] / 1000, "the first shape's line waited until the last shape had started"
    assert starts[-1] > jobs[0].info.end_time, "every shape's run started before the first one ended"

    # the live line and the job lines above it
    states = [s.strip() for s in out.replace("\n", "\r").split("\r") if " shapes [" in s]
    assert states and states[-1].startswith("jobs 2/2 100%") and "| 10/10 shapes [" in states[-1], states[-3:]
    assert states[-1].endswith(", 5 failed]"), states[-1]
    assert any(re.search(r"jobs 1/2 .* 5/10 shapes \[\d\d:\d\d<\d\d:\d\d, 0 failed\]", s) for s in states), states
    lines = [seg for seg in out.replace("\n", "\r").split("\r") if seg.startswith("[job ")]
    assert len(lines) == 10 and all(" FAILED " in ln for ln in lines[5:]), lines
    assert not any(" FAILED " in ln for ln in lines[:5]), lines
    # the first shape's line came before the display counted it, and before the second job's
    assert out.index("[job 0 | 1/5]") < out.index("1/10 shapes") < out.index("[job 1 | 1/5]")
