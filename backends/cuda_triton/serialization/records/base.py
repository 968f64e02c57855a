"""What every op record has (docs/blob_format.md, "OPS_"): kernel launches and their arguments, the operands it
reads and writes, the fused elementwise steps, and the common encoding that wraps each kind's ``params``.

A record kind is a dataclass subclassing `OpRecord` with named fields; it maps them to the generic lists
(`operands`, `results`, `fused_steps`), encodes its ``params`` and checks its shape rule (`check`). Torch-free;
the C++ twin is runtime/blob/records.cpp.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from ..encoding import (
    MAX_NAME,
    MAX_OP_NAME,
    MAX_OPERANDS,
    MAX_PARAMS,
    MAX_STEP_OPERANDS,
    MAX_STEPS,
    BlobError,
    Reader,
    Writer,
    ascii_ok,
    check,
)
from .params import ParamField, read_params, write_params

if TYPE_CHECKING:  # context.py imports this module's operand types
    from .context import RecordContext

T = TypeVar("T")


# ---- launch arguments ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ValueRef:
    """A value's device address (a launch argument) or a value operand of a record."""

    value: int


@dataclass(frozen=True)
class ConstantRef:
    """A constant's device address (a launch argument) or a constant operand of a record."""

    constant: int


@dataclass(frozen=True)
class NullPtr:
    pass


@dataclass(frozen=True)
class Scalar:
    type: str  # "i32" | "i64" | "fp32"
    value: int | float


Arg = ValueRef | ConstantRef | NullPtr | Scalar
Operand = ValueRef | ConstantRef | None  # a record input: a value, a constant, or an absent optional operand
ARG_VALUE, ARG_CONSTANT, ARG_NULL, ARG_I32, ARG_I64, ARG_FP32 = range(6)
OPERAND_VALUE, OPERAND_CONSTANT, OPERAND_NONE = range(3)


@dataclass
class LaunchRecord:
    """One kernel call: the kernel index per arch, the grid (before the num_ctas multiply) and the args."""

    kernels: dict[int, int]
    grid: tuple[int, int, int]
    args: list[Arg]

    def encode(self, w: Writer) -> None:
        w.u32(len(self.kernels))
        for arch in sorted(self.kernels):
            w.u32(arch)
            w.u32(self.kernels[arch])
        for g in self.grid:
            w.u32(g)
        w.u32(len(self.args))
        for a in self.args:
            if isinstance(a, ValueRef):
                w.u8(ARG_VALUE)
                w.u64(a.value)
            elif isinstance(a, ConstantRef):
                w.u8(ARG_CONSTANT)
                w.u64(a.constant)
            elif isinstance(a, NullPtr):
                w.u8(ARG_NULL)
                w.u64(0)
            elif a.type == "i32":
                w.u8(ARG_I32)
                w.i64(int(a.value))
            elif a.type == "i64":
                w.u8(ARG_I64)
                w.i64(int(a.value))
            else:
                w.u8(ARG_FP32)
                w.f32(float(a.value))
                w.u32(0)

    @staticmethod
    def decode(r: Reader) -> LaunchRecord:
        kernels: dict[int, int] = {}
        for _ in range(r.count("launch archs", 64)):
            arch = r.u32()
            if arch in kernels:
                raise BlobError(f"launch lists arch {arch} twice")
            kernels[arch] = r.u32()
        grid = (r.u32(), r.u32(), r.u32())
        args: list[Arg] = []
        for _ in range(r.count("launch args", MAX_PARAMS)):
            tag = r.u8()
            if tag == ARG_VALUE:
                args.append(ValueRef(r.u64()))
            elif tag == ARG_CONSTANT:
                args.append(ConstantRef(r.u64()))
            elif tag == ARG_NULL:
                r.u64()
                args.append(NullPtr())
            elif tag == ARG_I32:
                args.append(Scalar("i32", r.i64()))
            elif tag == ARG_I64:
                args.append(Scalar("i64", r.i64()))
            elif tag == ARG_FP32:
                v = r.f32()
                r.u32()
                args.append(Scalar("fp32", v))
            else:
                raise BlobError(f"bad argument tag {tag}")
        return LaunchRecord(kernels, grid, args)


# ---- fused elementwise steps --------------------------------------------------------------------------------
@dataclass(frozen=True)
class FromInput:
    """A step operand: the i-th extra input of the record (for elementwise records, its i-th input)."""

    index: int


@dataclass(frozen=True)
class FromResult:
    """A step operand: the record's own result before the steps (not in elementwise records)."""


@dataclass(frozen=True)
class FromStep:
    """A step operand: an earlier step's result."""

    index: int


@dataclass(frozen=True)
class Literal:
    """A step operand: a scalar."""

    value: float


StepArg = FromInput | FromResult | FromStep | Literal
STEP_INPUT, STEP_RESULT, STEP_STEP, STEP_SCALAR = range(4)


@dataclass
class Step:
    """One elementwise op of a fused chain, by the name the elementwise family defines."""

    op: str
    args: list[StepArg]

    def encode(self, w: Writer) -> None:
        w.string(self.op)
        w.u32(len(self.args))
        for a in self.args:
            if isinstance(a, FromInput):
                w.u8(STEP_INPUT)
                w.u64(a.index)
            elif isinstance(a, FromResult):
                w.u8(STEP_RESULT)
                w.u64(0)
            elif isinstance(a, FromStep):
                w.u8(STEP_STEP)
                w.u64(a.index)
            else:
                w.u8(STEP_SCALAR)
                w.f64(float(a.value))

    @staticmethod
    def decode(r: Reader) -> Step:
        op = r.string("step op", MAX_OP_NAME)
        args: list[StepArg] = []
        for _ in range(r.count("step operands", MAX_STEP_OPERANDS)):
            tag = r.u8()
            if tag == STEP_INPUT:
                args.append(FromInput(r.u64()))
            elif tag == STEP_RESULT:
                if r.u64() != 0:
                    raise BlobError("a result step operand has a non-zero payload")
                args.append(FromResult())
            elif tag == STEP_STEP:
                args.append(FromStep(r.u64()))
            elif tag == STEP_SCALAR:
                args.append(Literal(r.f64()))
            else:
                raise BlobError(f"bad step operand tag {tag}")
        return Step(op, args)


def check_steps(w: str, steps: list[Step], n_inputs: int, has_result: bool) -> None:
    """A fused chain's steps are well formed: known-length names, inputs below ``n_inputs``, earlier steps only,
    `FromResult` only where the record has a result (``has_result``)."""
    check(len(steps) <= MAX_STEPS, f"{w}: too many steps")
    for s, step in enumerate(steps):
        sw = f"{w} step {s}"
        check(ascii_ok(step.op, MAX_OP_NAME, allow_empty=False), f"{sw}: bad op name {step.op!r}")
        check(len(step.args) <= MAX_STEP_OPERANDS, f"{sw}: too many operands")
        for a in step.args:
            if isinstance(a, FromInput):
                check(
                    0 <= a.index < n_inputs, f"{sw}: input {a.index} out of range ({n_inputs} extra inputs)"
                )
            elif isinstance(a, FromStep):
                check(0 <= a.index < s, f"{sw}: step {a.index} is not an earlier step")
            elif isinstance(a, FromResult):
                check(has_result, f"{sw}: an elementwise record has no result of its own")
            else:
                check(isinstance(a, Literal) and isinstance(a.value, int | float), f"{sw}: bad operand {a!r}")


# ---- the record base ------------------------------------------------------------------------------------------
@dataclass(kw_only=True)
class OpRecord:
    """Fields every op record has; subclasses add their kind's fields.

    ``name``: the profiling name (e.g. the edge ops it covers); ``template``/``schedule``: the kernel family and
    schedule key (informational); ``launches``: the kernel calls, in order.
    """

    KIND: ClassVar[int]
    KIND_NAME: ClassVar[str]
    # Inputs before the extra inputs of the fused steps (None: every input is an operand of the kind itself).
    FIXED_INPUTS: ClassVar[int | None] = 1
    # Whether the kind computes a result of its own the steps apply to (False only for elementwise records).
    HAS_RESULT: ClassVar[bool] = True
    # The kind's ``params`` fields, in their order (docs/blob_format.md, per kind).
    PARAMS: ClassVar[tuple[ParamField, ...]] = ()

    name: str = ""
    template: str = ""
    schedule: str = ""
    launches: list[LaunchRecord] = field(default_factory=list)

    # The generic view of a record (what the common checks and the encoding work on).
    def operands(self) -> list[Operand]:
        raise NotImplementedError

    def results(self) -> list[int]:
        raise NotImplementedError

    def fused_steps(self) -> list[Step]:
        return []

    def extra_inputs(self) -> list[Operand]:
        ops = self.operands()
        return [] if self.FIXED_INPUTS is None else ops[self.FIXED_INPUTS :]

    # The kind's own part.
    def encode_params(self, w: Writer) -> None:
        """Writes the kind's ``params`` (docs/blob_format.md, per kind)."""
        write_params(w, self.PARAMS, self)

    @classmethod
    def read_params(cls, params: Reader) -> dict[str, Any]:
        """The kind's `PARAMS` fields, read from ``params``."""
        return read_params(params, cls.PARAMS)

    @classmethod
    def decode(cls, params: Reader, parts: RecordParts) -> OpRecord:
        """The record from its ``params`` and generic parts; raises BlobError when they do not fit the kind."""
        raise NotImplementedError

    def check(self, ctx: RecordContext, where: str) -> None:
        """The kind's parameter and shape-rule checks (indices are already known to be in range)."""


@dataclass
class RecordParts:
    """A record as read, before its kind's fields: the generic lists and the fields every record has."""

    inputs: list[Operand]
    outputs: list[int]
    steps: list[Step]
    common: dict[str, Any]

    def single_output(self, kind: str) -> int:
        expect_count(f"{kind} outputs", self.outputs, 1)
        return self.outputs[0]

    def with_epilogue(self, fixed: int, kind: str) -> dict[str, Any]:
        """The common fields plus the epilogue: the steps and the inputs after the ``fixed`` ones."""
        extras = tensor_operands(self.inputs[fixed:], f"{kind} epilogue inputs")
        return {"epilogue": self.steps, "epilogue_inputs": extras, **self.common}


@dataclass(kw_only=True)
class EpilogueRecord(OpRecord):
    """A kind with one output and an optional fused epilogue: its fixed inputs, then the epilogue's extra inputs."""

    epilogue: list[Step] = field(default_factory=list)
    epilogue_inputs: list[ValueRef | ConstantRef] = field(default_factory=list)

    def fixed_operands(self) -> list[Operand]:
        raise NotImplementedError

    def operands(self) -> list[Operand]:
        return [*self.fixed_operands(), *self.epilogue_inputs]

    def results(self) -> list[int]:
        return [self.output]  # type: ignore[attr-defined]

    def fused_steps(self) -> list[Step]:
        return self.epilogue


@dataclass(kw_only=True)
class UnaryEpilogueRecord(EpilogueRecord):
    """An epilogue kind whose one fixed input is the value ``input``: its record is its `PARAMS`, that input, the
    output and the epilogue."""

    def fixed_operands(self) -> list[Operand]:
        return [ValueRef(self.input)]  # type: ignore[attr-defined]

    @classmethod
    def decode(cls, params: Reader, parts: RecordParts) -> OpRecord:
        fields = cls.read_params(params)
        return cls(
            **fields, input=value_operand(parts.inputs[0], f"{cls.KIND_NAME} input"),
            output=parts.single_output(cls.KIND_NAME), **parts.with_epilogue(1, cls.KIND_NAME),
        )  # fmt: skip


def classes_by_code(base: type[T], code: str) -> dict[int, type[T]]:
    """Every subclass of ``base``, at any depth, that sets the class attribute ``code`` itself, by that code in
    increasing order: a kind is registered by defining its class, and two classes with one code fail here."""
    found: dict[int, type[T]] = {}
    pending = list(base.__subclasses__())
    while pending:
        cls = pending.pop(0)
        pending.extend(cls.__subclasses__())
        if code in vars(cls):
            value = vars(cls)[code]
            if value in found:
                raise TypeError(f"{cls.__name__} and {found[value].__name__} have the same {code} {value}")
            found[value] = cls
    return dict(sorted(found.items()))


def value_operand(op: Operand, what: str) -> int:
    """The value index of an operand that must be a value."""
    check(isinstance(op, ValueRef), f"{what} must be a value, got {op!r}")
    assert isinstance(op, ValueRef)
    return op.value


def constant_operand(op: Operand, what: str, optional: bool = False) -> int | None:
    """The constant index of an operand that must be a constant (or absent, when optional)."""
    if op is None and optional:
        return None
    check(isinstance(op, ConstantRef), f"{what} must be a constant, got {op!r}")
    assert isinstance(op, ConstantRef)
    return op.constant


def tensor_operands(ops: list[Operand], what: str) -> list[ValueRef | ConstantRef]:
    check(all(isinstance(o, ValueRef | ConstantRef) for o in ops), f"{what} must be values or constants")
    return [o for o in ops if o is not None]


def expect_count(what: str, items: Sequence[Any], lo: int, hi: int | None = None) -> None:
    hi = lo if hi is None else hi
    check(
        lo <= len(items) <= hi,
        f"{what}: {len(items)} entries, expected {lo}" + ("" if hi == lo else f"..{hi}"),
    )


def encode_operand(w: Writer, op: Operand) -> None:
    if isinstance(op, ValueRef):
        w.u8(OPERAND_VALUE)
        w.u32(op.value)
    elif isinstance(op, ConstantRef):
        w.u8(OPERAND_CONSTANT)
        w.u32(op.constant)
    else:
        w.u8(OPERAND_NONE)
        w.u32(0)


def decode_operand(r: Reader) -> Operand:
    tag = r.u8()
    index = r.u32()
    if tag == OPERAND_VALUE:
        return ValueRef(index)
    if tag == OPERAND_CONSTANT:
        return ConstantRef(index)
    if tag == OPERAND_NONE:
        if index != 0:
            raise BlobError("an absent operand has a non-zero index")
        return None
    raise BlobError(f"bad operand tag {tag}")


def encode_record(w: Writer, rec: OpRecord) -> None:
    """The common record layout around the kind's ``params``."""
    w.u8(rec.KIND)
    w.string(rec.name)
    w.string(rec.template)
    w.string(rec.schedule)
    inputs = rec.operands()
    w.u32(len(inputs))
    for op in inputs:
        encode_operand(w, op)
    outputs = rec.results()
    w.u32(len(outputs))
    for v in outputs:
        w.u32(v)
    steps = rec.fused_steps()
    w.u32(len(steps))
    for s in steps:
        s.encode(w)
    params = Writer()
    rec.encode_params(params)
    body = params.bytes()
    w.u32(len(body))
    w.raw(body)
    w.u32(len(rec.launches))
    for lr in rec.launches:
        lr.encode(w)


def decode_record(r: Reader, kinds: dict[int, type[OpRecord]]) -> OpRecord:
    kind = r.u8()
    cls = kinds.get(kind)
    if cls is None:
        raise BlobError(f"unknown op record kind {kind}")
    common: dict[str, Any] = {
        "name": r.string("op name", MAX_NAME),
        "template": r.string("template name"),
        "schedule": r.string("schedule"),
    }
    inputs = [decode_operand(r) for _ in range(r.count("op inputs", MAX_OPERANDS))]
    n_out = r.count("op outputs", MAX_OPERANDS)
    outputs = [r.u32() for _ in range(n_out)]
    steps = [Step.decode(r) for _ in range(r.count("steps", MAX_STEPS))]
    params = r.sub(r.u32(), f"{cls.KIND_NAME} params")
    common["launches"] = [LaunchRecord.decode(r) for _ in range(r.count("launches"))]
    check(n_out >= 1, f"{cls.KIND_NAME} record writes no value")
    if cls.FIXED_INPUTS is not None:
        check(
            len(inputs) >= cls.FIXED_INPUTS,
            f"{cls.KIND_NAME} record has {len(inputs)} inputs, needs {cls.FIXED_INPUTS}",
        )
    rec = cls.decode(params, RecordParts(inputs, outputs, steps, common))
    params.done(f"{cls.KIND_NAME} params")
    return rec
