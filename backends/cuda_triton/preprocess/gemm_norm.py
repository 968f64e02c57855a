"""A layer norm that only a GEMM reads, folded into that GEMM: no norm kernel, no normalised tensor in memory.

ConvNeXt's blocks (and a transformer's pre-norm MLPs) run ``linear(layer_norm(x))``. With the norm over the last
dim only, ``layer_norm(x) = xhat * gamma + beta`` where ``xhat = (x - mean) / sqrt(var + eps)`` per row, so

    layer_norm(x) @ W + bias = xhat @ (gamma[:, None] * W) + (bias + beta @ W)

The drafter stores the scaled weight and the shifted bias as the GEMM's constants, and the GEMM normalises the
rows of ``x`` itself (`GemmSpec.row_norm_eps`: the statistics come from the A tiles its K loop loads, and the
epilogue applies them). Taken when: the norm is over one (the last) dim, its weight and bias are constants or
absent, only its first output is read, through reshapes (and permutes that move only dims of size 1) that
nothing else reads,
by the first matrix of an addmm (alpha = beta = 1), an mm (a linear without bias; it gains one when the norm
has a bias) or a linear whose weight and bias are constants, and the
norm's input can be viewed as that matrix without a copy (`claim_norm`, once the input is drafted).
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch.fx import Node

from ..conv.binding import aten_overload
from ..ops.data_movement.views import view_strides
from ..ops.gemm import GemmSpec, column_sums
from ..partition.config.data_movement import RESHAPES
from ..partition.config.gemm import first_matrix, gemm_spec
from ..partition.config.nodes import bound_arguments
from ..partition.config.norm import LAYER_NORM
from ..serialization import ConstantRef, ValueRef
from ..utils.graph import tensor_val
from .draft import add_constant
from .op_draft import ProgramDraft

aten = torch.ops.aten
_GEMMS = (aten.addmm.default, aten.mm.default, aten.linear.default)


@dataclass(frozen=True)
class NormPrologue:
    """A layer norm ``norm`` folded into the GEMM ``gemm``: ``nodes`` are the norm, its first output's getitem and
    the reshapes between it and the GEMM's first matrix (drafted by nothing: the GEMM covers them)."""

    norm: Node
    gemm: Node
    nodes: tuple[Node, ...]

    @property
    def eps(self) -> float:
        return float(bound_arguments(self.norm)["eps"])


def plan_norm_prologues(calls: Sequence[Node], pd: ProgramDraft) -> dict[Node, NormPrologue]:
    """{layer norm: its prologue} for every layer norm the rules above let a GEMM fold."""
    out: dict[Node, NormPrologue] = {}
    for node in calls:
        if aten_overload(node.target) is LAYER_NORM and node not in pd.foldable:
            prologue = _norm_prologue(node, pd)
            if prologue is not None:
                out[node] = prologue
    return out


def _norm_prologue(norm: Node, pd: ProgramDraft) -> NormPrologue | None:
    args = bound_arguments(norm)
    if len(args["normalized_shape"]) != 1:
        return None
    if any(args.get(p) is not None and not pd.is_constant(args[p]) for p in ("weight", "bias")):
        return None
    readers = list(norm.users)
    if not all(u.target is operator.getitem and u.args[1] == 0 for u in readers) or len(readers) != 1:
        return None  # mean or rstd read too, or two readers
    result, nodes = readers[0], [norm, readers[0]]
    while result not in pd.out_index and len(result.users) == 1:
        (user,) = result.users
        if aten_overload(user.target) not in RESHAPES and not _keeps_element_order(user):
            break
        result = user
        nodes.append(user)
    if result in pd.out_index or len(result.users) != 1:
        return None
    (gemm,) = result.users
    if aten_overload(gemm.target) not in _GEMMS or gemm in pd.foldable or first_matrix(gemm) is not result:
        return None
    k = int(args["normalized_shape"][0])
    if list(tensor_val(result).shape)[-1:] != [k] or tensor_val(result).dim() != 2:
        return None  # the matrix's rows must be the normalised rows
    weight, bias = _weight_and_bias(gemm)
    if not pd.is_constant(weight) or (bias is not None and not pd.is_constant(bias)):
        return None
    n = int(tensor_val(gemm).shape[-1])
    if bias is not None and tensor_val(bias).numel() not in (1, n):
        return None  # a bias per row too: the fold shifts one bias per column
    gemm_args = bound_arguments(gemm)
    if float(gemm_args.get("alpha", 1.0)) != 1.0 or float(gemm_args.get("beta", 1.0)) != 1.0:
        return None
    return NormPrologue(norm, gemm, tuple(nodes))


def _keeps_element_order(node: Node) -> bool:
    """A permute that only moves dims of size 1 (ConvNeXt's classifier: [N, 1, 1, C] back to [N, C, 1, 1]): the
    elements keep their order, so the permuted tensor is a reshape of its input."""
    if aten_overload(node.target) is not aten.permute_copy.default:
        return False
    sizes = list(tensor_val(node.args[0]).shape)  # type: ignore[arg-type]
    dims = [d % len(sizes) for d in node.args[1]]  # type: ignore[union-attr]
    moved = [d for d in dims if sizes[d] != 1]
    return moved == sorted(moved)


def claim_norm(prologue: NormPrologue, pd: ProgramDraft) -> bool:
    """Whether the GEMM takes the norm (its input, drafted by now, reads as the GEMM's first matrix without a
    copy); records the claim for `fold_norm`. When not, the caller drafts the norm and its reshapes."""
    if _first_matrix_view(prologue, pd) is None:
        return False
    pd.norm_prologues[prologue.gemm] = prologue
    return True


def _first_matrix_view(prologue: NormPrologue, pd: ProgramDraft) -> tuple[int, list[int], list[int]] | None:
    """(the norm input's value, the matrix's sizes, its strides over the input's bytes), or None."""
    x = bound_arguments(prologue.norm)["input"]
    if not isinstance(x, Node) or x not in pd.value_of:
        return None
    stored = pd.meta(ValueRef(pd.value_of[x]))
    sizes = [int(s) for s in tensor_val(first_matrix(prologue.gemm)).shape]
    strides = view_strides(list(stored.sizes), list(stored.strides), sizes)
    if len(strides) != len(sizes):
        return None
    return pd.value_of[x], sizes, strides


@dataclass(frozen=True)
class FoldedNorm:
    """What the GEMM reads in place of its operands: the norm's input as its first matrix, the weight scaled
    by the norm's weight and the bias shifted by its bias (constants, in `gemm_operands` order)."""

    a: ValueRef
    weight: ConstantRef
    bias: ConstantRef
    colsum: ConstantRef  # the scaled weight's column sums, which the kernel's epilogue reads
    eps: float

    def operands(self, linear: bool) -> list[ValueRef | ConstantRef]:
        """The operands of the addmm (``linear``: the linear) the GEMM computes, by role "in0", "in1", "in2"."""
        return [self.a, self.weight, self.bias] if linear else [self.bias, self.a, self.weight]

    def spec(self, node: Node, pd: ProgramDraft) -> GemmSpec:
        """The GEMM's spec with the norm folded in: an mm becomes an addmm, as the fold gives it a bias."""
        metas = [pd.meta(op) for op in self.operands(is_linear(node))]
        allow_tf32 = pd.draft.options.allow_tf32
        if is_linear(node):
            spec = gemm_spec(node, allow_tf32, metas)
        else:
            out = tensor_val(node)
            spec = GemmSpec.addmm(*metas, allow_tf32=allow_tf32).with_out_strides(tuple(out.stride()))
        return spec.with_row_norm(self.eps)


def _weight_and_bias(gemm: Node) -> tuple[Node, Node | None]:
    """The GEMM's second matrix (a linear's weight) and its bias node (None: none)."""
    args = bound_arguments(gemm)
    if is_linear(gemm):
        return args["weight"], args.get("bias")
    return args["mat2"], args["self"] if aten_overload(gemm.target) is aten.addmm.default else None


def is_linear(node: Node) -> bool:
    return aten_overload(node.target) is aten.linear.default


def fold_norm(prologue: NormPrologue, pd: ProgramDraft) -> FoldedNorm:
    """The claimed norm folded into its GEMM's constants (`claim_norm` first)."""
    view = _first_matrix_view(prologue, pd)
    assert view is not None, "fold_norm needs a claimed norm"
    value, sizes, strides = view
    norm_args = bound_arguments(prologue.norm)
    w_node, bias_node = _weight_and_bias(prologue.gemm)
    kn = not is_linear(prologue.gemm)  # addmm and mm read a [K, N] matrix, linear an [N, K] weight
    w = pd.constant(w_node)
    dtype = w.dtype
    w_kn = (w if kn else w.t()).double()
    k, n = w_kn.shape
    gamma = _constant_or(pd, norm_args.get("weight"), torch.ones(k, dtype=torch.float64))
    beta = _constant_or(pd, norm_args.get("bias"), torch.zeros(k, dtype=torch.float64))
    bias = _constant_or(pd, bias_node, torch.zeros(n, dtype=torch.float64)).reshape(-1).expand(n)
    w_folded = gamma[:, None] * w_kn
    stored_w = (w_folded if kn else w_folded.t()).to(dtype).contiguous()
    colsum = column_sums(stored_w if kn else stored_w.t())  # of the weight as the kernel reads it
    what = f"'{prologue.gemm.name}' with '{prologue.norm.name}' folded in"
    return FoldedNorm(
        a=ValueRef(pd.view(value, sizes, strides)),
        weight=ConstantRef(add_constant(pd.draft, stored_w, f"weight of {what}")),
        bias=ConstantRef(add_constant(pd.draft, (bias + beta @ w_kn).to(dtype), f"bias of {what}")),
        colsum=ConstantRef(add_constant(pd.draft, colsum, f"column sums of {what}")),
        eps=prologue.eps,
    )


def _constant_or(pd: ProgramDraft, node: object, default: torch.Tensor) -> torch.Tensor:
    return default if node is None else pd.constant(node).double()  # type: ignore[arg-type]


__all__ = ["FoldedNorm", "NormPrologue", "claim_norm", "fold_norm", "plan_norm_prologues"]
