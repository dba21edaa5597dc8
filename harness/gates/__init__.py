"""The gates a job passes before it is timed, one module each: the compile gate
(:mod:`harness.gates.compile`: the launch builds for the target), the permutation gate
(:mod:`harness.gates.permutation`: the remap over the job's full grid is a permutation) and
the correctness gate (:mod:`harness.gates.correctness`: the output matches conv2d).  Each
takes the planned job and its result and either passes (returning what the next stage
needs) or sets the result FAILED with the gate's name and its reason
(:meth:`harness.job.result.JobResult.fail`)."""
from __future__ import annotations


class GateFailed(Exception):
    """A gate rejected an arm; ``gate`` names it."""

    def __init__(self, reason: str, gate: str, unverifiable: bool = False):
        super().__init__(reason)
        self.gate = gate
        self.unverifiable = unverifiable   # the gate could not judge (JobResult.unverifiable)
