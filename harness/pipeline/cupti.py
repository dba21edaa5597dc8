"""Kernel time of each timed launch from a torch.profiler (CUPTI) session
(``compare.timer=cupti``, :class:`harness.pipeline.timing._GpuTimer`): every launch runs
inside a ``LAUNCH_RANGE<i>`` range, and its time is the summed GPU duration of the kernels
launched inside it.  Two readings of the same profile: :func:`launch_kernel_ms` through
torch.profiler's event tree (``prof.events()``), and :func:`kineto_launch_kernel_ms`
through its raw records, which the harness uses: the tree costs seconds per ten thousand
launches (benchmarks/job_cost.py)."""
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
    record (the profiler lost it): such a launch cannot be timed this way."""
    found: dict[int, float] = {}
    for evt in events:
        if evt.name.startswith(LAUNCH_RANGE):
            found[int(evt.name[len(LAUNCH_RANGE):])] = evt.device_time_total / 1e3   # µs -> ms
    return _in_launch_order(found, count)


def kineto_launch_kernel_ms(records, count: int) -> list[float]:
    """:func:`launch_kernel_ms` read from the profiler's raw records
    (``prof.profiler.kineto_results.events()``, torch's ``_KinetoEvent``), ms, without the
    event tree.  Attributed as torch.profiler does: a device record (kernel, memcpy,
    memset) belongs to each synchronous CPU op whose correlation id is its
    ``linked_correlation_id``, and counts for the ``LAUNCH_RANGE<i>`` range that contains
    that op on the same thread (the range itself included); the ranges must not nest (one
    launch after another, as ``_GpuTimer`` makes them).  Raises RuntimeError when a launch
    has no kernel record."""
    roles = {DeviceType.CPU: "cpu", DeviceType.CUDA: "device", DeviceType.PrivateUse1: "device",
             DeviceType.XPU: "device"}
    ops: dict[int, list] = {}            # correlation id -> CPU records that may own device records
    launches: list = []                  # the LAUNCH_RANGE records
    device: list = []                    # device records linked to an op
    # one pass reads only what every record needs; the few records used are read in full below
    for rec in records:
        role, linked = roles.get(rec.device_type()), rec.linked_correlation_id()
        if role == "device" and linked > 0:
            device.append(rec)
        elif role == "cpu" and linked == 0:
            ops.setdefault(rec.correlation_id(), []).append(rec)
            if rec.name().startswith(LAUNCH_RANGE):
                launches.append(rec)
    ranges: dict[int, list[tuple[int, int, int]]] = {}   # thread -> [(start ns, end ns, launch)], by start
    for rec in launches:
        if (span := _sync_span(rec)) is not None:
            ranges.setdefault(span[0], []).append((span[1], span[2], int(rec.name()[len(LAUNCH_RANGE):])))
    for spans in ranges.values():
        spans.sort()
    starts = {thread: [s[0] for s in spans] for thread, spans in ranges.items()}
    found: dict[int, float] = {}
    for rec in device:
        if _hidden(rec):
            continue
        for op in ops.get(rec.linked_correlation_id(), ()):
            if (span := _sync_span(op)) is None:
                continue
            thread, start, end = span
            at = bisect.bisect_right(starts.get(thread, ()), start) - 1
            if at >= 0 and start < ranges[thread][at][1] and end <= ranges[thread][at][1]:
                launch = ranges[thread][at][2]
                found[launch] = found.get(launch, 0.0) + (rec.end_ns() - rec.start_ns()) / 1e6   # ns -> ms
    return _in_launch_order(found, count)


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
