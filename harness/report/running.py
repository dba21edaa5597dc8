"""Runs still running when a report is built: the cells another live sweep holds (a sweep
that reused a spec running elsewhere, harness.storage.claims) or, for a report rebuilt
mid-sweep, the sweep's own runs in flight.  They are no failures: the report lists them as
``still running (sweep <id>)``, and the runs of ``failed.csv`` are the others."""
from __future__ import annotations

import pandas as pd

from harness.report.labels import frame_column
from harness.storage.claims import HEARTBEAT, is_live
from harness.storage.tracking import SWEEP_TAG

COLUMNS = ["run_id", "run_name", "sweep", "reason"]


def still_running(runs: pd.DataFrame) -> pd.DataFrame:
    """The job runs of ``runs`` that are RUNNING under a live claim (a fresh heartbeat from a
    process alive: harness.storage.claims.is_live), one row each: run id, name, its sweep run
    id and the reason ``still running (sweep <id>)``.  A RUNNING run whose claim has expired
    (its process died) is not among them: it never finished, a failure."""
    if runs.empty:
        return pd.DataFrame(columns=COLUMNS)
    tag_columns = [c for c in runs.columns if c.startswith("tags.")]
    open_here = HEARTBEAT.open()
    live = [index for index, row in runs[runs["status"] == "RUNNING"].iterrows()
            if is_live({c[len("tags."):]: str(row[c]) for c in tag_columns if pd.notna(row[c])}, open_here,
                       str(row["run_id"]))]
    held = runs.loc[live]
    sweep = frame_column(held, f"tags.{SWEEP_TAG}", "").fillna("").astype(str)
    out = pd.DataFrame({"run_id": held["run_id"], "run_name": held["run_name"], "sweep": sweep,
                        "reason": "still running (sweep " + sweep.where(sweep != "", "none") + ")"},
                       columns=COLUMNS)
    return out.sort_values(["run_name", "run_id"], kind="stable").reset_index(drop=True)


def running_note(running: pd.DataFrame, rebuild: str) -> str | None:
    """One line naming the runs still running and their sweeps, and the command ``rebuild``
    that rebuilds the report once they end; None if none."""
    if running.empty:
        return None
    names = ", ".join(f"{r.run_name} ({r.reason})" for r in running.itertuples())
    return (f"{len(running)} run(s) still running, not failures; their cells are not in this report yet: {names}. "
            f"Rebuild it once they end: {rebuild}")
