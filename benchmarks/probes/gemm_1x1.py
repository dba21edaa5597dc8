"""Probe: the pointwise layers as plain GEMMs: cuDNN, cuBLAS, ours, and a persistent TMA GEMM (GPU).

A stride-1, unpadded 1x1 conv on a channels_last input *is* a GEMM: the input is an
``[M = N*H*W, K = C]`` row-major matrix, the weight ``[F, C]``, the output ``[M, F]`` (the
channels_last output).  For each such layer of the presets this prints, CUPTI kernel time
after an L2 clear (median of ``--rounds``):

- ``cudnn``: ``F.conv2d`` with ``cudnn.benchmark`` on (the vendor the harness compares with);
- ``cublas``: ``torch.mm`` on the same memory (which library kernel a GEMM gets);
- ``table``: the ``igemm_best`` table's config for the layer (what the main command runs);
- ``tma k``: :func:`gemm_kernel`, a persistent grid of TMA loads and a TMA-store epilogue, one
  line per config in :data:`CONFIGS` that compiles (``warp_specialize`` on or off).

Every contender's output is checked against ``torch.mm`` first.  Why: ResNet-50's pointwise
layers sit at 0.91-0.97 of cuDNN on the H200 (``docs/kernel_speed.md``), and cuDNN runs them as
nvJet GEMMs; this tells whether a plain Triton GEMM closes that gap before any kernel work.

    . benchmarks/gpu_setup.sh && python benchmarks/probes/gemm_1x1.py --presets resnet,unseen7,unseen8
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

#: (BLOCK_M, BLOCK_N, BLOCK_K, num_stages, num_warps, warp_specialize, epilogue subtile)
CONFIGS = (
    (128, 128, 64, 4, 4, False, False),
    (128, 128, 64, 4, 8, False, True),
    (128, 256, 64, 3, 8, False, True),
    (128, 64, 64, 5, 4, False, False),
    (64, 128, 64, 5, 4, False, False),
    (64, 64, 64, 6, 4, False, False),
    (128, 128, 64, 4, 4, True, False),
    (128, 256, 64, 3, 8, True, True),
    (128, 64, 64, 5, 4, True, False),
)


@triton.jit
def _tile_of(tile, tiles_n, GROUP_M: tl.constexpr, tiles_m):
    """Grouped order: GROUP_M row blocks sweep the column blocks together (shared B tiles)."""
    per_group = GROUP_M * tiles_n
    first_m = (tile // per_group) * GROUP_M
    rows = tl.minimum(tiles_m - first_m, GROUP_M)
    return first_m + (tile % per_group) % rows, (tile % per_group) // rows


@triton.jit
def gemm_kernel(a_ptr, b_ptr, c_ptr, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                BLOCK_K: tl.constexpr, NUM_SMS: tl.constexpr, WS: tl.constexpr, SUBTILE: tl.constexpr):
    """C[M, N] = A[M, K] @ B[N, K]^T, a persistent program per SM walking tiles in grouped order."""
    a_desc = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[K, 1], block_shape=[BLOCK_M, BLOCK_K])
    b_desc = tl.make_tensor_descriptor(b_ptr, shape=[N, K], strides=[K, 1], block_shape=[BLOCK_N, BLOCK_K])
    STORE_N: tl.constexpr = BLOCK_N // 2 if SUBTILE else BLOCK_N
    c_desc = tl.make_tensor_descriptor(c_ptr, shape=[M, N], strides=[N, 1], block_shape=[BLOCK_M, STORE_N])
    tiles_m, tiles_n = tl.cdiv(M, BLOCK_M), tl.cdiv(N, BLOCK_N)
    k_steps = tl.cdiv(K, BLOCK_K)
    for tile in tl.range(tl.program_id(0), tiles_m * tiles_n, NUM_SMS, flatten=True, warp_specialize=WS):
        pm, pn = _tile_of(tile, tiles_n, 8, tiles_m)
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for k in range(k_steps):
            a = a_desc.load([pm * BLOCK_M, k * BLOCK_K])
            b = b_desc.load([pn * BLOCK_N, k * BLOCK_K])
            acc = tl.dot(a, b.T, acc)
        if SUBTILE:
            halves = tl.permute(tl.reshape(acc, (BLOCK_M, 2, BLOCK_N // 2)), (0, 2, 1))
            c0, c1 = tl.split(halves)
            c_desc.store([pm * BLOCK_M, pn * BLOCK_N], c0.to(c_ptr.dtype.element_ty))
            c_desc.store([pm * BLOCK_M, pn * BLOCK_N + STORE_N], c1.to(c_ptr.dtype.element_ty))
        else:
            c_desc.store([pm * BLOCK_M, pn * BLOCK_N], acc.to(c_ptr.dtype.element_ty))


def main() -> None:
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
    ap.add_argument("--presets", default="resnet,unseen,unseen2,unseen3,unseen4,unseen5,unseen6,unseen7,"
                                         "unseen8,unseen9,unseen10")
    ap.add_argument("--table", default="kernels/tuned/igemm_best_h200.json")
    ap.add_argument("--rounds", type=int, default=20)
    args = ap.parse_args()
    torch.backends.cudnn.benchmark = True
    triton.set_allocator(lambda size, align, stream: torch.empty(size, dtype=torch.int8, device="cuda"))
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    flush = torch.empty(FLUSH_BYTES // 4, dtype=torch.int32, device="cuda")
    table, best = TunedTable.load(Path(args.table)), KERNELS["igemm_best"]
    pointwise = [s for s in preset_shapes(args.presets.split(","))
                 if (s.R, s.S, s.stride, s.padding) == (1, 1, 1, 0)]
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, cuDNN {torch.backends.cudnn.version()}, "
          f"Triton {triton.__version__}, {sms} SMs; {len(pointwise)} layers", flush=True)
    summary = []
    for shape in pointwise:
        ops = make_operands(shape, False, 0, "cuda", "channels_last")
        M, K, N = shape.N * shape.H * shape.W, shape.C, shape.F
        a = ops.x.permute(0, 2, 3, 1).reshape(M, K)       # a view: channels_last is NHWC in memory
        b = ops.w.reshape(N, K)
        want = torch.mm(a, b.T)
        fns = {"cudnn": lambda x=ops.x, w=ops.w: F.conv2d(x, w), "cublas": lambda a=a, b=b: torch.mm(a, b.T)}
        choice = table.lookup(shape)
        run, out = best.bind(ops, shape, choice.config.tiles_dict, SwizzleBinding(SWIZZLES["identity"], 1, 8),
                             LaunchConfig(choice.config.num_warps, choice.config.num_stages))
        fns["table"] = run
        for i, (bm, bn, bk, stages, warps, ws, sub) in enumerate(CONFIGS):
            c = torch.empty((M, N), dtype=a.dtype, device="cuda")
            grid = (min(sms, triton.cdiv(M, bm) * triton.cdiv(N, bn)),)

            def fn(c=c, bm=bm, bn=bn, bk=bk, stages=stages, warps=warps, ws=ws, sub=sub, grid=grid):
                gemm_kernel[grid](a, b, c, M, N, K, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, NUM_SMS=sms, WS=ws,
                                  SUBTILE=sub, num_stages=stages, num_warps=warps)
            try:
                fn()
                torch.cuda.synchronize()
            except Exception as exc:  # noqa: BLE001 - a config that does not compile is reported, not fatal
                print(f"{shape.name} tma {i}: failed: {type(exc).__name__}: {str(exc).splitlines()[0][:160]}",
                      flush=True)
                continue
            err = float((c.float() - want.float()).abs().max() / want.float().abs().max())
            if err > 1e-2:
                print(f"{shape.name} tma {i}: WRONG (max rel err {err:.1e})", flush=True)
                continue
            fns[f"tma {i}"] = fn
        times = {name: sum(per.values()) for name, per in kernel_us(fns, args.rounds, flush).items()}
        tma = {k: v for k, v in times.items() if k.startswith("tma")}
        top = min(tma, key=tma.get) if tma else None
        vendor = min(times["cudnn"], times["cublas"])
        print(f"{shape.name} M{M} K{K} N{N}: " + ", ".join(f"{k} {v:.2f}" for k, v in times.items())
              + f" us; best tma {top}", flush=True)
        summary.append((shape.name, times["cudnn"], times["table"], tma.get(top, float("nan")), vendor))
    print("layer, cudnn us, table us, best tma us; cudnn/table, cudnn/best-tma", flush=True)
    for name, cudnn, tab, tma_us, _ in summary:
        print(f"{name}: {cudnn:.2f} {tab:.2f} {tma_us:.2f}; {cudnn / tab:.3f} {cudnn / tma_us:.3f}", flush=True)


if __name__ == "__main__":
    main()
