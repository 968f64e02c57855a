"""Drafting reductions: one `ReductionRecord` computed by the reduction kernel (`ops.reduction`) per node.

The spec is the partition config's (`reduction_node_spec`: the output dtype and strides the node records), with
the input's layout as the delegate stores it: the kernel reads any strides, and a view's may differ from what
the node records.
"""

from __future__ import annotations

from dataclasses import replace

from torch.fx import Node

from ..ops.reduction import supports
from ..partition.config.nodes import bound_arguments
from ..partition.config.reduction import reduction_node_spec
from ..serialization import ReductionRecord, ValueRef
from .draft import CudaTritonPreprocessError, describe, node_errors
from .op_draft import ProgramDraft, stored_input


def draft_reduction(node: Node, pd: ProgramDraft) -> None:
    """Draft one sum / mean / amax / amin node."""
    with node_errors(node):
        spec = reduction_node_spec(node)
    ref = pd.operand(bound_arguments(node)["self"], node)
    if not isinstance(
        ref, ValueRef
    ):  # a reduction of a constant is folded at export; a record reads values only
        raise CudaTritonPreprocessError(f"{describe(node)}: its input is a constant of the program")
    spec = replace(spec, x=stored_input(node, spec.x, pd.meta(ref)))
    support = supports(spec)
    if not support:
        raise CudaTritonPreprocessError(f"{describe(node)}: {support.reason}")
    out = pd.result(node, list(spec.out.sizes), list(spec.out.strides))
    record = ReductionRecord(
        op=spec.op, dims=list(spec.dims), keepdim=spec.keepdim, input=ref.value, output=out
    )
    pd.add_op(node, [node], record, "reduction", spec, {"in0": ref, "out": ValueRef(out)})


__all__ = ["draft_reduction"]
