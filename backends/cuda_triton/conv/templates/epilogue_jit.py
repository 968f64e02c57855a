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
def tile_images(n, m_ok):
    """The first and the last image of a tile's valid rows ``m_ok`` (images ``n``; a tile's first row is valid)."""
    n_lo = tl.min(n, axis=0)
    return n_lo, tl.max(tl.where(m_ok, n, n_lo), axis=0)


@triton.jit
def prologue_operand_tile(ptr, n, n_lo, n_hi, c, c_ok, s_n, s_c, mask, IMAGES: tl.constexpr):
    """A `PER_NC` prologue operand for rows of images ``n`` and columns of input channels ``c``, in fp32.

    With IMAGES > 0 the rows lie in images ``n_lo``..``n_hi`` (at most IMAGES of them): one channel vector is
    loaded per image and each row selects its own, a few vector loads per K step. A gather per element
    (IMAGES == 0) is as many scalar loads as the input tile itself, which the pipeliner does not hide."""
    if IMAGES == 0:
        v = tl.load(ptr + (n * s_n)[:, None] + (c * s_c)[None, :], mask=mask, other=0.0).to(tl.float32)
    else:
        v = tl.load(ptr + n_lo * s_n + c * s_c, mask=c_ok, other=0.0).to(tl.float32)[None, :]
        for j in tl.static_range(1, IMAGES):
            s_j = tl.load(ptr + (n_lo + j) * s_n + c * s_c, mask=c_ok & (n_lo + j <= n_hi), other=0.0)
            v = tl.where((n == n_lo + j)[:, None], s_j.to(tl.float32)[None, :], v)
    return v


@triton.jit
def apply_prologue(
    a, n, n_lo, n_hi, c, c_ok, mask, p1_ptr, p1_sn, p1_sc, p2_ptr, p2_sn, p2_sc, p3_ptr, p3_sn, p3_sc,
    PROLOGUE: tl.constexpr, P_KINDS: tl.constexpr, P_IMAGES: tl.constexpr,
):  # fmt: skip
    """The chain ``PROLOGUE`` on an input tile ``a`` [rows, k] as loaded (its input 0), its `PER_NC` operands
    (P_KINDS: 0 absent) read at each row's image ``n`` (from ``n_lo`` to ``n_hi``, `tile_images`) and each
    column's input channel ``c`` (valid where ``c_ok``); returns the tile in ``a``'s dtype, zero where ``mask``
    is off (padding and tile edges stay zeros whatever the chain makes of them)."""
    x1 = None
    if P_KINDS[0] != 0:
        x1 = prologue_operand_tile(p1_ptr, n, n_lo, n_hi, c, c_ok, p1_sn, p1_sc, mask, P_IMAGES)
    x2 = None
    if P_KINDS[1] != 0:
        x2 = prologue_operand_tile(p2_ptr, n, n_lo, n_hi, c, c_ok, p2_sn, p2_sc, mask, P_IMAGES)
    x3 = None
    if P_KINDS[2] != 0:
        x3 = prologue_operand_tile(p3_ptr, n, n_lo, n_hi, c, c_ok, p3_sn, p3_sc, mask, P_IMAGES)
    y = apply_chain(a.to(tl.float32), x1, x2, x3, PROLOGUE)
    return tl.where(mask, y, 0.0).to(a.dtype)
