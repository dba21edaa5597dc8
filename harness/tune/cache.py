"""Tune mode's cache: one plain JSON file per tuned problem, keyed on what the choice
depends on (:class:`CacheKey`: the kernel, the shape, the device name, the Triton version, a
hash of the kernel's source, the fixed swizzle and the candidate list), so that a new GPU,
compiler or kernel re-tunes and nothing else does.

Nothing in a key or a file names the machine (no path, no host name: :func:`portable`), and
the file names are the keys' digests, so a directory of entries can be committed to a
repository and shared by a team: ``tune.cache_dir=tuning/h100`` (a relative path is taken from
the directory the sweep is launched from, :func:`resolve_cache_dir`).
"""
from __future__ import annotations

import ast
import hashlib
import inspect
import json
import os
import re
import socket
import sys
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Sequence

from kernels.tuning import Config, DeviceTraits
from kernels.problem import ConvShape
from harness.cache_home import cache_root



def kernel_source_hash(kernel) -> str:
    """SHA-256 (16 hex digits) of the source of the kernel's module and of every module of
    the ``kernels`` package its source imports from (read from its import statements, not
    from its namespace at call time: Triton's interpreter adds its own names to a kernel's
    module when it launches it): any edit to what is compiled re-tunes."""
    module = sys.modules[type(kernel).__module__]
    source = inspect.getsource(module)
    names = {module.__name__}
    for node in ast.walk(ast.parse(source)):
        imported = ([node.module] if isinstance(node, ast.ImportFrom) and node.module and not node.level
                    else [alias.name for alias in node.names] if isinstance(node, ast.Import) else [])
        names.update(name for name in imported if name.startswith("kernels.") and name in sys.modules)
    digest = hashlib.sha256()
    for name in sorted(names):
        digest.update(name.encode())
        digest.update(inspect.getsource(sys.modules[name]).encode())
    return digest.hexdigest()[:16]


@dataclass(frozen=True)
class CacheKey:
    """What a tuned choice depends on.  The candidate space is part of the key too: a
    choice made among other candidates is not reused."""

    kernel: str
    shape: tuple[tuple[str, object], ...]   # every ConvShape field except its name, dtype included
    device: str
    triton_version: str
    kernel_source: str
    swizzle: str                            # the fixed swizzle the trials ran with
    space: str                              # hash of the candidate list

    @classmethod
    def make(cls, kernel: str, shape: ConvShape, device: str, triton_version: str, kernel_source: str,
             swizzle: str, space: Sequence[Config]) -> "CacheKey":
        fields = tuple((k, v) for k, v in sorted(asdict(shape).items()) if k != "name")
        space_hash = hashlib.sha256(json.dumps([c.as_dict() for c in space], sort_keys=True).encode()).hexdigest()[:16]
        return cls(kernel, fields, device, triton_version, kernel_source, swizzle, space_hash)

    @property
    def digest(self) -> str:
        return hashlib.sha256(json.dumps(asdict(self), sort_keys=True, default=list).encode()).hexdigest()


def default_cache_dir() -> Path:
    """``tuning`` under :func:`harness.cache_home.cache_root`."""
    return cache_root() / "tuning"


def resolve_cache_dir(directory: str | os.PathLike | None, base: str | os.PathLike | None = None) -> str | None:
    """``tune.cache_dir`` as a path the jobs can use: ``~`` expanded, and a relative path (a
    directory committed to the repository, e.g. ``tuning/h100``) taken from ``base``, by default
    the directory the sweep was launched from (Hydra's ``hydra.runtime.cwd``), else the cwd.
    None stays None (:func:`default_cache_dir`)."""
    if directory is None:
        return None
    path = Path(str(directory)).expanduser()
    if path.is_absolute():
        return str(path)
    if base is None:
        from hydra.core.hydra_config import HydraConfig

        base = HydraConfig.get().runtime.cwd if HydraConfig.initialized() else os.getcwd()
    return str(Path(base) / path)


def portable(value):
    """``value`` (JSON data) with this machine's particulars taken out of its strings: the
    home directory (``~``), the checkout (``<repo>``), the temp directory (``<tmp>``), the
    working directory (``<cwd>``) and the host name (``<host>``), so that a cache entry (a
    failed trial's compiler message names files) can be committed and shared."""
    if isinstance(value, dict):
        return {k: portable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [portable(v) for v in value]
    if not isinstance(value, str):
        return value
    places = {str(Path(__file__).resolve().parents[2]): "<repo>", tempfile.gettempdir(): "<tmp>",
              os.getcwd(): "<cwd>", os.path.expanduser("~"): "~"}
    for path in sorted((p for p in places if len(p) > 1), key=len, reverse=True):
        value = value.replace(path, places[path])
    host = socket.gethostname()
    return re.sub(rf"\b{re.escape(host)}\b", "<host>", value) if len(host) > 1 else value


class TuneCache:
    """One JSON file per key, named by the key's digest; the key is stored inside and checked.
    Plain, portable JSON (:func:`portable`): a directory of entries can be committed to a
    repository and shared by a team (``tune.cache_dir=tuning/h100``); nothing in a key or a
    file names the machine or a path."""

    def __init__(self, directory: str | os.PathLike | None = None):
        self.directory = Path(directory) if directory is not None else default_cache_dir()

    def _path(self, key: CacheKey) -> Path:
        return self.directory / f"{key.digest}.json"

    def get(self, key: CacheKey) -> dict | None:
        path = self._path(key)
        try:
            entry = json.loads(path.read_text())
        except (OSError, ValueError):
            return None
        return entry if entry.get("key") == json.loads(json.dumps(asdict(key), default=list)) else None

    def put(self, key: CacheKey, entry: dict) -> Path:
        self.directory.mkdir(parents=True, exist_ok=True)
        path = self._path(key)
        tmp = path.with_suffix(f".tmp{os.getpid()}")
        tmp.write_text(json.dumps({**portable(entry), "key": asdict(key)}, indent=1, default=list) + "\n")
        os.replace(tmp, path)   # atomic: concurrent tuners never see half a file
        return path


def cache_key(kernel, shape: ConvShape, traits: DeviceTraits, swizzle_name: str, configs: Sequence[Config]) -> CacheKey:
    """The key of ``kernel`` tuned over ``configs`` on ``shape`` on this device and compiler."""
    import triton

    return CacheKey.make(kernel.name, shape, traits.name, triton.__version__, kernel_source_hash(kernel),
                         swizzle_name, configs)
