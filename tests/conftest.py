"""Tests run on the CPU under the Triton interpreter; GPU tests (``tests/test_gpu.py``,
marked ``gpu``) run compiled kernels and are skipped where there is no GPU.  On a GPU
node run ``python -m pytest -o addopts="" tests/test_gpu.py`` (no xdist there): the other tests
assume the interpreter."""
import pytest

from harness.hardware.device import GPU, select_execution_mode

# Must run before anything imports triton: turns the interpreter on when there is no GPU.
MODE = select_execution_mode()


def pytest_collection_modifyitems(config, items):
    if MODE == GPU:
        return
    skip = pytest.mark.skip(reason="needs a GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
