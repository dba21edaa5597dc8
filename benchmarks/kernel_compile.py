"""Compile igemm_fast for Hopper (sm_90a) on a machine with no GPU, and report what the
compiler made of it: registers, spills, shared memory, and the instruction mix that decides
speed (wgmma or mma, TMA or cp.async, 16-byte or narrower global loads).

    python benchmarks/kernel_compile.py --shape 32,64,56,56,64,3,3,1,1 \
        --tiles BLOCK_M=128,BLOCK_N=64,BLOCK_K=64,SPLIT_K=1,PACK_K=0,PERSISTENT=0,TMA=1 --warps 4 --stages 4

The argument specialisation copies Triton's launcher: pointers and integers divisible by
16 are marked so; the kernel's ``do_not_specialize`` arguments are left plain.  Costs no
device time: use it before spending any.
"""
from __future__ import annotations

import argparse
import collections
import os
import re
import subprocess
import tempfile

import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

from kernels.igemm_fast import FLAGS, derived_flags, folded, igemm_fast_kernel, k_pad
from kernels.problem import ConvShape
from swizzles import SWIZZLES

SHAPE_FIELDS = ("N", "C", "H", "W", "F", "R", "S", "stride", "padding")


def compile_config(shape: ConvShape, tiles: dict, num_warps: int, num_stages: int, swizzle: str = "identity"):
    fn = igemm_fast_kernel
    tiles = {**dict.fromkeys(FLAGS, 0), **tiles}                # flags not given are off
    shape = folded(shape) if tiles["FOLD"] else shape           # the fold pass itself is not compiled here
    derived = derived_flags(shape, tiles)
    ints = {"N": shape.N, "C": shape.C, "H": shape.H, "W": shape.W, "F": shape.F, "P": shape.P, "Q": shape.Q, "PQ": shape.P * shape.Q,
            "R": shape.R, "S": shape.S, "stride": shape.stride, "padding": shape.padding,
            "K_PAD": k_pad(shape, tiles), "num_programs": 132}
    constexprs = {"SWIZZLE": SWIZZLES[swizzle], "NUM_XCDS": 8, "GROUP_SIZE": 8,
                  "BLOCK_M": tiles["BLOCK_M"], "BLOCK_N": tiles["BLOCK_N"], "BLOCK_K": tiles["BLOCK_K"],
                  "SPLIT_K": tiles["SPLIT_K"], "PACK_K": tiles["PACK_K"], "NCHW_IN": tiles["NCHW_IN"],
                  "TMA": tiles["TMA"], "TMA_STORE": tiles["TMA_STORE"], **derived, "DOT_IN_FP32": False}
    dtype = {"float16": "*fp16", "bfloat16": "*bf16"}[shape.dtype]
    signature, attrs = {}, {}
    no_spec = set(fn.do_not_specialize) | {fn.arg_names[i] for i in fn.do_not_specialize if isinstance(i, int)}
    elem = dtype[1:]
    descs = {"x_desc": [tiles["BLOCK_M"], tiles["BLOCK_K"]] if derived["A_TMA"] else None,
             "w_desc": [tiles["BLOCK_N"], tiles["BLOCK_K"]] if tiles["TMA"] else None,
             "y_desc": [tiles["BLOCK_M"], tiles["BLOCK_N"]] if tiles["TMA_STORE"] else None}
    for i, name in enumerate(fn.arg_names):
        if name in descs:                 # host-built descriptors (kernels.igemm_fast.descriptors)
            if descs[name] is None:
                signature[name], constexprs[name] = "constexpr", None
            else:
                signature[name] = f"tensordesc<{elem}[{','.join(map(str, descs[name]))}]>"
        elif name in constexprs:
            signature[name] = "constexpr"
        elif name.endswith("_ptr"):
            signature[name] = {"ws_ptr": "*fp32", "count_ptr": "*i32"}.get(name, dtype)
            attrs[(i,)] = [["tt.divisibility", 16]]
        else:
            value = ints[name]
            if name not in no_spec and value == 1:
                signature[name] = "constexpr"
                constexprs[name] = 1
            else:
                signature[name] = "i32"
                if name not in no_spec and value % 16 == 0:
                    attrs[(i,)] = [["tt.divisibility", 16]]
    src = ASTSource(fn=fn, signature=signature, constexprs=constexprs, attrs=attrs)
    return triton.compile(src, target=GPUTarget("cuda", 90, 32),
                          options={"num_warps": num_warps, "num_stages": num_stages})


def report(compiled) -> dict:
    """Registers and local memory (cuobjdump), shared memory, and SASS counts of the
    instructions that decide speed: HGMMA (wgmma), UTMALDG / UTMASTG (TMA load / store),
    LDGSTS (cp.async), LDG and STG by width, LDL/STL (spills)."""
    tools = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin")
    with tempfile.TemporaryDirectory() as tmp:
        cubin = os.path.join(tmp, "k.cubin")
        with open(cubin, "wb") as fh:
            fh.write(compiled.asm["cubin"])
        usage = subprocess.run([os.path.join(tools, "cuobjdump"), "-res-usage", cubin],
                               capture_output=True, text=True).stdout
        sass = subprocess.run([os.path.join(tools, "nvdisasm"), cubin], capture_output=True, text=True).stdout
    regs = re.search(r"REG:(\d+)", usage)
    local = re.search(r"LOCAL:(\d+)", usage)
    ops = collections.Counter(re.findall(r"\b(HGMMA|HMMA|UTMALDG|UTMASTG|LDGSTS|LDG|STG|LDL|STL)(\.[.\w]*)?", sass))
    counts = collections.Counter()
    for (op, suffix), n in ops.items():
        width = re.search(r"\.(128|64|U16|16)\b", suffix) if op in ("LDG", "LDGSTS", "STG") else None
        counts[op + (f".{width.group(1)}" if width else "")] += n
    return {"regs": int(regs.group(1)) if regs else None, "local_bytes": int(local.group(1)) if local else None,
            "shared": compiled.metadata.shared, **dict(sorted(counts.items()))}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shape", required=True, help="N,C,H,W,F,R,S,stride,padding")
    ap.add_argument("--tiles", required=True, help="KEY=VALUE,...")
    ap.add_argument("--warps", type=int, default=4)
    ap.add_argument("--stages", type=int, default=3)
    args = ap.parse_args()
    shape = ConvShape("cli", **dict(zip(SHAPE_FIELDS, map(int, args.shape.split(",")))))
    tiles = {k: int(v) for k, v in (kv.split("=") for kv in args.tiles.split(","))}
    print(report(compile_config(shape, tiles, args.warps, args.stages)))


if __name__ == "__main__":
    main()
