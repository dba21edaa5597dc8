"""One job, start to end: the ordered list of its stages (:data:`STAGES`) and the rule that
ends it.  Nothing is measured unless the gates pass (the shape, compile, permutation and
correctness gates: :mod:`harness.gates`), and every failure says which gate and why.  A job
with a baseline swizzle (config ``compare.baseline``) gates the baseline the same way and
times both in the same rounds (:mod:`harness.measure.paired`).

The failure rule: a stage whose ``run`` returns False ends the job with its result as it
stands (a gate's FAILED, with the gate's name and reason; compile-only's FINISHED); an
unexpected error inside a stage ends it FAILED at gate ``<stage name>`` with reason
``<stage name> error: <exception type>: <its first line>`` and the traceback as artifact
``traceback.txt``; a job through every stage is FINISHED, reason ``verified: <permutation
gate's verdict>; <correctness gate's verdict>``."""
from __future__ import annotations

import traceback

from harness.hardware.device import DeviceInfo
from harness.job.result import FINISHED, JobResult
from harness.job.spec import JobSpec
from harness.run import stages
from harness.run.options import JobOptions
from harness.run.stage import JobContext, JobState, Stage
from harness.storage.field_names import Tag
from harness.storage.run_fields import spec_params

#: The stages of a job, in order (the name is the gate an unexpected error fails it at).
STAGES = (
    Stage("plan", stages.plan),                                          # the spec resolved once
    Stage("compile", stages.only_compile, stages.compile_only_mode),     # compile.only=true: ends here
    Stage("tune", stages.tune, stages.tune_mode),                        # gate tune
    Stage("plan", stages.shape),                                         # gate shape
    Stage("compile", stages.compiled, stages.compile_target),            # gate compile
    Stage("plan", stages.permutation),                                   # gate permutation
    Stage("verify", stages.verify),                                      # gate correctness
    Stage("measure", stages.rounds),
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
