"""Comparison report: every swizzle against its baseline, for one sweep, several sweeps,
the whole experiment, or named runs; written at the end of every multirun and by
``python -m harness.report`` (:mod:`harness.report.cli`).

The package, in the order a report is made:

* :mod:`~harness.report.data`: job runs from MLflow into data frames (queries, lookups);
* :mod:`~harness.report.views`: which runs a report covers (a sweep, sweeps, the
  experiment, named runs);
* :mod:`~harness.report.verdicts`: the verdict words and the rules that give them;
* :mod:`~harness.report.compare`: the comparison table, one row per (group, swizzle);
* :mod:`~harness.report.prediction`: what the table says of simulated figures (predictions,
  with their band or "not validated on <target>");
* :mod:`~harness.report.summary`: header facts, best swizzle per group, verdict counts,
  kernel vs vendor;
* :mod:`~harness.report.figures`: the seaborn figures;
* :mod:`~harness.report.search`: the search section (search sweeps) and the sweeper's
  ``search.html``;
* :mod:`~harness.report.render`: the HTML, from the Jinja2 templates in ``templates/``;
* :mod:`~harness.report.build`: :func:`build_report`, which does all of the above and
  writes ``index.html``, ``table.csv``, ``vendor.csv`` and ``failed.csv``.
"""
from harness.report.build import build_report
from harness.report.cli import main, selection_from_args
from harness.report.compare import TABLE_COLUMNS, Comparison, build_comparison, failed_runs
from harness.report.figures import FigureBlock, figure_speedup, make_figures
from harness.report.summary import best_per_group, kernel_vs_vendor, verdicts_per_swizzle
from harness.report.verdicts import (BASELINE, FASTER, L2_BAND_FLOOR_POINTS, L2_BAND_SIGMAS, L2_HIGHER, L2_LOWER,
                                     NO_BASELINE, NO_COMPARISON, NO_DIFFERENCE, NOISE, NOT_PROFILED, NOT_TIMED,
                                     SAME_ORDER, SLOWER, identity_l2_verdict, identity_time_verdict, l2_band)
from harness.report.views import ReportRuns, Selection, load_runs

__all__ = ["BASELINE", "FASTER", "L2_BAND_FLOOR_POINTS", "L2_BAND_SIGMAS", "L2_HIGHER", "L2_LOWER", "NO_BASELINE",
           "NO_COMPARISON", "NO_DIFFERENCE", "NOISE", "NOT_PROFILED", "NOT_TIMED", "SAME_ORDER", "SLOWER",
           "TABLE_COLUMNS", "Comparison", "FigureBlock", "ReportRuns", "Selection", "best_per_group",
           "build_comparison", "build_report", "failed_runs", "figure_speedup", "kernel_vs_vendor", "l2_band",
           "identity_l2_verdict", "identity_time_verdict", "load_runs", "main", "make_figures", "selection_from_args",
           "verdicts_per_swizzle"]
