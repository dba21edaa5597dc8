"""harness.measure.roofline against hand-computed cases."""
import pytest

from harness.measure.roofline import Roofline, compulsory_bytes, place
from kernels.problem import ConvShape

ROOF = Roofline(peak_tflops=800.0, dram_bytes_per_s=4e12)     # ridge: 200 FLOP/byte


def test_a_big_3x3_conv_is_compute_bound_and_read_against_the_peak():
    shape = ConvShape("big", 128, 256, 58, 58, 256, 3, 3, 1, 0)     # P = Q = 56
    flops = 2 * 128 * 56 * 56 * 256 * 256 * 9
    nbytes = 2 * (128 * 256 * 58 * 58 + 256 * 256 * 9 + 128 * 256 * 56 * 56)
    assert compulsory_bytes(shape) == nbytes
    ms = flops / 400e12 * 1e3                                       # 400 TFLOP/s achieved
    r = place(shape, ms, ROOF)
    assert r.intensity == pytest.approx(flops / nbytes) and r.intensity > ROOF.ridge
    assert r.bound == "compute" and r.pct_of_peak == pytest.approx(50.0)
    assert r.pct_of_roofline == pytest.approx(50.0)
    assert r.text == "compute-bound, at 50 % of peak"


def test_a_1x1_conv_with_few_channels_is_memory_bound_and_read_against_bandwidth():
    shape = ConvShape("mb", 32, 144, 56, 56, 24, 1, 1, 1, 0)
    flops, nbytes = shape.flops, compulsory_bytes(shape)
    assert flops / nbytes < ROOF.ridge
    ms = nbytes / 2e12 * 1e3                                        # moves its bytes at half the bandwidth
    r = place(shape, ms, ROOF)
    assert r.bound == "memory" and r.pct_of_roofline == pytest.approx(50.0)
    assert r.pct_of_peak == pytest.approx(100 * (flops / (ms * 1e-3) / 1e12) / 800.0)
    assert r.text == "memory-bound, at 50 % of its roofline"


def test_a_target_without_measured_peaks_gets_no_roofline():
    assert Roofline.of_target({"name": "h200"}) is None
    assert Roofline.of_target({"peak_tflops": 757, "dram_bytes_per_s": 3.03e12}) == Roofline(757.0, 3.03e12)
