"""Which machine the job runs on: a GPU, or the CPU under the Triton interpreter.

``select_execution_mode`` must run before ``triton`` is imported: the interpreter is
chosen by the ``TRITON_INTERPRET`` environment variable at the moment ``@triton.jit``
decorates a function.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

GPU = "gpu"
INTERPRETER = "interpreter"


def select_execution_mode() -> str:
    """Return ``gpu`` when torch sees a GPU (CUDA or ROCm), else turn on the Triton
    interpreter and return ``interpreter``.  ``TRITON_INTERPRET=1`` forces the interpreter."""
    if os.environ.get("TRITON_INTERPRET") == "1":
        return INTERPRETER
    import torch

    if torch.cuda.is_available():
        return GPU
    os.environ["TRITON_INTERPRET"] = "1"
    return INTERPRETER


@dataclass(frozen=True)
class DeviceInfo:
    mode: str            # "gpu" or "interpreter"
    name: str            # e.g. "NVIDIA H100 80GB HBM3", or "cpu (Triton interpreter)"
    vendor: str | None   # "nvidia", "amd", or None on the CPU
    num_sms: int | None  # SMs / CUs
    l2_bytes: int | None
    uuid: str | None = None  # the physical GPU's UUID: shows which GPU a pinned job really used
    arch: str | None = None  # instruction set, e.g. "sm_90", "gfx942" (None on the CPU)

    @property
    def torch_device(self) -> str:
        return "cuda" if self.mode == GPU else "cpu"


def describe_device(mode: str) -> DeviceInfo:
    if mode != GPU:
        return DeviceInfo(INTERPRETER, "cpu (Triton interpreter)", None, None, None)
    import torch

    props = torch.cuda.get_device_properties(0)
    vendor = "amd" if getattr(torch.version, "hip", None) else "nvidia"
    uuid = getattr(props, "uuid", None)
    arch = (str(getattr(props, "gcnArchName", "")).split(":")[0] or None if vendor == "amd"
            else f"sm_{props.major}{props.minor}")
    return DeviceInfo(GPU, props.name, vendor, props.multi_processor_count,
                      getattr(props, "L2_cache_size", None), str(uuid) if uuid is not None else None, arch)


def target_name_for(device: DeviceInfo) -> str | None:
    """The shipped target preset matching the device, or None when there is none."""
    if device.mode != GPU:
        return "mi300x"  # no GPU: the simulated MI300X is the embedded default target
    name = device.name.upper()
    for key, target in (("H100", "h100"), ("H200", "h200"), ("MI300X", "mi300x"), ("MI300", "mi300x")):
        if key in name:
            return target
    return None
