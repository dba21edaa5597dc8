"""numba's on-disk cache of the simulated L2 filled once, before the test workers start.

The simulator's jitted functions (``harness/profilers/sim``, ``@jit``: numba with
``cache=True``) are compiled on first call and saved beside their source, in
``__pycache__/numba-<hash>`` (:func:`harness.profilers.sim.lru.numba_cache_dir`); a process
that finds them there loads them in a fraction of a second instead of compiling for about 10 s
of CPU.  On a fresh clone that cache is empty, so every
process that simulates before one of them has saved it compiles its own copy: both test
workers and the CLI runs they start at the same moment.  ``tests/conftest.py`` runs this
module in a process of its own while the workers collect, and holds back the first test
until it has ended, so that the suite compiles each function once.

It simulates small jobs of the kinds the tests run: each target of ``conf/target`` (one
L2 per die with a memory-side cache, split L2 partitions, ...), plain and persistent and
split-K launches, with and without spills; a signature none of them reaches is compiled by
the first test that needs it, as before.

    python -m tests.numba_warmup
"""
from __future__ import annotations

from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
#: Launches beside each kernel's CPU tiles (``interpret_tiles``): igemm_fast persistent and split-K.
VARIANTS = (("igemm_fast", {"PERSISTENT": 1}), ("igemm_fast", {"SPLIT_K": 2}))


def main() -> None:
    from harness.profilers.sim.job import Remap, simulate_job
    from kernels.problem import ConvShape
    from swizzles import SWIZZLES

    shape = ConvShape("warmup", N=1, C=8, H=6, W=6, F=16, R=3, S=3, stride=1, padding=1)
    tiles = {path.stem: yaml.safe_load(path.read_text())["interpret_tiles"]
             for path in sorted((ROOT / "conf" / "kernel").glob("*.yaml"))}
    jobs = [(kernel, t) for kernel, t in tiles.items()] + [(k, {**tiles[k], **extra}) for k, extra in VARIANTS]
    for path in sorted((ROOT / "conf" / "target").glob("*.yaml")):
        target = yaml.safe_load(path.read_text())
        if not target.get("l2_bytes"):   # "auto": the device's own, none here
            continue
        for kernel, job_tiles in jobs:
            for spill_bytes in (0, 256):
                try:
                    simulate_job(kernel, shape, job_tiles, Remap(SWIZZLES["grouped"], target["num_xcds"], 8),
                                 target, occupancy=1, spill_bytes=spill_bytes)
                except NotImplementedError:   # a kernel with no address model (its jobs are not simulated)
                    pass


if __name__ == "__main__":
    main()
