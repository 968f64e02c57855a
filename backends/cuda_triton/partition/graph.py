"""Graph facts the partitioner and the preprocess must agree on: pad absorption and owned constants.

Both sides call these functions, so a pad the partitioner put into a partition is exactly a pad the preprocess
folds, and a weight the partitioner relied on being a constant is one the preprocess finds in the state dict.
Nothing here imports executorch (the ExportedProgram type comes from torch).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch.export import ExportedProgram
from torch.fx import Node

from ..conv.binding import ConvArgs, aten_overload
from ..conv.layout import out_shape_and_stride
from ..conv.params import ConvParams
from ..conv.problem import ConvProblem

aten = torch.ops.aten
PAD_OVERLOADS = (aten.constant_pad_nd.default,)


def is_pad_node(node: object) -> bool:
    return (
        isinstance(node, Node) and node.op == "call_function" and aten_overload(node.target) in PAD_OVERLOADS
    )


def tensor_val(node: Node) -> torch.Tensor:
    v = node.meta.get("val")
    if not isinstance(v, torch.Tensor):
        raise ValueError(f"node '{node.name}' has no tensor meta['val']")
    return v


def static_ints(xs: object) -> tuple[int, ...] | None:
    try:
        return tuple(int(x) for x in xs)  # type: ignore[union-attr]
    except Exception:  # symbolic
        return None


@dataclass(frozen=True)
class PadFold:
    """A zero ``constant_pad_nd`` folded into a convolution: the tensor before the pad and the new padding."""

    pad: Node
    source: Node
    params: ConvParams


def spatial_pad_amounts(pad: Node, spatial_dims: int) -> tuple[tuple[int, ...], tuple[int, ...]] | None:
    """(before, after) per spatial dim when ``pad`` is a zero, non-negative pad of the last ``spatial_dims``
    dims only; None otherwise. ``constant_pad_nd``'s list names the last dim first: [last_lo, last_hi, ...]."""
    if not is_pad_node(pad):
        return None
    args = list(pad.args) + [None] * 3
    amounts = args[1] if args[1] is not None else pad.kwargs.get("pad")
    value = args[2] if args[2] is not None else pad.kwargs.get("value", 0)
    if value is None:
        value = 0
    try:
        if float(value) != 0.0:
            return None
    except Exception:
        return None
    amounts = static_ints(amounts or [])
    if amounts is None or len(amounts) % 2 or any(a < 0 for a in amounts):
        return None
    if any(a != 0 for a in amounts[2 * spatial_dims :]):
        return None  # pads a channel or batch dim
    before = [0] * spatial_dims
    after = [0] * spatial_dims
    for j in range(min(len(amounts) // 2, spatial_dims)):
        dim = spatial_dims - 1 - j  # j-th pair pads the j-th dim from the end
        before[dim] = amounts[2 * j]
        after[dim] = amounts[2 * j + 1]
    return tuple(before), tuple(after)


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
    return out_shape_and_stride(
        [int(s) for s in input_val.shape],
        [int(s) for s in input_val.stride()],
        [int(s) for s in weight_val.shape],
        [int(s) for s in weight_val.stride()],
        list(p.stride),
        list(p.padding_before),
        list(p.padding_after),
        list(p.dilation),
        p.transposed,
        list(p.output_padding),
        p.groups,
        input_val.dtype == torch.float64,
    )


def same_layout(a_sizes, a_strides, b_sizes, b_strides) -> bool:
    """Equal sizes, and equal strides on every dim of size > 1 (the stride of a size-1 dim is never used)."""
    if list(a_sizes) != list(b_sizes):
        return False
    return all(int(s) == 1 or int(x) == int(y) for s, x, y in zip(a_sizes, a_strides, b_strides, strict=True))


def pad_fold(conv: Node, args: ConvArgs, allow_tf32: bool = True) -> tuple[PadFold | None, str]:
    """Whether ``conv``'s input is a zero spatial pad that can be folded into padding_before/after.

    Returns (fold, "") when it can; (None, why not) otherwise ("" when the input is no pad at all). The fold
    must keep the node's recorded output layout (the layout rule on the un-padded input) and be supported by a
    registered template. Whether the pad may be removed also needs all its users to fold it: see `pad_users_ok`.
    """
    pad = args.input
    if not is_pad_node(pad):
        return None, ""
    if args.transposed:
        return None, "padding before a transposed convolution is not a crop, so it is not folded"
    amounts = spatial_pad_amounts(pad, args.spatial_dims)
    if amounts is None:
        return None, "the pad is not a zero, non-negative pad of spatial dims only"
    source = pad.args[0]
    if not isinstance(source, Node):
        return None, "the pad's input is not a graph node"
    before, after = amounts
    p = args.params
    params = ConvParams(
        p.stride,
        tuple(a + b for a, b in zip(p.padding_before, before, strict=True)),
        tuple(a + b for a, b in zip(p.padding_after, after, strict=True)),
        p.dilation,
        p.transposed,
        p.output_padding,
        p.groups,
    )
    try:
        x = tensor_val(source)
        w = tensor_val(args.weight)
        out = tensor_val(conv)
    except ValueError as e:
        return None, str(e)
    if static_ints(x.shape) is None or static_ints(x.stride()) is None:
        return None, "the pad's input has symbolic shapes"
    sizes, strides = rule_layout(x, w, params)
    if not same_layout(sizes, strides, out.shape, out.stride()):
        return None, (
            f"folding the pad changes the output layout (rule gives sizes {sizes} strides {strides}, the node "
            f"records sizes {list(out.shape)} strides {list(out.stride())})"
        )
    from ..conv.templates import support_report

    problem = conv_problem(x, w, args.bias is not None, params, allow_tf32)
    verdicts = support_report(problem)
    if not any(v for _, v in verdicts):
        why = "; ".join(f"{t.name}: {v.reason}" for t, v in verdicts)
        return None, f"no template supports the folded convolution ({why})"
    return PadFold(pad, source, params), ""


def pad_users_ok(pad: Node, folds: dict[Node, PadFold]) -> bool:
    """A pad can leave the CPU only if every user is a delegated convolution that folds it."""
    return all(u in folds and folds[u].pad is pad for u in pad.users)


# ---- constants ----------------------------------------------------------------------------------------------
def constant_names(ep: ExportedProgram) -> set[str]:
    """Placeholder names of the program's parameters, non-mutated buffers and lifted tensor constants."""
    sig = ep.graph_signature
    mutated = set(sig.buffers_to_mutate.values())
    names = set(sig.inputs_to_parameters)
    names |= {n for n, b in sig.inputs_to_buffers.items() if b not in mutated}
    names |= set(sig.inputs_to_lifted_tensor_constants)
    return names


def constant_tensor(ep: ExportedProgram, node: Node) -> torch.Tensor:
    """The real tensor behind a constant placeholder of ``ep`` (parameter, buffer or lifted constant)."""
    sig = ep.graph_signature
    if node.name in sig.inputs_to_parameters:
        fqn = sig.inputs_to_parameters[node.name]
        return ep.state_dict[fqn]
    if node.name in sig.inputs_to_buffers:
        fqn = sig.inputs_to_buffers[node.name]
        return ep.state_dict[fqn] if fqn in ep.state_dict else ep.constants[fqn]
    if node.name in sig.inputs_to_lifted_tensor_constants:
        return ep.constants[sig.inputs_to_lifted_tensor_constants[node.name]]
    raise KeyError(f"placeholder '{node.name}' is not a constant of the program")


__all__ = [
    "PAD_OVERLOADS",
    "PadFold",
    "constant_names",
    "constant_tensor",
    "conv_problem",
    "is_pad_node",
    "pad_fold",
    "pad_users_ok",
    "rule_layout",
    "same_layout",
    "spatial_pad_amounts",
    "static_ints",
    "tensor_val",
]
