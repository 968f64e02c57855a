"""`ConvParams`: the canonical scalar arguments of a convolution, shared by every stage."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .layout import out_shape_and_stride


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

    def output_layout(
        self,
        input_size: Sequence[int],
        input_stride: Sequence[int],
        weight_size: Sequence[int],
        weight_stride: Sequence[int],
        is_float64: bool,
    ) -> tuple[list[int], list[int]]:
        """The layout rule's output sizes and strides (`layout.out_shape_and_stride`) for these tensors."""
        return out_shape_and_stride(
            list(input_size),
            list(input_stride),
            list(weight_size),
            list(weight_stride),
            *self.as_op_args(),
            is_float64,
        )

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
