"""JobResult: what one job hands to tracking and to the progress line."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

FINISHED = "FINISHED"
FAILED = "FAILED"


@dataclass
class JobResult:
    """Outcome of one (job, shape).  ``status`` is FINISHED only when both gates passed;
    ``reason`` says why it FAILED (or what was verified).  Metrics: times in ms,
    throughput in TFLOP/s, errors relative."""

    run_name: str
    status: str = FAILED
    reason: str = ""
    params: dict[str, str] = field(default_factory=dict)
    metrics: dict[str, float] = field(default_factory=dict)
    tags: dict[str, str] = field(default_factory=dict)
    artifacts: dict[str, str] = field(default_factory=dict)  # file name -> text
    files: list[tuple[str, Path]] = field(default_factory=list)  # (artifact folder, local file)
    launched: dict | None = None   # JobSpec.to_dict() as launched, when tune mode replaced the config

    def fail(self, reason: str, gate: str | None = None) -> "JobResult":
        self.status = FAILED
        self.reason = reason
        if gate:
            self.tags["failed_gate"] = gate
        return self
