"""Drafting elementwise ops: each maximal chain of them becomes one kernel (`ops.elementwise`).

`plan_chains` groups the delegate's elementwise nodes: a node whose only user is another elementwise node of the
delegate (and which is not a delegate output) is computed inside that user's chain instead of being stored,
as long as the chain reads at most `MAX_INPUTS` tensors. `draft_elementwise` drafts the last node of a chain
(the one whose value is stored) with everything fused into it; the nodes fused into a chain draft nothing.
"""

from __future__ import annotations

from torch.fx import Node

from ..conv.binding import aten_overload
from ..ops.elementwise import MAX_INPUTS, ChainBuilder, supports
from ..ops.elementwise.math import OPS_BY_CODE, SCALAR_OPERAND
from ..ops.elementwise.program import Program
from ..ops.elementwise.spec import Value
from ..ops.tensor_meta import TensorMeta
from ..partition.config.elementwise import GLU, ElementwiseConfig, emit_elementwise, output_meta
from ..serialization import ConstantRef, ElementwiseRecord, ValueRef
from ..serialization.records.base import FromInput, FromStep, Literal, Step, StepArg
from .draft import CudaTritonPreprocessError, describe, node_errors
from .layout_plan import channels_last_like
from .op_draft import ProgramDraft

_CONFIG = ElementwiseConfig()


def is_elementwise_node(node: Node) -> bool:
    return _CONFIG.takes(node)


def _tensor_operands(node: Node) -> list[Node]:
    return [a for a in (*node.args, *node.kwargs.values()) if isinstance(a, Node)]


def plan_chains(nodes: list[Node], outputs: set[Node]) -> dict[Node, Node]:
    """{node: the chain node it is fused into} for the elementwise nodes that are not stored."""
    fused_into: dict[Node, Node] = {}
    reads: dict[Node, set[Node]] = {}  # chain node -> the stored tensors its chain reads
    for node in nodes:
        if not is_elementwise_node(node):
            continue
        reads[node] = set()
        glu = aten_overload(node.target) is GLU
        for x in dict.fromkeys(_tensor_operands(node)):
            inner = (
                not glu
                and x in reads
                and x not in outputs
                and len(x.users) == 1
                and len(reads[node] | reads[x]) + sum(1 for y in _tensor_operands(node) if y is not x)
                <= MAX_INPUTS
            )
            if inner:
                fused_into[x] = node
                reads[node] |= reads[x]
            else:
                reads[node].add(x)
        if len(reads[node]) > MAX_INPUTS:  # cannot happen for the ops of this family; keep the node alone
            raise CudaTritonPreprocessError(
                f"{describe(node)}: an elementwise chain reading {len(reads[node])} tensors"
            )
    return fused_into


def program_steps(program: Program) -> list[Step]:
    """The blob's description of a chain program: one step per instruction (the family's op names)."""

    def operand(x: int) -> StepArg:
        return FromInput(x) if x < MAX_INPUTS else FromStep(x - MAX_INPUTS)

    steps: list[Step] = []
    for code, a, b, c0, c1 in program:
        op = OPS_BY_CODE[code]
        args: list[StepArg] = [operand(a)]
        if op.arity == 2:
            args.append(Literal(c0) if b == SCALAR_OPERAND else operand(b))
            if a == SCALAR_OPERAND:
                args[0] = Literal(c0)
        args += [Literal(v) for v in (c0, c1)[: len(op.params)]]
        steps.append(Step(op.name, args))
    return steps


def draft_elementwise(node: Node, pd: ProgramDraft, fused_into: dict[Node, Node]) -> None:
    """Draft the chain that ends at ``node``: one kernel computing it and every node fused into it."""
    b = ChainBuilder()
    stored: list[Node] = []  # the tensors the chain reads, in chain-input order
    refs: list[ValueRef | ConstantRef] = []
    covered: list[Node | None] = []

    def tensor(x: Node) -> tuple[str, TensorMeta]:
        if x not in stored:
            stored.append(x)
            refs.append(pd.operand(x, node, "operand"))
        i = stored.index(x)
        return f"in{i}", pd.meta(refs[i])

    def value(x: Node) -> Value:
        if fused_into.get(x) is not None and _chain_end(x, fused_into) is node:
            return emit(x)
        return b.input(*tensor(x))

    def emit(n: Node) -> Value:
        covered.append(n)
        return emit_elementwise(b, n, value, tensor)

    with node_errors(node):
        result = emit(node)
        meta = output_meta(node)
        inputs = [(m.sizes, m.strides) for m in (pd.meta(r) for r in refs)]
        strides = pd.planned_strides(node, channels_last_like(meta.sizes, inputs))
        spec = b.build(result, out_dtype=meta.dtype, out_strides=tuple(strides))
    support = supports(spec)
    if not support:
        raise CudaTritonPreprocessError(f"{describe(node)}: {support.reason}")
    out = pd.result(node, list(meta.sizes), strides)
    roles = {f"in{i}": r for i, r in enumerate(refs)}
    roles["out"] = ValueRef(out)
    record = ElementwiseRecord(inputs=list(refs), steps=program_steps(spec.program), output=out)
    pd.add_op(node, covered[::-1], record, "elementwise", spec, roles)


def copy_value(node: Node, pd: ProgramDraft, source: ValueRef | ConstantRef, out: int) -> None:
    """Copy ``source`` into value ``out`` (same sizes and dtype, any two layouts) with an elementwise copy kernel,
    on behalf of ``node``."""
    b = ChainBuilder()
    target = pd.meta(ValueRef(out))
    spec = b.build(b.input("in0", pd.meta(source)), out_dtype=target.dtype, out_strides=target.strides)
    support = supports(spec)
    if not support:
        raise CudaTritonPreprocessError(f"{describe(node)}: {support.reason}")
    record = ElementwiseRecord(inputs=[source], steps=program_steps(spec.program), output=out)
    pd.add_op(node, [node], record, "elementwise", spec, {"in0": source, "out": ValueRef(out)})


def _chain_end(x: Node, fused_into: dict[Node, Node]) -> Node:
    while x in fused_into:
        x = fused_into[x]
    return x


__all__ = ["copy_value", "draft_elementwise", "is_elementwise_node", "plan_chains", "program_steps"]
