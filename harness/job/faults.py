"""Deliberate faults, for proving that the sweep survives them (``tests/faults`` and the
GPU crash demonstration).  Off unless configured: ``+fault.kind=segv +fault.shape=l03``.

Kinds: ``segv`` (the job's process dies of SIGSEGV), ``hang`` (sleeps past any timeout),
``illegal_address`` (a Triton kernel reads far outside its buffer: on a GPU a real
illegal memory access), ``raise`` (a Python exception).
"""
from __future__ import annotations

import os
import signal
import time
from dataclasses import dataclass
from typing import Optional

from harness.errors import UserError

FAULT_KINDS = ("segv", "hang", "illegal_address", "raise")


@dataclass
class FaultPlan:
    """The ``fault`` config group (a node of the config's schema, harness.schema); ``kind``
    None: no fault."""

    kind: Optional[str] = None       # FAULT_KINDS, or None (off)
    shape: Optional[str] = None      # shape name to fault on (None: every job)
    swizzle: Optional[str] = None    # swizzle to fault on (None: any)

    def __post_init__(self) -> None:
        if self.kind is not None and self.kind not in FAULT_KINDS:
            raise UserError(f"fault.kind={self.kind!r} is invalid; valid kinds: {', '.join(FAULT_KINDS)}")

    def matches(self, spec) -> bool:
        return ((self.shape is None or spec.shape.name == self.shape)
                and (self.swizzle is None or spec.swizzle == self.swizzle))


def maybe_inject(plan: FaultPlan | None, spec, in_worker: bool) -> None:
    """Trigger ``plan``'s fault if it matches ``spec``.  Process-killing faults only fire in
    an isolated worker (in the sweep's own process they would end the sweep, which is the
    failure mode isolation exists to prevent)."""
    if plan is None or plan.kind is None or not plan.matches(spec):
        return
    if plan.kind == "raise":
        raise RuntimeError(f"injected fault for {spec.run_name}")
    if not in_worker:
        raise RuntimeError(f"fault.kind={plan.kind} needs isolation (it would kill the sweep process); "
                           "run with isolation.mode=process")
    if plan.kind == "segv":
        os.kill(os.getpid(), signal.SIGSEGV)
    elif plan.kind == "hang":
        time.sleep(10**6)
    elif plan.kind == "illegal_address":
        _illegal_address()


def _illegal_address() -> None:
    import torch
    import triton
    import triton.language as tl

    @triton.jit
    def _read_far_away(ptr):
        # 2**40 elements past a 1-element buffer: an illegal address on any GPU.
        tl.store(ptr, tl.load(ptr + (1 << 40)))

    buf = torch.zeros(1, device="cuda" if torch.cuda.is_available() else "cpu")
    _read_far_away[(1,)](buf)
    if torch.cuda.is_available():
        torch.cuda.synchronize()
