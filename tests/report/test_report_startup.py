"""``python -m harness.report`` starts without importing torch or the kernel families: it reads
a store and renders, and torch's import alone costs a user about 1.5 s of CPU per call."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_report_command_does_not_import_torch_or_the_kernels():
    probe = ("import sys, harness.report.cli\n"
             "print(sorted(m for m in ('torch', 'kernels.base') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "[]", done.stdout
