"""Probe (GPU): on which SM does each program of a grid run?

The simulator places the first wave's programs on SMs, and SMs in clusters (GPCs) that read
through one L2 partition (``cluster_run`` in ``conf/target/h100.yaml``).  Here every program
of grids of several sizes records ``%smid``: is program ``p`` on SM ``p``?  Are the programs
of a small grid packed into the first SMs or spread over the machine?

    python benchmarks/probes/sm_placement.py OUT_DIR

Writes ``OUT_DIR/sm_placement.json`` and prints the first programs' SMs per grid size.

Measured on an H100 (``benchmarks/results/sim_validation_h100/probes_2026-11-25``): SM ids
come in runs of 14-16 (one GPC each, judged by the dispatch pattern, not read from the
hardware), and the dispatcher deals *pairs* of SMs (a TPC) round-robin over those runs
(program 8, 9 on SMs 0, 1; 10, 11 on 16, 17; 12, 13 on 32, 33; ...), after 8 programs on
SMs 124-131.  A grid of 52 programs gets one SM per TPC, spread over every run.  An earlier
version also timed loads with ``%clock64`` to tell the L2 partitions apart; the clock reads
were not ordered after the loads (2 cycles each), so the SM-to-partition map is not measured.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import torch
import triton
import triton.language as tl
from probe_jit import smid


@triton.jit
def _where(out_ptr):
    pid = tl.program_id(0)
    tl.store(out_ptr + pid, smid(pid))


def dispatch(sizes=(52, 98, 132, 264, 1056)) -> dict:
    """{grid size: [smid of program p]} (4 warps per program, nothing resident before)."""
    out = {}
    for g in sizes:
        buf = torch.full((g,), -1, dtype=torch.int32, device="cuda")
        _where[(g,)](buf, num_warps=4)
        torch.cuda.synchronize()
        out[g] = buf.cpu().tolist()
    return out


def main(argv: list[str]) -> int:
    out = Path(argv[0])
    out.mkdir(parents=True, exist_ok=True)
    props = torch.cuda.get_device_properties(0)
    num_sms = props.multi_processor_count
    record = {"device": props.name, "torch": torch.__version__, "triton": triton.__version__, "num_sms": num_sms}
    record["dispatch"] = {str(g): s for g, s in dispatch().items()}
    (out / "sm_placement.json").write_text(json.dumps(record, indent=1))
    print(record["device"], "torch", record["torch"], "triton", record["triton"], "SMs", num_sms)
    for g, s in record["dispatch"].items():
        print(f"grid {g:>5}: first 40 programs on SMs {s[:40]}")
        print(f"           distinct SMs {len(set(s))}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
