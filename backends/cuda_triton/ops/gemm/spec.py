"""`GemmSpec`: one addmm, mm, bmm or linear, from static metadata only.

Every op is ``out[b] = beta * bias + alpha * (a[b] @ w[b])`` with a [B, M, K] and w [B, K, N] (B = 1 without a
batch), any strides: the edge graph's ``addmm(bias, x, permute_copy(weight))`` of an nn.Linear reads the permuted
weight as a transposed view when the permute is free, a bmm's operands may be expanded (stride 0). ``bias``
broadcasts to [M, N] (addmm's ``self``: [N], [1, N], [M, 1], [M, N], or a scalar-shaped [1]).

``allow_tf32`` (default off, as PyTorch's own matmuls: ``torch.backends.cuda.matmul.allow_tf32`` is False unless
set; docs/gemm.md) lets fp32 run on TF32 tensor cores; the partitioner passes its option.

``w_rounded`` (default off): w holds TF32-rounded values already (a constant rounded at export, preprocess/gemm.py),
so a TF32 kernel rounds only ``a``.

``epilogue`` (default none): an elementwise chain on the result, after the bias and before the one rounding
(conv/epilogue.py: operands like the output or one value per column, `gemm_epilogue_operand`), its operands the
roles ``epilogue1``..``epilogue3``.

``row_norm_eps`` (default None): the GEMM normalises each row of ``a`` over K first, as a layer norm without
weight and bias with this epsilon (a layer norm's weight and bias are folded into ``w`` and ``bias`` by the
drafter, preprocess/gemm_norm.py); the kernel computes the rows' statistics in its K loop, so the whole K stays
in one program (no split-K, no TMA schedules).

Tensor roles, by the op's argument order: addmm(in0=bias, in1=a, in2=w); mm/bmm(in0=a, in1=w);
linear(in0=x, in1=weight, in2=bias); the output is "out", the split-K partial sums "workspace".
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from ...conv.epilogue import ConvEpilogue
from ...kernel.launch import Support
from ..data_movement.views import view_strides
from ..tensor_meta import TensorMeta, float_dtype_support, max_offset, needs_int64
from .shape import linear_out_shape_and_stride, matmul_out_shape_and_stride

GRID_Y_LIMIT = 65535  # the batch is the grid's y dimension


@dataclass(frozen=True)
class Operand:
    """A 3-D [B, rows, cols] view of one tensor argument: its role, sizes and strides (B stride 0 if unbatched)."""

    role: str
    sizes: tuple[int, int, int]
    strides: tuple[int, int, int]


@dataclass(frozen=True)
class GemmSpec:
    """``op`` names the edge op (messages); ``a``, ``w`` the matrix operands, ``bias`` the broadcast addend
    ([1, M, N]-shaped strides, 0 where it broadcasts) or None; ``out_sizes``/``out_strides`` the output (any
    layout: the kernel writes [B, M, N] through ``out_view``)."""

    op: str
    dtype: str
    a: Operand
    w: Operand
    bias: Operand | None
    out_sizes: tuple[int, ...]
    out_strides: tuple[int, ...]
    out_view: tuple[int, int, int]  # the output's strides as [B, M, N]
    alpha: float = 1.0
    beta: float = 1.0
    allow_tf32: bool = False
    problem: str = ""  # why the arguments cannot run here ("" when they can): supports() reports it
    epilogue: ConvEpilogue | None = None
    row_norm_eps: float | None = None
    w_rounded: bool = False

    # -- construction from the edge ops' arguments -------------------------------------------------------
    @staticmethod
    def addmm(
        bias: TensorMeta,
        a: TensorMeta,
        w: TensorMeta,
        beta: float = 1.0,
        alpha: float = 1.0,
        allow_tf32: bool = False,
    ) -> GemmSpec:
        return _matmul("addmm", a, w, bias, float(alpha), float(beta), allow_tf32, ("in1", "in2", "in0"))

    @staticmethod
    def mm(a: TensorMeta, w: TensorMeta, allow_tf32: bool = False) -> GemmSpec:
        return _matmul("mm", a, w, None, 1.0, 0.0, allow_tf32, ("in0", "in1", ""))

    @staticmethod
    def bmm(a: TensorMeta, w: TensorMeta, allow_tf32: bool = False) -> GemmSpec:
        return _matmul("bmm", a, w, None, 1.0, 0.0, allow_tf32, ("in0", "in1", ""))

    @staticmethod
    def linear(x: TensorMeta, weight: TensorMeta, bias: TensorMeta | None = None, allow_tf32: bool = False):
        """``linear(x, weight, bias)``: x [..., K] (its leading dims must merge into one without a copy), weight
        [N, K] (read transposed), bias [N]."""
        problem = ""
        if x.rank < 1 or weight.rank != 2:
            raise ValueError(
                f"linear: input {list(x.sizes)} and weight {list(weight.sizes)} must be [..., K] and [N, K]"
            )
        k = x.sizes[-1]
        m = x.numel // k if k else 0
        flat = view_strides(list(x.sizes), list(x.strides), [m, k]) if x.rank != 2 else list(x.strides)
        if len(flat) != 2:
            problem = (
                f"linear: the input's leading dims {list(x.sizes[:-1])} do not merge into one without a copy"
            )
            flat = [k, 1]
        a = TensorMeta((m, k), tuple(flat), x.dtype)
        wt = TensorMeta(
            (weight.sizes[1], weight.sizes[0]), (weight.strides[1], weight.strides[0]), weight.dtype
        )
        sizes, strides = linear_out_shape_and_stride(list(x.sizes), list(weight.sizes))
        spec = _matmul("linear", a, wt, bias, 1.0, 1.0, allow_tf32, ("in0", "in1", "in2"))
        return GemmSpec(
            spec.op, spec.dtype, spec.a, spec.w, spec.bias, tuple(sizes), tuple(strides), spec.out_view,
            spec.alpha, spec.beta, spec.allow_tf32, problem or spec.problem,
        )  # fmt: skip

    def with_out_strides(self, strides: tuple[int, ...]) -> GemmSpec:
        """The same GEMM writing another output layout ([M, N] or [B, M, N] outputs only)."""
        view = (0, *strides) if len(strides) == 2 else tuple(strides)
        return replace(self, out_strides=tuple(strides), out_view=view)

    def with_epilogue(self, epilogue: ConvEpilogue | None) -> GemmSpec:
        """The same GEMM applying ``epilogue`` to its result."""
        return replace(self, epilogue=epilogue)

    def with_rounded_w(self) -> GemmSpec:
        """The same GEMM whose ``w`` holds TF32-rounded values already."""
        return replace(self, w_rounded=True)

    def with_row_norm(self, eps: float | None) -> GemmSpec:
        """The same GEMM normalising the rows of ``a`` first (None: not)."""
        return replace(self, row_norm_eps=None if eps is None else float(eps))

    # -- derived ------------------------------------------------------------------------------------------
    @property
    def batch(self) -> int:
        return self.a.sizes[0]

    @property
    def m(self) -> int:
        return self.a.sizes[1]

    @property
    def k(self) -> int:
        return self.a.sizes[2]

    @property
    def n(self) -> int:
        return self.w.sizes[2]

    def output(self) -> TensorMeta:
        return TensorMeta(self.out_sizes, self.out_strides, self.dtype)

    def needs_int64(self) -> bool:
        """Whether an offset into an operand or the output, or the split-K workspace's size, leaves int32."""
        out = self.output()
        extents = [max_offset(op.sizes, op.strides) + 1 for op in (self.a, self.w)]
        extents.append(max_offset(out.sizes, out.strides) + 1)
        if self.bias is not None:
            extents.append(max_offset(self.bias.sizes, self.bias.strides) + 1)
        return needs_int64(*extents, self.batch * self.m * self.n)

    def supports(self) -> Support:
        if self.problem:
            return Support.no(self.problem)
        if min(self.batch, self.m, self.n, self.k) == 0:
            return Support.no(f"{self.op}: empty matrices are not supported")
        if self.batch > GRID_Y_LIMIT:
            return Support.no(f"{self.op}: batches of more than {GRID_Y_LIMIT} matrices are not supported")
        if len(self.out_view) != 3:
            return Support.no(f"{self.op}: the output layout must be given for every dim")
        if self.row_norm_eps is not None and not (
            self.row_norm_eps >= 0.0 and math.isfinite(self.row_norm_eps)
        ):
            return Support.no(
                f"{self.op}: a row norm's epsilon must be finite and >= 0, not {self.row_norm_eps}"
            )
        return Support.yes()


def _as_3d(op: str, name: str, t: TensorMeta, role: str) -> Operand:
    if t.rank == 2:
        return Operand(role, (1, t.sizes[0], t.sizes[1]), (0, t.strides[0], t.strides[1]))
    if t.rank == 3:
        return Operand(role, (t.sizes[0], t.sizes[1], t.sizes[2]), (t.strides[0], t.strides[1], t.strides[2]))
    raise ValueError(f"{op}: {name} must be a matrix or a batch of matrices, got sizes {list(t.sizes)}")


def _broadcast_bias(op: str, bias: TensorMeta, m: int, n: int, role: str) -> Operand | str:
    """bias as [1, M, N] strides (0 where it broadcasts), or the reason it does not broadcast."""
    if bias.rank > 2:
        return f"{op}: a bias of {bias.rank} dims is not supported"
    sizes = (1,) * (2 - bias.rank) + bias.sizes
    strides = (0,) * (2 - bias.rank) + bias.strides
    out = []
    for size, stride, want in zip(sizes, strides, (m, n), strict=True):
        if size not in (1, want):
            return f"{op}: bias sizes {list(bias.sizes)} do not broadcast to [{m}, {n}]"
        out.append(stride if size == want and want != 1 else 0)
    return Operand(role, (1, m, n), (0, out[0], out[1]))


def _matmul(op, a, w, bias, alpha, beta, allow_tf32, roles) -> GemmSpec:
    a3, w3 = _as_3d(op, "the first matrix", a, roles[0]), _as_3d(op, "the second matrix", w, roles[1])
    problem = ""
    if a.rank != w.rank:
        problem = f"{op}: operands of {a.rank} and {w.rank} dims"
    elif a3.sizes[0] != w3.sizes[0] or a3.sizes[2] != w3.sizes[1]:
        problem = f"{op}: sizes {list(a.sizes)} and {list(w.sizes)} cannot be multiplied"
    dtypes = [a, w] + ([bias] if bias is not None else [])
    dtype_ok = float_dtype_support(op, *dtypes)
    if not dtype_ok:
        problem = problem or dtype_ok.reason
    elif len({t.dtype for t in dtypes}) != 1:
        problem = problem or f"{op}: operands of different dtypes {sorted({t.dtype for t in dtypes})}"
    m, n = a3.sizes[1], w3.sizes[2]
    b3 = None
    if bias is not None and beta != 0.0:
        b3 = _broadcast_bias(op, bias, m, n, roles[2])
        if isinstance(b3, str):
            problem, b3 = problem or b3, None
    sizes, strides = matmul_out_shape_and_stride(list(a.sizes), list(w.sizes))
    view = (0, *strides) if len(strides) == 2 else tuple(strides)
    return GemmSpec(
        op, a.dtype, a3, w3, b3, tuple(sizes), tuple(strides), view, alpha, beta, bool(allow_tf32), problem
    )
