"""What the report says of simulated L2 figures: they are predictions of the L2 model
(``profiler=sim``), never measurements, so each carries the band the model held on hardware
(the target's validation, :mod:`harness.profilers.sim.bands`) or the words "not validated on
<target>", and none is shown as a confidence interval or with a zero-width ``± 0.00``.

A cell is *simulated* when its run's L2 source is the simulator (tag ``l2_source=sim``, or
its ``sim_validation`` tag).  Columns it adds to the comparison table (points of hit rate):

* ``simulated``: bool;
* ``l2_validation``: the run's ``sim_validation`` tag ("validated on H100 ncu ...; ± covers
  90 % ..." or "not validated on mi300x hardware"), empty for measured cells;
* ``l2_delta_band_pts``: the half-width of a simulated delta's band (its interval
  ``l2_delta_lo/hi`` is prediction ± band), NaN when the model was not validated.

A zero-width interval (a noiseless source without a band, as older runs logged it) is no
interval: its bounds become NaN.  A simulated delta without a band claims no effect: its L2
verdict is PREDICTED (:class:`harness.job.verdict.Kind`) whatever an older run's tag said (``higher``,
``lower``, ``no difference detected (exact: ...)``) or its identity run's noise band gave.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from harness.measure.stats import unvalidated_l2_verdict
from harness.report.verdicts import L2_HIGHER, L2_LOWER, L2_PREDICTED, NO_DIFFERENCE, NOISE
from harness.job.verdict import NOT_VALIDATED
from harness.storage.run_fields import validated, verdict_text

#: The label of a simulated figure wherever it is shown.
PREDICTION = "prediction"
#: The tag a simulated run carries (harness.profilers.sim.profiler): the model's validation.
VALIDATION_TAG = "sim_validation"
#: The L2 verdicts that say something of the effect, which a prediction without a band cannot.
_L2_CLAIMS = (L2_HIGHER, L2_LOWER, NO_DIFFERENCE, NOISE)


def mark_simulated(table: pd.DataFrame) -> None:
    """Add ``simulated``, ``l2_validation`` and ``l2_delta_band_pts`` to ``table`` (in place),
    clear the meaningless spread of a simulated hit rate (no repeats: std 0), drop every
    zero-width interval's bounds, and give a simulated delta without a band the verdict
    PREDICTED."""
    validation = table["sim_validation"] if "sim_validation" in table else pd.Series("", index=table.index)
    simulated = (table["l2_source"] == "sim") | (validation != "")
    table["simulated"] = simulated
    table["l2_validation"] = validation.where(simulated, "")
    width = table["l2_delta_hi"] - table["l2_delta_lo"]
    table["l2_delta_band_pts"] = (width / 2).where(simulated & (width > 0))
    table["l2_hit_rate_std"] = table["l2_hit_rate_std"].where(~simulated)
    for lo, hi in (("l2_delta_lo", "l2_delta_hi"), ("speedup_lo", "speedup_hi")):
        zero = table[lo] == table[hi]
        table.loc[zero, [lo, hi]] = np.nan
    unbanded = (simulated & table["l2_delta_band_pts"].isna() & table["l2_delta_pts"].notna()
                & table["l2_verdict"].isin(_L2_CLAIMS))
    table.loc[unbanded, "l2_verdict"] = L2_PREDICTED
    table.loc[unbanded, "l2_verdict_detail"] = [verdict_text(unvalidated_l2_verdict(d))
                                                for d in table.loc[unbanded, "l2_delta_pts"]]


def band_text(r: dict) -> str:
    """How a simulated figure is qualified: ``90 % band`` (its ± held that share of the
    validation cells; else ``mean error``) or the model's ``not validated on <target>``."""
    if not np.isfinite(r.get("l2_hit_rate_err", np.nan)) and not np.isfinite(r.get("l2_delta_band_pts", np.nan)):
        return not_validated(r)
    cov = r.get("l2_err_coverage", np.nan)
    return f"{cov:.0f} % band" if np.isfinite(cov) else "mean error"


def not_validated(r: dict) -> str:
    """``not validated on mi300x hardware``: the run's own words, else from its target."""
    text = str(r.get("l2_validation") or "")
    return text if text and not validated(text) else f"{NOT_VALIDATED} on {r.get('target') or '?'}"


def validation_summary(table: pd.DataFrame) -> str:
    """The simulated cells' validations in a few words, for a title: ``simulated on mi300x, not
    validated on hardware``, ``simulated on h100, prediction ± band`` (both when mixed); empty
    when no cell is simulated."""
    sim = table[table["simulated"]] if "simulated" in table else table.iloc[0:0]
    if sim.empty:
        return ""
    parts = []
    for target, grp in sim.groupby("target", sort=True):
        banded = grp["l2_validation"].map(validated).all()
        parts.append(f"simulated on {target}, "
                     + (f"{PREDICTION} ± band" if banded else f"{NOT_VALIDATED} on hardware"))
    return "; ".join(parts)
