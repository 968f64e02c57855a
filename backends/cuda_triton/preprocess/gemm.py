"""Drafting GEMM ops (addmm, mm, bmm, linear): one `GemmRecord` computed by the GEMM kernel (`ops.gemm`) per node.

The spec is the partition config's (`gemm_spec`) built from the operands as the delegate stores them: a weight
folded from ``permute_copy(weight)`` is a contiguous [K, N] constant, an aliased view keeps its own strides; the
kernel reads any strides. The record names ``b`` by its logical [K, N] ([B, K, N]) shape: a linear's weight is
[N, K], stored as it is when it is a constant (the kernel's prepared layout) and named through a transposed view
when it is a tensor of the delegate. A split-K schedule's workspace is added by `ProgramDraft.add_op`.
"""

from __future__ import annotations

import torch
from torch.fx import Node

from ..conv.binding import aten_overload
from ..ops.gemm import GemmSpec
from ..ops.tensor_meta import TensorMeta
from ..partition.config.base import bound_arguments
from ..partition.config.gemm import gemm_operands, gemm_spec
from ..serialization import ConstantRef, GemmRecord, ValueRef
from .draft import CudaTritonPreprocessError, describe, node_errors
from .op_draft import ProgramDraft

aten = torch.ops.aten


def _transposed_view(pd: ProgramDraft, ref: ValueRef) -> ValueRef:
    """A new value viewing the matrix ``ref`` transposed (no copy): how the record names a linear's [N, K] weight
    as its [K, N] ``b`` when the weight is a tensor of the delegate."""
    v = pd.draft.values[ref.value]
    return ValueRef(pd.view(ref.value, [v.sizes[1], v.sizes[0]], [v.strides[1], v.strides[0]]))


def _record_b(pd: ProgramDraft, node: Node, spec: GemmSpec, w: ValueRef | ConstantRef) -> tuple[
    ValueRef | ConstantRef, list[int]
]:  # fmt: skip
    """The record's ``b`` operand and its logical sizes."""
    if aten_overload(node.target) is not aten.linear.default:
        return w, list(pd.meta(w).sizes)
    b_sizes = [spec.k, spec.n]
    return (w if isinstance(w, ConstantRef) else _transposed_view(pd, w)), b_sizes


def _scalar(node: Node, name: str) -> float:
    value = bound_arguments(node).get(name, 1.0)
    return 1.0 if value is None else float(value)


def draft_gemm(node: Node, pd: ProgramDraft) -> None:
    """Draft one addmm, mm, bmm or linear node."""
    refs: dict[str, ValueRef | ConstantRef] = {}
    metas: list[TensorMeta | None] = []
    for i, operand in enumerate(gemm_operands(node)):
        if operand is None:
            metas.append(None)
            continue
        refs[f"in{i}"] = pd.operand(operand, node, f"operand {i}")
        metas.append(pd.meta(refs[f"in{i}"]))
    with node_errors(node):
        spec = gemm_spec(node, pd.draft.options.allow_tf32, metas)
    support = spec.supports()
    if not support:
        raise CudaTritonPreprocessError(f"{describe(node)}: {support.reason}")
    a = refs[spec.a.role]
    if not isinstance(a, ValueRef):  # the record reads its first matrix as a value (the config declines this)
        raise CudaTritonPreprocessError(f"{describe(node)}: its first matrix is a constant of the program")
    out = pd.result(node)  # the layout the node records, which the spec's output strides are
    b, b_sizes = _record_b(pd, node, spec, refs[spec.w.role])
    addmm = aten_overload(node.target) is aten.addmm.default  # the one op with alpha and beta arguments
    alpha, beta = (_scalar(node, "alpha"), _scalar(node, "beta")) if addmm else (1.0, 1.0)
    bias = refs[spec.bias.role] if spec.bias is not None else None  # beta == 0 drops the bias (as ATen)
    record = GemmRecord(
        a=a.value, b=b, bias=bias, output=out, b_sizes=b_sizes, alpha=alpha, beta=beta if bias else 0.0
    )
    roles: dict[str, ValueRef | ConstantRef] = {**refs, "out": ValueRef(out)}
    pd.add_op(node, [node], record, "gemm", spec, roles)


__all__ = ["draft_gemm"]
