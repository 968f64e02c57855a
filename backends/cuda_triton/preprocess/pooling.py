"""Drafting pooling ops: one `PoolingRecord` computed by the pooling kernel (`ops.pooling`) per pool node.

The spec is the partition config's (`pool_spec`), with the input's layout as the delegate stores it (the kernel
reads any strides) and the output's as the node records it, or channels-last after a channels-last input
(`layout_plan`). A max pool's values are its ``getitem(.., 0)``: the
drafter gives that node the result value (the graph walk skips getitems).
"""

from __future__ import annotations

from dataclasses import replace

from torch.fx import Node

from ..ops.pooling import ADAPTIVE_AVG_POOL, AVG_POOL, MAX_POOL, PoolSpec
from ..partition.config.nodes import bound_arguments
from ..partition.config.pooling import pool_output, pool_spec
from ..serialization import PoolingRecord, ValueRef
from ..utils.graph import tensor_val
from .draft import CudaTritonPreprocessError, describe, node_errors
from .layout_plan import channels_last_like
from .op_draft import ProgramDraft, stored_input

_OP_NAMES = {MAX_POOL: "max", AVG_POOL: "avg", ADAPTIVE_AVG_POOL: "adaptive_avg"}


def pooling_record(spec: PoolSpec, input: int, output: int) -> PoolingRecord:
    """The blob's record of ``spec``: each pool kind stores only the parameters it takes (the record check's rule)."""
    op = _OP_NAMES[spec.kind]
    if spec.kind == ADAPTIVE_AVG_POOL:
        return PoolingRecord(op=op, input=input, output=output, output_size=list(spec.kernel))
    avg = spec.kind == AVG_POOL
    return PoolingRecord(
        op=op,
        input=input,
        output=output,
        kernel=list(spec.kernel),
        stride=list(spec.stride),
        padding=list(spec.padding),
        dilation=list(spec.dilation),
        ceil_mode=spec.ceil_mode,
        count_include_pad=avg and spec.count_include_pad,
        divisor_override=(spec.divisor_override or 0) if avg else 0,
    )


def draft_pooling(node: Node, pd: ProgramDraft) -> None:
    """Draft one max, avg or adaptive avg pool node."""
    with node_errors(node):
        spec = pool_spec(node)
        out_node = pool_output(node)
    args = bound_arguments(node)
    x = args["input"] if "input" in args else args["self"]
    ref = pd.operand(x, node)
    spec = replace(spec, input=stored_input(node, spec.input, pd.meta(ref)))
    support = spec.supports()
    if not support:
        raise CudaTritonPreprocessError(f"{describe(node)}: {support.reason}")
    if not isinstance(ref, ValueRef):  # a pool of a constant is folded at export; a record reads values only
        raise CudaTritonPreprocessError(f"{describe(node)}: its input is a constant of the program")
    recorded = tuple(int(s) for s in tensor_val(out_node).shape)
    if spec.output().sizes != recorded:
        raise CudaTritonPreprocessError(
            f"{describe(node)}: the pool's output {list(spec.output().sizes)} is not the {list(recorded)} the "
            "node records"
        )
    out_meta = spec.output()
    preferred = channels_last_like(out_meta.sizes, [(spec.input.sizes, spec.input.strides)])
    spec = replace(spec, out_strides=tuple(pd.planned_strides(out_node, preferred)))
    out = pd.result(out_node, list(out_meta.sizes), list(spec.out_strides))
    record = pooling_record(spec, ref.value, out)
    pd.add_op(node, [node], record, "pooling", spec, {"in0": ref, "out": ValueRef(out)})


__all__ = ["draft_pooling", "pooling_record"]
