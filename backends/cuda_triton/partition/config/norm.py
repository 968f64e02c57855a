"""The normalisation family's partition config: inference batch norm, layer norm, group norm, softmax, log_softmax.

`norm_spec` binds a node to the family's spec (`cuda_triton.ops.norm`): the operands by tensor role ("in0",
"weight", "bias", "mean", "var", `norm_operands`), the output strides the graph records for the op's result
(`norm_output`: the ``getitem(.., 0)`` of the multi-output ops). The preprocess builds the same spec from the
operands as the delegate stores them (``metas``).

The multi-output ops (batch, layer and group norm also return saved statistics) are taken only when nothing reads
the statistics (the kernels do not compute them); their one ``getitem(.., 0)`` joins the partition with them. The
parameters (weight, bias, running statistics) may be program constants (owned by the delegate) or tensors the
delegate receives or computes. A batch norm right after a delegated convolution is also taken here: when the
partitioner folds it into the convolution (`cuda_triton._passes.batch_norm_fold`) the fold wins and the
preprocess drafts no norm op for it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

import torch
from torch.fx import Node

from ...conv.binding import aten_overload
from ...ops.norm import batch_norm_spec, group_norm_spec, layer_norm_spec, softmax_spec, supports
from ...ops.norm.spec import NormSpec
from ...ops.tensor_meta import TensorMeta, dtype_name
from .base import OpConfig, PartitionContext, Verdict, first_output
from .nodes import bound_arguments, float_inputs, spec_verdict, static_meta, static_value

aten = torch.ops.aten

BATCH_NORM = aten._native_batch_norm_legit_no_training.default
LAYER_NORM = aten.native_layer_norm.default
GROUP_NORM = aten.native_group_norm.default
SOFTMAX = aten._softmax.default
LOG_SOFTMAX = aten._log_softmax.default
MULTI_OUTPUT = (BATCH_NORM, LAYER_NORM, GROUP_NORM)  # (out, saved mean, saved rstd) read through getitem
NORM_OPS = (*MULTI_OUTPUT, SOFTMAX, LOG_SOFTMAX)

ROLES = ("in0", "weight", "bias", "mean", "var")


def norm_output(node: Node) -> Node:
    """The node that holds the op's result: a multi-output op's one ``getitem(.., 0)``, else the node itself."""
    return first_output(node, MULTI_OUTPUT)


def norm_operands(node: Node) -> dict[str, Node | None]:
    """The tensor nodes behind the spec's roles (None for an absent optional parameter)."""
    op = aten_overload(node.target)
    args = bound_arguments(node)
    if op is BATCH_NORM:
        return {"in0": args["input"], "weight": args.get("weight"), "bias": args.get("bias"),
                "mean": args["running_mean"], "var": args["running_var"]}  # fmt: skip
    if op in (LAYER_NORM, GROUP_NORM):
        return {"in0": args["input"], "weight": args.get("weight"), "bias": args.get("bias")}
    return {"in0": args["self"]}


def _node_metas(node: Node) -> dict[str, TensorMeta | None]:
    return {
        role: None if operand is None else static_meta(role if role != "in0" else "input", operand)
        for role, operand in norm_operands(node).items()
    }


def norm_spec(node: Node, metas: Mapping[str, TensorMeta | None] | None = None) -> NormSpec:
    """The node's spec. ``metas`` (role -> layout) default to the operands' recorded values; the output takes the
    strides the graph records for `norm_output`. ValueError with the reason when the arguments do not fit."""
    m = dict(_node_metas(node) if metas is None else metas)
    x = m["in0"]
    if x is None:
        raise ValueError("it has no input tensor")
    out = static_value("output", norm_output(node))
    spec = _spec(node, m, x, tuple(int(s) for s in out.stride()))
    if dtype_name(out.dtype) != spec.out.dtype:  # the kernels write the input's dtype
        raise ValueError(f"its output dtype {out.dtype} differs from its input's {x.dtype}")
    return spec


def _spec(node: Node, m: dict[str, TensorMeta | None], x: TensorMeta, strides: tuple[int, ...]) -> NormSpec:
    """The family's spec constructor for the node's op, with its scalar arguments."""
    op = aten_overload(node.target)
    args = bound_arguments(node)
    if op is BATCH_NORM:
        mean, var = m["mean"], m["var"]
        if mean is None or var is None:
            raise ValueError("it has no running statistics")
        return batch_norm_spec(x, m["weight"], m["bias"], mean, var, float(args["eps"]), strides)
    if op is LAYER_NORM:
        shape = [int(s) for s in args["normalized_shape"]]
        return layer_norm_spec(x, shape, m["weight"], m["bias"], float(args["eps"]), strides)
    if op is GROUP_NORM:
        n, c, hxw = (int(args[k]) for k in ("N", "C", "HxW"))
        return group_norm_spec(
            x, m["weight"], m["bias"], n, c, hxw, int(args["group"]), float(args["eps"]), strides
        )
    if op in (SOFTMAX, LOG_SOFTMAX):
        if x.rank == 0:  # the blob's rule takes a softmax dim of the input's own dims
            raise ValueError("a softmax of a 0-D tensor is not supported")
        return softmax_spec(x, int(args["dim"]), bool(args["half_to_float"]), op is LOG_SOFTMAX, strides)
    raise ValueError(f"{op} is not a normalisation op of this family")


class NormConfig(OpConfig):
    family = "norm"
    targets: ClassVar[tuple[torch._ops.OpOverload, ...]] = NORM_OPS
    multi_output = MULTI_OUTPUT
    multi_output_computes = "the normalized output only"

    def check_op(self, node: Node, ctx: PartitionContext) -> Verdict:
        try:
            operands = norm_operands(node)
            out = norm_output(node)
        except ValueError as e:
            return Verdict.no(str(e))
        x = operands["in0"]
        if ctx.is_constant(x):
            assert isinstance(x, Node)
            return Verdict.no(
                f"its input is a constant of the program ('{x.name}'); the delegate reads its input as a tensor"
            )
        tensors = [(r if r != "in0" else "input", n) for r, n in operands.items() if n is not None]
        ok = float_inputs(node, [*tensors, ("output", out)])
        if not ok:
            return ok
        return spec_verdict(lambda: norm_spec(node), supports)


__all__ = ["NORM_OPS", "ROLES", "NormConfig", "norm_operands", "norm_output", "norm_spec"]
