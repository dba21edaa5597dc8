"""On an NVIDIA GPU: is the compile stage's ahead-of-time build the kernel the GPU runs?

For each case (every kernel family's default config, igemm_fast's flag paths and tuned tile
shapes, on ResNet-50 layers), the spec is compiled ahead of time for sm_90 exactly as a job
on a CPU-only machine does it (:func:`harness.compile.build.compile_spec`), then launched
for real through the family's own ``bind``; the JIT's compiled kernel is looked up in
Triton's cache and compared field by field:

* ``same_binary``: Triton's cache hash of the two builds is equal (same source,
  specialisation, options and target);
* registers per thread and spills (the driver's ``n_regs``/``n_spills``) and shared memory;
* occupancy: :func:`harness.hardware.arch.occupancy` against the driver's own
  ``cuOccupancyMaxActiveBlocksPerMultiprocessor`` for that function, block size and
  dynamic shared memory.

    python benchmarks/compile_check_gpu.py OUT_DIR        # writes compile_check.csv / .md
"""
from __future__ import annotations

import csv
import ctypes
import os
import sys

import torch
import triton
import yaml

from harness.compile.build import compile_spec
from harness.measure.correctness import make_operands
from harness.job.spec import JobSpec
from harness.job.user_code import spec_kernel, spec_remap
from kernels.base import LaunchConfig, SwizzleBinding
from kernels.problem import ConvShape

CONF = os.path.join(os.path.dirname(__file__), "..", "conf", "kernel")
L02 = ConvShape("l02", 32, 64, 56, 56, 64, 3, 3, 1, 1)
L04 = ConvShape("l04", 32, 64, 56, 56, 256, 1, 1, 1, 0)
L23 = ConvShape("l23", 32, 512, 7, 7, 512, 3, 3, 1, 1)
STEM = ConvShape("stem", 32, 3, 224, 224, 64, 7, 7, 2, 3)
CASES = [(k, "xcd", L02, {}, None, None) for k in ("direct", "patch", "igemm", "igemm_fast")] + [
    ("igemm", "identity", L02, {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32}, 4, 2),
    ("igemm_fast", "identity", L02, {"BLOCK_M": 128, "BLOCK_N": 64, "BLOCK_K": 64, "TMA": 1}, 4, 4),
    ("igemm_fast", "identity", L04, {"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64, "TMA": 1}, 8, 4),
    ("igemm_fast", "identity", L04, {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "TMA": 1, "TMA_STORE": 1}, 4, 3),
    ("igemm_fast", "identity", L04, {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "NCHW_IN": 1}, 4, 3),
    ("igemm_fast", "xcd", L23, {"BLOCK_M": 64, "BLOCK_N": 128, "BLOCK_K": 64, "SPLIT_K": 4, "TMA": 1}, 4, 4),
    ("igemm_fast", "grouped", L02, {"BLOCK_M": 128, "BLOCK_N": 64, "BLOCK_K": 64, "PERSISTENT": 1, "TMA": 1}, 4, 4),
    ("igemm_fast", "identity", STEM, {"BLOCK_M": 128, "BLOCK_N": 64, "BLOCK_K": 32, "FOLD": 1, "PACK_K": 2}, 4, 3),
    ("igemm_fast", "identity", STEM, {"BLOCK_M": 256, "BLOCK_N": 64, "BLOCK_K": 32, "PACK_K": 1}, 8, 3),
]


def driver_occupancy(function: int, block: int, smem: int) -> int:
    cuda = ctypes.CDLL("libcuda.so.1")
    out = ctypes.c_int(0)
    err = cuda.cuOccupancyMaxActiveBlocksPerMultiprocessor(ctypes.byref(out), ctypes.c_void_p(function),
                                                           ctypes.c_int(block), ctypes.c_size_t(smem))
    return out.value if err == 0 else -err


def check(kernel_name, swizzle, shape, tiles, warps, stages) -> dict:
    conf = yaml.safe_load(open(os.path.join(CONF, f"{kernel_name}.yaml")))
    spec = JobSpec(kernel=kernel_name, tiles=tuple({**conf["tiles"], **tiles}.items()), swizzle=swizzle,
                   num_xcds=8, group_size=8, shape=shape, shape_preset="check", num_warps=warps or conf["num_warps"],
                   num_stages=stages or conf["num_stages"], target="h100", seed=0)
    ours = []
    real_compile = triton.compile

    def capture(*args, **kwargs):          # keep our own CompiledKernel, to diff its metadata
        ours.append(real_compile(*args, **kwargs))
        return ours[-1]

    triton.compile = capture
    try:
        report = compile_spec(spec, "sm_90")
    finally:
        triton.compile = real_compile
    kernel = spec_kernel(spec)
    cache = kernel.jit_kernel.device_caches[torch.cuda.current_device()][0]
    before = set(cache)
    ops = make_operands(shape, kernel.has_bias, 0, "cuda", "channels_last")
    run, _ = kernel.bind(ops, shape, kernel.check_tiles(spec.tiles_dict),
                         SwizzleBinding(spec_remap(spec), 8, 8), LaunchConfig(spec.num_warps, spec.num_stages))
    run()
    torch.cuda.synchronize()
    new = [cache[k] for k in cache if k not in before] or list(cache.values())
    main = report.main
    real = next((k for k in new if k.hash == main.triton_hash), None)
    row = {"kernel": kernel_name, "swizzle": swizzle, "shape": shape.name, "config": f"{tiles} w{spec.num_warps} s{spec.num_stages}",
           "same_binary": real is not None, "aot_regs": main.registers, "aot_shared": main.shared_bytes,
           "aot_spill_bytes": main.spill_bytes, "aot_programs_per_sm": (main.occupancy or {}).get("programs_per_cu")}
    if real is None:                         # what differs between the two builds' metadata
        real = new[-1]
        mine, theirs = ours[0].metadata._asdict(), real.metadata._asdict()
        row["metadata_diff"] = {k: (mine.get(k), theirs.get(k)) for k in set(mine) | set(theirs)
                                if k != "hash" and mine.get(k) != theirs.get(k)}
        a, b = getattr(ours[0], "src", None), getattr(real, "src", None)
        if a is not None and b is not None:      # the source side of the cache key
            for field in ("signature", "attrs", "constexprs"):
                fa, fb = getattr(a, field, None), getattr(b, field, None)
                if repr(fa) != repr(fb):
                    row["metadata_diff"][f"src.{field}"] = (repr(fa)[:300], repr(fb)[:300])
            row["metadata_diff"]["src.hash_equal"] = a.hash() == b.hash()
    row.update({"jit_regs": real.n_regs, "jit_spills": real.n_spills, "jit_shared": real.metadata.shared,
                "driver_programs_per_sm": driver_occupancy(real.function, 32 * spec.num_warps, real.metadata.shared)})
    row["agree"] = (row["same_binary"] and row["aot_regs"] == row["jit_regs"] and row["aot_shared"] == row["jit_shared"]
                    and row["aot_programs_per_sm"] == row["driver_programs_per_sm"])
    return row


def main() -> None:
    out = sys.argv[1] if len(sys.argv) > 1 else "."
    rows = []
    for case in CASES:
        try:
            rows.append(check(*case))
        except Exception as exc:   # one case's failure is a row, not the end of the check
            rows.append({"kernel": case[0], "swizzle": case[1], "shape": case[2].name, "config": str(case[3]),
                         "error": f"{type(exc).__name__}: {str(exc)[:300]}"})
        print(rows[-1], flush=True)
    keys = list(dict.fromkeys(k for r in rows for k in r))
    with open(os.path.join(out, "compile_check.csv"), "w", newline="") as fh:
        writer = csv.DictWriter(fh, keys)
        writer.writeheader()
        writer.writerows(rows)
    with open(os.path.join(out, "compile_check.md"), "w") as fh:
        fh.write("| " + " | ".join(keys) + " |\n|" + "---|" * len(keys) + "\n")
        for r in rows:
            fh.write("| " + " | ".join(str(r.get(k, "")) for k in keys) + " |\n")
    print(f"{sum(bool(r.get('agree')) for r in rows)} of {len(rows)} cases agree")


if __name__ == "__main__":
    main()
