"""Generated swizzle modules: write Triton source to a content-addressed file, import it.

Triton's JIT reads a function's source with ``inspect.getsource``, so a remap generated at
run time (a checked user formula, :mod:`swizzles.custom`; a parametric family instance,
:mod:`swizzles.families`) must live in a real file.  :func:`load_generated` writes the
source to ``<cache>/<sha256 of source>.py`` (atomically) and imports its ``remap`` from the
text it was given, never from what the file holds by then; the same source always gives
the same function object.  Only this package's generators call it, with source they built
from checked pieces.  Keep the cache directory writable only by you.
"""
from __future__ import annotations

import hashlib
import importlib.abc
import importlib.util
import linecache
import os
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from triton.runtime.interpreter import InterpretedFunction
    from triton.runtime.jit import JITFunction

_LOADED: dict[Path, JITFunction | InterpretedFunction] = {}


def load_generated(source: str) -> JITFunction | InterpretedFunction:
    """The ``remap`` defined by the module ``source``, imported from its cache file.
    Raises ``OSError`` when the cache directory (:func:`formula_cache_dir`) cannot be written."""
    path = _write_cached(source)
    remap = _LOADED.get(path)
    if remap is None:
        remap = _import_remap(path, source)
        _LOADED[path] = remap
    return remap


def formula_cache_dir() -> Path:
    """Where generated modules live: ``$SWIZZLEBENCH_CACHE/formulas``, default
    ``${XDG_CACHE_HOME:-~/.cache}/swizzlebench/formulas``."""
    root = os.environ.get("SWIZZLEBENCH_CACHE")
    if root:
        return Path(root).expanduser() / "formulas"
    cache_home = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(cache_home).expanduser() / "swizzlebench" / "formulas"


def _write_cached(source: str) -> Path:
    """Make ``<cache>/<sha256 of source>.py`` hold exactly ``source`` (written atomically when
    missing or different) and return its path."""
    directory = formula_cache_dir()
    path = directory / f"{hashlib.sha256(source.encode('utf-8')).hexdigest()}.py"
    try:
        if _read_or_none(path) != source:
            directory.mkdir(parents=True, exist_ok=True)
            handle, temporary = tempfile.mkstemp(dir=directory, prefix=".tmp-", suffix=".py")
            try:
                with os.fdopen(handle, "w", encoding="utf-8") as file:
                    file.write(source)
                os.replace(temporary, path)
            except BaseException:
                Path(temporary).unlink(missing_ok=True)
                raise
            linecache.checkcache(str(path))
        if _read_or_none(path) != source:
            raise OSError(f"{path} does not hold the generated source after writing it")
    except OSError as exc:
        raise OSError(f"cannot write the generated swizzle cache {directory}: {exc}; "
                      "set SWIZZLEBENCH_CACHE to a writable directory") from exc
    return path


def _read_or_none(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except (FileNotFoundError, UnicodeDecodeError):
        return None


class _GeneratedSourceLoader(importlib.abc.SourceLoader):
    """Imports a generated module from the text this module generated (not from whatever the
    file holds by then) and writes no bytecode.  The file exists for ``inspect.getsource``."""

    def __init__(self, path: Path, source: str) -> None:
        self.path = path
        self.source = source

    def get_filename(self, fullname: str) -> str:
        return str(self.path)

    def get_data(self, path: str) -> bytes:
        return self.source.encode("utf-8")


def _import_remap(path: Path, source: str) -> JITFunction | InterpretedFunction:
    name = f"swizzlebench_generated_{path.stem}"
    loader = _GeneratedSourceLoader(path, source)
    spec = importlib.util.spec_from_file_location(name, path, loader=loader)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module.remap
