"""Drafting normalisation ops: one `NormRecord` computed by the norm kernels (`ops.norm`) per node.

Inference batch norm, layer norm, group norm, softmax and log_softmax. The spec is the partition config's
(`norm_spec`) built from the operands as the delegate stores them (the kernels read any input strides; the
parameters must be contiguous, which constants are); the output takes the layout the graph records, or for
a batch or group norm of a channels-last intermediate channels-last (`layout_plan`). The result of
a multi-output op is its ``getitem(.., 0)``: the drafter gives that node the value (the graph walk skips getitems).
An elementwise chain that alone reads a batch, layer or group norm's result and reads no other tensor (the GELU
after wav2vec2's group norm) runs in the norm kernel's epilogue; its last node then holds the value.
Batch norms a convolution folds never get here (`program.draft_program` skips them).
"""

from __future__ import annotations

from dataclasses import replace

from torch.fx import Node

from ..ops.norm import BatchNormSpec, GroupNormSpec, LayerNormSpec, SoftmaxSpec, supports
from ..ops.norm.spec import NormSpec
from ..ops.tensor_meta import TensorMeta
from ..partition.config.norm import norm_operands, norm_output, norm_spec
from ..serialization import ConstantRef, NormRecord, ValueRef
from .draft import CudaTritonPreprocessError, describe, node_errors
from .elementwise import Operand, Placement, epilogue_chain
from .layout_plan import channels_last_like
from .op_draft import ProgramDraft


def norm_record(spec: NormSpec, x: int, out: int, params: dict[str, ValueRef | ConstantRef]) -> NormRecord:
    """The blob's record of ``spec``: the op, the dim it normalises from (the record check's rule), groups, eps."""
    if isinstance(spec, BatchNormSpec):
        op, dim, groups, eps = "batch_norm", 1, 0, spec.eps
    elif isinstance(spec, LayerNormSpec):
        op, dim, groups, eps = "layer_norm", spec.x.rank - spec.normalized_ndim, 0, spec.eps
    elif isinstance(spec, GroupNormSpec):
        op, dim, groups, eps = "group_norm", 1, spec.groups, spec.eps
    elif isinstance(spec, SoftmaxSpec):
        op, dim, groups, eps = ("log_softmax" if spec.log else "softmax"), spec.dim, 0, 0.0
    else:
        raise TypeError(f"{type(spec).__name__} is not a normalisation spec")
    return NormRecord(
        op=op, input=x, output=out, dim=dim, groups=groups, eps=eps, weight=params.get("weight"),
        bias=params.get("bias"), mean=params.get("mean"), var=params.get("var"),
    )  # fmt: skip


def draft_norm(
    node: Node, pd: ProgramDraft, chain_end: Node | None = None, fused_into: dict[Node, Node] | None = None
) -> bool:
    """Draft one batch norm, layer norm, group norm, softmax or log_softmax node. With ``chain_end`` (the end of
    the elementwise chain that alone reads its result, `program.plan_norm_epilogues`), the chain runs in the
    norm's epilogue when it reads nothing but that result; the norm alone is drafted otherwise. Returns whether
    the chain was fused."""
    with node_errors(node):
        operands = norm_operands(node)
        out_node = norm_output(node)
    refs: dict[str, ValueRef | ConstantRef] = {}
    metas: dict[str, TensorMeta | None] = {}
    for role, operand in operands.items():
        if operand is None:
            metas[role] = None
            continue
        refs[role] = pd.operand(operand, node, role if role != "in0" else "input")
        metas[role] = pd.meta(refs[role])
    x = refs["in0"]
    if not isinstance(x, ValueRef):  # the record reads its input as a value (the config declines this)
        raise CudaTritonPreprocessError(f"{describe(node)}: its input is a constant of the program")
    with node_errors(node):
        spec = norm_spec(node, metas)
    support = supports(spec)
    if not support:
        raise CudaTritonPreprocessError(f"{describe(node)}: {support.reason}")
    preferred = None
    if isinstance(spec, (BatchNormSpec, GroupNormSpec)):  # per-channel ops keep their input's layout
        preferred = channels_last_like(spec.out.sizes, [(spec.x.sizes, spec.x.strides)])
    fused = None
    if chain_end is not None and not isinstance(spec, SoftmaxSpec):
        end_strides = tuple(pd.planned_strides(chain_end, preferred))
        fused_spec = replace(spec, out=replace(spec.out, strides=end_strides))
        fused = epilogue_chain(chain_end, pd, fused_into or {}, out_node, fused_spec.out, _no_operand)
        if fused is not None:
            spec = replace(fused_spec, epilogue=fused.epilogue.program)
    if fused is None:
        spec = replace(spec, out=replace(spec.out, strides=tuple(pd.planned_strides(out_node, preferred))))
        out = pd.result(out_node, list(spec.out.sizes), list(spec.out.strides))
    else:
        out = pd.result(chain_end, list(spec.out.sizes), list(spec.out.strides))
    params = {role: ref for role, ref in refs.items() if role != "in0"}
    record = norm_record(spec, x.value, out, params)
    covered: list[Node | None] = [node]
    if fused is not None:
        record.epilogue = fused.steps
        covered += fused.covered
    pd.add_op(node, covered, record, "norm", spec, {**refs, "out": ValueRef(out)})
    return fused is not None


def _no_operand(view: TensorMeta, ref: Operand) -> Placement | None:
    """A norm's epilogue reads no tensor but the normalized value: any other operand declines the chain."""
    return None


__all__ = ["draft_norm", "norm_record"]
