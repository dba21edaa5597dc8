"""A target's instruction set and what one compute unit holds: the numbers that turn a
compiled kernel's resources (registers, shared memory / LDS) into *occupancy*, the number
of programs a CU (AMD) or SM (NVIDIA) keeps resident at once.

Occupancy matters twice here: it decides how much latency a kernel can hide, and it is
the residency of the simulated L2 (programs resident per CU, :mod:`harness.profilers.sim`),
so it must come from the kernel as compiled for the target, not from a constant.

The two vendors count differently, so each has its own rule:

* **AMD CDNA3 (gfx942, MI300X).**  A CU has 4 SIMDs; a workgroup of ``w`` waves spreads
  its waves over them.  Each SIMD has 512 vector registers per lane, shared by the
  architectural VGPRs and the accumulation AGPRs (the unified register file of
  gfx90a/gfx942; ``.vgpr_count`` in the code object is their total), allocated in granules
  of 8, and holds at most 8 waves; 800 scalar registers per SIMD, granule 16; 64 KB of LDS
  per CU.  Sources: AMD CDNA3 ISA guide, LLVM AMDGPU ``getMaxWavesPerEU`` (8 on gfx90a
  and later), and the ``; Occupancy:`` comment LLVM writes into the AMDGCN text, which the
  tests check this rule against.
* **NVIDIA Hopper (sm_90).**  An SM has 65,536 registers, allocated per warp in units of
  256; at most 64 warps and 32 blocks; 228 KB of shared memory, of which a block may use
  227 KB, plus 1 KB the driver reserves per block.  Source: CUDA C Programming Guide,
  "Compute Capabilities" table, and the CUDA occupancy calculator's rules.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class ArchLimits:
    """What one CU / SM of an instruction set holds."""

    arch: str                   # "gfx942", "sm_90"
    vendor: str                 # "amd" or "nvidia"
    warp_size: int              # threads per wave (AMD) / warp (NVIDIA)
    shared_per_cu: int          # LDS / shared memory per CU or SM, bytes
    shared_per_program: int     # most a workgroup / block may use, bytes
    max_warps_per_cu: int       # waves / warps resident per CU or SM
    max_programs_per_cu: int    # workgroups / blocks resident per CU or SM
    # AMD: per SIMD, per lane; NVIDIA: per SM (registers are 32-bit)
    regs: int
    reg_granule: int            # AMD: VGPRs per allocation granule; NVIDIA: registers per warp allocation unit
    simds_per_cu: int = 1       # AMD: SIMDs a workgroup's waves spread over
    sgprs_per_simd: int = 0     # AMD scalar registers per SIMD (0: not a limit)
    sgpr_granule: int = 1
    shared_reserved_per_program: int = 0  # NVIDIA: shared memory the driver keeps per block, bytes

    @property
    def triton_backend(self) -> str:
        return "hip" if self.vendor == "amd" else "cuda"

    def triton_target(self):
        """The ``triton.backends.compiler.GPUTarget`` that compiles for this arch."""
        from triton.backends.compiler import GPUTarget

        arch = self.arch if self.vendor == "amd" else int(self.arch.removeprefix("sm_"))
        return GPUTarget(self.triton_backend, arch, self.warp_size)


ARCHS: dict[str, ArchLimits] = {
    "gfx942": ArchLimits("gfx942", "amd", warp_size=64, shared_per_cu=65536, shared_per_program=65536,
                         max_warps_per_cu=32, max_programs_per_cu=32, regs=512, reg_granule=8,
                         simds_per_cu=4, sgprs_per_simd=800, sgpr_granule=16),
    "sm_90": ArchLimits("sm_90", "nvidia", warp_size=32, shared_per_cu=233472, shared_per_program=232448,
                        max_warps_per_cu=64, max_programs_per_cu=32, regs=65536, reg_granule=256,
                        shared_reserved_per_program=1024),
}


def arch_limits(arch: str) -> ArchLimits:
    """The limits of ``arch``, or a ValueError naming the known ones."""
    try:
        return ARCHS[arch]
    except KeyError:
        raise ValueError(f"target arch {arch!r} is not known to swizzlebench; known: {', '.join(ARCHS)} "
                         "(add its limits to harness/hardware/arch.py)") from None


@dataclass(frozen=True)
class Resources:
    """What one compiled kernel takes, as its compiler reports it."""

    num_warps: int              # waves / warps per program
    registers: int              # AMD: VGPRs incl. AGPRs per lane; NVIDIA: registers per thread
    shared_bytes: int           # LDS / shared memory per program, bytes
    sgprs: int = 0              # AMD scalar registers per wave


@dataclass(frozen=True)
class Occupancy:
    """Programs resident per CU / SM and what limits them."""

    programs_per_cu: int        # workgroups per CU / blocks per SM (0: does not fit at all)
    warps_per_cu: int           # waves / warps resident per CU / SM
    waves_per_simd: int | None  # AMD only
    limiter: str                # "registers", "sgprs", "shared", "warps" or "programs"

    def as_dict(self) -> dict:
        return asdict(self)


def occupancy(limits: ArchLimits, res: Resources) -> Occupancy:
    """Programs per CU / SM that ``res`` allows on ``limits`` (module docstring's rules)."""
    return _amd(limits, res) if limits.vendor == "amd" else _nvidia(limits, res)


def _round_up(value: int, granule: int) -> int:
    return -(-value // granule) * granule


def _pick(bounds: dict[str, int]) -> tuple[str, int]:
    """The smallest bound and its name (the first listed wins a tie)."""
    name = min(bounds, key=lambda k: bounds[k])
    return name, bounds[name]


def _amd(lim: ArchLimits, res: Resources) -> Occupancy:
    max_waves_simd = lim.max_warps_per_cu // lim.simds_per_cu
    waves = {"registers": lim.regs // _round_up(max(res.registers, 1), lim.reg_granule)}
    if lim.sgprs_per_simd and res.sgprs:
        waves["sgprs"] = lim.sgprs_per_simd // _round_up(res.sgprs, lim.sgpr_granule)
    waves["warps"] = max_waves_simd
    wave_limiter, per_simd = _pick(waves)
    # A workgroup of w waves puts ceil(w / SIMDs) of them on each SIMD it uses.
    bounds = {wave_limiter: lim.simds_per_cu * per_simd // res.num_warps if res.num_warps <= lim.simds_per_cu
              else per_simd // math.ceil(res.num_warps / lim.simds_per_cu)}
    if res.shared_bytes:
        bounds["shared"] = lim.shared_per_cu // res.shared_bytes
    bounds["programs"] = lim.max_programs_per_cu
    limiter, programs = _pick(bounds)
    return Occupancy(programs, programs * res.num_warps, per_simd, limiter)


def _nvidia(lim: ArchLimits, res: Resources) -> Occupancy:
    regs_per_warp = _round_up(max(res.registers, 1) * lim.warp_size, lim.reg_granule)
    bounds = {"registers": (lim.regs // regs_per_warp) // res.num_warps}
    if res.shared_bytes:
        bounds["shared"] = lim.shared_per_cu // (res.shared_bytes + lim.shared_reserved_per_program)
    bounds["warps"] = lim.max_warps_per_cu // res.num_warps
    bounds["programs"] = lim.max_programs_per_cu
    limiter, programs = _pick(bounds)
    return Occupancy(programs, programs * res.num_warps, None, limiter)
