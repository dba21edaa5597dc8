"""The conv2d problem: sizes, layout-free, validated with clear messages."""
from __future__ import annotations

from dataclasses import asdict, dataclass

DTYPES = ("float16", "bfloat16")


@dataclass(frozen=True)
class ConvShape:
    """One conv2d problem: input N x C x H x W, F filters of C x R x S, stride and padding
    applied equally to both spatial axes; ``dtype`` is the storage type of every tensor."""

    name: str
    N: int
    C: int
    H: int
    W: int
    F: int
    R: int
    S: int
    stride: int = 1
    padding: int = 0
    dtype: str = "float16"

    def __post_init__(self) -> None:
        for field in ("N", "C", "H", "W", "F", "R", "S", "stride"):
            value = getattr(self, field)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise ValueError(
                    f"shape {self.name!r}: {field}={value!r} is invalid; {field} must be a positive integer")
        if not isinstance(self.padding, int) or self.padding < 0:
            raise ValueError(
                f"shape {self.name!r}: padding={self.padding!r} is invalid; padding must be an integer >= 0")
        if self.dtype not in DTYPES:
            raise ValueError(
                f"shape {self.name!r}: dtype={self.dtype!r} is invalid; valid dtypes: {', '.join(DTYPES)}")
        for size, kernel, axis in ((self.H, self.R, "H/R"), (self.W, self.S, "W/S")):
            if kernel > size + 2 * self.padding:
                raise ValueError(
                    f"shape {self.name!r}: filter larger than padded input on {axis}: "
                    f"{kernel} > {size} + 2*{self.padding}; need R <= H + 2*padding and S <= W + 2*padding")

    @property
    def P(self) -> int:
        """Output height."""
        return (self.H + 2 * self.padding - self.R) // self.stride + 1

    @property
    def Q(self) -> int:
        """Output width."""
        return (self.W + 2 * self.padding - self.S) // self.stride + 1

    @property
    def flops(self) -> int:
        """Multiply-adds x 2 of the direct definition (FLOP)."""
        return 2 * self.N * self.P * self.Q * self.F * self.C * self.R * self.S

    def as_params(self) -> dict:
        """Every field plus the derived output size, for logging."""
        return {**asdict(self), "P": self.P, "Q": self.Q}
