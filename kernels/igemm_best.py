"""The better of the two fast implicit GEMMs per layer: a family whose config names which one runs.

Tile ``WS`` picks the member: 0 runs :mod:`kernels.igemm_fast` (Triton; every target, the CPU
interpreter included), 1 runs :mod:`kernels.igemm_ws` (Gluon; NVIDIA Hopper with Triton 3.6,
C and F multiples of 8, stride 1 or 2).  The other tiles are the union of the two families'
tiles: a config sets its member's, and the other member's own tiles stay at their neutral
value 0 (left out, they are filled in).  Every method that gets tiles hands them to the
member; the methods that get none are the two members' common ground, the NHWC output
(N, P, Q, F) of both.  Nothing of either kernel is copied here.

Which member runs a layer is decided ahead of time, by the committed tables
(``kernels/tuned/igemm_best_<target>.json``, built from the two members' tables and their
measured speed against cuDNN: docs/benchmarks.md, "Kernel speed"), not by timing at run time.
Tune mode searches both spaces: igemm_fast's (WS=0) everywhere, igemm_ws's (WS=1) where that
family can run (:func:`ws_runs_on`).
"""
from __future__ import annotations

from typing import Callable, Mapping

import torch

from kernels.access import Epilogue, LaunchPlan, LoadPlan
from kernels.base import Bound, ConvKernel, LaunchConfig, Operands, SwizzleBinding, TileGrid
from kernels.igemm_fast import FastImplicitGemmConv, igemm_fast_kernel
from kernels.igemm_ws import IgemmWsConv, check_gluon_version
from kernels.problem import ConvShape
from kernels.tuning import Config, DeviceTraits

#: The members, by the value of tile ``WS``.
MEMBERS: dict[int, ConvKernel] = {0: FastImplicitGemmConv(), 1: IgemmWsConv()}
#: Archs igemm_ws compiles for (its check_target).
WS_ARCHS = ("sm_90", "sm_90a")


def ws_runs_on(traits: DeviceTraits) -> bool:
    """Whether igemm_ws can run on a device with ``traits``: NVIDIA sm_90 under a Triton whose
    Gluon API it was written for."""
    if traits.vendor != "nvidia" or traits.arch not in WS_ARCHS:
        return False
    try:
        check_gluon_version()
    except ValueError:
        return False
    return True


class BestImplicitGemmConv(ConvKernel):
    """igemm_fast or igemm_ws, by tile ``WS`` (module docstring)."""

    name = "igemm_best"
    #: the WS=0 member's kernel; :meth:`jit_kernel_for` gives the one a config launches
    jit_kernel = igemm_fast_kernel
    tile_names = ("WS",) + tuple(dict.fromkeys(MEMBERS[0].tile_names + MEMBERS[1].tile_names))
    dot_tiles = ("BLOCK_M", "BLOCK_N", "BLOCK_K")
    has_bias = False

    # -----------------------------------------------------------
    # The dispatch: a config's member and the member's own tiles.

    def member(self, tiles: Mapping[str, int]) -> tuple[ConvKernel, dict[str, int]]:
        """The family that tile ``WS`` names, and the tiles of ``tiles`` that family takes."""
        ws = dict(tiles).get("WS")
        if isinstance(ws, bool) or ws not in MEMBERS:
            raise ValueError(f"kernel {self.name!r}: tile WS={ws!r} must be 0 (igemm_fast) or 1 (igemm_ws)")
        family = MEMBERS[ws]
        return family, {k: v for k, v in dict(tiles).items() if k in family.tile_names}

    def dispatch(self, tiles: Mapping[str, int]) -> tuple[ConvKernel, dict[str, int]]:
        """The member that runs ``tiles`` and its own tiles, checked by it (every one it takes)."""
        family, own = self.member(tiles)
        return family, family.check_tiles(own)

    def _others(self, family: ConvKernel) -> tuple[str, ...]:
        """The tiles only the other member takes."""
        return tuple(t for t in self.tile_names if t != "WS" and t not in family.tile_names)

    def tile_entries(self, tiles: Mapping[str, int]) -> dict[str, int]:
        """The member's entries (as that family requires them), WS, and the other member's own
        tiles (0 where left out); raise naming an unknown name."""
        unknown = [t for t in dict(tiles) if t not in self.tile_names]
        if unknown:
            raise ValueError(f"kernel {self.name!r}: unknown tiles {unknown}; valid: {list(self.tile_names)}")
        family, own = self.member(tiles)
        try:
            own = family.tile_entries(own)
        except ValueError as exc:
            raise ValueError(f"kernel {self.name!r} (WS={tiles['WS']}: {family.name}'s tiles): {exc}") from None
        given = dict(tiles)
        return {"WS": given["WS"], **own, **{t: given.get(t, 0) for t in self._others(family)}}

    def check_tiles(self, tiles: Mapping[str, int]) -> dict[str, int]:
        """The member's rules on its tiles; the other member's own tiles must be 0.  Returns
        every tile of :attr:`tile_names`."""
        given = self.tile_entries(tiles)
        family, own = self.member(given)
        try:
            own = family.check_tiles(own)
        except ValueError as exc:
            raise ValueError(f"kernel {self.name!r} (WS={given['WS']}: {family.name}'s tiles): {exc}") from None
        stray = [f"{t}={given[t]}" for t in self._others(family) if given[t] != 0]
        if stray:
            raise ValueError(f"kernel {self.name!r}: WS={given['WS']} runs {family.name}, which has no tiles "
                             f"{', '.join(stray)}; leave them out (0)")
        checked = {"WS": given["WS"], **own, **{t: 0 for t in self._others(family)}}
        return {t: checked[t] for t in self.tile_names}

    def family_for(self, tiles: Mapping[str, int]) -> ConvKernel:
        return self.dispatch(tiles)[0]

    # -----------------------------------------------------------
    # Tune mode and the target.

    def tune_space(self, shape: ConvShape, traits: DeviceTraits) -> list[Config]:
        """igemm_fast's space as WS=0 configs, then (where :func:`ws_runs_on`) igemm_ws's as WS=1."""
        spaces = [(0, MEMBERS[0].tune_space(shape, traits))]
        if ws_runs_on(traits):
            spaces.append((1, MEMBERS[1].tune_space(shape, traits)))
        return [Config.make({"WS": ws, **cfg.tiles_dict}, cfg.num_warps, cfg.num_stages)
                for ws, space in spaces for cfg in space or ()]

    def check_target(self, shape: ConvShape | None, tiles: Mapping[str, int], vendor: str, arch: str) -> None:
        """The member's: WS=1 compiles for sm_90 only, so on gfx942 only WS=0 configs do."""
        family, own = self.dispatch(tiles)
        family.check_target(shape, own, vendor, arch)

    # -----------------------------------------------------------
    # Grid, layouts, launch: the member's.

    def tile_grid(self, shape: ConvShape, tiles: Mapping[str, int]) -> TileGrid:
        family, own = self.dispatch(tiles)
        return family.tile_grid(shape, own)

    def to_layout(self, ops: Operands) -> tuple:
        """Not used: both members pack their weights per tile size in :meth:`prepare`."""
        raise NotImplementedError("igemm_best's members pack their weights per tile size in prepare()")

    def input_view(self, x: torch.Tensor, tiles: Mapping[str, int]) -> torch.Tensor:
        family, own = self.dispatch(tiles)
        return family.input_view(x, own)

    def empty_output(self, shape: ConvShape, device: torch.device) -> torch.Tensor:
        """NHWC (N, P, Q, F): both members' layout."""
        return MEMBERS[0].empty_output(shape, device)

    def output_as_nchw(self, out: torch.Tensor) -> torch.Tensor:
        return MEMBERS[0].output_as_nchw(out)

    def prepare(self, ops: Operands, shape: ConvShape, tiles: Mapping[str, int]) -> Bound:
        family, own = self.dispatch(tiles)
        return family.prepare(ops, shape, own)

    def bind(self, ops: Operands, shape: ConvShape, tiles: Mapping[str, int], swizzle: SwizzleBinding,
             launch: LaunchConfig, share: Bound | None = None) -> tuple[Callable[[], None], torch.Tensor]:
        family, own = self.member(self.check_tiles(tiles))
        return family.bind(ops, shape, own, swizzle, launch, share=share)

    def launch(self, operands, out, shape, tiles, swizzle: SwizzleBinding, launch: LaunchConfig) -> None:
        family, own = self.dispatch(tiles)
        family.launch(operands, out, shape, own, swizzle, launch)

    # -----------------------------------------------------------
    # The address model (profiler=sim): the member's.

    def load_plan(self, shape: ConvShape, tiles: Mapping[str, int], elem_bytes: int | None = None) -> LoadPlan:
        family, own = self.dispatch(tiles)
        return family.load_plan(shape, own, elem_bytes)

    def store_plan(self, shape: ConvShape, tiles: Mapping[str, int], elem_bytes: int | None = None) -> Epilogue | None:
        family, own = self.dispatch(tiles)
        return family.store_plan(shape, own, elem_bytes)

    def launch_plans(self, shape: ConvShape, tiles: Mapping[str, int],
                     elem_bytes: int | None = None) -> tuple[LaunchPlan, ...]:
        family, own = self.dispatch(tiles)
        return family.launch_plans(shape, own, elem_bytes)
