"""JobResult: what one job hands to tracking and to the progress line.  The fields the
harness decides on are typed (:class:`Comparison`, ``failed_gate``, the verdicts); the free-form
``params`` / ``metrics`` / ``tags`` / ``artifacts`` are what the stages log.  Which MLflow
names the typed fields are written under is :mod:`harness.storage.run_fields`'s business."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from harness.job.spec import JobSpec
from harness.job.verdict import Verdict

FINISHED = "FINISHED"
FAILED = "FAILED"

#: :attr:`Comparison.role` values: the job compared with its baseline, or the job *is* its baseline.
CANDIDATE_ROLE, BASELINE_ROLE = "candidate", "baseline"


@dataclass
class Comparison:
    """How a job stands to its baseline (config ``compare.baseline``).

    ``role``: CANDIDATE_ROLE (timed beside a baseline), BASELINE_ROLE (the job's swizzle is
    its baseline), None (no baseline configured).  ``same_order``: the baseline launches the
    candidate's very tile order on the same config (its speedup is the remap code's cost);
    None until the baseline passed its permutation gate.  ``question``: which question the
    verdict answers (:data:`harness.tune.best_vs_best.QUESTIONS`).  ``missing``: why a
    candidate carries no comparison (its baseline failed a gate), None when it does."""

    role: str | None = None
    same_order: bool | None = None
    question: str | None = None
    missing: str | None = None

    @property
    def compared(self) -> bool:
        """True when the job has a baseline that passed its gates."""
        return self.role == CANDIDATE_ROLE and self.missing is None


@dataclass(frozen=True)
class ProfilerReport:
    """The profiler's own report file that holds a job's L2 measurement (Nsight Compute's
    ``.ncu-rep``, opened with ``ncu-ui``), kept as an artifact of the job's run.  ``file``: where
    the profiler wrote it on this machine; ``first_result`` / ``last_result``: the IDs (0-based,
    ncu's ``ID`` column) of the job's own profiled launches in it, baseline arm included: one
    profiler launch measures every shape of a batch (``profiler.batch``), so its report holds
    the other shapes' results too."""

    file: Path
    first_result: int
    last_result: int


@dataclass
class JobResult:
    """Outcome of one (job, shape).  ``status`` is FINISHED only when both gates passed;
    ``reason`` says why it FAILED (or what was verified), ``failed_gate`` at which gate.
    Metrics: times in ms, throughput in TFLOP/s, errors relative."""

    run_name: str
    status: str = FAILED
    reason: str = ""
    params: dict[str, str] = field(default_factory=dict)
    metrics: dict[str, float] = field(default_factory=dict)
    tags: dict[str, str] = field(default_factory=dict)
    artifacts: dict[str, str] = field(default_factory=dict)  # file name -> text
    files: list[tuple[str, Path]] = field(default_factory=list)  # (artifact folder, local file)
    launched: JobSpec | None = None   # the spec as launched, when tune mode replaced the config
    # the spec of the config the target launches, where this machine launches another (the
    # CPU under a Triton that cannot build it): the one the simulated L2 predicts for
    target_launch: JobSpec | None = None
    comparison: Comparison = field(default_factory=Comparison)
    failed_gate: str | None = None
    compile_only: bool = False     # compile.only=true: compiled for the target, nothing run
    verdict: Verdict | None = None      # on time, against the baseline (harness.measure.paired)
    l2_verdict: Verdict | None = None   # on the L2 hit rate, against the baseline
    not_timed: str | None = None        # why a verified job was not timed (harness.job.verdict.NO_GPU)
    profiler_report: ProfilerReport | None = None   # the profiler's report file of the L2 measurement
    # failed its correctness gate unjudged: on CPU the down-scaled grid is no permutation
    unverifiable: bool = False

    def fail(self, reason: str, gate: str | None = None) -> "JobResult":
        self.status = FAILED
        self.reason = reason
        if gate:
            self.failed_gate = gate
        return self
