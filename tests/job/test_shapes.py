"""Shape validation messages and the CPU down-scaling rule."""
import re

import pytest

from harness.job.shapes import INTERPRETER_LIMITS, downscale, expand_preset
from kernels.problem import ConvShape


def test_output_size_and_flops():
    s = ConvShape("x", N=32, C=3, H=224, W=224, F=64, R=7, S=7, stride=2, padding=3)
    assert (s.P, s.Q) == (112, 112)
    assert s.flops == 2 * 32 * 112 * 112 * 64 * 3 * 7 * 7


@pytest.mark.parametrize("kwargs, message", [
    (dict(N=0), "N=0 is invalid; N must be a positive integer"),
    (dict(C=-1), "C=-1 is invalid"),
    (dict(stride=0), "stride=0 is invalid"),
    (dict(padding=-1), "padding=-1 is invalid; padding must be an integer >= 0"),
    (dict(R=9), "filter larger than padded input on H/R: 9 > 5 + 2*1"),
    (dict(dtype="float32"), "dtype='float32' is invalid; valid dtypes: float16, bfloat16"),
])
def test_invalid_shapes_say_what_and_why(kwargs, message):
    base = dict(N=1, C=2, H=5, W=5, F=3, R=3, S=3, stride=1, padding=1)
    with pytest.raises(ValueError, match=re.escape(message)):
        ConvShape("bad", **{**base, **kwargs})


def test_invalid_entry_does_not_stop_the_preset():
    entries = expand_preset({"name": "p", "shapes": [
        {"name": "ok", "N": 1, "C": 1, "H": 3, "W": 3, "F": 1, "R": 3, "S": 3},
        {"name": "bad", "N": 1, "C": 1, "H": 3, "W": 3, "F": 1, "R": 3, "S": 3, "stride": 0},
        {"name": "short", "N": 1}]})
    assert entries[0].shape is not None
    assert entries[1].shape is None and "stride=0" in entries[1].error
    assert "missing ['C', 'H', 'W', 'F', 'R', 'S']" in entries[2].error


@pytest.mark.parametrize("shape", [
    ConvShape("stem", N=32, C=3, H=224, W=224, F=64, R=7, S=7, stride=2, padding=3),
    ConvShape("s2", N=32, C=128, H=56, W=56, F=128, R=3, S=3, stride=2, padding=1),
    ConvShape("1x1", N=32, C=2048, H=7, W=7, F=512, R=1, S=1),
    ConvShape("ds", N=32, C=256, H=56, W=56, F=512, R=1, S=1, stride=2),
])
def test_downscale_keeps_indexing_and_caps_sizes(shape):
    small = downscale(shape)
    assert (small.R, small.S, small.stride, small.padding, small.dtype) == (
        shape.R, shape.S, shape.stride, shape.padding, shape.dtype)
    assert small.N <= INTERPRETER_LIMITS["N"] and small.C <= INTERPRETER_LIMITS["C"]
    assert small.F <= INTERPRETER_LIMITS["F"]
    assert small.P == min(shape.P, 6) and small.Q == min(shape.Q, 6)
