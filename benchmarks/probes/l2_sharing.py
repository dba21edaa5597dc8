"""Probe (GPU): what does an H100's L2 count when several SMs read the same sectors?

The simulator must predict ncu's L2 read lookups.  On the conv kernels ncu counts only part
of the sectors the SMs receive as lookups (``lookup_probe``: 63-80 %; with TMA 52 %), and
how a second reader of a sector is counted (a hit, a miss while the first fill is still in
flight, or no lookup at all) decides the simulated hit rate.  Here every case is one launch
of 132 programs (one per SM, measured by ``sm_placement.py``) that each read a 32 KB region
with L1-bypassing loads (``.cg``), so that every sector a program reads is one L2 request:

* ``distinct``: every program its own region (no sharing: the reference).
* ``group_k``: programs ``p // k`` share a region (neighbours in launch order: the same TPC,
  then the same GPC); ``spread_k``: programs ``p % (132 / k)`` share one (members in other GPCs).
* ``stagger_d``: all 132 read region 0, program ``p`` after waiting ``p * d`` SM cycles: the
  readers of a sector spread in time, from all at once (d = 0) to one after another.
* ``tma_*``: the same reads by a tensor descriptor (TMA, as igemm_fast loads its operands),
  which does not pass through L1.

Run under ncu by :func:`main`; ``--launch`` (what ncu runs) launches the cases in order;
``--fit`` fits the merge model below to a stored result (CPU).

    python benchmarks/probes/l2_sharing.py OUT_DIR
    python benchmarks/probes/l2_sharing.py --fit OUT_DIR/l2_sharing.json

The merge model (:func:`model_lookups`): program ``p`` starts ``p * gap`` cycles after program
0 (the dispatcher's pace) plus its wait, and reads its region's sectors in order over
``PROGRAM_CYCLES``; a request for a sector within ``window`` cycles of the lookup that opened
the sector's current burst is merged with it while that lookup serves fewer than ``cap``
requests, else it is a lookup of its own and opens a new burst.  Measured on an H100
(``benchmarks/results/sim_validation_h100/probes_2026-11-25/sharing``): the best fit is a cap of
4, a window of 80-130 cycles and a gap of 4-8 cycles, whichever SMs the readers are on.

Writes ``OUT_DIR/l2_sharing.json`` (per case: the counters below) and prints per case the
sectors the SMs received, the L2 tex read lookups, their hits and misses, and the ones that
reached no lookup (received - lookups).
"""
from __future__ import annotations

import json
import math
import sys
from pathlib import Path

PROGRAMS = 132
REGION_FLOATS = 8192            # 32 KB per program: 1024 sectors of 32 B
BLOCK = 1024                    # floats per load step (4 KB)
STAGGER_CYCLES = (0, 64, 256, 1024, 4096, 16384, 65536)
GROUPS = (2, 4, 12, 33, 132)

METRICS = [
    "l1tex__m_xbar2l1tex_read_sectors.sum",
    "lts__t_sectors_srcunit_tex_op_read.sum",
    "lts__t_requests_srcunit_tex_op_read.sum",
    "lts__t_sectors_srcunit_tex_op_read_lookup_hit.sum",
    "lts__t_sectors_srcunit_tex_op_read_lookup_miss.sum",
    "lts__t_sectors_srcunit_ltcfabric_op_read_lookup_hit.sum",
    "lts__t_sectors_srcunit_ltcfabric_op_read_lookup_miss.sum",
    "dram__sectors_read.sum",
    "gpu__time_duration.sum",
]


TMA_CASES = ("distinct", "group_2", "spread_2", "group_132", "stagger_1024", "stagger_16384")
TMA_ROWS = 32                   # a TMA box of 32 x 64 floats (8 KB): 4 loads per region


def cases() -> list[tuple[str, list[int], list[int]]]:
    """(name, region of each program, delay of each program in SM cycles); the ``tma_`` cases
    come last."""
    plain = _plain_cases()
    return plain + [("tma_" + name, r, d) for name, r, d in plain if name in TMA_CASES]


def _plain_cases() -> list[tuple[str, list[int], list[int]]]:
    out = [("distinct", list(range(PROGRAMS)), [0] * PROGRAMS)]
    for k in GROUPS:
        out.append((f"group_{k}", [p // k for p in range(PROGRAMS)], [0] * PROGRAMS))
        if k < PROGRAMS:
            out.append((f"spread_{k}", [p % (PROGRAMS // k) for p in range(PROGRAMS)], [0] * PROGRAMS))
    for d in STAGGER_CYCLES[1:]:
        out.append((f"stagger_{d}", [0] * PROGRAMS, [p * d for p in range(PROGRAMS)]))
    return out


#: Cycles a program takes to read its region (median, measured with the stagger cases).
PROGRAM_CYCLES = 2000


def model_lookups(regions: list[int], delays: list[int], gap: float, window: float, cap: int,
                  sample: int = 64) -> float:
    """The L2 read lookups the merge model predicts for one case (every region's sectors,
    estimated from ``sample`` of them)."""
    import numpy as np

    start = np.arange(len(regions)) * gap + np.asarray(delays, dtype=float)
    regions_arr = np.asarray(regions)
    sectors = REGION_FLOATS * 4 // 32
    stride = sectors // sample
    lookups = 0
    for region in np.unique(regions_arr):
        readers = start[regions_arr == region]
        for s in range(0, sectors, stride):
            opened, served = -math.inf, cap
            for t in np.sort(readers + s * PROGRAM_CYCLES / sectors):
                if t - opened < window and served < cap:
                    served += 1
                else:
                    opened, served = t, 1
                    lookups += 1
    return lookups * stride


def fit(path: Path) -> None:
    """Fit (gap, window, cap) of :func:`model_lookups` to a stored result: the least sum of
    |log(model / measured)| over the plain (non-TMA) cases."""
    measured = {r["case"]: r["lts__t_sectors_srcunit_tex_op_read.sum"] for r in json.loads(path.read_text())}
    plain = [c for c in cases() if not c[0].startswith("tma_")]
    best = None
    for gap in (2, 4, 6, 8, 10, 14):
        for window in (40, 60, 80, 100, 130, 160, 200, 300):
            for cap in (2, 3, 4, 5, 6, 1000):
                model = {name: model_lookups(r, d, gap, window, cap) for name, r, d in plain}
                err = sum(abs(math.log(model[n] / measured[n])) for n in model)
                if best is None or err < best[0]:
                    best = (err, gap, window, cap, model)
    err, gap, window, cap, model = best
    print(f"best fit: gap {gap} cycles, window {window} cycles, cap {cap} (sum |log ratio| {err:.2f})")
    for name, value in model.items():
        print(f"{name:15s} measured {measured[name]:9.0f} model {value:9.0f}")


def launch() -> None:
    """Launch every case once, in :func:`cases` order (what ncu profiles)."""
    import torch
    import triton
    import triton.language as tl
    from probe_jit import clock as _clock, wait_cycles

    @triton.jit
    def _wait(pid, delay_of):
        """Spin ``delay_of[pid]`` SM cycles; returns 0 computed from the last clock read."""
        return wait_cycles(pid, tl.load(delay_of + pid))

    @triton.jit
    def share_probe(buf, region_of, delay_of, out, REGION: tl.constexpr, BLOCK: tl.constexpr):
        pid = tl.program_id(0)
        region = tl.load(region_of + pid)
        # The loads' addresses depend on the wait's last clock read, so none is issued before it.
        zero, begun = _wait(pid, delay_of)
        base = buf + region * REGION + zero
        acc = tl.zeros((BLOCK,), dtype=tl.float32)
        for i in range(0, REGION, BLOCK):
            acc += tl.load(base + i + tl.arange(0, BLOCK), cache_modifier=".cg")
        total = tl.sum(acc)
        tl.store(out + pid, (_clock(total.to(tl.int64)) - begun).to(tl.float32))

    @triton.jit
    def share_probe_tma(desc, region_of, delay_of, out, ROWS_PER_REGION: tl.constexpr, ROWS: tl.constexpr):
        pid = tl.program_id(0)
        region = tl.load(region_of + pid)
        zero, begun = _wait(pid, delay_of)
        acc = tl.zeros((ROWS, 64), dtype=tl.float32)
        for i in range(0, ROWS_PER_REGION, ROWS):
            acc += desc.load([(region * ROWS_PER_REGION + i + zero).to(tl.int32), 0])
        total = tl.sum(acc)
        tl.store(out + pid, (_clock(total.to(tl.int64)) - begun).to(tl.float32))

    from triton.tools.tensor_descriptor import TensorDescriptor

    buf = torch.ones(PROGRAMS * REGION_FLOATS + 64, dtype=torch.float32, device="cuda")
    rows = PROGRAMS * REGION_FLOATS // 64
    desc = TensorDescriptor(buf, [rows, 64], [64, 1], [TMA_ROWS, 64])
    out = torch.empty(PROGRAMS, dtype=torch.float32, device="cuda")
    for name, regions, delays in cases():
        r = torch.tensor(regions, dtype=torch.int64, device="cuda")
        d = torch.tensor(delays, dtype=torch.int64, device="cuda")
        torch.cuda.synchronize()
        if name.startswith("tma_"):
            share_probe_tma[(PROGRAMS,)](desc, r, d, out, ROWS_PER_REGION=REGION_FLOATS // 64, ROWS=TMA_ROWS,
                                         num_warps=4)
        else:
            share_probe[(PROGRAMS,)](buf, r, d, out, REGION=REGION_FLOATS, BLOCK=BLOCK, num_warps=4)
        torch.cuda.synchronize()
        cycles = out.sort().values
        print(f"launched {name}: cycles from wait's end to loads' end, min {cycles[0]:.0f} "
              f"median {cycles[PROGRAMS // 2]:.0f} max {cycles[-1]:.0f}", flush=True)


def main(argv: list[str]) -> int:
    if argv and argv[0] == "--launch":
        launch()
        return 0
    if argv and argv[0] == "--fit":
        fit(Path(argv[1]))
        return 0
    from run_l2_lookups import profile_launches

    out = Path(argv[0])
    launches = profile_launches(__file__, out, METRICS, "share_probe", "l2_sharing")
    record = [{"case": name, "distinct_regions": len(set(regions)), **values}
              for (name, regions, _), values in zip(cases(), launches)]
    (out / "l2_sharing.json").write_text(json.dumps(record, indent=1))
    print(f"{'case':14s} {'received':>9s} {'lookups':>9s} {'hits':>9s} {'misses':>9s} {'no lookup':>9s} "
          f"{'fab hit':>8s} {'fab miss':>8s} {'dram':>8s} {'ns':>8s}")
    for r in record:
        get = lambda k: r.get(k, float("nan"))  # noqa: E731
        recv, look = get(METRICS[0]), get(METRICS[1])
        print(f"{r['case']:14s} {recv:9.0f} {look:9.0f} {get(METRICS[3]):9.0f} {get(METRICS[4]):9.0f} "
              f"{recv - look:9.0f} {get(METRICS[5]):8.0f} {get(METRICS[6]):8.0f} {get(METRICS[7]):8.0f} "
              f"{get(METRICS[8]):8.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
