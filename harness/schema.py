"""The config's schema: dataclasses Hydra composes the config onto (structured configs).

:func:`register` stores :class:`Config` in Hydra's ConfigStore as ``base_config``, which
``conf/config.yaml`` names first in its defaults list; the YAML files (``conf/``) then only
set values.  Every group that carries settings is typed: ``compare``, ``tune``,
``profiler``, ``launch``, ``isolation``, ``tracking``, ``fault``, ``target``, ``compile`` and
the ``shape`` preset's own keys.  A value of the wrong type (``compare.min_effect=abc``) or a
key the schema lacks (``compare.bogus=1``) is refused by OmegaConf while Hydra composes the
config, before the job runs (:func:`harness.errors.one_line_compose_errors` prints it as one
line).  Open-ended parts stay untyped: ``kernel`` (a family's own tile names, ``_target_``
for your own kernel), ``swizzle`` (the families' parameters, ``expr`` / ``file`` / ``fn``) and
the shape entries (any keys; a bad entry is a FAILED run of that shape, not a refused sweep).

Range checks OmegaConf cannot express are in ``__post_init__`` (run by
:func:`harness.preflight.typed_config`, which turns the composed config into a
:class:`Config`) or in the pipeline's own settings built from a node
(:meth:`CompareConfig.paired`, :meth:`TuneConfig.options`, :meth:`CompileConfig.options`), as a
one-line UserError naming the key, the value and what is valid.
This module imports no pipeline code at import time (the config package imports it before
``python -m harness`` decides GPU vs interpreter).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import TYPE_CHECKING, Any, Dict, List, Optional

from hydra.core.config_store import ConfigStore
from omegaconf import II

from harness.errors import VALID_METADATA, UserError, valid_names
from harness.job.faults import FaultPlan
from harness.measure.layouts import INPUT_LAYOUTS
from harness.profilers.sim.budget import DEFAULT_MEMORY_GIB as DEFAULT_SIM_MEMORY_GIB

if TYPE_CHECKING:   # built by the nodes, imported when built (they import torch)
    from harness.compile.client import CompileOptions
    from harness.measure.timing import PairedSettings
    from harness.tune.search import TuneOptions

ISOLATION_MODES = ("auto", "process", "none")


@dataclass
class CompareConfig:
    """``compare``: the paired comparison with the baseline (harness.measure.paired)."""

    baseline: Optional[str] = "identity"
    min_effect: float = 0.01
    min_l2_delta: float = 0.5
    target_precision: float = 0.005
    max_time_s: float = 3.0
    min_rounds: int = 20
    max_rounds: int = 5000
    check_every: int = 10
    launches_per_round: int = 3
    warmup_ms: float = 25.0
    ci_method: str = "t"
    placements: int = 8
    timer: str = "auto"
    configs: str = "same"          # same | tuned_each (best vs best: harness/tune/best_vs_best.py)

    def __post_init__(self) -> None:
        if not 0 <= self.min_effect < 1:
            raise UserError(f"compare.min_effect={self.min_effect!r} must be a fraction in [0, 1), e.g. 0.01 for 1 %")

    def paired(self) -> PairedSettings:
        """The rounds' settings (PairedSettings, which checks them: a UserError naming the
        key), ``timer=auto`` resolved."""
        from harness.job.spec_config import resolve_timer
        from harness.measure.timing import PairedSettings

        return _settings(PairedSettings, self, method=self.ci_method, timer=resolve_timer(self.timer))

    def configs_mode(self, tune_mode: str) -> str | None:
        """``configs`` as the job spec carries it (harness.tune.best_vs_best.compare_configs:
        None for ``same``); a UserError for best vs best without tune mode or a baseline."""
        from harness.tune.best_vs_best import compare_configs

        return compare_configs({"configs": self.configs, "baseline": self.baseline}, tune_mode)


@dataclass
class TuneConfig:
    """``tune``: per-shape config search (harness.tune.search); ``name`` is the mode."""

    name: str = "none"
    cache_dir: Optional[str] = None
    warmup_ms: float = 5.0
    rounds: int = 10
    tie_band: float = 0.03
    finalists: int = 6
    final_rounds: int = 30
    tie_tolerance: float = 0.02
    min_finalists: int = 4
    max_final_rounds: int = 90
    final_placements: int = 6
    on_cpu: bool = False
    compile_jobs: int = 8

    def options(self) -> TuneOptions:
        """As the pipeline reads it (TuneOptions, which checks the mode and the tie rule's
        knobs: a UserError naming the key), cache_dir resolved."""
        from harness.tune.search import TuneOptions, resolve_cache_dir

        return _settings(TuneOptions, self, mode=self.name, cache_dir=resolve_cache_dir(self.cache_dir))


def _settings(cls: type, node: object, **given: Any) -> Any:
    """``cls`` built from ``node``'s fields of the same names and ``given``; a ValueError
    from its checks becomes a UserError."""
    shared = {f.name: getattr(node, f.name) for f in fields(cls) if hasattr(node, f.name)}
    try:
        return cls(**{**shared, **given})
    except ValueError as exc:
        raise UserError(str(exc)) from None


@dataclass
class ProfilerConfig:
    """``profiler``: the L2 counters' backend and its knobs (harness.profilers); a backend
    reads the keys it needs."""

    name: str = "auto"
    repeats: int = 5
    cache_control: str = "all"
    clock_control: str = "base"
    counters: List[str] = field(default_factory=lambda: ["TCC_HIT_sum", "TCC_MISS_sum", "TCC_EA0_RDREQ_sum", "TCC_EA0_RDREQ_32B_sum"])
    batch: bool = True
    executable: Optional[str] = None
    timeout_s: float = 1800.0
    occupancy: Optional[int] = None
    line_bytes: Optional[int] = None
    simulate: bool = False
    sim_memory_gib: float = DEFAULT_SIM_MEMORY_GIB

    def __post_init__(self) -> None:   # before the kernels' imports (torch): a refusal in about a second
        if not self.sim_memory_gib > 0:
            raise UserError(f"profiler.sim_memory_gib={self.sim_memory_gib!r} is invalid; the simulated L2's memory "
                            "budget is a positive number of GiB")


def _num_warps_values() -> str:
    """What ``launch.num_warps`` takes (harness.job.launch_limits), for a refusal's line."""
    from harness.job.launch_limits import num_warps_values

    return num_warps_values()


@dataclass
class LaunchConfig:
    """``launch``: the launch parameters (default: the kernel config's)."""

    num_warps: int = field(default=II("kernel.num_warps"), metadata={VALID_METADATA: _num_warps_values})
    num_stages: int = II("kernel.num_stages")


@dataclass
class TrackingConfig:
    """``tracking``: the MLflow store and the spool for runs it cannot take."""

    uri: str = "sqlite:///mlflow.db"
    spool_dir: Optional[str] = "mlflow-spool"


@dataclass
class IsolationConfig:
    """``isolation``: where a job runs (harness.run.isolation)."""

    mode: str = "auto"
    timeout_s: float = 600.0

    def __post_init__(self) -> None:
        if self.mode not in ISOLATION_MODES:
            raise UserError(f"isolation.mode={self.mode!r} is invalid; {valid_names([self.mode], ISOLATION_MODES)}")


@dataclass
class CompileConfig:
    """``compile``: the ahead-of-time compile stage (harness.compile.build)."""

    enabled: bool = True
    only: bool = False
    cache_dir: Optional[str] = None

    def options(self, target: TargetConfig) -> CompileOptions:
        """The stage's settings for ``target`` (CompileOptions); UserError for an arch with no
        limits or a contradiction."""
        from harness.hardware.arch import arch_limits
        from harness.compile.client import CompileOptions

        if target.arch is None:
            if self.only:
                raise UserError(f"compile.only=true needs a target with an arch; target {target.name} has "
                                "target.arch=null: choose target=mi300x, h100 or h200, or set target.arch")
            return CompileOptions()
        try:
            arch_limits(target.arch)
        except ValueError as exc:
            raise UserError(f"target.arch: {exc}") from None
        if not self.enabled:
            if self.only:
                raise UserError("compile.only=true with compile.enabled=false would do nothing; drop one")
            return CompileOptions()
        return CompileOptions(arch=target.arch, only=self.only, cache_dir=self.cache_dir, target=target.name,
                              compute_units=int(target.compute_units or 0))


@dataclass
class TargetConfig:
    """``target``: the hardware compiled for and simulated (conf/target/*.yaml)."""

    name: str = "auto"
    vendor: Optional[str] = None
    arch: Optional[str] = None
    num_xcds: int = 1
    compute_units: Optional[int] = None
    l2_bytes: Optional[int] = None
    l2_ways: Optional[int] = None
    l2_line_bytes: Optional[int] = None
    l2_domains: Optional[int] = None
    l2_partitions: Optional[int] = None       # simulator: partitions of each L2 domain (NVIDIA: 2)
    l2_set_hash: Optional[bool] = None        # simulator: a line's set is a hash of its block (NVIDIA)
    l2_request_bytes: Optional[int] = None    # simulator: the L1's request size, bytes (NVIDIA: 128)
    l2_store_request_bytes: Optional[int] = None  # simulator: a store's L2 request size, bytes (MI300X: 32)
    clusters: Optional[int] = None            # simulator: CU clusters the coalescer merges within (GPCs)
    partition_run: Optional[int] = None       # simulator: CUs in a row per L2 partition (0/None: the cluster's)
    sm_partition: List[int] = field(default_factory=list)  # simulator: the L2 partition of each SM (measured)
    sm_dispatch: Dict[int, List[int]] = field(default_factory=dict)  # simulator: grid size -> SM of each program
    mall_bytes: Optional[int] = None
    mall_ways: Optional[int] = None           # simulator: MALL associativity (default 16)
    l2_writes: Optional[str] = None           # simulator: hit (NVIDIA) or allocate (default)
    sim_calibration: Optional[Dict[str, Any]] = None
    sim_published: Optional[str] = None       # simulator: the public record checked where there is no calibration, and why no band
    peak_tflops: Optional[float] = None       # roofline (harness.measure.roofline)
    dram_bytes_per_s: Optional[float] = None

    def as_dict(self) -> dict[str, Any]:
        """The record the simulated L2 and the roofline read."""
        return asdict(self)


@dataclass
class ShapePreset:
    """``shape``: a preset; its entries stay open dicts (any keys; a bad one fails its own run)."""

    name: str = "shape"
    dtype: str = "float16"
    select: Optional[List[str]] = None
    shapes: List[Any] = field(default_factory=list)


@dataclass
class Config:
    """The job config (``conf/config.yaml`` composed onto it)."""

    kernel: Any = None                 # open: each family's tiles, ``_target_`` (your own kernel)
    swizzle: Any = None                # open: the families' parameters, expr / file / fn
    shape: ShapePreset = field(default_factory=ShapePreset)
    target: TargetConfig = field(default_factory=TargetConfig)
    profiler: ProfilerConfig = field(default_factory=ProfilerConfig)
    tune: TuneConfig = field(default_factory=TuneConfig)
    experiment: str = "swizzlebench"
    input_layout: str = "channels_last"
    seed: int = 0
    launch: LaunchConfig = field(default_factory=LaunchConfig)
    tracking: TrackingConfig = field(default_factory=TrackingConfig)
    resume: bool = True
    devices: Any = None                # null, a list of GPU ids, or "0,1" (harness.hardware.pinning)
    isolation: IsolationConfig = field(default_factory=IsolationConfig)
    fault: FaultPlan = field(default_factory=FaultPlan)
    compile: CompileConfig = field(default_factory=CompileConfig)
    compare: CompareConfig = field(default_factory=CompareConfig)

    def __post_init__(self) -> None:
        if self.input_layout not in INPUT_LAYOUTS:
            raise UserError(f"input_layout={self.input_layout!r} is invalid; {valid_names([self.input_layout], INPUT_LAYOUTS)}")


def register() -> None:
    """Store :class:`Config` in Hydra's ConfigStore as ``base_config`` (conf/config.yaml's
    first default)."""
    ConfigStore.instance().store(name="base_config", node=Config)
