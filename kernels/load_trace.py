"""Record what a Triton kernel really loads, by running it under the interpreter.

This is the ground truth the address models in :mod:`kernels.access` are proven
against.  Under ``TRITON_INTERPRET=1`` every ``tl.load`` of every program goes
through ``InterpreterBuilder.create_masked_load`` (a plain ``tl.load`` without a mask
arrives there too, with an all-true mask), one program after another; the builder's
``grid_idx`` says which program is running.  :func:`record_loads` wraps that method
for the duration of a ``with`` block and keeps, for each load, the launch-order pid,
the pointer argument the addresses fall in, and the byte offsets of the masked-in
elements.

The interpreter launches with host copies of the tensor arguments, so pointers are
resolved against the tensors the interpreter actually received (captured from
``GridExecutor._init_args_hst``), not the caller's.
"""
from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Iterator

import numpy as np


@dataclass(frozen=True)
class RecordedLoad:
    """One ``tl.load`` executed by one program."""

    pid: int              # launch-order program id (axis 0)
    tensor: str | None    # the kernel's pointer argument, e.g. "x_ptr"; None if all masked off
    offsets: np.ndarray   # byte offsets of the masked-in elements inside that tensor, int64


@dataclass
class LoadLog:
    """Every load of the launches made inside :func:`record_loads`, in execution order."""

    loads: list[RecordedLoad] = field(default_factory=list)

    def by_pid(self) -> dict[int, list[RecordedLoad]]:
        """The loads of each program, in the order the program issued them."""
        out: dict[int, list[RecordedLoad]] = {}
        for load in self.loads:
            out.setdefault(load.pid, []).append(load)
        return out


@contextmanager
def record_loads() -> Iterator[LoadLog]:
    """Record every load of the interpreted launches made inside the block.

    Raises ``RuntimeError`` if the interpreter is not active, and ``AssertionError``
    from inside the launch if a masked-in address lies in no tensor argument.
    """
    from triton.runtime import interpreter

    builder_cls = interpreter.InterpreterBuilder
    executor_cls = interpreter.GridExecutor
    original_load = builder_cls.create_masked_load
    original_init = executor_cls._init_args_hst
    log = LoadLog()
    # (name, first byte address, size in bytes) of each tensor argument of the launch.
    tensors: list[tuple[str, int, int]] = []

    def init_args_hst(self, args_dev, kwargs):
        args_hst, kwargs_hst = original_init(self, args_dev, kwargs)
        tensors.clear()
        named = list(zip(self.arg_names, args_hst)) + list(kwargs_hst.items())
        for name, arg in named:
            if hasattr(arg, "data_ptr"):
                tensors.append((name, arg.data_ptr(), arg.numel() * arg.element_size()))
        return args_hst, kwargs_hst

    def create_masked_load(self, ptrs, mask, other, cache_policy, is_volatile):
        addresses = np.broadcast_to(ptrs.data, np.broadcast_shapes(ptrs.data.shape, mask.data.shape))
        taken = addresses[np.broadcast_to(mask.data, addresses.shape)].astype(np.int64).ravel()
        _record(log, int(self.grid_idx[0]), taken, tensors)
        return original_load(self, ptrs, mask, other, cache_policy, is_volatile)

    builder_cls.create_masked_load = create_masked_load
    executor_cls._init_args_hst = init_args_hst
    try:
        yield log
    finally:
        builder_cls.create_masked_load = original_load
        executor_cls._init_args_hst = original_init


def _record(log: LoadLog, pid: int, addresses: np.ndarray, tensors: list[tuple[str, int, int]]) -> None:
    if len(addresses) == 0:     # every element masked off: the load happens, reads nothing
        log.loads.append(RecordedLoad(pid, None, addresses))
        return
    lo, hi = int(addresses.min()), int(addresses.max())
    for name, base, size in tensors:
        if base <= lo and hi < base + size:
            log.loads.append(RecordedLoad(pid, name, addresses - base))
            return
    raise AssertionError(f"pid {pid}: a load's addresses [{lo:#x}, {hi:#x}] lie in no single tensor argument "
                         f"({', '.join(f'{n}@{b:#x}+{s}' for n, b, s in tensors)})")
