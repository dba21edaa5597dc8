"""Probe (GPU): which L2 partition does each SM read through?

An H100's L2 is two partitions joined by a fabric.  An SM reads through one of them; a miss
there of a line homed in the other is looked up again at home over the fabric (ncu:
``lts__t_sectors_srcunit_ltcfabric_op_read_lookup_*``) and the line is then kept in both.  The
simulator needs to know which programs share a partition: a line two programs read is one
miss if they do, and two near misses (one of them a fabric hit) if they do not.

So, for every SM ``b``, one launch of 132 programs (one per SM, ``sm_placement.py``) in which
only two SMs read: the reference SM ``r`` reads a 32 KB region (1024 sectors) at once, and SM
``b`` reads the same region ``DELAY_CYCLES`` later, when the first fill has long landed.
Roles go by ``%smid``, not by program id, and every other program exits.  ncu flushes the L2
before each launch.

* ``b`` in ``r``'s partition: every sector ``b`` reads is a hit where ``r`` put it: about 0
  fabric hits beyond the reference's own launch.
* ``b`` in the other partition: the half of the region homed in ``r``'s partition misses in
  ``b``'s and is found at home over the fabric: about 512 more fabric hits.

Two sweeps, reference SM 0 and reference SM 66, each label every SM "same" or "other"; the
second checks the first (every SM's label must agree once 66's own is known).

    python benchmarks/probes/l2_partition_map.py OUT_DIR     # under ncu; 2 x 132 launches

Writes ``OUT_DIR/l2_partition_map.json``: the counters of every launch, the fabric hits of SM
``b``'s reads, and ``sm_partition`` (0: SM 0's partition, 1: the other), and prints the map
and its check.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

PROGRAMS = 132
REGION_FLOATS = 8192            # 32 KB: 1024 sectors of 32 B
BLOCK = 1024                    # floats per load step (4 KB)
DELAY_CYCLES = 40_000           # SM b's wait: 20 times what reading the region takes
REFERENCES = (0, 66)

METRICS = [
    "lts__t_sectors_srcunit_tex_op_read_lookup_hit.sum",
    "lts__t_sectors_srcunit_tex_op_read_lookup_miss.sum",
    "lts__t_sectors_srcunit_ltcfabric_op_read_lookup_hit.sum",
    "lts__t_sectors_srcunit_ltcfabric_op_read_lookup_miss.sum",
    "dram__sectors_read.sum",
]
FABRIC_HITS = METRICS[2]


def cases() -> list[tuple[int, int | None]]:
    """(reference SM, second SM or None), in launch order: per reference, its launch alone,
    then one launch with each other SM."""
    out: list[tuple[int, int | None]] = []
    for r in REFERENCES:
        out.append((r, None))
        out += [(r, b) for b in range(PROGRAMS) if b != r]
    return out


def launch() -> None:
    """Launch every case once, in :func:`cases` order (what ncu profiles)."""
    import torch
    import triton
    import triton.language as tl
    from probe_jit import smid, wait_cycles

    @triton.jit
    def partition_probe(buf, reads_of, delay_of, out, REGION: tl.constexpr, BLOCK: tl.constexpr):
        pid = tl.program_id(0)
        sm = smid(pid)
        reads = tl.load(reads_of + sm)
        # The loads' addresses depend on the wait's last clock read, so none is issued before it.
        zero, _ = wait_cycles(pid, tl.load(delay_of + sm))
        base = buf + zero
        acc = tl.zeros((BLOCK,), dtype=tl.float32)
        offs = tl.arange(0, BLOCK)
        for i in range(0, REGION, BLOCK):
            acc += tl.load(base + i + offs, mask=(offs < BLOCK) & (reads != 0), other=0.0, cache_modifier=".cg")
        tl.store(out + pid, tl.sum(acc) + sm.to(tl.float32))

    buf = torch.ones(REGION_FLOATS + 64, dtype=torch.float32, device="cuda")
    out = torch.empty(PROGRAMS, dtype=torch.float32, device="cuda")
    for r, b in cases():
        reads = torch.zeros(PROGRAMS, dtype=torch.int32, device="cuda")
        delay = torch.zeros(PROGRAMS, dtype=torch.int64, device="cuda")
        reads[r] = 1
        if b is not None:
            reads[b] = 1
            delay[b] = DELAY_CYCLES
        torch.cuda.synchronize()
        partition_probe[(PROGRAMS,)](buf, reads, delay, out, REGION=REGION_FLOATS, BLOCK=BLOCK, num_warps=4)
        torch.cuda.synchronize()
        # out[p] = smid + what the readers summed (REGION_FLOATS ones): every SM hosts one program
        sms = sorted(int(v) % REGION_FLOATS for v in out.cpu().tolist())
        if sms != list(range(PROGRAMS)):
            print(f"launched {r},{b}: WARNING programs were not one per SM", flush=True)
    print(f"launched {len(cases())} cases", flush=True)


def partition_map(record: list[dict]) -> dict:
    """The map from the launches' fabric hits: per reference, the extra fabric hits of each
    SM's reads over the reference's own launch, the SMs labelled other (more than a quarter of
    the region's sectors), and ``sm_partition`` relative to SM 0 with its check."""
    sectors = REGION_FLOATS * 4 // 32
    labels = {}
    extra = {}
    for r in REFERENCES:
        alone = next(x[FABRIC_HITS] for x in record if x["reference"] == r and x["second"] is None)
        extra[r] = {x["second"]: x[FABRIC_HITS] - alone for x in record if x["reference"] == r and x["second"] is not None}
        labels[r] = {b: int(v > sectors / 4) for b, v in extra[r].items()}
        labels[r][r] = 0
    first = labels[REFERENCES[0]]
    part = [first[b] for b in range(PROGRAMS)]
    flip = part[REFERENCES[1]]
    disagree = [b for b in range(PROGRAMS) if labels[REFERENCES[1]][b] ^ flip != part[b]]
    return {"sm_partition": part, "disagree": disagree,
            "extra_fabric_hits": {str(r): {str(b): v for b, v in e.items()} for r, e in extra.items()}}


def main(argv: list[str]) -> int:
    if argv and argv[0] == "--launch":
        launch()
        return 0
    from run_l2_lookups import profile_launches

    out = Path(argv[0])
    launches = profile_launches(__file__, out, METRICS, "partition_probe", "l2_partition_map")
    if len(launches) != len(cases()):
        print(f"expected {len(cases())} profiled launches, got {len(launches)}")
        return 1
    record = [{"reference": r, "second": b, **values} for (r, b), values in zip(cases(), launches)]
    result = partition_map(record)
    (out / "l2_partition_map.json").write_text(json.dumps({"launches": record, **result}, indent=1))
    part = result["sm_partition"]
    print(f"SMs in SM 0's partition: {part.count(0)}, in the other: {part.count(1)}")
    print("sm_partition:", part)
    print("SMs whose label from reference 66 disagrees:", result["disagree"])
    for r, e in result["extra_fabric_hits"].items():
        v = sorted(e.values())
        print(f"reference {r}: extra fabric hits per SM, min {v[0]:.0f} median {v[len(v) // 2]:.0f} max {v[-1]:.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
