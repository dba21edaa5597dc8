"""Each stage of a job as the stage interface runs it (:class:`harness.run.stage.Stage`:
``run(job, ctx, result) -> bool``, True to go on): the body lives in its own module (the
plan in :mod:`harness.job.plan`, tune mode in :mod:`harness.tune.per_job`, the gates in
:mod:`harness.gates`, the compile-only stage in :mod:`harness.run.compile_only`, the rounds
in :mod:`harness.run.rounds`); here each is called with what it needs from the job's state
and context, and what it finds is kept for the stages after it."""
from __future__ import annotations

from harness.gates import GateFailed
from harness.gates.compile import compile_gate
from harness.gates.correctness import correctness_gate
from harness.gates.permutation import permutation_gate
from harness.gates.shape import shape_gate
from harness.job.faults import maybe_inject
from harness.job.plan import plan_job
from harness.job.result import JobResult
from harness.run.compile_only import compile_only
from harness.run.rounds import measure
from harness.run.stage import JobContext, JobState
from harness.tune.per_job import tune_job
from harness.tune.search import TuneError


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
