"""Build one report: load the runs, compare, draw, render, write, attach.

The report is written into the output folder:

* ``index.html``: ONE self-contained page (figures are base64 PNGs, the CSS is inline,
  there is no JavaScript and nothing is fetched), every shown text HTML-escaped;
* ``table.csv``: one row per (group, swizzle) cell, numbers unformatted;
* ``results.json``: the same cells as a JSON list, one object per cell with the same fields
  (a missing value is ``null``), for tools that read JSON rather than CSV;
* ``vendor.csv``: per kernel and swizzle, time / vendor time over the shapes (geometric mean);
* ``failed.csv``: the runs that did not finish, with their reasons (header only if none);
  runs still running under a live claim (another sweep's cells, harness.report.running) are
  no failures: the page names them ``still running (sweep <id>)`` in a note.

A report of one sweep is also attached to that sweep's parent run as the artifacts
``report/index.html``, ``report/table.csv``, ``report/results.json``, ``report/vendor.csv`` and
``report/failed.csv``.
"""
from __future__ import annotations

import logging
import time
from pathlib import Path

from mlflow.tracking import MlflowClient

from harness.report.compare import TABLE_COLUMNS, build_comparison, failed_runs, spooled_note
from harness.report.figures import make_figures
from harness.report.render import render_page
from harness.report.running import running_note, still_running
from harness.report.search import search_sections
from harness.report.summary import header_facts, kernel_vs_vendor
from harness.report.views import Selection, load_runs

log = logging.getLogger("harness.report")


def attach_to_sweep(client: MlflowClient, sweep_run_id: str, files: list[Path]) -> None:
    """Log ``files`` as artifacts ``report/<name>`` of the sweep's parent run."""
    for path in files:
        client.log_artifact(sweep_run_id, str(path), artifact_path="report")


def build_report(tracking_uri: str, experiment: str, sweep_run_id: str | None = None,
                 out_dir: str | Path | None = None, selection: Selection | None = None) -> Path:
    """Build the report of ``selection`` (default: the sweep ``sweep_run_id``, or the
    experiment's latest sweep) and return the path of its ``index.html``; ``table.csv``,
    ``results.json``, ``vendor.csv`` and ``failed.csv`` are written next to it (default folder:
    ``reports/<experiment>/<sweep id | experiment | run-<id> | ...>``) and, for a report
    of one sweep, all of them are attached to its sweep run under ``report/``."""
    if selection is not None and sweep_run_id is not None:
        raise ValueError("give either sweep_run_id or selection, not both")
    started = time.perf_counter()
    client = MlflowClient(tracking_uri=tracking_uri)
    data = load_runs(client, experiment, selection or Selection.sweep(sweep_run_id), tracking_uri)
    loaded = time.perf_counter()
    comparison = build_comparison(data.runs)
    running = still_running(data.runs)
    failed = failed_runs(data.runs[~data.runs["run_id"].isin(running["run_id"])] if len(running) else data.runs)
    rebuild = (f"python -m harness.report --experiment {experiment} --tracking-uri {tracking_uri}"
               + (f" --sweep {data.attach_run_id}" if data.attach_run_id else ""))
    for note in (spooled_note(data.runs), running_note(running, rebuild)):
        if note:
            comparison.notes.insert(0, note)
            log.warning("%s", note)
    figures = make_figures(comparison)
    facts = header_facts(data, comparison, failed)
    page = render_page(data, comparison, failed, figures, facts, search_sections(data))

    out = Path(out_dir) if out_dir is not None else Path("reports") / experiment / data.out_name
    out.mkdir(parents=True, exist_ok=True)
    html_path = out / "index.html"
    html_path.write_text(page, encoding="utf-8")
    table = comparison.table.reindex(columns=TABLE_COLUMNS)
    table.to_csv(out / "table.csv", index=False)
    table.to_json(out / "results.json", orient="records", indent=1)
    kernel_vs_vendor(comparison).to_csv(out / "vendor.csv", index=False)
    failed.to_csv(out / "failed.csv", index=False)
    log.info("report of %d cell(s), %d failed run(s), %d run(s) still running written to %s (load %.1f s, "
             "total %.1f s)", len(comparison.table), len(failed), len(running), html_path, loaded - started,
             time.perf_counter() - started)

    if data.attach_run_id:
        try:
            attach_to_sweep(client, data.attach_run_id, [html_path, out / "results.json",
                                                         *(out / f"{name}.csv" for name in ("table", "vendor", "failed"))])
        except Exception as exc:  # the local report stands even if the artifact store is unreachable
            log.warning("report written to %s but not attached to sweep run %s: %s: %s",
                        html_path, data.attach_run_id, type(exc).__name__, exc)
    return html_path
