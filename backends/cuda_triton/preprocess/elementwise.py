"""Drafting elementwise ops: each maximal chain of them becomes one kernel (`ops.elementwise`).

`plan_chains` groups the delegate's elementwise nodes: a node whose only user is another elementwise node of the
delegate (and which is not a delegate output) is computed inside that user's chain instead of being stored,
as long as the chain reads at most `MAX_INPUTS` tensors and the node's result has the user's sizes. A smaller
result that the user broadcasts (squeeze-excitation's ``sigmoid(s)``, one value per image and channel) is stored
instead: computed inside the big chain it would be computed once per element of the big result, and stored it can
run in the epilogue of the convolution that makes ``s``. `draft_elementwise` drafts the last node of a chain
(the one whose value is stored) with everything fused into it; the nodes fused into a chain draft nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from torch.fx import Node

from ..conv.binding import aten_overload
from ..conv.epilogue import (
    MAX_OPERANDS,
    ConvEpilogue,
    ConvPrologue,
    EpilogueOperand,
    epilogue_operand,
    prologue_operand,
)
from ..kernel.launch import TRITON_PTR_DTYPE
from ..ops.elementwise import MAX_INPUTS, ChainBuilder, supports
from ..ops.elementwise.math import OPS, OPS_BY_CODE, SCALAR_OPERAND
from ..ops.elementwise.program import Instruction, Program
from ..ops.elementwise.spec import Value
from ..ops.tensor_meta import TensorMeta
from ..partition.config.elementwise import GLU, ElementwiseConfig, emit_elementwise, output_meta
from ..serialization import ConstantRef, ElementwiseRecord, ValueRef
from ..serialization.records.base import FromInput, FromResult, FromStep, Literal, Step, StepArg
from ..utils.graph import tensor_val
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
                and _same_sizes(x, node)
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


def _same_sizes(a: Node, b: Node) -> bool:
    return tuple(tensor_val(a).shape) == tuple(tensor_val(b).shape)


def program_steps(program: Program, first_is_result: bool = False) -> list[Step]:
    """The blob's description of a chain program: one step per instruction (the family's op names). With
    ``first_is_result`` (a fused epilogue), chain input 0 is the record's own result and input k its extra input
    k - 1."""

    def operand(x: int) -> StepArg:
        if x >= MAX_INPUTS:
            return FromStep(x - MAX_INPUTS)
        if first_is_result:
            return FromResult() if x == 0 else FromInput(x - 1)
        return FromInput(x)

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


def steps_program(steps: list[Step], first_is_result: bool = False) -> Program:
    """`program_steps` undone: the chain program a record's steps describe (ValueError when they name an op the
    family does not have or are malformed)."""

    def index(arg: StepArg) -> int:
        if isinstance(arg, FromStep):
            return MAX_INPUTS + arg.index
        if isinstance(arg, FromResult):
            return 0
        if isinstance(arg, FromInput):
            return arg.index + 1 if first_is_result else arg.index
        raise ValueError(f"a step operand {arg!r} where a tensor was expected")

    program: list[tuple[int, int, int, float, float]] = []
    for step in steps:
        op = OPS.get(step.op)
        if op is None:
            raise ValueError(f"step op {step.op!r} is not an elementwise op of this family")
        args = list(step.args)
        consts = [float(a.value) for a in args[op.arity :] if isinstance(a, Literal)]
        if len(args) != op.arity + len(op.params) or len(consts) != len(op.params):
            raise ValueError(f"step {step.op!r} has {len(args)} operands")
        c = consts + [0.0, 0.0]
        if op.arity == 2:
            x, y = args[0], args[1]
            if isinstance(x, Literal):
                program.append((op.code, SCALAR_OPERAND, index(y), float(x.value), 0.0))
            elif isinstance(y, Literal):
                program.append((op.code, index(x), SCALAR_OPERAND, float(y.value), 0.0))
            else:
                program.append((op.code, index(x), index(y), 0.0, 0.0))
        else:
            program.append((op.code, index(args[0]), SCALAR_OPERAND, c[0], c[1]))
    return tuple(program)


def _build_chain(
    node: Node, pd: ProgramDraft, fused_into: dict[Node, Node], seed: tuple[Node, TensorMeta] | None
) -> tuple[ChainBuilder, Value, list[ValueRef | ConstantRef | None], list[Node | None]]:
    """The chain ending at ``node``: (its builder, its result, the tensors it reads in "in<i>" order, the nodes it
    covers, last first). ``seed``: a tensor that is not stored (a convolution's result in registers) is the
    chain's input 0, its ref None."""
    b = ChainBuilder()
    stored: list[Node] = []  # the tensors the chain reads, in chain-input order
    refs: list[ValueRef | ConstantRef | None] = []
    covered: list[Node | None] = []
    if seed is not None:
        stored.append(seed[0])
        refs.append(None)
        b.input("in0", seed[1])

    def tensor(x: Node) -> tuple[str, TensorMeta]:
        if x not in stored:
            stored.append(x)
            refs.append(pd.operand(x, node, "operand"))
        i = stored.index(x)
        ref = refs[i]
        return f"in{i}", (seed[1] if ref is None and seed is not None else pd.meta(ref))  # type: ignore[arg-type]

    def value(x: Node) -> Value:
        if fused_into.get(x) is not None and _chain_end(x, fused_into) is node:
            return emit(x)
        return b.input(*tensor(x))

    def emit(n: Node) -> Value:
        covered.append(n)
        return emit_elementwise(b, n, value, tensor)

    result = emit(node)
    return b, result, refs, covered


def draft_elementwise(node: Node, pd: ProgramDraft, fused_into: dict[Node, Node]) -> None:
    """Draft the chain that ends at ``node``: one kernel computing it and every node fused into it."""
    with node_errors(node):
        b, result, maybe_refs, covered = _build_chain(node, pd, fused_into, None)
        refs = [r for r in maybe_refs if r is not None]
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


@dataclass(frozen=True)
class FusedChain:
    """An elementwise chain a convolution or a GEMM applies in its epilogue: the chain, the operands' refs (the
    record's extra inputs, in order) and the nodes it covers."""

    epilogue: ConvEpilogue
    steps: list[Step]
    operands: list[ValueRef | ConstantRef]
    covered: list[Node | None]


Operand = ValueRef | ConstantRef
# How an op's epilogue reads one chain operand (its view as the chain reads it, its stored tensor): the
# `EpilogueOperand` and a function giving the record's input for it (called only once every operand is placed, so
# a declined chain adds no value or constant); None when the epilogue cannot read it.
Placement = tuple[EpilogueOperand, Callable[[], Operand]]
Place = Callable[[TensorMeta, Operand], Placement | None]


def epilogue_chain(
    end: Node,
    pd: ProgramDraft,
    fused_into: dict[Node, Node],
    result: Node,
    out: TensorMeta,
    place: Place | None = None,
) -> FusedChain | None:
    """The chain ending at ``end`` as the epilogue of an op whose (unstored) ``result`` has layout ``out``; None
    when the epilogue cannot compute it (another output shape or dtype, an operand it cannot address, the result
    read other than whole). ``place`` reads each other operand (default: a convolution's, `epilogue_operand`
    against ``out``)."""

    def conv_place(v: TensorMeta, ref: Operand) -> Placement | None:
        op = epilogue_operand(v.sizes, v.strides, TRITON_PTR_DTYPE[v.dtype], out.sizes, out.strides)
        return None if op is None else (op, lambda: ref)

    try:
        b, value, refs, covered = _build_chain(end, pd, fused_into, (result, out))
        meta = output_meta(end)
        spec = b.build(value, out_dtype=meta.dtype, out_strides=out.strides)
    except (ValueError, CudaTritonPreprocessError):
        return None
    if tuple(meta.sizes) != tuple(out.sizes) or meta.dtype != out.dtype or not supports(spec):
        return None
    first, *rest = spec.inputs
    if (first.role, first.offset, first.view) != ("in0", 0, out) or len(rest) > MAX_OPERANDS:
        return None
    placed: list[Placement] = []
    for chain_input in rest:
        ref = refs[int(chain_input.role[2:])]
        p = None if ref is None or chain_input.offset else (place or conv_place)(chain_input.view, ref)
        if p is None:
            return None
        placed.append(p)
    epilogue = ConvEpilogue(spec.program, tuple(op for op, _ in placed))
    operands = [make_ref() for _, make_ref in placed]
    return FusedChain(epilogue, program_steps(spec.program, first_is_result=True), operands, covered[::-1])


@dataclass(frozen=True)
class FusedPrologue:
    """An elementwise chain a convolution applies to its input as it loads it: the chain's node (drafted as a
    kernel of its own after all when the convolution's kernel takes no prologue), the feature map it reads
    (the convolution's input as stored), the chain, its operands' refs (the record's prologue inputs, in order)
    and the nodes it covers."""

    end: Node
    source: ValueRef
    prologue: ConvPrologue
    steps: list[Step]
    operands: list[ValueRef | ConstantRef]
    covered: list[Node | None]
    fused_into: dict[Node, Node]  # `plan_chains`'s, to draft the chain on its own


def _with_input_first(program: Program, first: int) -> Program:
    """``program`` with chain input ``first`` renumbered 0 and the inputs before it moved up by one."""

    def renumber(x: int) -> int:
        if x == SCALAR_OPERAND or x >= MAX_INPUTS:  # a scalar or a step's result
            return x
        return 0 if x == first else x + 1 if x < first else x

    out: list[Instruction] = [(code, renumber(a), renumber(b), c0, c1) for code, a, b, c0, c1 in program]
    return tuple(out)


def conv_prologue_chain(end: Node, pd: ProgramDraft, fused_into: dict[Node, Node]) -> FusedPrologue | None:
    """The chain ending at ``end`` as the prologue of the convolution that alone reads it: one input is a
    stored feature map of the chain's sizes and dtype (the convolution's input as its kernel loads it), every
    other one a per-(N, C) tensor; None when the chain is not of that form."""
    try:
        b, value, refs, covered = _build_chain(end, pd, fused_into, None)
        meta = output_meta(end)
        spec = b.build(value, out_dtype=meta.dtype)
    except (ValueError, CudaTritonPreprocessError):
        return None
    if not supports(spec) or len(spec.inputs) > MAX_OPERANDS + 1:
        return None
    input_refs = [refs[int(x.role[2:])] for x in spec.inputs]  # each chain input's stored tensor
    maps = [
        i
        for i, (x, ref) in enumerate(zip(spec.inputs, input_refs, strict=True))
        if x.offset == 0
        and isinstance(ref, ValueRef)
        and x.view == pd.meta(ref)
        and tuple(x.view.sizes) == tuple(meta.sizes)
        and x.view.dtype == meta.dtype
    ]
    if len(maps) != 1:
        return None
    first = maps[0]
    source = input_refs[first]
    operands: list[EpilogueOperand] = []
    ref_list: list[ValueRef | ConstantRef] = []
    for i, (chain_input, ref) in enumerate(zip(spec.inputs, input_refs, strict=True)):
        if i == first:
            continue
        v = chain_input.view
        op = prologue_operand(v.sizes, v.strides, TRITON_PTR_DTYPE[v.dtype], meta.sizes)
        if ref is None or chain_input.offset or op is None:
            return None
        operands.append(op)
        ref_list.append(ref)
    program = _with_input_first(spec.program, first)
    prologue = ConvPrologue(program, tuple(operands))
    steps = program_steps(program, first_is_result=True)
    assert isinstance(source, ValueRef)
    return FusedPrologue(end, source, prologue, steps, ref_list, covered[::-1], fused_into)


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


__all__ = [
    "FusedChain",
    "FusedPrologue",
    "epilogue_chain",
    "conv_prologue_chain",
    "copy_value",
    "draft_elementwise",
    "steps_program",
    "is_elementwise_node",
    "plan_chains",
    "program_steps",
]
