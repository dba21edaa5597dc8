"""The seeds' MI300X figures as a regression case for the simulated L2 (mi300x target).

The loop that produced the seeds measured, with rocprofv3 on an MI300X, seed 000's direct
conv at 88.9 % L2 hit rate in launch order and +4.56 points with its XCD formula (seed
formula 1, ``seed_xcd``).  The simulator, on this project's *correct* direct conv
(``kernel=direct``) and the seed shape (``shape=seed``: N32 C32 32x32 F64 3x3), predicts
96.3 % and +3.2 points.  Why they differ, as far as the seeds let us know:

* the seed kernel read only its first ``BLOCK_SIZE_C`` input channels and indexed its
  weights wrongly (seeds/README.md), so its traffic was not this kernel's;
* ``TCC_HIT / (TCC_HIT + TCC_MISS)`` counts every request, the output's writes included,
  and the direct family has no store model yet (its simulation is loads only): writes,
  which mostly miss, would pull the predicted rate down;
* the seed's tile sizes and its MI300X's partition mode are not recorded.

The sign and order of size agree (+3.2 vs +4.56: the XCD remap keeps each XCD's tiles
together).  The test pins the model's figures so that a change of the model shows here,
with this explanation to update.
"""
from omegaconf import OmegaConf
import pytest
import yaml

from harness.profilers.sim.job import Remap, simulate_job
from kernels import get_kernel
from kernels.problem import ConvShape
from swizzles import resolve_swizzle
from tests.compile.test_build import CONF

SEED_IDENTITY_PCT = 88.9     # measured by the seeds' loop (rocprofv3, MI300X), seed 000 kernel
SEED_XCD_DELTA_PTS = 4.56


def test_seed_direct_conv_on_the_simulated_mi300x():
    target = OmegaConf.to_container(OmegaConf.load(CONF / "target" / "mi300x.yaml"))
    kernel = get_kernel("direct")
    tiles = yaml.safe_load((CONF / "kernel" / "direct.yaml").read_text())["tiles"]
    shape = ConvShape("seed", 32, 32, 32, 32, 64, 3, 3, 1, 0)
    identity = simulate_job(kernel, shape, tiles, Remap(resolve_swizzle("identity", None), 8, 8), target)
    seed_xcd = simulate_job(kernel, shape, tiles, Remap(resolve_swizzle("seed_xcd", None), 8, 8), target)
    delta = seed_xcd.hit_rate - identity.hit_rate
    assert identity.hit_rate == pytest.approx(96.26, abs=0.05)
    assert delta == pytest.approx(3.21, abs=0.05)
    # against the seeds' own figures (module docstring): the delta has their sign; the rate is
    # above theirs, as a loads-only model of a kernel that reads all its channels would be
    assert (delta > 0) == (SEED_XCD_DELTA_PTS > 0)
    assert identity.hit_rate > SEED_IDENTITY_PCT
