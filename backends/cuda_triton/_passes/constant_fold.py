"""Ops computed from constants alone: the delegate folds them into constants at export instead of running them.

Lowering leaves small constant computations in edge graphs: a Python number becomes a lifted int64 0-dim tensor
and a ``_to_dim_order_copy`` casts it to the float dtype of the op that uses it (``hardswish``'s ``x + 3``), a
weight scaled in ``forward``. `foldable_nodes` finds every op node whose tensor inputs are all program
constants or such nodes; the partitioner lets one join a partition when every user is delegated, and the
preprocess computes it with ATen on the real constants (`evaluate`), so it costs nothing at run time.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

import torch
from torch.fx import Node
from torch.fx.node import map_arg

from ..conv.binding import aten_overload


def _inputs(node: Node) -> list[Node]:
    found: list[Node] = []
    map_arg((node.args, node.kwargs), found.append)
    return found


def foldable_nodes(graph: torch.fx.Graph, constants: set[str]) -> list[Node]:
    """Op nodes computable at export from the program's constants (placeholder names), in graph order."""
    known: set[Node] = {n for n in graph.nodes if n.op == "placeholder" and n.name in constants}
    out: list[Node] = []
    for node in graph.nodes:
        if node.op != "call_function" or node.target is operator.getitem:
            continue
        op = aten_overload(node.target)
        if not isinstance(op, torch._ops.OpOverload) or torch.Tag.nondeterministic_seeded in op.tags:
            continue
        if not isinstance(node.meta.get("val"), torch.Tensor):
            continue  # a single tensor result only
        inputs = _inputs(node)
        if inputs and all(i in known for i in inputs):
            known.add(node)
            out.append(node)
    return out


def evaluate(node: Node, value_of: Callable[[Node], torch.Tensor]) -> torch.Tensor:
    """The node's result computed with ATen on the real tensors ``value_of`` gives for its inputs."""
    op = aten_overload(node.target)
    args: Any = map_arg(node.args, value_of)
    kwargs: Any = map_arg(node.kwargs, value_of)
    with torch.no_grad():
        return op(*args, **kwargs)


__all__ = ["evaluate", "foldable_nodes"]
