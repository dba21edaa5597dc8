"""On a GPU node, collecting the suite leaves the kernels compiled: no test module (nor a
``benchmarks/`` script a test imports) turns the Triton interpreter on, so ``python -m pytest
-o addopts="" -m gpu tests/`` runs the GPU tests on the GPU.  The node is faked here
(tests/fixtures/plugins/fake_gpu.py: torch reports a CUDA device); only collection runs."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_collecting_the_gpu_tests_on_a_gpu_node_keeps_the_interpreter_off():
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "tests" / "fixtures" / "plugins"), env.get("PYTHONPATH", "")])
    proc = subprocess.run([sys.executable, "-m", "pytest", "-o", "addopts=", "-p", "fake_gpu", "-p", "no:cacheprovider",
                           "-m", "gpu", "--collect-only", "-q", "tests/"], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    report = [ln for ln in proc.stdout.splitlines() if ln.startswith("fake-gpu:")]
    assert report == ["fake-gpu: TRITON_INTERPRET=None direct=JITFunction"], proc.stdout[-3000:]
