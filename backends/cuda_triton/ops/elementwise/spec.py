"""The elementwise op spec: one fused chain over one output shape, from static metadata only.

`ChainBuilder` turns edge-dialect elementwise ops (relu, hardtanh, clamp, sigmoid, tanh, gelu, leaky_relu,
hardsigmoid, hardswish, silu, add/sub/mul/div with tensors or scalars, glu) into an `ElementwiseSpec`: the chain's
inputs (strided views of the op's tensors, by role), its program (program.py) and its output. One op is a chain
of one instruction (`unary_spec`, `binary_spec`, `glu_spec`); a fuser adds ops to the same builder.

Each value carries the layout eager PyTorch would give it (layout.py), so the spec's output takes the strides the
graph records for the chain's last op, unless the caller asks for others (a consumer's layout, a slice of a
concatenation buffer).
"""

from __future__ import annotations

from dataclasses import dataclass

from ...kernel.launch import Support
from ..indexing import MAX_DIMS
from ..tensor_meta import (
    INT32_LIMIT,
    TensorMeta,
    broadcast_shapes,
    coalesce,
    expand_strides,
    float_dtype_support,
)
from .layout import out_shape_and_stride
from .math import OPS, SCALAR_OPERAND
from .program import MAX_INPUTS, Instruction, Program, describe, instruction, program_error


@dataclass(frozen=True)
class ChainInput:
    """A chain input: a strided view (``view``, starting ``offset`` elements in) of the op's tensor ``role``."""

    role: str  # the op's tensor the launch binds: "in0", "in1", ...
    view: TensorMeta
    offset: int = 0


@dataclass(frozen=True)
class ElementwiseSpec:
    """A fused elementwise chain: ``out = program(inputs)``, computed in fp32 and rounded once to out.dtype."""

    inputs: tuple[ChainInput, ...]
    program: Program
    out: TensorMeta
    out_role: str = "out"
    out_offset: int = 0

    def describe(self) -> str:
        return describe(self.program)


def supports(spec: ElementwiseSpec) -> Support:
    """Whether the chain kernel computes ``spec`` exactly; if not, the reason, in words a user understands."""
    if not 1 <= len(spec.inputs) <= MAX_INPUTS:
        return Support.no(
            f"an elementwise chain takes 1 to {MAX_INPUTS} tensor inputs, this one has {len(spec.inputs)}"
        )
    error = program_error(spec.program, len(spec.inputs))
    if error:
        return Support.no(error)
    dtypes = float_dtype_support("elementwise chain", *(i.view for i in spec.inputs), spec.out)
    if not dtypes:
        return dtypes
    try:
        shape = broadcast_shapes(*(i.view.sizes for i in spec.inputs))
    except ValueError as e:
        return Support.no(f"the chain's inputs do not broadcast: {e}")
    if shape != spec.out.sizes:
        return Support.no(f"the output sizes {spec.out.sizes} are not the inputs' broadcast shape {shape}")
    if any(i.offset < 0 for i in spec.inputs) or spec.out_offset < 0:
        return Support.no("a view starts before its tensor (negative offset)")
    if any(s < 0 for t in [*(i.view for i in spec.inputs), spec.out] for s in t.strides):
        return Support.no("negative strides are not supported")
    if _overlaps(spec.out):
        return Support.no(f"the output strides {spec.out.strides} make elements overlap")
    sizes, _ = merged_dims(spec)
    if len(sizes) > MAX_DIMS:
        return Support.no(
            f"the operands' layouts leave {len(sizes)} dims after merging the ones they step through alike; "
            f"the kernel indexes at most {MAX_DIMS}"
        )
    if spec.out.numel > INT32_LIMIT * 1024:
        return Support.no("the output has too many elements for one grid")
    return Support.yes()


def _overlaps(t: TensorMeta) -> bool:
    """Whether two elements of ``t`` could share memory (a sufficient test: sorted strides nest)."""
    dims = sorted((d for d in range(t.rank) if t.sizes[d] > 1), key=lambda d: t.strides[d])
    reach = 1
    for d in dims:
        if t.strides[d] < reach:
            return True
        reach = t.strides[d] * t.sizes[d]
    return False


def merged_dims(spec: ElementwiseSpec) -> tuple[tuple[int, ...], list[tuple[int, ...]]]:
    """The output shape with dims in the output's memory order (outermost first) and merged wherever every
    operand steps through them alike; with the strides of the output, then of each input, over those dims."""
    shape = spec.out.sizes
    strides = [spec.out.strides] + [expand_strides(i.view.sizes, i.view.strides, shape) for i in spec.inputs]
    # Walk the output in memory order (its stores coalesce); ties keep the logical order.
    order = sorted(range(len(shape)), key=lambda d: -spec.out.strides[d])
    sizes, merged = coalesce([shape[d] for d in order], [[s[d] for d in order] for s in strides])
    return sizes, merged


# ---- building chains -----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Value:
    """A value of a chain under construction: its index (program.py) and the layout eager PyTorch gives it."""

    index: int
    sizes: tuple[int, ...]
    strides: tuple[int, ...]
    dtype: str


Operand = Value | float | int


def result_dtype(dtypes: list[str]) -> str:
    """ATen's type promotion among float tensors (float16 with bfloat16 gives float32)."""
    kinds = set(dtypes)
    if len(kinds) == 1:
        return dtypes[0]
    return "float32"


class ChainBuilder:
    """Builds an `ElementwiseSpec` op by op::

        b = ChainBuilder()
        x = b.input("in0", x_meta)
        t = b.op("clamp", b.op("add", x, 3.0), min=0.0, max=6.0)
        spec = b.build(b.op("mul", b.op("div", t, 6.0), x))

    Op names and parameters (edge-dialect names, ATen's parameter names): copy, relu, sigmoid, tanh, silu,
    hardsigmoid, hardswish, neg; clamp(min=, max=) (either may be None); hardtanh(min_val=-1, max_val=1);
    leaky_relu(negative_slope=0.01); gelu(approximate="none"|"tanh"); add/sub(alpha=1); mul; div; rsub(alpha=1)
    (``b - alpha * a``). Binary ops take Values or Python numbers on either side and broadcast.
    """

    def __init__(self) -> None:
        self._inputs: list[ChainInput] = []
        self._program: list[Instruction] = []
        self._values: list[Value] = []

    # -- inputs
    def input(self, role: str, view: TensorMeta, offset: int = 0) -> Value:
        """A chain input: ``view`` of the op's tensor ``role`` (the tensor itself unless ``offset``/a view)."""
        if len(self._inputs) == MAX_INPUTS:
            raise ValueError(f"an elementwise chain takes at most {MAX_INPUTS} tensor inputs")
        for i, existing in enumerate(self._inputs):
            if existing == ChainInput(role, view, offset):
                return self._values[i]
        self._inputs.append(ChainInput(role, view, offset))
        value = Value(len(self._inputs) - 1, view.sizes, view.strides, view.dtype)
        self._values.append(value)
        return value

    def glu_halves(self, role: str, x: TensorMeta, dim: int) -> tuple[Value, Value]:
        """The two halves of ``x`` along ``dim`` that glu multiplies (``a * sigmoid(b)``), as chain inputs."""
        dim = _dim(dim, x.rank, "glu")
        if x.sizes[dim] % 2:
            raise ValueError(f"glu: dim {dim} has odd size {x.sizes[dim]}; it must split in two halves")
        half = list(x.sizes)
        half[dim] //= 2
        view = TensorMeta(tuple(half), x.strides, x.dtype)
        return self.input(role, view), self.input(role, view, half[dim] * x.strides[dim])

    # -- ops
    def op(self, name: str, *operands: Operand, **params: float | str | None) -> Value:
        """Append edge op ``name`` (see the class docstring) and return its value."""
        if name == "hardtanh":
            return self._emit("clamp", operands, params.get("min_val", -1.0), params.get("max_val", 1.0))
        if name == "clamp":
            lo, hi = params.get("min"), params.get("max")
            if lo is None and hi is None:
                return self._emit("copy", operands)
            if lo is None:
                return self._emit("clamp_max", operands, hi)
            if hi is None:
                return self._emit("clamp_min", operands, lo)
            return self._emit("clamp", operands, lo, hi)
        if name == "leaky_relu":
            return self._emit("leaky_relu", operands, params.get("negative_slope", 0.01))
        if name == "gelu":
            approximate = params.get("approximate", "none")
            if approximate not in ("none", "tanh"):
                raise ValueError(f"gelu: approximate must be 'none' or 'tanh', not {approximate!r}")
            return self._emit("gelu" if approximate == "none" else "gelu_tanh", operands)
        if name in ("add", "sub", "rsub"):
            alpha = params.get("alpha", 1)
            a, b = operands if name != "rsub" else operands[::-1]
            if alpha != 1:  # ATen: a + alpha * b
                b = b * float(alpha) if not isinstance(b, Value) else self._emit("mul", (b, float(alpha)))
            return self._emit("add" if name == "add" else "sub", (a, b))
        if name in OPS:
            return self._emit(name, operands, *(params[p] for p in OPS[name].params))
        raise ValueError(f"unknown elementwise op {name!r}")

    def _emit(
        self, name: str, operands: tuple[Operand, ...], c0: float | None = 0.0, c1: float | None = 0.0
    ) -> Value:
        op = OPS[name]
        if len(operands) != op.arity:
            raise ValueError(f"{name} takes {op.arity} operand(s), got {len(operands)}")
        tensors = [x for x in operands if isinstance(x, Value)]
        if not tensors:
            raise ValueError(f"{name}: at least one operand must be a tensor")
        if op.arity == 2:
            scalars = [float(x) for x in operands if not isinstance(x, Value)]
            if scalars:
                c0 = scalars[0]
            a, b = (x.index if isinstance(x, Value) else SCALAR_OPERAND for x in operands)
        else:
            a, b = tensors[0].index, SCALAR_OPERAND
        self._program.append(instruction(name, a, b, float(c0), float(c1)))  # type: ignore[arg-type]
        sizes, strides = out_shape_and_stride([(t.sizes, t.strides) for t in tensors])
        value = Value(
            MAX_INPUTS + len(self._program) - 1, sizes, strides, result_dtype([t.dtype for t in tensors])
        )
        self._values.append(value)
        return value

    # -- the spec
    def build(
        self,
        result: Value,
        out_dtype: str | None = None,
        out_strides: tuple[int, ...] | None = None,
        out_role: str = "out",
        out_offset: int = 0,
    ) -> ElementwiseSpec:
        """The spec computing ``result`` (default: in the dtype and layout eager PyTorch gives it)."""
        program = list(self._program)
        if result.index < MAX_INPUTS:  # the result is an input: a copy (dtype or layout change)
            program.append(instruction("copy", result.index))
        elif result.index != MAX_INPUTS + len(program) - 1:
            raise ValueError("the chain's result must be its last op (build the chain in evaluation order)")
        strides = tuple(out_strides) if out_strides is not None else result.strides
        out = TensorMeta(result.sizes, strides, out_dtype or result.dtype)
        return ElementwiseSpec(tuple(self._inputs), tuple(program), out, out_role, out_offset)


def _dim(dim: int, ndim: int, op: str) -> int:
    if not -ndim <= dim < ndim:
        raise ValueError(f"{op}: dim {dim} is out of range for a {ndim}-D tensor")
    return dim % ndim


def _as_operand(b: ChainBuilder, x: TensorMeta | float, role: str) -> Operand:
    return b.input(role, x) if isinstance(x, TensorMeta) else x


def unary_spec(name: str, x: TensorMeta, **params: float | str | None) -> ElementwiseSpec:
    """One unary edge op (relu, hardtanh, clamp, sigmoid, tanh, gelu, leaky_relu, hardsigmoid, hardswish, silu,
    neg, copy) on the tensor "in0"."""
    b = ChainBuilder()
    return b.build(b.op(name, b.input("in0", x), **params))


def binary_spec(
    name: str, a: TensorMeta | float, b: TensorMeta | float, alpha: float = 1.0
) -> ElementwiseSpec:
    """One binary edge op (add, sub, mul, div, rsub) on tensors "in0"/"in1" (or Python scalars), broadcasting."""
    builder = ChainBuilder()
    lhs, rhs = _as_operand(builder, a, "in0"), _as_operand(builder, b, "in1")
    params = {"alpha": alpha} if name in ("add", "sub", "rsub") else {}
    return builder.build(builder.op(name, lhs, rhs, **params))


def glu_spec(x: TensorMeta, dim: int = -1) -> ElementwiseSpec:
    """``glu(x, dim)``: first half times the sigmoid of the second half, on the tensor "in0"."""
    b = ChainBuilder()
    first, second = b.glu_halves("in0", x, dim)
    out = b.op("mul", first, b.op("sigmoid", second))
    # ATen's glu output is laid out like its input's halves (dense).
    return b.build(out)
