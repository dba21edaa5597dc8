"""How much memory this machine has free for a job: host RAM and, on a GPU, device memory.

Host: the kernel's ``MemAvailable`` (/proc/meminfo), lowered to what the process's cgroup
still allows (``memory.max`` under cgroup v2, ``memory.limit_in_bytes`` under v1: a SLURM job
or a container is ended by its cgroup's limit, not the machine's).  Device: the driver's free
memory where CUDA is already initialized in this process, else the device's total (asking the
driver for free memory would create a CUDA context, which holds device memory, in the
launching process).  All sizes in bytes; None where unknown (not Linux, no GPU).
"""
from __future__ import annotations

import os
from pathlib import Path

#: Where the cgroup file systems are mounted.
CGROUP_ROOT = Path("/sys/fs/cgroup")


def available_memory() -> int | None:
    """Host bytes a new allocation can take now: MemAvailable, or less under a cgroup limit."""
    try:
        with open("/proc/meminfo") as f:
            fields = dict(line.split(":", 1) for line in f if ":" in line)
        available = int(fields["MemAvailable"].split()[0]) * 1024
    except (OSError, KeyError, ValueError):
        return None
    room = _cgroup_room()
    return min(available, room) if room is not None else available


def _cgroup_room() -> int | None:
    """Bytes this process's cgroup allows beyond what it uses now; None: no limit found."""
    try:
        lines = Path(f"/proc/{os.getpid()}/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if controllers == "":   # v2: the unified hierarchy
            limit, usage = CGROUP_ROOT / path.lstrip("/") / "memory.max", CGROUP_ROOT / path.lstrip("/") / "memory.current"
        elif "memory" in controllers.split(","):   # v1: the memory controller's own hierarchy
            base = CGROUP_ROOT / "memory" / path.lstrip("/")
            if not base.exists():   # the controller mounted at its root in a container
                base = CGROUP_ROOT / "memory"
            limit, usage = base / "memory.limit_in_bytes", base / "memory.usage_in_bytes"
        else:
            continue
        try:
            cap, used = limit.read_text().strip(), int(usage.read_text().strip())
        except (OSError, ValueError):
            continue
        if cap != "max" and int(cap) < 1 << 60:   # v1 writes "no limit" as a huge number
            return max(0, int(cap) - used)
    return None


def device_memory() -> tuple[int | None, str]:
    """Bytes of device memory a job on GPU 0 can take, and what that figure is (``free`` or
    ``total``); (None, "") without a GPU."""
    import torch

    if not torch.cuda.is_available():
        return None, ""
    if torch.cuda.is_initialized():
        return int(torch.cuda.mem_get_info(0)[0]), "free"
    return int(torch.cuda.get_device_properties(0).total_memory), "total"
