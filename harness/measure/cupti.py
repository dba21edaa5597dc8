"""Kernel time of each timed launch from a torch.profiler (CUPTI) session
(``compare.timer=cupti``, :class:`harness.measure.timing.GpuTimer`): every launch runs
inside a ``LAUNCH_RANGE<i>`` range, and its time is the summed GPU duration of the kernels
launched inside it.  Two readings of the same profile: :func:`launch_kernel_ms` through
torch.profiler's event tree (``prof.events()``), and :func:`kineto_launch_kernel_ms`
through its raw records, which the harness uses: the tree costs seconds per ten thousand
launches.  Times are in ms."""
from __future__ import annotations

import bisect
import contextlib
import gc
from typing import Iterator

from torch.autograd import DeviceType


#: Name prefix of the profiler range around every timed launch (``timer=cupti``).
LAUNCH_RANGE = "swizzlebench.launch."


def launch_kernel_ms(events, count: int) -> list[float]:
    """GPU kernel time of each of ``count`` launches, in launch order, ms: the summed CUPTI
    durations of the kernels launched inside each ``LAUNCH_RANGE<i>`` range of a
    torch.profiler session's ``events()``.  Raises RuntimeError when a launch has no kernel
    record (the profiler lost it): such a launch cannot be timed this way.

    A range appears twice in the tree (its CPU op, and its GPU-side annotation spanning the
    gaps between its kernels) and the last one seen wins, so a launch of several kernels
    (cuDNN's) can read its span instead of its kernels' sum: the harness times with
    :func:`kineto_launch_kernel_ms`."""
    found: dict[int, float] = {}
    for evt in events:
        if evt.name.startswith(LAUNCH_RANGE):
            found[int(evt.name[len(LAUNCH_RANGE):])] = evt.device_time_total / 1e3   # µs -> ms
    return _in_launch_order(found, count)


def kineto_launch_kernel_ms(records, count: int) -> list[float]:
    """:func:`launch_kernel_ms` read from the profiler's raw records
    (``prof.profiler.kineto_results.events()``, torch's ``_KinetoEvent``), ms, without the
    event tree.  A device record (kernel, memcpy, memset) has the correlation id of the CUDA
    runtime or driver call that enqueued it (a CPU record named ``cu...``:
    ``cudaLaunchKernel`` for cuDNN, ``cuLaunchKernelEx`` for Triton, whose kernels link to
    no torch op); it counts for the ``LAUNCH_RANGE<i>`` range that contains that call on the
    same thread.  The ranges' own GPU-side records (user annotations, spanning the gaps
    between kernels) are not kernel time and are skipped.  Raises RuntimeError when a
    launch has no kernel record (record layout as of torch 2.11)."""
    calls: dict[int, tuple[int, int]] = {}   # correlation id -> (thread, start ns) of the runtime call
    ranges: dict[int, list[tuple[int, int, int]]] = {}   # thread -> [(start ns, end ns, launch)]
    device: list = []
    for rec in records:
        kind, name = rec.device_type(), rec.name()
        if kind == DeviceType.CPU:
            if name.startswith(LAUNCH_RANGE):
                if (span := _sync_span(rec)) is not None:
                    ranges.setdefault(span[0], []).append((span[1], span[2], int(name[len(LAUNCH_RANGE):])))
            elif name.startswith("cu") and (span := _sync_span(rec)) is not None:
                calls[rec.correlation_id()] = span[:2]
        elif kind in _DEVICES and not name.startswith(LAUNCH_RANGE) and not _hidden(rec):
            device.append(rec)
    for spans in ranges.values():
        spans.sort()
    starts = {thread: [s[0] for s in spans] for thread, spans in ranges.items()}
    found: dict[int, float] = {}
    for rec in device:
        if (call := calls.get(rec.correlation_id())) is None:
            continue
        thread, at_ns = call
        at = bisect.bisect_right(starts.get(thread, ()), at_ns) - 1
        if at >= 0 and at_ns < ranges[thread][at][1]:
            launch = ranges[thread][at][2]
            found[launch] = found.get(launch, 0.0) + (rec.end_ns() - rec.start_ns()) / 1e6   # ns -> ms
    return _in_launch_order(found, count)


_DEVICES = (DeviceType.CUDA, DeviceType.PrivateUse1, DeviceType.XPU)


def _hidden(rec) -> bool:
    """A record torch.profiler drops (``is_hidden_event``; absent from older torch)."""
    return getattr(rec, "is_hidden_event", lambda: False)()


def _sync_span(rec) -> tuple[int, int, int] | None:
    """(thread, start ns, end ns) of a CPU record that starts and ends on one thread, else
    None (async or hidden: torch.profiler attributes no kernel to those)."""
    thread = rec.start_thread_id()
    if rec.is_async() or thread != rec.end_thread_id() or _hidden(rec):
        return None
    return thread, rec.start_ns(), rec.end_ns()


def _in_launch_order(found: dict[int, float], count: int) -> list[float]:
    """``found[i]`` (ms) for launches 0..count-1, or RuntimeError if one has no kernel time."""
    missing = [i for i in range(count) if found.get(i, 0.0) <= 0.0]
    if missing:
        raise RuntimeError(f"timer=cupti: {len(missing)} of {count} launches have no kernel record in the "
                           f"profiler (first: launch {missing[0]}); use compare.timer=events")
    return [found[i] for i in range(count)]


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off inside the block (which must make no reference cycles), then
    back as it was."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()
