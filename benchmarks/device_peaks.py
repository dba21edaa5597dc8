"""The device's measured dense fp16 peak (TFLOP/s) and DRAM bandwidth (bytes/s): the roofline
a cell's achieved throughput is read against (``peak_tflops``, ``dram_bytes_per_s`` in
``conf/target/<gpu>.yaml``).

* peak: ``torch.matmul`` of two 8192 x 8192 fp16 matrices (cuBLAS, tensor cores), the best of
  20 timed launches (CUDA events) after warm-up: 2 * 8192^3 flop / time;
* bandwidth: a device-to-device copy of 4 GiB (read + write = 8 GiB of DRAM traffic per copy),
  the best of 20.

    python benchmarks/device_peaks.py
"""
from __future__ import annotations

import torch


def best_ms(fn, launches: int = 20) -> float:
    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(launches):
        begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        begin.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        times.append(begin.elapsed_time(end))
    return min(times)


def main() -> None:
    n = 8192
    a = torch.randn(n, n, device="cuda", dtype=torch.float16)
    b = torch.randn(n, n, device="cuda", dtype=torch.float16)
    ms = best_ms(lambda: torch.matmul(a, b))
    tflops = 2 * n**3 / (ms * 1e-3) / 1e12
    src = torch.empty(4 * 1024**3, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    ms_copy = best_ms(lambda: dst.copy_(src))
    bw = 2 * src.numel() / (ms_copy * 1e-3)
    print(f"device: {torch.cuda.get_device_name()}; torch {torch.__version__}")
    print(f"peak_tflops: {tflops:.1f}    # fp16 dense, torch.matmul {n}^3, best of 20: {ms:.3f} ms")
    print(f"dram_bytes_per_s: {bw:.4g}    # 4 GiB copy (read + write), best of 20: {ms_copy:.3f} ms")


if __name__ == "__main__":
    main()
