"""What the compile stage costs a job on a machine with no GPU: a new (kernel, config,
swizzle, target) and a cached one, through the same client the jobs use
(:class:`harness.compile.build.CompileClient`, under the Triton interpreter, so with its
helper process).

    python benchmarks/compile_speed.py            # fresh Triton and report caches in a temp dir

Prints one row per compile: wall time seen by the job (s), the compile's own time inside the
helper (s), and whether the report came from the cache; then the helper's start-up cost and
the medians.
"""
from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time

os.environ["TRITON_INTERPRET"] = "1"          # the CPU path, as a job on this machine runs it

CASES = [("igemm", "identity"), ("igemm", "xcd"), ("igemm", "grouped"), ("igemm_fast", "identity"),
         ("igemm_fast", "xcd"), ("direct", "xcd"), ("patch", "xcd")]


def main() -> None:
    tmp = tempfile.mkdtemp(prefix="compile-speed-")
    os.environ["TRITON_CACHE_DIR"] = os.path.join(tmp, "triton")    # inherited by the helper: nothing cached
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
    import yaml

    from harness.compile.client import CompileClient
    from harness.job.spec import JobSpec
    from kernels.problem import ConvShape

    shape = ConvShape("l02", 32, 64, 56, 56, 64, 3, 3, 1, 1)
    root = os.path.join(os.path.dirname(__file__), "..", "conf", "kernel")
    client = CompileClient(os.path.join(tmp, "reports"))
    start = time.perf_counter()
    client._start_worker()
    rows = []
    for pass_name in ("new", "cached"):
        for arch in ("gfx942", "sm_90"):
            for kernel, swizzle in CASES:
                conf = yaml.safe_load(open(os.path.join(root, f"{kernel}.yaml")))
                spec = JobSpec(kernel=kernel, tiles=tuple(conf["tiles"].items()), swizzle=swizzle, num_xcds=8,
                               group_size=8, shape=shape, shape_preset="bench", num_warps=conf["num_warps"],
                               num_stages=conf["num_stages"], target=arch, seed=0)
                t0 = time.perf_counter()
                report = client.compile(spec, arch)
                wall = time.perf_counter() - t0
                if not rows:
                    wall_first = time.perf_counter() - start
                rows.append((pass_name, arch, kernel, swizzle, wall, report.seconds, report.cached))
                print(f"{pass_name:6} {arch:6} {kernel:10} {swizzle:9} wall {wall:6.3f} s  compile {report.seconds:6.3f} s"
                      f"  cached={report.cached}", flush=True)
    client.close()
    first_compile = rows[0][5]
    print(f"\nhelper process start + first request: {wall_first:.2f} s (of which the compile {first_compile:.2f} s)")
    for pass_name in ("new", "cached"):
        for arch in ("gfx942", "sm_90"):
            walls = [r[4] for r in rows if r[0] == pass_name and r[1] == arch][1 if pass_name == "new" else 0:]
            print(f"{pass_name:6} {arch:6}: median {statistics.median(walls):.3f} s, max {max(walls):.3f} s per job "
                  f"({len(walls)} compiles)")


if __name__ == "__main__":
    main()
