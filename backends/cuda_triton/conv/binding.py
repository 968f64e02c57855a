"""`bind_conv`: every ATen convolution overload, of either lowering API, as one canonical `ConvArgs`.

Handled targets, as ATen ``OpOverload``s or as ExecuTorch edge ops wrapping them (recognised by their ``_op``
attribute, so this module never imports executorch):

* ``aten.convolution.default`` (what plain ``to_edge`` leaves), ``aten._convolution.default`` / ``.deprecated``
* ``aten.conv{1,2,3}d.default`` and ``aten.conv{1,2,3}d.padding`` (string padding 'same'/'valid')
* ``aten.conv_transpose1d.default`` and ``aten.conv_transpose{2,3}d.input`` (groups before dilation)
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

import torch
from torch.fx import Node
from torch.fx.experimental.symbolic_shapes import is_concrete_int
from torch.fx.operator_schemas import normalize_function

from .params import ConvParams

aten = torch.ops.aten


class ConvBindingError(ValueError):
    """A node is not a convolution, or its arguments are ones ATen would reject."""


@dataclass(frozen=True, kw_only=True)
class ConvArgs(ConvParams):
    """Canonical arguments of one convolution node (docs/convolution.md defines their meaning): its scalar
    `ConvParams` and the tensor nodes it reads."""

    input: Node
    weight: Node
    bias: Node | None
    unbatched: bool

    @property
    def params(self) -> ConvParams:
        """The scalar arguments alone (hashable without the nodes, so they key caches and tables)."""
        return ConvParams(**{f.name: getattr(self, f.name) for f in fields(ConvParams)})

    def op_args(self) -> tuple:
        """Arguments of ``torch.ops.triton.convolution`` after (input, weight, bias)."""
        return self.as_op_args()


# Overload name -> (family, spatial dims or None when taken from the weight).
_FORWARD_FIXED = {
    aten.conv1d.default: 1,
    aten.conv2d.default: 2,
    aten.conv3d.default: 3,
}
_FORWARD_STRING = {
    aten.conv1d.padding: 1,
    aten.conv2d.padding: 2,
    aten.conv3d.padding: 3,
}
_TRANSPOSED = {
    aten.conv_transpose1d.default: 1,
    aten.conv_transpose2d.input: 2,
    aten.conv_transpose3d.input: 3,
}
_GENERAL = (aten.convolution.default, aten._convolution.default, aten._convolution.deprecated)

CONV_OVERLOADS: tuple[torch._ops.OpOverload, ...] = (
    *_GENERAL,
    *_FORWARD_FIXED,
    *_FORWARD_STRING,
    *_TRANSPOSED,
)


def aten_overload(target: Any) -> Any:
    """The ATen OpOverload behind ``target`` (an edge op's ``_op``), or ``target`` itself."""
    inner = getattr(target, "_op", None)
    if isinstance(inner, torch._ops.OpOverload):
        return inner
    return target


def is_conv_node(node: Node) -> bool:
    return node.op == "call_function" and aten_overload(node.target) in CONV_OVERLOADS


def _describe(node: Node) -> str:
    return f"node '{node.name}' ({aten_overload(node.target)})"


def _val(node: Node, x: Any, what: str) -> Any:
    if not isinstance(x, Node):
        raise ConvBindingError(f"{_describe(node)}: {what} is {type(x).__name__}, expected a graph node")
    v = x.meta.get("val")
    if v is None:
        v = x.meta.get("example_value")
    if v is None and x.op == "get_attr":  # an unlifted graph: the tensor itself
        v = _attr(x)
    tm = x.meta.get("tensor_meta")
    if v is None and tm is not None and hasattr(tm, "shape") and hasattr(tm, "stride"):  # ShapeProp
        v = torch.empty_strided(tuple(tm.shape), tuple(tm.stride), dtype=tm.dtype, device="meta")
    if not isinstance(v, torch.Tensor):
        raise ConvBindingError(f"{_describe(node)}: {what} node '{x.name}' has no tensor meta['val']")
    return v


def _attr(x: Node) -> Any:
    obj: Any = x.graph.owning_module
    for part in str(x.target).split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            return None
    return obj


def _int_list(node: Node, name: str, v: Any, n: int, *, allow_empty: bool = False) -> tuple[int, ...]:
    if isinstance(v, (int, torch.SymInt)):
        v = [v]
    v = list(v)
    if not v and allow_empty:
        return (0,) * n
    if len(v) == 1 and n > 1:
        v = v * n
    if len(v) != n:
        raise ConvBindingError(
            f"{_describe(node)}: argument '{name}' has {len(v)} entries, expected 1 or {n} for a {n}-D convolution"
        )
    out = []
    for x in v:
        if not isinstance(x, int):
            try:
                x = int(x)
            except Exception as e:  # symbolic values that cannot be specialised
                raise ConvBindingError(f"{_describe(node)}: argument '{name}' is symbolic ({x})") from e
        out.append(x)
    return tuple(out)


def _string_padding(
    node: Node, padding: str, kernel: tuple[int, ...], stride: tuple[int, ...], dilation: tuple[int, ...]
) -> tuple[tuple[int, ...], tuple[int, ...]]:
    n = len(kernel)
    if padding == "valid":
        return (0,) * n, (0,) * n
    if padding == "same":
        if any(s != 1 for s in stride):
            raise ConvBindingError(
                f"{_describe(node)}: argument 'padding': padding='same' is not supported for strided "
                f"convolutions (stride={list(stride)})"
            )
        total = [d * (k - 1) for k, d in zip(kernel, dilation, strict=True)]
        before = tuple(t // 2 for t in total)
        return before, tuple(t - b for t, b in zip(total, before, strict=True))
    raise ConvBindingError(
        f"{_describe(node)}: argument 'padding' is {padding!r}; string padding must be 'same' or 'valid'"
    )


def bind_conv(node: Node) -> ConvArgs:
    """Canonical, validated arguments of a convolution node; raises `ConvBindingError` otherwise."""
    if not isinstance(node, Node) or node.op != "call_function":
        raise ConvBindingError(f"{node!r} is not a call_function node, so not a convolution")
    op = aten_overload(node.target)
    if op not in CONV_OVERLOADS:
        raise ConvBindingError(f"node '{node.name}' ({node.target}) is not a convolution")
    try:
        normalized = normalize_function(
            op, tuple(node.args), dict(node.kwargs), normalize_to_only_use_kwargs=True
        )
    except Exception as e:
        raise ConvBindingError(f"{_describe(node)}: arguments do not match the schema: {e}") from e
    if normalized is None:
        raise ConvBindingError(f"{_describe(node)}: arguments do not match the schema")
    kw = normalized.kwargs

    x_node, w_node, b_node = kw["input"], kw["weight"], kw.get("bias")
    x = _val(node, x_node, "input")
    w = _val(node, w_node, "weight")
    b = _val(node, b_node, "bias") if b_node is not None else None

    if w.dim() not in (3, 4, 5):
        raise ConvBindingError(
            f"{_describe(node)}: argument 'weight' has rank {w.dim()}; expected 3, 4 or 5 (1-D, 2-D or 3-D conv)"
        )
    n = w.dim() - 2
    expected = _FORWARD_FIXED.get(op) or _FORWARD_STRING.get(op) or _TRANSPOSED.get(op)
    if expected is not None and expected != n:
        raise ConvBindingError(
            f"{_describe(node)}: argument 'weight' has rank {w.dim()}, but {op} is a {expected}-D convolution"
        )

    if op in _GENERAL:
        transposed = bool(kw["transposed"])
        stride = _int_list(node, "stride", kw["stride"], n)
        padding = _int_list(node, "padding", kw["padding"], n)
        dilation = _int_list(node, "dilation", kw["dilation"], n)
        output_padding = _int_list(node, "output_padding", kw["output_padding"], n, allow_empty=True)
        groups = int(kw["groups"])
        padding_before = padding_after = padding
    elif op in _TRANSPOSED:
        transposed = True
        stride = _int_list(node, "stride", kw["stride"], n)
        padding = kw["padding"]
        if isinstance(padding, str):
            raise ConvBindingError(
                f"{_describe(node)}: argument 'padding': string padding is not supported for transposed convolutions"
            )
        padding_before = padding_after = _int_list(node, "padding", padding, n)
        dilation = _int_list(node, "dilation", kw["dilation"], n)
        output_padding = _int_list(node, "output_padding", kw["output_padding"], n)
        groups = int(kw["groups"])
    else:
        transposed = False
        stride = _int_list(node, "stride", kw["stride"], n)
        dilation = _int_list(node, "dilation", kw["dilation"], n)
        groups = int(kw["groups"])
        output_padding = (0,) * n
        padding = kw["padding"]
        if isinstance(padding, str):
            if op not in _FORWARD_STRING:
                raise ConvBindingError(f"{_describe(node)}: argument 'padding' is a string for {op}")
            padding_before, padding_after = _string_padding(
                node, padding, tuple(w.shape[2:]), stride, dilation
            )
        else:
            padding_before = padding_after = _int_list(node, "padding", padding, n)

    # ---- validation: everything ATen would reject -------------------------------------------------------
    if x.dim() not in (n + 1, n + 2):
        raise ConvBindingError(
            f"{_describe(node)}: argument 'input' has rank {x.dim()}; a {n}-D convolution takes rank {n + 2} "
            f"(batched) or {n + 1} (unbatched)"
        )
    unbatched = x.dim() == n + 1
    if unbatched and op in _GENERAL:
        raise ConvBindingError(
            f"{_describe(node)}: argument 'input' is unbatched (rank {x.dim()}), which {op} does not accept"
        )
    if groups <= 0:
        raise ConvBindingError(f"{_describe(node)}: argument 'groups' must be positive, got {groups}")
    if any(s <= 0 for s in stride):
        raise ConvBindingError(f"{_describe(node)}: argument 'stride' must be positive, got {list(stride)}")
    if any(d <= 0 for d in dilation):
        raise ConvBindingError(
            f"{_describe(node)}: argument 'dilation' must be positive, got {list(dilation)}"
        )
    if any(p < 0 for p in padding_before + padding_after):
        raise ConvBindingError(
            f"{_describe(node)}: argument 'padding' must be non-negative, got "
            f"before={list(padding_before)} after={list(padding_after)}"
        )
    if any(o < 0 for o in output_padding):
        raise ConvBindingError(
            f"{_describe(node)}: argument 'output_padding' must be non-negative, got {list(output_padding)}"
        )
    if transposed:
        for i in range(n):
            if output_padding[i] >= max(stride[i], dilation[i]):
                raise ConvBindingError(
                    f"{_describe(node)}: argument 'output_padding' {list(output_padding)} must be smaller than "
                    f"max(stride, dilation) = {[max(s, d) for s, d in zip(stride, dilation, strict=True)]} per dim"
                )

    args = ConvArgs(
        input=x_node,
        weight=w_node,
        bias=b_node,
        stride=stride,
        padding_before=tuple(padding_before),
        padding_after=tuple(padding_after),
        dilation=dilation,
        transposed=transposed,
        output_padding=tuple(output_padding),
        groups=groups,
        unbatched=unbatched,
    )
    if not all(is_concrete_int(d) for d in (*x.shape, *w.shape)):
        # Symbolic sizes: the argument checks above hold for every size; shape checks are the planner's job
        # (it refuses symbolic shapes with its own reason).
        return args
    c_in = int(x.shape[0 if unbatched else 1])
    w_shape = [int(s) for s in w.shape]
    if w_shape[0] < groups:
        # ATen: "expected weight to be at least <groups> at dimension 0" (so no empty C_out, or C_in when
        # transposed).
        raise ConvBindingError(
            f"{_describe(node)}: argument 'weight' of shape {w_shape} has {w_shape[0]} entries in dim 0, "
            f"fewer than groups ({groups})"
        )
    if transposed:
        if w_shape[0] != c_in:
            raise ConvBindingError(
                f"{_describe(node)}: argument 'weight' of shape {w_shape} expects {w_shape[0]} input channels "
                f"(transposed weights are (C_in, C_out/groups, *k)), but the input has {c_in}"
            )
        if c_in % groups != 0:
            raise ConvBindingError(
                f"{_describe(node)}: argument 'groups' ({groups}) must divide the input channels ({c_in})"
            )
        out_channels = w_shape[1] * groups
    else:
        if w_shape[0] % groups != 0:
            raise ConvBindingError(
                f"{_describe(node)}: argument 'groups' ({groups}) must divide the output channels ({w_shape[0]})"
            )
        if c_in % groups != 0:
            raise ConvBindingError(
                f"{_describe(node)}: argument 'groups' ({groups}) must divide the input channels ({c_in})"
            )
        if w_shape[1] * groups != c_in:
            raise ConvBindingError(
                f"{_describe(node)}: argument 'weight' of shape {w_shape} expects {w_shape[1] * groups} input "
                f"channels (C_in/groups = {w_shape[1]}, groups = {groups}), but the input has {c_in}"
            )
        out_channels = w_shape[0]
    if b is not None and (b.dim() != 1 or int(b.shape[0]) != out_channels):
        raise ConvBindingError(
            f"{_describe(node)}: argument 'bias' has shape {list(b.shape)}, expected [{out_channels}]"
        )

    in_spatial = [int(s) for s in x.shape[(1 if unbatched else 2) :]]
    for i in range(n):
        k = w_shape[2 + i]
        if k <= 0:
            raise ConvBindingError(f"{_describe(node)}: argument 'weight' has an empty kernel {w_shape[2:]}")
        if not transposed:
            padded = in_spatial[i] + padding_before[i] + padding_after[i]
            span = dilation[i] * (k - 1) + 1
            if padded < span:
                raise ConvBindingError(
                    f"{_describe(node)}: argument 'input' spatial dim {i} is {in_spatial[i]} (padded {padded}), "
                    f"smaller than the dilated kernel ({span})"
                )
        else:
            out = (in_spatial[i] - 1) * stride[i] - padding_before[i] - padding_after[i]
            out += dilation[i] * (k - 1) + 1 + output_padding[i]
            if out <= 0:
                # ATen's transposed shape check: "Output size is too small" (some CPU paths return an empty
                # tensor for a size of exactly 0; cuDNN-less paths reject it).
                raise ConvBindingError(
                    f"{_describe(node)}: argument 'padding' ({padding_before[i]} + {padding_after[i]}) leaves "
                    f"the transposed output empty in spatial dim {i} (size {out})"
                )

    return args
