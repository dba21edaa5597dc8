"""The verdicts: their words, defined here and nowhere else, and the typed verdict a job carries.

A job compared with its baseline carries two :class:`Verdict` s on its
:class:`~harness.job.result.JobResult`: on time (``result.verdict``, set by
:mod:`harness.measure.paired` or the no-GPU path) and on the L2 hit rate (``result.l2_verdict``,
set from the profilers' readings).  Which text an MLflow run stores for them, and how that
text is read back, is :mod:`harness.storage.run_fields`'s business; every other module works
with :class:`Kind` and :class:`Verdict`, never with the words' text.

The report's own words (``within noise``, ``baseline``, ...) are kinds here too: they name the
report's judgements of older runs against their identity run, and its cells that are no
verdict at all.  Renaming a word is a change of one line of this module.
"""
from __future__ import annotations

import enum
import math
from dataclasses import dataclass


class Kind(enum.Enum):
    """What a verdict says; its value is the word the job line, the tag and the report show."""

    FASTER = "faster"
    SLOWER = "slower"
    HIGHER = "higher"                          # L2: the candidate's hit rate is higher
    LOWER = "lower"
    NO_DIFFERENCE = "no difference detected"
    #: A simulated L2 change with no validated band: its number, no effect claimed.
    PREDICTED = "predicted, not validated"
    #: The candidate launches its baseline's very tile order: any difference is the remap's code.
    SAME_ORDER = "same order as baseline"
    NOT_TIMED = "not timed"
    NOT_PROFILED = "not profiled"
    #: A candidate whose baseline failed a gate.
    NO_COMPARISON = "no comparison"
    # The report's words for older runs judged against their identity run, and for its other cells.
    NOISE = "within noise"
    NO_BASELINE = "no identity baseline"
    BASELINE = "baseline"
    NO_VERDICT = "no verdict recorded"
    OTHER = "unrecognised verdict"

    @property
    def word(self) -> str:
        """The word, as shown."""
        return self.value


#: :attr:`Verdict.axis`: a verdict on time (speedup) or on the L2 hit rate (difference, % points).
TIME, L2 = "time", "l2"
#: How a job line says a simulated job in its baseline's tile order: the model sees the order
#: only, so the difference is nil by construction (the remap's code is not modelled).
SAME_ORDER_SIM = "same tile order"
#: How a same-order cell's verdict opens, on time: its speedup is the remap code's cost, a result.
SAME_ORDER_TIME = f"{SAME_ORDER_SIM}; code cost"
#: ... and on L2: a measured difference there comes from the remap's code or the counter's noise.
SAME_ORDER_L2 = f"{SAME_ORDER_SIM}: the swizzle's code, not its order"
#: Why a job on a machine without a GPU is not timed.
NO_GPU = "no GPU: correctness checked under the Triton interpreter"
#: How a simulated figure's validation (tag ``sim_validation``) opens where the L2 model was
#: never validated on the target's hardware: ``not validated on mi300x hardware``.
NOT_VALIDATED = "not validated"
#: Why a compared job has no L2 verdict when the sweep runs no profiler.
NO_PROFILER = "profiler=none"


@dataclass(frozen=True)
class Verdict:
    """One verdict of a job against its baseline.

    ``axis``: TIME or L2.  ``kind``: what it says.  ``estimate`` with its interval
    ``[ci_lo, ci_hi]``: the effect the verdict was taken on (TIME: speedup, no unit; L2:
    difference in % points; NaN where none).  ``same_order``: the job launches its baseline's
    tile order, so ``kind`` judges the remap's code, not the order.  ``detail``: why, for
    NOT_TIMED, NOT_PROFILED and NO_COMPARISON."""

    axis: str
    kind: Kind
    estimate: float = math.nan
    ci_lo: float = math.nan
    ci_hi: float = math.nan
    same_order: bool = False
    detail: str = ""

    @property
    def word(self) -> str:
        """The word of its kind."""
        return self.kind.word
