"""JobSpec: every knob of one measurement, and the content hash that names it."""
from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import asdict, dataclass

from kernels.problem import ConvShape

#: ``compare_configs`` of best-vs-best mode (harness.tune.best_vs_best): each arm tuned on its own.
TUNED_EACH = "tuned_each"

#: Fields added after specs were first hashed: part of the hash only when set.
_UNHASHED_WHEN_UNSET = ("kernel_target", "swizzle_fn", "timing", "compare_configs", "baseline_tiles",
                        "baseline_num_warps", "baseline_num_stages")


def code_digest(code: str) -> str:
    """The first 8 hex digits of the SHA-256 of a swizzle's code: its normalized formula or
    its import path.  It tells remaps apart where they share a label (``label#<digest>`` in
    run names and report cells) and names an unlabelled formula (``custom-<digest>``)."""
    return hashlib.sha256(code.encode()).hexdigest()[:8]


@dataclass(frozen=True)
class JobSpec:
    """One (kernel, swizzle, launch, shape, target) measurement.  Frozen: the hash of its
    fields identifies the job across sweeps (resume, comparisons)."""

    kernel: str
    tiles: tuple[tuple[str, int], ...]
    swizzle: str
    num_xcds: int
    group_size: int
    shape: ConvShape
    shape_preset: str
    num_warps: int
    num_stages: int
    target: str
    seed: int
    profiler: str = "none"   # e.g. "ncu/cache=all/r5": what was measured is part of the job
    swizzle_formula: str | None = None  # normalized user formula (swizzle=custom); swizzle is its label
    baseline: str | None = None          # swizzle measured beside this one, in the same process (compare.baseline)
    baseline_formula: str | None = None  # its normalized formula when the baseline is a formula
    input_layout: str = "channels_last"  # memory format of the input both the kernel and the vendor get
    tune: str = "none"                   # tune mode (harness.tune.search): "none", or "fastest" (tiles, warps,
                                         # stages are then the configured defaults, replaced per shape)
    # The user's own code, by import path (harness/job/user_code.py); kernel / swizzle are then its names.
    kernel_target: str | None = None     # a ConvKernel subclass, e.g. "mypkg.kernels:MyConv" (kernel._target_)
    swizzle_fn: str | None = None        # a @triton.jit remap, e.g. "mypkg.remaps:hilbert" (swizzle.fn)
    # How the paired rounds time, when not the original CUDA events on one set of buffers:
    # e.g. "events/placements=8" (compare.timer, compare.placements).  A job measured another way is another job.
    timing: str | None = None
    # Which configs the comparison runs on (compare.configs, harness.tune.best_vs_best): None,
    # the baseline on the candidate's config; "tuned_each": each swizzle on its own tuned config.
    compare_configs: str | None = None
    # The baseline's own launch config where it differs from this one's (best vs best, once tuned):
    # baseline_spec() launches it.  None: the baseline runs on this spec's config.
    baseline_tiles: tuple[tuple[str, int], ...] | None = None
    baseline_num_warps: int | None = None
    baseline_num_stages: int | None = None

    @property
    def tiles_dict(self) -> dict[str, int]:
        return dict(self.tiles)

    @property
    def spec_hash(self) -> str:
        """First 16 hex digits of the SHA-256 of the spec's canonical JSON.  The import-path
        fields are left out while unset, so specs of built-ins keep the hashes they had
        before those fields existed (resume finds their runs)."""
        fields = {k: v for k, v in asdict(self).items() if not (k in _UNHASHED_WHEN_UNSET and v is None)}
        blob = json.dumps(fields, sort_keys=True, default=str)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    @property
    def input_seed(self) -> int:
        """Seed of the job's random inputs: the configured seed mixed with the spec hash, so
        every job draws fresh inputs and a re-run of the same job draws the same ones."""
        return (self.seed * 1_000_003 + int(self.spec_hash[:8], 16)) % 2**31

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "JobSpec":
        fields = dict(data)
        fields["shape"] = ConvShape(**fields["shape"])
        fields["tiles"] = tuple((str(k), int(v)) for k, v in fields["tiles"])
        if fields.get("baseline_tiles") is not None:
            fields["baseline_tiles"] = tuple((str(k), int(v)) for k, v in fields["baseline_tiles"])
        return cls(**fields)

    @property
    def has_baseline(self) -> bool:
        """True when a baseline other than this job's own swizzle is to be measured beside it
        (a baseline is a built-in or a formula, never an import path)."""
        return self.baseline is not None and (self.baseline, self.baseline_formula, None) != (
            self.swizzle, self.swizzle_formula, self.swizzle_fn)

    def with_config(self, tiles: dict[str, int], num_warps: int, num_stages: int) -> "JobSpec":
        """This job launched with another config (the one tune mode chose).  Its
        ``spec_hash`` differs: the job keeps the requested spec's hash for resume."""
        return dataclasses.replace(self, tiles=tuple((str(k), int(v)) for k, v in tiles.items()),
                                   num_warps=int(num_warps), num_stages=int(num_stages))

    @property
    def tune_swizzle(self) -> tuple[str, str | None]:
        """(name, formula) of the swizzle tune mode fixes while it tries configs: the
        baseline's, identity when there is none (so every swizzle is compared on one config)."""
        return (self.baseline, self.baseline_formula) if self.baseline is not None else ("identity", None)

    @property
    def tune_swizzles(self) -> tuple[tuple[str, str | None], ...]:
        """Every (name, formula) tune mode fixes for this job: the baseline's (:attr:`tune_swizzle`)
        and, best vs best, the job's own (a swizzle given by import path is tuned in its trials)."""
        own = (self.swizzle, self.swizzle_formula)
        if self.compare_configs == TUNED_EACH and self.swizzle_fn is None and own != self.tune_swizzle:
            return (self.tune_swizzle, own)
        return (self.tune_swizzle,)

    def baseline_spec(self) -> "JobSpec":
        """This job with the baseline's swizzle (and no baseline of its own), on the
        baseline's own config when it has one (best vs best), else on this job's."""
        if self.baseline is None:
            raise ValueError(f"job {self.run_name} has no baseline")
        own = {} if self.baseline_tiles is None else {
            "tiles": self.baseline_tiles, "num_warps": int(self.baseline_num_warps),
            "num_stages": int(self.baseline_num_stages)}
        return dataclasses.replace(self, swizzle=self.baseline, swizzle_formula=self.baseline_formula,
                                   swizzle_fn=None, baseline=None, baseline_formula=None, baseline_tiles=None,
                                   baseline_num_warps=None, baseline_num_stages=None, **own)

    def with_baseline_config(self, tiles: dict[str, int], num_warps: int, num_stages: int) -> "JobSpec":
        """This job with its baseline launched on its own config (best vs best)."""
        return dataclasses.replace(self, baseline_tiles=tuple((str(k), int(v)) for k, v in tiles.items()),
                                   baseline_num_warps=int(num_warps), baseline_num_stages=int(num_stages))

    @property
    def shape_label(self) -> str:
        return self.shape.name if self.shape_preset == self.shape.name else f"{self.shape_preset}-{self.shape.name}"

    @property
    def run_name(self) -> str:
        """Readable MLflow run name, e.g. ``igemm/xcd/resnet-l12/w8``."""
        return f"{self.kernel}/{self.swizzle}/{self.shape_label}/w{self.num_warps}"
