"""A profiler that is not installed: the job fails fast, before any run, saying how to
install it or what to choose instead; the sweep's run ends FAILED with that advice."""
from __future__ import annotations

import glob
import os
import sys
import time
from pathlib import Path

import pytest

from tests.faults import FAST, cli_env, harness, reason, runs_of

#: overrides -> what the advice must say
CASES = {
    "profiler=ncu": ["profiler=ncu: Nsight Compute's `ncu` was not found", "Install Nsight Compute",
                     "profiler.executable=/path/to/ncu", "profiler=none"],
    "profiler=rocprofv3": ["profiler=rocprofv3: `rocprofv3` was not found on PATH", "apt install rocprofiler-sdk",
                           "profiler=none"],
    "profiler=ncu profiler.executable=/nonexistent/ncu": ["`ncu` was not found", "profiler=none"],
}


@pytest.mark.skipif(bool(glob.glob("/opt/nvidia/nsight-compute/*/ncu")) or os.path.exists("/usr/local/cuda/bin/ncu"),
                    reason="Nsight Compute is installed outside PATH here")
@pytest.mark.parametrize("overrides", list(CASES))
def test_missing_profiler_fails_fast_with_install_advice(seeded_store, overrides):
    experiment = f"missing-profiler-{list(CASES).index(overrides)}"
    env = cli_env(PATH=str(Path(sys.executable).parent))       # the venv only: no ncu, no rocprofv3
    start = time.monotonic()
    proc = harness(["-m", "shape=tiny", *[o for o in FAST if not o.startswith("profiler")], *overrides.split(),
                    f"tracking.uri={seeded_store.uri}", f"experiment={experiment}",
                    f"hydra.sweep.dir={seeded_store.root}/{experiment}"], cwd=seeded_store.root, env=env)
    assert proc.returncode != 0
    assert time.monotonic() - start < 120
    for words in CASES[overrides]:
        assert words in proc.stderr, proc.stderr[-2000:]
    assert runs_of(seeded_store.uri, experiment) == []           # failed before any job run
    sweep, = runs_of(seeded_store.uri, experiment, kind="sweep")
    assert sweep.info.status == "FAILED" and CASES[overrides][0] in reason(sweep)
