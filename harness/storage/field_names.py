"""The MLflow names of what a job's stages record on its result (params, metrics and tags
of :class:`harness.job.result.JobResult`), of what the records that write them name
(a compile report's, a tune result's, a profiler's ``tags()``) and of a sweep's run: the one
place where they are spelled (tests/test_field_names.py keeps it so).  The typed outcome fields'
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


def sub_name(group: str, name: str) -> str:
    """A name within a group: ``<group>.<name>`` (``timed.l2_hit_rate``)."""
    return f"{group}.{name}"


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
    #: a compile report's (harness.compile.build.CompileReport): the arch, its kernels' names
    COMPILE_ARCH, COMPILE_LIMITER = "compile.arch", "compile.occupancy_limiter"
    COMPILE_KERNEL, COMPILE_KERNELS = "compile.kernel", "compile.kernels"
    #: the job spec's (:func:`harness.storage.run_fields.spec_params` writes them)
    KERNEL, SWIZZLE, TARGET = "kernel", "swizzle", "target"
    SWIZZLE_FAMILY, SWIZZLE_FORMULA, SWIZZLE_FN = "swizzle.family", "swizzle.formula", "swizzle.fn"
    SWIZZLE_PREFIX = "swizzle."   # a family's parameter: ``swizzle.W``
    SHAPE_NAME, SHAPE_PRESET = "shape.name", "shape_preset"
    SHAPE_PREFIX = "shape."   # a shape's field: ``shape.N``
    NUM_WARPS, NUM_STAGES, NUM_XCDS, GROUP_SIZE, SEED = "num_warps", "num_stages", "num_xcds", "group_size", "seed"
    PROFILER, INPUT_LAYOUT, TUNE, KERNEL_TARGET = "profiler", "input_layout", "tune", "kernel.target"
    SHAPE_DTYPE = "shape.dtype"
    COMPARE_BASELINE = "compare.baseline"   # the baseline the job timed itself against
    COMPARE_CONFIGS = "compare.configs"
    TILE_PREFIX = "tile."   # a launch tile's size or flag: ``tile.BLOCK_M``
    #: tune mode's (harness.tune.search.TuneResult): the chosen launch config as ``Config.label``
    #: writes it, its time (ms), trials, cache hit, cost (s), runner-ups, final re-measurement
    TUNE_CONFIG, TUNE_RUNNER_UPS = "tune.config", "tune.runner_ups"
    TUNE_TIME_MS, TUNE_TRIALS, TUNE_FROM_CACHE, TUNE_COST_S = "tune.time_ms", "tune.trials", "tune.from_cache", "tune.cost_s"
    TUNE_FINAL_ROUNDS, TUNE_FINAL_MEASUREMENT = "tune.final_rounds", "tune.final_measurement"
    #: the ceilings a roofline reading is against (harness.measure.roofline.Roofline): TFLOP/s, bytes/s
    ROOFLINE_PEAK_TFLOPS, ROOFLINE_DRAM_BYTES_PER_S = "roofline.peak_tflops", "roofline.dram_bytes_per_s"
    #: a sweep run's: the sweep's command-line overrides (harness.callbacks writes it)
    SWEEP_OVERRIDES = "sweep.overrides"
    #: a proposal run's (harness.search.propose): its overrides, its number of formulas; a
    #: refused proposal's label and file
    PROPOSE_OVERRIDES, PROPOSE_FORMULAS = "propose.overrides", "propose.formulas"
    SWIZZLE_LABEL, SWIZZLE_FILE = "swizzle.label", "swizzle.file"


class Metric:
    """Metric names."""

    MAX_REL_ERR = "max_rel_err"
    COMPILE_CANDIDATES, COMPILE_CANDIDATE_FAILURES = "compile.candidates", "compile.candidate_failures"
    COMPILE_PREFIX = "compile."
    COMPILE_SPILLS, COMPILE_SPILL_BYTES = "compile.spills", "compile.spill_bytes"
    #: a compile report's main kernel (harness.compile.build.CompileReport.as_metrics): s, bytes, counts
    COMPILE_SECONDS, COMPILE_SHARED_BYTES = "compile.seconds", "compile.shared_bytes"
    COMPILE_SPILL_BYTES_PER_PROGRAM, COMPILE_SGPR_SPILLS = "compile.spill_bytes_per_program", "compile.sgpr_spills"
    COMPILE_REGISTERS, COMPILE_SGPRS, COMPILE_AGPRS = "compile.registers", "compile.sgprs", "compile.agprs"
    COMPILE_COMPILER_WAVES_PER_SIMD = "compile.compiler_waves_per_simd"
    COMPILE_PROGRAMS_PER_CU, COMPILE_WARPS_PER_CU = "compile.programs_per_cu", "compile.warps_per_cu"
    COMPILE_WAVES_PER_SIMD, COMPILE_COUNT_PREFIX = "compile.waves_per_simd", "compile.count."
    #: a roofline reading's (harness.measure.roofline.RooflineReading): FLOP/byte, %
    ARITH_INTENSITY, PCT_OF_PEAK, PCT_OF_ROOFLINE = "arith_intensity", "pct_of_peak", "pct_of_roofline"
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
    #: a profiler reading's means (harness.profilers.base.L2Reading): lookups, ms, bytes
    L2_HITS, L2_MISSES, PROFILED_TIME_MS, DRAM_READ_BYTES = "l2_hits", "l2_misses", "profiled_time_ms", "dram_read_bytes"
    #: a simulated reading's (harness.profilers.sim.result.SimResult.as_metrics): lookups,
    #: bytes, slots; per-XCD (:meth:`xcd_hit_rate`) and MALL hit rates (%); a timed run's whole
    L2_WRITE_LOOKUPS, L2_MERGED_READS, L2_FABRIC_LOOKUPS = "l2_write_lookups", "l2_merged_reads", "l2_fabric_lookups"
    L2_MISS_BYTES, SLOTS_PER_XCD, MALL_HIT_RATE, TIMED = "l2_miss_bytes", "slots_per_xcd", "mall_hit_rate", "timed"
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
    def xcd_hit_rate(xcd: int) -> str:
        """The simulated L2 hit rate (%) of XCD ``xcd``."""
        return f"xcd{xcd}_hit_rate"

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
    TUNE_RULE = "tune.rule"   # the tie rule's name
    BASELINE_TUNE_NEAR_TIE = BASELINE_PREFIX + TUNE_NEAR_TIE
    L2_SOURCE, PROFILER = "l2_source", "profiler"
    #: a profiler's own (its ``tags()``): its version, its cache control, the simulated L2's target
    PROFILER_VERSION, CACHE_CONTROL, SIM_TARGET = "profiler_version", "cache_control", "sim_target"
    CLOCK_CONTROL, L2_HIT_RATE_COUNTERS, COUNTERS = "clock_control", "l2_hit_rate_counters", "counters"
    #: a sweep run's: its folder, and MLflow's run description (its command line;
    #: mlflow.utils.mlflow_tags.MLFLOW_RUN_NOTE)
    SWEEP_DIR, RUN_NOTE = "sweep_dir", "mlflow.note.content"
    PROPOSE = "swizzlebench.propose"   # a proposal sweep's run: ``true``
    #: every job run's provenance (harness.app, harness.storage.provenance)
    TARGET, GIT_COMMIT, TORCH_VERSION, TRITON_VERSION = "target", "git_commit", "torch_version", "triton_version"
    #: an ncu run's: how its counters were read from the report file, ``ncu_report`` (NVIDIA's
    #: Python module) or ``csv`` (``ncu --import``'s CSV): harness.profilers.ncu_rep
    NCU_READER = "ncu_reader"
    SIM_CONFIG, SIM_LAYER_CLASS, SIM_ORDER_BLIND = "sim_config", "sim_layer_class", "sim_order_blind"
    SIM_VALIDATION, SIM_PUBLISHED, SIM_L2_VALIDATION = "sim_validation", "sim_published", "sim_l2_validation"
