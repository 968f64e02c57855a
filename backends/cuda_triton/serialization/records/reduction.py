"""Kind 2: a reduction (sum, mean, amax, ...) over a set of dims, with an optional fused epilogue. Shape rule:
`cuda_triton.ops.reduction.shape.reduction_out_sizes`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ...ops.reduction.shape import reduction_out_sizes
from ..encoding import MAX_OP_NAME, Reader, Writer, ascii_ok, check
from .base import (
    ConstantRef,
    Operand,
    OpRecord,
    RecordContext,
    Step,
    ValueRef,
    expect_count,
    tensor_operands,
    value_operand,
)


@dataclass
class ReductionRecord(OpRecord):
    """inputs ``[input, *epilogue_inputs]``; ``dims`` strictly increasing."""

    KIND = 2
    KIND_NAME = "reduction"

    op: str  # the reduction family's name: "sum", "mean", "amax", ...
    dims: list[int]
    keepdim: bool
    input: int
    output: int
    epilogue: list[Step] = field(default_factory=list)
    epilogue_inputs: list[ValueRef | ConstantRef] = field(default_factory=list)

    def operands(self) -> list[Operand]:
        return [ValueRef(self.input), *self.epilogue_inputs]

    def results(self) -> list[int]:
        return [self.output]

    def fused_steps(self) -> list[Step]:
        return self.epilogue

    def encode_params(self, w: Writer) -> None:
        w.string(self.op)
        w.i64s(self.dims)
        w.flag(self.keepdim)

    @classmethod
    def decode(
        cls,
        params: Reader,
        inputs: list[Operand],
        outputs: list[int],
        steps: list[Step],
        common: dict[str, Any],
    ) -> ReductionRecord:
        op = params.string("reduction op", MAX_OP_NAME)
        dims = params.dims("reduced dims")
        keepdim = params.flag("keepdim")
        expect_count("reduction outputs", outputs, 1)
        return ReductionRecord(
            op=op, dims=dims, keepdim=keepdim, input=value_operand(inputs[0], "reduction input"),
            output=outputs[0], epilogue=steps,
            epilogue_inputs=tensor_operands(inputs[1:], "reduction epilogue inputs"), **common,
        )  # fmt: skip

    def check(self, ctx: RecordContext, where: str) -> None:
        check(ascii_ok(self.op, MAX_OP_NAME, allow_empty=False), f"{where}: bad reduction op {self.op!r}")
        check(len(self.dims) <= 8, f"{where}: too many reduced dims")
        sizes = ctx.rule(
            where, reduction_out_sizes, ctx.value(self.input).sizes, list(self.dims), self.keepdim
        )
        ctx.expect_sizes(where, "output", ctx.value(self.output).sizes, sizes)
