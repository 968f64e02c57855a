"""Reading one node of the edge program for a family's check: its arguments by schema name, its recorded tensor
value (static sizes and strides only), and the checks of those that several families make (float dtypes, a spec
built from the node and the family's ``supports``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch.fx import Node
from torch.fx.operator_schemas import normalize_function

from ...conv.binding import aten_overload
from ...ops.tensor_meta import TensorMeta
from .base import Verdict

FLOAT_DTYPES = (torch.float32, torch.float16, torch.bfloat16)


def bound_arguments(node: Node) -> dict[str, Any]:
    """The node's arguments by schema name, defaults filled in (trailing defaults are dropped from node.args)."""
    op = aten_overload(node.target)
    bound = normalize_function(op, tuple(node.args), dict(node.kwargs), normalize_to_only_use_kwargs=True)
    if bound is None:
        raise ValueError(f"the arguments of '{node.name}' do not match {op}'s schema")
    # normalize_function names a schema's ``self`` "input"; give the schema's own names back (same order).
    names = [a.name for a in op._schema.arguments]
    return dict(zip(names, bound.kwargs.values(), strict=True))


def tensor_meta(node: object) -> torch.Tensor | None:
    """A node's recorded tensor value (fake), or None when it is not a tensor node."""
    if not isinstance(node, Node):
        return None
    v = node.meta.get("val")
    return v if isinstance(v, torch.Tensor) else None


def static_tensor(what: str, node: object) -> tuple[torch.Tensor | None, str]:
    """(value, "") for a tensor node with static sizes and strides, else (None, why not)."""
    v = tensor_meta(node)
    if v is None:
        return None, f"its {what} is not a tensor with a recorded value"
    try:
        [int(s) for s in v.shape]
        [int(s) for s in v.stride()]
    except Exception:  # a symbolic size or stride
        return None, f"its {what} has symbolic sizes or strides"
    return v, ""


def static_value(what: str, node: object) -> torch.Tensor:
    """`static_tensor`'s value, or ValueError with its reason: what the spec builders raise (a builder's ValueError
    is the node's verdict, `spec_verdict`)."""
    v, why = static_tensor(what, node)
    if v is None:
        raise ValueError(why)
    return v


def static_meta(what: str, node: object) -> TensorMeta:
    """The `TensorMeta` of `static_value`."""
    return TensorMeta.of(static_value(what, node))


def spec_verdict(build: Callable[[], Any], supports: Callable[[Any], Any]) -> Verdict:
    """Yes when ``build()`` makes the family's spec and ``supports(spec)`` takes it; else no with the reason
    (``build`` raises ValueError naming what is malformed; ``supports`` answers with a truthy or falsy verdict
    that carries ``reason``)."""
    try:
        spec = build()
    except ValueError as e:
        return Verdict.no(str(e))
    support = supports(spec)
    return Verdict.yes() if support else Verdict.no(support.reason)


def float_inputs(node: Node, tensors: list[tuple[str, object]]) -> Verdict:
    """Every named tensor has static shapes and one of the float dtypes the kernels take.

    Mixed dtypes are the family's to judge (an elementwise chain computes in fp32 and rounds once, so a 0-dim
    fp32 constant next to an fp16 tensor is fine; ATen's promotion gives the output dtype the node records).
    """
    for what, arg in tensors:
        v, why = static_tensor(what, arg)
        if v is None:
            return Verdict.no(why)
        if v.dtype not in FLOAT_DTYPES:
            return Verdict.no(
                f"its {what} has dtype {v.dtype}; the kernels take float32, float16 and bfloat16"
            )
    return Verdict.yes()


__all__ = [
    "FLOAT_DTYPES",
    "bound_arguments",
    "float_inputs",
    "spec_verdict",
    "static_meta",
    "static_tensor",
    "static_value",
    "tensor_meta",
]
