"""Kind 4: a matrix product (mm, addmm, bmm, linear), with an optional bias and fused epilogue. Shape rule:
`cuda_triton.serialization.checks.gemm.gemm_record_sizes` (the GEMM family's rule behind the operand checks)."""

from __future__ import annotations

from dataclasses import dataclass

from ..checks.elementwise import broadcasts_to
from ..checks.gemm import gemm_record_sizes
from ..encoding import Reader, check, check_dims, finite
from .base import ConstantRef, EpilogueRecord, Operand, RecordParts, ValueRef, value_operand
from .context import RecordContext
from .params import dims, f64, flag


@dataclass
class GemmRecord(EpilogueRecord):
    """inputs ``[a (value), b (value or constant), bias (value, constant or None), *epilogue_inputs]``;
    out = beta * bias + alpha * a @ b. ``b_sizes``: b's logical (K, N) / (B, K, N) shape (a constant is stored in
    the kernel's prepared layout). ``row_norm``: each row of a is normalised over K first (a layer norm with
    epsilon ``norm_eps``; the norm's weight and bias are already in b and the bias)."""

    KIND = 4
    KIND_NAME = "gemm"
    FIXED_INPUTS = 3
    PARAMS = (dims("b_sizes", "b sizes"), f64("alpha"), f64("beta"), flag("row_norm"), f64("norm_eps"))

    a: int
    b: ValueRef | ConstantRef
    bias: ValueRef | ConstantRef | None
    output: int
    b_sizes: list[int]
    alpha: float = 1.0
    beta: float = 1.0
    row_norm: bool = False
    norm_eps: float = 0.0

    def fixed_operands(self) -> list[Operand]:
        return [ValueRef(self.a), self.b, self.bias]

    @classmethod
    def decode(cls, params: Reader, parts: RecordParts) -> GemmRecord:
        fields = cls.read_params(params)
        inputs = parts.inputs
        check(isinstance(inputs[1], ValueRef | ConstantRef), "gemm b must be a value or a constant")
        return GemmRecord(
            **fields, a=value_operand(inputs[0], "gemm a"), b=inputs[1],  # type: ignore[arg-type]
            bias=inputs[2], output=parts.single_output("gemm"), **parts.with_epilogue(3, "gemm"),
        )  # fmt: skip

    def check(self, ctx: RecordContext, where: str) -> None:
        check(finite(self.alpha) and finite(self.beta), f"{where}: alpha and beta must be finite")
        check(
            finite(self.norm_eps) and self.norm_eps >= 0.0 and (self.row_norm or self.norm_eps == 0.0),
            f"{where}: norm_eps must be finite, >= 0, and 0 without a row norm",
        )
        check_dims(f"{where} b", self.b_sizes, None)
        a, out = ctx.value(self.a), ctx.value(self.output)
        check(a.dtype == out.dtype, f"{where}: a is {a.dtype} but the output is {out.dtype}")
        if isinstance(self.b, ValueRef):
            b = ctx.value(self.b.value)
            check(
                list(b.sizes) == list(self.b_sizes),
                f"{where}: b has sizes {b.sizes}, b_sizes says {self.b_sizes}",
            )
            check(b.dtype == a.dtype, f"{where}: a is {a.dtype} but b is {b.dtype}")
        sizes = ctx.rule(where, gemm_record_sizes, list(a.sizes), list(self.b_sizes))
        ctx.expect_sizes(where, "output", out.sizes, sizes)
        if self.bias is not None:
            check(
                broadcasts_to(ctx.sizes(self.bias), sizes), f"{where}: the bias does not broadcast to {sizes}"
            )
