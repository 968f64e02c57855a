"""Kind 0: a convolution in canonical form (see `cuda_triton.conv.params.ConvParams`), with an optional fused
epilogue and prologue. Shape rule: `cuda_triton.conv.layout.out_shape_and_stride` (sizes and strides)."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..checks.elementwise import per_image_and_channel
from ..encoding import MAX_STEPS, Reader, Writer, check, check_dims
from .base import (
    ConstantRef,
    EpilogueRecord,
    Operand,
    RecordParts,
    Step,
    ValueRef,
    check_steps,
    constant_operand,
    tensor_operands,
    value_operand,
)
from .context import RecordContext
from .params import dims, flag, i64

ARG_LIMIT = 1 << 31  # stride, padding, dilation, output_padding, groups are below this


def same_layout(sa: list[int], sta: list[int], sb: list[int], stb: list[int]) -> bool:
    """Same sizes and the same strides on every dim of size > 1 (the dims where a stride moves an address)."""
    return list(sa) == list(sb) and all(s <= 1 or x == y for s, x, y in zip(sa, sta, stb, strict=True))


@dataclass
class ConvRecord(EpilogueRecord):
    """inputs ``[input (value), weight (constant), bias (constant or none), *epilogue_inputs, *prologue_inputs]``,
    output one value. ``prologue``: steps applied to the input as it is read (`FromResult` is the input element,
    `FromInput` i the i-th prologue input, each broadcasting per image and channel to the input)."""

    KIND = 0
    KIND_NAME = "conv"
    FIXED_INPUTS = 3
    # Then the prologue: its steps and how many of the inputs are its operands (`encode_params`).
    PARAMS = (
        *(
            dims(name, "conv argument")
            for name in ("stride", "padding_before", "padding_after", "dilation", "output_padding")
        ),
        flag("transposed"),
        i64("groups"),
        dims("weight_sizes", "weight sizes"),
        dims("weight_strides", "weight strides"),
    )

    stride: list[int]
    padding_before: list[int]
    padding_after: list[int]
    dilation: list[int]
    transposed: bool
    output_padding: list[int]
    groups: int
    input: int  # value index
    weight: int  # constant index
    bias: int | None  # constant index or None
    output: int  # value index
    weight_sizes: list[int]  # the weight's ATen shape (layout rule input), not the prepared one
    weight_strides: list[int]
    prologue: list[Step] = field(default_factory=list)
    prologue_inputs: list[ValueRef | ConstantRef] = field(default_factory=list)

    def fixed_operands(self) -> list[Operand]:
        bias = None if self.bias is None else ConstantRef(self.bias)
        return [ValueRef(self.input), ConstantRef(self.weight), bias]

    def operands(self) -> list[Operand]:
        return [*super().operands(), *self.prologue_inputs]

    def extra_inputs(self) -> list[Operand]:
        return list(self.epilogue_inputs)

    def encode_params(self, w: Writer) -> None:
        super().encode_params(w)
        w.u32(len(self.prologue))
        for step in self.prologue:
            step.encode(w)
        w.u32(len(self.prologue_inputs))

    @classmethod
    def decode(cls, params: Reader, parts: RecordParts) -> ConvRecord:
        fields = cls.read_params(params)
        prologue = [Step.decode(params) for _ in range(params.count("prologue steps", MAX_STEPS))]
        n_prologue = params.u32()
        inputs = parts.inputs
        check(
            n_prologue <= len(inputs) - 3,
            f"conv: {n_prologue} prologue inputs of {len(inputs) - 3} extra inputs",
        )
        split = len(inputs) - n_prologue
        prologue_inputs = tensor_operands(inputs[split:], "conv prologue inputs")
        parts = RecordParts(inputs[:split], parts.outputs, parts.steps, parts.common)
        return ConvRecord(
            **fields, input=value_operand(inputs[0], "conv input"),
            weight=constant_operand(inputs[1], "conv weight"),  # type: ignore[arg-type]
            bias=constant_operand(inputs[2], "conv bias", optional=True), output=parts.single_output("conv"),
            prologue=prologue, prologue_inputs=prologue_inputs, **parts.with_epilogue(3, "conv"),
        )  # fmt: skip

    def check(self, ctx: RecordContext, where: str) -> None:
        n = len(self.stride)
        check(1 <= n <= 3, f"{where}: {n} spatial dims")
        for attr in ("padding_before", "padding_after", "dilation", "output_padding"):
            check(
                len(getattr(self, attr)) == n,
                f"{where}: {attr} has {len(getattr(self, attr))} entries, expected {n}",
            )
        for attr in ("stride", "padding_before", "padding_after", "dilation", "output_padding"):
            lo = 1 if attr in ("stride", "dilation") else 0
            check(
                all(isinstance(x, int) and lo <= x < ARG_LIMIT for x in getattr(self, attr)),
                f"{where}: bad {attr}",
            )
        check(1 <= self.groups < ARG_LIMIT, f"{where}: bad groups {self.groups}")
        inp, out = ctx.input_and_output(where, self.input, self.output)
        check(len(self.weight_sizes) == n + 2, f"{where}: weight rank {len(self.weight_sizes)} != {n + 2}")
        check_dims(f"{where} weight", self.weight_sizes, self.weight_strides)
        check(len(inp.sizes) in (n + 1, n + 2), f"{where}: input rank {len(inp.sizes)} for a {n}-D conv")
        in_channels = inp.sizes[1 if len(inp.sizes) == n + 2 else 0]
        expect = self.weight_sizes[0] if self.transposed else self.weight_sizes[1] * self.groups
        check(in_channels == expect, f"{where}: input has {in_channels} channels, weight expects {expect}")
        check(not self.prologue or len(inp.sizes) == n + 2, f"{where}: a prologue needs a batched input")
        check(
            not self.prologue_inputs or self.prologue,
            f"{where}: {len(self.prologue_inputs)} prologue inputs but no prologue steps",
        )
        check_steps(f"{where} prologue", self.prologue, len(self.prologue_inputs), has_result=True)
        for x in self.prologue_inputs:
            check(
                per_image_and_channel(ctx.sizes(x), inp.sizes),
                f"{where}: a prologue input of sizes {ctx.sizes(x)} does not broadcast per image and channel "
                f"to the input {inp.sizes}",
            )
        sizes, strides = ctx.rule(where, conv_output_layout, self, inp.dtype, inp.sizes, inp.strides)
        check(all(s >= 0 for s in sizes), f"{where}: the conv's output would have a negative size {sizes}")
        check(
            same_layout(sizes, strides, out.sizes, out.strides),
            f"{where}: the layout rule gives an output of sizes {sizes} strides {strides}, "
            f"the plan records sizes {out.sizes} strides {out.strides}",
        )


def conv_output_layout(
    op: ConvRecord, dtype: str, sizes: list[int], strides: list[int]
) -> tuple[list[int], list[int]]:
    from cuda_triton.conv.layout import out_shape_and_stride  # pure Python; imported lazily

    return out_shape_and_stride(
        list(sizes), list(strides), list(op.weight_sizes), list(op.weight_strides), list(op.stride),
        list(op.padding_before), list(op.padding_after), list(op.dilation), op.transposed,
        list(op.output_padding), op.groups, dtype == "fp64",
    )  # fmt: skip
