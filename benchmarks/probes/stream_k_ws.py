"""Probe: igemm_ws with ``STREAM_K=1`` against the table's config and cuDNN, layer by layer (GPU).

For each layer: the ``igemm_best`` table's config (what the main command launches), cuDNN
(benchmark mode, channels_last) and every config of :data:`CANDIDATES` with ``STREAM_K=1``
(a persistent grid whose programs split the layer's tiles x K steps evenly; partial tiles
summed by the last program to arrive).  Each candidate is first checked against conv2d on
three launches in a row under the identity and grouped orders (the arrival counts must be
left at zero for the next launch); then CUPTI kernel time after an L2 clear, median of
``--rounds``, printed in microseconds with cuDNN / ours:

    . benchmarks/gpu_setup.sh && python benchmarks/probes/stream_k_ws.py --shapes l22,l16,aspp
"""
from __future__ import annotations

import argparse
import itertools
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

#: (BLOCK_M, BLOCK_N, num_stages, num_warps, MAXNREG) of the stream-K candidates (BLOCK_K 64).
CANDIDATES = ((128, 128, 4, 8, 0), (128, 128, 5, 8, 0), (128, 256, 3, 8, 0), (128, 64, 6, 8, 0),
              (128, 64, 4, 8, 80), (64, 128, 8, 4, 0))
PRESETS = "resnet,unseen,unseen2,unseen3,unseen4,unseen5,unseen6,unseen7,unseen8,unseen9,unseen10"


def main() -> None:
    import torch
    import torch.nn.functional as F

    from conv_speed import preset_shapes
    from harness.measure.correctness import compare, make_operands, reference
    from harness.measure.timing import FLUSH_BYTES
    from kernels import KERNELS
    from kernels.base import LaunchConfig, SwizzleBinding
    from kernels.tuned import TunedTable
    from kernels.tuning import Config
    from split_k_cost import kernel_us
    from swizzles import SWIZZLES

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", required=True, help="comma-separated layer names of the presets")
    ap.add_argument("--table", default="kernels/tuned/igemm_best_h200.json")
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--both", action="store_true", help="each candidate also with STREAM_K=0 (same tiles, persistent)")
    args = ap.parse_args()
    torch.backends.cudnn.benchmark = True
    flush = torch.empty(FLUSH_BYTES // 4, dtype=torch.int32, device="cuda")
    table, best, ws = TunedTable.load(Path(args.table)), KERNELS["igemm_best"], KERNELS["igemm_ws"]
    keep = args.shapes.split(",")
    summary = []
    for shape in [s for s in preset_shapes(PRESETS.split(",")) if s.name.split("/")[1] in keep]:
        ops = make_operands(shape, False, 0, "cuda", "channels_last")
        ref = reference(ops, shape)
        fns = {"cudnn": lambda x=ops.x, w=ops.w, s=shape: F.conv2d(x, w, None, stride=s.stride, padding=s.padding)}
        choice = table.lookup(shape)
        run, _ = best.bind(ops, shape, choice.config.tiles_dict, SwizzleBinding(SWIZZLES["identity"], 1, 8),
                           LaunchConfig(choice.config.num_warps, choice.config.num_stages))
        fns["table"] = run
        for (bm, bn, stages, warps, maxnreg), sk in itertools.product(CANDIDATES, (1, 0) if args.both else (1,)):
            cfg = Config.make({"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": 64, "SPLIT_K": 1, "PERSISTENT": 1,
                               "TMA_STORE": 1, "MAXNREG": maxnreg, "SPLIT_ADD": 0, "STREAM_K": sk}, warps, stages)
            name = f"{'sk' if sk else 'persistent'} {cfg.label}"
            try:
                oks = []
                for order in ("identity", "grouped"):
                    fn, out = ws.bind(ops, shape, cfg.tiles_dict, SwizzleBinding(SWIZZLES[order], 1, 8),
                                      LaunchConfig(warps, stages))
                    for _ in range(3):
                        out.zero_()
                        fn()
                        torch.cuda.synchronize()
                        oks.append(compare(ws.output_as_nchw(out), ref, shape.dtype).ok)
            except Exception as exc:  # noqa: BLE001 - a candidate that fails is reported, not fatal
                print(f"{shape.name} {name}: failed: {type(exc).__name__}: {str(exc).splitlines()[0][:200]}",
                      flush=True)
                continue
            if not all(oks):
                print(f"{shape.name} {name}: WRONG on {oks.count(False)} of {len(oks)} launches", flush=True)
                continue
            fns[name] = fn        # the grouped order's binding, as the main command's xcd/grouped jobs
        times = {k: sum(v.values()) for k, v in kernel_us(fns, args.rounds, flush).items()}
        sk = {k: v for k, v in times.items() if k.startswith("sk")}
        top = min(sk, key=sk.get) if sk else None
        print(f"{shape.name}: " + ", ".join(f"{k} {v:.2f}" for k, v in times.items()) + " us", flush=True)
        for k, v in kernel_us({n: fns[n] for n in list(fns)[:4]}, 3, flush).items():
            print(f"{shape.name} {k} kernels: {v}", flush=True)
        summary.append((shape.name, times["cudnn"], times["table"], top, sk.get(top, float("nan"))))
    print("layer: cudnn us, table us (cudnn/table), best stream-K us (cudnn/it) config", flush=True)
    for name, cudnn, tab, top, t in summary:
        print(f"{name}: {cudnn:.2f}, {tab:.2f} ({cudnn / tab:.3f}), {t:.2f} ({cudnn / t:.3f}) {top}", flush=True)


if __name__ == "__main__":
    main()
