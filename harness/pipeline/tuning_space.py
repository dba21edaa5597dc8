"""Tune mode's candidate spaces: the launch configs worth trying for a kernel on a shape
and a device (:func:`candidates`), and the records that describe them (:class:`Config`,
:class:`DeviceTraits`).  Pure functions of the shape and the device's traits: the tuner
(:mod:`harness.pipeline.tuning`) verifies and times what they list.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping

from kernels.igemm_fast import folded
from kernels.problem import ConvShape


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
        short = {"BLOCK_M": "M", "BLOCK_N": "N", "BLOCK_K": "K"}
        parts = [f"{short.get(k, k)}{v}" for k, v in self.tiles]
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

    @classmethod
    def of(cls, device) -> "DeviceTraits":
        import torch

        device = torch.device(device)
        if device.type == "cpu":
            return cls("interpreter", 4, False)
        props = torch.cuda.get_device_properties(device)
        amd = torch.version.hip is not None
        tma = not amd and (props.major, props.minor) >= (9, 0)
        return cls(props.name, props.multi_processor_count, tma, "amd" if amd else "nvidia")

    @classmethod
    def for_target(cls, name: str, arch: str, compute_units: int) -> "DeviceTraits":
        """The traits of a compile target (``compile.only``: no device at hand), e.g.
        ``("mi300x", "gfx942", 304)``."""
        amd = arch.startswith("gfx")
        tma = not amd and arch.startswith("sm_") and int(arch[3:5]) >= 9
        return cls(name, int(compute_units), tma, "amd" if amd else "nvidia")


# -----------------------------------------------------------
# Candidate spaces, one per kernel family.

def _pow2_at_least(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


def _warps_for(block_m: int, block_n: int) -> tuple[int, ...]:
    """4 warps (one warpgroup) up to 64x128 outputs, 8 from 128x256; both in between."""
    area = block_m * block_n
    return (4,) if area <= 8192 else (8,) if area >= 32768 else (4, 8)


def _filter_tiles(F: int) -> tuple[int, ...]:
    """BLOCK_N no wider than the filters need (F=64 -> 64 only; F=24 -> 32)."""
    cap = max(32, _pow2_at_least(F))
    return tuple(b for b in (32, 64, 128, 256) if b <= cap and (b >= 64 or F <= 32))


def _stages_for(steps: int, options: tuple[int, ...]) -> tuple[int, ...]:
    """Pipeline depths worth trying for a loop of ``steps`` K steps: ``options``, except that a
    loop of 1-3 steps gets depths up to steps + 1 from 2 (a buffer per step is all it can fill;
    more only take shared memory, and with it programs per SM, from a layer that is
    memory-bound: a 1x1 layer with C = 64 has one step)."""
    if steps >= 4:
        return options
    return tuple(range(2, steps + 2))


def igemm_space(shape: ConvShape, traits: DeviceTraits) -> list[Config]:
    """igemm: the tile sizes and launch settings it takes today."""
    out = []
    for bm in (64, 128):
        for bn in _filter_tiles(shape.F):
            for bk in (32, 64):
                for warps in _warps_for(bm, bn):
                    for stages in (2, 3, 4):
                        out.append(Config.make({"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk}, warps, stages))
    return out


def igemm_fast_space(shape: ConvShape, traits: DeviceTraits, stages_options: tuple[int, ...] = (3, 4),
                     k_options: int = 2) -> list[Config]:
    """igemm_fast: tiles x warps x stages around wgmma-friendly shapes, with

    * the packed and the row-packed K orders only where the channels are few (C <= 32: the
      tap order's zero padding would cost more than the gather), with 256-row tiles too (their
      K is short), and the tap order only where C >= 16;
    * on 1x1 stride-1 layers, the NCHW input read in place (no layout copy) beside both;
    * on strided layers with few channels, the folded layer (stride into channels) in tap
      and row order;
    * split-K only where a tile size leaves SMs idle (fewer tiles than SMs), up to 4 slices
      of at least 4 K steps each, the partials added by a second kernel or by the last split;
    * TMA on where the device has it, plus a TMA-off, a TMA-store and a persistent twin of
      each base tile shape, so that the measurements, not a guess, decide;
    * on AMD (``traits.vendor == "amd"``, gfx942): no TMA, two pipeline stages (Triton's AMD
      stream pipeliner keeps one stage in LDS, 64 KB per CU), and twins of each base tile
      shape with the AMD backend's knobs (kernels.igemm_fast.AMD_OPTIONS): an occupancy hint
      ``WAVES_PER_EU=2``, 16x16 MFMA instructions, ``KPACK=2``.
    """
    amd = traits.vendor == "amd"
    M = shape.N * shape.P * shape.Q
    matrix = shape.R == shape.S == shape.stride == 1 and shape.padding == 0
    # (PACK_K, NCHW_IN, FOLD): tap order, packed order, row-packed order, (1x1 stride 1) the
    # NCHW input read in place, and (strided, few channels) the folded layer in tap or row order
    fold = folded(shape) if shape.stride > 1 else None
    orders = [o for o, ok in (((0, 0, 0), shape.C >= 16), ((1, 0, 0), shape.C <= 32),
                              ((2, 0, 0), shape.C <= 32 and shape.S > 1), ((0, 1, 0), matrix and shape.C >= 16),
                              ((0, 0, 1), fold is not None and shape.C <= 32),
                              ((2, 0, 1), fold is not None and shape.C <= 32 and fold.S > 1))
              if ok]
    tma = 1 if traits.tma else 0
    seen, out = set(), []

    def add(tiles: dict, warps: int, stages: int) -> None:
        cfg = Config.make(tiles, warps, stages)
        if cfg not in seen:
            seen.add(cfg)
            out.append(cfg)

    for pack, nchw, fold_on in orders:
        conv = fold if fold_on else shape                  # the conv the kernel runs
        ks = ((32, 64) if pack else tuple(k for k in (16, 32, 64) if k <= max(16, _pow2_at_least(conv.C))))
        ks = ks[-k_options:]
        steps_of = (lambda bk: -(-conv.R * conv.S * conv.C // bk)) if pack else (
            lambda bk: conv.R * conv.S * -(-conv.C // bk))
        few = pack or fold_on                              # few channels: short K, so taller tiles
        for bm in (64, 128, 256) if few else (64, 128):
            for bn in _filter_tiles(shape.F):
                rows = shape.N * -(-shape.P * shape.Q // bm) if nchw else -(-M // bm)
                tiles_mn = rows * -(-shape.F // bn)
                for warps in _warps_for(bm, bn):
                    for bk in ks:
                        base = {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "SPLIT_K": 1,
                                "PACK_K": pack, "NCHW_IN": nchw, "PERSISTENT": 0, "TMA": tma,
                                "TMA_STORE": 0, "FOLD": fold_on, "SPLIT_SUM": 0}
                        stages_here = (2,) if amd else _stages_for(steps_of(bk), stages_options)
                        for stages in stages_here:
                            add(base, warps, stages)
                        if bk != ks[-1]:
                            continue
                        # Twins of the deepest-K base: TMA off, TMA store, persistent (with and
                        # without TMA store), split-K.  The TMA store's output tile takes shared
                        # memory too, so its twins get the shallowest pipeline.
                        deep, shallow = stages_here[-1], stages_here[0]
                        if amd:
                            for knob, value in (("WAVES_PER_EU", 2), ("MATRIX_INSTR_NONKDIM", 16), ("KPACK", 2)):
                                add({**base, knob: value}, warps, deep)
                        store = tma and not nchw and shape.F % 8 == 0
                        if tma:
                            add({**base, "TMA": 0}, warps, deep)
                        if store:
                            add({**base, "TMA_STORE": 1}, warps, shallow)
                        if tiles_mn > traits.num_sms:
                            add({**base, "PERSISTENT": 1}, warps, deep)
                            if store:
                                add({**base, "PERSISTENT": 1, "TMA_STORE": 1}, warps, shallow)
                        else:
                            for split in (2, 4):
                                if steps_of(bk) >= 4 * split:
                                    for split_sum in (0, 1):        # a second kernel, or the last split
                                        add({**base, "SPLIT_K": split, "SPLIT_SUM": split_sum}, warps, deep)
    return out


#: kernel name -> candidate space.  A kernel without one is tuned over its given config only.
SPACES: dict[str, Callable[[ConvShape, DeviceTraits], list[Config]]] = {
    "igemm": igemm_space,
    "igemm_fast": igemm_fast_space,
}


def candidates(kernel: str, shape: ConvShape, traits: DeviceTraits, default: Config | None = None) -> list[Config]:
    """The configs tune mode tries for ``kernel`` on ``shape`` (``[default]`` without a space)."""
    space = SPACES.get(kernel)
    if space is None:
        if default is None:
            raise ValueError(f"kernel {kernel!r} has no candidate space; give its config")
        return [default]
    return space(shape, traits)
