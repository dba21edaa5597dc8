"""Tune mode: pick the fastest *verified* launch config of a kernel for one problem, once,
remember it, and hand back that one config for everything that follows.

A config is the kernel's tile sizes and flags plus ``num_warps`` and ``num_stages``.  For a
(kernel, shape, dtype, device) the tuner

1. looks the problem up in a cache keyed on the device name, the Triton version and a hash
   of the kernel's source (so a new GPU, compiler or kernel re-tunes; nothing else does);
2. otherwise runs every candidate of the kernel's space (:func:`candidates`): a candidate is
   first verified (its output against conv2d; a wrong or failing config is a *trial*, never
   a choice), then timed; the fastest verified one wins and is written to the cache with
   every trial;
3. returns a :class:`TuneResult` whose ``config`` the job then gates, measures and profiles.
   Trials are never measured or profiled by anything else: profilers see the chosen config
   only.

The swizzle is fixed while tuning (the job's baseline, identity by default): the config
must not be chosen for, or against, the swizzle under test.

Everything here is pure Python over callables (``verify``, ``measure``), so it is tested on
the CPU with stand-ins; :func:`tune_kernel` builds the real callables from a kernel.
"""
from __future__ import annotations

import hashlib
import inspect
import json
import os
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Mapping, Sequence

from harness.pipeline.tuning_space import Config, DeviceTraits, candidates
from kernels.problem import ConvShape


# -----------------------------------------------------------
# Configs and the device traits a candidate space depends on.

#: Tune modes (config group ``tune``).
TUNE_MODES = ("none", "fastest")


@dataclass(frozen=True)
class TuneOptions:
    """The ``tune`` config group, as the job pipeline reads it."""

    mode: str = "none"              # "none" (launch the configured config) or "fastest"
    cache_dir: str | None = None    # None: default_cache_dir()
    warmup_ms: float = 5.0          # warm-up launches per trial, ms
    rounds: int = 10                # timed rounds per trial (3 launches each; median), GPU
    on_cpu: bool = False            # also tune under the CPU interpreter (wall clock: exercises
                                    # the pipeline, says nothing about speed)
    compile_jobs: int = 8           # processes compiling a job's candidates before its trials (GPU)

    def __post_init__(self):
        if self.mode not in TUNE_MODES:
            raise ValueError(f"tune={self.mode!r} is invalid; valid: {', '.join(TUNE_MODES)}")

# -----------------------------------------------------------
# The cache.

def kernel_source_hash(kernel) -> str:
    """SHA-256 (16 hex digits) of the source of the kernel's module and of every module of
    the ``kernels`` package it imports from: any edit to what is compiled re-tunes."""
    module = sys.modules[type(kernel).__module__]
    names = {module.__name__}
    for value in vars(module).values():
        mod = getattr(value, "__module__", None) or getattr(value, "__name__", None)
        if isinstance(mod, str) and mod.startswith("kernels.") and mod in sys.modules:
            names.add(mod)
    digest = hashlib.sha256()
    for name in sorted(names):
        digest.update(name.encode())
        digest.update(inspect.getsource(sys.modules[name]).encode())
    return digest.hexdigest()[:16]


@dataclass(frozen=True)
class CacheKey:
    """What a tuned choice depends on.  The candidate space is part of the key too: a
    choice made among other candidates is not reused."""

    kernel: str
    shape: tuple[tuple[str, object], ...]   # every ConvShape field except its name, dtype included
    device: str
    triton_version: str
    kernel_source: str
    swizzle: str                            # the fixed swizzle the trials ran with
    space: str                              # hash of the candidate list

    @classmethod
    def make(cls, kernel: str, shape: ConvShape, device: str, triton_version: str, kernel_source: str,
             swizzle: str, space: Sequence[Config]) -> "CacheKey":
        fields = tuple((k, v) for k, v in sorted(asdict(shape).items()) if k != "name")
        space_hash = hashlib.sha256(json.dumps([c.as_dict() for c in space], sort_keys=True).encode()).hexdigest()[:16]
        return cls(kernel, fields, device, triton_version, kernel_source, swizzle, space_hash)

    @property
    def digest(self) -> str:
        return hashlib.sha256(json.dumps(asdict(self), sort_keys=True, default=list).encode()).hexdigest()


def default_cache_dir() -> Path:
    """``$SWIZZLEBENCH_CACHE/tuning`` (default ``~/.cache/swizzlebench/tuning``)."""
    root = os.environ.get("SWIZZLEBENCH_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "swizzlebench")
    return Path(root) / "tuning"


class TuneCache:
    """One JSON file per key, named by the key's digest; the key is stored inside and checked."""

    def __init__(self, directory: str | os.PathLike | None = None):
        self.directory = Path(directory) if directory is not None else default_cache_dir()

    def _path(self, key: CacheKey) -> Path:
        return self.directory / f"{key.digest}.json"

    def get(self, key: CacheKey) -> dict | None:
        path = self._path(key)
        try:
            entry = json.loads(path.read_text())
        except (OSError, ValueError):
            return None
        return entry if entry.get("key") == json.loads(json.dumps(asdict(key), default=list)) else None

    def put(self, key: CacheKey, entry: dict) -> Path:
        self.directory.mkdir(parents=True, exist_ok=True)
        path = self._path(key)
        tmp = path.with_suffix(f".tmp{os.getpid()}")
        tmp.write_text(json.dumps({**entry, "key": asdict(key)}, indent=1, default=list))
        os.replace(tmp, path)   # atomic: concurrent tuners never see half a file
        return path


def cache_key(kernel, shape: ConvShape, traits: DeviceTraits, swizzle_name: str, configs: Sequence[Config]) -> CacheKey:
    """The key of ``kernel`` tuned over ``configs`` on ``shape`` on this device and compiler."""
    import triton

    return CacheKey.make(kernel.name, shape, traits.name, triton.__version__, kernel_source_hash(kernel),
                         swizzle_name, configs)


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
    time_ms: float                    # the winner's time during tuning
    trials: list[Trial] = field(default_factory=list)
    from_cache: bool = False
    cost_s: float = 0.0               # wall time of this tuning (0 for a cache hit)
    key: CacheKey | None = None

    @property
    def summary(self) -> str:
        ok = sum(t.time_ms is not None for t in self.trials)
        origin = "cache" if self.from_cache else f"{len(self.trials)} trials ({ok} verified), {self.cost_s:.1f} s"
        return f"tuned: {self.config.label} ({self.time_ms:.4f} ms; {origin})"

    def as_params(self) -> dict[str, str]:
        """For the job's run: the chosen config and how it was chosen."""
        return {"tune.config": self.config.label, "tune.time_ms": f"{self.time_ms:.6f}",
                "tune.trials": str(len(self.trials)), "tune.from_cache": str(self.from_cache),
                "tune.cost_s": f"{self.cost_s:.2f}"}


class TuneError(RuntimeError):
    """No candidate passed verification."""


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0][:300] if text else ''}"


def tune(configs: Iterable[Config], measure: Callable[[Config], float],
         verify: Callable[[Config], str | None] | None = None, cache: TuneCache | None = None,
         key: CacheKey | None = None, log: Callable[[str], None] | None = None,
         clock: Callable[[], float] = time.perf_counter) -> TuneResult:
    """Return the fastest verified config among ``configs``.

    ``verify(cfg)`` returns None when the config computes the right output, else why not;
    ``measure(cfg)`` returns its time in ms.  Both may raise (a config that does not compile):
    that config becomes a failed trial.  With ``cache`` and ``key`` a stored choice is
    returned without running anything, and a new choice is stored.
    """
    say = log or (lambda _msg: None)
    if cache is not None and key is not None:
        entry = cache.get(key)
        if entry is not None:
            result = TuneResult(Config.from_dict(entry["config"]), float(entry["time_ms"]),
                                [Trial.from_dict(t) for t in entry.get("trials", [])], True, 0.0, key)
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
    best = min(timed, key=lambda t: t.time_ms)
    result = TuneResult(best.config, best.time_ms, trials, False, clock() - start, key)
    if cache is not None and key is not None:
        cache.put(key, {"config": best.config.as_dict(), "time_ms": best.time_ms, "cost_s": result.cost_s,
                        "trials": [t.as_dict() for t in trials]})
    say(result.summary)
    return result


def tune_kernel(kernel, shape: ConvShape, ops, swizzle, time_fn: Callable[[Callable[[], None]], float],
                configs: Sequence[Config] | None = None, cache: TuneCache | None = None,
                swizzle_name: str = "identity", log: Callable[[str], None] | None = None,
                default: Config | None = None) -> TuneResult:
    """Tune ``kernel`` on ``shape`` with real launches: each candidate is bound to ``ops``
    (the job's operands, on the device) with the fixed ``swizzle`` binding, verified against
    conv2d exactly as the correctness gate does, then timed by ``time_fn(run) -> ms``.
    ``configs``: the candidates (default: the kernel's space; ``default``, the configured
    config, for a kernel without one)."""
    import torch

    from harness.pipeline.correctness import compare, reference
    from kernels.base import LaunchConfig

    traits = DeviceTraits.of(ops.x.device)
    configs = list(configs) if configs is not None else candidates(kernel.name, shape, traits, default)
    key = cache_key(kernel, shape, traits, swizzle_name, configs)
    expected = reference(ops, shape)
    bound: dict[Config, Callable[[], None]] = {}

    def launch_of(cfg: Config) -> Callable[[], None]:
        run, out = kernel.bind(ops, shape, cfg.tiles_dict, swizzle, LaunchConfig(cfg.num_warps, cfg.num_stages))
        bound[cfg] = run
        return run, out

    def verify(cfg: Config) -> str | None:
        run, out = launch_of(cfg)
        run()
        if ops.x.device.type == "cuda":
            torch.cuda.synchronize()
        verdict = compare(kernel.output_as_nchw(out), expected, shape.dtype)
        return None if verdict.ok else verdict.reason

    def measure(cfg: Config) -> float:
        return time_fn(bound.pop(cfg))

    return tune(configs, measure, verify, cache, key, log)


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

    from harness.pipeline.correctness import make_operands
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
    (a :class:`harness.pipeline.spec.JobSpec`) whose choice is not cached yet.  Returns a line saying
    what was done."""
    from kernels import get_kernel

    cache = TuneCache(options.cache_dir)
    traits = DeviceTraits.of("cuda")
    tasks = []
    for spec in specs:
        kernel = get_kernel(spec.kernel)
        default = Config.make(spec.tiles_dict, spec.num_warps, spec.num_stages)
        configs = candidates(kernel.name, spec.shape, traits, default)
        swizzle, formula = spec.tune_swizzle
        if cache.get(cache_key(kernel, spec.shape, traits, formula or swizzle, configs)) is None:
            tasks.append(CompileTask(kernel.name, spec.shape, tuple(configs), swizzle, formula, spec.num_xcds,
                                     spec.group_size, spec.input_layout))
    if not tasks or options.compile_jobs <= 1:
        return f"tune: {len(specs) - len(tasks)} of {len(specs)} shapes cached; compiling in the trials"
    launched, seconds = precompile(tasks, options.compile_jobs)
    return (f"tune: compiled {launched} candidate configs of {len(tasks)} shapes in {seconds:.1f} s "
            f"({options.compile_jobs} processes); {len(specs) - len(tasks)} shapes cached")
