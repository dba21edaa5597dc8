"""A set-associative LRU cache, the building block of the simulated L2 (:mod:`harness.profilers.sim`).

The cache holds ``size_bytes / line_bytes`` lines in ``num_sets`` sets of ``ways``
lines each.  Line id ``L`` (a byte address divided by the line size) lives in set
``L % num_sets``: plain modulo indexing, no address hashing.  On a miss the least
recently used line of the set is evicted (an empty way is used first).

State is one flat array of tags, so that one array can hold many caches of the same
geometry side by side (one per L2 domain) and the hot loop can be compiled: the
ways of set ``set`` of cache ``c`` are ``tags[(c * num_sets + set) * ways :][:ways]``,
kept in recency order, most recently used first, -1 for an empty way.  A hit moves
the line to the front; a miss shifts the set down one way (dropping the least
recently used line) and puts the new line in front.  Without timestamps a set of 16
int32 tags is one 64 B host cache line.  Tags are int32 when every line id fits, int64
otherwise.

The hot functions are compiled with numba when it is installed (it is a dependency of the
project, :func:`jit`); without numba the very same Python source runs interpreted, with
identical results.
"""
from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np


def numba_cache_dir(package: Path = Path(__file__).parent) -> Path:
    """Where numba caches the compiled functions of ``package`` (this simulator):
    ``__pycache__/numba-<hash>`` beside it, the hash of all its modules' sources.  Numba checks
    a cached function against its own file only, so a cached caller would go on running the
    old code of a function it calls from another module (numba issue 1833), after an edit or
    a ``git pull`` into an editable install; in a folder named by every source, a change to
    any of them compiles afresh."""
    digest = hashlib.sha256()
    for path in sorted(package.glob("*.py")):
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return package / "__pycache__" / f"numba-{digest.hexdigest()[:16]}"


try:
    import numba
    from numba import njit as _njit

    if not os.environ.get("NUMBA_CACHE_DIR"):      # one the user chose is theirs to manage
        numba.config.CACHE_DIR = str(numba_cache_dir())
    HAVE_NUMBA = True
except ImportError:  # pragma: no cover - exercised only where numba is missing
    _njit = None
    HAVE_NUMBA = False

#: Which replay implementation runs: "numba" (compiled) or "python" (interpreted).
ENGINE = "numba" if HAVE_NUMBA else "python"


def jit(fn):
    """Compile ``fn`` with numba (nopython, cached on disk) if numba is installed;
    otherwise return it unchanged."""
    if _njit is None:
        return fn
    return _njit(cache=True, nogil=True)(fn)


@dataclass(frozen=True)
class CacheGeometry:
    """Size, associativity and line size of one cache (bytes, ways, bytes)."""

    size_bytes: int
    ways: int
    line_bytes: int

    def __post_init__(self) -> None:
        for name in ("size_bytes", "ways", "line_bytes"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise ValueError(f"cache {name}={value!r} must be a positive integer")
        if self.size_bytes % (self.ways * self.line_bytes):
            raise ValueError(f"cache of {self.size_bytes} B is not a whole number of sets of "
                             f"{self.ways} ways x {self.line_bytes} B lines")

    @property
    def num_sets(self) -> int:
        return self.size_bytes // (self.ways * self.line_bytes)

    def empty_state(self, copies: int = 1, dtype=np.int64) -> np.ndarray:
        """Tags of ``copies`` cold caches of this geometry."""
        return np.full(copies * self.num_sets * self.ways, -1, dtype=dtype)


def tag_dtype(max_line: int):
    """The narrowest tag type that holds line ids up to ``max_line``: int32 or int64."""
    return np.int32 if max_line < np.iinfo(np.int32).max else np.int64


@jit
def _find(tags: np.ndarray, set_base: int, ways: int, line) -> int:
    """Where ``line`` is in the set at ``set_base``, else the first empty way, else the least
    recently used one (an empty way, -1, ends the search: empty ways come last)."""
    last = set_base + ways - 1
    i = set_base
    while i < last and tags[i] != line and tags[i] != -1:
        i += 1
    return i


@jit
def _to_front(tags: np.ndarray, set_base: int, i: int, line) -> None:
    """Shift the ways more recently used than way ``i`` down by one (way ``i``'s line drops
    out) and put ``line`` in front."""
    while i > set_base:
        tags[i] = tags[i - 1]
        i -= 1
    tags[set_base] = line


@jit
def lru_access(tags: np.ndarray, set_base: int, ways: int, line) -> bool:
    """Access ``line`` in the set whose most recently used way is ``tags[set_base]``;
    return True on a hit.  Either way the line ends up most recently used (on a miss the
    first empty way or the least recently used line makes room)."""
    i = _find(tags, set_base, ways, line)
    hit = tags[i] == line
    _to_front(tags, set_base, i, line)
    return hit


@jit
def lru_insert_last(tags: np.ndarray, set_base: int, ways: int, line) -> bool:
    """As :func:`lru_access` for a line that is present (a hit; it becomes most recently
    used), but an absent line takes the least recently used way (or the first empty one) and
    stays least recently used: the next line the set needs evicts it first.  Returns True
    on a hit."""
    i = _find(tags, set_base, ways, line)
    if tags[i] != line:
        tags[i] = line
        return False
    _to_front(tags, set_base, i, line)
    return True


@jit
def _replay_flat(lines: np.ndarray, tags: np.ndarray, num_sets: int, ways: int, hits: np.ndarray) -> None:
    for t in range(len(lines)):
        line = lines[t]
        hits[t] = lru_access(tags, (line % num_sets) * ways, ways, line)


def replay_lines(lines: np.ndarray, geometry: CacheGeometry) -> np.ndarray:
    """Replay a flat trace of line ids through one cold cache; True where an access hit."""
    lines = np.ascontiguousarray(lines, dtype=np.int64)
    dtype = tag_dtype(int(lines.max()) if len(lines) else 0)
    lines = lines.astype(dtype)
    tags = geometry.empty_state(dtype=dtype)
    hits = np.zeros(len(lines), dtype=np.bool_)
    _replay_flat(lines, tags, geometry.num_sets, geometry.ways, hits)
    return hits


class LRUCache:
    """One cache with a Python face, for tests and inspection (one access per call)."""

    def __init__(self, geometry: CacheGeometry) -> None:
        self.geometry = geometry
        self.tags = geometry.empty_state()

    def access(self, line: int) -> bool:
        """Access line id ``line``; True on a hit."""
        g = self.geometry
        return bool(lru_access(self.tags, (line % g.num_sets) * g.ways, g.ways, np.int64(line)))

    def contents(self, set_index: int) -> list[int]:
        """Lines held by set ``set_index``, least recently used first."""
        ways = self.geometry.ways
        held = self.tags[set_index * ways:(set_index + 1) * ways]
        return [int(t) for t in held[::-1] if t >= 0]
