"""The Triton side of fused convolution epilogues and prologues (conv/epilogue.py), shared by the kernels that take
them."""

from __future__ import annotations

import triton
import triton.language as tl

from ...ops.elementwise.math import apply_chain


@triton.jit
def epilogue_operand(ptr, offs, n, co, s_n, s_c, KIND: tl.constexpr, mask):
    """One operand as an fp32 [rows, channels] tile: KIND 1 (LIKE_OUTPUT) at the output's own element offsets
    ``offs``, KIND 2 (PER_NC) at ``n * s_n + c * s_c`` for each row's image ``n`` and each channel ``c``."""
    if KIND == 1:
        v = tl.load(ptr + offs, mask=mask, other=0.0)
    else:
        v = tl.load(ptr + (n * s_n)[:, None] + (co * s_c)[None, :], mask=mask, other=0.0)
    return v.to(tl.float32)


@triton.jit
def apply_epilogue(
    acc, offs, n, co, mask, e1_ptr, e1_sn, e1_sc, e2_ptr, e2_sn, e2_sc, e3_ptr, e3_sn, e3_sc,
    PROGRAM: tl.constexpr, E_KINDS: tl.constexpr,
):  # fmt: skip
    """The chain ``PROGRAM`` on the fp32 tile ``acc`` (its input 0), its operands read as E_KINDS says (0:
    absent); ``offs`` are the tile's element offsets in the output, ``n`` each row's image, ``co`` the channels."""
    x1 = None
    if E_KINDS[0] != 0:
        x1 = epilogue_operand(e1_ptr, offs, n, co, e1_sn, e1_sc, E_KINDS[0], mask)
    x2 = None
    if E_KINDS[1] != 0:
        x2 = epilogue_operand(e2_ptr, offs, n, co, e2_sn, e2_sc, E_KINDS[1], mask)
    x3 = None
    if E_KINDS[2] != 0:
        x3 = epilogue_operand(e3_ptr, offs, n, co, e3_sn, e3_sc, E_KINDS[2], mask)
    return apply_chain(acc, x1, x2, x3, PROGRAM)


@triton.jit
def apply_prologue(
    a, n, c, mask, p1_ptr, p1_sn, p1_sc, p2_ptr, p2_sn, p2_sc, p3_ptr, p3_sn, p3_sc,
    PROLOGUE: tl.constexpr, P_KINDS: tl.constexpr,
):  # fmt: skip
    """The chain ``PROLOGUE`` on an input tile ``a`` [rows, k] as loaded (its input 0), its `PER_NC` operands
    read at each row's image ``n`` and each column's input channel ``c``; returns the tile in ``a``'s dtype, zero
    where ``mask`` is off (padding and tile edges stay zeros whatever the chain makes of them)."""
    y = apply_epilogue(
        a.to(tl.float32), 0, n, c, mask, p1_ptr, p1_sn, p1_sc, p2_ptr, p2_sn, p2_sc, p3_ptr, p3_sn, p3_sc,
        PROLOGUE, P_KINDS,
    )  # fmt: skip
    return tl.where(mask, y, 0.0).to(a.dtype)
