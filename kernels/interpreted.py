"""Two costs of Triton's CPU interpreter (``TRITON_INTERPRET=1``) that check nothing, left out.

Under the interpreter every ``+``, ``-`` and ``*`` of 32-bit integers also computes the result
in 64 bits and compares it with the int32 range, the *overflow sanitizer*; its finding goes to
``device_assert``, which does nothing unless the interpreter's ``debug`` option is on, and
Triton 3.9's interpreter never turns it on.  And every call of a ``@triton.jit`` helper from a
kernel (``mma``, ``output_pixels``, a swizzle's ``remap``, ``tl.zeros``...) re-patches the
``triton.language`` modules the launch has already patched, walking each module's members
(``inspect.getmembers``, about a millisecond per call).  Together they were two thirds of an
interpreted igemm_fast launch (7.1 s -> 2.4 s for six variants' launches, 2026-11-29).

:func:`lighten_interpreter` turns the sanitizer off while ``debug`` is off (it then decides
nothing), and skips a helper's re-patch when every language module it sees was patched
earlier in the same launch; a helper that sees another module (``tl.core`` from
``triton.language.standard``) still patches it, as before.  Outputs, and every error the
interpreter raises, are unchanged: ``tests/kernels/test_interpreted.py`` checks both premises
against the Triton installed.  Applied once per process, when the kernel families load
(:mod:`kernels`) or a remap table is first computed (:mod:`swizzles.permutation`); a no-op on
a GPU (no interpreter) or a Triton whose interpreter lacks these hooks.
"""
from __future__ import annotations

import dataclasses
import os

#: ids of the language modules patched in the launch under way; None between launches.
_patched_in_launch: set[int] | None = None
_applied = False


def lighten_interpreter() -> bool:
    """Apply both changes to this process's Triton interpreter (once); True if applied."""
    global _applied
    if _applied:
        return True
    if os.environ.get("TRITON_INTERPRET") != "1":
        return False
    from triton.runtime import interpreter

    hooks = ("interpreter_builder", "_patch_lang", "_LangPatchScope", "GridExecutor", "tl")
    if not all(hasattr(interpreter, name) for name in hooks):
        return False
    options = interpreter.interpreter_builder.options
    if not options.debug and getattr(options, "sanitize_overflow", False):
        interpreter.interpreter_builder.options = dataclasses.replace(options, sanitize_overflow=False)
    _patch_once_per_launch(interpreter)
    _applied = True
    return True


def _language_modules(fn, interpreter) -> set[int]:
    """ids of the language modules (``triton.language``, its ``core``) that ``fn`` sees:
    those Triton's ``_patch_lang`` patches for it."""
    tl = interpreter.tl
    return {id(value) for value in fn.__globals__.values() if value is tl or value is tl.core}


def _patch_once_per_launch(interpreter) -> None:
    original_patch, original_launch = interpreter._patch_lang, interpreter.GridExecutor.__call__

    def patch_lang(fn):
        langs = _language_modules(fn, interpreter)
        if langs and _patched_in_launch is not None and langs <= _patched_in_launch:
            return interpreter._LangPatchScope()     # already patched in this launch: nothing to restore
        scope = original_patch(fn)
        if _patched_in_launch is not None:
            _patched_in_launch.update(langs)
        return scope

    def launch(self, *args, **kwargs):
        global _patched_in_launch
        _patched_in_launch = set()
        try:
            return original_launch(self, *args, **kwargs)
        finally:
            _patched_in_launch = None

    interpreter._patch_lang = patch_lang
    interpreter.GridExecutor.__call__ = launch
