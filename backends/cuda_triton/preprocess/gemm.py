"""Drafting GEMM ops (addmm, mm, bmm, linear): one `GemmRecord` computed by the GEMM kernel (`ops.gemm`) per node.

The spec is the partition config's (`gemm_spec`) built from the operands as the delegate stores them: a weight
folded from ``permute_copy(weight)`` is a contiguous [K, N] constant, an aliased view keeps its own strides; the
kernel reads any strides. The record names ``b`` by its logical [K, N] ([B, K, N]) shape: a linear's weight is
[N, K], stored as it is when it is a constant (the kernel's prepared layout) and named through a transposed view
when it is a tensor of the delegate. A split-K schedule's workspace is added by `ProgramDraft.add_op`.

A GEMM whose result only an elementwise chain reads, through views (an nn.Linear's ``view_copy`` back to
[..., N], a ``permute_copy``) that are free over its stored bytes, may compute that chain in its epilogue
(`plan_gemm_epilogues` in program.py defers it to the chain's end): the chain's value is stored, the GEMM's
output is a view of it in the GEMM's shape, and each chain operand is re-expressed in that shape (the views
undone), where the kernel reads it like the output or per column (`gemm_epilogue_operand`); else the chain is a
kernel of its own.

A layer norm that only the GEMM's first matrix reads may be folded into it (gemm_norm.py): the GEMM then reads
the norm's input, normalises its rows itself, and covers the norm.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch.fx import Node

from ..conv.binding import aten_overload
from ..conv.epilogue import gemm_epilogue_operand
from ..conv.templates._tf32 import rounds_to_tf32
from ..conv.templates.epilogue_args import EPILOGUE_ROLES
from ..conv.tf32 import round_to_tf32
from ..kernel.launch import TRITON_PTR_DTYPE
from ..ops.data_movement.views import view_strides
from ..ops.gemm import COLSUM_ROLE, GemmSpec
from ..ops.tensor_meta import TensorMeta, expand_strides
from ..partition.config.data_movement import RESHAPES
from ..partition.config.gemm import gemm_operands, gemm_spec
from ..partition.config.nodes import bound_arguments
from ..serialization import ConstantRef, GemmRecord, NullPtr, ValueRef
from ..utils.graph import tensor_val
from .draft import CudaTritonPreprocessError, add_constant, describe, node_errors
from .elementwise import Operand, Placement, epilogue_chain
from .gemm_norm import fold_norm, is_linear
from .layout_plan import same_addresses
from .op_draft import Arg, ProgramDraft

aten = torch.ops.aten

# The ops between a GEMM and the chain in its epilogue (the reshapes and this permute): each a view of its
# input's bytes when expressible.
_PERMUTE = aten.permute_copy.default


def is_epilogue_view(node: Node) -> bool:
    """A reshape or permute that a GEMM's epilogue can look through (`plan_gemm_epilogues`)."""
    return node.op == "call_function" and aten_overload(node.target) in (*RESHAPES, _PERMUTE)


# One view between the GEMM and its chain: its input's sizes, and the permutation (None: a reshape).
_Step = tuple[list[int], list[int] | None]


def _through_views(
    sizes: list[int], strides: list[int], views: Sequence[Node]
) -> tuple[list[int], list[int], list[_Step]] | None:
    """(sizes, strides) through ``views``, with the steps to undo them; None when one is no view of the bytes."""
    steps: list[_Step] = []
    for v in views:
        out_sizes = [int(s) for s in tensor_val(v).shape]
        if aten_overload(v.target) is _PERMUTE:
            dims = [d % len(sizes) for d in v.args[1]]  # type: ignore[union-attr]
            steps.append((sizes, dims))
            sizes, strides = [sizes[d] for d in dims], [strides[d] for d in dims]
        else:
            new = _view(sizes, strides, out_sizes)
            if new is None:
                return None
            steps.append((sizes, None))
            sizes, strides = out_sizes, new
        if sizes != out_sizes:
            return None
    return sizes, strides, steps


def _view(sizes: list[int], strides: list[int], new_sizes: list[int]) -> list[int] | None:
    """The strides of the same bytes seen as ``new_sizes``; None when no view gives them."""
    if sizes == new_sizes:
        return list(strides)
    new = view_strides(sizes, strides, new_sizes)
    return new if len(new) == len(new_sizes) else None


def _inverse(dims: Sequence[int]) -> list[int]:
    """The permutation that undoes ``permute(dims)``."""
    inverse = [0] * len(dims)
    for i, d in enumerate(dims):
        inverse[d] = i
    return inverse


def _undo_views(sizes: list[int], strides: list[int], steps: list[_Step]) -> list[int] | None:
    """Strides of a tensor of the chain's ``sizes`` (``strides``, 0 where it broadcasts) in the GEMM's shape,
    the views undone; None when it has none."""
    for before, dims in reversed(steps):
        if dims is not None:
            sizes, strides = before, [strides[i] for i in _inverse(dims)]
        else:
            new = _view(sizes, strides, before)
            if new is None:
                return None
            sizes, strides = before, new
    return strides


def _undo_views_of(t: torch.Tensor, steps: list[_Step]) -> torch.Tensor:
    """The same undoing on a tensor (a constant's values)."""
    for before, dims in reversed(steps):
        if dims is not None:
            t = t.permute(_inverse(dims))
        else:
            t = t.reshape(before)
    return t


def _constant_tensor(pd: ProgramDraft, ref: ConstantRef) -> torch.Tensor:
    c = pd.draft.constants[ref.constant]
    dtype = getattr(torch, pd.meta(ref).dtype)
    return torch.frombuffer(bytearray(pd.draft.constant_data[ref.constant]), dtype=dtype).reshape(c.sizes)


def _gemm_place(pd: ProgramDraft, node: Node, out: TensorMeta, chain: TensorMeta, steps: list[_Step]):
    """How the GEMM's epilogue reads a chain operand (`elementwise.Place`): its strides in the GEMM's output shape
    ``out`` (the views to the chain's layout ``chain`` undone), read like the output (a view of the operand's
    value) or per column (a [N] view, or a [N] constant of the column's values)."""
    n = out.sizes[-1]

    def place(v: TensorMeta, ref: Operand) -> Placement | None:
        dtype = TRITON_PTR_DTYPE[v.dtype]
        if len(v.sizes) > len(chain.sizes):
            return None
        strides = _undo_views(list(chain.sizes), list(expand_strides(v.sizes, v.strides, chain.sizes)), steps)
        if strides is None:
            return None
        if isinstance(ref, ValueRef) and same_addresses(list(out.sizes), strides, list(out.strides)):
            op = gemm_epilogue_operand(out.sizes, out.strides, dtype, out.sizes, out.strides)
            return (
                None if op is None else (op, lambda: ValueRef(pd.view(ref.value, list(out.sizes), strides)))
            )
        per_column = all(st == 0 or s == 1 for s, st in zip(out.sizes[:-1], strides[:-1], strict=True))
        if not per_column:
            return None
        col_sizes, col_strides = ([n], [strides[-1]]) if strides[-1] != 0 and n > 1 else ([1], [1])
        op = gemm_epilogue_operand(col_sizes, col_strides, dtype, out.sizes, out.strides)
        if op is None:
            return None
        if isinstance(ref, ValueRef):
            return op, lambda: ValueRef(pd.view(ref.value, col_sizes, col_strides))

        def column_constant() -> Operand:
            full = _undo_views_of(_constant_tensor(pd, ref).expand(list(chain.sizes)), steps)
            values = full.reshape(-1, n)[0, : col_sizes[0]].contiguous()
            return ConstantRef(add_constant(pd.draft, values, f"epilogue operand of '{node.name}'"))

        return op, column_constant

    return place


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


def _rounded_weight_role(node: Node, pd: ProgramDraft) -> tuple[str, bool]:
    """The role of the node's ``w`` operand, and whether the kernel feeds TF32 tensor cores rounded operands: then a
    constant ``w`` is stored rounded (`round_to_tf32`, what the kernel would do to every tile it loads) and the
    kernel rounds only ``a``."""
    with node_errors(node):
        spec = gemm_spec(node, pd.draft.options.allow_tf32)
    return spec.w.role, rounds_to_tf32(spec)


def draft_gemm(
    node: Node,
    pd: ProgramDraft,
    chain_end: Node | None = None,
    fused_into: dict[Node, Node] | None = None,
    views: Sequence[Node] = (),
) -> bool:
    """Draft one addmm, mm, bmm or linear node; returns whether it computes the elementwise chain ending at
    ``chain_end`` (which reads its result through ``views`` alone; ``fused_into`` is `plan_chains`'s) in its
    epilogue. When not, the caller drafts the views and the chain."""
    refs: dict[str, ValueRef | ConstantRef] = {}
    metas: list[TensorMeta | None] = []
    round_w = False  # a folded norm's weight is the drafter's own constant, rounded by the kernel
    norm = pd.norm_prologues.get(node)
    folded = fold_norm(norm, pd) if norm is not None else None
    if folded is not None:
        refs = {f"in{i}": ref for i, ref in enumerate(folded.operands(is_linear(node)))}
    else:
        w_role, round_w = _rounded_weight_role(node, pd)
        for i, operand in enumerate(gemm_operands(node)):
            if operand is None:
                metas.append(None)
                continue
            prepare = round_to_tf32 if f"in{i}" == w_role and round_w else None
            refs[f"in{i}"] = pd.operand(operand, node, f"operand {i}", prepare)
            metas.append(pd.meta(refs[f"in{i}"]))
    with node_errors(node):
        spec = folded.spec(node, pd) if folded else gemm_spec(node, pd.draft.options.allow_tf32, metas)
    if round_w and isinstance(refs[spec.w.role], ConstantRef):
        spec = spec.with_rounded_w()
    support = spec.supports()
    if not support:
        raise CudaTritonPreprocessError(f"{describe(node)}: {support.reason}")
    a = refs[spec.a.role]
    if not isinstance(a, ValueRef):  # the record reads its first matrix as a value (the config declines this)
        raise CudaTritonPreprocessError(f"{describe(node)}: its first matrix is a constant of the program")
    fused, covered = None, [*(norm.nodes if norm is not None else ()), node]
    if chain_end is not None:
        out_meta = spec.output()
        through = _through_views(list(out_meta.sizes), list(out_meta.strides), views)
        if through is not None:
            sizes, strides, steps = through
            recorded_end = [int(s) for s in tensor_val(chain_end).stride()]
            if chain_end not in pd.out_index or same_addresses(sizes, strides, recorded_end):
                chain = TensorMeta(tuple(sizes), tuple(strides), spec.dtype)
                place = _gemm_place(pd, node, out_meta, chain, steps)
                result = views[-1] if views else node
                fused = epilogue_chain(chain_end, pd, fused_into or {}, result, chain, place)
    if fused is not None:  # the chain's value is stored; the GEMM writes it through a view in its own shape
        spec = spec.with_epilogue(fused.epilogue)
        chain_sizes = [int(s) for s in tensor_val(chain_end).shape]
        end_value = pd.result(chain_end, chain_sizes, pd.planned_strides(chain_end, list(chain.strides)))
        out = pd.view(end_value, list(spec.out_sizes), list(spec.out_strides))
        covered = [*covered, *views, *fused.covered]
    else:
        out = pd.result(node)  # the layout the node records, which the spec's output strides are
    b, b_sizes = _record_b(pd, node, spec, refs[spec.w.role])
    addmm = aten_overload(node.target) is aten.addmm.default  # the one op with alpha and beta arguments
    alpha, beta = (_scalar(node, "alpha"), _scalar(node, "beta")) if addmm else (1.0, 1.0)
    bias = refs[spec.bias.role] if spec.bias is not None else None  # beta == 0 drops the bias (as ATen)
    epilogue_inputs = list(fused.operands) if fused else []
    record = GemmRecord(
        a=a.value, b=b, bias=bias, output=out, b_sizes=b_sizes, alpha=alpha, beta=beta if bias else 0.0,
        epilogue=fused.steps if fused else [], epilogue_inputs=epilogue_inputs,
        row_norm=folded is not None, norm_eps=folded.eps if folded is not None else 0.0,
    )  # fmt: skip
    roles: dict[str, Arg] = {
        **refs,
        "out": ValueRef(out),
        **{role: NullPtr() for role in EPILOGUE_ROLES},
        **dict(zip(EPILOGUE_ROLES, epilogue_inputs, strict=False)),
        **({COLSUM_ROLE: folded.colsum} if folded is not None else {}),
    }
    pd.add_op(node, covered, record, "gemm", spec, roles)
    return fused is not None


__all__ = ["draft_gemm", "is_epilogue_view"]
