"""Probe: do CUTLASS's Hopper GEMMs, with and without 2-CTA clusters (TMA multicast of the
shared operand), reach cuDNN on the pointwise layers where igemm_best does not (GPU)?

A stride-1 1x1 conv on channels_last fp16 tensors is the GEMM ``D[M, F] = X[M, C] W[F, C]^T``
(M = N * H * W pixels).  ``benchmarks/probes/cutlass_1x1.cu`` instantiates CUTLASS 3's
warp-specialized sm_90a GEMM at several tiles, cluster shapes (1x1: no multicast; 2x1: the
two CTAs of a cluster share the weight tile, multicast; 1x2: the pixel tile) and schedulers
(cooperative, ping-pong, stream-K), one ``run_<name>`` C function each, built into
``--lib`` with nvcc (see that file).  For each layer every config is checked against an fp32
``torch.mm``, then cuDNN (benchmark mode), cuBLAS (``torch.mm``), the igemm_best table's
launch and each config are timed by CUPTI (kernel time, L2 cleared before each launch,
median of ``--rounds``), twice in a row, printed in microseconds with cuDNN / it:

    . benchmarks/gpu_setup.sh && python3 benchmarks/probes/cutlass_1x1.py --lib .cutlass_probe/libcutlass_probe.so
"""
from __future__ import annotations

import argparse
import ctypes
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

LAYERS = "resnet/l22,resnet/l16,resnet/l20,resnet/l08,resnet/l14,resnet/l12,unseen7/aspp,unseen8/incv3m7,unseen8/goog5b"
WORKSPACE_BYTES = 64 << 20


def main() -> None:
    import torch
    import torch.nn.functional as F

    from conv_speed import preset_shapes
    from harness.measure.correctness import make_operands
    from harness.measure.timing import FLUSH_BYTES
    from kernels import KERNELS
    from kernels.base import LaunchConfig, SwizzleBinding
    from kernels.tuned import TunedTable
    from split_k_cost import kernel_us
    from swizzles import SWIZZLES

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lib", required=True)
    ap.add_argument("--names", required=True, help="the run_<name> functions in --lib, comma-separated")
    ap.add_argument("--layers", default=LAYERS, help="preset/layer,... (stride-1 1x1 layers)")
    ap.add_argument("--table", default="kernels/tuned/igemm_best_h200.json")
    ap.add_argument("--rounds", type=int, default=20)
    args = ap.parse_args()
    torch.backends.cudnn.benchmark = True
    lib = ctypes.CDLL(args.lib)
    flush = torch.empty(FLUSH_BYTES // 4, dtype=torch.int32, device="cuda")
    workspace = torch.empty(WORKSPACE_BYTES, dtype=torch.uint8, device="cuda")
    table, best = TunedTable.load(Path(args.table)), KERNELS["igemm_best"]
    wanted = args.layers.split(",")
    presets = sorted({w.split("/")[0] for w in wanted})
    shapes = {s.name: s for s in preset_shapes(presets)}
    summary = []
    for name in wanted:
        shape = shapes[name]
        assert (shape.R, shape.S, shape.stride, shape.padding) == (1, 1, 1, 0), name
        ops = make_operands(shape, False, 0, "cuda", "channels_last")
        M = shape.N * shape.H * shape.W
        a = ops.x.permute(0, 2, 3, 1).reshape(M, shape.C)          # the channels_last memory, a view
        b = ops.w.reshape(shape.F, shape.C)
        assert a.data_ptr() == ops.x.data_ptr() and a.is_contiguous() and b.is_contiguous()
        want = a.float() @ b.float().t()
        fns = {"cudnn": lambda x=ops.x, w=ops.w: F.conv2d(x, w), "cublas": lambda a=a, b=b: torch.mm(a, b.t())}
        choice = table.lookup(shape)
        run, _ = best.bind(ops, shape, choice.config.tiles_dict, SwizzleBinding(SWIZZLES["identity"], 1, 8),
                           LaunchConfig(choice.config.num_warps, choice.config.num_stages))
        fns["table"] = run
        for cfg in args.names.split(","):
            fn_c = getattr(lib, f"run_{cfg}")
            out = torch.empty(M, shape.F, dtype=torch.float16, device="cuda")
            need = ctypes.c_size_t(0)

            def launch(fn_c=fn_c, out=out, need=need):
                rc = fn_c(ctypes.c_void_p(a.data_ptr()), ctypes.c_void_p(b.data_ptr()), ctypes.c_void_p(out.data_ptr()),
                          M, shape.F, shape.C, ctypes.c_void_p(workspace.data_ptr()), ctypes.c_size_t(WORKSPACE_BYTES),
                          ctypes.byref(need), ctypes.c_void_p(torch.cuda.current_stream().cuda_stream))
                if rc:
                    raise RuntimeError(f"run_{cfg}: status {rc} (workspace needed {need.value} bytes)")

            try:
                out.fill_(float("nan"))
                launch()
                torch.cuda.synchronize()
                err = float((out.float() - want).abs().max() / want.abs().max())
            except Exception as exc:  # noqa: BLE001 - a config that fails is reported, not fatal
                print(f"{name} {cfg}: failed: {str(exc).splitlines()[0][:200]}", flush=True)
                continue
            if not err < 1e-2:
                print(f"{name} {cfg}: WRONG (max rel. err {err:.3g})", flush=True)
                continue
            fns[cfg] = launch
        rounds = [{k: sum(v.values()) for k, v in kernel_us(fns, args.rounds, flush).items()} for _ in range(2)]
        for i, times in enumerate(rounds):
            print(f"{name} pass {i}: " + ", ".join(f"{k} {v:.2f}" for k, v in times.items()) + " us", flush=True)
        mean = {k: sum(t[k] for t in rounds) / 2 for k in rounds[0]}
        summary.append((name, mean))
    print("layer: cuDNN / each (mean of the two passes)", flush=True)
    for name, mean in summary:
        print(f"{name}: cudnn {mean['cudnn']:.2f} us; " + ", ".join(
            f"{k} {mean['cudnn'] / v:.3f}" for k, v in mean.items() if k != "cudnn"), flush=True)


if __name__ == "__main__":
    main()
