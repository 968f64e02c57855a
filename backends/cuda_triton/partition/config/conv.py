"""The convolution family's partition config: the routing planner's verdict plus what the delegate must own.

Every convolution overload of either lowering API is taken when the planner (`cuda_triton.conv.routing.plan`,
planning for a CUDA target) finds a template that supports it - ROUTED, REQUIRED or DECLINED alike: inside an
ExecuTorch program the alternative to the delegate is the CPU, not cuDNN, so "a platform convolution would be
faster" is no reason to leave it out. The weight and bias must be constants of the program (the delegate owns
them), and the input must not be one (the delegate reads its inputs from the program's tensors).
"""

from __future__ import annotations

from typing import ClassVar

import torch
from torch.fx import Node

from ...conv.binding import CONV_OVERLOADS, is_conv_node
from ...conv.routing import Decision, RoutingPlan, plan
from .base import OpConfig, PartitionContext, Verdict

aten = torch.ops.aten

# Overloads kept from decomposition (with the partitioner's filter): they carry what the core decomposition loses
# (string padding, the transposed overloads, unbatched forms). convolution.default is not in the default
# decomposition table (listing it would be a no-op) and _convolution/conv_tbc never appear by default.
PRESERVED_OVERLOADS: tuple[torch._ops.OpOverload, ...] = (
    aten.conv1d.default,
    aten.conv2d.default,
    aten.conv3d.default,
    aten.conv1d.padding,
    aten.conv2d.padding,
    aten.conv3d.padding,
    aten.conv_transpose1d.default,
    aten.conv_transpose2d.input,
    aten.conv_transpose3d.input,
)

TAKEN = (Decision.ROUTED, Decision.REQUIRED, Decision.DECLINED)


class ConvConfig(OpConfig):
    family = "conv"
    targets: ClassVar[tuple[torch._ops.OpOverload, ...]] = tuple(CONV_OVERLOADS)
    preserved = PRESERVED_OVERLOADS

    def takes(self, node: Node) -> bool:
        return is_conv_node(node)

    def plan(self, node: Node, ctx: PartitionContext) -> tuple[Verdict, RoutingPlan]:
        """The verdict and the planner's full answer (the partitioner reports its template and decision)."""
        p = plan(
            node,
            target_device=ctx.options.target_device or "cuda",
            strict=False,
            allow_tf32=ctx.options.allow_tf32,
        )
        if p.decision not in TAKEN:
            return Verdict.no(p.reason), p
        assert p.args is not None
        x = p.args.input
        if ctx.is_constant(x):
            return Verdict.no(
                f"its input is a constant of the program ('{x.name}'); the delegate reads its inputs from the "
                "program's tensors"
            ), p
        for what, arg in (("weight", p.args.weight), ("bias", p.args.bias)):
            if arg is not None and not ctx.is_constant(arg):
                return Verdict.no(
                    f"its {what} is computed in the graph (node '{arg.name}'), but the delegate owns only "
                    "constant weights (parameters, buffers or lifted constants)"
                ), p
        return Verdict.yes(p.reason), p

    def check_op(self, node: Node, ctx: PartitionContext) -> Verdict:
        return self.plan(node, ctx)[0]


__all__ = ["PRESERVED_OVERLOADS", "ConvConfig"]
