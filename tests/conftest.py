"""Tests run on the CPU under the Triton interpreter; GPU tests (``tests/test_gpu.py``,
marked ``gpu``) run compiled kernels and are skipped where there is no GPU.  On a GPU
node run ``python -m pytest -o addopts="" tests/test_gpu.py`` (no xdist there): the other tests
assume the interpreter."""
import pytest

from harness.hardware.device import GPU, select_execution_mode

# Must run before anything imports triton: turns the interpreter on when there is no GPU.
MODE = select_execution_mode()

#: The fault suite's cases share one seeded store (a session fixture): one work unit.
FAULT_SUITE = "tests/faults/"


def pytest_collection_modifyitems(config, items):
    if MODE == GPU:
        return
    skip = pytest.mark.skip(reason="needs a GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """Under ``-n``: each test module is one work unit, sent whole to one worker, and the fault
    suite is one unit.  A module's fixture (most are real CLI sweeps) then runs once, not once
    in every worker that got one of its tests, and the fault suite seeds its store once."""
    from xdist.scheduler import LoadScopeScheduling

    class ModuleScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            path = nodeid.split("::", 1)[0]
            return FAULT_SUITE if path.startswith(FAULT_SUITE) else path

    return ModuleScheduling(config, log)
