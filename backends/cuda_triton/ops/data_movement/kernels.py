"""The data-movement kernels and their schedules.

* `strided_copy_kernel`: y[i] = x[i] over a box of up to 6 dims, each tensor with its own strides and element
  offset, converting the dtype on the way. Permute, clone, dim-order changes, slices, selects, expands,
  as_strided, non-free views, each cat input and each split output are one launch of it (`copy_plan.py` merges
  dims first, so most launches are 1-3 dims).
* `pad_copy_kernel`: the same walk over the output box of ``constant_pad_nd``: output coordinate c reads input
  coordinate c - before where that is inside the input, else writes the fill value.
* `transpose_copy_kernel`: a batch of [A, C] matrices where the input has C adjacent and the output has A
  adjacent (a layout change such as contiguous <-> channels-last): tiles are loaded along C and stored along A, so
  both sides move whole runs of memory (Triton stages the transpose through shared memory).
* `upsample_nearest_kernel`, `upsample_bilinear_kernel`: (positions x channels) tiles as the pooling kernel has;
  source indices follow ATen's CPU formulas (docs/data_movement.md).

The generic walk takes the box's sizes innermost first (S0 is the innermost; the outermost size follows from
NUMEL) so that a kernel of any rank reads the same argument list; dims above RANK are unused (size 1, stride 0).
"""

from __future__ import annotations

import triton
import triton.language as tl

from ...kernel.launch import Schedule

MAX_RANK = 6


@triton.jit
def _unravel(i, S0, S1, S2, S3, S4, RANK: tl.constexpr):
    """Coordinates (innermost first) of flat index ``i`` in a box of RANK dims with sizes S0 (innermost), S1, ...;
    the outermost dim takes what is left; unused dims are 0."""
    zero = i * 0
    c0, c1, c2, c3, c4, c5 = i, zero, zero, zero, zero, zero
    if RANK > 1:
        c1 = c0 // S0
        c0 = c0 % S0
    if RANK > 2:
        c2 = c1 // S1
        c1 = c1 % S1
    if RANK > 3:
        c3 = c2 // S2
        c2 = c2 % S2
    if RANK > 4:
        c4 = c3 // S3
        c3 = c3 % S3
    if RANK > 5:
        c5 = c4 // S4
        c4 = c4 % S4
    return c0, c1, c2, c3, c4, c5


@triton.jit
def _offset(c0, c1, c2, c3, c4, c5, T0, T1, T2, T3, T4, T5, RANK: tl.constexpr, UNIT: tl.constexpr):
    """Element offset of coordinates c with strides T (innermost first); UNIT: the innermost stride is 1."""
    if UNIT:
        off = c0
    else:
        off = c0 * T0
    if RANK > 1:
        off += c1 * T1
    if RANK > 2:
        off += c2 * T2
    if RANK > 3:
        off += c3 * T3
    if RANK > 4:
        off += c4 * T4
    if RANK > 5:
        off += c5 * T5
    return off


@triton.jit
def strided_copy_kernel(
    x_ptr, y_ptr, NUMEL, X_OFFSET, Y_OFFSET,
    S0, S1, S2, S3, S4,
    XS0, XS1, XS2, XS3, XS4, XS5,
    YS0, YS1, YS2, YS3, YS4, YS5,
    RANK: tl.constexpr, X_UNIT: tl.constexpr, Y_UNIT: tl.constexpr, INT64: tl.constexpr, BLOCK: tl.constexpr,
):  # fmt: skip
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    if INT64:
        i = i.to(tl.int64)
    ok = i < NUMEL
    c0, c1, c2, c3, c4, c5 = _unravel(i, S0, S1, S2, S3, S4, RANK)
    src = X_OFFSET + _offset(c0, c1, c2, c3, c4, c5, XS0, XS1, XS2, XS3, XS4, XS5, RANK, X_UNIT)
    dst = Y_OFFSET + _offset(c0, c1, c2, c3, c4, c5, YS0, YS1, YS2, YS3, YS4, YS5, RANK, Y_UNIT)
    v = tl.load(x_ptr + src, mask=ok)
    tl.store(y_ptr + dst, v.to(y_ptr.dtype.element_ty), mask=ok)


@triton.jit
def _inside(c, before, size):
    return (c >= before) & (c < before + size)


@triton.jit
def pad_copy_kernel(
    x_ptr, y_ptr, NUMEL, X_OFFSET, Y_OFFSET, VALUE,
    S0, S1, S2, S3, S4,
    B0, B1, B2, B3, B4, B5,
    I0, I1, I2, I3, I4, I5,
    XS0, XS1, XS2, XS3, XS4, XS5,
    YS0, YS1, YS2, YS3, YS4, YS5,
    RANK: tl.constexpr, X_UNIT: tl.constexpr, Y_UNIT: tl.constexpr, INT64: tl.constexpr, BLOCK: tl.constexpr,
):  # fmt: skip
    """S: output box sizes, B: padding before each dim (negative: cropped), I: input sizes; all innermost first."""
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    if INT64:
        i = i.to(tl.int64)
    ok = i < NUMEL
    c0, c1, c2, c3, c4, c5 = _unravel(i, S0, S1, S2, S3, S4, RANK)
    inside = ok & _inside(c0, B0, I0)
    if RANK > 1:
        inside &= _inside(c1, B1, I1)
    if RANK > 2:
        inside &= _inside(c2, B2, I2)
    if RANK > 3:
        inside &= _inside(c3, B3, I3)
    if RANK > 4:
        inside &= _inside(c4, B4, I4)
    if RANK > 5:
        inside &= _inside(c5, B5, I5)
    src = X_OFFSET + _offset(
        c0 - B0, c1 - B1, c2 - B2, c3 - B3, c4 - B4, c5 - B5, XS0, XS1, XS2, XS3, XS4, XS5, RANK, X_UNIT
    )
    dst = Y_OFFSET + _offset(c0, c1, c2, c3, c4, c5, YS0, YS1, YS2, YS3, YS4, YS5, RANK, Y_UNIT)
    v = tl.load(x_ptr + src, mask=inside, other=VALUE)
    tl.store(y_ptr + dst, v.to(y_ptr.dtype.element_ty), mask=ok)


@triton.jit
def transpose_copy_kernel(
    x_ptr, y_ptr, A, C, X_OFFSET, Y_OFFSET, XSB, XSA, YSB, YSC,
    INT64: tl.constexpr, TILE_A: tl.constexpr, TILE_C: tl.constexpr,
):  # fmt: skip
    """y[b, a, c] = x[b, a, c]: x has c adjacent (stride 1), y has a adjacent. Grid: (tiles of [A, C], B, 1)."""
    tiles_c = (C + TILE_C - 1) // TILE_C
    pid = tl.program_id(0)
    offs_a = (pid // tiles_c) * TILE_A + tl.arange(0, TILE_A)
    offs_c = (pid % tiles_c) * TILE_C + tl.arange(0, TILE_C)
    b = tl.program_id(1)
    if INT64:
        offs_a = offs_a.to(tl.int64)
        offs_c = offs_c.to(tl.int64)
        b = b.to(tl.int64)
    ok = (offs_a < A)[:, None] & (offs_c < C)[None, :]
    v = tl.load(x_ptr + X_OFFSET + b * XSB + offs_a[:, None] * XSA + offs_c[None, :], mask=ok)
    tl.store(
        y_ptr + Y_OFFSET + b * YSB + offs_a[:, None] + offs_c[None, :] * YSC,
        v.to(y_ptr.dtype.element_ty),
        mask=ok,
    )


@triton.jit
def _nearest_source(o, size, SCALE, EXACT: tl.constexpr):
    """ATen's nearest (floor(o * scale)) or nearest-exact (floor((o + 0.5) * scale)) source index, in fp32 as ATen
    computes it, clamped to the last input index."""
    if EXACT:
        src = tl.floor((o.to(tl.float32) + 0.5) * SCALE).to(tl.int32)
    else:
        src = tl.floor(o.to(tl.float32) * SCALE).to(tl.int32)
    return tl.minimum(src, size - 1)


@triton.jit
def upsample_nearest_kernel(
    x_ptr, y_ptr,
    M, C, D, H, W, OD, OH, OW,
    XSN, XSC, XSD, XSH, XSW, YSN, YSC, YSD, YSH, YSW,
    SCALE_D, SCALE_H, SCALE_W,
    EXACT: tl.constexpr, C_UNIT: tl.constexpr, INT64: tl.constexpr, BLOCK_P: tl.constexpr, BLOCK_C: tl.constexpr,
):  # fmt: skip
    """Tiles of BLOCK_P output positions (batch and spatial flattened) by BLOCK_C channels."""
    offs_p = tl.program_id(0) * BLOCK_P + tl.arange(0, BLOCK_P)
    offs_c = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)
    if INT64:
        offs_p = offs_p.to(tl.int64)
    ok = (offs_p < M)[:, None] & (offs_c < C)[None, :]
    ow = offs_p % OW
    oh = (offs_p // OW) % OH
    od = (offs_p // (OW * OH)) % OD
    n = offs_p // (OW * OH * OD)
    di = _nearest_source(od, D, SCALE_D, EXACT)
    hi = _nearest_source(oh, H, SCALE_H, EXACT)
    wi = _nearest_source(ow, W, SCALE_W, EXACT)
    if C_UNIT:
        x_c = offs_c
        y_c = offs_c
    else:
        x_c = offs_c * XSC
        y_c = offs_c * YSC
    src = (n * XSN + di * XSD + hi * XSH + wi * XSW)[:, None] + x_c[None, :]
    v = tl.load(x_ptr + src, mask=ok)
    dst = (n * YSN + od * YSD + oh * YSH + ow * YSW)[:, None] + y_c[None, :]
    tl.store(y_ptr + dst, v, mask=ok)


@triton.jit
def _linear_source(o, size, RATIO, ALIGN_CORNERS: tl.constexpr):
    """ATen's linear-interpolation source: (index i0, index i1, weight of i1)."""
    if ALIGN_CORNERS:
        real = RATIO * o.to(tl.float32)
    else:
        real = tl.maximum(RATIO * (o.to(tl.float32) + 0.5) - 0.5, 0.0)
    i0 = tl.minimum(tl.floor(real).to(tl.int32), size - 1)
    lam = tl.minimum(tl.maximum(real - i0.to(tl.float32), 0.0), 1.0)
    i1 = tl.where(i0 < size - 1, i0 + 1, i0)
    return i0, i1, lam


@triton.jit
def upsample_bilinear_kernel(
    x_ptr, y_ptr,
    M, C, H, W, OH, OW,
    XSN, XSC, XSH, XSW, YSN, YSC, YSH, YSW,
    RATIO_H, RATIO_W,
    ALIGN_CORNERS: tl.constexpr, C_UNIT: tl.constexpr, INT64: tl.constexpr,
    BLOCK_P: tl.constexpr, BLOCK_C: tl.constexpr,
):  # fmt: skip
    offs_p = tl.program_id(0) * BLOCK_P + tl.arange(0, BLOCK_P)
    offs_c = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)
    if INT64:
        offs_p = offs_p.to(tl.int64)
    ok = (offs_p < M)[:, None] & (offs_c < C)[None, :]
    ow = offs_p % OW
    oh = (offs_p // OW) % OH
    n = offs_p // (OW * OH)
    h0, h1, lh = _linear_source(oh, H, RATIO_H, ALIGN_CORNERS)
    w0, w1, lw = _linear_source(ow, W, RATIO_W, ALIGN_CORNERS)
    if C_UNIT:
        x_c = offs_c[None, :]
        y_c = offs_c[None, :]
    else:
        x_c = offs_c[None, :] * XSC
        y_c = offs_c[None, :] * YSC
    x_n = x_ptr + n * XSN
    x00 = tl.load((x_n + h0 * XSH + w0 * XSW)[:, None] + x_c, mask=ok).to(tl.float32)
    x01 = tl.load((x_n + h0 * XSH + w1 * XSW)[:, None] + x_c, mask=ok).to(tl.float32)
    x10 = tl.load((x_n + h1 * XSH + w0 * XSW)[:, None] + x_c, mask=ok).to(tl.float32)
    x11 = tl.load((x_n + h1 * XSH + w1 * XSW)[:, None] + x_c, mask=ok).to(tl.float32)
    lh = lh[:, None]
    lw = lw[:, None]
    top = (1.0 - lw) * x00 + lw * x01
    bottom = (1.0 - lw) * x10 + lw * x11
    v = (1.0 - lh) * top + lh * bottom
    dst = (n * YSN + oh * YSH + ow * YSW)[:, None] + y_c
    tl.store(y_ptr + dst, v.to(y_ptr.dtype.element_ty), mask=ok)


# ---- schedules ---------------------------------------------------------------------------------------------
def copy_schedule(block: int = 1024, tile: int = 64, num_warps: int = 4) -> Schedule:
    """A copy schedule: BLOCK elements per program for the strided walks, TILE x TILE for transposes."""
    return Schedule.make(num_warps, 1, BLOCK=block, TILE=tile)


def copy_schedules() -> list[Schedule]:
    """The tuning space of the copy kernels (the heuristic's pick first)."""
    return [
        copy_schedule(),
        copy_schedule(2048, 64, 8),
        copy_schedule(512, 32, 4),
        copy_schedule(4096, 64, 8),
    ]
