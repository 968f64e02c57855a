"""Kind 3: max / avg / adaptive avg pooling over 1 to 3 spatial dims, with an optional fused epilogue. Shape rule:
`cuda_triton.serialization.checks.pooling.pool_record_sizes`: the parameters, then the pooling family's
`out_shape_and_stride` (its sizes; the output's strides are the plan's)."""

from __future__ import annotations

from dataclasses import dataclass, field

from ...ops.pooling import shape
from ..checks.pooling import pool_record_sizes
from ..encoding import check
from .base import UnaryEpilogueRecord
from .context import RecordContext
from .params import code, dims, flag, i64

POOL_OPS = {"max": shape.MAX_POOL, "avg": shape.AVG_POOL, "adaptive_avg": shape.ADAPTIVE_AVG_POOL}


@dataclass
class PoolingRecord(UnaryEpilogueRecord):
    """inputs ``[input, *epilogue_inputs]``. max / avg: kernel, stride, padding, dilation (one entry per spatial
    dim; avg: dilation all 1); adaptive avg: output_size."""

    KIND = 3
    KIND_NAME = "pooling"
    PARAMS = (
        code("op", POOL_OPS, "pooling op"),
        *(
            dims(name, "pooling argument")
            for name in ("kernel", "stride", "padding", "dilation", "output_size")
        ),
        flag("ceil_mode"),
        flag("count_include_pad"),
        i64("divisor_override"),
    )

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

    def check(self, ctx: RecordContext, where: str) -> None:
        check(self.op in POOL_OPS, f"{where}: bad pooling op {self.op!r}")
        inp, out = ctx.input_and_output(where, self.input, self.output)
        sizes = ctx.rule(
            where, pool_record_sizes, POOL_OPS[self.op], list(inp.sizes), list(inp.strides), list(self.kernel),
            list(self.stride), list(self.padding), list(self.dilation), list(self.output_size), self.ceil_mode,
            self.count_include_pad, self.divisor_override,
        )  # fmt: skip
        ctx.expect_sizes(where, "output", out.sizes, sizes)
