"""The stage interface of a job (:mod:`harness.run.steps` lists the stages in order).

A stage is a name and a function ``run(job, ctx, result) -> bool``: ``job`` is the
:class:`JobState` the stages hand on (the planned job and what each gate found), ``ctx`` the
:class:`JobContext` every stage of the job shares (the device, the options), ``result`` the
job's :class:`harness.job.result.JobResult` the stage records on.  ``run`` returns True for
the next stage to run, False when the job ends at this stage with its result as it stands
(FAILED by a gate with the gate's name and reason, or FINISHED by ``compile.only=true``).
``applies`` says whether the stage runs for this job at all (tune mode, a compile target)."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from harness.gates.correctness import Instance
from harness.gates.permutation import Permuted
from harness.hardware.device import DeviceInfo
from harness.job.plan import PlannedJob
from harness.job.result import JobResult
from harness.job.spec import JobSpec
from harness.measure.correctness import CorrectnessVerdict
from harness.run.options import JobOptions
from kernels.base import TileGrid


@dataclass(frozen=True)
class JobContext:
    """What every stage of one job shares and none changes: the device it runs on and the
    pipeline's options (:class:`harness.run.options.JobOptions`)."""

    device: DeviceInfo
    options: JobOptions


@dataclass
class JobState:
    """What the stages of one job hand on, filled in stage by stage: ``spec`` as asked, the
    ``plan`` (the plan stage's; tune mode's replaces it), the job's full tile ``grid`` (the
    shape gate's), the arms that passed the permutation gate (``candidate``, and ``baseline``:
    None without one or when it failed its gate), and what the correctness gate verified:
    the ``instance`` it ran on, the bound launches ``runs`` by arm, the candidate's ``check``."""

    spec: JobSpec
    plan: PlannedJob | None = None
    grid: TileGrid | None = None
    candidate: Permuted | None = None
    baseline: Permuted | None = None
    instance: Instance | None = None
    runs: dict[str, Callable[[], None]] | None = None
    check: CorrectnessVerdict | None = None


def always(job: JobState, ctx: JobContext) -> bool:
    """The stage runs for every job."""
    return True


@dataclass(frozen=True)
class Stage:
    """One stage of a job: ``name`` is the gate an unexpected error inside it fails the job
    at (reason ``<name> error: <exception type>: <its first line>``), ``run`` its body (the
    module docstring says what it returns), ``applies`` whether it runs for this job."""

    name: str
    run: Callable[[JobState, JobContext, JobResult], bool]
    applies: Callable[[JobState, JobContext], bool] = always
