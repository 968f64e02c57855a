"""The math of every elementwise op, defined once: a ``@triton.jit`` function and its ATen reference per op.

The standalone chain kernel (kernels.py), the CPU reference (reference.py) and the epilogues of convolution and
GEMM kernels all compute an op through this module: kernels through `apply_chain`/`apply_op`, the reference
through `ElementwiseOp.reference`. Kernels compute in fp32 (16-bit inputs are widened when loaded); so does the
reference, rounding once at the end.

An op is named by its code, a ``tl.constexpr`` int (strings do not survive inside Triton's constexpr tuples).
Float parameters travel as constexprs ``C0``/``C1`` (clamp bounds, a leaky ReLU slope, a binary op's scalar
operand), so kernels are compiled with them folded in.

NaN propagates as in ATen: relu/clamp/hardtanh of NaN is NaN (``propagate_nan=ALL``; PTX max/min alone would
return the other operand).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
import triton
import triton.language as tl

# ---- op codes ------------------------------------------------------------------------------------------------
COPY = tl.constexpr(0)  # y = a (a chain whose result is one of its inputs: a dtype or layout copy)
RELU = tl.constexpr(1)
CLAMP = tl.constexpr(2)  # clamp(a, C0, C1); hardtanh(a, C0, C1)
CLAMP_MIN = tl.constexpr(3)  # clamp(a, min=C0)
CLAMP_MAX = tl.constexpr(4)  # clamp(a, max=C0)
SIGMOID = tl.constexpr(5)
TANH = tl.constexpr(6)
GELU = tl.constexpr(7)  # exact (erf) GELU
GELU_TANH = tl.constexpr(8)  # GELU, approximate="tanh"
LEAKY_RELU = tl.constexpr(9)  # negative slope C0
HARDSIGMOID = tl.constexpr(10)
HARDSWISH = tl.constexpr(11)
SILU = tl.constexpr(12)
NEG = tl.constexpr(13)
ADD = tl.constexpr(14)
SUB = tl.constexpr(15)
MUL = tl.constexpr(16)
DIV = tl.constexpr(
    17
)  # true division: correctly rounded (div_rn), by a scalar times its reciprocal, as ATen's CUDA kernels

# An operand index meaning "the instruction's constant C0" (a tensor-scalar binary op), see `apply_chain`.
SCALAR = tl.constexpr(-1)


# ---- MUFU approximations ---------------------------------------------------------------------------------------
# Triton compiles an fp32 exp2 and an fp32 division to the hardware's approximations (MUFU.EX2, MUFU.RCP) wrapped in
# code that keeps denormal inputs and results: a compare, a select and two scaling multiplies around each. In a
# short convolution's epilogue that wrapper, not the MUFU op, was most of the cost (a fused SiLU took up to 2.2x the
# plain convolution, 13 instructions an element against 5 here). The ``.ftz`` forms are the same approximations
# (ex2: 2 ulp; rcp: 1 ulp) with denormals flushed to zero, which changes a result only where it or an input is
# below 2^-126 in magnitude, and none of the ops below returns such a value where ATen's would be above 2^-126.
# Triton's CPU interpreter cannot run inline PTX: there these are plain exp2 and division, read once at import.
MUFU_PTX = tl.constexpr(os.environ.get("TRITON_INTERPRET", "0") != "1")


@triton.jit
def mufu_ftz(x, INSTRUCTION: tl.constexpr):
    """The one-operand fp32 PTX ``INSTRUCTION`` (its mnemonic) on every element of ``x``."""
    return tl.inline_asm_elementwise(
        INSTRUCTION + " $0, $1;", "=r,r", [x], dtype=tl.float32, is_pure=True, pack=1
    )


@triton.jit
def exp2_approx(x):
    """2^x in fp32 (``ex2.approx.ftz.f32``)."""
    if MUFU_PTX:
        return mufu_ftz(x, "ex2.approx.ftz.f32")
    else:
        return tl.exp2(x)


@triton.jit
def reciprocal_approx(x):
    """1 / x in fp32 (``rcp.approx.ftz.f32``)."""
    if MUFU_PTX:
        return mufu_ftz(x, "rcp.approx.ftz.f32")
    else:
        return 1.0 / x


LOG2_E = tl.constexpr(1.4426950408889634)


# ---- the ops ---------------------------------------------------------------------------------------------------
@triton.jit
def maximum(a, b):
    """max(a, b), NaN if either is (ATen's max/clamp; also the amax reduction's combine)."""
    return tl.maximum(a, b, propagate_nan=tl.PropagateNan.ALL)


@triton.jit
def minimum(a, b):
    return tl.minimum(a, b, propagate_nan=tl.PropagateNan.ALL)


@triton.jit
def relu(x):
    return maximum(x, 0.0)


@triton.jit
def clamp(x, lo, hi):
    """ATen's order: max with the lower bound first, so lo > hi gives hi."""
    return minimum(maximum(x, lo), hi)


@triton.jit
def sigmoid(x):
    return reciprocal_approx(1.0 + exp2_approx(x * -LOG2_E))


@triton.jit
def tanh(x):
    """tanh from exp where that is accurate, an odd Taylor polynomial for |x| < 0.3, where 1 - 2/(e^2|x| + 1)
    cancels (truncation error below 1e-7 relative there). Triton's interpreter has no libdevice tanh."""
    a = tl.abs(x)
    big = 1.0 - 2.0 * reciprocal_approx(exp2_approx(a * (2.0 * LOG2_E)) + 1.0)
    z = x * x
    small = x + x * z * (-1.0 / 3.0 + z * (2.0 / 15.0 + z * (-17.0 / 315.0 + z * (62.0 / 2835.0))))
    return tl.where(a < 0.3, small, tl.where(x < 0.0, -big, big))


@triton.jit
def gelu(x):
    """x * Phi(x), Phi the normal CDF, from erfc(z) = t * exp(-z^2 + P(t)) with t = 1 / (1 + z / 2), z = |x| / sqrt(2)
    (the Chebyshev fit of Numerical Recipes' ``erfcc``, relative error below 1.2e-7 for every z): Phi(x) is
    erfc(z) / 2 for x < 0 and 1 - erfc(z) / 2 otherwise, so the negative side keeps its relative precision where
    0.5 * (1 + erf(x / sqrt(2))) cancels. About 22 instructions an element on sm_90 against 33 for libdevice's
    erf (whose coefficients are switched by predicated moves), which made GELU the largest cost of a linear
    layer's epilogue; t comes from a squared reciprocal square root (one MUFU op, none of a division's range
    checks) and the exponential is exp2 with log2(e) folded into its argument."""
    z = tl.abs(x) * 0.7071067811865476
    r = tl.math.rsqrt(1.0 + 0.5 * z)
    t = r * r
    p = 0.17087277 * t - 0.82215223
    p = p * t + 1.48851587
    p = p * t - 1.13520398
    p = p * t + 0.27886807
    p = p * t - 0.18628806
    p = p * t + 0.09678418
    p = p * t + 0.37409196
    p = p * t + 1.00002368
    p = p * t - 1.26551223
    half_erfc = 0.5 * t * exp2_approx((p - z * z) * LOG2_E)
    return x * tl.where(x >= 0.0, 1.0 - half_erfc, half_erfc)


@triton.jit
def gelu_tanh(x):
    inner = 0.7978845608028654 * (x + 0.044715 * x * x * x)  # sqrt(2 / pi) * (x + 0.044715 x^3)
    return 0.5 * x * (1.0 + tanh(inner))


@triton.jit
def leaky_relu(x, slope):
    return tl.where(x > 0.0, x, x * slope)


# hardsigmoid and hardswish multiply by 1/6 as ATen's CUDA kernels do, rather than divide: a correctly rounded
# division is a subroutine call per element, which made these ops cost more inside a memory-bound conv epilogue
# than the convolution itself. The two differ by at most one fp32 ulp.
ONE_SIXTH = tl.constexpr(1.0 / 6.0)


@triton.jit
def hardsigmoid(x):
    return clamp(x + 3.0, 0.0, 6.0) * ONE_SIXTH


@triton.jit
def hardswish(x):
    """The clamp need not propagate NaN (PTX min/max return the other operand): the product with ``x`` does."""
    return x * tl.minimum(tl.maximum(x + 3.0, 0.0), 6.0) * ONE_SIXTH


@triton.jit
def silu(x):
    return x * sigmoid(x)


@triton.jit
def apply_op(a, b, CODE: tl.constexpr, C0: tl.constexpr, C1: tl.constexpr):
    """The op ``CODE`` of `math` on ``a`` (and ``b`` for a binary op), with float parameters C0, C1.

    ``a``/``b`` are fp32 tensors of broadcastable shapes, or a constexpr float for a binary op's scalar side.
    """
    if CODE == COPY:
        y = a
    elif CODE == RELU:
        y = relu(a)
    elif CODE == CLAMP:
        y = clamp(a, C0, C1)
    elif CODE == CLAMP_MIN:
        y = maximum(a, C0)
    elif CODE == CLAMP_MAX:
        y = minimum(a, C0)
    elif CODE == SIGMOID:
        y = sigmoid(a)
    elif CODE == TANH:
        y = tanh(a)
    elif CODE == GELU:
        y = gelu(a)
    elif CODE == GELU_TANH:
        y = gelu_tanh(a)
    elif CODE == LEAKY_RELU:
        y = leaky_relu(a, C0)
    elif CODE == HARDSIGMOID:
        y = hardsigmoid(a)
    elif CODE == HARDSWISH:
        y = hardswish(a)
    elif CODE == SILU:
        y = silu(a)
    elif CODE == NEG:
        y = -a
    elif CODE == ADD:
        y = a + b
    elif CODE == SUB:
        y = a - b
    elif CODE == MUL:
        y = a * b
    else:
        tl.static_assert(CODE == DIV, "unknown elementwise op code")
        y = tl.div_rn(a, b)
    return y


@triton.jit
def apply_chain(x0, x1, x2, x3, PROGRAM: tl.constexpr):
    """Run an elementwise chain (see program.py) on fp32 tiles ``x0``..``x3`` and return its result tile.

    The chain's values are numbered: 0-3 are its inputs ``x0``..``x3`` (None where the chain has fewer), then
    instruction k's result is value 4 + k. Each instruction of ``PROGRAM`` is a tuple
    ``(code, a, b, c0, c1)``: op ``code`` on values ``a`` and ``b`` (either may be `SCALAR`: the constant c0
    instead), with float parameters c0, c1. The result is the last instruction's value. Inputs may have any
    shapes that broadcast against one another (an epilogue passes per-channel vectors as ``[1, BLOCK_N]``).
    """
    # Absent inputs stand in as x0 (programs never read them): older Triton cannot put None in a tuple.
    if x1 is None:
        x1 = x0
    if x2 is None:
        x2 = x0
    if x3 is None:
        x3 = x0
    values = (x0, x1, x2, x3)
    for i in tl.static_range(len(PROGRAM)):
        # Index PROGRAM inline: a sub-tuple bound to a name stops being a constexpr in Triton's frontend.
        if PROGRAM[i][1] == SCALAR:
            a = PROGRAM[i][3]
        else:
            a = values[PROGRAM[i][1]]
        if PROGRAM[i][2] != SCALAR:
            y = apply_op(a, values[PROGRAM[i][2]], PROGRAM[i][0], PROGRAM[i][3], PROGRAM[i][4])
        elif PROGRAM[i][0] == DIV and PROGRAM[i][3] != 0.0:
            # x / c as x * (1 / c), as ATen's CUDA division by a scalar computes it (see `hardswish`)
            y = apply_op(a, 1.0 / PROGRAM[i][3], MUL, PROGRAM[i][3], PROGRAM[i][4])
        else:
            y = apply_op(a, PROGRAM[i][3], PROGRAM[i][0], PROGRAM[i][3], PROGRAM[i][4])
        values = values + (y,)
    return values[len(values) - 1]


# ---- the op table: names, arities, parameters, ATen references ---------------------------------------------------
Tensorish = torch.Tensor | float


@dataclass(frozen=True)
class ElementwiseOp:
    """One op of the table: its name in chains, its code, how many tensor-or-scalar operands it takes, the names
    of its float parameters (stored as c0, c1) and its ATen definition (fp32 tensors in, fp32 tensor out)."""

    name: str
    code: int
    arity: int  # 1: unary; 2: binary (one side may be a scalar, stored in c0)
    params: tuple[str, ...]
    reference: Callable[..., torch.Tensor]


def _binary(fn: Callable[[Tensorish, Tensorish], torch.Tensor]) -> Callable[..., torch.Tensor]:
    def reference(a: Tensorish, b: Tensorish) -> torch.Tensor:
        if not isinstance(a, torch.Tensor):  # scalar on the left: ATen's rsub/reciprocal-style forms
            a = torch.full_like(b, a) if isinstance(b, torch.Tensor) else torch.tensor(a)
        return fn(a, b)

    return reference


OPS: dict[str, ElementwiseOp] = {
    op.name: op
    for op in (
        ElementwiseOp("copy", COPY.value, 1, (), lambda a: a.clone()),
        ElementwiseOp("relu", RELU.value, 1, (), torch.relu),
        ElementwiseOp("clamp", CLAMP.value, 1, ("min", "max"), lambda a, lo, hi: torch.clamp(a, lo, hi)),
        ElementwiseOp("clamp_min", CLAMP_MIN.value, 1, ("min",), lambda a, lo: torch.clamp(a, min=lo)),
        ElementwiseOp("clamp_max", CLAMP_MAX.value, 1, ("max",), lambda a, hi: torch.clamp(a, max=hi)),
        ElementwiseOp("sigmoid", SIGMOID.value, 1, (), torch.sigmoid),
        ElementwiseOp("tanh", TANH.value, 1, (), torch.tanh),
        ElementwiseOp("gelu", GELU.value, 1, (), F.gelu),
        ElementwiseOp("gelu_tanh", GELU_TANH.value, 1, (), lambda a: F.gelu(a, approximate="tanh")),
        ElementwiseOp("leaky_relu", LEAKY_RELU.value, 1, ("negative_slope",), F.leaky_relu),
        ElementwiseOp("hardsigmoid", HARDSIGMOID.value, 1, (), F.hardsigmoid),
        ElementwiseOp("hardswish", HARDSWISH.value, 1, (), F.hardswish),
        ElementwiseOp("silu", SILU.value, 1, (), F.silu),
        ElementwiseOp("neg", NEG.value, 1, (), torch.neg),
        ElementwiseOp("add", ADD.value, 2, (), _binary(torch.add)),
        ElementwiseOp("sub", SUB.value, 2, (), _binary(torch.sub)),
        ElementwiseOp("mul", MUL.value, 2, (), _binary(torch.mul)),
        ElementwiseOp("div", DIV.value, 2, (), _binary(torch.div)),
    )
}
OPS_BY_CODE: dict[int, ElementwiseOp] = {op.code: op for op in OPS.values()}
SCALAR_OPERAND: int = SCALAR.value

__all__ = ["OPS", "OPS_BY_CODE", "SCALAR_OPERAND", "ElementwiseOp", "apply_chain", "apply_op"]
