"""The planned job: what a JobSpec names, resolved once (:func:`plan_job`) into objects every
later stage receives: the kernel family, each arm's remap and launch config, the baseline
and the target.  No stage after the plan resolves them from the spec again; a stage in
another process (the compile helper, the profiler's worker) gets the spec and plans it there
with the same function.

Tiles are the kernel's checked tile sizes and flags (elements, 0/1 for flags); ``launch``
is Triton's ``num_warps`` and ``num_stages``."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from harness.job.spec import JobSpec
from harness.job.user_code import spec_kernel, spec_remap
from kernels.base import ConvKernel, LaunchConfig, SwizzleBinding
from kernels.tuning import Config
from swizzles import resolve_swizzle


@dataclass(frozen=True)
class Arm:
    """One swizzle of a job, ready to launch: its own spec (its swizzle, its config), its jit
    remap, its checked tiles and launch config."""

    spec: JobSpec
    remap: Any
    tiles: dict[str, int]
    launch: LaunchConfig

    @property
    def binding(self) -> SwizzleBinding:
        """The remap with the constexpr values it is launched with."""
        return SwizzleBinding(self.remap, self.spec.num_xcds, self.spec.group_size)

    @property
    def config(self) -> Config:
        """The launch config this arm runs on (tiles, warps, stages)."""
        return Config.make(self.spec.tiles_dict, self.spec.num_warps, self.spec.num_stages)


def _arm(kernel: ConvKernel, spec: JobSpec, remap: Any) -> Arm:
    return Arm(spec, remap, kernel.check_tiles(spec.tiles_dict), LaunchConfig(spec.num_warps, spec.num_stages))


@dataclass(frozen=True)
class PlannedJob:
    """A job resolved: ``requested`` is the spec as asked (its hash names the job for resume),
    ``candidate`` the job's own swizzle as launched (tune mode's config once tuned),
    ``baseline`` the swizzle measured beside it (None: no baseline, or the job is its own
    baseline), ``tune_remap`` the remap tune mode fixes while it tries configs
    (:attr:`JobSpec.tune_swizzle`), ``target`` the target preset's name."""

    requested: JobSpec
    kernel: ConvKernel
    candidate: Arm
    baseline: Arm | None
    tune_remap: Any
    target: str

    @property
    def spec(self) -> JobSpec:
        """The spec as launched (tune mode's config once tuned)."""
        return self.candidate.spec

    @property
    def same_config(self) -> bool:
        """True when the baseline runs on the candidate's own config (always, but in best vs best)."""
        return self.baseline is None or self.baseline.config == self.candidate.config

    def with_configs(self, candidate: Config, baseline: Config | None = None) -> "PlannedJob":
        """This job launched on tune mode's choice: ``candidate``'s config and, best vs best,
        the baseline on its own ``baseline`` config (else on the candidate's).  The kernel
        and the remaps are kept, only the configs are checked again."""
        launched = self.requested.with_config(candidate.tiles_dict, candidate.num_warps, candidate.num_stages)
        if baseline is not None:
            launched = launched.with_baseline_config(baseline.tiles_dict, baseline.num_warps, baseline.num_stages)
        base = None if self.baseline is None else _arm(self.kernel, launched.baseline_spec(), self.baseline.remap)
        return dataclasses.replace(self, candidate=_arm(self.kernel, launched, self.candidate.remap), baseline=base)


def plan_arm(spec: JobSpec) -> tuple[ConvKernel, Arm]:
    """Only the job's own arm, resolved (its kernel, remap, tiles, launch): for a stage that
    gets a spec across a process boundary and launches that one arm (the compile stage)."""
    kernel = spec_kernel(spec)
    return kernel, _arm(kernel, spec, spec_remap(spec))


def plan_job(spec: JobSpec) -> PlannedJob:
    """Resolve ``spec`` once: its kernel (a built-in or the user's class), its remap (built-in,
    formula or the user's function), its baseline's and tune mode's remaps, and each arm's
    checked tiles.  Raises what the resolution raises (ValueError, ImportError: the plan
    stage's errors)."""
    kernel, candidate = plan_arm(spec)
    baseline = None
    if spec.has_baseline:
        bspec = spec.baseline_spec()
        baseline = _arm(kernel, bspec, spec_remap(bspec))
    tune_remap = (baseline.remap if baseline is not None and spec.tune_swizzle == (spec.baseline, spec.baseline_formula)
                  else resolve_swizzle(*spec.tune_swizzle))
    return PlannedJob(spec, kernel, candidate, baseline, tune_remap, spec.target)
