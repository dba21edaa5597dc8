"""Published MI300X L2 hit rates, each as a problem the simulator can replay: the kernel's
address model as the published code reads memory, the shape, the tiles and the order of its
programs (:class:`PublishedCell`), and the table of measured vs predicted figures
(docs/simulator.md, "MI300X: the published record").

Three independent sources, rocprofv3 on an MI300X and rocprof-compute (rocprofv1) on an MI325X,
the same gfx942 chip (rate = TCC_HIT / (TCC_HIT + TCC_MISS)):

* AMD Research's IntelliPerf swizzling loop (the one the SwizzlePerf paper, arXiv 2508.20258,
  describes), committed to ``AMDResearch/intelliperf``
  (``examples/triton/autogen_10/swizzling_logs*/``; the loop prints ``Hit rate increased from
  A% to B%`` with A and B rounded to 0.1 point).  The seeds' figures (``/work/shared/seeds``)
  are two of them.
* ROCm's tritonBLAS counter study of its work-stealing GEMM, committed to ``ROCm/tritonBLAS``
  (``results/counters_8k*/``: medians over the GEMM's dispatches of TCC_HIT_sum and
  TCC_MISS_sum, per dispatch).
* HazyResearch's HipKittens bf16 GEMM (``micro_tk``, 4096^3, 256 x 256 x 64 tiles) on an MI325X,
  profiled by rocprof-compute 3.1 without and with the kernel's swizzle (``pmc_perf.csv`` of each
  workload: TCC_HIT_sum and TCC_MISS_sum of 60 dispatches; :func:`hipkittens_counts`).

Rates in %, sizes in bytes.  ``python -m harness.profilers.sim.published`` prints the table.

Length: one module for the published record: each source's cells, its address model's parameters and the replay that scores them belong together, and a reader checks a figure against its source in one place.
"""
from __future__ import annotations

import csv
import gzip
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from harness.profilers.sim.result import SimResult
from kernels.access import LoadPlan, OperandLoads, step_grid

#: Where the measurements are: repository, and the commit that added each run's logs.
REPO = "https://github.com/AMDResearch/intelliperf"
RUN1 = ("76671a695769f9141d4340f6361aee46c0fe8ab9", "examples/triton/autogen_10/swizzling_logs")
RUN2 = ("5cd989c327368af9289215457e1d70a32944db07", "examples/triton/autogen_10/swizzling_logs_2")
#: The second source: tritonBLAS's two counter collections of one commit (2026-03-25), each
#: summarised per kernel as medians over its dispatches (``counter_summary*.json``).
TRITONBLAS = "https://github.com/ROCm/tritonBLAS"
TB_RUN1 = ("3b84da431371dbda01f6109fdf287085cb3717aa", "results/counters_8k")
TB_RUN2 = ("3b84da431371dbda01f6109fdf287085cb3717aa", "results/counters_8k_v2")
#: The third source: HipKittens' rocprof-compute workloads of its bf16 GEMM on an MI325X, without
#: and with the kernel's swizzle (copies: ``tests/fixtures/mi300x_public/``, README there).
HIPKITTENS = "https://github.com/HazyResearch/HipKittens"
_HK = "kernels/TK/gemm/bf16fp32/mi325x/4096_256_256_64_16/workloads"
HK_NO_SWIZZLE = ("fd5237798fd598bfe5a0aeb50bdcc1331b24a5ee", f"{_HK}/no_swizzle/MI300")
HK_SWIZZLE = ("fd5237798fd598bfe5a0aeb50bdcc1331b24a5ee", f"{_HK}/swizzle/MI300")

FP16 = 2
ALIGN = 1 << 20          # operands start on 1 MiB boundaries in the simulated address space


# --- the orders: launch pid -> the kernel's tile number, as the published formulas compute it ---

def _xcd_chunk(pid: np.ndarray, n: int) -> np.ndarray:
    """Seed formula 1 (``xcd = pid % 8; local = pid // 8; (local + xcd * (n // 8)) % n``)."""
    return (pid // 8 + (pid % 8) * (n // 8)) % n


def _xcd_chunk_inverse(pid: np.ndarray, n: int) -> np.ndarray:
    """``xcd = (pid // (n // 8)) % 8; local = pid % (n // 8); (local * 8 + xcd) % n``."""
    return ((pid % (n // 8)) * 8 + (pid // (n // 8)) % 8) % n


def _identity(pid: np.ndarray, n: int) -> np.ndarray:
    return pid.copy()


def _grouped(pid: np.ndarray, num_pid_m: int, num_pid_n: int, group_m: int) -> tuple[np.ndarray, np.ndarray]:
    """The Triton tutorial's GROUP_SIZE_M order: (pid_m, pid_n) of launch pid ``pid``."""
    in_group = group_m * num_pid_n
    first = (pid // in_group) * group_m
    size = np.minimum(num_pid_m - first, group_m)
    return first + pid % size, (pid % in_group) // size


# --- address models ---------------------------------------------------------------------------

@dataclass(frozen=True)
class Gemm:
    """A Triton GEMM as the published kernels read memory: C = A B, 2-byte elements (fp16 or
    bf16), A (M, K) and B (K, N) row-major, one tile of C per work item, K-steps of ``bk``,
    the grouped order (GROUP_SIZE_M ``group_m``) inside the kernel.  Tile number ``t`` is C's
    tile (t // num_pid_n, t % num_pid_n).  The defaults are IntelliPerf's
    ``autogen_10/gemm.py`` (fp16, 128 x 256 x 64); :data:`TRITONBLAS_WS` is tritonBLAS's."""

    M: int = 8192
    N: int = 8192
    K: int = 8192
    bm: int = 128
    bn: int = 256
    bk: int = 64
    group_m: int = 8
    #: B's layout: ``kn`` (K, N) row-major, or ``nk`` (N, K) row-major (a transposed B: a tile
    #: reads bn rows of bk * 2 bytes per K-step, as HipKittens' GEMM does).
    b_layout: str = "kn"

    def __post_init__(self) -> None:
        if self.b_layout not in ("kn", "nk"):
            raise ValueError(f"gemm: b_layout={self.b_layout!r} is invalid; valid: kn, nk")

    @property
    def grid(self) -> tuple[int, int]:
        return self.M // self.bm, self.N // self.bn

    def plan(self) -> LoadPlan:
        """Step k reads A's rows of the tile, columns k*bk.. (bk*2 B runs) and B's rows
        k*bk.. of the tile's columns (bn*2 B runs; with ``b_layout`` nk the tile's bn rows of
        B, columns k*bk.., bk*2 B runs); the last step also writes C's tile (the store is a
        lookup that allocates, like a read: ``l2_writes: allocate``; each store request one
        with ``l2_store_request_bytes``)."""
        M, N, K, bm, bn, bk = self.M, self.N, self.K, self.bm, self.bn, self.bk
        steps = K // bk
        npm, npn = self.grid
        a0, b0 = 0, _aligned(M * K * FP16)
        c0 = b0 + _aligned(K * N * FP16)
        k = np.arange(steps)

        def a_runs(pid_m):
            rows = pid_m[:, None, None] * bm + np.arange(bm)[None, None, :]
            start = a0 + (rows * K + (k * bk)[None, :, None]) * FP16
            return start, np.full(start.shape, bk * FP16)

        def b_runs(pid_n):
            if self.b_layout == "nk":
                rows = pid_n[:, None, None] * bn + np.arange(bn)[None, None, :]
                start = b0 + (rows * K + (k * bk)[None, :, None]) * FP16
                return start, np.full(start.shape, bk * FP16)
            rows = (k * bk)[None, :, None] + np.arange(bk)[None, None, :]
            start = b0 + (rows * N + pid_n[:, None, None] * bn) * FP16
            return start, np.full(start.shape, bn * FP16)

        def c_runs(tile):
            pid_m, pid_n = tile // npn, tile % npn
            rows = pid_m[:, None] * bm + np.arange(bm)
            start = np.zeros((len(tile), steps, bm), dtype=np.int64)
            length = np.zeros_like(start)
            start[:, -1] = c0 + (rows * N + pid_n[:, None] * bn) * FP16
            length[:, -1] = bn * FP16
            return start, length

        t = np.arange(npm * npn, dtype=np.int64)
        return LoadPlan(steps, FP16, (OperandLoads("x", npm, t // npn, bm, a_runs),
                                      OperandLoads("w", npn, t % npn, bn if self.b_layout == "nk" else bk, b_runs),
                                      OperandLoads("y", npm * npn, t, bm, c_runs, store=True)))

    def table(self, order: str) -> np.ndarray:
        """Launch pid -> tile number under one of the published orders."""
        npm, npn = self.grid
        n = npm * npn
        pid = np.arange(n, dtype=np.int64)
        if order == "grouped-then-xcd-chunk":       # run 2, iteration 0: the formula on the grouped tile's number
            pm, pn = _grouped(pid, npm, npn, self.group_m)
            return _xcd_chunk(pm * npn + pn, n)
        if order == "xcd-chunk-then-grouped":       # run 1: the remap of pid, then the grouped order;
            # also tritonBLAS's per-XCD work stealing: XCD x's programs claim its n // 8
            # tiles x * n // 8, ... in turn from one atomic counter, then the grouped order
            pm, pn = _grouped(_xcd_chunk(pid, n), npm, npn, self.group_m)
            return pm * npn + pn
        if order == "grouped":                      # the published kernel as it is
            pm, pn = _grouped(pid, npm, npn, self.group_m)
            return pm * npn + pn
        if order == "row-major":                    # no swizzle: launch pid p computes C's tile p
            return _identity(pid, n)
        raise ValueError(f"unknown gemm order {order!r}")


@dataclass(frozen=True)
class SeedDirectConv:
    """IntelliPerf's ``autogen_10/conv2d.py`` (the seed 000 kernel) *as published*: NCHW
    fp16, valid padding, stride 1, one program per 16 x 16 x 16 x 16 (n, f, h, w) output
    tile, tiles numbered w fastest, then h, f, n; a step per filter tap (r, s).  It reads only
    input channels 0..15 (its channel offsets never advance) and, of the weights, the 16
    elements w[f0 + i, i, r, s] (filter and channel offsets on one axis); the output tile is
    stored at the end.  Shape N32 C32 32x32 F64 3x3: 2 x 4 x 2 x 2 = 32 programs."""

    N: int = 32
    C: int = 32
    H: int = 32
    W: int = 32
    F: int = 64
    R: int = 3
    S: int = 3
    b: int = 16      # BLOCK_SIZE_N = _F = _H = _W = _C

    @property
    def dims(self) -> tuple[int, int, int, int]:
        P, Q, b = self.H - self.R + 1, self.W - self.S + 1, self.b
        return -(-self.N // b), -(-self.F // b), -(-P // b), -(-Q // b)

    def plan(self) -> LoadPlan:
        N, C, H, W, F, R, S, b = self.N, self.C, self.H, self.W, self.F, self.R, self.S, self.b
        P, Q = H - R + 1, W - S + 1
        nn, nf, nh, nw = self.dims
        x0 = 0
        w0 = _aligned(N * C * H * W * FP16)
        y0 = w0 + _aligned(F * C * R * S * FP16)
        r, s = step_grid(R, S)
        ar = np.arange(b)

        def decode(t):
            return t // (nw * nh * nf), (t // (nw * nh)) % nf, (t // nw) % nh, t % nw   # n, f, h, w

        def x_runs(t):
            pn, _, ph, pw = decode(t)
            n = pn[:, None] * b + ar                                             # (tiles, 16)
            ih = (ph[:, None] * b + ar)[:, None, :] + r[None, :, None]           # (tiles, steps, 16)
            iw0 = pw[:, None] * b + s[None, :]                                   # (tiles, steps)
            c = ar
            start = x0 + (((n[:, None, :, None, None] * C + c[None, None, None, :, None]) * H
                           + ih[:, :, None, None, :]) * W + iw0[:, :, None, None, None]) * FP16
            # a row of 16 columns from iw0, masked at the image's edge (iw < W); rows ih < H
            cols = np.clip(W - iw0, 0, b)[:, :, None, None, None]
            on = (n < N)[:, None, :, None, None] & (ih < H)[:, :, None, None, :] & (c < C)[None, None, None, :, None]
            length = np.where(on, cols * FP16, 0)
            shape = (len(t), R * S, -1)
            return np.where(on, start, 0).reshape(shape), np.broadcast_to(length, start.shape).reshape(shape)

        def w_runs(pf):
            f = pf[:, None] * b + ar                                             # (tiles, 16)
            start = w0 + (((f[:, None, :] * C + ar) * R + r[None, :, None]) * S + s[None, :, None]) * FP16
            on = np.broadcast_to(((f < F) & (ar < C))[:, None, :], start.shape)
            return np.where(on, start, 0), np.where(on, FP16, 0)

        def y_runs(t):
            pn, pf, ph, pw = decode(t)
            n = pn[:, None] * b + ar
            f = pf[:, None] * b + ar
            h = ph[:, None] * b + ar
            start = y0 + (((n[:, :, None, None] * F + f[:, None, :, None]) * P + h[:, None, None, :]) * Q
                          + (pw * b)[:, None, None, None]) * FP16
            cols = np.clip(Q - pw * b, 0, b)[:, None, None, None]
            on = (n < N)[:, :, None, None] & (f < F)[:, None, :, None] & (h < P)[:, None, None, :]
            full = np.zeros((len(t), R * S, b * b * b), dtype=np.int64)
            length = np.zeros_like(full)
            full[:, -1] = np.where(on, start, 0).reshape(len(t), -1)
            length[:, -1] = np.broadcast_to(np.where(on, cols * FP16, 0), on.shape).reshape(len(t), -1)
            return full, length

        t = np.arange(nn * nf * nh * nw, dtype=np.int64)
        _, pf, _, _ = decode(t)
        return LoadPlan(R * S, FP16, (OperandLoads("x", len(t), t, b * b * b, x_runs),
                                      OperandLoads("w", nf, pf, b, w_runs),
                                      OperandLoads("y", len(t), t, b * b * b, y_runs, store=True)))

    def table(self, order: str) -> np.ndarray:
        n = int(np.prod(self.dims))
        return {"identity": _identity, "xcd-chunk": _xcd_chunk,
                "xcd-chunk-inverse": _xcd_chunk_inverse}[order](np.arange(n, dtype=np.int64), n)


def _aligned(nbytes: int) -> int:
    return -(-nbytes // ALIGN) * ALIGN


# --- the cells ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class PublishedCell:
    """One published MI300X L2 hit rate (%) and the problem it measured."""

    name: str
    run: tuple[str, str]      # (commit, folder) of the logs in ``repo``
    log: str                  # file in that folder
    iteration: str            # which record of the log: IntelliPerf's profiling iteration (0: the
                              # baseline), tritonBLAS's scenario key
    problem: str              # a key of :data:`PROBLEMS`
    order: str
    measured: float           # TCC_HIT / (TCC_HIT + TCC_MISS), %: as printed (IntelliPerf, 0.1
                              # point) or from ``counts`` (2 decimals)
    split: str                # "fit" (calibration) or "held-out"
    repo: str = REPO
    counts: tuple[int, int] | None = None   # (TCC_HIT, TCC_MISS) per dispatch where published
                                            # (medians, or HipKittens' means over its dispatches)
    device: str = "MI300X"    # where it was measured (the MI325X: the same gfx942 XCDs, CUs and L2)

    @property
    def url(self) -> str:
        return f"{self.repo}/blob/{self.run[0]}/{self.run[1]}/{self.log}"

    @property
    def source(self) -> str:
        """The repository's name (owner/name)."""
        return self.repo.removeprefix("https://github.com/")


#: tritonBLAS's work-stealing GEMM as its counter study ran it (that repository's ``collect_counters*.py``
#: scripts at :data:`TB_RUN1`'s commit): bf16, M = N = K = 8192, 256 x 256 x 64 tiles, GROUP_SIZE_M 8.
TRITONBLAS_WS = Gemm(bm=256, bn=256, bk=64, group_m=8)

#: HipKittens' ``micro_tk`` (``256_256_64_16.cpp`` at :data:`HK_SWIZZLE`'s commit): bf16,
#: M = N = K = 4096, 256 x 256 x 64 tiles, B passed as an (N, K) row-major matrix (the kernel
#: loads B's rows ``col * 256 ..``, columns ``k * 64 ..``), one workgroup per tile (256, one
#: wave of the 304 CUs).  Its swizzle is seed formula 1 on the workgroup id (``(wgid % 8) *
#: (n / 8) + wgid / 8``), then the grouped order with WGM 4: :meth:`Gemm.table`'s
#: ``xcd-chunk-then-grouped``; without it, workgroup ``w`` computes C's tile ``w`` (row-major).
HIPKITTENS_GEMM = Gemm(M=4096, N=4096, K=4096, bm=256, bn=256, bk=64, group_m=4, b_layout="nk")

PROBLEMS: dict[str, Callable[[], Gemm | SeedDirectConv]] = {
    "gemm": Gemm, "direct-seed": SeedDirectConv, "gemm-tritonblas-ws": lambda: TRITONBLAS_WS,
    "gemm-hipkittens": lambda: HIPKITTENS_GEMM}

#: IntelliPerf: run 1 is the calibration half, run 2 (another day, the same kernels and shapes) the
#: held-out half.  tritonBLAS: both collections held out (decided before either was replayed),
#: so the geometry chosen on IntelliPerf's run 1 meets a source it never saw.
CELLS: tuple[PublishedCell, ...] = (
    PublishedCell("gemm identity (grouped)", RUN1, "gemm_log.txt", "0", "gemm", "grouped", 44.2, "fit"),
    PublishedCell("gemm xcd chunk, then grouped", RUN1, "gemm_log.txt", "1", "gemm", "xcd-chunk-then-grouped", 77.4, "fit"),
    PublishedCell("conv identity", RUN1, "conv2d_log.txt", "0", "direct-seed", "identity", 88.9, "fit"),
    PublishedCell("gemm identity (grouped)", RUN2, "gemm_log.txt", "0", "gemm", "grouped", 37.9, "held-out"),
    PublishedCell("gemm grouped, then xcd chunk", RUN2, "gemm_log.txt", "1", "gemm", "grouped-then-xcd-chunk", 75.3, "held-out"),
    PublishedCell("gemm identity rewritten", RUN2, "gemm_log.txt", "2", "gemm", "grouped", 37.5, "held-out"),
    PublishedCell("conv identity", RUN2, "conv2d_log.txt", "0", "direct-seed", "identity", 91.8, "held-out"),
    PublishedCell("conv xcd chunk (seed formula 1)", RUN2, "conv2d_log.txt", "8", "direct-seed", "xcd-chunk", 96.3, "held-out"),
    *(PublishedCell("conv xcd chunk inverse", RUN2, "conv2d_log.txt", it, "direct-seed", "xcd-chunk-inverse", m, "held-out")
      for it, m in (("2", 95.8), ("6", 95.9), ("7", 95.8), ("10", 95.8))),
    *(PublishedCell("conv identity rewritten", RUN2, "conv2d_log.txt", it, "direct-seed", "identity", m, "held-out")
      for it, m in (("3", 91.7), ("4", 91.6), ("5", 91.9), ("9", 91.9))),
    PublishedCell("gemm 256x256 work stealing per XCD, grouped", TB_RUN1, "counter_summary.json", "ws_alone",
                  "gemm-tritonblas-ws", "xcd-chunk-then-grouped", 79.55, "held-out", TRITONBLAS, (56746271, 14591825)),
    PublishedCell("gemm 256x256 work stealing per XCD, grouped", TB_RUN2, "counter_summary_v2.json", "ws_alone",
                  "gemm-tritonblas-ws", "xcd-chunk-then-grouped", 79.48, "held-out", TRITONBLAS, (56697667, 14640413)),
    PublishedCell("gemm 256x256 xcd chunk, then grouped (WGM 4)", HK_SWIZZLE, "pmc_perf.csv", "micro_tk, 60 dispatches",
                  "gemm-hipkittens", "xcd-chunk-then-grouped", 80.59, "held-out", HIPKITTENS, (7622045, 1835636), "MI325X"),
)

#: The sources :data:`CELLS` come from.
SOURCES: tuple[str, ...] = tuple(dict.fromkeys(c.source for c in CELLS))

#: Published cells the simulator cannot replay, and why (docs/simulator.md lists them too).
NOT_REPRODUCIBLE: tuple[tuple[str, str], ...] = (
    ("run 1 conv2d iterations 1-6 (91.6, 88.9, 88.7, 88.9, 88.8, 89.0); run 2 conv2d iteration 1 (93.8)",
     "the formulas are not permutations of the 32 programs (tiles computed twice, others never): "
     "the simulator replays permutations only"),
    ("swizzling_aware / swizzling_unaware conv2d (91.5 -> 64.8 .. 90.5; 91.2 -> 99.4)",
     "a 3-D-grid patch conv whose rewrites decode a 1-D pid from a 3-D launch (seeds/README.md, formula 4): "
     "its programs compute the same tiles, not a reordering"),
    ("swizzling_aware gemm (49.4 -> 63.5, 48.7, 42.1, 48.8)",
     "a persistent Stream-K GEMM (NUM_SMS programs, tiles then split K iterations with atomics): "
     "no address model for its Stream-K phase"),
    ("tritonBLAS's first work-stealing kernel (commits 70f7484..7615e1e: 8192^3 77.8, 78.1, 78.2, rotating 76.8; "
     "1024-16384: 79.3, 63.1, 80.2, 78.1, 78.8)",
     "tiles and GROUP_SIZE_M chosen by Origami at run time and not recorded (at 8192 the lookup count, "
     "71.34 M a dispatch, pins 256 x 256 x 64 tiles; the group is unknown, and it changes the order)"),
    ("tritonBLAS with 272 of 304 CUs masked (42.3); every GEMM measured beside RCCL all_reduce or a 256 MB stream",
     "which CUs were masked, and what the concurrent kernels held, is not recorded: not a launch order"),
    ("HipKittens' micro_tk GEMM without its swizzle (MI325X, 78.26 over 60 dispatches)",
     "the no_swizzle kernel's source is not in the repository, and no order it could have read from the committed "
     "source fits: its misses (1.90-2.19 M a dispatch, varying by launch) lie below the compulsory misses of the "
     "row-major, column-major or chiplet-only orders (2.62 M) and above those of the grouped order alone (1.84 M)"),
    ("tritonBLAS's torch.matmul (hipBLASLt) cells (79.9, 79.5)",
     "the Tensile kernel's name (macro tile, WGM, WGMXCC) is recorded only in the run's rocpd databases, "
     "which were not readable here (blobs over 4 MiB, absent from the stored copy)"),
)


def hipkittens_counts(path: Path, kernel: str = "micro_tk") -> tuple[float, float, int]:
    """TCC_HIT_sum and TCC_MISS_sum summed over the dispatches of ``kernel`` in a rocprof-compute
    workload's wide ``pmc_perf.csv`` (one row per dispatch; gzip-compressed when the name ends
    in ``.gz``), and how many dispatches there were."""
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt", newline="") as f:
        rows = [r for r in csv.DictReader(f) if r["Kernel_Name"].split("(")[0] == kernel]
    if not rows:
        raise ValueError(f"{path}: no {kernel} dispatch (Kernel_Name); the file's kernels are its other rows")
    return (sum(float(r["TCC_HIT_sum"]) for r in rows), sum(float(r["TCC_MISS_sum"]) for r in rows), len(rows))


def replay(cell: PublishedCell, target: dict, occupancy: int) -> SimResult:
    """The simulated launch of ``cell``'s problem in its order on ``target``."""
    from harness.profilers.sim.replay import simulate_l2
    from harness.profilers.sim.target import SimTarget

    problem = PROBLEMS[cell.problem]()
    sim = SimTarget.from_target(target, occupancy)
    model = problem.plan().access_model(sim.line_bytes, store_request_bytes=sim.store_request_bytes)
    return simulate_l2(model, problem.table(cell.order), sim)


def predict(cell: PublishedCell, target: dict, occupancy: int) -> float:
    """The simulated all-lookup L2 hit rate (%) of ``cell`` on ``target``."""
    return replay(cell, target, occupancy).hit_rate


#: The geometry the calibration chose between, on the fit half only: programs per CU (the
#: GEMM's 48 KB of LDS per stage leaves room for one; the seed conv's 32 programs all fit
#: either way) and the L2's set index (modulo, or a hash of the 128 B block: the MI300X's L2
#: hashes addresses over its 16 channels, rocprof-compute's L2 page).
CANDIDATES = tuple({"occupancy": occ, "l2_set_hash": h} for occ in (1, 2) for h in (False, True))


def table_rows(target: dict, fit_only: bool = False) -> tuple[dict, list[tuple[PublishedCell, SimResult]]]:
    """The geometry of :data:`CANDIDATES` with the least fit-half MAE, and every cell's
    replay with it (``fit_only``: only the fit half's)."""
    def run(geometry: dict, cells) -> list[SimResult]:
        t = {**target, "l2_set_hash": geometry["l2_set_hash"]}
        return [replay(c, t, geometry["occupancy"]) for c in cells]

    fit = [c for c in CELLS if c.split == "fit"]
    scores = [(sum(abs(r.hit_rate - c.measured) for r, c in zip(run(g, fit), fit)) / len(fit), i)
              for i, g in enumerate(CANDIDATES)]
    for mae, i in scores:
        print(f"fit-half MAE {mae:.2f} with {CANDIDATES[i]}")
    best = CANDIDATES[min(scores)[1]]
    cells = fit if fit_only else list(CELLS)
    return best, list(zip(cells, run(best, cells)))


def main() -> None:
    """Fit the geometry on the fit half, then print the table (markdown), the MAEs (by half,
    and of the held-out half by source) and, where a source published TCC_HIT and TCC_MISS,
    its lookups beside the replay's."""
    from omegaconf import OmegaConf

    target = OmegaConf.to_container(OmegaConf.load(Path(__file__).parents[3] / "conf" / "target" / "mi300x.yaml"))
    best, rows = table_rows(target)
    print(f"chosen: {best}")
    print("| cell | source | measured | predicted | error | half |")
    print("| --- | --- | ---: | ---: | ---: | --- |")
    for cell, r in rows:
        kind = "iteration" if cell.repo == REPO else "scenario"
        name = cell.name if cell.device == "MI300X" else f"{cell.name}, {cell.device}"
        print(f"| {name} | [{cell.source} {cell.run[1].rsplit('/', 1)[-1]}/{cell.log}, {kind} {cell.iteration}]({cell.url}) "
              f"| {cell.measured:g} | {r.hit_rate:.2f} | {r.hit_rate - cell.measured:+.2f} | {cell.split} |")
    for split in ("fit", "held-out"):
        errs = [abs(r.hit_rate - c.measured) for c, r in rows if c.split == split]
        print(f"MAE {split}: {sum(errs) / len(errs):.2f} over {len(errs)} cells")
    for source in SOURCES:
        errs = [abs(r.hit_rate - c.measured) for c, r in rows if c.split == "held-out" and c.source == source]
        print(f"MAE held-out, {source}: {sum(errs) / len(errs):.2f} over {len(errs)} cells")
    for cell, r in rows:
        if cell.counts:
            print(f"lookups a dispatch, {cell.source} {cell.run[1]}: measured {sum(cell.counts)}, "
                  f"replayed {r.hits + r.misses} ({100 * (r.hits + r.misses) / sum(cell.counts) - 100:+.2f} %)")


if __name__ == "__main__":
    main()
