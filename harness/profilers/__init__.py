"""L2 profilers: one module per backend (``ncu``, ``rocprofv3``, ``sim``).  Nothing outside
this package knows which vendor's tool produced a reading.  ``make_profiler`` turns the
``profiler`` config node into a backend, or fails fast saying how to get the tool."""
from __future__ import annotations

import logging
import shutil

from harness.hardware.device import GPU, DeviceInfo
from harness.notices import show
from harness.profilers.wrapped import Profiler, ProfilerUnavailable

log = logging.getLogger("swizzlebench")

PROFILERS = ("none", "auto", "ncu", "rocprofv3", "sim")


def make_profiler(settings, device: DeviceInfo, target: dict | None = None) -> Profiler | None:
    """The backend for ``settings.name``, ``settings`` the typed ``profiler`` group
    (harness.schema.ProfilerConfig) (None for ``none``); raises ProfilerUnavailable when the
    chosen tool is missing.  ``target`` (the resolved target record) configures ``sim``."""
    name = str(settings.name)
    if name not in PROFILERS:
        raise ProfilerUnavailable(f"unknown profiler {name!r}; valid: {', '.join(PROFILERS)}")
    if name == "none":
        return None
    if name == "auto":
        return _auto(settings, device, target)
    if name == "ncu":
        return _ncu(settings)
    if name == "rocprofv3":
        return _rocprofv3(settings)
    return _sim(settings, target)


def _auto(settings, device: DeviceInfo, target: dict | None) -> Profiler | None:
    if device.mode != GPU:
        try:
            profiler = _sim(settings, target)
            show("profiler=auto: no GPU, using the simulated L2 (profiler=sim)")   # once per sweep
            return profiler
        except ProfilerUnavailable as exc:
            show(f"profiler=auto: no GPU and no simulator ({exc}); L2 not profiled")
            return None
    want = "rocprofv3" if device.vendor == "amd" else "ncu"
    try:
        profiler = _rocprofv3(settings) if want == "rocprofv3" else _ncu(settings)
    except ProfilerUnavailable as exc:
        log.warning("profiler=auto: %s GPU but %s unavailable (%s); L2 not profiled", device.vendor, want, exc)
        return None
    show(f"profiler=auto: using {want} on {device.name}")
    return profiler


def _ncu(settings) -> Profiler:
    from harness.profilers.ncu import NcuProfiler, find_ncu

    exe = str(settings.executable) if settings.executable else find_ncu()
    if not exe or not shutil.which(exe):
        raise ProfilerUnavailable(
            "profiler=ncu: Nsight Compute's `ncu` was not found (PATH, /opt/nvidia/nsight-compute/*/ncu, "
            "/usr/local/cuda/bin/ncu). Install Nsight Compute (part of the CUDA toolkit), or pass "
            "profiler.executable=/path/to/ncu, or choose profiler=none (no L2 counters) or profiler=sim.")
    return NcuProfiler(exe, cache_control=str(settings.cache_control),
                       clock_control=str(settings.clock_control),
                       timeout_s=float(settings.timeout_s))


def _rocprofv3(settings) -> Profiler:
    from harness.profilers.rocprofv3 import Rocprofv3Profiler

    exe = str(settings.executable) if settings.executable else "rocprofv3"
    if not shutil.which(exe):
        raise ProfilerUnavailable(
            f"profiler=rocprofv3: `{exe}` was not found on PATH. Install ROCm's rocprofiler-sdk "
            "(`apt install rocprofiler-sdk`, it ships with ROCm >= 6.2) and put /opt/rocm/bin on PATH, "
            "or pass profiler.executable=/path/to/rocprofv3, or choose profiler=none or profiler=sim.")
    return Rocprofv3Profiler(exe, counters=[str(c) for c in settings.counters],
                             timeout_s=float(settings.timeout_s))


def _sim(settings, target: dict | None) -> Profiler:
    from harness.profilers.sim.profiler import SimProfiler

    if not target or not target.get("l2_bytes"):
        raise ProfilerUnavailable(f"profiler=sim needs a target with an L2 description; got {target!r}: "
                                  "choose target=mi300x, h100 or h200")
    return SimProfiler(target, occupancy=settings.occupancy, line_bytes=settings.line_bytes, memory_gib=settings.sim_memory_gib)
