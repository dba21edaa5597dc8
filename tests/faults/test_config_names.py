"""Unknown config names: Hydra stops before any job with a message naming the missing
option and listing the valid ones; nothing is logged."""
from __future__ import annotations

import importlib.resources

import pytest

from tests.faults import FAST, harness, runs_of

GROUPS = ["kernel", "swizzle", "shape", "target", "profiler"]


def _options(group: str) -> list[str]:
    folder = importlib.resources.files("swizzlebench_conf") / group
    return sorted(p.name.removesuffix(".yaml") for p in folder.iterdir() if p.name.endswith(".yaml"))


@pytest.mark.parametrize("group", GROUPS)
def test_unknown_name_lists_the_valid_options(seeded_store, group):
    experiment = f"unknown-{group}"
    proc = harness(["-m", f"{group}=nope", *[o for o in FAST if not o.startswith(group)],
                    f"tracking.uri={seeded_store.uri}", f"experiment={experiment}",
                    f"hydra.sweep.dir={seeded_store.root}/{experiment}"], cwd=seeded_store.root, timeout=120)
    assert proc.returncode != 0
    assert f"Could not find '{group}/nope'" in proc.stderr
    listing = proc.stderr.split(f"Available options in '{group}':", 1)[1].split("Config search path")[0]
    assert listing.split() == _options(group)
    assert runs_of(seeded_store.uri, experiment, kind=None) == []
