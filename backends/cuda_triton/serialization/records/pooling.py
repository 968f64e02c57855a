"""Kind 3: max / avg / adaptive avg pooling over 1 to 3 spatial dims, with an optional fused epilogue. Shape rule:
`cuda_triton.serialization.checks.pooling.pool_record_sizes`: the parameters, then the pooling family's
`out_shape_and_stride` (its sizes; the output's strides are the plan's)."""

from __future__ import annotations

from dataclasses import dataclass, field

from ...ops.pooling import shape
from ..checks.pooling import pool_record_sizes
from ..encoding import Reader, Writer, check
from .base import EpilogueRecord, Operand, RecordParts, ValueRef, read_code, value_operand
from .context import RecordContext

POOL_OPS = {"max": shape.MAX_POOL, "avg": shape.AVG_POOL, "adaptive_avg": shape.ADAPTIVE_AVG_POOL}


@dataclass
class PoolingRecord(EpilogueRecord):
    """inputs ``[input, *epilogue_inputs]``. max / avg: kernel, stride, padding, dilation (one entry per spatial
    dim; avg: dilation all 1); adaptive avg: output_size."""

    KIND = 3
    KIND_NAME = "pooling"

    op: str  # "max" | "avg" | "adaptive_avg"
    input: int
    output: int
    kernel: list[int] = field(default_factory=list)
    stride: list[int] = field(default_factory=list)
    padding: list[int] = field(default_factory=list)
    dilation: list[int] = field(default_factory=list)
    output_size: list[int] = field(default_factory=list)
    ceil_mode: bool = False
    count_include_pad: bool = False
    divisor_override: int = 0  # avg only; 0: none

    def fixed_operands(self) -> list[Operand]:
        return [ValueRef(self.input)]

    def encode_params(self, w: Writer) -> None:
        w.u8(POOL_OPS[self.op])
        for dims in (self.kernel, self.stride, self.padding, self.dilation, self.output_size):
            w.i64s(dims)
        w.flag(self.ceil_mode)
        w.flag(self.count_include_pad)
        w.i64(self.divisor_override)

    @classmethod
    def decode(cls, params: Reader, parts: RecordParts) -> PoolingRecord:
        op = read_code(params, POOL_OPS, "pooling op")
        kernel, stride, padding, dilation, output_size = (params.dims("pooling argument") for _ in range(5))
        ceil_mode = params.flag("ceil_mode")
        count_include_pad = params.flag("count_include_pad")
        divisor_override = params.i64()
        return PoolingRecord(
            op=op, input=value_operand(parts.inputs[0], "pooling input"),
            output=parts.single_output("pooling"), kernel=kernel, stride=stride, padding=padding, dilation=dilation,
            output_size=output_size, ceil_mode=ceil_mode, count_include_pad=count_include_pad,
            divisor_override=divisor_override, **parts.with_epilogue(1, "pooling"),
        )  # fmt: skip

    def check(self, ctx: RecordContext, where: str) -> None:
        check(self.op in POOL_OPS, f"{where}: bad pooling op {self.op!r}")
        inp, out = ctx.input_and_output(where, self.input, self.output)
        sizes = ctx.rule(
            where, pool_record_sizes, POOL_OPS[self.op], list(inp.sizes), list(inp.strides), list(self.kernel),
            list(self.stride), list(self.padding), list(self.dilation), list(self.output_size), self.ceil_mode,
            self.count_include_pad, self.divisor_override,
        )  # fmt: skip
        ctx.expect_sizes(where, "output", out.sizes, sizes)
