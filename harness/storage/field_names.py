"""The MLflow names of what a job's stages record on its result (params, metrics and tags
of :class:`harness.job.result.JobResult`): the one place outside :mod:`harness.storage` where
they are spelled (tests/test_field_names.py keeps it so).  The typed outcome fields'
names (``verdict``, ``failed_gate``, ...) are :mod:`harness.storage.run_fields`'s.

Units: times in ms, rates and deltas in % (points), throughputs in TFLOP/s, ratios plain."""
from __future__ import annotations

#: What a baseline's copy of a field is named under (``baseline.<name>``).
BASELINE_PREFIX = "baseline."
#: How a frame of runs names a run's fields (``mlflow.search_runs(output_format="pandas")``,
#: :func:`harness.report.data.runs_to_frame`), and an MLflow filter string names them.
PARAMS_PREFIX, METRICS_PREFIX, TAGS_PREFIX = "params.", "metrics.", "tags."


def param_column(name: str) -> str:
    """The column of param ``name``: ``params.<name>``."""
    return PARAMS_PREFIX + name


def metric_column(name: str) -> str:
    """The column of metric ``name``: ``metrics.<name>``."""
    return METRICS_PREFIX + name


def tag_column(name: str) -> str:
    """The column of tag ``name``: ``tags.<name>``."""
    return TAGS_PREFIX + name


def param_filter(name: str, value: object) -> str:
    """An MLflow filter clause: param ``name`` is ``value`` (``params.swizzle = 'xcd'``; a name
    with a dot quoted: ``params.`shape.name` = 'tiny'``)."""
    key = f"`{name}`" if "." in name else name
    return f"{PARAMS_PREFIX}{key} = '{value}'"


def tag_filter(name: str, value: object) -> str:
    """An MLflow filter clause: tag ``name`` is ``value`` (``tags.spec_hash = 'ab12'``)."""
    return f"{tag_column(name)} = '{value}'"


class Param:
    """Param names."""

    GRID_PID_M, GRID_PID_N, GRID_PIDS = "grid.num_pid_m", "grid.num_pid_n", "grid.num_pids"
    REMAP_HASH, REMAP_IS_IDENTITY = "remap.hash", "remap.is_identity"
    BASELINE_REMAP_HASH = BASELINE_PREFIX + REMAP_HASH
    VERIFIED_SHAPE, VERIFIED_CONFIG = "verified_shape", "verified_config"
    BASELINE_CONFIG = "baseline_config"
    TUNE_TABLE, TUNE_TABLE_TARGET, TUNE_TABLE_ENTRY = "tune.table", "tune.table_target", "tune.table_entry"
    TUNE_CONFIGURED, TUNE_CHOSEN = "tune.configured", "tune.chosen"
    SIM_CONFIG, SIM_FAMILY = "sim.config", "sim.family"
    PLACEMENTS, TIMER = "compare.placements", "compare.timer"
    COMPILE_ARCH, COMPILE_LIMITER = "compile.arch", "compile.occupancy_limiter"
    #: the job spec's, as the report and the search read them back
    #: (:meth:`harness.job.spec.JobSpec.as_params` names them where it builds them)
    KERNEL, SWIZZLE, TARGET = "kernel", "swizzle", "target"
    SWIZZLE_FAMILY, SWIZZLE_FORMULA, SWIZZLE_FN = "swizzle.family", "swizzle.formula", "swizzle.fn"
    SHAPE_NAME, SHAPE_PRESET = "shape.name", "shape_preset"
    NUM_WARPS, NUM_STAGES, NUM_XCDS, GROUP_SIZE, SEED = "num_warps", "num_stages", "num_xcds", "group_size", "seed"
    SHAPE_DTYPE = "shape.dtype"
    COMPARE_BASELINE = "compare.baseline"   # the baseline the job timed itself against
    TILE_PREFIX = "tile."   # a launch tile's size or flag: ``tile.BLOCK_M``
    #: tune mode's chosen launch config, as ``Config.label`` writes it (harness.tune.search)
    TUNE_CONFIG, TUNE_RUNNER_UPS = "tune.config", "tune.runner_ups"
    #: a sweep run's: the sweep's command-line overrides (harness.callbacks writes it)
    SWEEP_OVERRIDES = "sweep.overrides"


class Metric:
    """Metric names."""

    MAX_REL_ERR = "max_rel_err"
    COMPILE_CANDIDATES, COMPILE_CANDIDATE_FAILURES = "compile.candidates", "compile.candidate_failures"
    COMPILE_PREFIX = "compile."
    COMPILE_SPILLS, COMPILE_SPILL_BYTES = "compile.spills", "compile.spill_bytes"
    TIME_MS_MEDIAN, TIME_MS_P20, TIME_MS_P80, TFLOPS = "time_ms_median", "time_ms_p20", "time_ms_p80", "tflops"
    VENDOR_TIME_MS, VENDOR_TIME_MS_P20, VENDOR_TIME_MS_P80 = "vendor_time_ms", "vendor_time_ms_p20", "vendor_time_ms_p80"
    VENDOR_TFLOPS = "vendor_tflops"
    RATIO_TO_VENDOR = "ratio_to_vendor"   # time / vendor time, paired per round: < 1 is faster than the vendor
    PAIRED_ROUNDS, PAIRED_TIME_S = "paired_rounds", "paired_time_s"
    PAIRED_DRAINED_BATCHES, PAIRED_LAUNCHES_PER_ROUND = "paired_drained_batches", "paired_launches_per_round"
    PAIRED_PLACEMENTS = "paired_placements"
    EVENT_TIME_MS_MEDIAN, VENDOR_EVENT_TIME_MS_MEDIAN = "event_time_ms_median", "vendor_event_time_ms_median"
    BASELINE_TIME_MS, BASELINE_TIME_MS_P20, BASELINE_TIME_MS_P80 = ("baseline_time_ms", "baseline_time_ms_p20",
                                                                    "baseline_time_ms_p80")
    SPEEDUP_PLACEMENT_SD_PCT = "speedup_placement_sd_pct"
    SPEEDUP, SPEEDUP_CI_LO, SPEEDUP_CI_HI = "speedup", "speedup_ci_lo", "speedup_ci_hi"
    L2_HIT_RATE, L2_HIT_RATE_STD, L2_SAMPLES = "l2_hit_rate", "l2_hit_rate_std", "l2_samples"
    L2_READ_HIT_RATE = "l2_read_hit_rate"
    L2_DELTA_PTS, L2_DELTA_CI_LO, L2_DELTA_CI_HI = "l2_delta_pts", "l2_delta_ci_lo", "l2_delta_ci_hi"
    BASELINE_L2_HIT_RATE, L2_PAIRS = "baseline_l2_hit_rate", "l2_pairs"
    L2_READ_DELTA_PTS, L2_READ_DELTA_CI_LO, L2_READ_DELTA_CI_HI = ("l2_read_delta_pts", "l2_read_delta_ci_lo",
                                                                   "l2_read_delta_ci_hi")
    BASELINE_L2_READ_HIT_RATE = "baseline_l2_read_hit_rate"
    L2_HIT_RATE_ERR, L2_READ_HIT_RATE_ERR, L2_ERR_COVERAGE = "l2_hit_rate_err", "l2_read_hit_rate_err", "l2_err_coverage"
    SIM_L2_HIT_RATE, SIM_L2_HIT_RATE_ERR = "sim_l2_hit_rate", "sim_l2_hit_rate_err"
    SIM_PREFIX = "sim."
    SIM_PROGRAMS_PER_CU = "sim.programs_per_cu"

    @staticmethod
    def vendor_time(algo: str) -> str:
        """The median time (ms) of vendor algorithm ``algo``."""
        return f"vendor_{algo}_time_ms"


class Tag:
    """Tag names."""

    SPEC_HASH, MODE, DEVICE, DEVICE_UUID, ISOLATION = "spec_hash", "mode", "device", "device_uuid", "isolation"
    GATE_COMPILE, GATE_PERMUTATION, GATE_CORRECTNESS = "gate.compile", "gate.permutation", "gate.correctness"
    BASELINE_GATE_COMPILE = BASELINE_PREFIX + GATE_COMPILE
    TIMING = "timing"      # how the job was timed, or why not
    TIMER, VENDOR_ALGO, BOUND = "timer", "vendor.algo", "bound"
    TUNE = "tune"
    #: tune mode's: whether its choice was a near-tie (``true``/``false``/``unknown``: harness.tune.search)
    TUNE_NEAR_TIE = "tune.near_tie"
    BASELINE_TUNE_NEAR_TIE = BASELINE_PREFIX + TUNE_NEAR_TIE
    L2_SOURCE, PROFILER = "l2_source", "profiler"
    #: a profiler's own (its ``tags()``): its version, its cache control, the simulated L2's target
    PROFILER_VERSION, CACHE_CONTROL, SIM_TARGET = "profiler_version", "cache_control", "sim_target"
    #: every job run's provenance (harness.app, harness.storage.provenance)
    TARGET, GIT_COMMIT, TORCH_VERSION, TRITON_VERSION = "target", "git_commit", "torch_version", "triton_version"
    #: an ncu run's: how its counters were read from the report file, ``ncu_report`` (NVIDIA's
    #: Python module) or ``csv`` (``ncu --import``'s CSV): harness.profilers.ncu_rep
    NCU_READER = "ncu_reader"
    SIM_CONFIG, SIM_LAYER_CLASS, SIM_ORDER_BLIND = "sim_config", "sim_layer_class", "sim_order_blind"
    SIM_VALIDATION, SIM_PUBLISHED, SIM_L2_VALIDATION = "sim_validation", "sim_published", "sim_l2_validation"
