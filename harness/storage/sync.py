"""Sync: log the runs a sweep spooled (harness.storage.spool) into the MLflow store, once
it can be reached again::

    python -m harness.storage.sync [--spool mlflow-spool] [--tracking-uri URI]

Its own module because it needs both the spool and the tracker, and the tracker writes to
the spool: keeping it here leaves no import cycle between the two.
"""
from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, field
from pathlib import Path

from harness.storage.spool import (DEFAULT_SPOOL_DIR, OUTCOME_WORDS, SYNCED_DIR, Spool, SpoolRecord,
                                   is_spool_id)
from harness.storage.probe import store_problem
from harness.storage.tracking import STORE_ERRORS, Tracker, short_error, storable

@dataclass
class SyncSummary:
    """What a sync did, record by record."""

    spool_dir: Path
    logged: list[str] = field(default_factory=list)
    already_logged: list[str] = field(default_factory=list)
    duplicates: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    unreachable: list[str] = field(default_factory=list)   # of ``failed``: the store could not be reached
    lines: list[str] = field(default_factory=list)

    @property
    def total(self) -> int:
        return len(self.logged) + len(self.already_logged) + len(self.duplicates) + len(self.failed)

    def text(self) -> str:
        if not self.total:
            return f"spool {self.spool_dir}: nothing to sync"
        head = (f"spool {self.spool_dir}: {self.total} record(s): {len(self.logged)} logged, "
                f"{len(self.already_logged)} already in the store, {len(self.duplicates)} not duplicated "
                f"(spec already FINISHED in the store), {len(self.failed)} failed")
        if self.failed:
            refused = len(self.failed) - len(self.unreachable)
            why = ([f"{len(self.unreachable)} because the store could not be reached: run sync again once it is"]
                   if self.unreachable else []) + ([f"{refused} because of the record itself: see its FAILED line"]
                                                   if refused else [])
            head += f" (left in {self.spool_dir}: {'; '.join(why)})"
        else:
            head += f"; synced records are in {self.spool_dir / SYNCED_DIR}"
        return "\n".join([*self.lines, head])


def sync(spool_dir: str | Path, tracking_uri: str | None = None) -> SyncSummary:
    """Log every pending record of ``spool_dir`` into ``tracking_uri`` (default: the store
    each record was meant for) and move it to ``synced/``.  Never raises for a store
    problem: the record stays pending and the summary says why."""

    spool = Spool(spool_dir)
    summary = SyncSummary(spool.directory)
    run_ids = spool.synced_runs()          # record id -> store run id (parents of later jobs)
    trackers: dict[tuple[str, str], Tracker] = {}
    pending = spool.pending()
    pending_ids = {record.record_id for _, record in pending if isinstance(record, SpoolRecord)}
    for path, record in pending:
        if isinstance(record, Exception):   # not JSON, or not a record: it says which file and why
            summary.failed.append(path.name)
            summary.lines.append(f"  FAILED   {path.name}: unreadable record ({type(record).__name__}: {record})")
            continue
        uri = tracking_uri or record.tracking_uri
        key = (uri, record.experiment)
        if key not in trackers:
            trackers[key] = Tracker(uri, record.experiment, spool_dir=spool.directory)
        tracker = trackers[key]
        label = f"{record.kind} {record.run_name!r} ({path.name})"
        if tracker.offline_reason:
            summary.failed.append(path.name)
            summary.unreachable.append(path.name)
            summary.lines.append(f"  FAILED   {label}: store {uri} unreachable: {tracker.offline_reason}")
            continue
        parent = record.parent_run_id
        if is_spool_id(parent):
            if parent not in run_ids and parent in pending_ids:   # its sweep failed to sync: keep the link
                summary.failed.append(path.name)
                summary.lines.append(f"  FAILED   {label}: its sweep record {parent} is not synced yet")
                continue
            parent = run_ids.get(parent)
            if parent is None:
                summary.lines.append(f"  note     {label}: its sweep record {record.parent_run_id} is not in "
                                     "the spool; logged without a parent run")
        try:
            outcome, run_id = tracker.replay(record, parent)
        except Exception as exc:   # whatever one record meets, the others are still synced
            summary.failed.append(path.name)
            if isinstance(exc, STORE_ERRORS) and store_problem(uri):
                summary.unreachable.append(path.name)
                summary.lines.append(f"  FAILED   {label}: store {uri} unreachable: {store_problem(uri)}")
            else:
                summary.lines.append(f"  FAILED   {label}: the store refused this record: {short_error(exc)}")
            continue
        run_ids[record.record_id] = run_id
        spool.mark_synced(path, record, run_id, outcome, uri)
        outcomes = {"logged": summary.logged, "already_logged": summary.already_logged,
                    "duplicate": summary.duplicates}
        outcomes[outcome].append(path.name)
        summary.lines.append(f"  {OUTCOME_WORDS[outcome]:<8} {label} -> run {run_id} in {uri}")
    return summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.storage.sync", description=__doc__.split("\n\n")[0])
    parser.add_argument("--spool", default=DEFAULT_SPOOL_DIR,
                             help=f"spool directory (default: ./{DEFAULT_SPOOL_DIR})")
    parser.add_argument("--tracking-uri", default=None,
                             help="store to log into (default: the store each record was meant for)")
    args = parser.parse_args(argv)
    if not Path(args.spool).is_dir():
        print(f"spool {Path(args.spool).absolute()}: no such directory; nothing to sync")
        return 0
    summary = sync(args.spool, args.tracking_uri)
    print(storable(summary.text()))   # a record's text may hold a lone surrogate
    return 1 if summary.failed else 0


if __name__ == "__main__":
    sys.exit(main())
