"""One job, start to end: its stages, their interface, the ordered list (:data:`STAGES`) and
the rule that ends it.  Nothing is measured unless the gates pass (the shape, compile,
permutation and correctness gates: :mod:`harness.gates`), and every failure says which gate
and why.  A job with a baseline swizzle (config ``compare.baseline``) gates the baseline the
same way and times both in the same rounds (:mod:`harness.measure.paired`).

A stage (:class:`Stage`) is a name and a function ``run(job, ctx, result) -> bool``: ``job``
is the :class:`JobState` the stages hand on (the planned job and what each gate found),
``ctx`` the :class:`JobContext` every stage of the job shares (the device, the options),
``result`` the job's :class:`harness.job.result.JobResult` the stage records on.  ``run``
returns True for the next stage to run, False when the job ends at this stage with its
result as it stands; ``applies`` says whether the stage runs for this job at all (tune mode,
a compile target).  Each stage's body lives in its own module (the plan in
:mod:`harness.job.plan`, tune mode in :mod:`harness.tune.per_job`, the gates in
:mod:`harness.gates`, the compile-only stage in :mod:`harness.run.compile_only`, the rounds
in :mod:`harness.run.rounds`); the stage functions here call it with what it needs from the
job's state and context, and keep what it finds for the stages after it.

The failure rule: a stage whose ``run`` returns False ends the job with its result as it
stands (a gate's FAILED, with the gate's name and reason; compile-only's FINISHED); an
unexpected error inside a stage ends it FAILED at gate ``<stage name>`` with reason
``<stage name> error: <exception type>: <its first line>`` and the traceback as artifact
``traceback.txt``; a job through every stage is FINISHED, reason ``verified: <permutation
gate's verdict>; <correctness gate's verdict>``."""
from __future__ import annotations

import traceback
from collections.abc import Callable
from dataclasses import dataclass

from harness.gates import GateFailed
from harness.gates.compile import compile_gate
from harness.gates.correctness import Instance, correctness_gate
from harness.gates.permutation import Permuted, permutation_gate
from harness.gates.shape import shape_gate
from harness.hardware.device import DeviceInfo
from harness.job.faults import maybe_inject
from harness.job.plan import PlannedJob, plan_job
from harness.job.result import FINISHED, JobResult
from harness.job.spec import JobSpec
from harness.measure.correctness import CorrectnessVerdict
from harness.run.compile_only import compile_only
from harness.run.options import JobOptions
from harness.run.rounds import measure
from harness.storage.field_names import Tag
from harness.storage.run_fields import spec_params
from harness.tune.per_job import tune_job
from harness.tune.search import TuneError
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


def plan(job: JobState, ctx: JobContext, result: JobResult) -> bool:
    """Resolve the spec once (:func:`plan_job`: a user's kernel and remap are imported here,
    so their errors are the plan stage's); a deliberate fault (``fault=...``) strikes first."""
    maybe_inject(ctx.options.fault, job.spec, in_worker=ctx.options.isolated)
    job.plan = plan_job(job.spec)
    return True


def compile_only_mode(job: JobState, ctx: JobContext) -> bool:
    """``compile.only=true``: compile for the target and run nothing."""
    return ctx.options.compile.only


def only_compile(job: JobState, ctx: JobContext, result: JobResult) -> bool:
    """The compile-only stage; the job always ends here (FINISHED, or FAILED at gate compile)."""
    compile_only(job.plan, ctx.options.compile, result)
    return False


def tune_mode(job: JobState, ctx: JobContext) -> bool:
    """``tune`` other than ``none``: the chosen config(s) replace the configured one."""
    return job.spec.tune != "none"


def tune(job: JobState, ctx: JobContext, result: JobResult) -> bool:
    """Tune mode's plan replaces the job's; a TuneError fails the job (gate ``tune``)."""
    options = ctx.options
    try:
        job.plan = tune_job(job.plan, ctx.device, options.tune, result,
                            options.paired.timer if options.paired.standin else None, options.compile.arch)
    except TuneError as exc:
        raise GateFailed(f"tune: {exc}", "tune") from None
    return True


def shape(job: JobState, ctx: JobContext, result: JobResult) -> bool:
    """The shape gate: the job's full grid, within int32 program ids."""
    job.grid = shape_gate(job.plan, result)
    return job.grid is not None


def compile_target(job: JobState, ctx: JobContext) -> bool:
    """A compile target (``compile.arch``) is set: the launch is built for it first."""
    return bool(ctx.options.compile.arch)


def compiled(job: JobState, ctx: JobContext, result: JobResult) -> bool:
    """The compile gate: what does not compile (or fit) on the target fails here, before anything runs."""
    return compile_gate(job.plan, ctx.options.compile, result)


def permutation(job: JobState, ctx: JobContext, result: JobResult) -> bool:
    """The permutation gate over the job's full grid, for the candidate and its baseline."""
    permuted = permutation_gate(job.plan, job.grid, ctx.device, result)
    if permuted is None:
        return False
    job.candidate, job.baseline = permuted
    return True


def verify(job: JobState, ctx: JobContext, result: JobResult) -> bool:
    """The correctness gate for the candidate and, beside it, the baseline."""
    verified = correctness_gate(job.plan, job.candidate, job.baseline, job.grid, ctx.device,
                                ctx.options.interpret_tiles, result)
    if verified is None:
        return False
    job.instance, job.runs, job.check = verified
    return True


def rounds(job: JobState, ctx: JobContext, result: JobResult) -> bool:
    """The measure stage: the verified launches timed in paired rounds."""
    measure(job.plan, (job.candidate, job.baseline), job.instance, job.runs, ctx.device, ctx.options, result)
    return True


#: The stages of a job, in order (the name is the gate an unexpected error fails it at).
STAGES = (
    Stage("plan", plan),                                   # the spec resolved once
    Stage("compile", only_compile, compile_only_mode),     # compile.only=true: ends here
    Stage("tune", tune, tune_mode),                        # gate tune
    Stage("plan", shape),                                  # gate shape
    Stage("compile", compiled, compile_target),            # gate compile
    Stage("plan", permutation),                            # gate permutation
    Stage("verify", verify),                               # gate correctness
    Stage("measure", rounds),
)


def run_job(spec: JobSpec, device: DeviceInfo, options: JobOptions) -> JobResult:
    """Run one job through :data:`STAGES`; never raises for a problem of the job itself (it
    becomes a FAILED result, by the module's failure rule)."""
    result = JobResult(run_name=spec.run_name, params=spec_params(spec))
    result.tags.update({Tag.SPEC_HASH: spec.spec_hash, Tag.MODE: device.mode, Tag.DEVICE: device.name})
    if device.uuid:
        result.tags[Tag.DEVICE_UUID] = device.uuid
    job, ctx = JobState(spec), JobContext(device, options)
    for stage in STAGES:
        try:
            if stage.applies(job, ctx) and not stage.run(job, ctx, result):
                return result
        except Exception as exc:   # a job's own failure must not stop the sweep
            result.artifacts["traceback.txt"] = traceback.format_exc()
            return result.fail(f"{stage.name} error: {type(exc).__name__}: {_first_line(exc)}", gate=stage.name)
    result.status = FINISHED
    result.reason = f"verified: {result.tags[Tag.GATE_PERMUTATION]}; {job.check.reason}"
    return result


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0][:500] if text else repr(exc)
