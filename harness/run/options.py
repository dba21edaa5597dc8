"""The options of one job's pipeline (:class:`JobOptions`): the knobs that are not part of
the measured spec, built once per job from the typed config (harness.preflight) and shared
by every stage (:class:`harness.run.steps.JobContext`)."""
from __future__ import annotations

from dataclasses import dataclass

from harness.compile.client import CompileOptions
from harness.job.faults import FaultPlan
from harness.measure.roofline import Roofline
from harness.measure.timing import PairedSettings
from harness.tune.search import TuneOptions


@dataclass(frozen=True)
class JobOptions:
    """Knobs of the pipeline that are not part of the measured spec."""

    interpret_tiles: dict[str, int]
    paired: PairedSettings = PairedSettings()
    min_effect: float = 0.01          # smallest speedup change called a verdict (fraction)
    fault: FaultPlan | None = None    # deliberate fault (harness.job.faults), for robustness tests
    tune: TuneOptions = TuneOptions()  # how spec.tune != "none" tunes (harness.tune.search)
    compile: CompileOptions = CompileOptions()  # the compile stage (harness.compile.build)
    isolated: bool = False            # running in an isolated worker process
    roofline: Roofline | None = None  # the target's measured peaks (harness.measure.roofline)
