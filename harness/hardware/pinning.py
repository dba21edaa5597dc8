"""Pinning each Hydra job's GPU work to one GPU of the node (config ``devices``).

With ``devices=[0,1,2,3]`` the job numbered ``j`` uses GPU ``devices[j % 4]``.  All GPU
work of a job happens in its child processes (the isolated job worker and the profiler's
worker), so only those children see the visibility variables: the job process keeps its
own environment (but for the instant a worker is spawned) and must not open a GPU context.

Which variables: ``CUDA_VISIBLE_DEVICES`` (CUDA) and ``HIP_VISIBLE_DEVICES`` (HIP; HIP also
reads ``CUDA_VISIBLE_DEVICES``, and both get the same value).  ``ROCR_VISIBLE_DEVICES`` is
deliberately left alone: ROCr applies it first and HIP then indexes into the devices ROCr
left visible, so setting ``ROCR_VISIBLE_DEVICES=2 HIP_VISIBLE_DEVICES=2`` would leave no
device at all.  An inherited ``ROCR_VISIBLE_DEVICES`` therefore still narrows the node, and
``devices`` ids count within what it exposes.

Job numbers and GPUs do not stay in step under a launcher that hands jobs to whichever
worker is free (joblib): job 4 may start on GPU 0 while job 0 still runs there.  So a job
also holds a per-host lock file on its GPU (:class:`DeviceLock`) while a child of it uses
the GPU; a second job for the same GPU waits instead of sharing it and skewing both timings.
"""
from __future__ import annotations

import fcntl
import logging
import os
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from harness.errors import UserError

log = logging.getLogger("swizzlebench")

#: the variables a pinned child gets, all set to the one GPU id.
PINNED_VARIABLES = ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES")
#: every variable that narrows GPU visibility (for the ``visible_devices`` tag and warnings).
VISIBILITY_VARIABLES = ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES")
VISIBLE_DEVICES_TAG = "visible_devices"


class PinningError(UserError):
    """The ``devices`` config (or its combination with ``isolation.mode``) is invalid."""


def parse_devices(value: object) -> tuple[int, ...]:
    """Validate the ``devices`` config value: None (no pinning) -> (), else a non-empty list of
    distinct non-negative GPU ids -> that tuple.  Raises :class:`PinningError` saying why."""
    if value is None:
        return ()
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):  # ListConfig is a Sequence
        raise PinningError(
            f"devices={value!r}: give a list of GPU ids, e.g. devices=[0,1,2,3] (with brackets: in a "
            "multirun, devices=0,1 would sweep over two values instead), or devices=null for no pinning")
    ids = list(value)
    if not ids:
        raise PinningError("devices=[] names no GPU; use devices=null to leave GPU visibility alone")
    for item in ids:
        if isinstance(item, bool) or not isinstance(item, int) or item < 0:
            raise PinningError(f"devices={ids!r}: {item!r} is not a GPU id (a non-negative "
                               "integer: the GPU's index as CUDA / HIP number the node's GPUs)")
    duplicates = sorted({i for i in ids if ids.count(i) > 1})
    if duplicates:
        raise PinningError(f"devices={ids!r} lists GPU {', '.join(map(str, duplicates))} twice; "
                           "each GPU once (one job per GPU at a time)")
    return tuple(ids)


def device_for_job(job_num: int, devices: Sequence[int]) -> int:
    """The GPU of Hydra job number ``job_num``: ``devices[job_num % len(devices)]``."""
    if not devices:
        raise PinningError("no devices to pin to")
    if job_num < 0:
        raise PinningError(f"job number {job_num} is negative")
    return devices[job_num % len(devices)]


def pinned_environment(job_num: int, devices: Sequence[int]) -> dict[str, str]:
    """The variables a child process of job ``job_num`` needs to see only its GPU; {} when
    ``devices`` is empty (no pinning: the children inherit visibility unchanged)."""
    if not devices:
        return {}
    return _environment_for(device_for_job(job_num, devices))


def _environment_for(device: int) -> dict[str, str]:
    return {name: str(device) for name in PINNED_VARIABLES}


def require_isolation(devices: Sequence[int], isolation_mode: str) -> None:
    """Pinning works through child processes: refuse ``isolation.mode=none`` with ``devices``."""
    if devices and isolation_mode == "none":
        raise PinningError(
            f"devices={list(devices)} pins the GPU of each job's worker process, but isolation.mode=none "
            "runs jobs in the sweep's own process; use isolation.mode=process (or auto), or devices=null")


def inherited_visibility(environ: Mapping[str, str]) -> str | None:
    """The visibility variables set in ``environ`` as ``NAME=value ...``; None when none is."""
    return " ".join(f"{name}={environ[name]}" for name in VISIBILITY_VARIABLES if name in environ) or None


def visible_devices(environ: Mapping[str, str]) -> str | None:
    """The ``visible_devices`` tag of a process with environment ``environ``: the GPU id
    when it is pinned (``"2"``; an inherited ``ROCR_VISIBLE_DEVICES`` it counts within is
    appended), else the visibility variables it inherits (e.g. SLURM's
    ``CUDA_VISIBLE_DEVICES=0``), else None (every GPU of the node is visible)."""
    cuda, hip = environ.get("CUDA_VISIBLE_DEVICES"), environ.get("HIP_VISIBLE_DEVICES")
    if cuda is None or cuda != hip:
        return inherited_visibility(environ)
    rocr = environ.get("ROCR_VISIBLE_DEVICES")
    return cuda if rocr is None else f"{cuda} ROCR_VISIBLE_DEVICES={rocr}"


def default_lock_dir() -> Path:
    """Per-host, per-user folder of the GPU lock files (in the system temp folder)."""
    return Path(tempfile.gettempdir()) / f"swizzlebench-gpu-locks-{os.getuid()}"


@dataclass(frozen=True)
class DevicePin:
    """One job's GPU: the environment its children get, and the lock that keeps other
    swizzlebench jobs of this host off that GPU while a child of this one uses it."""

    device: int
    job_num: int
    lock_dir: Path

    @classmethod
    def for_job(cls, job_num: int, devices: Sequence[int], lock_dir: Path | None = None) -> DevicePin:
        return cls(device_for_job(job_num, devices), job_num, lock_dir or default_lock_dir())

    def environment(self) -> dict[str, str]:
        """Variables to add to a child's environment."""
        return _environment_for(self.device)

    def lock(self) -> DeviceLock:
        return DeviceLock(self.lock_dir / f"gpu{self.device}.lock", f"GPU {self.device} (job {self.job_num})")


class DeviceLock:
    """An exclusive ``flock`` on a lock file, held while a child uses the GPU.  ``acquire``
    waits (and says so in the log) while another process holds it; the OS drops the lock
    when the holder exits, so a killed job never leaves a GPU locked."""

    def __init__(self, path: Path, what: str):
        self.path = path
        self.what = what
        self._file: IO[bytes] | None = None

    @property
    def held(self) -> bool:
        return self._file is not None

    def acquire(self) -> None:
        if self._file is not None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        f = open(self.path, "ab")
        try:
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                log.info("%s: another swizzlebench job on this host is using the GPU; waiting for it "
                         "(lock %s)", self.what, self.path)
                fcntl.flock(f, fcntl.LOCK_EX)
        except BaseException:
            f.close()
            raise
        self._file = f

    def release(self) -> None:
        if self._file is not None:
            fcntl.flock(self._file, fcntl.LOCK_UN)
            self._file.close()
            self._file = None

    def __enter__(self) -> DeviceLock:
        self.acquire()
        return self

    def __exit__(self, *exc) -> None:
        self.release()
