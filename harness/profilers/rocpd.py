"""rocprofv3's default output, the ``rocpd`` SQLite database: each profiled dispatch's
counters, kernel name and duration.

A rocpd file (``<pid>_results.db``; schema in ROCm/rocm-systems
``projects/rocprofiler-sdk/source/share/rocprofiler-sdk-rocpd/rocpd_tables.sql``) keeps its
tables under names with a per-run suffix (``rocpd_pmc_event<uuid>``) and views without it
(``rocpd_views.sql``); the views are read here.  A counter value is one row of
``rocpd_pmc_event`` (``event_id``, ``pmc_id``, ``value``), possibly several per counter and
dispatch (one per dimension instance); the counter's name is in ``rocpd_info_pmc``, the
dispatch (``dispatch_id``, ``start`` and ``end`` in ns, ``kernel_id``, ``pid``) in
``rocpd_kernel_dispatch`` joined on ``event_id``, the kernel's name in
``rocpd_info_kernel_symbol``.  The values of a counter are summed per dispatch, as the
database's own ``counters_collection`` view does (``data_views.sql``).
"""
from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field
from pathlib import Path

#: The views the reader needs.
VIEWS = ("rocpd_pmc_event", "rocpd_info_pmc", "rocpd_kernel_dispatch", "rocpd_info_kernel_symbol",
         "rocpd_info_process")

_QUERY = """
SELECT P.pid, K.dispatch_id, COALESCE(S.display_name, S.kernel_name), K.start, K.end, I.name, SUM(E.value)
FROM rocpd_pmc_event E
  JOIN rocpd_info_pmc I ON I.id = E.pmc_id AND I.guid = E.guid
  JOIN rocpd_kernel_dispatch K ON K.event_id = E.event_id AND K.guid = E.guid
  JOIN rocpd_info_kernel_symbol S ON S.id = K.kernel_id AND S.guid = K.guid
  JOIN rocpd_info_process P ON P.id = K.pid AND P.guid = K.guid
GROUP BY K.guid, P.pid, K.dispatch_id, I.name
ORDER BY P.pid, K.dispatch_id
"""


@dataclass
class RawDispatch:
    """One dispatch as an output file gives it: kernel name, counters by name, duration (ns)."""

    kernel_name: str
    counters: dict[str, float] = field(default_factory=dict)
    duration_ns: float | None = None


def is_rocpd(path: Path) -> bool:
    """Whether ``path`` is a SQLite file with rocpd's views."""
    try:
        with open(path, "rb") as f:
            if f.read(16) != b"SQLite format 3\x00":
                return False
        return not _missing_views(path)
    except (OSError, sqlite3.Error):
        return False


def _missing_views(path: Path) -> list[str]:
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        names = {row[0] for row in con.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'view')")}
    finally:
        con.close()
    return [v for v in VIEWS if v not in names]


def read_rocpd(path: Path) -> dict[tuple[int, int], RawDispatch]:
    """{(process id, dispatch id): dispatch} of one rocpd database; counters summed over their
    instances, duration ``end - start`` (ns)."""
    missing = _missing_views(path)
    if missing:
        raise ValueError(f"{path}: not a rocpd database (no {', '.join(missing)})")
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        rows = con.execute(_QUERY).fetchall()
    finally:
        con.close()
    dispatches: dict[tuple[int, int], RawDispatch] = {}
    for pid, dispatch_id, kernel, start, end, counter, value in rows:
        d = dispatches.setdefault((int(pid), int(dispatch_id)), RawDispatch(
            str(kernel), duration_ns=float(end - start) if start is not None and end is not None else None))
        if value is not None:
            d.counters[str(counter)] = float(value)
    return dispatches
