"""The oracle for formula-proposing agents: ``python -m harness.search.propose``.

    printf '%s\\n' 'pid' '(pid % num_xcds) * (num_pids // num_xcds) + pid // num_xcds' \\
        | python -m harness.search.propose shape=resnet 'shape.select=[l03]' target=mi300x

Reads swizzle formulas (the language of :mod:`swizzles.custom`): one per line from a file
(``--file``) or stdin, or with ``--jsonl`` one JSON object ``{"formula": "...", "id": ...}``
per line (multi-line programs).  Each goes through the job pipeline of ``python -m harness
swizzle=custom`` (``harness.app.run_hydra_job``): parse -> permutation gate on the full
grid -> correctness gate (on the CPU under the interpreter, down-scaled) -> timing (GPU) ->
L2 profile (simulated without a GPU) -> one MLflow run per shape, nested under one parent
run per invocation.  For each formula it writes ONE JSON line to stdout, in input order:

* ``accepted`` (bool) and ``verdict``: ``accepted``, ``syntax_error``, ``not_a_permutation``,
  ``unverifiable`` (CPU only: a permutation of the full grid but not of the down-scaled grid
  the interpreter checks), ``wrong_output`` or ``error`` (any other failure, e.g. a crash);
* ``error``: the exact message (line/column and allowed forms; the first collision; the
  worst element), null when accepted;
* ``l2_hit_rate`` (%, mean over the shapes), ``l2_source`` (``sim``, ``ncu``, ``rocprofv3``);
* ``speedup``, ``speedup_ci`` [lo, hi] and ``timing_verdict`` vs the baseline (null / "not
  timed" on the CPU), ``run_ids``; ``shapes``: the same per shape.

Everything else (progress lines, logs) goes to stderr.  Formulas are never run as Python:
the text is written to a temporary file and read by the formula parser only (it never
passes through OmegaConf, whose ``${...}`` interpolation would otherwise see it).
Each proposal is a fresh measurement (``resume=false``).
"""
from __future__ import annotations

from harness.hardware.device import select_execution_mode

# Decide GPU vs interpreter before anything imports triton (see harness.hardware.device).
MODE = select_execution_mode()

import argparse  # noqa: E402
import contextlib  # noqa: E402
import copy  # noqa: E402
import hashlib  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from dataclasses import asdict, dataclass, field  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any, Iterable, TextIO  # noqa: E402
from harness.job.verdict import Kind  # noqa: E402
from harness.storage.field_names import Param, Tag  # noqa: E402
from harness.storage.run_fields import flag_text, verdict_text  # noqa: E402

from harness.errors import UserError  # noqa: E402
from swizzles.custom import FormulaError  # noqa: E402

ACCEPTED, SYNTAX, NOT_PERMUTATION, UNVERIFIABLE, WRONG_OUTPUT, ERROR = (
    "accepted", "syntax_error", "not_a_permutation", "unverifiable", "wrong_output", "error")
#: failed_gate tag of a job -> verdict
_GATE_VERDICTS = {"swizzle": SYNTAX, "permutation": NOT_PERMUTATION, "correctness": WRONG_OUTPUT}
_PREFIXES = ("invalid swizzle: ",)


@dataclass(frozen=True)
class Proposal:
    """One formula as read: its position, the proposer's id (``--jsonl``) and its text."""

    index: int
    formula: str
    id: Any = None


@dataclass
class ShapeVerdict:
    """What the pipeline said about a formula on one shape."""

    shape: str
    status: str
    verdict: str
    reason: str
    run_id: str | None
    l2_hit_rate: float | None
    l2_source: str | None
    speedup: float | None
    speedup_ci: list[float] | None
    timing_verdict: str
    max_rel_err: float | None


@dataclass
class Verdict:
    """The JSON line of one formula."""

    index: int
    id: Any
    formula: str
    label: str
    accepted: bool
    verdict: str
    error: str | None
    l2_hit_rate: float | None
    l2_source: str | None
    speedup: float | None
    speedup_ci: list[float] | None
    timing_verdict: str
    run_ids: list[str]
    shapes: list[ShapeVerdict] = field(default_factory=list)

    def to_json(self) -> str:
        return json.dumps(asdict(self), allow_nan=False)


def read_proposals(stream: TextIO, jsonl: bool) -> list[Proposal]:
    """Formulas from ``stream``: one per non-blank line (``#`` lines skipped), or JSON lines
    with a ``formula`` string.  Raises ValueError naming the bad line."""
    out = []
    for number, line in enumerate(stream, 1):
        if not line.strip() or (not jsonl and line.lstrip().startswith("#")):
            continue
        if jsonl:
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ValueError(f"input line {number}: not JSON ({exc.msg})") from None
            if not isinstance(record, dict) or not isinstance(record.get("formula"), str):
                raise ValueError(f"input line {number}: expected an object with a string \"formula\"")
            out.append(Proposal(len(out), record["formula"], record.get("id")))
        else:
            out.append(Proposal(len(out), line.rstrip("\r\n")))
    return out


def compose_config(overrides: list[str]):
    """The job config for the proposals: the usual defaults, the caller's overrides,
    ``swizzle=custom`` and ``resume=false``."""
    from hydra import compose, initialize_config_module

    bad = [o for o in overrides if o.lstrip("+~").split("=", 1)[0].split(".", 1)[0] in ("swizzle", "hydra")]
    if bad:
        raise ValueError(f"overrides {bad} are not allowed: the formulas are the swizzles (and there is no "
                         "Hydra run here); give kernel/shape/target/profiler/tracking/... overrides")
    with initialize_config_module(config_module="swizzlebench_conf", version_base="1.3"):
        return compose(config_name="config", overrides=[*overrides, "swizzle=custom", "resume=false"])


def evaluate(proposal: Proposal, base_cfg, workdir: Path) -> Verdict:
    """Run one formula through the job pipeline and classify the outcome."""
    from omegaconf import open_dict

    from harness.app import run_hydra_job
    from harness.hardware.device import describe_device
    from harness.preflight import check_job, task_overrides

    digest = hashlib.sha256(proposal.formula.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    label = f"proposal-{proposal.index}-{digest}"
    path = workdir / f"{label}.txt"
    path.write_text(proposal.formula, encoding="utf-8", errors="surrogatepass")
    cfg = copy.deepcopy(base_cfg)
    with open_dict(cfg):
        cfg.swizzle.expr = None
        cfg.swizzle.file = str(path)
        cfg.swizzle.label = label
    started_ms = int(time.time() * 1000)
    with contextlib.redirect_stdout(sys.stderr):   # stdout carries the JSON lines only
        try:
            results = run_hydra_job(check_job(cfg, describe_device(MODE), task_overrides()), MODE)
        except UserError as exc:   # refused before any shape ran: the formula is outside the language
            if not isinstance(exc.__cause__, FormulaError):
                raise
            results = [_refused(cfg, label, str(exc))]
    shapes = [_shape_verdict(r) for r in results]
    _fill_run_ids(cfg, label, shapes, started_ms)
    return _verdict(proposal, label, shapes)


def _refused(cfg, label: str, reason: str):
    """A formula the job refused before any shape ran (a command line would exit 2): one FAILED
    run ``<kernel>/<label>/refused/w<warps>`` under this invocation's parent, with the reason,
    so every proposal has its run and its JSON line."""
    from harness.callbacks import SWEEP_ENV
    from harness.job.result import JobResult
    from harness.storage.tracking import Tracker, resolve_tracking_uri

    result = JobResult(run_name=f"{cfg.kernel.name}/{label}/refused/w{cfg.launch.num_warps}",
                       params={Param.SWIZZLE_LABEL: label, Param.SWIZZLE_FILE: str(cfg.swizzle.file)})
    result.fail(f"invalid swizzle: {reason}", gate="swizzle")
    tracker = Tracker(resolve_tracking_uri(str(cfg.tracking.uri)), str(cfg.experiment))
    run_id = tracker.start_job(result.run_name, os.environ.get(SWEEP_ENV), {})
    tracker.finish_job(run_id, result)
    return result


def _shape_verdict(result) -> ShapeVerdict:
    m, tags = result.metrics, result.tags
    if result.status == "FINISHED":
        verdict, reason = ACCEPTED, result.reason
    else:
        verdict = _GATE_VERDICTS.get(result.failed_gate or "", ERROR)
        reason = result.reason
        if verdict == WRONG_OUTPUT and result.unverifiable:
            verdict = UNVERIFIABLE
        for prefix in _PREFIXES:
            reason = reason.removeprefix(prefix)
    speedup = _number(m.get("speedup"))
    lo, hi = _number(m.get("speedup_ci_lo")), _number(m.get("speedup_ci_hi"))
    return ShapeVerdict(
        shape=result.run_name.split("/")[2] if result.run_name.count("/") >= 3 else result.run_name,
        status=result.status, verdict=verdict, reason=reason, run_id=None,
        l2_hit_rate=_number(m.get("l2_hit_rate")), l2_source=tags.get("profiler"), speedup=speedup,
        speedup_ci=[lo, hi] if lo is not None and hi is not None else None,
        timing_verdict=(verdict_text(result.verdict) if result.verdict is not None
                        else Kind.NOT_TIMED.word if speedup is None else ""),
        max_rel_err=_number(m.get("max_rel_err")))


def _number(value: Any) -> float | None:
    return None if value is None or (isinstance(value, float) and math.isnan(value)) else float(value)


def _verdict(proposal: Proposal, label: str, shapes: list[ShapeVerdict]) -> Verdict:
    failed = next((s for s in shapes if s.verdict != ACCEPTED), None)
    if not shapes:
        failed = ShapeVerdict("-", "FAILED", ERROR, "the pipeline returned no result", None, None, None, None,
                              None, "", None)
    rates = [s.l2_hit_rate for s in shapes if s.l2_hit_rate is not None]
    speedups = [s.speedup for s in shapes if s.speedup is not None]
    one = shapes[0] if len(shapes) == 1 else None
    return Verdict(
        index=proposal.index, id=proposal.id, formula=proposal.formula, label=label, accepted=failed is None,
        verdict=ACCEPTED if failed is None else failed.verdict, error=None if failed is None else failed.reason,
        l2_hit_rate=sum(rates) / len(rates) if rates and failed is None else None,
        l2_source=shapes[0].l2_source if shapes else None,
        speedup=(math.exp(sum(math.log(s) for s in speedups) / len(speedups))
                 if speedups and len(speedups) == len(shapes) else None),
        speedup_ci=one.speedup_ci if one is not None else None,
        timing_verdict=one.timing_verdict if one is not None else
        (Kind.NOT_TIMED.word if not speedups else "see shapes"),
        run_ids=[s.run_id for s in shapes if s.run_id], shapes=shapes)


def _fill_run_ids(cfg, label: str, shapes: list[ShapeVerdict], since_ms: int) -> None:
    """The MLflow run of each shape: the run under this invocation's parent started since
    ``since_ms`` whose job name (its ``job`` tag, the job line's name) holds the label (or ``custom``: a formula that did not parse has no
    label in its run name) and the shape."""
    from harness.callbacks import SWEEP_ENV
    from harness.storage.field_names import tag_column
    from harness.storage.run_fields import JOB_NAME_TAG, RUN_NAME_TAG
    from harness.storage.tracking import PARENT_TAG, Tracker, resolve_tracking_uri

    parent = os.environ.get(SWEEP_ENV)
    tracker = Tracker(resolve_tracking_uri(str(cfg.tracking.uri)), str(cfg.experiment))
    if tracker.offline or not parent:
        return
    runs = tracker.client.search_runs(
        [tracker.experiment_id], max_results=1000,
        filter_string=f"{tag_column(PARENT_TAG)} = '{parent}' and attributes.start_time >= {since_ms}")
    by_name = {r.data.tags.get(JOB_NAME_TAG, r.data.tags.get(RUN_NAME_TAG, "")): r.info.run_id for r in runs}
    for shape in shapes:
        shape.run_id = next((run_id for name, run_id in by_name.items()
                             if f"/{label}/{shape.shape}/" in name or f"/custom/{shape.shape}/" in name), None)


def run(proposals: Iterable[Proposal], overrides: list[str], out: TextIO) -> int:
    """Evaluate every proposal, one JSON line each to ``out``; returns how many were accepted."""
    from harness.callbacks import SWEEP_ENV
    from harness.storage.provenance import git_commit
    from harness.storage.spool import spool_dir_for
    from harness.storage.tracking import Tracker, resolve_tracking_uri

    proposals = list(proposals)
    cfg = compose_config(overrides)
    tracker = Tracker(resolve_tracking_uri(str(cfg.tracking.uri)), str(cfg.experiment),
                      spool_dir=spool_dir_for(cfg.tracking.spool_dir))
    parent = tracker.start_sweep(run_name=f"propose {len(proposals)} formulas {' '.join(overrides)}"[:250],
                                 params={Param.PROPOSE_OVERRIDES: " ".join(overrides)[:500],
                                         Param.PROPOSE_FORMULAS: str(len(proposals))},
                                 tags={Tag.GIT_COMMIT: git_commit(), Tag.PROPOSE: flag_text(True)})
    os.environ[SWEEP_ENV] = parent
    accepted = 0
    try:
        with tempfile.TemporaryDirectory(prefix="swizzlebench-propose-") as tmp:
            for proposal in proposals:
                verdict = evaluate(proposal, cfg, Path(tmp))
                accepted += verdict.accepted
                out.write(verdict.to_json() + "\n")
                out.flush()
    except BaseException as exc:
        tracker.end_sweep(parent, "FAILED", reason=f"propose stopped: {type(exc).__name__}: {exc}")
        raise
    finally:
        os.environ.pop(SWEEP_ENV, None)
    tracker.end_sweep(parent)
    print(f"[propose] {accepted} of {len(proposals)} formulas accepted; MLflow parent run {parent} in "
          f"experiment {cfg.experiment!r}", file=sys.stderr, flush=True)
    return accepted


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m harness.search.propose",
        description="Evaluate swizzle formulas (one per line, or --jsonl) and print one JSON verdict per "
                    "formula on stdout. Remaining arguments are Hydra overrides, e.g. shape=resnet "
                    "'shape.select=[l03]' target=mi300x tracking.uri=sqlite:///mlflow.db")
    parser.add_argument("--file", help="read formulas from this file instead of stdin")
    parser.add_argument("--jsonl", action="store_true",
                        help='each input line is a JSON object {"formula": "...", "id": ...}')
    parser.add_argument("overrides", nargs="*", help="Hydra overrides (not swizzle.*)")
    args = parser.parse_args(argv)
    try:
        if args.file:
            with open(args.file, encoding="utf-8") as stream:
                proposals = read_proposals(stream, args.jsonl)
        else:
            proposals = read_proposals(sys.stdin, args.jsonl)
        run(proposals, list(args.overrides), sys.stdout)
    except (OSError, ValueError) as exc:
        print(f"python -m harness.search.propose: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
