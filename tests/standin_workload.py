"""What the stand-in profilers in ``tests/standins/`` see and report, for the tests that
drive them: a fake worker that logs two launches, and the documented counter formulas
(the stand-ins' docstrings state the same ones)."""
from __future__ import annotations

import hashlib
import os
import subprocess
import sys

JOB = "conv2d/resnet50_l3/grouped_xcd"


def expected_counters(grid: list[int], job: str) -> dict[str, float]:
    """The counters a stand-in reports for one launch of ``grid`` programs in ``job``."""
    programs = grid[0] * grid[1] * grid[2]
    salt = int(hashlib.sha256(job.encode()).hexdigest()[:8], 16)
    hits, misses = 100 * programs + salt % 1000, 10 * programs + salt % 97
    # The hit rate the harness takes from the counts (ncu: its all-traffic lookups, which the stand-in
    # sets to the read counts; rocprofv3: TCC_HIT / TCC_MISS), not ncu's rounded percentage.
    return {"l2_hits": hits, "l2_misses": misses, "l2_hit_rate": 100 * hits / (hits + misses),
            "duration_ns": 1000 + 3 * programs + salt % 500, "dram_read_bytes": 32 * misses}


def fake_worker(*launches: tuple[str, list[int], list[int]]) -> list[str]:
    """A worker command that logs ``launches`` (kernel name, grid, block) to the dispatch
    log of ``JOB`` and exits with ``$FAKE_WORKER_EXIT`` (default 0)."""
    lines = "\n".join(
        f"    log.write(json.dumps({{'kernel_name': {name!r}, 'grid': {grid!r}, 'block': {block!r}, "
        f"'job': {JOB!r}}}) + '\\n')" for name, grid, block in launches)
    return [sys.executable, "-c", f"""
import json, os, sys
print("worker: running {JOB}, {len(launches)} launches")
with open(os.environ["SWIZZLEBENCH_DISPATCH_LOG"], "a") as log:
{lines}
sys.exit(int(os.environ.get("FAKE_WORKER_EXIT", "0")))
"""]


def run(cmd: list[str], **env: str) -> subprocess.CompletedProcess:
    """Run ``cmd`` with ``env`` added to the environment."""
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60, env={**os.environ, **env})
