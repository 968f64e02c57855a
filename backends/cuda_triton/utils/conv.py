"""A convolution node's problem and the layout rule's output, from the tensors recorded in the graph."""

from __future__ import annotations

import torch

from ..conv.params import ConvParams
from ..conv.problem import ConvProblem


def conv_problem(
    input_val: torch.Tensor,
    weight_val: torch.Tensor,
    has_bias: bool,
    params: ConvParams,
    allow_tf32: bool,
) -> ConvProblem:
    return ConvProblem.from_shapes(
        tuple(int(s) for s in input_val.shape),
        tuple(int(s) for s in input_val.stride()),
        tuple(int(s) for s in weight_val.shape),
        tuple(int(s) for s in weight_val.stride()),
        has_bias,
        params,
        input_val.dtype,
        allow_tf32,
    )


def rule_layout(
    input_val: torch.Tensor, weight_val: torch.Tensor, p: ConvParams
) -> tuple[list[int], list[int]]:
    """Output sizes and strides of the layout rule for these (possibly unbatched) tensors."""
    return p.output_layout(
        [int(s) for s in input_val.shape],
        [int(s) for s in input_val.stride()],
        [int(s) for s in weight_val.shape],
        [int(s) for s in weight_val.stride()],
        input_val.dtype == torch.float64,
    )


__all__ = ["conv_problem", "rule_layout"]
