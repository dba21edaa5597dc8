"""The rows a swizzle search stores (``search_trials.csv``): one :class:`TrialRecord` per
evaluated swizzle.

Written by the sweeper (:mod:`harness.search.sweeper`), read by the report
(:mod:`harness.report.search`): kept here, in neither, so that neither package imports the
other's modules back, and free of heavy imports so that loading the sweeper plugin stays cheap.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, fields

BUILTIN, TRIAL, CONFIRM = "builtin", "trial", "confirm"


@dataclass(frozen=True)
class TrialRecord:
    """One evaluated swizzle of a search group (kernel, shape, target, fixed overrides).

    ``kind``: ``builtin`` (a reference built-in), ``trial`` (a point the optimizer chose) or
    ``confirm`` (a top-k re-measurement).  ``value``: the objective (e.g. ``l2_hit_rate`` in %),
    NaN when the job failed.  ``wall_s``: the trial's wall time in s.  ``speedup*`` and
    ``verdict``: the paired timing vs the baseline, when the job carried it."""

    group: str
    kind: str
    number: int                  # Optuna trial number; -1 for built-ins and confirmations
    label: str                   # the swizzle label of the job
    family: str
    params: str                  # the family parameters, JSON
    value: float
    status: str                  # COMPLETE, FAIL, DUPLICATE (same label as an earlier trial)
    reason: str = ""
    wall_s: float = math.nan
    run_id: str = ""
    spec_hash: str = ""
    speedup: float = math.nan
    speedup_ci_lo: float = math.nan
    speedup_ci_hi: float = math.nan
    verdict: str = ""


COLUMNS = [f.name for f in fields(TrialRecord)]

#: Tags of a search's sweep run: the objective and direction of its studies (the report
#: finds search sweeps by them).
SEARCH_OBJECTIVE_TAG, SEARCH_DIRECTION_TAG = "swizzlebench.search.objective", "swizzlebench.search.direction"
