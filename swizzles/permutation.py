"""The permutation gate: is a remap a bijection of the job's grid onto itself?

The remap table is computed by a tiny Triton kernel that calls the *same* jit
function the conv kernel calls (on the GPU when there is one, under the Triton
interpreter otherwise), so what is checked is exactly what runs.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np
import torch
import triton
import triton.language as tl

from kernels.interpreted import lighten_interpreter

_TABLE_BLOCK = 1024


@triton.jit
def _remap_table_kernel(out_ptr, num_pid_m, num_pid_n, SWIZZLE: tl.constexpr,
                        NUM_XCDS: tl.constexpr, GROUP_SIZE: tl.constexpr, BLOCK: tl.constexpr):
    # One program evaluates the remap for BLOCK consecutive launch-order pids.
    pids = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = pids < num_pid_m * num_pid_n
    tl.store(out_ptr + pids, SWIZZLE(pids, num_pid_m, num_pid_n, NUM_XCDS, GROUP_SIZE), mask=mask)


def remap_table(swizzle, num_pid_m: int, num_pid_n: int, num_xcds: int, group_size: int,
                device: str | torch.device = "cpu") -> np.ndarray:
    """Return ``new_pid`` for every launch-order pid ``0 .. num_pid_m*num_pid_n - 1``."""
    num_pids = num_pid_m * num_pid_n
    lighten_interpreter()   # on the CPU: the interpreter without its costs that check nothing
    out = torch.empty(max(num_pids, 1), dtype=torch.int32, device=device)
    # Formulas such as seed_attempt2 divide by zero on small grids; numpy (interpreter)
    # warns, the result is garbage either way and the check below rejects it.
    with np.errstate(all="ignore"):
        _launch_table(out, swizzle, num_pid_m, num_pid_n, num_xcds, group_size)
    return out[:num_pids].cpu().numpy().astype(np.int64)


def _launch_table(out, swizzle, num_pid_m, num_pid_n, num_xcds, group_size) -> None:
    num_pids = num_pid_m * num_pid_n
    grid = (triton.cdiv(num_pids, _TABLE_BLOCK),)
    _remap_table_kernel[grid](out, num_pid_m, num_pid_n, swizzle, num_xcds, group_size,
                              BLOCK=_TABLE_BLOCK)


def remap_fingerprint(table: np.ndarray) -> str:
    """First 16 hex digits of the SHA-256 of the table (int64): equal iff same tile order."""
    return hashlib.sha256(np.ascontiguousarray(table, dtype=np.int64).tobytes()).hexdigest()[:16]


@dataclass(frozen=True)
class PermutationVerdict:
    """Outcome of the permutation gate over one grid."""

    ok: bool
    num_pids: int
    never_run: int = 0          # tiles no program computes
    run_twice: int = 0          # tiles computed by more than one program
    out_of_range: int = 0       # programs whose new_pid lies outside [0, num_pids)
    first_collision: tuple[int, int, int] | None = None  # (pid, new_pid, earlier pid)
    reason: str = ""


def check_permutation(table: np.ndarray) -> PermutationVerdict:
    """Decide whether ``table`` (pid -> new_pid) is a permutation of ``range(len(table))``."""
    n = len(table)
    in_range = (table >= 0) & (table < n)
    out_of_range = int(np.count_nonzero(~in_range))
    counts = np.bincount(table[in_range], minlength=n)[:n]
    never_run = int(np.count_nonzero(counts == 0))
    run_twice = int(np.count_nonzero(counts > 1))
    if never_run == 0 and run_twice == 0 and out_of_range == 0:
        return PermutationVerdict(ok=True, num_pids=n, reason=f"permutation of {n} pids")

    parts = [f"{never_run} never run", f"{run_twice} run twice"]
    if out_of_range:
        bad = int(np.flatnonzero(~in_range)[0])
        parts.append(f"{out_of_range} out of range (first: pid {bad} -> {int(table[bad])})")
    collision = _first_collision(table)
    reason = f"not a permutation of {n} pids: " + ", ".join(parts)
    if collision is not None:
        pid, target, earlier = collision
        reason += f"; first collision pid {pid} -> {target} (as pid {earlier})"
    return PermutationVerdict(ok=False, num_pids=n, never_run=never_run, run_twice=run_twice,
                              out_of_range=out_of_range, first_collision=collision, reason=reason)


def _first_collision(table: np.ndarray) -> tuple[int, int, int] | None:
    """The smallest pid whose new_pid was already taken by an earlier pid."""
    _, first_index = np.unique(table, return_index=True)
    is_first = np.zeros(len(table), dtype=bool)
    is_first[first_index] = True
    repeats = np.flatnonzero(~is_first)
    if len(repeats) == 0:
        return None
    pid = int(repeats[0])
    target = int(table[pid])
    earlier = int(np.flatnonzero(table[:pid] == target)[0])
    return pid, target, earlier
