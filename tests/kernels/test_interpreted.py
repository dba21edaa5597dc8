"""kernels/interpreted.py: the interpreter's overflow sanitizer is off only where it decides
nothing, and a launch patches each language module once, with the same outputs."""
import os

import numpy as np
import pytest
import torch
import triton
import triton.language as tl

from kernels import KERNELS  # noqa: F401 (loading the families applies lighten_interpreter)
from kernels.interpreted import lighten_interpreter

pytestmark = pytest.mark.skipif(os.environ.get("TRITON_INTERPRET") != "1", reason="needs the Triton interpreter")


@triton.jit
def _twice(x):
    return x + x


@triton.jit
def _helpers_kernel(out_ptr, a, CALLS: tl.constexpr, BLOCK: tl.constexpr):
    # CALLS calls of a helper that sees triton.language, then one of tl.zeros, which sees
    # triton.language.core (a module the launch itself does not patch)
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    acc = offs * a
    for _ in tl.static_range(CALLS):
        acc = _twice(acc)
    acc = acc + tl.zeros([BLOCK], dtype=tl.int32)
    tl.store(out_ptr + offs, acc)


def _launch(a: int, calls: int = 3, programs: int = 4) -> np.ndarray:
    out = torch.empty(programs * 4, dtype=torch.int32)
    _helpers_kernel[(programs,)](out, a, CALLS=calls, BLOCK=4)
    return out.numpy()


def test_is_applied_once_the_kernels_load():
    from triton.runtime import interpreter

    assert lighten_interpreter()
    assert not interpreter.interpreter_builder.options.sanitize_overflow


def test_the_sanitizer_decides_nothing_without_debug(monkeypatch):
    """The premise of turning it off: with Triton's own options (sanitizer on, debug off), an
    int32 product that overflows runs and wraps, as it does with the sanitizer off.  If a
    Triton makes the sanitizer raise, this fails and the sanitizer must stay on."""
    import dataclasses

    from triton.runtime import interpreter

    big = 2**30 + 7
    want = ((np.arange(16, dtype=np.int64) * big * 8 + 2**31) % 2**32 - 2**31).astype(np.int32)
    lightened = _launch(big)
    options = interpreter.interpreter_builder.options
    monkeypatch.setattr(interpreter.interpreter_builder, "options",
                        dataclasses.replace(options, sanitize_overflow=True, debug=False))
    assert np.array_equal(_launch(big), want) and np.array_equal(lightened, want)
    # with debug on the sanitizer does raise: the check above really ran it
    monkeypatch.setattr(interpreter.interpreter_builder, "options",
                        dataclasses.replace(options, sanitize_overflow=True, debug=True))
    with pytest.raises(Exception, match="int32 overflow detected"):
        _launch(big)


def test_a_launch_patches_each_language_module_once(monkeypatch):
    """Helper calls in every program cost no re-patch: the patches Triton makes in a launch
    do not grow with the number of helper calls or programs, and the outputs are right."""
    from triton.runtime import interpreter

    calls = []
    original = interpreter._patch_builtin
    monkeypatch.setattr(interpreter, "_patch_builtin", lambda *a: calls.append(a[0]) or original(*a))
    few = _launch(1, calls=1, programs=1)
    patched_few = len(calls)
    calls.clear()
    many = _launch(1, calls=6, programs=5)
    assert len(calls) == patched_few > 0
    assert np.array_equal(few, np.arange(4) * 2) and np.array_equal(many, np.arange(20) * 64)


def test_a_failed_launch_leaves_no_launch_under_way():
    import kernels.interpreted as interpreted

    with pytest.raises(Exception):
        _helpers_kernel[(1,)](torch.empty(2, dtype=torch.int32), 1, CALLS=1, BLOCK=3)   # BLOCK not a power of 2
    assert interpreted._patched_in_launch is None
    assert np.array_equal(_launch(1, calls=1, programs=1), np.arange(4) * 2)
