"""Probe: can a stride-1 3x3 conv take its input tile through TMA without an im2col mode?

A tile of output rows that is a TH x TW *rectangle* of pixels of one image reads, at tap
(r, s), the input rectangle shifted by (r - padding, s - padding): one 4-D box
``[1, TH, TW, BLOCK_K]`` of the NHWC input, which a tensor descriptor loads in one bulk copy
(coordinates may be negative or run past the image: the hardware fills zeros, which is the
conv's zero padding).  The box is reshaped to the ``[TH*TW, BLOCK_K]`` A tile.  The price:
where TW does not divide Q (or TH P), the rectangle's rows past the image are computed and
dropped.

    python benchmarks/probes/box_igemm.py compile            # sm_90 build on a CPU machine
    python benchmarks/probes/box_igemm.py time --shapes l17,big --presets resnet,calibrate   # GPU
"""
from __future__ import annotations

import argparse
import itertools
import json
import sys
from pathlib import Path

import torch
import torch.nn.functional as F
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


@triton.jit
def box_conv_kernel(x_desc, w_desc, y_ptr, C, F, P, Q, padding,
                    R: tl.constexpr, S: tl.constexpr, TH: tl.constexpr, TW: tl.constexpr,
                    BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, HALVES: tl.constexpr):
    """HALVES: the rectangle as two boxes of TH/2 rows, each its own dot and accumulator."""
    HM: tl.constexpr = TH * TW // HALVES
    HH: tl.constexpr = TH // HALVES
    tiles_h = tl.cdiv(P, TH)
    tiles_w = tl.cdiv(Q, TW)
    num_pid_n = tl.cdiv(F, BLOCK_N)
    pid = tl.program_id(0)
    pid_m = pid // num_pid_n
    pid_n = pid - pid_m * num_pid_n
    n = pid_m // (tiles_h * tiles_w)
    rect = pid_m - n * (tiles_h * tiles_w)
    p0 = (rect // tiles_w) * TH
    q0 = (rect - (rect // tiles_w) * tiles_w) * TW
    num_cb = tl.cdiv(C, BLOCK_K)
    acc0 = tl.zeros((HM, BLOCK_N), dtype=tl.float32)
    acc1 = tl.zeros((HM, BLOCK_N), dtype=tl.float32)
    for step in range(R * S * num_cb):
        tap = step // num_cb
        c0 = (step - tap * num_cb) * BLOCK_K
        r = tap // S
        s = tap - r * S
        b = w_desc.load([pid_n * BLOCK_N, step * BLOCK_K])
        a0 = x_desc.load([n, p0 + r - padding, q0 + s - padding, c0]).reshape(HM, BLOCK_K)
        acc0 = tl.dot(a0, b.T, acc0)
        if HALVES == 2:
            a1 = x_desc.load([n, p0 + HH + r - padding, q0 + s - padding, c0]).reshape(HM, BLOCK_K)
            acc1 = tl.dot(a1, b.T, acc1)
    i = tl.arange(0, HM)
    offs_f = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    p = p0 + i // TW
    q = q0 + i % TW
    mask = ((p < P) & (q < Q))[:, None] & (offs_f < F)[None, :]
    tl.store(y_ptr + ((n * P + p) * Q + q)[:, None] * F + offs_f[None, :], acc0.to(y_ptr.dtype.element_ty), mask=mask)
    if HALVES == 2:
        p = p + HH
        mask = ((p < P) & (q < Q))[:, None] & (offs_f < F)[None, :]
        tl.store(y_ptr + ((n * P + p) * Q + q)[:, None] * F + offs_f[None, :], acc1.to(y_ptr.dtype.element_ty),
                 mask=mask)


def bind(x: torch.Tensor, w: torch.Tensor, padding: int, th: int, tw: int, bn: int, bk: int, warps: int, stages: int,
         halves: int = 1):
    """The launch closure for NCHW-shaped channels_last ``x`` (N, C, H, W) and weights (F, C, R, S);
    C must be a multiple of BLOCK_K.  Returns (run, out) with ``out`` NHWC."""
    N, C, H, W = x.shape
    Fo, _, R, S = w.shape
    P, Q = H + 2 * padding - R + 1, W + 2 * padding - S + 1
    assert C % bk == 0
    x_nhwc = x.permute(0, 2, 3, 1)                     # a view: channels_last memory is NHWC
    w_packed = w.permute(0, 2, 3, 1).reshape(Fo, R * S * C).contiguous()
    if Fo % bn:
        w_packed = torch.cat([w_packed, w_packed.new_zeros(bn - Fo % bn, R * S * C)])
    out = torch.empty((N, P, Q, Fo), dtype=x.dtype, device=x.device)
    x_desc = TensorDescriptor(x_nhwc, list(x_nhwc.shape), list(x_nhwc.stride()), [1, th // halves, tw, bk])
    w_desc = TensorDescriptor.from_tensor(w_packed, [bn, bk])
    grid = (N * triton.cdiv(P, th) * triton.cdiv(Q, tw) * triton.cdiv(Fo, bn),)

    def run():
        box_conv_kernel[grid](x_desc, w_desc, out, C, Fo, P, Q, padding, R=R, S=S, TH=th, TW=tw,
                              BLOCK_N=bn, BLOCK_K=bk, HALVES=halves, num_warps=warps, num_stages=stages)
    return run, out


def compile_check() -> None:
    """Build one config for sm_90 without a GPU and print what the compiler made (TMA loads,
    wgmma, shared-memory round trips of A)."""
    from harness.compile.build import compile_launch, recording_launches
    from harness.compile.build import arch_limits

    x = torch.empty((32, 256, 14, 14), dtype=torch.float16, device="meta").contiguous(memory_format=torch.channels_last)
    w = torch.empty((256, 256, 3, 3), dtype=torch.float16, device="meta")
    for th, tw, bn, warps, halves in ((8, 16, 128, 8, 1), (8, 8, 256, 4, 1), (8, 16, 256, 8, 2)):
        with recording_launches() as launches:
            run, _ = bind(x, w, 1, th, tw, bn, 64, warps, 4, halves)
            run()
        build = compile_launch(launches[0], arch_limits("sm_90"))
        print(th, tw, bn, warps, halves, json.dumps(build.to_dict() if hasattr(build, "to_dict") else build.__dict__)[:1500])


def time_layers(args) -> None:
    from conv_speed import CuptiRounds, preset_shapes

    torch.backends.cudnn.benchmark = True
    torch.backends.cudnn.allow_tf32 = False
    keep = args.shapes.split(",")
    shapes = [s for s in preset_shapes(args.presets.split(",")) if s.name.split("/")[1] in keep]
    timer = CuptiRounds()
    for shape in shapes:
        assert shape.stride == 1
        x = torch.randn(shape.N, shape.C, shape.H, shape.W, device="cuda", dtype=torch.float16).contiguous(
            memory_format=torch.channels_last)
        w = (torch.randn(shape.F, shape.C, shape.R, shape.S, device="cuda", dtype=torch.float16) / (shape.C * 9) ** 0.5)
        wc = w.contiguous(memory_format=torch.channels_last)
        ref = F.conv2d(x.float(), w.float(), None, padding=shape.padding)
        fns = {"cudnn": lambda: F.conv2d(x, wc, None, padding=shape.padding)}
        configs = [((th, tw), bn, warps, stages, 1) for (th, tw), bn, warps, stages in itertools.product(
            ((4, 32), (8, 16), (8, 8)), (128, 256), (4,), (3, 4)) if th * tw * bn <= 128 * 256]
        configs += [((th, tw), bn, 8, stages, 2) for (th, tw), bn, stages in itertools.product(
            ((4, 32), (8, 16), (16, 8), (8, 8)), (128, 256), (3, 4)) if th * tw * bn <= 128 * 256]
        for (th, tw), bn, warps, stages, halves in configs:
            name = f"{th}x{tw} N{bn} w{warps} s{stages} h{halves}"
            try:
                run, out = bind(x, w, shape.padding, th, tw, bn, 64, warps, stages, halves)
                run()
                torch.cuda.synchronize()
                err = (out.permute(0, 3, 1, 2).float() - ref).abs().max().item()
                if err > 0.05 * ref.abs().max().item():
                    print(f"{shape.name} {name}: WRONG (max err {err:.3g})", flush=True)
                    continue
                fns[name] = run
            except Exception as exc:  # noqa: BLE001 (a probe: report and go on)
                print(f"{shape.name} {name}: {type(exc).__name__} {str(exc)[:150]}", flush=True)
        first = timer.medians(fns, rounds=1, launches=3)
        top = ["cudnn"] + [k for k in sorted(first, key=first.get) if k != "cudnn"][:5]
        final = timer.medians({k: fns[k] for k in top}, rounds=4, launches=10)
        for k in top:
            print(f"{shape.name:18s} {k:24s} {final[k] * 1e3:8.1f} us  cudnn/this {final['cudnn'] / final[k]:.3f}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("mode", choices=("compile", "time"))
    ap.add_argument("--presets", default="resnet")
    ap.add_argument("--shapes", default="l17")
    args = ap.parse_args()
    compile_check() if args.mode == "compile" else time_layers(args)


if __name__ == "__main__":
    main()
