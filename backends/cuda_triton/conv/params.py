"""`ConvParams`: the canonical scalar arguments of a convolution, shared by every stage."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ConvParams:
    """The non-tensor arguments of ``triton::convolution``, one entry per spatial dim.

    Semantics are defined in docs/convolution.md. Instances are hashable, so they key caches and tables.
    """

    stride: tuple[int, ...]
    padding_before: tuple[int, ...]
    padding_after: tuple[int, ...]
    dilation: tuple[int, ...]
    transposed: bool
    output_padding: tuple[int, ...]
    groups: int

    @property
    def spatial_dims(self) -> int:
        return len(self.stride)

    @property
    def symmetric_padding(self) -> bool:
        return self.padding_before == self.padding_after

    def as_op_args(self) -> tuple:
        """Positional arguments 4.. of ``torch.ops.triton.convolution``."""
        return (
            list(self.stride),
            list(self.padding_before),
            list(self.padding_after),
            list(self.dilation),
            self.transposed,
            list(self.output_padding),
            self.groups,
        )
