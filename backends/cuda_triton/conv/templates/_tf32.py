"""Round-to-nearest TF32 operands for the fp32 tensor-core paths (fp32 with TF32 allowed).

Tensor cores read fp32 ``tl.dot`` operands as TF32 by dropping the 13 low mantissa bits (truncation). The bias
that leaves compounds through deep stacks: the WaveNet zoo model reached 2.7e-3 relative error on the GPU
against 1e-3 allowed; an emulation of every variant on the CPU gives 1.5e-3 with rounded
weights alone and 5.8e-4 with both operands rounded to nearest, as cuDNN does (``cvt.rna.tf32.f32``). So:

* weights are rounded once at export, in ``prepare_weight`` (`prepare_tf32_weight`): free at run time;
* the A tile (activations) is rounded in the kernel (`round_to_tf32`) right before ``tl.dot``, behind a
  constexpr that is true only for fp32 with TF32 allowed, so fp16/bf16 and exact fp32 kernels are unchanged.
  A rounded value has zero low bits, so the tensor core's own truncation is then exact.
"""

from __future__ import annotations

import os

import torch
import triton
import triton.language as tl

from ..problem import ConvProblem
from ..tf32 import round_to_tf32 as _round_tensor

# CUDA_TRITON_TF32_ROUNDING picks how the A tile is rounded: "cvt" (default) one ``cvt.rna.tf32.f32`` per
# element (inline PTX), "bits" the same rounding in integer ops, "0" the tensor core's plain truncation. "bits" and
# "0" are for timing the rounding's cost on the GPU (same process, same schedules), never for shipping: truncation
# makes fp32 models miss the 1e-3 target. The interpreter cannot run inline PTX, so there "cvt" becomes "bits"
# (bit-identical results).
ENV_SWITCH = "CUDA_TRITON_TF32_ROUNDING"
NO_ROUNDING, ROUND_BITS, ROUND_CVT = 0, 1, 2
_MODES = {"0": NO_ROUNDING, "bits": ROUND_BITS, "1": ROUND_CVT, "cvt": ROUND_CVT}


# The hardware rounding as inline PTX (one fp32 element in $1, its nearest TF32 value in $0, low bits cleared).
CVT_RNA_TF32_ASM = tl.constexpr("{ .reg .b32 t; cvt.rna.tf32.f32 t, $1; and.b32 $0, t, 0xFFFFE000; }")


def tf32_rounding(problem: ConvProblem) -> int:
    """The ROUND_TF32 constexpr: how the kernels round fp32 A tiles for TF32 tensor cores (0: they do not)."""
    if problem.dtype != "float32" or not problem.allow_tf32:
        return NO_ROUNDING
    value = os.environ.get(ENV_SWITCH, "cvt")
    if value not in _MODES:
        raise ValueError(f"{ENV_SWITCH}={value!r}: expected one of {sorted(_MODES)}")
    mode = _MODES[value]
    if mode == ROUND_CVT and os.environ.get("TRITON_INTERPRET", "0") == "1":
        return ROUND_BITS
    return mode


def rounds_to_tf32(problem: ConvProblem) -> bool:
    """Whether the kernels feed TF32 tensor cores fp32 operands (then both are rounded to nearest first)."""
    return tf32_rounding(problem) != NO_ROUNDING


def prepare_tf32_weight(weight: torch.Tensor, problem: ConvProblem) -> torch.Tensor:
    """The prepared weight rounded to the nearest TF32 values when `rounds_to_tf32`, else unchanged."""
    return _round_tensor(weight) if rounds_to_tf32(problem) else weight


@triton.jit
def round_to_tf32(x, MODE: tl.constexpr):
    """fp32 -> nearest TF32 value (ties away from zero), still as fp32; MODE is a `tf32_rounding` value other than
    NO_ROUNDING. The Triton kernels and the Gluon box kernel call it.

    ROUND_CVT: the hardware conversion; its result register is .b32 with the low 13 bits not guaranteed zero,
    so they are cleared (the tensor core ignores them, but the value must be an exact TF32 number).
    ROUND_BITS: integer add-and-clear on the bit pattern (unsigned, so the carry never overflows into UB); a carry
    into the exponent is the next binade, past the largest TF32 value it is infinity. inf and NaN keep their
    bits: the add would turn CUDA's canonical NaN (0x7FFFFFFF) into -0.0.
    """
    if MODE == 2:
        return tl.inline_asm_elementwise(
            CVT_RNA_TF32_ASM,
            "=r,r",
            [x],
            dtype=tl.float32,
            is_pure=True,
            pack=1,
        )
    bits = x.to(tl.uint32, bitcast=True)
    rounded = ((bits + 0x1000) >> 13) << 13
    finite = (bits & 0x7F800000) != 0x7F800000
    return tl.where(finite, rounded, bits).to(tl.float32, bitcast=True)
