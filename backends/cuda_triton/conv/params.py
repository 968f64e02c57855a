"""`ConvParams`: the canonical scalar arguments of a convolution, shared by every stage."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any

from .layout import out_shape_and_stride

# The fields that are one value for the whole convolution; every other field has one entry per spatial dim.
_SCALAR_FIELDS = ("transposed", "groups")


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
        """Positional arguments 4.. of ``torch.ops.triton.convolution``: the fields in order, as `as_dict` has them."""
        return tuple(self.as_dict().values())

    def as_dict(self) -> dict[str, Any]:
        """The fields by name, in order, per-dim tuples as lists: the form a tuning table's JSON problem spec and
        the blob's conv record hold."""
        # fields(ConvParams), not fields(self): `binding.ConvArgs` adds its tensor nodes to the same dataclass.
        return {
            f.name: getattr(self, f.name) if f.name in _SCALAR_FIELDS else list(getattr(self, f.name))
            for f in fields(ConvParams)
        }

    @staticmethod
    def from_dict(raw: Mapping[str, Any]) -> ConvParams:
        """The params from a mapping with the field names (`as_dict`'s form, a conv record's fields)."""
        per_dim = {f.name: tuple(raw[f.name]) for f in fields(ConvParams) if f.name not in _SCALAR_FIELDS}
        return ConvParams(**per_dim, transposed=bool(raw["transposed"]), groups=int(raw["groups"]))
