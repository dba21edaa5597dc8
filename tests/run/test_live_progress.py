"""Live progress on a CPU: each shape's line is printed when that shape is done, not in one
burst at the end of its Hydra job (issue 55), because the simulator profiles a verified shape at
once (``Profiler.batched`` is False for it)."""
from __future__ import annotations

import os
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
