"""The seeds' MI300X figures as a regression case for the simulated L2 (mi300x target).

The seeds give seed 000's direct conv at 88.9 % L2 hit rate in launch order and +4.56 points
with its XCD formula (seed formula 1, ``seed_xcd``).  Those two figures come from two
different runs of AMD Research's IntelliPerf loop (rocprofv3 on an MI300X; docs/simulator.md,
"MI300X: the published record"): 88.9 % is run 1's identity, +4.56 run 2's gain over run 2's
own identity (91.8 % -> 96.3 %).  The same kernel and shape measured 88.9 and 91.8 on two days.

What the simulator says, on two different problems:

* the seed kernel *as published* (channels 0..15 only, 16 weights per tap, 16^4 tiles, its
  w-h-f-n tile order), replayed by ``harness.profilers.sim.published``: 87.93 % and +4.52
  (run 2 measured 91.8 % and +4.5; the level is 4-7 points low in every order, the table says what was tested);
* this project's *correct* direct conv (``kernel=direct``, all 32 channels, its own tiles and
  order) on the seed shape (``shape=seed``: N32 C32 32x32 F64 3x3): 96.26 % and +3.21, pinned
  below.  It is a different kernel from the one measured, so it pins the model and validates
  nothing; the sign agrees (the XCD remap keeps each XCD's tiles together).
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
    # above theirs (this kernel reads all its channels: more reuse per tile)
    assert (delta > 0) == (SEED_XCD_DELTA_PTS > 0)
    assert identity.hit_rate > SEED_IDENTITY_PCT
