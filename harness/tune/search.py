"""Tune mode: pick the fastest *verified* launch config of a kernel for one problem (near-ties
broken by a fixed rule), once, remember it, and hand back that one config for everything
that follows.

A config is the kernel's tile sizes and flags plus ``num_warps`` and ``num_stages``.  For a
(kernel, shape, dtype, device) the tuner

1. looks the problem up in a cache (:mod:`harness.tune.cache`, shareable) keyed on
   the device name, the Triton version and a hash of the kernel's source (so a new GPU,
   compiler or kernel re-tunes; nothing else does);
2. otherwise runs every candidate of the kernel's space (:func:`candidates`): a candidate is
   first verified (its output against conv2d; a wrong or failing config is a *trial*, never
   a choice), then timed once;
3. chooses by the tie rule (:mod:`harness.tune.ties`): the verified candidates within
   ``tune.tie_band`` of the fastest (at least ``tune.min_finalists`` of them) are re-measured
   together in paired rounds over several operand placements (GPU), and among those tied with
   the fastest (within ``tune.tie_tolerance`` or the CI) the simplest wins, so that noise does
   not pick the config; the choice, its finalists and their gaps are written to the cache with
   every trial;
4. returns a :class:`TuneResult` whose ``config`` the job then gates, measures and profiles.
   Trials are never measured or profiled by anything else: profilers see the chosen config
   only.

The swizzle is fixed while tuning (the job's baseline, identity by default): the config
must not be chosen for, or against, the swizzle under test.

Everything here is pure Python over callables (``verify``, ``measure``, ``remeasure``), so it is tested on
the CPU with stand-ins; :func:`tune_kernel` builds the real callables from a kernel.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable, Iterable, Mapping, Sequence

from harness.tune.cache import CacheKey, TuneCache, cache_key
from harness.tune.modes import FASTEST, NONE, TABLE, TUNE_MODES  # noqa: F401 (API: the tune modes)
from harness.tune.cache import default_cache_dir, kernel_source_hash, resolve_cache_dir  # noqa: F401 (API)
from kernels import get_kernel
from kernels.problem import ConvShape
from kernels.tuning import Config, DeviceTraits
from harness.tune.ties import RULE_LEGACY, Remeasure, Remeasured, TieDecision, TieRule, decide
from harness.storage.field_names import Param, Tag
from harness.storage.run_fields import flag_text


# -----------------------------------------------------------
# Configs and the device traits a candidate space depends on.

#: The tie rule's ``tune.*`` keys, as TuneOptions names them (checked by TieRule).
TIE_KEYS = ("tie_band", "finalists", "final_rounds", "tie_tolerance", "min_finalists", "max_final_rounds",
            "final_placements")


@dataclass(frozen=True)
class TuneOptions:
    """The ``tune`` config group, as the job pipeline reads it."""

    mode: str = NONE                # NONE (the configured config), FASTEST or TABLE (TUNE_MODES)
    cache_dir: str | None = None    # None: default_cache_dir()
    warmup_ms: float = 5.0          # warm-up launches per trial, ms
    rounds: int = 10                # timed rounds per trial (3 launches each; median), GPU
    on_cpu: bool = False            # also tune under the CPU interpreter (wall clock: exercises
                                    # the pipeline, says nothing about speed)
    compile_jobs: int = 8           # processes compiling a job's candidates before its trials (GPU)
    tie_band: float = 0.03          # finalists: within this fraction of the fastest single-shot time
    finalists: int = 6              # at most this many finalists (1: plain argmin)
    final_rounds: int = 30          # paired rounds re-measuring the finalists, per pass (GPU)
    tie_tolerance: float = 0.02     # tied with the fastest finalist: within this fraction, or its CI
    min_finalists: int = 4          # at least this many finalists, the next fastest filling up
    max_final_rounds: int = 90      # more passes while a finalist's CI contains 1 + tie_tolerance, up to this
    final_placements: int = 6       # operand placements the finalists' rounds are spread over (GPU)

    def __post_init__(self):
        if self.mode not in TUNE_MODES:
            raise ValueError(f"tune={self.mode!r} is invalid; valid: {', '.join(TUNE_MODES)}")
        _ = self.tie_rule   # checks the tie knobs now: a UserError naming the bad one

    @property
    def tie_rule(self) -> TieRule:
        """The tie rule's knobs (:mod:`harness.tune.ties`)."""
        return TieRule(self.tie_band, self.finalists, self.final_rounds, self.tie_tolerance, self.min_finalists,
                       self.max_final_rounds, self.final_placements)

# -----------------------------------------------------------
# The tuner.

@dataclass(frozen=True)
class Trial:
    config: Config
    time_ms: float | None = None      # None: not timed (failed verification or raised)
    error: str | None = None

    def as_dict(self) -> dict:
        return {"config": self.config.as_dict(), "time_ms": self.time_ms, "error": self.error}

    @classmethod
    def from_dict(cls, d: Mapping) -> "Trial":
        return cls(Config.from_dict(d["config"]), d.get("time_ms"), d.get("error"))


@dataclass
class TuneResult:
    config: Config
    time_ms: float                    # the chosen config's single-shot time during tuning, ms
    trials: list[Trial] = field(default_factory=list)
    from_cache: bool = False
    cost_s: float = 0.0               # wall time of this tuning (0 for a cache hit), s
    key: CacheKey | None = None
    tie: TieDecision | None = None    # how the tie rule chose; None: a cache entry from before it

    @property
    def near_tie(self) -> bool | None:
        """More than one finalist was tied with the fastest (None: not recorded)."""
        return None if self.tie is None else self.tie.near_tie

    @property
    def summary(self) -> str:
        ok = sum(t.time_ms is not None for t in self.trials)
        origin = "cache" if self.from_cache else f"{len(self.trials)} trials ({ok} verified), {self.cost_s:.1f} s"
        tied = "" if not self.near_tie else \
            f"; near-tie: simplest of {sum(f.tied for f in self.tie.finalists)} tied finalists"
        return f"tuned: {self.config.label} ({self.time_ms:.4f} ms; {origin}{tied})"

    def as_params(self) -> dict[str, str]:
        """For the job's run: the chosen config, how it was chosen, and the runner-ups with
        their gaps to it (``tune.runner_ups``: label, gap in % [95 % CI in %], ``tied``), and how
        the finalists were re-measured (``tune.final_measurement``: rounds, passes, placements,
        finalists left unsettled, drained batches)."""
        P = Param
        return {P.TUNE_CONFIG: self.config.label, P.TUNE_TIME_MS: f"{self.time_ms:.6f}",
                P.TUNE_TRIALS: str(len(self.trials)), P.TUNE_FROM_CACHE: str(self.from_cache),
                P.TUNE_COST_S: f"{self.cost_s:.2f}",
                P.TUNE_RUNNER_UPS: "not recorded" if self.tie is None else self.tie.runner_ups_text,
                P.TUNE_FINAL_ROUNDS: str(0 if self.tie is None else self.tie.rounds),
                P.TUNE_FINAL_MEASUREMENT: "not recorded" if self.tie is None else self.tie.measurement}

    def as_tags(self) -> dict[str, str]:
        """``tune.near_tie`` (true / false / unknown) and ``tune.rule`` (the rule's name)."""
        near = self.near_tie
        return {Tag.TUNE_NEAR_TIE: "unknown" if near is None else flag_text(near),
                Tag.TUNE_RULE: RULE_LEGACY if self.tie is None else self.tie.rule}


class TuneError(RuntimeError):
    """No candidate passed verification."""


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0][:300] if text else ''}"


def tune(configs: Iterable[Config], measure: Callable[[Config], float],
         verify: Callable[[Config], str | None] | None = None, cache: TuneCache | None = None,
         key: CacheKey | None = None, log: Callable[[str], None] | None = None,
         clock: Callable[[], float] = time.perf_counter, remeasure: Remeasure | None = None,
         rule: TieRule = TieRule()) -> TuneResult:
    """Return the verified config among ``configs`` that the tie rule chooses
    (:mod:`harness.tune.ties`: the fastest, or the simplest of those tied with it).

    ``verify(cfg)`` returns None when the config computes the right output, else why not;
    ``measure(cfg)`` returns its single-shot time in ms.  Both may raise (a config that does not
    compile): that config becomes a failed trial.  ``remeasure(finalists)`` returns their
    per-round times (ms) from paired rounds; None: the single-shot times decide ties.  With
    ``cache`` and ``key`` a stored choice is returned without running anything, and a new
    choice is stored.
    """
    say = log or (lambda _msg: None)
    if cache is not None and key is not None:
        entry = cache.get(key)
        if entry is not None:
            config = Config.from_dict(entry["config"])
            tie = TieDecision.from_dict(entry["tie"], config) if entry.get("tie") else None   # older: none
            result = TuneResult(config, float(entry["time_ms"]), [Trial.from_dict(t) for t in entry.get("trials", [])],
                                True, 0.0, key, tie)
            say(f"{result.summary}")
            return result
    start = clock()
    trials = []
    for cfg in configs:
        try:
            problem = verify(cfg) if verify is not None else None
            trial = Trial(cfg, error=problem) if problem else Trial(cfg, time_ms=float(measure(cfg)))
        except Exception as exc:   # a config that fails to compile or launch is a failed trial
            trial = Trial(cfg, error=_first_line(exc))
        trials.append(trial)
    timed = [t for t in trials if t.time_ms is not None]
    if not timed:
        reasons = "; ".join(f"{t.config.label}: {t.error}" for t in trials[:5])
        raise TuneError(f"no verified config among {len(trials)} candidates ({reasons})")
    tie = decide({t.config: t.time_ms for t in timed}, rule, remeasure)
    chosen = next(t for t in timed if t.config == tie.config)
    result = TuneResult(chosen.config, chosen.time_ms, trials, False, clock() - start, key, tie)
    if cache is not None and key is not None:
        cache.put(key, {"config": chosen.config.as_dict(), "time_ms": chosen.time_ms, "cost_s": result.cost_s,
                        "trials": [t.as_dict() for t in trials], "tie": tie.as_dict()})
    say(result.summary)
    return result


#: ``paired_time_fn([{arm: run}, ...]) -> Remeasured`` (keyed by arm) or ``{arm: per-round
#: times, ms}``: every arm timed in the same interleaved rounds, spread over the placements
#: given (one dict of launches per placement, the same arms; on a GPU:
#: :func:`harness.measure.timing.time_interleaved`).
PairedTimeFn = Callable[[list[dict[str, Callable[[], None]]]], "Remeasured | Mapping[str, Sequence[float]]"]


def tune_kernel(kernel, shape: ConvShape, ops, swizzle, time_fn: Callable[[Callable[[], None]], float],
                configs: Sequence[Config] | None = None, cache: TuneCache | None = None,
                swizzle_name: str = "identity", log: Callable[[str], None] | None = None,
                default: Config | None = None, paired_time_fn: PairedTimeFn | None = None,
                rule: TieRule = TieRule()) -> TuneResult:
    """Tune ``kernel`` on ``shape`` with real launches: each candidate is bound to ``ops``
    (the job's operands, on the device) with the fixed ``swizzle`` binding, verified against
    conv2d exactly as the correctness gate does, then timed by ``time_fn(run) -> ms``; the
    finalists of the tie ``rule`` are bound again, on ``ops`` and on ``rule.placements - 1``
    copies of them at other addresses (:func:`harness.measure.correctness.placed_copies`), and re-timed together by
    ``paired_time_fn`` (None: the single-shot times decide ties).  ``configs``: the candidates
    (default: the kernel's space; ``default``, the configured config, for a kernel without one)."""
    import torch

    from harness.measure.correctness import compare, placed_copies, reference
    from kernels.base import LaunchConfig

    traits = DeviceTraits.of(ops.x.device)
    configs = list(configs) if configs is not None else candidates(kernel.name, shape, traits, default)
    key = cache_key(kernel, shape, traits, swizzle_name, configs)
    expected = reference(ops, shape)
    bound: dict[Config, Callable[[], None]] = {}

    def launch_of(cfg: Config, operands=ops):
        return kernel.bind(operands, shape, cfg.tiles_dict, swizzle, LaunchConfig(cfg.num_warps, cfg.num_stages))

    def verify(cfg: Config) -> str | None:
        run, out = launch_of(cfg)
        run.config_label = cfg.label   # type: ignore[attr-defined]  (names the trial for a stand-in timer)
        bound[cfg] = run
        run()
        if ops.x.device.type == "cuda":
            torch.cuda.synchronize()
        verdict = compare(kernel.output_as_nchw(out), expected, shape.dtype)
        return None if verdict.ok else verdict.reason

    def measure(cfg: Config) -> float:
        return time_fn(bound.pop(cfg))

    placed: list[tuple] = []                   # (operands, spacer) per placement, made once per tuning
    runs: dict[tuple[Config, int], Callable[[], None]] = {}   # (finalist, placement) -> its bound launch

    def run_on(cfg: Config, p: int) -> Callable[[], None]:
        if (cfg, p) not in runs:   # bound once: another pass launches on the same buffers
            runs[(cfg, p)] = launch_of(cfg, placed[p][0])[0]
        return runs[(cfg, p)]

    def remeasure(finalists: Sequence[Config]) -> Remeasured:
        if not placed:
            placed.extend([(ops, None)] + placed_copies(ops, rule.placements - 1, seed=0))
        placements = [{f"finalist{i}": run_on(cfg, p) for i, cfg in enumerate(finalists)} for p in range(len(placed))]
        measured = paired_time_fn(placements)
        if not isinstance(measured, Remeasured):
            measured = Remeasured(measured)
        return Remeasured({cfg: measured.times[f"finalist{i}"] for i, cfg in enumerate(finalists)},
                          measured.placements, measured.drained)

    return tune(configs, measure, verify, cache, key, log, remeasure=remeasure if paired_time_fn else None,
                rule=rule)


# -----------------------------------------------------------
# Compiling a sweep's candidates in parallel, before the trials.

@dataclass(frozen=True)
class CompileTask:
    """Every candidate of one shape, to compile (by launching once) in a helper process."""

    kernel: str
    shape: ConvShape
    configs: tuple[Config, ...]
    swizzle: str                  # the fixed swizzle's name (built-in) ...
    swizzle_formula: str | None   # ... or its formula
    num_xcds: int
    group_size: int
    input_layout: str


def _compile_task(task: CompileTask) -> int:
    """Launch each config once on the GPU so that Triton's on-disk cache holds its binary;
    returns how many launched (a config that fails here fails again as a trial)."""
    import torch

    from harness.measure.correctness import make_operands
    from kernels import get_kernel
    from kernels.base import LaunchConfig, SwizzleBinding
    from swizzles import resolve_swizzle

    kernel = get_kernel(task.kernel)
    ops = make_operands(task.shape, kernel.has_bias, 0, "cuda", task.input_layout)
    swizzle = SwizzleBinding(resolve_swizzle(task.swizzle, task.swizzle_formula), task.num_xcds, task.group_size)
    done = 0
    for cfg in task.configs:
        try:
            run, _ = kernel.bind(ops, task.shape, cfg.tiles_dict, swizzle, LaunchConfig(cfg.num_warps, cfg.num_stages))
            run()
            done += 1
        except Exception:   # noqa: BLE001 - the trial will record the error
            pass
    torch.cuda.synchronize()
    return done


def precompile(tasks: Sequence[CompileTask], jobs: int) -> tuple[int, float]:
    """Compile the tasks' configs in ``jobs`` spawned processes (Triton compiles one kernel
    per process at a time; a sweep's tuning would otherwise spend most of its time there).
    Returns (configs launched, seconds)."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    start = time.perf_counter()
    if not tasks:
        return 0, 0.0
    with ProcessPoolExecutor(max_workers=max(1, min(jobs, len(tasks))),
                             mp_context=multiprocessing.get_context("spawn")) as pool:
        launched = sum(pool.map(_compile_task, tasks))
    return launched, time.perf_counter() - start


def precompile_specs(specs: Sequence, options: TuneOptions) -> str:
    """Before a tune-mode job's trials: compile, in parallel, the candidates of every spec
    (a :class:`harness.job.spec.JobSpec`) whose choice is not cached yet.  Returns a line saying
    what was done."""
    from kernels import get_kernel

    cache = TuneCache(options.cache_dir)
    traits = DeviceTraits.of("cuda")
    tasks, cached = [], 0
    for spec in specs:
        kernel = get_kernel(spec.kernel)
        default = Config.make(spec.tiles_dict, spec.num_warps, spec.num_stages)
        configs = candidates(kernel.name, spec.shape, traits, default)
        missing = [(swizzle, formula) for swizzle, formula in spec.tune_swizzles   # best vs best: two
                   if cache.get(cache_key(kernel, spec.shape, traits, formula or swizzle, configs)) is None]
        tasks += [CompileTask(kernel.name, spec.shape, tuple(configs), swizzle, formula, spec.num_xcds,
                              spec.group_size, spec.input_layout) for swizzle, formula in missing]
        cached += not missing
    if not tasks or options.compile_jobs <= 1:
        return f"tune: {cached} of {len(specs)} shapes cached; compiling in the trials"
    launched, seconds = precompile(tasks, options.compile_jobs)
    return (f"tune: compiled {launched} candidate configs of {len(specs) - cached} shapes in {seconds:.1f} s "
            f"({options.compile_jobs} processes); {cached} shapes cached")


def candidates(kernel: str, shape: ConvShape, traits: DeviceTraits, default: Config | None = None) -> list[Config]:
    """The configs tune mode tries for ``kernel`` on ``shape``: the kernel's own space
    (:meth:`kernels.base.ConvKernel.tune_space`), or ``[default]`` where it declares none."""
    space = get_kernel(kernel).tune_space(shape, traits)
    if space is None:
        if default is None:
            raise ValueError(f"kernel {kernel!r} has no candidate space; give its config")
        return [default]
    return space
