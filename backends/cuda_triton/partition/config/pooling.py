"""The pooling family's partition config: max pools (values only), avg pools and adaptive avg pools.

`pool_spec` binds a node to the family's `PoolSpec` with the output strides the node records. A max pool is
taken only when nothing reads its indices (the kernel does not compute them); its ``getitem(.., 0)`` joins the
partition with it.
"""

from __future__ import annotations

from dataclasses import replace
from typing import ClassVar

import torch
from torch.fx import Node

from ...conv.binding import aten_overload
from ...ops.pooling import PoolSpec
from .base import OpConfig, PartitionContext, Verdict, first_output
from .nodes import bound_arguments, float_inputs, static_meta, static_value

aten = torch.ops.aten

MAX_POOLS = {aten.max_pool2d_with_indices.default: 2, aten.max_pool3d_with_indices.default: 3}
AVG_POOLS = {aten.avg_pool2d.default: 2, aten.avg_pool3d.default: 3}
ADAPTIVE_AVG_POOLS = {aten._adaptive_avg_pool2d.default: 2, aten._adaptive_avg_pool3d.default: 3}


def pool_output(node: Node) -> Node:
    """The node that holds the pooled values: a max pool's ``getitem(.., 0)``, else the node itself."""
    return first_output(node, MAX_POOLS)


def pool_spec(node: Node) -> PoolSpec:
    """The node's `PoolSpec` (output strides as recorded); ValueError naming the argument if malformed."""
    op = aten_overload(node.target)
    args = bound_arguments(node)
    meta = static_meta("input", args["input"] if "input" in args else args["self"])
    if op in MAX_POOLS:
        spec = PoolSpec.max_pool(
            meta, MAX_POOLS[op], args["kernel_size"], args.get("stride", ()), args.get("padding", 0),
            args.get("dilation", 1), args.get("ceil_mode", False),
        )  # fmt: skip
    elif op in AVG_POOLS:
        spec = PoolSpec.avg_pool(
            meta, AVG_POOLS[op], args["kernel_size"], args.get("stride", ()), args.get("padding", 0),
            args.get("ceil_mode", False), args.get("count_include_pad", True), args.get("divisor_override"),
        )  # fmt: skip
    elif op in ADAPTIVE_AVG_POOLS:
        spec = PoolSpec.adaptive_avg_pool(meta, [int(s) for s in args["output_size"]])
    else:
        raise ValueError(f"{op} is not a pooling op of this family")
    out = static_value("output", pool_output(node))
    return replace(spec, out_strides=tuple(int(s) for s in out.stride()))


class PoolingConfig(OpConfig):
    family = "pooling"
    targets: ClassVar[tuple[torch._ops.OpOverload, ...]] = (*MAX_POOLS, *AVG_POOLS, *ADAPTIVE_AVG_POOLS)
    multi_output = tuple(MAX_POOLS)
    multi_output_computes = "the values, not the indices"

    def check_op(self, node: Node, ctx: PartitionContext) -> Verdict:
        try:
            spec = pool_spec(node)
        except ValueError as e:
            return Verdict.no(str(e))
        args = bound_arguments(node)
        ok = float_inputs(node, [("input", args.get("input", args.get("self")))])
        if not ok:
            return ok
        support = spec.supports()
        return Verdict.yes() if support else Verdict.no(support.reason)


__all__ = ["ADAPTIVE_AVG_POOLS", "AVG_POOLS", "MAX_POOLS", "PoolingConfig", "pool_output", "pool_spec"]
