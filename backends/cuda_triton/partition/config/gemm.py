"""The GEMM family's partition config: addmm, mm, bmm and linear.

`gemm_spec` binds a node to the family's `GemmSpec` (TF32 as the options allow, the output strides the node
records); the preprocess builds the same spec from the operands as the delegate stores them (``metas``). The
second matrix and the bias may be program constants (a linear layer's weight, owned by the delegate) or tensors;
the first matrix is a tensor the delegate receives or computes, of 2 or 3 dims (what the blob's GEMM record
takes).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

import torch
from torch.fx import Node

from ...conv.binding import aten_overload
from ...ops.gemm import GemmSpec
from ...ops.tensor_meta import TensorMeta
from .base import OpConfig, PartitionContext, Verdict
from .nodes import bound_arguments, float_inputs, static_meta, static_value, tensor_meta

aten = torch.ops.aten
GEMM_OPS = (aten.addmm.default, aten.mm.default, aten.bmm.default, aten.linear.default)


def gemm_operands(node: Node) -> list[Node | None]:
    """The tensor nodes behind the spec's roles "in0", "in1", "in2" (argument order; None for an absent bias)."""
    op = aten_overload(node.target)
    args = bound_arguments(node)
    if op is aten.addmm.default:
        return [args["self"], args["mat1"], args["mat2"]]
    if op is aten.linear.default:
        return [args["input"], args["weight"], args.get("bias")]
    return [args["self"], args["mat2"]]


def first_matrix(node: Node) -> Node:
    """The operand the GEMM record reads as its ``a`` (a linear's input, an addmm's ``mat1``)."""
    operands = gemm_operands(node)
    a = operands[1] if aten_overload(node.target) is aten.addmm.default else operands[0]
    assert a is not None
    return a


def _node_metas(node: Node) -> list[TensorMeta | None]:
    operands = gemm_operands(node)
    return [None if x is None else static_meta(f"operand {i}", x) for i, x in enumerate(operands)]


def gemm_spec(node: Node, allow_tf32: bool, metas: Sequence[TensorMeta | None] | None = None) -> GemmSpec:
    """The node's `GemmSpec`; ValueError naming the operand when one is not a static tensor.

    ``metas`` (in `gemm_operands` order) default to the operands' recorded values.
    """
    op = aten_overload(node.target)
    args = bound_arguments(node)
    metas = list(_node_metas(node) if metas is None else metas)
    if op is aten.addmm.default:
        bias, a, w = metas
        assert bias is not None and a is not None and w is not None
        spec = GemmSpec.addmm(bias, a, w, args.get("beta", 1.0), args.get("alpha", 1.0), allow_tf32)
    elif op is aten.linear.default:
        x, w, bias = metas
        assert x is not None and w is not None
        spec = GemmSpec.linear(x, w, bias, allow_tf32)
    elif op in (aten.mm.default, aten.bmm.default):
        a, w = metas
        assert a is not None and w is not None
        spec = (GemmSpec.mm if op is aten.mm.default else GemmSpec.bmm)(a, w, allow_tf32)
    else:
        raise ValueError(f"{op} is not a GEMM op of this family")
    out = static_value("output", node)
    return spec.with_out_strides(tuple(int(s) for s in out.stride()))


class GemmConfig(OpConfig):
    family = "gemm"
    targets: ClassVar[tuple[torch._ops.OpOverload, ...]] = GEMM_OPS
    preserved = (aten.linear.default,)

    def check_op(self, node: Node, ctx: PartitionContext) -> Verdict:
        operands = [(f"operand {i}", n) for i, n in enumerate(gemm_operands(node)) if n is not None]
        ok = float_inputs(node, [*operands, ("output", node)])
        if not ok:
            return ok
        a = first_matrix(node)
        if ctx.is_constant(a):
            return Verdict.no(
                f"its first matrix is a constant of the program ('{a.name}'); the delegate reads it as a tensor"
            )
        v = tensor_meta(a)
        assert v is not None  # float_inputs checked every operand
        if (rank := v.dim()) not in (2, 3):
            return Verdict.no(f"its first matrix has {rank} dims; the delegate's GEMM takes 2 or 3")
        try:
            spec = gemm_spec(node, ctx.options.allow_tf32)
        except ValueError as e:
            return Verdict.no(str(e))
        support = spec.supports()
        return Verdict.yes() if support else Verdict.no(support.reason)


__all__ = ["GEMM_OPS", "GemmConfig", "first_matrix", "gemm_operands", "gemm_spec"]
