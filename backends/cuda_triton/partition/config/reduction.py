"""The reduction family's partition config: sum.dim_IntList, mean.dim (global average pooling), amax, amin.

`reduction_node_spec` binds a node to the family's `ReductionSpec` with the output dtype and strides the node
records (what ExecuTorch plans for it). The kernel reads any input layout and accumulates in fp32; it declines
non-float tensors, a ``dtype`` argument outside fp32/fp16/bf16, 0-dim inputs and dim lists ATen would reject.
"""

from __future__ import annotations

from dataclasses import replace
from typing import ClassVar

import torch
from torch.fx import Node

from ...conv.binding import aten_overload
from ...ops.reduction import ReductionSpec, reduction_spec, supports
from ...ops.tensor_meta import TensorMeta, dtype_name
from .base import OpConfig, PartitionContext, Verdict
from .nodes import FLOAT_DTYPES, bound_arguments, float_inputs, spec_verdict, static_value

aten = torch.ops.aten

# edge op -> the reduction family's op name
REDUCTION_OPS: dict[torch._ops.OpOverload, str] = {
    aten.sum.dim_IntList: "sum",
    aten.mean.dim: "mean",
    aten.amax.default: "amax",
    aten.amin.default: "amin",
}


def reduction_node_spec(node: Node) -> ReductionSpec:
    """The node's `ReductionSpec` (output dtype and strides as recorded); ValueError saying why it cannot be."""
    op = aten_overload(node.target)
    if op not in REDUCTION_OPS:
        raise ValueError(f"{op} is not a reduction of this family")
    args = bound_arguments(node)
    x = static_value("input", args["self"])
    if x.dim() == 0:
        raise ValueError("its input is 0-dim (there is no dim to reduce)")
    out = static_value("output", node)
    dtype = args.get("dtype")
    if dtype is not None and dtype not in FLOAT_DTYPES:
        raise ValueError(f"its dtype argument {dtype} is not float32, float16 or bfloat16")
    dims = args.get("dim")
    spec = reduction_spec(
        REDUCTION_OPS[op],
        TensorMeta.of(x),
        None if dims is None else [int(d) for d in dims],
        bool(args.get("keepdim", False)),
        None if dtype is None else dtype_name(dtype),
    )
    recorded = TensorMeta.of(out)
    if recorded.sizes != spec.out.sizes or recorded.dtype != spec.out.dtype:
        raise ValueError(
            f"its recorded output {list(recorded.sizes)} {recorded.dtype} is not the reduction's "
            f"{list(spec.out.sizes)} {spec.out.dtype}"
        )
    # The kernel writes any output strides: take the ones ExecuTorch plans for the node.
    return replace(spec, out=recorded)


class ReductionConfig(OpConfig):
    family = "reduction"
    targets: ClassVar[tuple[torch._ops.OpOverload, ...]] = tuple(REDUCTION_OPS)

    def check_op(self, node: Node, ctx: PartitionContext) -> Verdict:
        args = bound_arguments(node)
        ok = float_inputs(node, [("input", args["self"])])
        if not ok:
            return ok
        return spec_verdict(lambda: reduction_node_spec(node), supports)


__all__ = ["REDUCTION_OPS", "ReductionConfig", "reduction_node_spec"]
