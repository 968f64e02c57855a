"""The elementwise family's partition config: unary ops, binary ops with broadcasting and scalars, glu.

`elementwise_spec` binds one node to the family's `ElementwiseSpec` (a chain of one op; the preprocess builds the
same spec): its tensor operands become the chain inputs "in0", "in1" in argument order, Python numbers stay
scalars, and the output takes the dtype and strides the node records (what ExecuTorch plans). Constant operands
(a lifted scalar tensor, a buffer) are fine: the delegate owns them like weights.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

import torch
from torch.fx import Node

from ...conv.binding import aten_overload
from ...ops.elementwise import ChainBuilder, ElementwiseSpec, supports
from ...ops.elementwise.spec import Value
from ...ops.tensor_meta import TensorMeta
from .base import OpConfig, PartitionContext, Verdict
from .nodes import bound_arguments, float_inputs, static_meta

aten = torch.ops.aten

# edge op -> (the family's op name, the schema arguments that are its parameters)
UNARY: dict[torch._ops.OpOverload, tuple[str, tuple[str, ...]]] = {
    aten.relu.default: ("relu", ()),
    aten.sigmoid.default: ("sigmoid", ()),
    aten.tanh.default: ("tanh", ()),
    aten.silu.default: ("silu", ()),
    aten.hardsigmoid.default: ("hardsigmoid", ()),
    aten.hardswish.default: ("hardswish", ()),
    aten.neg.default: ("neg", ()),
    aten.hardtanh.default: ("hardtanh", ("min_val", "max_val")),
    aten.clamp.default: ("clamp", ("min", "max")),
    aten.leaky_relu.default: ("leaky_relu", ("negative_slope",)),
    aten.gelu.default: ("gelu", ("approximate",)),
}
BINARY: dict[torch._ops.OpOverload, str] = {
    aten.add.Tensor: "add",
    aten.add.Scalar: "add",
    aten.sub.Tensor: "sub",
    aten.sub.Scalar: "sub",
    aten.rsub.Scalar: "rsub",
    aten.mul.Tensor: "mul",
    aten.mul.Scalar: "mul",
    aten.div.Tensor: "div",
    aten.div.Scalar: "div",
}
GLU = aten.glu.default


def emit_elementwise(
    b: ChainBuilder,
    node: Node,
    value: Callable[[Node], Value],
    tensor: Callable[[Node], tuple[str, TensorMeta]],
) -> Value:
    """Append ``node``'s op to the chain ``b``; ``value`` gives the chain value of a tensor operand, ``tensor``
    the chain input role and layout of one (glu reads its input's two halves as two views of it)."""
    op = aten_overload(node.target)
    args = bound_arguments(node)

    def operand(x: Any) -> Any:
        if isinstance(x, Node):
            return value(x)
        if isinstance(x, bool) or not isinstance(x, (int, float)):
            raise ValueError(f"operand {x!r} is neither a tensor nor a number")
        return x

    if op in UNARY:
        name, params = UNARY[op]
        return b.op(name, operand(args["self"]), **{p: args.get(p) for p in params if p in args})
    if op in BINARY:
        kw = {"alpha": args["alpha"]} if "alpha" in args else {}
        return b.op(BINARY[op], operand(args["self"]), operand(args["other"]), **kw)
    if op is GLU:
        role, meta = tensor(args["self"])
        first, second = b.glu_halves(role, meta, int(args.get("dim", -1)))
        return b.op("mul", first, b.op("sigmoid", second))
    raise ValueError(f"{op} is not an elementwise op of this family")


def output_meta(node: Node) -> TensorMeta:
    return static_meta("output", node)


def elementwise_spec(node: Node) -> tuple[ElementwiseSpec, list[Node]]:
    """The node's spec and the tensor nodes behind its chain inputs ("in0", "in1", ...); ValueError if malformed."""
    b = ChainBuilder()
    tensors: list[Node] = []

    def tensor(x: Node) -> tuple[str, TensorMeta]:
        meta = static_meta("operand", x)
        if x not in tensors:
            tensors.append(x)
        return f"in{tensors.index(x)}", meta

    result = emit_elementwise(b, node, lambda x: b.input(*tensor(x)), tensor)
    meta = output_meta(node)
    return b.build(result, out_dtype=meta.dtype, out_strides=meta.strides), tensors


class ElementwiseConfig(OpConfig):
    family = "elementwise"
    targets: ClassVar[tuple[torch._ops.OpOverload, ...]] = (*UNARY, *BINARY, GLU)
    # Ops the core ATen decomposition would split (fp16 hardswish becomes an fp32 upcast, four ops and a
    # downcast): one kernel op each, computed in fp32 and rounded once, as the chain computes everything.
    preserved: ClassVar[tuple[torch._ops.OpOverload, ...]] = tuple(
        op for op in (*UNARY, *BINARY, GLU) if torch.Tag.core not in op.tags
    )

    def check_op(self, node: Node, ctx: PartitionContext) -> Verdict:
        try:
            spec, tensors = elementwise_spec(node)
        except ValueError as e:
            return Verdict.no(str(e))
        ok = float_inputs(node, [(f"operand {i}", t) for i, t in enumerate(tensors)] + [("output", node)])
        if not ok:
            return ok
        support = supports(spec)
        return Verdict.yes() if support else Verdict.no(support.reason)


__all__ = [
    "BINARY",
    "GLU",
    "UNARY",
    "ElementwiseConfig",
    "elementwise_spec",
    "emit_elementwise",
    "output_meta",
]
