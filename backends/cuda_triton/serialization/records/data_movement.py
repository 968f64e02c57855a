"""Kind 6: materialised data movement (copy, reshape, permute, cat, split, slice, pad, upsample); a view the next
kernel reads in place is a view value instead, with no record. ``params`` start with the op code. Shape rules:
`cuda_triton.serialization.checks.data_movement` (the parameters, then the data-movement family's rules)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from ..checks import data_movement as shape
from ..encoding import MAX_OPERANDS, Reader, Writer, check, finite
from .base import Operand, OpRecord, RecordParts, ValueRef, classes_by_code, expect_count, value_operand
from .context import RecordContext
from .params import code, dims, f64, f64s, flag, i64, ints

PAD_MODES = {
    "constant": shape.PAD_CONSTANT,
    "reflect": shape.PAD_REFLECT,
    "replicate": shape.PAD_REPLICATE,
    "circular": shape.PAD_CIRCULAR,
}
UPSAMPLE_MODES = {
    "nearest": shape.UPSAMPLE_NEAREST,
    "nearest_exact": shape.UPSAMPLE_NEAREST_EXACT,
    "linear": shape.UPSAMPLE_LINEAR,
    "cubic": shape.UPSAMPLE_CUBIC,
}


@dataclass
class DataMovementRecord(OpRecord):
    """Base of the data-movement ops: one value in, one value out unless the op says otherwise."""

    KIND = 6
    KIND_NAME = "data movement"
    FIXED_INPUTS = None
    OP: ClassVar[int]
    SAME_DTYPE: ClassVar[bool] = True
    # How many values the op may read and write (at least one each).
    MAX_SOURCES: ClassVar[int] = 1
    MAX_TARGETS: ClassVar[int] = 1

    def sources(self) -> list[int]:
        return [self.input]  # type: ignore[attr-defined]

    def targets(self) -> list[int]:
        return [self.output]  # type: ignore[attr-defined]

    def operands(self) -> list[Operand]:
        return [ValueRef(v) for v in self.sources()]

    def results(self) -> list[int]:
        return self.targets()

    def encode_params(self, w: Writer) -> None:
        w.u8(self.OP)
        super().encode_params(w)

    @classmethod
    def decode(cls, params: Reader, parts: RecordParts) -> DataMovementRecord:
        op = params.u8()
        sub = DATA_MOVEMENT_OPS.get(op)
        check(sub is not None, f"bad data movement op code {op}")
        assert sub is not None
        check(not parts.steps, f"{sub.__name__}: data movement records have no fused steps")
        sources = [value_operand(x, f"{sub.__name__} input") for x in parts.inputs]
        return sub.decode_fields(params, sources, parts.outputs, parts.common)

    @classmethod
    def decode_fields(
        cls, params: Reader, sources: list[int], targets: list[int], common: dict[str, Any]
    ) -> DataMovementRecord:
        expect_count(f"{cls.__name__} inputs", sources, 1, cls.MAX_SOURCES)
        expect_count(f"{cls.__name__} outputs", targets, 1, cls.MAX_TARGETS)
        return cls(**cls.operand_fields(sources, targets), **cls.read_params(params), **common)

    @classmethod
    def operand_fields(cls, sources: list[int], targets: list[int]) -> dict[str, Any]:
        """The fields that name the values read and written, from the record's inputs and outputs."""
        return {"input": sources[0], "output": targets[0]}

    def check(self, ctx: RecordContext, where: str) -> None:
        if self.SAME_DTYPE:
            dtypes = {ctx.value(v).dtype for v in self.sources() + self.targets()}
            check(len(dtypes) == 1, f"{where}: inputs and outputs of a {type(self).__name__} have one dtype")
        self.check_shape(ctx, where)

    def check_shape(self, ctx: RecordContext, where: str) -> None:
        raise NotImplementedError


@dataclass
class CopyRecord(DataMovementRecord):
    """A strided copy with the input's sizes (clone, dim-order copies, `_to_dim_order_copy` with a dtype change)."""

    OP = shape.COPY
    SAME_DTYPE = False
    input: int
    output: int

    def check_shape(self, ctx: RecordContext, where: str) -> None:
        ctx.expect_sizes(where, "output", ctx.value(self.output).sizes, list(ctx.value(self.input).sizes))


@dataclass
class ReshapeRecord(DataMovementRecord):
    """Elements in the input's row-major order into an output with the same element count."""

    OP = shape.RESHAPE
    input: int
    output: int

    def check_shape(self, ctx: RecordContext, where: str) -> None:
        out = list(ctx.value(self.output).sizes)
        sizes = ctx.rule(where, shape.reshape_record_sizes, list(ctx.value(self.input).sizes), out)
        ctx.expect_sizes(where, "output", out, sizes)


@dataclass
class PermuteRecord(DataMovementRecord):
    OP = shape.PERMUTE
    input: int
    output: int
    perm: list[int]
    PARAMS = (dims("perm", "perm"),)

    def check_shape(self, ctx: RecordContext, where: str) -> None:
        sizes = ctx.rule(
            where, shape.permute_record_sizes, list(ctx.value(self.input).sizes), list(self.perm)
        )
        ctx.expect_sizes(where, "output", ctx.value(self.output).sizes, sizes)


class JoinRecord(DataMovementRecord):
    """Cat and split: parts joined along ``dim`` (a field of each), the only parameter. Cat's parts are its inputs
    and the joined value its output; split's parts are its outputs and the joined value its input."""

    PARAMS = (i64("dim"),)
    SPLITS: ClassVar[bool] = False
    # How a size mismatch names the joined value.
    JOINED_NAME: ClassVar[str] = "output"

    def check_shape(self, ctx: RecordContext, where: str) -> None:
        parts, joined = (self.targets(), self.sources()) if self.SPLITS else (self.sources(), self.targets())
        part_sizes = [s for v in parts for s in ctx.value(v).sizes]
        part_strides = [s for v in parts for s in ctx.value(v).strides]
        rank = len(ctx.value(parts[0]).sizes) if parts else 0
        dim = self.dim  # type: ignore[attr-defined]
        sizes = ctx.rule(where, shape.cat_record_sizes, rank, dim, part_sizes, part_strides)
        ctx.expect_sizes(where, self.JOINED_NAME, ctx.value(joined[0]).sizes, sizes)


@dataclass
class CatRecord(JoinRecord):
    OP = shape.CAT
    MAX_SOURCES = MAX_OPERANDS
    inputs: list[int]
    output: int
    dim: int

    def sources(self) -> list[int]:
        return list(self.inputs)

    @classmethod
    def operand_fields(cls, sources: list[int], targets: list[int]) -> dict[str, Any]:
        return {"inputs": sources, "output": targets[0]}


@dataclass
class SplitRecord(JoinRecord):
    """The parts (outputs) concatenate back to the input along ``dim``."""

    OP = shape.SPLIT
    MAX_TARGETS = MAX_OPERANDS
    SPLITS = True
    JOINED_NAME = "concatenated parts'"
    input: int
    outputs: list[int]
    dim: int

    def targets(self) -> list[int]:
        return list(self.outputs)

    @classmethod
    def operand_fields(cls, sources: list[int], targets: list[int]) -> dict[str, Any]:
        return {"input": sources[0], "outputs": targets}


@dataclass
class SliceRecord(DataMovementRecord):
    OP = shape.SLICE
    input: int
    output: int
    dim: int
    start: int
    end: int
    step: int = 1
    PARAMS = tuple(i64(name) for name in ("dim", "start", "end", "step"))

    def check_shape(self, ctx: RecordContext, where: str) -> None:
        sizes = ctx.rule(
            where, shape.slice_record_sizes, list(ctx.value(self.input).sizes), self.dim, self.start, self.end,
            self.step,
        )  # fmt: skip
        ctx.expect_sizes(where, "output", ctx.value(self.output).sizes, sizes)


@dataclass
class PadRecord(DataMovementRecord):
    """``pad``: (before, after) pairs from the last dim backwards, as ``constant_pad_nd`` takes them (constant pads
    may be negative: they crop)."""

    OP = shape.PAD
    input: int
    output: int
    pad: list[int]
    mode: str = "constant"  # "constant" | "reflect" | "replicate" | "circular"
    value: float = 0.0
    PARAMS = (code("mode", PAD_MODES, "pad mode"), ints("pad", "pad"), f64("value"))

    def check_shape(self, ctx: RecordContext, where: str) -> None:
        check(self.mode in PAD_MODES, f"{where}: bad pad mode {self.mode!r}")
        check(finite(self.value), f"{where}: the pad value must be finite")
        check(self.mode == "constant" or self.value == 0, f"{where}: only constant pads have a value")
        inp = ctx.value(self.input)
        sizes = ctx.rule(
            where,
            shape.pad_record_sizes,
            PAD_MODES[self.mode],
            list(inp.sizes),
            list(inp.strides),
            list(self.pad),
        )
        ctx.expect_sizes(where, "output", ctx.value(self.output).sizes, sizes)


@dataclass
class UpsampleRecord(DataMovementRecord):
    """(N, C, *output_size); ``scales``: none or one factor per spatial dim (what the kernel's index math uses when
    the graph gave them)."""

    OP = shape.UPSAMPLE
    input: int
    output: int
    output_size: list[int]
    mode: str = "nearest"  # "nearest" | "nearest_exact" | "linear" | "cubic"
    align_corners: bool = False
    scales: list[float] = field(default_factory=list)
    PARAMS = (
        code("mode", UPSAMPLE_MODES, "upsample mode"),
        flag("align_corners"),
        dims("output_size", "upsample output size"),
        f64s("scales", "upsample scales"),
    )

    def check_shape(self, ctx: RecordContext, where: str) -> None:
        check(self.mode in UPSAMPLE_MODES, f"{where}: bad upsample mode {self.mode!r}")
        check(all(finite(s) and s > 0 for s in self.scales), f"{where}: scales must be finite and > 0")
        inp = ctx.value(self.input)
        sizes = ctx.rule(
            where, shape.upsample_record_sizes, UPSAMPLE_MODES[self.mode], list(inp.sizes), list(inp.strides),
            list(self.output_size), self.align_corners, len(self.scales),
        )  # fmt: skip
        ctx.expect_sizes(where, "output", ctx.value(self.output).sizes, sizes)


# Every data-movement op defined above, by its OP code.
DATA_MOVEMENT_OPS: dict[int, type[DataMovementRecord]] = classes_by_code(DataMovementRecord, "OP")
