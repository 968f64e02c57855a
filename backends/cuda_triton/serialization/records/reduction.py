"""Kind 2: a reduction (sum, mean, amax, ...) over a set of dims, with an optional fused epilogue. Shape rule:
`cuda_triton.serialization.checks.reduction.reduction_out_sizes`."""

from __future__ import annotations

from dataclasses import dataclass

from ..checks.reduction import reduction_out_sizes
from ..encoding import MAX_OP_NAME, ascii_ok, check
from .base import UnaryEpilogueRecord
from .context import RecordContext
from .params import dims, flag, string


@dataclass
class ReductionRecord(UnaryEpilogueRecord):
    """inputs ``[input, *epilogue_inputs]``; ``dims`` strictly increasing."""

    KIND = 2
    KIND_NAME = "reduction"
    PARAMS = (string("op", "reduction op", MAX_OP_NAME), dims("dims", "reduced dims"), flag("keepdim"))

    op: str  # the reduction family's name: "sum", "mean", "amax", ...
    dims: list[int]
    keepdim: bool
    input: int
    output: int

    def check(self, ctx: RecordContext, where: str) -> None:
        check(ascii_ok(self.op, MAX_OP_NAME, allow_empty=False), f"{where}: bad reduction op {self.op!r}")
        check(len(self.dims) <= 8, f"{where}: too many reduced dims")
        sizes = ctx.rule(
            where, reduction_out_sizes, ctx.value(self.input).sizes, list(self.dims), self.keepdim
        )
        ctx.expect_sizes(where, "output", ctx.value(self.output).sizes, sizes)
