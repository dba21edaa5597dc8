"""Tests run on the CPU under the Triton interpreter; GPU tests are marked ``gpu``."""
import os

# Must be set before anything imports triton (see harness.device).
os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest  # noqa: E402


def pytest_collection_modifyitems(config, items):
    import torch

    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
