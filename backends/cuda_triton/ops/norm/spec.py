"""The normalisation op specs, from static metadata only: inference batch norm, layer norm, group norm,
softmax and log_softmax.

Edge ops (output 0 only; the saved statistics are not computed):
``_native_batch_norm_legit_no_training(x, weight?, bias?, running_mean, running_var, momentum, eps)`` over dim 1 of
a 2-D to 5-D input; ``native_layer_norm(x, normalized_shape, weight?, bias?, eps)`` over the trailing dims;
``native_group_norm(x, weight?, bias?, N, C, HxW, group, eps)``; ``_softmax(x, dim, half_to_float)`` and
``_log_softmax`` over any dim (half_to_float False). Tensor roles: "in0", "weight", "bias", "mean", "var", "out".
Each constructor lays the output out by the op's rule (layout.py) unless given ``out_strides`` (the graph's, or a
consumer's layout): the kernels write any dense output layout.

Batch, layer and group norm take an ``epilogue``: an elementwise chain (ops/elementwise/program.py) applied to
the normalized value before it is stored, reading nothing but that value (value 0) — the GELU or ReLU that
follows a norm in wav2vec2's encoder or a pre-activation block.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ...kernel.launch import Support
from ..elementwise.program import Program, program_error
from ..indexing import MAX_DIMS
from ..tensor_meta import (
    TensorMeta,
    coalesce,
    float_dtype_support,
    is_contiguous,
    is_non_overlapping_and_dense,
)
from .layout import batch_norm_out, group_norm_out, layer_norm_out, softmax_out


@dataclass(frozen=True, kw_only=True)
class AffineNormSpec:
    """What batch, layer and group norm share: ``out`` = x normalized, times the optional per-channel ``weight``
    plus ``bias``, then the optional ``epilogue``."""

    x: TensorMeta
    weight: TensorMeta | None
    bias: TensorMeta | None
    eps: float
    out: TensorMeta
    epilogue: Program | None = None


@dataclass(frozen=True, kw_only=True)
class BatchNormSpec(AffineNormSpec):
    """``out = (x - mean) / sqrt(var + eps) * weight + bias`` per channel (dim 1)."""

    mean: TensorMeta
    var: TensorMeta


@dataclass(frozen=True, kw_only=True)
class LayerNormSpec(AffineNormSpec):
    """``out`` = x normalized over its last ``normalized_ndim`` dims (biased variance), times weight plus bias."""

    normalized_ndim: int


@dataclass(frozen=True, kw_only=True)
class GroupNormSpec(AffineNormSpec):
    """``out`` = x normalized over each group of C/groups channels (and all spatial positions) of each sample,
    times the per-channel weight plus bias."""

    groups: int


@dataclass(frozen=True)
class SoftmaxSpec:
    """``out = softmax(x, dim)`` (``log``: log_softmax) in the input's dtype."""

    x: TensorMeta
    dim: int
    log: bool
    out: TensorMeta


NormSpec = BatchNormSpec | LayerNormSpec | GroupNormSpec | SoftmaxSpec


def _dim(dim: int, rank: int, op: str) -> int:
    if not -max(rank, 1) <= dim < max(rank, 1):
        raise ValueError(f"{op}: dim {dim} is out of range for a {rank}-D tensor")
    return dim % max(rank, 1)


def batch_norm_spec(
    x: TensorMeta,
    weight: TensorMeta | None,
    bias: TensorMeta | None,
    mean: TensorMeta,
    var: TensorMeta,
    eps: float,
    out_strides: tuple[int, ...] | None = None,
) -> BatchNormSpec:
    if x.rank < 2:
        raise ValueError(f"batch_norm: the input must have a channel dim (2-D to 5-D), it is {x.rank}-D")
    sizes, strides = batch_norm_out(x.sizes, x.strides, weight is not None, bias is not None)
    out = TensorMeta(sizes, out_strides or strides, x.dtype)
    return BatchNormSpec(x=x, weight=weight, bias=bias, mean=mean, var=var, eps=float(eps), out=out)


def layer_norm_spec(
    x: TensorMeta,
    normalized_shape: tuple[int, ...] | list[int],
    weight: TensorMeta | None,
    bias: TensorMeta | None,
    eps: float,
    out_strides: tuple[int, ...] | None = None,
) -> LayerNormSpec:
    k = len(normalized_shape)
    if k == 0 or k > x.rank or tuple(x.sizes[x.rank - k :]) != tuple(normalized_shape):
        raise ValueError(
            f"layer_norm: normalized_shape {tuple(normalized_shape)} is not the trailing sizes of the input {x.sizes}"
        )
    sizes, strides = layer_norm_out(x.sizes)
    out = TensorMeta(sizes, out_strides or strides, x.dtype)
    return LayerNormSpec(x=x, normalized_ndim=k, weight=weight, bias=bias, eps=float(eps), out=out)


def group_norm_spec(
    x: TensorMeta,
    weight: TensorMeta | None,
    bias: TensorMeta | None,
    n: int,
    c: int,
    hxw: int,
    groups: int,
    eps: float,
    out_strides: tuple[int, ...] | None = None,
) -> GroupNormSpec:
    if x.rank < 2 or x.sizes[0] != n or x.sizes[1] != c or math.prod(x.sizes[2:]) != hxw:
        raise ValueError(f"group_norm: N={n}, C={c}, HxW={hxw} do not describe the input of sizes {x.sizes}")
    if groups <= 0 or c % groups:
        raise ValueError(f"group_norm: {c} channels do not split into {groups} groups")
    sizes, strides = group_norm_out(x.sizes, x.strides)
    out = TensorMeta(sizes, out_strides or strides, x.dtype)
    return GroupNormSpec(x=x, groups=int(groups), weight=weight, bias=bias, eps=float(eps), out=out)


def softmax_spec(
    x: TensorMeta,
    dim: int,
    half_to_float: bool = False,
    log: bool = False,
    out_strides: tuple[int, ...] | None = None,
) -> SoftmaxSpec:
    op = "log_softmax" if log else "softmax"
    if half_to_float:
        raise ValueError(f"{op}: half_to_float=True is not supported (the output keeps the input's dtype)")
    sizes, strides = softmax_out(x.sizes)
    return SoftmaxSpec(x, _dim(dim, x.rank, op), log, TensorMeta(sizes, out_strides or strides, x.dtype))


# ---- the [M, L] row view the row kernels read ------------------------------------------------------------------
@dataclass(frozen=True)
class RowView:
    """An op's input and output as M rows of L elements: kept (row) dims and reduced (in-row) dims, each merged
    where input and output step through them alike, in logical order (the in-row index is then the position in
    the normalized shape), with the input's and the output's strides over each."""

    kept: tuple[int, ...]
    x_kept: tuple[int, ...]
    out_kept: tuple[int, ...]
    red: tuple[int, ...]
    x_red: tuple[int, ...]
    out_red: tuple[int, ...]

    @property
    def m(self) -> int:
        return math.prod(self.kept)

    @property
    def length(self) -> int:
        return math.prod(self.red)


def row_view(sizes, x_strides, out_strides, kept_dims, red_dims) -> RowView:
    """The row view of a tensor of ``sizes`` (input and output strides given) with rows over ``kept_dims`` and
    in-row elements over ``red_dims``."""

    def merged(dims) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
        merged_sizes, (xs, os) = coalesce(
            [sizes[d] for d in dims], [[x_strides[d] for d in dims], [out_strides[d] for d in dims]]
        )
        return merged_sizes, xs, os

    return RowView(*merged(kept_dims), *merged(red_dims))


def view_of(spec: NormSpec) -> RowView:
    """The row view of a layer norm, group norm or softmax. Group norm sees x as [N, G, C/G, *spatial]: rows
    over (N, G), elements over (C/G, *spatial)."""
    x, out = spec.x, spec.out
    if isinstance(spec, LayerNormSpec):
        lead = x.rank - spec.normalized_ndim
        return row_view(x.sizes, x.strides, out.strides, range(lead), range(lead, x.rank))
    if isinstance(spec, GroupNormSpec):
        cg = x.sizes[1] // spec.groups

        def split(strides: tuple[int, ...]) -> tuple[int, ...]:
            return (strides[0], strides[1] * cg, strides[1], *strides[2:])

        sizes = (x.sizes[0], spec.groups, cg, *x.sizes[2:])
        return row_view(sizes, split(x.strides), split(out.strides), (0, 1), range(2, len(sizes)))
    if isinstance(spec, SoftmaxSpec):
        others = [d for d in range(x.rank) if d != spec.dim]
        return row_view(x.sizes, x.strides, out.strides, others, [spec.dim] if x.rank else [])
    raise TypeError(f"{type(spec).__name__} has no row view")


# ---- supports --------------------------------------------------------------------------------------------------
def _param_support(op: str, name: str, p: TensorMeta | None, channels: tuple[int, ...]) -> Support:
    if p is None:
        return Support.yes()
    if p.sizes != channels:
        return Support.no(f"{op}: {name} has sizes {p.sizes}, expected {channels}")
    if not is_contiguous(p.sizes, p.strides):
        return Support.no(f"{op}: {name} must be contiguous")
    return float_dtype_support(op, p)


def supports(spec: NormSpec) -> Support:
    """Whether the norm kernels compute ``spec`` exactly; if not, why, in words a user understands."""
    if isinstance(spec, BatchNormSpec):
        op, params = "batch_norm", {"weight": spec.weight, "bias": spec.bias, "running_mean": spec.mean,
                                    "running_var": spec.var}  # fmt: skip
        channels: tuple[int, ...] = (spec.x.sizes[1],)
    elif isinstance(spec, LayerNormSpec):
        op, params = "layer_norm", {"weight": spec.weight, "bias": spec.bias}
        channels = spec.x.sizes[spec.x.rank - spec.normalized_ndim :]
    elif isinstance(spec, GroupNormSpec):
        op, params = "group_norm", {"weight": spec.weight, "bias": spec.bias}
        channels = (spec.x.sizes[1],)
    else:
        op, params, channels = ("log_softmax" if spec.log else "softmax"), {}, ()
    dtypes = float_dtype_support(op, spec.x, spec.out)
    if not dtypes:
        return dtypes
    if isinstance(spec, AffineNormSpec) and spec.epilogue is not None:
        error = program_error(spec.epilogue, 1)
        if error:
            return Support.no(f"{op}: its epilogue reads only the normalized value: {error}")
    for name, p in params.items():
        s = _param_support(op, name, p, channels)
        if not s:
            return s
    if any(s < 0 for s in spec.x.strides):
        return Support.no(f"{op}: negative input strides are not supported")
    if not is_non_overlapping_and_dense(spec.out.sizes, spec.out.strides):
        return Support.no(f"{op}: the output strides {spec.out.strides} are not a dense layout")
    if isinstance(spec, BatchNormSpec):
        dims = batch_norm_dims(spec)[0]
        if len(dims) > MAX_DIMS:
            return Support.no(f"{op}: the input's layout leaves more than {MAX_DIMS} dims after merging")
        return Support.yes()
    view = view_of(spec)
    if len(view.kept) > MAX_DIMS or len(view.red) > MAX_DIMS:
        return Support.no(
            f"{op}: the input's layout leaves more than {MAX_DIMS} row or in-row dims after merging"
        )
    return Support.yes()


def batch_norm_dims(spec: BatchNormSpec) -> tuple[tuple[int, ...], list[tuple[int, ...]]]:
    """Batch norm as an elementwise op over the output in its memory order, dims merged: sizes, and the strides of
    the output, the input and the per-channel parameters (stride 1 along the channel dim, 0 elsewhere)."""
    shape = spec.out.sizes
    channel = tuple(1 if d == 1 else 0 for d in range(len(shape)))
    order = sorted(range(len(shape)), key=lambda d: -spec.out.strides[d])
    operands = [spec.out.strides, spec.x.strides, channel]
    return coalesce([shape[d] for d in order], [[s[d] for d in order] for s in operands])
