"""Tune mode inside one job (:func:`tune_job`): which config the job launches, and, in best-vs-best
mode (``compare.configs=tuned_each``, :mod:`harness.tune.best_vs_best`), which config its
baseline launches.

* ``compare.configs=same`` (default): one tuning, with the baseline's swizzle fixed, so that
  every swizzle is then compared on that one config ("same config, other order");
* ``compare.configs=tuned_each``: the candidate is tuned with its *own* swizzle fixed and the
  baseline with the baseline's (the config each would ship with); the comparison is then
  the two tuned kernels, each on its own config ("best vs best").

The trials are timed on the GPU by the paired rounds' own loop (one arm), on the CPU by the
interpreter's wall clock (``tune.on_cpu``: no speed), or, with a stand-in timer
(``compare.timer=module:function``), by that timer: each trial is its arm
``tune:<swizzle>:<config label>``, so tests can decide which config wins for which swizzle.
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Callable

import numpy as np

from harness.hardware.device import GPU, DeviceInfo
from harness.measure.correctness import make_operands
from harness.job.plan import PlannedJob
from harness.job.result import JobResult
from harness.job.shapes import downscale
from harness.job.spec import TUNED_EACH
from harness.measure.timing import PairedSettings, load_standin_timer, time_interleaved
from harness.tune.search import TABLE, TuneCache, TuneError, TuneOptions, TuneResult, tune_kernel
from kernels.tuning import Config
from harness.tune.ties import Remeasured
from harness.storage.field_names import BASELINE_PREFIX, Param, Tag
from harness.storage.run_fields import spec_params
from kernels.base import SwizzleBinding, ToolchainError
from kernels.tuned import TableChoice, load_table, table_path


#: Targets without a table of their own that take another's: the H200 is the H100's chip
#: (132 SMs, sm_90, the same tensor cores) with more and faster memory.
TABLE_FALLBACK = {"h200": "h100"}


def table_job(plan: PlannedJob, arch: str | None, result: JobResult, off_target: bool = False) -> PlannedJob:
    """``tune=table``: the config of this layer in the kernel's committed table for the target
    (:mod:`kernels.tuned`; a layer outside it takes its nearest entry's config), on every
    device and with no timing; the configured config where the kernel has no table there.
    ``off_target``: this machine is not the target's GPU (the CPU); where the table config the
    target launches is one this machine's Triton cannot build (:class:`kernels.base.ToolchainError`),
    the job launches the config it can, and the simulated L2 predicts for the target's
    (:func:`_predict_for_target`)."""
    spec, kernel, target = plan.requested, plan.kernel, plan.target
    table = load_table(kernel.name, target)
    borrowed = ""
    if table is None and target in TABLE_FALLBACK:
        target = TABLE_FALLBACK[target]
        table = load_table(kernel.name, target)
        borrowed = f" ({plan.target} has no table of its own: {target}'s)"
    vendor = "amd" if (arch or "").startswith("gfx") else "nvidia"

    def refusal(cfg: Config, here: bool = True) -> str | None:
        """Why ``cfg`` cannot run on this layer: on the target, or (``here``) built by this
        machine's Triton; None: it can."""
        try:
            kernel.check_target(spec.shape, kernel.check_tiles(cfg.tiles_dict), vendor, arch or "sm_90")
            return None
        except ToolchainError as exc:
            return str(exc) if here else None
        except ValueError as exc:
            return str(exc)

    choice = table.lookup(spec.shape, lambda config: refusal(config) is None) if table is not None else None
    theirs = (table.lookup(spec.shape, lambda config: refusal(config, here=False) is None)
              if table is not None and off_target else None)
    name = table_path(kernel.name, target).name
    launched = plan
    if choice is None:
        why = "no table" if table is None else "no entry of this kind of layer"
        result.tags[Tag.TUNE] = f"table: {why} for {kernel.name} on {plan.target}; the configured config runs"
    else:
        result.params.update({Param.TUNE_TABLE: name, Param.TUNE_TABLE_TARGET: target,
                              Param.TUNE_TABLE_ENTRY: choice.source,
                              Param.TUNE_CONFIGURED: plan.candidate.config.label,
                              Param.TUNE_CHOSEN: choice.config.label})
        how = "its own entry" if choice.exact else f"the nearest entry, {choice.source}"
        if choice.tuned_on:
            how += f", tuned on an {choice.tuned_on}"
        refused = ""
        if choice.refused is not None:
            how = "its own entry's fallback config"
            refused = f"; its own config {choice.refused.label} is refused here: {refusal(choice.refused)}"
        result.tags[Tag.TUNE] = f"table {name}{borrowed}: {how} ({table.how.split(':')[0]}, not timed here){refused}"
        launched = plan.with_configs(choice.config)
        result.params.update(spec_params(launched.spec))
        result.launched = launched.spec
        result.run_name = launched.spec.run_name   # the config it ran, e.g. its tuned warps
    if theirs is not None:
        _predict_for_target(launched, theirs, f"{name}{borrowed}", refusal(theirs.config) or "", result)
    return launched


def _predict_for_target(plan: PlannedJob, theirs: TableChoice, table: str, why: str, result: JobResult) -> None:
    """The simulated L2 of a job launched on ``plan`` here predicts for ``theirs``, the
    config the target launches on this layer (from ``table``; ``why``: why this machine cannot
    build it): :attr:`JobResult.target_launch` carries its spec to the L2 stage; params
    ``sim.config`` (its label) and ``sim.family`` (the family whose code it runs, whose error
    bands the prediction takes) and the tag ``sim_config`` say so, beside the launched config's
    ``tile.*`` and ``tune.chosen``.  Nothing where ``theirs`` is the launched config."""
    target = plan.with_configs(theirs.config)
    if (target.candidate.tiles, target.candidate.launch) == (plan.candidate.tiles, plan.candidate.launch):
        return
    family = plan.kernel.family_for(target.candidate.tiles).name
    here = plan.kernel.family_for(plan.candidate.tiles).name
    result.target_launch = target.spec
    result.params.update({Param.SIM_CONFIG: theirs.config.label, Param.SIM_FAMILY: family})
    result.tags[Tag.SIM_CONFIG] = (f"predicted for {family} {theirs.config.label}, the config {plan.target} launches "
                                 f"on this layer ({table}: {theirs.source}); this machine launches {here} "
                                 f"{plan.candidate.config.label} instead, as it cannot build that one: {why}")


def tune_job(plan: PlannedJob, device: DeviceInfo, topt: TuneOptions, result: JobResult,
             standin: str | None = None, arch: str | None = None) -> PlannedJob:
    """Tune mode: the chosen verified config of the kernel's candidate space for this shape
    (:mod:`harness.tune.search`; near-ties broken by the tie rule), cached.  Returns the plan
    to launch (:meth:`PlannedJob.with_configs`), with, in best-vs-best mode, its baseline's own
    tuned config, and records both on ``result``; or the plan unchanged where there is
    nothing to tune on.  ``standin``: a stand-in timer's import path (``compare.timer``) that
    then times the trials.  ``tune=table``: :func:`table_job` (for the target's ``arch``).
    Raises TuneError."""
    if topt.mode == TABLE:
        return table_job(plan, arch, result, off_target=device.mode != GPU)
    spec, kernel = plan.requested, plan.kernel
    if device.mode != GPU and not topt.on_cpu:
        result.tags[Tag.TUNE] = "not tuned: no GPU (the configured config is launched; tune.on_cpu=true tunes " \
                              "under the interpreter, by wall clock)"
        return plan
    shape = spec.shape if device.mode == GPU else downscale(spec.shape)
    ops = make_operands(shape, kernel.has_bias, spec.input_seed, device.torch_device, spec.input_layout)
    trials = _Trials(kernel, shape, ops, Config.make(spec.tiles_dict, spec.num_warps, spec.num_stages), device,
                     topt, standin)
    note = "" if device.mode == GPU or standin else " [interpreter wall clock: not a speed]"
    if standin:
        note = f" [stand-in timer {standin}: not a speed]"
    base_name, base_formula = spec.tune_swizzle
    fixed = SwizzleBinding(plan.tune_remap, spec.num_xcds, spec.group_size)
    best_vs_best = spec.compare_configs == TUNED_EACH
    if best_vs_best:    # the candidate on its own swizzle: the config it would ship with
        tuned = trials.run(plan.candidate.binding, spec.swizzle_fn or spec.swizzle_formula or spec.swizzle)
    else:
        tuned = trials.run(fixed, base_formula or base_name)
    result.params[Param.TUNE_CONFIGURED] = trials.default.label
    _record(result, tuned, "", note)
    base_config = None
    if best_vs_best and spec.has_baseline:   # the baseline on its own swizzle, tuned the same way
        try:
            base = trials.run(fixed, base_formula or base_name)
        except TuneError as exc:
            raise TuneError(f"baseline {spec.baseline}: {exc}") from None
        base_config = base.config
        _record(result, base, BASELINE_PREFIX, note)
        result.tags[Tag.TUNE] += f"; baseline {spec.baseline} {result.tags.pop(BASELINE_PREFIX + Tag.TUNE)}"
    launched = plan.with_configs(tuned.config, base_config)
    result.params.update(spec_params(launched.spec))
    result.launched = launched.spec
    result.run_name = launched.spec.run_name   # the config it ran, e.g. its tuned warps
    return launched


@dataclass(frozen=True)
class _Trials:
    """What every tuning of one job shares: the kernel, the shape and operands the trials run
    on, the configured config, the device and the tune options, the stand-in timer if any."""

    kernel: object
    shape: object
    ops: object
    default: Config
    device: DeviceInfo
    topt: TuneOptions
    standin: str | None

    def run(self, swizzle: SwizzleBinding, swizzle_name: str) -> TuneResult:
        """One tuning of the kernel on the shape with ``swizzle`` fixed (cached under its name)."""
        return tune_kernel(self.kernel, self.shape, self.ops, swizzle,
                           trial_timer(self.device, self.topt, self.standin, swizzle_name),
                           default=self.default, cache=TuneCache(self.topt.cache_dir), swizzle_name=swizzle_name,
                           paired_time_fn=finalist_timer(self.device, self.topt, self.standin), rule=self.topt.tie_rule)


def _record(result: JobResult, tuned: TuneResult, prefix: str, note: str) -> None:
    """A tuning's choice, runner-ups and trials on ``result``, names prefixed by ``prefix``."""
    result.params.update({prefix + k: v for k, v in tuned.as_params().items()})
    result.tags.update({prefix + k: v for k, v in tuned.as_tags().items()})
    result.tags[prefix + Tag.TUNE] = tuned.summary + note
    result.artifacts[prefix.replace(".", "_") + "tune_trials.json"] = json.dumps(
        [t.as_dict() for t in tuned.trials], indent=1)
    if tuned.tie is not None:
        result.artifacts[prefix.replace(".", "_") + "tune_finalists.json"] = json.dumps(tuned.tie.as_dict(), indent=1)


def trial_timer(device: DeviceInfo, topt: TuneOptions, standin: str | None = None,
                swizzle_name: str = "identity") -> Callable[[Callable[[], None]], float]:
    """``run -> ms`` for tuning trials.  On a GPU: the paired rounds' own loop with one arm
    (harness.measure.timing: L2 cleared before every launch, batches queued behind a GPU
    hold so that CPU launch overhead is never counted), ``tune.rounds`` rounds of 3 launches,
    median (not ``triton.testing.do_bench``, whose launches are not held: a config with more
    launch overhead could drain the queue and be timed slower than it is).  On the CPU: the interpreter's wall clock.  With a
    stand-in timer: its time for arm ``tune:<swizzle_name>:<config label>`` (the run's
    ``config_label``, set by :func:`harness.tune.search.tune_kernel`)."""
    if standin:
        fn, rng = load_standin_timer(standin), np.random.default_rng(0)
        return lambda run: float(fn(f"tune:{swizzle_name}:{getattr(run, 'config_label', '?')}", 0, 0, rng))
    if device.mode == GPU:
        settings = PairedSettings(launches_per_round=3, min_rounds=topt.rounds, check_every=topt.rounds, max_time_s=60.0,
                                  warmup_ms=topt.warmup_ms)
        return lambda run: float(np.median(time_interleaved({"trial": run}, settings, seed=0).per_round("trial")))

    def wall_ms(run) -> float:
        start = time.perf_counter()
        run()
        return (time.perf_counter() - start) * 1e3

    return wall_ms


#: Rounds per batch of the finalists' paired rounds: every batch is queued behind its own GPU
#: hold (harness.measure.timing), sized from the batch before, and must be short enough to
#: stay inside it (5 rounds: 90 launches for 6 finalists); a batch that outlasts its hold lets
#: the queue run dry and counts the CPU launch overhead of its later launches.
FINAL_BATCH_ROUNDS = 5


def final_round_plan(rounds: int, placements: int) -> tuple[int, int]:
    """(rounds per batch, rounds in all) for ``rounds`` paired rounds over ``placements``:
    batches of at most :data:`FINAL_BATCH_ROUNDS` rounds take the placements in turn, and the
    total is rounded up so that every placement gets as many rounds."""
    per_batch = max(1, min(FINAL_BATCH_ROUNDS, rounds // max(1, placements)))
    cycle = per_batch * max(1, placements)
    return per_batch, -(-rounds // cycle) * cycle


def finalist_timer(device: DeviceInfo, topt: TuneOptions, standin: str | None = None):
    """``[{arm: run}, ...] -> Remeasured`` (keyed by arm) for the tie rule's finalists, or None
    off the GPU and with a stand-in timer (the single-shot times decide ties there).  On a
    GPU: one arm per finalist in ``tune.final_rounds`` interleaved rounds of 3 launches (the
    round's median), L2 flushed before every launch, as the trials are timed, in batches of
    at most :data:`FINAL_BATCH_ROUNDS` rounds that take the operand placements given in turn
    (:func:`final_round_plan`); each call (a pass of the tie rule) draws other arm orders."""
    if device.mode != GPU or standin:
        return None
    passes = [0]

    def paired_ms(placements: list[dict]) -> Remeasured:
        per_batch, total = final_round_plan(topt.final_rounds, len(placements))
        settings = PairedSettings(launches_per_round=3, min_rounds=total, max_rounds=total, check_every=per_batch,
                                  max_time_s=60.0, warmup_ms=topt.warmup_ms)
        samples = time_interleaved(placements, settings, seed=passes[0])
        passes[0] += 1
        return Remeasured({name: samples.per_round(name) for name in placements[0]}, list(samples.placements),
                          samples.drained_batches)

    return paired_ms
