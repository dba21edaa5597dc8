"""Tune mode's vocabulary: one launch config (:class:`Config`), what a candidate space needs to
know of a device (:class:`DeviceTraits`), and the small rules the kernels' spaces share.

Each kernel family declares its own space beside its code
(:meth:`kernels.base.ConvKernel.tune_space`): a pure function of the shape and the device's
traits, whose configs the tuner verifies and times.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping


#: How a config's label abbreviates a tile name (``BLOCK_M`` 128 -> ``M128``); every other tile
#: keeps its name.  The report's labels of runs (:mod:`harness.report.labels`) read the same.
SHORT_TILE_NAMES = {"BLOCK_M": "M", "BLOCK_N": "N", "BLOCK_K": "K", "BLOCK_N2": "N2_"}


@dataclass(frozen=True)
class Config:
    """One launch config: the kernel's tiles (sizes and flags), warps and pipeline stages."""

    tiles: tuple[tuple[str, int], ...]
    num_warps: int
    num_stages: int

    @classmethod
    def make(cls, tiles: Mapping[str, int], num_warps: int, num_stages: int) -> "Config":
        return cls(tuple((str(k), int(v)) for k, v in tiles.items()), int(num_warps), int(num_stages))

    @property
    def tiles_dict(self) -> dict[str, int]:
        return dict(self.tiles)

    @property
    def label(self) -> str:
        """Short and stable, e.g. ``M128 N64 K64 SPLIT_K1 TMA1 w4 s4``."""
        parts = [f"{SHORT_TILE_NAMES.get(k, k)}{v}" for k, v in self.tiles]
        return " ".join(parts + [f"w{self.num_warps}", f"s{self.num_stages}"])

    def as_dict(self) -> dict:
        return {"tiles": self.tiles_dict, "num_warps": self.num_warps, "num_stages": self.num_stages}

    @classmethod
    def from_dict(cls, d: Mapping) -> "Config":
        return cls.make(d["tiles"], d["num_warps"], d["num_stages"])


@dataclass(frozen=True)
class DeviceTraits:
    """What the candidate space needs to know about the device."""

    name: str                 # e.g. "NVIDIA H200" ("interpreter" on the CPU)
    num_sms: int              # streaming multiprocessors / compute units
    tma: bool                 # tensor descriptors (NVIDIA compute capability >= 9.0)
    vendor: str = "nvidia"    # "amd": the AMD backend's knobs, no TMA (igemm_fast_space)
    arch: str = ""            # e.g. "sm_90", "gfx942"; "" where unknown (the interpreter)

    @classmethod
    def of(cls, device) -> "DeviceTraits":
        import torch

        device = torch.device(device)
        if device.type == "cpu":
            return cls("interpreter", 4, False)
        props = torch.cuda.get_device_properties(device)
        amd = torch.version.hip is not None
        tma = not amd and (props.major, props.minor) >= (9, 0)
        arch = props.gcnArchName.split(":")[0] if amd else f"sm_{props.major}{props.minor}"
        return cls(props.name, props.multi_processor_count, tma, "amd" if amd else "nvidia", arch)

    @classmethod
    def for_target(cls, name: str, arch: str, compute_units: int) -> "DeviceTraits":
        """The traits of a compile target (``compile.only``: no device at hand), e.g.
        ``("mi300x", "gfx942", 304)``."""
        amd = arch.startswith("gfx")
        tma = not amd and arch.startswith("sm_") and int(arch[3:5]) >= 9
        return cls(name, int(compute_units), tma, "amd" if amd else "nvidia", arch)


# -----------------------------------------------------------
# Rules the kernels' spaces share.

def pow2_at_least(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


def warps_for(block_m: int, block_n: int) -> tuple[int, ...]:
    """4 warps (one warpgroup) up to 64x128 outputs, 8 from 128x256; both in between."""
    area = block_m * block_n
    return (4,) if area <= 8192 else (8,) if area >= 32768 else (4, 8)


def filter_tiles(F: int) -> tuple[int, ...]:
    """BLOCK_N no wider than the filters need (F=64 -> 64 only; F=24 -> 32)."""
    cap = max(32, pow2_at_least(F))
    return tuple(b for b in (32, 64, 128, 256) if b <= cap and (b >= 64 or F <= 32))


def stages_for(steps: int, options: tuple[int, ...]) -> tuple[int, ...]:
    """Pipeline depths worth trying for a loop of ``steps`` K steps: ``options``, except that a
    loop of 1-3 steps gets depths up to steps + 1 from 2 (a buffer per step is all it can fill;
    more only take shared memory, and with it programs per SM, from a layer that is
    memory-bound: a 1x1 layer with C = 64 has one step)."""
    if steps >= 4:
        return options
    return tuple(range(2, steps + 2))
