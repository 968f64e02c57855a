"""Kind 3: max / avg / adaptive avg pooling over 1 to 3 spatial dims, with an optional fused epilogue. Shape rule:
`cuda_triton.ops.pooling.shape.out_shape_and_stride` (its sizes; the output's strides are the plan's)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ...ops.pooling import shape
from ..encoding import Reader, Writer, check, u32_ok
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

POOL_OPS = {"max": shape.MAX_POOL, "avg": shape.AVG_POOL, "adaptive_avg": shape.ADAPTIVE_AVG_POOL}
PARAM_LIMIT = 1 << 31  # kernel, stride, padding, dilation and adaptive output sizes are below this
_POOL_NAMES = {code: name for name, code in POOL_OPS.items()}


@dataclass
class PoolingRecord(OpRecord):
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
    epilogue: list[Step] = field(default_factory=list)
    epilogue_inputs: list[ValueRef | ConstantRef] = field(default_factory=list)

    def operands(self) -> list[Operand]:
        return [ValueRef(self.input), *self.epilogue_inputs]

    def results(self) -> list[int]:
        return [self.output]

    def fused_steps(self) -> list[Step]:
        return self.epilogue

    def encode_params(self, w: Writer) -> None:
        w.u8(POOL_OPS[self.op])
        for dims in (self.kernel, self.stride, self.padding, self.dilation, self.output_size):
            w.i64s(dims)
        w.flag(self.ceil_mode)
        w.flag(self.count_include_pad)
        w.i64(self.divisor_override)

    @classmethod
    def decode(
        cls,
        params: Reader,
        inputs: list[Operand],
        outputs: list[int],
        steps: list[Step],
        common: dict[str, Any],
    ) -> PoolingRecord:
        code = params.u8()
        check(code in _POOL_NAMES, f"bad pooling op code {code}")
        kernel, stride, padding, dilation, output_size = (params.dims("pooling argument") for _ in range(5))
        ceil_mode = params.flag("ceil_mode")
        count_include_pad = params.flag("count_include_pad")
        divisor_override = params.i64()
        expect_count("pooling outputs", outputs, 1)
        return PoolingRecord(
            op=_POOL_NAMES[code], input=value_operand(inputs[0], "pooling input"), output=outputs[0],
            kernel=kernel, stride=stride, padding=padding, dilation=dilation, output_size=output_size,
            ceil_mode=ceil_mode, count_include_pad=count_include_pad, divisor_override=divisor_override,
            epilogue=steps, epilogue_inputs=tensor_operands(inputs[1:], "pooling epilogue inputs"), **common,
        )  # fmt: skip

    def check(self, ctx: RecordContext, where: str) -> None:
        check(self.op in POOL_OPS, f"{where}: bad pooling op {self.op!r}")
        inp, out = ctx.value(self.input), ctx.value(self.output)
        check(inp.dtype == out.dtype, f"{where}: input is {inp.dtype} but output is {out.dtype}")
        adaptive = self.op == "adaptive_avg"
        n = len(self.output_size if adaptive else self.kernel)
        check(1 <= n <= 3, f"{where}: {n} spatial dims")
        check(len(inp.sizes) in (n + 1, n + 2), f"{where}: input rank {len(inp.sizes)} for a {n}-D pool")
        per_dim = (self.output_size,) if adaptive else (self.kernel, self.stride, self.dilation)
        check(
            all(u32_ok(x) and 1 <= x < PARAM_LIMIT for d in per_dim for x in d), f"{where}: bad pooling sizes"
        )
        if adaptive:
            check(
                not (self.kernel or self.stride or self.padding or self.dilation),
                f"{where}: adaptive pools take only an output size",
            )
            check(
                not (self.ceil_mode or self.count_include_pad or self.divisor_override),
                f"{where}: adaptive pools take no ceil_mode, count_include_pad or divisor_override",
            )
        else:
            check(
                len(self.stride) == n
                and len(self.padding) == n
                and len(self.dilation) == n
                and not self.output_size,
                f"{where}: kernel, stride, padding and dilation need one entry per spatial dim",
            )
            check(all(u32_ok(p) and p < PARAM_LIMIT for p in self.padding), f"{where}: bad padding")
            check(
                all(
                    2 * p <= d * (k - 1) + 1
                    for p, d, k in zip(self.padding, self.dilation, self.kernel, strict=True)
                ),
                f"{where}: padding must be at most half the kernel",
            )
            if self.op == "avg":
                check(all(d == 1 for d in self.dilation), f"{where}: avg pools have no dilation")
                check(self.divisor_override >= 0, f"{where}: divisor_override must be >= 0 (0: none)")
            else:
                check(
                    not self.count_include_pad and self.divisor_override == 0,
                    f"{where}: max pools take no count_include_pad or divisor_override",
                )
        sizes, _strides = ctx.rule(
            where, shape.out_shape_and_stride, POOL_OPS[self.op], list(inp.sizes), list(inp.strides),
            list(self.output_size if adaptive else self.kernel), list(self.stride), list(self.padding),
            list(self.dilation), self.ceil_mode,
        )  # fmt: skip
        check(all(s >= 1 for s in sizes[len(sizes) - n :]), f"{where}: the pool's output would be empty")
        ctx.expect_sizes(where, "output", out.sizes, sizes)
