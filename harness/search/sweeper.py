"""Search mode: a Hydra sweeper that finds the best swizzle per (kernel, shape, target).

    python -m harness -m hydra/sweeper=swizzle_search kernel=igemm shape=resnet target=mi300x

The sweeper is a Hydra ``Sweeper`` (registered by ``hydra_plugins.swizzlebench_search``), so
launchers, the MLflow sweep callback (one parent run, every job a nested run) and the
report work as in any multirun.  For every combination of the command's overrides and
every shape of the chosen preset it runs one Optuna *study*:

1. **Built-ins** (``baselines``, default identity, grouped, xcd, xcd_grouped) are run as
   ordinary jobs: the reference each search result is compared with.
2. **Trials**: Optuna (TPE by default; ``sampler=random`` or ``exhaustive``) picks a family
   and its parameters (:mod:`harness.search.space`), the sweeper launches that job with
   ``shape.select=[<shape>]`` and reads the objective (``objective``, default the L2 hit
   rate, %) from the job's result (``JobReturn.return_value``: the task returns its
   JobResults).  Budget: ``n_trials`` evaluated trials per study (in total, over resumed
   runs) and ``timeout_s`` seconds of wall time per study per invocation.  With
   ``warm_start`` the family points equal to the built-ins are tried first.
3. **Confirmation**: the top ``confirm.top_k`` distinct candidates are launched once more
   with ``confirm.overrides`` (default ``resume=false ++compare.baseline=identity``: a fresh
   paired timing vs identity on a GPU); their ``speedup``, ``speedup_ci_lo``,
   ``speedup_ci_hi`` metrics and ``verdict`` tag are read when the job has them (on the
   CPU it has none: "not timed").

**Resume.**  Studies live in an Optuna SQLite storage (``storage``; default: next to the
MLflow SQLite store, ``<store>.optuna.db``), named after the experiment, the group, the
objective, the fixed overrides and the space.  A re-run of the same command loads them:
finished trials are not asked again, the sampler learns from them, built-ins already
measured are not re-run, and a candidate equal to an earlier one takes its value without
a job.  A job skipped by the harness's own ``resume`` (its spec already FINISHED in MLflow)
gets its value from that MLflow run.  Trials left running by a killed search are marked
failed.

At the end the sweeper writes ``reports/<experiment>/<sweep run id>/search.html`` (with
``search_trials.csv``; :mod:`harness.report.search`) and attaches them to the sweep's run.

Length: one Hydra Sweeper plugin: a study's steps (built-ins, trials, confirmation,
resume) share the sweeper's state (launcher, budget, storage), so they stay one class;
the space and the records are their own modules.
"""
from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import time
import warnings
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.utils import JobReturn, JobStatus
from hydra.plugins.sweeper import Sweeper
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig, OmegaConf

from harness.job.verdict import TIME
from harness.storage.field_names import Metric, Param, Tag, param_filter, tag_filter
from harness.storage.run_fields import VERDICT_TAGS, run_tags
from harness.storage.search_trials import (BUILTIN, CONFIRM, SEARCH_DIRECTION_TAG, SEARCH_OBJECTIVE_TAG, TRIAL,
                                    TrialRecord)
from harness.search.space import FAMILY_PARAM, Candidate, SearchSpace, formula_families

log = logging.getLogger("swizzlebench.search")

SAMPLERS = ("tpe", "random", "exhaustive")
DIRECTIONS = ("maximize", "minimize")
#: Overrides the search sets itself, per job (a shape.select of the command selects the
#: shapes to search; each job then gets its own).
_CONTROLLED = ("swizzle",)
#: Overrides that do not change what a job measures (left out of study names).
_NOT_MEASURED = ("tracking.", "hydra.", "experiment", "resume", "isolation.", "devices")


@dataclass
class ConfirmConf:
    """Top-k re-measurement at the end of each study."""

    top_k: int = 3
    overrides: List[str] = field(default_factory=lambda: ["resume=false", "++compare.baseline=identity"])


@dataclass
class SearchSweeperConf:
    """``hydra/sweeper=swizzle_search``: every field is ``hydra.sweeper.<field>=...``."""

    _target_: str = "hydra_plugins.swizzlebench_search.SwizzleSearchSweeper"
    families: List[str] = field(default_factory=lambda: ["grouped_m", "grouped_n", "tiled", "hilbert", "morton"])
    # name -> {expr: "...", params: {k: [choices]}}: formulas with free integer parameters
    formulas: Dict[str, Any] = field(default_factory=dict)
    # family -> param -> choices, replacing the defaults: +hydra.sweeper.space.tiled.tile_m=[1,2,4]
    space: Dict[str, Any] = field(default_factory=dict)
    baselines: List[str] = field(default_factory=lambda: ["identity", "grouped", "xcd", "xcd_grouped"])
    objective: str = "l2_hit_rate"     # a metric of the job's run
    direction: str = "maximize"
    n_trials: int = 40                 # evaluated trials per study (over resumed runs)
    timeout_s: float = 120.0           # wall time per study per invocation, s (built-ins included)
    sampler: str = "tpe"
    seed: int = 0
    batch_size: int = 1                # trials launched together (parallel with the joblib launcher)
    warm_start: bool = True            # try the family points equal to the built-ins first
    storage: Optional[str] = None      # Optuna storage URL; null: next to the MLflow SQLite store
    max_duplicates: int = 30           # consecutive repeated candidates before the space counts as exhausted
    confirm: ConfirmConf = field(default_factory=ConfirmConf)


@dataclass(frozen=True)
class SearchGroup:
    """What one study optimizes for: a kernel, one shape of a preset, a target, and the
    command's other overrides (``fixed``)."""

    kernel: str
    preset: str
    shape: str
    target: str
    tiles: tuple[tuple[str, int], ...]
    num_warps: int
    fixed: tuple[str, ...]

    @property
    def name(self) -> str:
        label = self.shape if self.preset == self.shape else f"{self.preset}-{self.shape}"
        extra = [o for o in self.measured_overrides() if o.split("=", 1)[0].lstrip("+~") not in
                 ("kernel", "shape", "target")]
        return f"{self.kernel}/{label}/{self.target}" + (f" [{' '.join(extra)}]" if extra else "")

    def measured_overrides(self) -> list[str]:
        return [o for o in self.fixed if not o.lstrip("+~").startswith(_NOT_MEASURED)]

    def job_overrides(self, candidate: Candidate) -> list[str]:
        return [*self.fixed, f"shape.select=[{self.shape}]", *candidate.overrides]


@dataclass(frozen=True)
class JobOutcome:
    """What a job said about one candidate: the objective (None when it failed) and why."""

    value: float | None
    status: str                    # COMPLETE or FAIL
    reason: str
    spec_hash: str = ""
    run_id: str = ""
    metrics: dict = field(default_factory=dict)
    tags: dict = field(default_factory=dict)

    def as_attrs(self, wall_s: float) -> dict:
        """JSON-able form, stored in the study (built-ins and confirmations)."""
        keep = ("speedup", "speedup_ci_lo", "speedup_ci_hi")
        return {"value": self.value, "status": self.status, "reason": self.reason[:500],
                "spec_hash": self.spec_hash, "run_id": self.run_id, "wall_s": wall_s,
                "metrics": {k: v for k, v in self.metrics.items() if k in keep},
                "verdict": self.tags.get(VERDICT_TAGS[TIME], "")}


def outcome_from_result(result: Any, metric: str) -> JobOutcome:
    """The outcome of one JobResult (harness.job.result) for ``metric``."""
    tags = run_tags(result)   # as the run carries them (harness.storage.run_fields)
    spec_hash = tags.get(Tag.SPEC_HASH, "")
    if result.status != "FINISHED":
        return JobOutcome(None, "FAIL", result.reason, spec_hash, metrics=result.metrics, tags=tags)
    value = result.metrics.get(metric)
    if value is None or (isinstance(value, float) and math.isnan(value)):
        present = ", ".join(sorted(result.metrics)) or "none"
        return JobOutcome(None, "FAIL", f"the run has no metric {metric!r} (its metrics: {present}; timing: "
                          f"{result.tags.get(Tag.TIMING, '-')})", spec_hash, metrics=result.metrics, tags=tags)
    return JobOutcome(float(value), "COMPLETE", result.reason, spec_hash, metrics=result.metrics, tags=tags)


class SearchSweeper(Sweeper):
    """The search sweeper; Hydra instantiates it as
    ``hydra_plugins.swizzlebench_search.SwizzleSearchSweeper`` with the fields of
    :class:`SearchSweeperConf`."""

    def __init__(self, families: Sequence[str], formulas: Any, space: Any, baselines: Sequence[str],
                 objective: str, direction: str, n_trials: int, timeout_s: float, sampler: str, seed: int,
                 batch_size: int, warm_start: bool, storage: Optional[str], max_duplicates: int,
                 confirm: Any) -> None:
        if direction not in DIRECTIONS:
            raise ValueError(f"hydra.sweeper.direction={direction!r} is invalid; valid: {', '.join(DIRECTIONS)}")
        if sampler not in SAMPLERS:
            raise ValueError(f"hydra.sweeper.sampler={sampler!r} is invalid; valid: {', '.join(SAMPLERS)}")
        for name, value in (("n_trials", n_trials), ("batch_size", batch_size), ("max_duplicates", max_duplicates)):
            if int(value) < 1:
                raise ValueError(f"hydra.sweeper.{name}={value!r} is invalid; valid: an integer >= 1")
        if not float(timeout_s) > 0:
            raise ValueError(f"hydra.sweeper.timeout_s={timeout_s!r} is invalid; valid: seconds > 0")
        from swizzles import SWIZZLES

        unknown = [b for b in baselines if b not in SWIZZLES]
        if unknown:
            raise ValueError(f"hydra.sweeper.baselines {unknown} are not built-in swizzles; valid: "
                             f"{', '.join(sorted(SWIZZLES))}")
        self.families = tuple(str(f) for f in families)
        self.formulas = formula_families(_plain(formulas))
        self.choices = flat_choices(_plain(space) or {})
        SearchSpace(self.families, self.formulas, 8, dict(self.choices))   # a bad space fails now, not per study
        self.baselines = tuple(str(b) for b in baselines)
        self.objective, self.direction = str(objective), str(direction)
        self.n_trials, self.timeout_s = int(n_trials), float(timeout_s)
        self.sampler, self.seed, self.batch_size = str(sampler), int(seed), int(batch_size)
        self.warm_start, self.storage = bool(warm_start), storage
        self.max_duplicates = int(max_duplicates)
        confirm = _plain(confirm) or {}
        self.confirm_top_k = int(confirm.get("top_k", 3))
        self.confirm_overrides = [str(o) for o in confirm.get("overrides", [])]
        self.hydra_context: Optional[HydraContext] = None
        self.config: Optional[DictConfig] = None
        self.launcher = None
        self.job_idx = 0
        self.records: list[TrialRecord] = []

    # -- Hydra's Sweeper interface -----------------------------------------------------
    def setup(self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig) -> None:
        from hydra.core.plugins import Plugins

        self.hydra_context = hydra_context
        self.config = config
        self.launcher = Plugins.instance().instantiate_launcher(
            hydra_context=hydra_context, task_function=task_function, config=config)

    def sweep(self, arguments: List[str]) -> list[TrialRecord]:
        """Run every study; returns the report rows (built-ins, trials, confirmations)."""
        from hydra._internal.core_plugins.basic_sweeper import BasicSweeper

        parser = OverridesParser.create(config_loader=self.hydra_context.config_loader)
        overrides = parser.parse_overrides(list(arguments))
        check_overrides(overrides)
        sweep_dir = Path(str(self.config.hydra.sweep.dir))
        sweep_dir.mkdir(parents=True, exist_ok=True)
        OmegaConf.save(self.config, sweep_dir / "multirun.yaml")
        self._tag_sweep_run()
        for combination in BasicSweeper.split_arguments(overrides, None)[0]:
            for group, cfg in self._groups(list(combination)):
                self._study(group, cfg, sweep_dir)
        self._write_report()
        return self.records

    # -- groups and studies --------------------------------------------------------------
    def _groups(self, combination: list[str]) -> list[tuple[SearchGroup, DictConfig]]:
        """One group per valid shape of the combination's preset (invalid ones are logged)."""
        from harness.notices import show
        from harness.preflight import resolve_target
        from harness.hardware.device import describe_device, select_execution_mode
        from harness.job.shapes import expand_preset

        cfg = self.hydra_context.config_loader.load_sweep_config(self.config, combination)
        cfg, notice = resolve_target(cfg, describe_device(select_execution_mode()))
        show(notice)
        fixed = tuple(o for o in combination if not o.lstrip("+~").startswith("shape.select"))
        groups = []
        for entry in expand_preset(cfg.shape):
            if entry.shape is None:
                log.warning("search: shape %s skipped: %s", entry.label, entry.error)
                continue
            groups.append((SearchGroup(
                kernel=str(cfg.kernel.name), preset=entry.preset, shape=entry.name, target=str(cfg.target.name),
                tiles=tuple((str(k), int(v)) for k, v in cfg.kernel.tiles.items()),
                num_warps=int(cfg.launch.num_warps), fixed=fixed), cfg))
        return groups

    def _space(self, cfg: DictConfig, sweep_dir: Path) -> SearchSpace:
        return SearchSpace(self.families, self.formulas, int(cfg.target.num_xcds), dict(self.choices),
                           formula_dir=sweep_dir / "formulas")

    def _study(self, group: SearchGroup, cfg: DictConfig, sweep_dir: Path) -> None:
        try:
            import optuna
        except ModuleNotFoundError:
            from harness.errors import UserError

            raise UserError("hydra/sweeper=swizzle_search needs optuna, an optional dependency: "
                            "pip install 'swizzlebench[search]'") from None
        from optuna.trial import TrialState

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        space = self._space(cfg, sweep_dir)
        storage = self.storage or default_storage(cfg)
        fixed_key = hashlib.sha256(json.dumps(sorted(group.measured_overrides())).encode()).hexdigest()[:8]
        study_name = (f"{cfg.experiment}|{group.kernel}/{group.preset}-{group.shape}/{group.target}|"
                      f"{self.objective}:{self.direction}|overrides {fixed_key}|space {space.fingerprint()}")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            study = optuna.create_study(storage=storage, study_name=study_name, direction=self.direction,
                                        sampler=self._sampler(), load_if_exists=True)
        started = time.monotonic()
        deadline = started + self.timeout_s
        log.info("search %s: study %r in %s (%d trials stored)", group.name, study_name, storage, len(study.trials))

        for name in self.baselines:                      # 1. the built-ins
            key = f"{BUILTIN}:{name}"
            if key not in study.user_attrs:
                candidate = Candidate(name, name, {}, (f"swizzle={name}",))
                (outcome, wall), = self._evaluate(group, cfg, [candidate])
                study.set_user_attr(key, outcome.as_attrs(wall))
                self._print(group, f"built-in {name}", outcome, wall)
        for stale in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):   # 2. a killed search's
            study.tell(stale.number, state=TrialState.FAIL)
        if self.warm_start:                              # 3. warm start
            for name in self.baselines:
                params = space.builtin_params(name)
                if params is not None:
                    study.enqueue_trial(params, user_attrs={"warm_start": name}, skip_if_exists=True)
        self._optimize(group, cfg, study, space, deadline)   # 4. the trials
        self._confirm(group, cfg, study, space)              # 5. top-k confirmation
        self.records.extend(study_records(group.name, study, space))
        log.info("search %s: done in %.1f s", group.name, time.monotonic() - started)

    def _optimize(self, group: SearchGroup, cfg: DictConfig, study: Any, space: SearchSpace,
                  deadline: float) -> None:
        from optuna.trial import TrialState

        known = {t.user_attrs["label"]: t for t in study.trials
                 if t.state in (TrialState.COMPLETE, TrialState.FAIL) and t.user_attrs.get("evaluated")}
        evaluated = len(known)
        repeats, exhausted = 0, False
        while (evaluated < self.n_trials and time.monotonic() < deadline and repeats < self.max_duplicates
               and not exhausted):
            batch: list[tuple[Any, Candidate]] = []
            while (len(batch) < min(self.batch_size, self.n_trials - evaluated) and repeats < self.max_duplicates
                   and not exhausted):
                trial = study.ask()
                candidate = space.suggest(trial)
                trial.set_user_attr("label", candidate.label)
                earlier = known.get(candidate.label)
                if earlier is not None or any(c.label == candidate.label for _, c in batch):
                    # Same swizzle as an earlier trial: its value, no job (resume never repeats a trial).
                    trial.set_user_attr("duplicate_of", earlier.number if earlier is not None else -1)
                    if earlier is not None and earlier.state == TrialState.COMPLETE:
                        exhausted = _tell(study, trial, earlier.value)
                    else:
                        exhausted = _tell(study, trial, state=TrialState.FAIL)
                    repeats += 1
                    continue
                repeats = 0
                batch.append((trial, candidate))
            if not batch:
                break
            for (trial, candidate), (outcome, wall) in zip(batch, self._evaluate(group, cfg, [c for _, c in batch])):
                for key, value in (("evaluated", True), ("wall_s", wall), ("spec_hash", outcome.spec_hash),
                                   ("run_id", outcome.run_id), ("reason", outcome.reason[:500])):
                    trial.set_user_attr(key, value)
                if outcome.value is None:
                    exhausted |= _tell(study, trial, state=TrialState.FAIL)
                else:
                    exhausted |= _tell(study, trial, outcome.value)
                known[candidate.label] = study.trials[trial.number]
                evaluated += 1
                self._print(group, f"trial {trial.number} ({evaluated}/{self.n_trials})", outcome, wall,
                            candidate.label, _best(study))
        if exhausted:
            log.info("search %s: the sampler has tried every point of the space", group.name)
        if repeats >= self.max_duplicates:
            log.info("search %s: %d repeated candidates in a row: the space looks exhausted", group.name, repeats)

    def _confirm(self, group: SearchGroup, cfg: DictConfig, study: Any, space: SearchSpace) -> None:
        """Re-measure the top-k distinct candidates with ``confirm.overrides`` (once per study)."""
        from optuna.trial import TrialState

        if self.confirm_top_k <= 0:
            return
        done = [t for t in study.trials if t.state == TrialState.COMPLETE]
        done.sort(key=lambda t: t.value, reverse=self.direction == "maximize")
        top, seen = [], set()
        for trial in done:
            label = trial.user_attrs.get("label")
            if label not in seen:
                seen.add(label)
                top.append(trial)
            if len(top) == self.confirm_top_k:
                break
        todo = [t for t in top if f"{CONFIRM}:{t.user_attrs['label']}" not in study.user_attrs]
        if not todo:
            return
        candidates = [space.candidate_from_params(t.params) for t in todo]
        confirming = [Candidate(c.label, c.family, c.params, (*c.overrides, *self.confirm_overrides))
                      for c in candidates]
        for candidate, (outcome, wall) in zip(confirming, self._evaluate(group, cfg, confirming, confirm=True)):
            study.set_user_attr(f"{CONFIRM}:{candidate.label}", outcome.as_attrs(wall))
            self._print(group, "confirm", outcome, wall, candidate.label)

    # -- jobs ------------------------------------------------------------------------------
    def _evaluate(self, group: SearchGroup, cfg: DictConfig, candidates: list[Candidate],
                  confirm: bool = False) -> list[tuple[JobOutcome, float]]:
        """Launch one job per candidate (one batch) and read each one's outcome; wall time
        per job in s (the batch's time split evenly).  A trial whose objective is not a
        paired metric measures no baseline (``compare.baseline=null``: half the work per
        trial), unless the command sets one; confirmations keep their own overrides."""
        batch = [group.job_overrides(c) for c in candidates]
        sets_baseline = any(o.lstrip("+~").startswith("compare.baseline") for o in group.fixed)
        if not confirm and not sets_baseline and not self.objective.startswith(("speedup", "l2_delta")):
            batch = [["compare.baseline=null", *overrides] for overrides in batch]
        self.validate_batch_is_legal(batch)
        started = time.monotonic()
        returns = self.launcher.launch(batch, initial_job_idx=self.job_idx)
        wall = (time.monotonic() - started) / len(batch)
        self.job_idx += len(batch)
        # JobReturns are not kept (each holds its whole config): a long search would hoard them.
        return [(self._outcome(group, cfg, c, r), wall) for c, r in zip(candidates, returns)]

    def _outcome(self, group: SearchGroup, cfg: DictConfig, candidate: Candidate, ret: JobReturn) -> JobOutcome:
        if ret.status == JobStatus.FAILED:
            error = getattr(ret, "_return_value", None)
            return JobOutcome(None, "FAIL", f"the job raised {type(error).__name__}: {error}")
        results = ret.return_value or []
        if results:
            return outcome_from_result(results[0], self.objective)
        # No result: the harness skipped the job, its spec already FINISHED (resume=true).
        return finished_outcome(cfg, group, candidate.label, self.objective)

    def _sampler(self) -> Any:
        import optuna

        if self.sampler == "random":
            return optuna.samplers.RandomSampler(seed=self.seed)
        if self.sampler == "exhaustive":
            return optuna.samplers.BruteForceSampler(seed=self.seed)
        startup = max(3, min(10, self.n_trials // 4))
        return optuna.samplers.TPESampler(seed=self.seed, multivariate=True, group=True, n_startup_trials=startup)

    def _print(self, group: SearchGroup, what: str, outcome: JobOutcome, wall: float, label: str = "",
               best: str = "") -> None:
        value = f"{self.objective} {outcome.value:.3f}" if outcome.value is not None else f"FAILED: {outcome.reason}"
        print(f"[search {group.name} | {what} | {wall:.1f} s] {label} {value}" + (f"  (best: {best})" if best else ""),
              flush=True)

    # -- report ----------------------------------------------------------------------------
    def _tag_sweep_run(self) -> None:
        """Tag the sweep's run with the objective, so that the sweep report shows a search section."""
        from harness.callbacks import SWEEP_ENV
        from harness.storage.spool import is_spool_id

        run_id = os.environ.get(SWEEP_ENV)
        if not run_id or is_spool_id(run_id):
            return
        try:
            client = _client(self.config)
            client.set_tag(run_id, SEARCH_OBJECTIVE_TAG, self.objective)
            client.set_tag(run_id, SEARCH_DIRECTION_TAG, self.direction)
        except Exception as exc:   # the search goes on; its report lacks the search section
            log.warning("sweep run %s not tagged as a search: %s", run_id, exc)

    def _write_report(self) -> None:
        """search.html + CSVs under reports/<experiment>/<sweep run id>/, attached to the sweep run."""
        if not self.records:
            return
        from harness.callbacks import SWEEP_ENV
        from harness.report.search import trial_frame, write_search_report

        run_id = os.environ.get(SWEEP_ENV)
        out_dir = Path("reports") / str(self.config.experiment) / (run_id or time.strftime("search-%Y%m%d-%H%M%S"))
        try:
            records = with_run_ids(self.config, self.records, run_id)
            path = write_search_report(trial_frame(records), self.objective, out_dir, self.direction)
        except Exception:   # the report never fails the search
            log.exception("search report failed; the trials are in the Optuna storage and MLflow")
            return
        log.info("Search report: %s", path)
        if run_id:
            _attach(self.config, run_id, out_dir)


# -- helpers -----------------------------------------------------------------------------

def check_overrides(overrides: Sequence[Any]) -> None:
    """Refuse overrides of what the search sets per job (parsed Hydra overrides)."""
    controlled = [o.input_line for o in overrides
                  if o.get_key_element().lstrip("+~").split("@")[0].startswith(_CONTROLLED)]
    if controlled:
        raise ValueError(f"the search chooses the swizzle of each job: remove {controlled} (restrict what "
                         "it tries with hydra.sweeper.families / hydra.sweeper.space / hydra.sweeper.formulas)")


def flat_choices(space: dict) -> dict[str, tuple[int, ...]]:
    """``{family: {param: [choices]}}`` (``hydra.sweeper.space``) as ``{"family.param": choices}``."""
    out = {}
    for family, params in space.items():
        if not isinstance(params, dict):
            raise ValueError(f"hydra.sweeper.space.{family} must map parameter names to lists of choices, e.g. "
                             f"+hydra.sweeper.space.{family}.<param>=[1,2,4]; got {params!r}")
        for name, values in params.items():
            if not isinstance(values, (list, tuple)) or not all(isinstance(v, int) for v in values):
                raise ValueError(f"hydra.sweeper.space.{family}.{name} must be a list of integers; got {values!r}")
            out[f"{family}.{name}"] = tuple(values)
    return out


def _plain(node: Any) -> Any:
    return OmegaConf.to_container(node, resolve=True) if OmegaConf.is_config(node) else node


def _tell(study: Any, trial: Any, value: float | None = None, state: Any = None) -> bool:
    """``study.tell``; True when the sampler has exhausted the space (BruteForceSampler then
    calls ``study.stop()``, which raises outside ``optimize`` after the trial is recorded)."""
    try:
        study.tell(trial, value, state=state)
    except RuntimeError as exc:
        if "Study.stop" not in str(exc):
            raise
        return True
    return False


def _best(study: Any) -> str:
    try:
        best = study.best_trial
    except ValueError:
        return ""
    return f"{best.value:.3f} {best.user_attrs.get('label', '')}"


def default_storage(cfg: DictConfig) -> str:
    """The Optuna storage next to the MLflow SQLite store (``<store>.optuna.db``), or
    ``swizzlebench-search.optuna.db`` in the launch directory for another store."""
    from harness.storage.tracking import resolve_tracking_uri

    base = str(cfg.hydra.runtime.cwd) if "hydra" in cfg else os.getcwd()
    uri = resolve_tracking_uri(str(cfg.tracking.uri), base)
    prefix = "sqlite:///"
    if uri.startswith(prefix) and not uri[len(prefix):].startswith(":memory:") and len(uri) > len(prefix):
        path = Path(uri[len(prefix):].partition("?")[0])
        return f"{prefix}{path.with_name(path.stem + '.optuna.db')}"
    return f"{prefix}{Path(base).resolve() / 'swizzlebench-search.optuna.db'}"


def finished_outcome(cfg: DictConfig, group: SearchGroup, label: str, metric: str) -> JobOutcome:
    """The outcome of the latest FINISHED MLflow run of this swizzle in this group (a job the
    harness skipped on resume), or a FAIL saying none was found."""
    client = _client(cfg)
    experiment = client.get_experiment_by_name(str(cfg.experiment))
    clauses = [param_filter(Param.SWIZZLE, label), param_filter(Param.KERNEL, group.kernel),
               param_filter(Param.TARGET, group.target), param_filter(Param.SHAPE_NAME, group.shape),
               param_filter(Param.SHAPE_PRESET, group.preset), param_filter(Param.NUM_WARPS, group.num_warps),
               *(param_filter(Param.TILE_PREFIX + k, v) for k, v in group.tiles), "attributes.status = 'FINISHED'"]
    runs = [] if experiment is None else client.search_runs(
        [experiment.experiment_id], filter_string=" and ".join(clauses), order_by=["attributes.start_time DESC"],
        max_results=1)
    if not runs:
        return JobOutcome(None, "FAIL", f"the job returned no result and no FINISHED run of {label} on "
                          f"{group.name} is in experiment {cfg.experiment!r}")
    run = runs[0]
    value = run.data.metrics.get(metric)
    if value is None:
        return JobOutcome(None, "FAIL", f"the FINISHED run {run.info.run_id} has no metric {metric!r}",
                          run.data.tags.get(Tag.SPEC_HASH, ""), run.info.run_id, run.data.metrics, run.data.tags)
    return JobOutcome(float(value), "COMPLETE", f"from FINISHED run {run.info.run_id} (skipped by resume)",
                      run.data.tags.get(Tag.SPEC_HASH, ""), run.info.run_id, run.data.metrics, run.data.tags)


def study_records(group: str, study: Any, space: SearchSpace) -> list[TrialRecord]:
    """Every built-in, trial and confirmation of a study, as report rows."""
    from optuna.trial import TrialState

    records = []
    for key, attrs in study.user_attrs.items():
        kind, _, label = key.partition(":")
        if kind in (BUILTIN, CONFIRM):
            metrics = attrs.get("metrics", {})
            records.append(TrialRecord(
                group=group, kind=kind, number=-1, label=label, family=label if kind == BUILTIN else "",
                params="{}", value=math.nan if attrs["value"] is None else attrs["value"], status=attrs["status"],
                reason=attrs["reason"], wall_s=attrs["wall_s"], run_id=attrs["run_id"], spec_hash=attrs["spec_hash"],
                speedup=metrics.get(Metric.SPEEDUP, math.nan),
                speedup_ci_lo=metrics.get(Metric.SPEEDUP_CI_LO, math.nan),
                speedup_ci_hi=metrics.get(Metric.SPEEDUP_CI_HI, math.nan), verdict=attrs.get("verdict", "")))
    # A repeated candidate (no job of its own) points at the run of the trial it repeats.
    spec_of = {t.user_attrs["label"]: t.user_attrs.get("spec_hash", "") for t in study.trials
               if t.user_attrs.get("evaluated")}
    for trial in study.trials:
        if trial.state not in (TrialState.COMPLETE, TrialState.FAIL) or "label" not in trial.user_attrs:
            continue
        attrs = trial.user_attrs
        family = trial.params.get(FAMILY_PARAM, "")
        prefix = f"{family}."
        params = {k[len(prefix):]: v for k, v in trial.params.items() if k.startswith(prefix)}
        status = "DUPLICATE" if "duplicate_of" in attrs else trial.state.name
        records.append(TrialRecord(
            group=group, kind=TRIAL, number=trial.number, label=attrs["label"], family=family,
            params=json.dumps(params, sort_keys=True), value=trial.value if trial.value is not None else math.nan,
            status=status, reason=attrs.get("reason", ""), wall_s=attrs.get("wall_s", math.nan),
            run_id=attrs.get("run_id", ""), spec_hash=attrs.get("spec_hash") or spec_of.get(attrs["label"], "")))
    return records


def with_run_ids(config: DictConfig, records: list[TrialRecord], sweep_run_id: str | None) -> list[TrialRecord]:
    """The records with the MLflow run id of their job filled in from the spec hash: the
    newest run of this sweep with that hash, else the FINISHED run of an earlier sweep."""
    from harness.storage.tracking import PARENT_TAG

    client = _client(config)
    experiment = client.get_experiment_by_name(str(config.experiment))
    if experiment is None:
        return records
    runs = [] if not sweep_run_id else client.search_runs(
        [experiment.experiment_id], filter_string=tag_filter(PARENT_TAG, sweep_run_id),
        order_by=["attributes.start_time ASC"], max_results=50000)
    # A confirmation re-runs its trial's spec: the trial is the oldest run of a hash, the
    # confirmation the newest.
    oldest, newest = {}, {}
    for run in runs:
        oldest.setdefault(run.data.tags.get(Tag.SPEC_HASH), run.info.run_id)
        newest[run.data.tags.get(Tag.SPEC_HASH)] = run.info.run_id
    out = []
    for record in records:
        latest = record.kind == CONFIRM
        run_id = record.run_id or (newest if latest else oldest).get(record.spec_hash, "")
        if not run_id and record.spec_hash:
            found = client.search_runs([experiment.experiment_id], max_results=1,
                                       filter_string=tag_filter(Tag.SPEC_HASH, record.spec_hash),
                                       order_by=[f"attributes.start_time {'DESC' if latest else 'ASC'}"])
            run_id = found[0].info.run_id if found else ""
        out.append(replace(record, run_id=run_id))
    return out


def _client(config: DictConfig) -> Any:
    """An MlflowClient of the job's tracking store."""
    from mlflow.tracking import MlflowClient

    from harness.storage.tracking import resolve_tracking_uri

    return MlflowClient(tracking_uri=resolve_tracking_uri(str(config.tracking.uri), str(config.hydra.runtime.cwd)))


def _attach(config: DictConfig, run_id: str, out_dir: Path) -> None:
    """Log the search report's files to the sweep's parent run (artifact folder ``search``)."""
    try:
        client = _client(config)
        for name in ("search.html", "search_trials.csv", "search_summary.csv"):
            client.log_artifact(run_id, str(out_dir / name), artifact_path="search")
    except Exception as exc:   # the report is on disk either way
        log.warning("search report not attached to run %s: %s", run_id, exc)
