"""How the tests of ``benchmarks/`` reach its scripts: load one as a module, or run it as a user does."""
from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

from tests.cli_fork import run_script

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures"
RESULTS = ROOT / "benchmarks" / "results"


def load(relpath: str) -> ModuleType:
    """The script at ``benchmarks/<relpath>`` imported as a module named after its file (registered in
    ``sys.modules`` first: a script's dataclasses look their module up)."""
    path = ROOT / "benchmarks" / relpath
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    module = sys.modules.setdefault(path.stem, module)
    spec.loader.exec_module(module)
    return module


def run(relpath: str, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """``python benchmarks/<relpath> ARGS`` from the repository root's interpreter, output captured
    (a fork of the warm process of :mod:`tests.cli_fork`)."""
    return run_script(ROOT / "benchmarks" / relpath, list(args), timeout=timeout)
