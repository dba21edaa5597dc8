"""Command line of the report: ``python -m harness.report``.

    python -m harness.report --experiment swizzlebench [--sweep RUN_ID ...] [--out DIR]
    python -m harness.report --experiment swizzlebench --experiment-view
    python -m harness.report --experiment swizzlebench --run RUN_ID [--run RUN_ID ...]
    python -m harness.report --experiment swizzlebench --list-sweeps

Which runs each form covers is :mod:`harness.report.views`; what is written,
:mod:`harness.report.build`.
"""
from __future__ import annotations

import argparse
import logging
import sys

from mlflow.tracking import MlflowClient

from harness.report.build import build_report
from harness.report.data import list_sweeps
from harness.report.views import Selection

DESCRIPTION = ("Comparison report: every swizzle against its baseline, for one sweep, several sweeps, the whole "
               "experiment, or named runs.")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m harness.report", description=DESCRIPTION,
        epilog="Without --sweep, --experiment-view or --run: the experiment's latest sweep (the experiment "
               "view when it has none).")
    parser.add_argument("--experiment", required=True, help="MLflow experiment (the sweep name)")
    view = parser.add_mutually_exclusive_group()
    view.add_argument("--sweep", action="append", metavar="RUN_ID",
                      help="a sweep's parent run id (see --list-sweeps); repeat it to report several sweeps together")
    view.add_argument("--experiment-view", action="store_true",
                      help="the whole experiment: the latest FINISHED run of every spec (spec_hash), from any "
                           "sweep or single run")
    view.add_argument("--run", action="append", metavar="RUN_ID",
                      help="a run id: a job run stands for every run of its Hydra job (e.g. all shapes of one "
                           "`python -m harness` without -m), a sweep run for its jobs; repeatable")
    view.add_argument("--list-sweeps", action="store_true",
                      help="list the experiment's sweep runs (id, start, status, name) and exit")
    parser.add_argument("--out", default=None,
                        help="output folder (default: reports/<experiment>/<sweep run id | experiment | "
                             "run-<id> | sweeps-... | runs-...>)")
    parser.add_argument("--tracking-uri", default="sqlite:///mlflow.db", help="MLflow tracking URI")
    return parser


def selection_from_args(args: argparse.Namespace) -> Selection:
    """The view the command line asks for."""
    if args.experiment_view:
        return Selection("experiment")
    if args.run:
        return Selection("runs", tuple(args.run))
    if args.sweep:
        return Selection("sweeps", tuple(args.sweep))
    return Selection("latest")


def main(argv: list[str] | None = None) -> int:
    """Run the command line; 0 on success, 2 when the runs asked for are not found."""
    args = _parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    try:
        if args.list_sweeps:
            print("\n".join(list_sweeps(MlflowClient(tracking_uri=args.tracking_uri), args.experiment)))
            return 0
        path = build_report(args.tracking_uri, args.experiment, out_dir=args.out, selection=selection_from_args(args))
    except (LookupError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(path)
    return 0

