"""Kind 1: a fused chain of elementwise ops over broadcast inputs. Shape rule:
`cuda_triton.serialization.checks.elementwise.broadcast_sizes` over every input."""

from __future__ import annotations

from dataclasses import dataclass

from ..checks.elementwise import broadcast_sizes
from ..encoding import Reader, check
from .base import ConstantRef, Operand, OpRecord, RecordParts, Step, ValueRef, tensor_operands
from .context import RecordContext


@dataclass
class ElementwiseRecord(OpRecord):
    """inputs: the tensor operands (`FromInput(i)` in a step is ``inputs[i]``); the output is the last step's result."""

    KIND = 1
    KIND_NAME = "elementwise"
    FIXED_INPUTS = 0
    HAS_RESULT = False

    inputs: list[ValueRef | ConstantRef]
    steps: list[Step]
    output: int

    def operands(self) -> list[Operand]:
        return list(self.inputs)

    def results(self) -> list[int]:
        return [self.output]

    def fused_steps(self) -> list[Step]:
        return self.steps

    @classmethod
    def decode(cls, params: Reader, parts: RecordParts) -> ElementwiseRecord:
        return ElementwiseRecord(
            inputs=tensor_operands(parts.inputs, "elementwise inputs"), steps=parts.steps,
            output=parts.single_output("elementwise"), **parts.common,
        )  # fmt: skip

    def check(self, ctx: RecordContext, where: str) -> None:
        check(len(self.inputs) >= 1, f"{where}: an elementwise record needs at least one input")
        check(len(self.steps) >= 1, f"{where}: an elementwise record needs at least one step")
        sizes: list[int] = []
        for op in self.inputs:
            sizes = ctx.rule(where, broadcast_sizes, sizes, ctx.sizes(op))
        ctx.expect_sizes(where, "output", ctx.value(self.output).sizes, sizes)
