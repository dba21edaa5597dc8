"""Run benchmarks/probes/l2_lookups.py under ncu with the metrics below, dropping any metric
this ncu does not know (ncu stops at the first unknown name), and print one row per launch.

    python benchmarks/probes/run_l2_lookups.py OUT_DIR l12:identity,colmajor,scatter l02:identity,scatter
    python benchmarks/probes/run_l2_lookups.py OUT_DIR "l02@igemm_fast@BLOCK_M=64,...,TMA=1/w4/s2:identity"
    python benchmarks/probes/run_l2_lookups.py --harness-metrics OUT_DIR unseen7/incv3m6:identity,hilbert

``--metrics=a,b,c``: only these metrics (e.g. ``lts__t_sector_hit_rate.pct`` alone, which ncu
collects in fewer replay passes than with other metrics beside it).

``--harness-metrics``: only the metrics the harness's ncu profiler collects
(``harness.profilers.ncu.NCU_METRICS``), which ncu groups into other replay passes than the list
below; a timing-sensitive count can differ between the two (96a51f9:benchmarks/README.md, "A probe that
disagrees with itself").
"""
from __future__ import annotations

import csv
import io
import re
import subprocess
import sys
from pathlib import Path

METRICS = [
    "lts__t_sectors_srcunit_tex_op_read_lookup_hit.sum",
    "lts__t_sectors_srcunit_tex_op_read_lookup_miss.sum",
    "lts__t_sectors_srcunit_tex_op_read.sum",
    "lts__t_requests_srcunit_tex_op_read.sum",
    "lts__t_sectors_srcunit_tex.sum",
    "lts__t_sectors_srcunit_ltcfabric.sum",
    "lts__t_sectors_srcunit_ltcfabric_op_read_lookup_hit.sum",
    "lts__t_sectors_srcunit_ltcfabric_op_read_lookup_miss.sum",
    "lts__t_sectors_op_read_lookup_hit.sum",
    "lts__t_sectors_op_read_lookup_miss.sum",
    "lts__t_sectors_op_write.sum",
    "lts__t_sectors_op_write_lookup_hit.sum",
    "lts__t_sectors_op_write_lookup_miss.sum",
    "lts__t_requests_op_write.sum",
    "lts__t_sectors_srcunit_tex_op_write.sum",
    "lts__t_requests_srcunit_tex_op_write.sum",
    "lts__t_sectors.sum",
    "lts__t_sector_hit_rate.pct",
    "lts__t_sector_op_read_hit_rate.pct",
    "lts__d_sectors_fill_sysmem.sum",
    "lts__d_sectors_fill_device.sum",
    "dram__sectors_read.sum",
    "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum",
    "l1tex__t_sectors_pipe_lsu_mem_global_op_ld_lookup_hit.sum",
    "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum",
    "l1tex__t_sectors_pipe_lsu_mem_global_op_ldgsts_cache_access.sum",
    "l1tex__t_sectors_pipe_lsu_mem_global_op_ldgsts_cache_bypass.sum",
    "l1tex__t_sectors_pipe_lsu_mem_global_op_ldgsts_cache_access_lookup_hit.sum",
    "l1tex__m_xbar2l1tex_read_sectors.sum",
    "l1tex__m_l1tex2xbar_req.sum",
    "smsp__inst_executed_op_ldgsts.sum",
    "smsp__inst_executed_op_global_ld.sum",
    "sm__cycles_elapsed.max",
    "gpu__time_duration.sum",
]


def ncu_table(command: list[str], metrics: list[str], kernel_regex: str) -> tuple[list[str], list[list[str]], str]:
    """Run ``command`` under ncu (cold L2 before each profiled launch, base clocks) with
    ``metrics``, dropping any this ncu does not know (it stops at the first unknown name):
    (column names, one row per profiled launch in launch order, ncu's whole output)."""
    metrics = list(metrics)
    for _ in range(len(metrics)):
        cmd = ["ncu", "--csv", "--page", "raw", "--metrics", ",".join(metrics), "--cache-control", "all",
               "--clock-control", "base", "-k", f"regex:{kernel_regex}", "--print-units", "base", *command]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=400)
        text = proc.stdout + proc.stderr
        bad = re.findall(r"Failed to find metric[s]?\s+\"?([\w.]+)", text) + \
            re.findall(r"[Mm]etric[s]? \"?([\w.]+)\"? (?:is|are) not (?:valid|available|supported)", text)
        bad = [b for b in bad if b in metrics]
        if proc.returncode == 0 or not bad:
            break
        print("dropping", bad, flush=True)
        metrics = [m for m in metrics if m not in bad]
    names, rows = parse_raw(text)
    return names, rows, text


def parse_raw(text: str) -> tuple[list[str], list[list[str]]]:
    """ncu's ``--csv --page raw`` output (other lines around it allowed): (column names, one row
    per profiled launch in launch order); ([], []) when there is no table."""
    header = next((i for i, line in enumerate(text.splitlines()) if line.startswith('"ID"')), None)
    if header is None:
        return [], []
    rows = list(csv.reader(io.StringIO("\n".join(text.splitlines()[header:]))))
    return rows[0], [r for r in rows[2:] if len(r) == len(rows[0])]


def profile_launches(script: str, out: Path, metrics: list[str], kernel_regex: str, name: str) -> list[dict]:
    """Run ``script --launch`` under ncu (:func:`ncu_table`), print its ``launched`` lines and
    keep ncu's output as ``out/<name>_ncu.txt``: one {metric: value} per profiled launch, in
    launch order (the metrics this ncu knows)."""
    out.mkdir(parents=True, exist_ok=True)
    names, rows, text = ncu_table([sys.executable, script, "--launch"], metrics, kernel_regex)
    print("\n".join(line for line in text.splitlines() if line.startswith("launched")))
    (out / f"{name}_ncu.txt").write_text(text)
    return [{m: float(row[names.index(m)].replace(",", "")) for m in metrics if m in names} for row in rows]


def split_orders(text: str) -> list[str]:
    """The orders of ``text``, comma-separated, a family label's own commas kept
    (``identity,hilbert[num_xcds=1,chunk=0,order=3]`` is two orders)."""
    return re.split(r",(?![^\[]*\])", text)


def parse_args(argv: list[str]) -> tuple[list[str], Path, list[str]]:
    """(metrics, output directory, jobs) from the command line (see the module docstring)."""
    metrics = list(METRICS)
    if argv and argv[0] == "--harness-metrics":
        from harness.profilers.ncu import NCU_METRICS
        metrics, argv = list(NCU_METRICS), argv[1:]
    elif argv and argv[0].startswith("--metrics="):
        metrics, argv = [m for m in argv[0][len("--metrics="):].split(",") if m], argv[1:]
        if not metrics:
            raise SystemExit("--metrics= names no metric: give them comma-separated, e.g. "
                             "--metrics=lts__t_sector_hit_rate.pct,profiler__replayer_passes")
    if len(argv) < 2:
        raise SystemExit("usage: run_l2_lookups.py [--harness-metrics | --metrics=a,b] OUT_DIR LAYER:ORDER,... ...")
    return metrics, Path(argv[0]), argv[1:]


def main(argv: list[str]) -> int:
    metrics, out, jobs = parse_args(argv)
    out.mkdir(parents=True, exist_ok=True)
    for job in jobs:
        layer, orders = job.rsplit(":", 1)
        name = re.sub(r"[^A-Za-z0-9_.-]+", "_", layer)[:120]
        names, data, text = ncu_table(["python3", "benchmarks/probes/l2_lookups.py", layer, *split_orders(orders)],
                                      metrics, "igemm")
        (out / f"probe_{name}.txt").write_text(text)
        if not names:
            print(f"{layer}: no table:\n{text[-3000:]}")
            continue
        for metric in metrics:
            if metric in names:
                j = names.index(metric)
                print(f"{name[:24]:24s} {metric:75s} " + " ".join(f"{r[j]:>14s}" for r in data))
        print(f"{layer} orders: {orders}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
