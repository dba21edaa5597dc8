"""Which question a comparison answers (config ``compare.configs``):

* ``same`` (default), **same config**: the baseline runs on the candidate's config (tune
  mode's choice, made with the baseline's swizzle fixed, or the configured one): "does this
  tile order, on this kernel, change its time?";
* ``tuned_each``, **best vs best**: tune mode tunes the candidate with its own swizzle and the
  baseline with the baseline's (:mod:`harness.tune.per_job`), and the verdict compares
  the two tuned kernels, each on its own config: "can this swizzle make my kernel faster at
  all?", the question a kernel engineer asks.  Needs tune mode (``tune=fastest``) and a
  baseline.

Every compared job logs its baseline's config (param ``baseline_config``, the same label as
``tune.config``) and the question (tag ``compare.question``); the job line and the report say
which question a verdict answers.  Two arms on different configs cannot share packed weights
or split-K workspaces (they depend on the tiles), so they share the input and the output
buffer (:func:`shared_buffers`), and are never called "same tile order".
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Mapping

from harness.errors import UserError
from harness.job.spec import TUNED_EACH
from harness.storage.field_names import Param

if TYPE_CHECKING:   # the report reads this module's words; it need not import the kernels (torch)
    from harness.job.plan import PlannedJob
    from harness.job.result import JobResult
    from kernels.base import Bound

SAME = "same"
#: ``compare.configs`` values.
CONFIG_MODES = (SAME, TUNED_EACH)
#: What each mode's verdict answers, as the job line, the tag ``compare.question`` and the report say it.
QUESTIONS = {SAME: "same config", TUNED_EACH: "best vs best"}
BEST_VS_BEST = QUESTIONS[TUNED_EACH]


def compare_configs(compare: Mapping, tune_mode: str) -> str | None:
    """``compare.configs`` as the job spec carries it: None for ``same``, ``tuned_each`` for
    best vs best.  Raises UserError (one line, exit 2) for a value that is not a mode, or for
    best vs best without tune mode or without a baseline: nothing would be tuned or compared."""
    value = str(compare.get("configs", SAME) or SAME).strip()
    if value not in CONFIG_MODES:
        raise UserError(f"compare.configs={value!r} is invalid; valid: {', '.join(CONFIG_MODES)} "
                        f"({SAME}: the baseline on the candidate's config; {TUNED_EACH}: each tuned, best vs best)")
    if value == SAME:
        return None
    if tune_mode != "fastest":   # none: nothing is tuned; table: one config per layer, whatever the swizzle
        raise UserError(f"compare.configs={TUNED_EACH} (best vs best) needs tune mode, which chooses each swizzle's "
                        f"config: add tune=fastest (tune={tune_mode} gives every swizzle the same config)")
    baseline = compare.get("baseline")
    if baseline is None or str(baseline).strip().lower() in ("", "none", "null"):
        raise UserError(f"compare.configs={TUNED_EACH} (best vs best) needs a baseline to compare with: "
                        "set compare.baseline (e.g. identity)")
    return value


def record_configs(result: JobResult, plan: PlannedJob) -> None:
    """Log the baseline's config (param ``baseline_config``) and the question the comparison
    answers (tag ``compare.question``) on a compared job's ``result``."""
    result.params[Param.BASELINE_CONFIG] = plan.baseline.config.label
    result.comparison.question = QUESTIONS[plan.spec.compare_configs or SAME]


def shared_buffers(kernel, ops, shape, tiles: Mapping[str, int], other_tiles: Mapping[str, int], bound: Bound) -> Bound:
    """The buffers an arm launched with ``tiles`` shares with an arm bound to ``bound`` with
    ``other_tiles``: all of them on the same tiles; on other tiles (best vs best) the output
    only, with constant operands (packed weights, workspaces) prepared for its own tiles."""
    from kernels.base import Bound

    if dict(tiles) == dict(other_tiles):
        return bound
    return Bound(kernel.prepare(ops, shape, tiles).operands, bound.out)


def comparison_head(question: str | None, params: Mapping[str, str]) -> str:
    """How the job line opens its comparison: ``vs identity`` (same config), or ``best vs best:
    M64 N32 K32 w4 s2 vs identity on M128 N32 K32 w4 s2`` (each arm on its own tuned config)."""
    baseline = params.get("compare.baseline", "?")
    if question != BEST_VS_BEST:
        return f"vs {baseline}"
    return (f"{BEST_VS_BEST}: {params.get('tune.config', '?')} vs {baseline} on "
            f"{params.get('baseline_config', '?')}")
