"""What every conv2d kernel family provides to the harness.

A family owns its ``@triton.jit`` kernel, the layout its operands live in, how its
1-D grid splits into ``num_pid_m x num_pid_n`` tiles (the two axes a swizzle sees),
and how to launch it with a swizzle.  The harness never looks inside.
"""
from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Callable, ClassVar, Mapping

import numpy as np
import torch

from kernels.access import AccessModel, Epilogue, LaunchModel, LaunchPlan, LoadPlan, Schedule
from kernels.problem import ConvShape
from kernels.tuning import Config, DeviceTraits


class ToolchainError(ValueError):
    """A config the target runs that this machine's Triton cannot build (igemm_ws's Gluon under
    a Triton whose Gluon API it was not written for): :meth:`ConvKernel.check_target` raises it
    only after every rule of the target and the layer passed, so the target's own GPU nodes,
    on the Triton the kernel was written for, launch the config."""


@dataclass(frozen=True)
class TileGrid:
    """The kernel's grid as the swizzle sees it: row-major ``num_pid_m x num_pid_n`` tiles."""

    num_pid_m: int
    num_pid_n: int

    @property
    def num_pids(self) -> int:
        return self.num_pid_m * self.num_pid_n


@dataclass(frozen=True)
class SwizzleBinding:
    """A swizzle jit function with the constexpr values it is launched with."""

    fn: object
    num_xcds: int
    group_size: int


@dataclass(frozen=True)
class Bound:
    """The buffers a launcher runs on besides the input: the constant operands (weights,
    bias) in the family's layout, and the output."""

    operands: tuple
    out: torch.Tensor


@dataclass(frozen=True)
class LaunchConfig:
    num_warps: int = 4
    num_stages: int = 2


@dataclass(frozen=True)
class Operands:
    """The conv inputs in the reference layout: x N,C,H,W; w F,C,R,S; bias F (or None)."""

    x: torch.Tensor
    w: torch.Tensor
    bias: torch.Tensor | None


class ConvKernel(ABC):
    """A conv2d kernel family.

    A family of your own (a class in your own module, selected by a ``kernel`` config with
    ``_target_: mypkg.kernels:MyConv``; docs/byo.md, "Bring your own kernel or swizzle") must
    define ``tile_names``, ``jit_kernel``, :meth:`tile_grid`, :meth:`to_layout` and
    :meth:`launch`, and take a no-argument constructor; its jit kernel calls the swizzle
    passed as a ``tl.constexpr`` and decodes the tile row-major.  :meth:`launch` receives
    ``(input, *to_layout(ops))``: the input from :meth:`input_view` (timed), then the constant
    operands.  Optional: :meth:`input_view` (an input layout other than NCHW), ``has_bias``,
    :meth:`empty_output` / :meth:`output_as_nchw` (an output layout other than NCHW) and
    :meth:`load_plan` (the address model ``profiler=sim`` needs).  ``name`` is set from the
    config's ``kernel.name``.
    """

    name: ClassVar[str]
    #: the @triton.jit kernel, for the "source as launched" artifact
    jit_kernel: ClassVar[object]
    #: constexpr tile sizes the family takes, e.g. ("BLOCK_M", "BLOCK_N", "BLOCK_K")
    tile_names: ClassVar[tuple[str, ...]]
    #: the (M, N, K) tile names of the kernel's ``tl.dot``, None without one (its sizes are
    #: checked against the target's dot limits: harness.job.launch_limits)
    dot_tiles: ClassVar[tuple[str, str, str] | None] = None
    #: tiles a config may leave out, and the value they then take (tables written before the
    #: tile existed name fewer)
    tile_defaults: ClassVar[Mapping[str, int]] = {}
    has_bias: ClassVar[bool] = False

    def family_for(self, tiles: Mapping[str, int]) -> "ConvKernel":
        """The family whose code a launch with ``tiles`` runs: this one, unless it picks a
        member family by a tile (:mod:`kernels.igemm_best`).  Its name keys that code's
        measured records (the simulator's error bands)."""
        return self

    def validation_scope(self, tiles: Mapping[str, int]) -> str:
        """The name a target's simulator validation records (``sim_calibration``) key this
        launch's error bands by: :meth:`family_for`'s name, or a narrower one where that family
        says the launch takes a code path its validation sets did not hold (a record without
        the name gives no band: the figures then say "not validated")."""
        family = self.family_for(tiles)
        return self.name if family is self else family.validation_scope(tiles)

    def jit_kernel_for(self, tiles: Mapping[str, int]) -> object:
        """The @triton.jit kernel a launch with ``tiles`` runs as its main one (passes beside
        it, such as igemm_fast's fold, are others): :meth:`family_for`'s :attr:`jit_kernel`."""
        return self.family_for(tiles).jit_kernel

    def tile_entries(self, tiles: Mapping[str, int]) -> dict[str, int]:
        """The tiles as a dict (:attr:`tile_defaults` filled in), or raise naming the missing and
        unknown names."""
        given = {**self.tile_defaults, **dict(tiles)}
        missing = [t for t in self.tile_names if t not in given]
        unknown = [t for t in given if t not in self.tile_names]
        if missing or unknown:
            raise ValueError(f"kernel {self.name!r}: tiles must be exactly {list(self.tile_names)}; "
                             f"missing {missing}, unknown {unknown}")
        return given

    def check_tiles(self, tiles: Mapping[str, int]) -> dict[str, int]:
        """Return the tiles as a dict, or raise naming the missing, unknown or bad entry."""
        given = self.tile_entries(tiles)
        for key, value in given.items():
            if not isinstance(value, int) or value <= 0 or value & (value - 1):
                raise ValueError(f"kernel {self.name!r}: tile {key}={value!r} must be a power of two >= 1")
        return {t: int(given[t]) for t in self.tile_names}

    def canonical(self, config: Config) -> Config:
        """``config`` with every tile :meth:`check_tiles` returns, so that configs compare equal
        when they run the same (a table may leave out a tile that has a default)."""
        return Config.make(self.check_tiles(config.tiles_dict), config.num_warps, config.num_stages)

    def tune_space(self, shape: ConvShape, traits: DeviceTraits) -> list[Config] | None:
        """The launch configs tune mode tries on ``shape`` (None: no space; the given config runs)."""
        return None

    def check_target(self, shape: ConvShape | None, tiles: Mapping[str, int], vendor: str, arch: str) -> None:
        """Raise a one-line ValueError when the config needs something the compile target
        (``vendor`` "amd" or "nvidia", ``arch`` e.g. "gfx942", "sm_90") does not have, before
        the compiler is asked (``shape`` None: the rules that hold for every shape, checked
        once per sweep); :class:`ToolchainError` when only this machine's Triton is the obstacle
        (raised last, after the target's and the layer's rules).  Default: the compiler alone
        decides."""

    @abstractmethod
    def tile_grid(self, shape: ConvShape, tiles: Mapping[str, int]) -> TileGrid:
        """Split the launch grid into the (m, n) tile axes the swizzle remaps."""

    @abstractmethod
    def to_layout(self, ops: Operands) -> tuple:
        """The layer's constant operands (weights, bias) in this family's layout, made once,
        outside the timed launcher: frameworks pack a layer's weights once, too."""

    def input_view(self, x: torch.Tensor, tiles: Mapping[str, int]) -> torch.Tensor:
        """The input ``x`` (N, C, H, W, in whatever memory format the caller made it) in the
        layout this family reads.  Runs *inside* the timed launcher: a transform the vendor
        call does not need is charged to the kernel.  Default: NCHW, free when ``x`` already
        is contiguous."""
        return x.contiguous()

    def empty_output(self, shape: ConvShape, device: torch.device) -> torch.Tensor:
        """Allocate the output in this family's layout (default: NCHW, i.e. N, F, P, Q)."""
        return torch.empty((shape.N, shape.F, shape.P, shape.Q), dtype=getattr(torch, shape.dtype),
                           device=device)

    def output_as_nchw(self, out: torch.Tensor) -> torch.Tensor:
        """View the family-layout output as N, F, P, Q (default: it already is)."""
        return out

    @abstractmethod
    def launch(self, operands: tuple, out: torch.Tensor, shape: ConvShape, tiles: Mapping[str, int],
               swizzle: SwizzleBinding, launch: LaunchConfig) -> None:
        """Launch the kernel once, writing ``out``."""

    def bind(self, ops: Operands, shape: ConvShape, tiles: Mapping[str, int], swizzle: SwizzleBinding,
             launch: LaunchConfig, share: "Bound | None" = None) -> tuple[Callable[[], None], torch.Tensor]:
        """Return ``(run, out)``: a zero-argument launcher for timing, and its output buffer,
        poisoned with NaN so that an element the kernel never writes cannot pass the check.

        ``share``: launch on the operand and output buffers of an earlier binding (see
        :meth:`prepare`).  Two swizzles compared in one process must run on the *same*
        buffers: the very same kernel can run steadily slower on one of two equal copies of
        its operands (other addresses, other DRAM channels), by as much as the swizzles being
        compared differ (docs/concepts.md)."""
        tiles = self.check_tiles(tiles)
        bound = share if share is not None else self.prepare(ops, shape, tiles)
        bound.out.fill_(math.nan)

        def run() -> None:
            x = self.input_view(ops.x, tiles)          # timed: see input_view
            self.launch((x, *bound.operands), bound.out, shape, tiles, swizzle, launch)

        run.bound = bound  # type: ignore[attr-defined]  (for share= of a later binding)
        return run, bound.out

    def prepare(self, ops: Operands, shape: ConvShape, tiles: Mapping[str, int]) -> "Bound":
        """Constant operands in this family's layout and an output buffer, on the operands' device."""
        return Bound(self.to_layout(ops), self.empty_output(shape, ops.x.device))

    # -----------------------------------------------------------
    # The address model (for the simulated L2).  A family implements ``load_plan``;
    # the two views below follow from it.

    def load_plan(self, shape: ConvShape, tiles: Mapping[str, int], elem_bytes: int | None = None) -> LoadPlan:
        """Describe, for every tile, which bytes each step of the kernel's loop loads
        (see :mod:`kernels.access`); ``elem_bytes`` defaults to the shape's dtype size."""
        raise NotImplementedError(f"kernel {self.name} has no address model (load_plan); "
                                  "use profiler=none or a hardware profiler (ncu, rocprofv3)")

    def access_steps(self, shape: ConvShape, tiles: Mapping[str, int], tile_id: int,
                     elem_bytes: int | None = None) -> list[np.ndarray]:
        """Simulated byte addresses of every element the program computing tile
        ``tile_id`` loads (masked-in elements only), one sorted int64 array per step.
        Tensors sit at :func:`kernels.access.tensor_bases`."""
        return self.load_plan(shape, tiles, elem_bytes).tile_addresses(tile_id)

    def access_model(self, shape: ConvShape, tiles: Mapping[str, int], line_bytes: int) -> AccessModel:
        """The distinct ``line_bytes``-byte cache lines every tile reads at every step,
        for all tiles at once."""
        return self.load_plan(shape, tiles).access_model(line_bytes)

    def store_plan(self, shape: ConvShape, tiles: Mapping[str, int], elem_bytes: int | None = None) -> Epilogue | None:
        """What each program writes after its loop (its output tile), keyed by tile; None
        (the default) when the family does not model its stores: the simulated launch is
        then its loads only."""
        return None

    def launch_plans(self, shape: ConvShape, tiles: Mapping[str, int],
                     elem_bytes: int | None = None) -> tuple[LaunchPlan, ...]:
        """The launches of one timed run, in launch order (see :class:`kernels.access.LaunchPlan`).
        Default: one launch, one program per tile, :meth:`load_plan` then :meth:`store_plan`."""
        loads = self.load_plan(shape, tiles, elem_bytes)
        return (LaunchPlan("conv", Schedule(loads.num_tiles, loads.num_steps), loads,
                           epilogue=self.store_plan(shape, tiles, elem_bytes)),)

    def launch_models(self, shape: ConvShape, tiles: Mapping[str, int], line_bytes: int,
                      request_bytes: int = 0, store_request_bytes: int = 0) -> tuple[LaunchModel, ...]:
        """:meth:`launch_plans` in ``line_bytes``-byte cache lines: what ``profiler=sim`` replays
        (``request_bytes``, ``store_request_bytes``: see :meth:`kernels.access.LaunchPlan.access_model`)."""
        return tuple(plan.access_model(line_bytes, request_bytes, store_request_bytes)
                     for plan in self.launch_plans(shape, tiles))
