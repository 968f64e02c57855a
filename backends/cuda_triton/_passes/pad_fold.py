"""Folding a zero spatial ``constant_pad_nd`` into the padding of the convolution it feeds.

Plain ``to_edge`` spells asymmetric 'same' and causal padding as such a pad before a symmetric convolution. The
partitioner and the preprocess both call `pad_fold`, so a pad the partitioner put into a partition is exactly one
the preprocess folds.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch.fx import Node

from ..conv.binding import ConvArgs, aten_overload, bind_conv, is_conv_node
from ..conv.params import ConvParams
from ..utils.conv import conv_problem, rule_layout
from ..utils.graph import same_layout, static_ints, tensor_val

aten = torch.ops.aten
PAD_OVERLOADS = (aten.constant_pad_nd.default,)


def is_pad_node(node: object) -> bool:
    return (
        isinstance(node, Node) and node.op == "call_function" and aten_overload(node.target) in PAD_OVERLOADS
    )


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


def folds_into_users(pad: Node, allow_tf32: bool = True) -> bool:
    """Whether every reader of ``pad`` is a convolution that folds it (`pad_fold`; a pad the program outputs has
    the output node as a reader): then the pad costs nothing. Any other pad in a delegate is a pad kernel."""
    if not is_pad_node(pad) or not pad.users:
        return False
    for user in pad.users:
        if not is_conv_node(user):
            return False
        try:
            fold, _ = pad_fold(user, bind_conv(user), allow_tf32)
        except ValueError:
            return False
        if fold is None or fold.pad is not pad:
            return False
    return True


__all__ = [
    "PAD_OVERLOADS",
    "PadFold",
    "folds_into_users",
    "is_pad_node",
    "pad_fold",
    "pad_users_ok",
    "spatial_pad_amounts",
]
