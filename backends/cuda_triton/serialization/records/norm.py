"""Kind 5: normalisation (inference batch norm, layer norm, group norm, softmax, log-softmax), with an optional
fused epilogue. Shape rule: `cuda_triton.serialization.checks.norm.norm_out_sizes`."""

from __future__ import annotations

from dataclasses import dataclass

from ..checks import norm as shape
from ..encoding import Reader, check, finite
from .base import ConstantRef, EpilogueRecord, Operand, RecordParts, ValueRef, value_operand
from .context import RecordContext
from .params import code, f64, i64

NORM_OPS = {
    "batch_norm": shape.BATCH_NORM,
    "layer_norm": shape.LAYER_NORM,
    "group_norm": shape.GROUP_NORM,
    "softmax": shape.SOFTMAX,
    "log_softmax": shape.LOG_SOFTMAX,
}


@dataclass
class NormRecord(EpilogueRecord):
    """inputs ``[input, weight, bias, mean, var, *epilogue_inputs]``, the four parameters values, constants or
    None (a plan that prepares batch norm as scale and shift passes them as weight and bias)."""

    KIND = 5
    KIND_NAME = "norm"
    FIXED_INPUTS = 5
    PARAMS = (code("op", NORM_OPS, "normalisation op"), i64("dim"), i64("groups"), f64("eps"))

    op: str  # "batch_norm" | "layer_norm" | "group_norm" | "softmax" | "log_softmax"
    input: int
    output: int
    dim: int  # batch / group norm: 1; layer norm: the first normalised dim; softmax: its dim
    groups: int = 0  # group norm only
    eps: float = 0.0
    weight: ValueRef | ConstantRef | None = None
    bias: ValueRef | ConstantRef | None = None
    mean: ValueRef | ConstantRef | None = None
    var: ValueRef | ConstantRef | None = None

    def fixed_operands(self) -> list[Operand]:
        return [ValueRef(self.input), self.weight, self.bias, self.mean, self.var]

    @classmethod
    def decode(cls, params: Reader, parts: RecordParts) -> NormRecord:
        fields = cls.read_params(params)
        inputs = parts.inputs
        return NormRecord(
            **fields, input=value_operand(inputs[0], "norm input"), output=parts.single_output("norm"),
            weight=inputs[1], bias=inputs[2], mean=inputs[3], var=inputs[4], **parts.with_epilogue(5, "norm"),
        )  # fmt: skip

    def check(self, ctx: RecordContext, where: str) -> None:
        check(self.op in NORM_OPS, f"{where}: bad normalisation op {self.op!r}")
        check(finite(self.eps) and self.eps >= 0, f"{where}: eps must be finite and >= 0")
        inp, out = ctx.input_and_output(where, self.input, self.output)
        sizes = ctx.rule(
            where, shape.norm_out_sizes, NORM_OPS[self.op], list(inp.sizes), self.dim, self.groups
        )
        ctx.expect_sizes(where, "output", out.sizes, sizes)
