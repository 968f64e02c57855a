"""TF32 conversions of fp32 tensors, bit-exact with what the GPU does (torch only; used at export and in studies).

TF32 keeps fp32's sign and 8-bit exponent and the top 10 of its 23 mantissa bits. Tensor cores fed fp32
operands by ``tl.dot(..., input_precision="tf32")`` *truncate* the 13 low bits (a biased error: every operand
moves towards zero by 2^-11 of its magnitude on average), which compounds over deep stacks of convolutions
(docs/performance.md, wavenet fp32). cuDNN converts with ``cvt.rna.tf32.f32`` instead: round to nearest, ties
away from zero, an unbiased error. `round_to_tf32` is that conversion; the result is still an fp32 tensor whose
13 low mantissa bits are zero, so a tensor core reads it without further loss.
"""

from __future__ import annotations

import torch

# Mantissa bits fp32 has and TF32 drops.
DROPPED_BITS = 13
_KEEP_MASK = -(1 << DROPPED_BITS)  # 0xFFFFE000 as an int32
_HALF = 1 << (DROPPED_BITS - 1)  # 0x1000: half a TF32 unit in the last place
_EXP_MASK = 0x7F800000


def _bits(t: torch.Tensor) -> torch.Tensor:
    if t.dtype != torch.float32:
        raise TypeError(f"TF32 conversions take float32 tensors, got {t.dtype}")
    return t.contiguous().view(torch.int32)


def round_to_tf32(t: torch.Tensor) -> torch.Tensor:
    """Round to the nearest TF32 value, ties away from zero (``cvt.rna.tf32.f32``); inf and NaN unchanged.

    On the sign-magnitude bit pattern, adding half a unit of the kept last place and clearing the dropped bits
    rounds the magnitude half away from zero; a carry into the exponent is the correct next binade, and past
    the largest TF32 value it gives infinity (as the hardware does). Non-finite inputs are passed through,
    since the add would turn a NaN with only low payload bits into infinity.
    """
    bits = _bits(t)
    rounded = (bits + _HALF) & _KEEP_MASK
    finite = (bits & _EXP_MASK) != _EXP_MASK
    return torch.where(finite, rounded, bits).view(torch.float32).reshape(t.shape)


def truncate_to_tf32(t: torch.Tensor) -> torch.Tensor:
    """Clear the 13 low mantissa bits: what tensor cores do to fp32 operands (round towards zero)."""
    bits = _bits(t)
    finite = (bits & _EXP_MASK) != _EXP_MASK
    return torch.where(finite, bits & _KEEP_MASK, bits).view(torch.float32).reshape(t.shape)


def is_tf32(t: torch.Tensor) -> bool:
    """Whether every finite element of ``t`` is exactly representable in TF32."""
    bits = _bits(t)
    finite = (bits & _EXP_MASK) != _EXP_MASK
    return bool(((bits & ~_KEEP_MASK)[finite] == 0).all())


__all__ = ["DROPPED_BITS", "is_tf32", "round_to_tf32", "truncate_to_tf32"]
