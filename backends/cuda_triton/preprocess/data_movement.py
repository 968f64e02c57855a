"""Drafting data-movement ops: views bound as view values (no kernel), everything else as copy kernels.

The spec is the partition config's (`spec_on`), built on the operands as the delegate stores them (an operand may
be a view with other strides than its node records) and writing the layouts the node records. Per op:

* a view-like op (``view_copy``, ``squeeze``/``unsqueeze``, ``permute``, ``slice``, ``select``, ``expand``,
  ``as_strided``, a dim-order copy that keeps the dtype), and each part of a ``split_with_sizes_copy``, is a view
  value of its input when the view is expressible over the input's stored bytes, is not a delegate output, starts
  a multiple of 16 bytes into them (the blob's view alignment) and its readers read it right: it has the layout
  its node records, or every reader takes any strides (`_reads_stored_layout`);
* otherwise it is a copy into a new value, described by the blob's record of the op: ``permute`` -> permute,
  ``slice`` -> slice, ``select`` -> a slice of length one written to a view of the result that keeps the dim,
  ``expand``/``as_strided`` -> a copy from a view of the input, reshapes -> reshape, dim-order copies -> copy;
* ``cat``, ``constant_pad_nd`` and upsampling: their records and kernels; a ``split`` whose parts all need copies
  is one split record, else each copied part is a slice record.

A cat part that is a constant of the program is first copied into a value by an elementwise copy (the blob's
data-movement records read values only). What the records cannot describe (`blob_limits`: a pad value that is not
finite, an ``as_strided`` from an unaligned offset) fails with `CudaTritonPreprocessError`, as does anything else
the node's spec declines; the partition config declines the same nodes.
"""

from __future__ import annotations

from dataclasses import replace

import torch
from torch.fx import Node

from .._passes.pad_fold import folds_into_users
from ..conv.binding import aten_overload, is_conv_node
from ..kernel.launch import TRITON_PTR_DTYPE
from ..ops.data_movement import CatSpec, PadSpec, SplitSpec, StridedCopySpec, UpsampleSpec
from ..ops.data_movement.shape import slice_start
from ..ops.data_movement.views import view_strides
from ..ops.tensor_meta import is_channels_last_contiguous, is_contiguous
from ..partition.config.data_movement import (
    RESHAPES,
    DataMovementConfig,
    blob_limits,
    data_movement_inputs,
    data_movement_outputs,
    spec_on,
    with_recorded_layout,
)
from ..partition.config.nodes import bound_arguments
from ..serialization import ELEMENT_SIZE, OpRecord, ValueRef, records
from ..serialization.encoding import VIEW_ALIGNMENT
from ..utils.graph import tensor_val
from .draft import CudaTritonPreprocessError, node_errors
from .elementwise import copy_value, is_elementwise_node
from .layout_plan import channels_last_like, same_addresses
from .op_draft import Arg, ProgramDraft

aten = torch.ops.aten

_CONFIG = DataMovementConfig()
_UPSAMPLE_RECORD_MODES = {"nearest": "nearest", "nearest_exact": "nearest_exact", "bilinear": "linear"}


def draft_data_movement(node: Node, pd: ProgramDraft) -> None:
    """Draft one data-movement node: a view value, or the op's record and copy kernels."""
    with node_errors(node):
        refs = [_as_value(node, pd, x, i) for i, x in enumerate(data_movement_inputs(node))]
        metas = [pd.meta(r) for r in refs]
        spec = with_recorded_layout(spec_on(node, metas), node)
        if isinstance(spec, (CatSpec, PadSpec, UpsampleSpec)):  # these keep their inputs' layout
            sizes = spec.outputs()[0].sizes
            preferred = channels_last_like(sizes, [(m.sizes, m.strides) for m in metas])
            spec = replace(spec, out_strides=tuple(pd.planned_strides(node, preferred)))
        support = spec.supports()
        if not support:
            raise ValueError(support.reason)
        limits = blob_limits(spec)
        if not limits:
            raise ValueError(limits.reason)
        if isinstance(spec, StridedCopySpec):
            _draft_strided(node, pd, refs[0], spec)
        elif isinstance(spec, CatSpec):
            out = _result(node, pd, spec)
            record = records.CatRecord(inputs=[r.value for r in refs], output=out, dim=spec.dim)
            _add(node, pd, record, spec, refs, {"out": out})
        elif isinstance(spec, SplitSpec):
            _draft_split(node, pd, refs[0], spec)
        elif isinstance(spec, PadSpec):
            _draft_pad(node, pd, refs[0], spec)
        else:
            _draft_upsample(node, pd, refs[0], spec)


# ---- operands and results ------------------------------------------------------------------------------------
def _as_value(node: Node, pd: ProgramDraft, x: Node, i: int) -> ValueRef:
    """Operand ``x`` as a value of the delegate: a constant (a cat part) is copied into an intermediate first."""
    ref = pd.operand(x, node, "input" if i == 0 else f"input {i}")
    if isinstance(ref, ValueRef):
        return ref
    meta = pd.meta(ref)
    out = pd.intermediate(meta)
    try:
        copy_value(node, pd, ref, out)
    except CudaTritonPreprocessError as e:
        raise ValueError(f"its constant input '{x.name}' cannot be copied into the delegate: {e}") from e
    return ValueRef(out)


def _result(node: Node, pd: ProgramDraft, spec: CatSpec | PadSpec | UpsampleSpec) -> int:
    """The value a cat, pad or upsample writes, in the layout its spec writes."""
    out = spec.outputs()[0]
    return pd.result(node, list(out.sizes), list(out.strides))


def _recorded(node: Node) -> tuple[list[int], list[int]]:
    v = tensor_val(node)
    return [int(s) for s in v.shape], [int(s) for s in v.stride()]


def _reads_stored_layout(user: Node, pd: ProgramDraft, sizes: list[int], strides: list[int]) -> bool:
    """Whether ``user``'s drafter reads a view of ``sizes``/``strides`` as the delegate stores it
    (`ProgramDraft.meta`): the elementwise and data-movement ones take any strides, a convolution a dense
    contiguous or channels-last input (the layouts its kernels are chosen for). Pads a convolution folds, and the
    other families, are not relied on to take every strided view."""
    if is_elementwise_node(user):
        return True
    if is_conv_node(user):
        return is_contiguous(sizes, strides) or is_channels_last_contiguous(sizes, strides)
    return _CONFIG.takes(user) and not folds_into_users(user, pd.draft.options.allow_tf32)


def _try_alias(
    node: Node, pd: ProgramDraft, x: ValueRef, sizes: list[int], strides: list[int], offset: int
) -> bool:
    """Bind ``node`` to the view (``sizes``, ``strides``, ``offset`` elements) of ``x`` when that costs nothing and
    everything reading it reads those bytes right; False when it must be copied instead."""
    if node in pd.out_index:  # a delegate output owns its buffer
        return False
    meta = pd.meta(x)
    offset_bytes = offset * ELEMENT_SIZE[TRITON_PTR_DTYPE[meta.dtype]]
    if offset_bytes % VIEW_ALIGNMENT:
        return False
    rec_sizes, rec_strides = _recorded(node)
    if list(sizes) != rec_sizes:
        raise ValueError(f"the view has sizes {list(sizes)}, the node records {rec_sizes}")
    if same_addresses(rec_sizes, list(strides), rec_strides):
        strides = rec_strides  # exactly the recorded layout, which any reader may assume
    elif not all(_reads_stored_layout(u, pd, rec_sizes, list(strides)) for u in node.users):
        return False
    pd.alias(node, x.value, rec_sizes, list(strides), offset_bytes)
    return True


def _add(
    node: Node, pd: ProgramDraft, record: OpRecord, spec: object, refs: list[ValueRef], outs: dict[str, int]
) -> None:
    roles: dict[str, Arg] = {f"in{i}": r for i, r in enumerate(refs)}
    roles.update({role: ValueRef(v) for role, v in outs.items()})
    pd.add_op(node, [node], record, "data_movement", spec, roles)


# ---- one strided view ----------------------------------------------------------------------------------------
def _draft_strided(node: Node, pd: ProgramDraft, x: ValueRef, spec: StridedCopySpec) -> None:
    op = aten_overload(node.target)
    view = _view_of(spec) if spec.out_dtype == spec.input.dtype else None
    if view is not None and _try_alias(node, pd, x, *view):
        return
    out = pd.result(node)
    rec_sizes, rec_strides = _recorded(node)
    out_meta = spec.outputs()[0]
    if list(out_meta.sizes) != rec_sizes or not same_addresses(
        rec_sizes, list(out_meta.strides), rec_strides
    ):
        raise ValueError(
            f"the copy writes {list(out_meta.sizes)} with strides {list(out_meta.strides)}, the node records "
            f"{rec_sizes} with strides {rec_strides}"
        )
    _add(node, pd, _strided_record(node, op, pd, x, spec, out), spec, [x], {"out": out})


def _view_of(spec: StridedCopySpec) -> tuple[list[int], list[int], int] | None:
    """(sizes, strides, element offset) of the spec's result as a view of its input; None when there is none."""
    if not spec.reshapes:
        return list(spec.view_sizes), list(spec.view_strides), spec.view_offset
    sizes = list(spec.out_sizes)
    strides = view_strides(list(spec.input.sizes), list(spec.input.strides), sizes)
    if len(strides) != len(sizes):  # no strides over these bytes give the new sizes
        return None
    return sizes, strides, 0


def _strided_record(
    node: Node, op: object, pd: ProgramDraft, x: ValueRef, spec: StridedCopySpec, out: int
) -> OpRecord:
    """The blob's record of a materialised view (the record kinds: docs/blob_format.md, kind 6)."""
    args = bound_arguments(node)
    rank = spec.input.rank
    if op in RESHAPES:
        return records.ReshapeRecord(input=x.value, output=out)
    if op is aten.permute_copy.default:
        return records.PermuteRecord(input=x.value, output=out, perm=[int(d) % rank for d in args["dims"]])
    if op is aten.slice_copy.Tensor:
        dim = int(args.get("dim", 0)) % rank
        start = slice_start(spec.input.sizes[dim], int(args.get("start") or 0))
        length = spec.view_sizes[dim]
        step = int(args.get("step", 1))
        end = start + (length - 1) * step + 1 if length else start
        return records.SliceRecord(input=x.value, output=out, dim=dim, start=start, end=end, step=step)
    if op is aten.select_copy.int:
        # A slice of length one along ``dim`` into the result viewed with that dim kept.
        dim = int(args["dim"]) % rank
        index = int(args["index"]) % spec.input.sizes[dim]
        sizes, strides = list(spec.out_sizes), list(spec.out_strides)
        kept = pd.view(out, [*sizes[:dim], 1, *sizes[dim:]], [*strides[:dim], 1, *strides[dim:]])
        return records.SliceRecord(input=x.value, output=kept, dim=dim, start=index, end=index + 1, step=1)
    if op in (aten.expand_copy.default, aten.as_strided_copy.default):
        # A copy with the output's sizes, from the input viewed as the op reads it (an aligned offset:
        # `blob_limits`).
        offset_bytes = spec.view_offset * ELEMENT_SIZE[TRITON_PTR_DTYPE[spec.input.dtype]]
        source = pd.view(x.value, list(spec.view_sizes), list(spec.view_strides), offset_bytes)
        return records.CopyRecord(input=source, output=out)
    return records.CopyRecord(input=x.value, output=out)  # the dim-order copies


# ---- split, pad, upsample ------------------------------------------------------------------------------------
def _draft_split(node: Node, pd: ProgramDraft, x: ValueRef, spec: SplitSpec) -> None:
    """Each part a view of the input where it can be, the others copied."""
    meta = pd.meta(x)
    parts = data_movement_outputs(node)
    starts = [sum(spec.split_sizes[:k]) for k in range(len(parts))]
    copied: list[int] = []
    for k, (part, start) in enumerate(zip(parts, starts, strict=True)):
        sizes = list(meta.sizes)
        sizes[spec.dim] = spec.split_sizes[k]
        if not _try_alias(part, pd, x, sizes, list(meta.strides), start * meta.strides[spec.dim]):
            copied.append(k)
    if len(copied) == len(parts):
        outs = [pd.result(part) for part in parts]
        record = records.SplitRecord(input=x.value, outputs=outs, dim=spec.dim)
        roles = {("out" if k == 0 else f"out{k}"): v for k, v in enumerate(outs)}
        _add(node, pd, record, spec, [x], roles)
        return
    for k in copied:
        part, start = parts[k], starts[k]
        piece = StridedCopySpec.slice(meta, spec.dim, start, start + spec.split_sizes[k])
        piece = piece.with_out_strides(tuple(_recorded(part)[1]))
        out = pd.result(part)
        end = start + spec.split_sizes[k]
        record = records.SliceRecord(input=x.value, output=out, dim=spec.dim, start=start, end=end, step=1)
        _add(node, pd, record, piece, [x], {"out": out})


def _draft_pad(node: Node, pd: ProgramDraft, x: ValueRef, spec: PadSpec) -> None:
    out = _result(node, pd, spec)
    record = records.PadRecord(
        input=x.value, output=out, pad=list(spec.pad), mode="constant", value=spec.value
    )
    _add(node, pd, record, spec, [x], {"out": out})


def _draft_upsample(node: Node, pd: ProgramDraft, x: ValueRef, spec: UpsampleSpec) -> None:
    out = _result(node, pd, spec)
    given = all(s is not None for s in spec.scales)  # the op was given scale factors, not output sizes
    record = records.UpsampleRecord(
        input=x.value,
        output=out,
        output_size=list(spec.output_size),
        mode=_UPSAMPLE_RECORD_MODES[spec.mode],
        align_corners=spec.align_corners,
        scales=[float(s) for s in spec.scales] if given else [],  # type: ignore[arg-type]
    )
    _add(node, pd, record, spec, [x], {"out": out})


__all__ = ["draft_data_movement"]
