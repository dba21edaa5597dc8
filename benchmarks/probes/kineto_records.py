"""Probe: the raw torch.profiler (kineto) records of a Triton launch and a cuDNN conv, each inside
a record_function range, as harness/measure/cupti.py reads them (GPU only)."""
import torch
import triton
import triton.language as tl
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile, record_function


@triton.jit
def _add_one(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) + 1, mask=offs < n)


x = torch.zeros(4096, device="cuda")
img = torch.randn(8, 64, 28, 28, device="cuda", dtype=torch.half)
w = torch.randn(64, 64, 3, 3, device="cuda", dtype=torch.half)
_add_one[(4,)](x, 4096, BLOCK=1024)
torch.nn.functional.conv2d(img, w, padding=1)
torch.cuda.synchronize()
with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
    for i in range(2):
        with record_function(f"swizzlebench.launch.{2 * i}"):
            _add_one[(4,)](x, 4096, BLOCK=1024)
        with record_function(f"swizzlebench.launch.{2 * i + 1}"):
            torch.nn.functional.conv2d(img, w, padding=1)
    torch.cuda.synchronize()
for r in prof.profiler.kineto_results.events():
    print(f"{str(r.device_type()):22s} corr={r.correlation_id():6d} linked={r.linked_correlation_id():6d} "
          f"thr={r.start_thread_id()}/{r.end_thread_id()} async={r.is_async()} "
          f"t={r.start_ns() % 10**9:>10d}+{r.end_ns() - r.start_ns():>8d} {r.name()[:70]}")
print([(e.name, e.device_time_total) for e in prof.events() if e.name.startswith("swizzlebench")])
