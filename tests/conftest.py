"""Tests run on the CPU under the Triton interpreter; GPU tests (``tests/test_gpu.py``,
marked ``gpu``) run compiled kernels and are skipped where there is no GPU.  On a GPU
node run ``python -m pytest -o addopts="" tests/test_gpu.py`` (no xdist there): the other tests
assume the interpreter."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.hardware.device import GPU, select_execution_mode

# Must run before anything imports triton: turns the interpreter on when there is no GPU.
MODE = select_execution_mode()

#: Modules whose tests go to the workers one by one: each test is long and independent, and
#: the module's fixture (if any: a compile client) is cheap beside them.  Being one-test units,
#: they are handed out last (xdist orders units by size), so they even out the workers' ends.
PER_TEST = ("tests/compile/test_build.py", "tests/kernels/test_igemm_fast.py", "tests/run/test_steps.py")


def pytest_collection_modifyitems(config, items):
    if MODE == GPU:
        return
    skip = pytest.mark.skip(reason="needs a GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """Under ``-n``: each test module is one work unit, sent whole to one worker, so that a
    module's fixture (most are real CLI sweeps) runs once, not once in every worker that got
    one of its tests; the modules of :data:`PER_TEST` are spread test by test.  The fault
    suite's seeded store is a session fixture: each worker that runs fault cases seeds its own
    (one small sweep), and its end-of-session check covers the stores that worker used."""
    from xdist.scheduler import LoadScopeScheduling

    # numba's cache of the simulator filled while the workers collect (tests/numba_warmup.py)
    warmup = subprocess.Popen([sys.executable, "-m", "tests.numba_warmup"], cwd=Path(__file__).parents[1],
                              env={**os.environ, "TRITON_INTERPRET": "1"}, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, text=True)

    class ModuleScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            path = nodeid.split("::", 1)[0]
            return nodeid if path in PER_TEST else path

        def schedule(self) -> None:
            if warmup.returncode is None:   # the first call, once the workers have collected
                _, err = warmup.communicate(timeout=300)
                if warmup.returncode:   # the tests then compile what they need, as without it
                    print(f"tests.numba_warmup failed (exit {warmup.returncode}):\n{err[-2000:]}", file=sys.stderr)
            super().schedule()

    return ModuleScheduling(config, log)
