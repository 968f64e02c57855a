"""`ConvProblem`: one concrete convolution (static shapes, dtype, layouts) as templates see it."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from ..kernel.launch import TRITON_PTR_DTYPE
from .layout import is_channels_last_strides
from .params import ConvParams

if TYPE_CHECKING:
    from .epilogue import ConvEpilogue, ConvPrologue

DTYPE_NAMES: dict[torch.dtype, str] = {
    torch.float16: "float16",
    torch.bfloat16: "bfloat16",
    torch.float32: "float32",
    torch.float64: "float64",
}


def layout_name(sizes: tuple[int, ...], strides: tuple[int, ...]) -> str:
    """'channels_last' when the (batched) strides are (N, *spatial, C) ordered, else 'contiguous'.

    1-D tensors (rank 3) are channels-last when C is the fastest dim: strides (L*C, 1, C).
    """
    if len(sizes) == 3:
        return (
            "channels_last" if strides[1] == 1 and sizes[1] > 1 and strides[2] == sizes[1] else "contiguous"
        )
    return "channels_last" if is_channels_last_strides(list(sizes), list(strides)) else "contiguous"


@dataclass(frozen=True)
class ConvProblem:
    """A convolution with every size known: what `supports`, `schedules` and kernels are chosen for.

    Sizes are batched (an unbatched call is a batch of 1). ``input_stride``/``output_stride`` are element
    strides of the batched tensors; the output ones come from the layout rule.
    """

    batch: int
    in_channels: int
    out_channels: int
    in_spatial: tuple[int, ...]
    kernel: tuple[int, ...]
    out_spatial: tuple[int, ...]
    params: ConvParams
    dtype: str
    input_stride: tuple[int, ...]
    weight_stride: tuple[int, ...]
    output_stride: tuple[int, ...]
    has_bias: bool
    allow_tf32: bool = True
    # A fused elementwise chain after the convolution (conv/epilogue.py); only templates that take one
    # (`ConvTemplate.takes_epilogue`) are given a problem with it. It does not change which schedule is fastest
    # (the signature leaves it out).
    epilogue: ConvEpilogue | None = None
    # A fused elementwise chain on the input as it is loaded (conv/epilogue.py), for templates that take one
    # (`ConvTemplate.takes_prologue`); like the epilogue, left out of the signature.
    prologue: ConvPrologue | None = None

    # -- construction ---------------------------------------------------------------------------------
    @staticmethod
    def from_shapes(
        input_size: tuple[int, ...],
        input_stride: tuple[int, ...],
        weight_size: tuple[int, ...],
        weight_stride: tuple[int, ...],
        has_bias: bool,
        params: ConvParams,
        dtype: torch.dtype | str,
        allow_tf32: bool | None = None,
    ) -> ConvProblem:
        dtype_name = dtype if isinstance(dtype, str) else DTYPE_NAMES[dtype]
        spatial = len(weight_size) - 2
        if len(input_size) == spatial + 1:  # unbatched: view as a batch of one
            input_stride = (input_size[0] * input_stride[0], *input_stride)
            input_size = (1, *input_size)
        out_size, out_stride = params.output_layout(
            input_size, input_stride, weight_size, weight_stride, dtype_name == "float64"
        )
        if allow_tf32 is None:
            allow_tf32 = torch.backends.cudnn.allow_tf32
        return ConvProblem(
            batch=input_size[0],
            in_channels=input_size[1],
            out_channels=out_size[1],
            in_spatial=tuple(input_size[2:]),
            kernel=tuple(weight_size[2:]),
            out_spatial=tuple(out_size[2:]),
            params=params,
            dtype=dtype_name,
            input_stride=tuple(input_stride),
            weight_stride=tuple(weight_stride),
            output_stride=tuple(out_stride),
            has_bias=has_bias,
            allow_tf32=bool(allow_tf32),
        )

    @staticmethod
    def from_tensors(
        input: torch.Tensor,
        weight: torch.Tensor,
        bias: torch.Tensor | None,
        params: ConvParams,
        allow_tf32: bool | None = None,
    ) -> ConvProblem:
        return ConvProblem.from_shapes(
            tuple(input.shape),
            tuple(input.stride()),
            tuple(weight.shape),
            tuple(weight.stride()),
            bias is not None,
            params,
            input.dtype,
            allow_tf32,
        )

    # -- derived quantities ---------------------------------------------------------------------------
    @property
    def spatial_dims(self) -> int:
        return len(self.kernel)

    @property
    def groups(self) -> int:
        return self.params.groups

    @property
    def transposed(self) -> bool:
        return self.params.transposed

    @property
    def torch_dtype(self) -> torch.dtype:
        return getattr(torch, self.dtype)

    @property
    def ptr_dtype(self) -> str:
        """The Triton pointer type of the input, weight, bias and output (a `TensorArg`'s dtype)."""
        return TRITON_PTR_DTYPE[self.dtype]

    @property
    def input_size(self) -> tuple[int, ...]:
        return (self.batch, self.in_channels, *self.in_spatial)

    @property
    def weight_size(self) -> tuple[int, ...]:
        g = self.groups
        if self.transposed:
            return (self.in_channels, self.out_channels // g, *self.kernel)
        return (self.out_channels, self.in_channels // g, *self.kernel)

    @property
    def output_size(self) -> tuple[int, ...]:
        return (self.batch, self.out_channels, *self.out_spatial)

    @property
    def input_layout(self) -> str:
        return layout_name(self.input_size, self.input_stride)

    @property
    def output_layout(self) -> str:
        return layout_name(self.output_size, self.output_stride)

    @property
    def is_depthwise(self) -> bool:
        return not self.transposed and self.groups == self.in_channels and self.groups > 1

    @property
    def element_size(self) -> int:
        return {"float16": 2, "bfloat16": 2, "float32": 4, "float64": 8}[self.dtype]

    def flops(self) -> int:
        """Multiply-adds counted as 2, over the taps that touch real data in a transposed conv's input."""
        k = math.prod(self.kernel)
        if self.transposed:
            per_in = (self.out_channels // self.groups) * k
            return 2 * self.batch * self.in_channels * math.prod(self.in_spatial) * per_in
        per_out = (self.in_channels // self.groups) * k
        return 2 * self.batch * self.out_channels * math.prod(self.out_spatial) * per_out

    def min_bytes(self) -> int:
        """Bytes a perfect kernel must move: read input and weight once, write output once."""
        elems = (
            math.prod(self.input_size)
            + math.prod(self.weight_size)
            + math.prod(self.output_size)
            + (self.out_channels if self.has_bias else 0)
        )
        return elems * self.element_size

    def signature(self) -> str:
        """A stable text key for tuning tables: every field that can change the best schedule."""
        p = self.params
        fields = [
            f"n{self.batch}",
            f"c{self.in_channels}",
            f"k{self.out_channels}",
            "in" + "x".join(map(str, self.in_spatial)),
            "w" + "x".join(map(str, self.kernel)),
            "s" + "x".join(map(str, p.stride)),
            "pb" + "x".join(map(str, p.padding_before)),
            "pa" + "x".join(map(str, p.padding_after)),
            "d" + "x".join(map(str, p.dilation)),
            f"g{p.groups}",
        ]
        if p.transposed:
            fields.append("t" + "x".join(map(str, p.output_padding)))
        fields.append("b" if self.has_bias else "nb")
        return "_".join(fields)
