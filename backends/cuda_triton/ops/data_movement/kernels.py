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

The generic walks take the box's sizes innermost first (S0 is the innermost; the outermost size follows from
ROWS, the product of the sizes above dim 0) so that a kernel of any rank reads the same argument list; dims above
RANK are unused (size 1, stride 0).
"""

from __future__ import annotations

import triton
import triton.language as tl

from ...kernel.launch import Schedule
from ..tiling import channel_offsets, split_positions, tile_offsets

MAX_RANK = 6


@triton.jit
def _copy_tile(ROWS, S0, INT64: tl.constexpr, BLOCK_R: tl.constexpr, BLOCK_I: tl.constexpr):
    """This program's rows (flat indices over the box's outer dims) and run positions (along dim 0)."""
    pid = tl.program_id(0)
    runs = tl.cdiv(S0, BLOCK_I)
    r = (pid // runs) * BLOCK_R + tl.arange(0, BLOCK_R)
    j = (pid % runs) * BLOCK_I + tl.arange(0, BLOCK_I)
    if INT64:
        r = r.to(tl.int64)
        j = j.to(tl.int64)
    return r, j


@triton.jit
def _row_coords(r, S1, S2, S3, S4, RANK: tl.constexpr):
    """Coordinates of dims 1-5 (innermost first) of row ``r``, with sizes S1, S2, ...: the outermost used dim
    takes what is left; unused dims are 0."""
    sizes = (S1, S2, S3, S4)
    rest = r
    coords = ()
    for d in tl.static_range(4):
        if RANK > d + 2:  # a dim above dim d + 1 is used: dim d + 1 is the remainder, the quotient goes up
            above = rest // sizes[d]
            coords = coords + (rest % sizes[d],)
            rest = above
    coords = coords + (rest,)
    for _ in tl.static_range(len(coords), 5):  # the unused dims
        coords = coords + (r * 0,)
    return coords


@triton.jit
def _row_offset(coords, strides, RANK: tl.constexpr):
    """Element offset of a row's coordinates (dims 1-5, as `_row_coords` gives them) with ``strides`` (dims above
    RANK unused)."""
    off = coords[0] * 0
    for d in tl.static_range(5):
        if RANK > d + 1:
            off += coords[d] * strides[d]
    return off


@triton.jit
def _run_offset(j, T0, UNIT: tl.constexpr):
    """Element offset along the run; UNIT: its stride is 1 (written as 1 so the compiler sees adjacent elements)."""
    if UNIT:
        off = j
    else:
        off = j * T0
    return off


@triton.jit
def strided_copy_kernel(
    x_ptr, y_ptr, ROWS, X_OFFSET, Y_OFFSET,
    S0, S1, S2, S3, S4,
    XS0, XS1, XS2, XS3, XS4, XS5,
    YS0, YS1, YS2, YS3, YS4, YS5,
    RANK: tl.constexpr, X_UNIT: tl.constexpr, Y_UNIT: tl.constexpr, INT64: tl.constexpr,
    BLOCK_R: tl.constexpr, BLOCK_I: tl.constexpr,
):  # fmt: skip
    """Tiles of BLOCK_R rows by BLOCK_I elements of the runs along dim 0 (S0 long); the row index is split over
    the outer dims once per row, not per element. Grid: (cdiv(ROWS, BLOCK_R) * cdiv(S0, BLOCK_I), 1, 1)."""
    r, j = _copy_tile(ROWS, S0, INT64, BLOCK_R, BLOCK_I)
    ok = (r < ROWS)[:, None] & (j < S0)[None, :]
    coords = _row_coords(r, S1, S2, S3, S4, RANK)
    src = (X_OFFSET + _row_offset(coords, (XS1, XS2, XS3, XS4, XS5), RANK))[:, None]
    dst = (Y_OFFSET + _row_offset(coords, (YS1, YS2, YS3, YS4, YS5), RANK))[:, None]
    v = tl.load(x_ptr + src + _run_offset(j, XS0, X_UNIT)[None, :], mask=ok)
    tl.store(y_ptr + dst + _run_offset(j, YS0, Y_UNIT)[None, :], v.to(y_ptr.dtype.element_ty), mask=ok)


@triton.jit
def _inside(c, before, size):
    return (c >= before) & (c < before + size)


@triton.jit
def pad_copy_kernel(
    x_ptr, y_ptr, ROWS, X_OFFSET, Y_OFFSET, VALUE,
    S0, S1, S2, S3, S4,
    B0, B1, B2, B3, B4, B5,
    I0, I1, I2, I3, I4, I5,
    XS0, XS1, XS2, XS3, XS4, XS5,
    YS0, YS1, YS2, YS3, YS4, YS5,
    RANK: tl.constexpr, X_UNIT: tl.constexpr, Y_UNIT: tl.constexpr, INT64: tl.constexpr,
    BLOCK_R: tl.constexpr, BLOCK_I: tl.constexpr,
):  # fmt: skip
    """The tiles of `strided_copy_kernel` over the output box S; B: padding before each dim (negative: cropped),
    I: input sizes, both innermost first."""
    r, j = _copy_tile(ROWS, S0, INT64, BLOCK_R, BLOCK_I)
    ok = (r < ROWS)[:, None] & (j < S0)[None, :]
    coords = _row_coords(r, S1, S2, S3, S4, RANK)
    before = (B1, B2, B3, B4, B5)
    in_sizes = (I1, I2, I3, I4, I5)
    row_inside = r >= 0
    for d in tl.static_range(5):
        if RANK > d + 1:
            row_inside &= _inside(coords[d], before[d], in_sizes[d])
    inside = ok & row_inside[:, None] & _inside(j, B0, I0)[None, :]
    x_coords = ()
    for d in tl.static_range(5):
        x_coords = x_coords + (coords[d] - before[d],)
    src = X_OFFSET + _row_offset(x_coords, (XS1, XS2, XS3, XS4, XS5), RANK)
    dst = Y_OFFSET + _row_offset(coords, (YS1, YS2, YS3, YS4, YS5), RANK)
    v = tl.load(x_ptr + src[:, None] + _run_offset(j - B0, XS0, X_UNIT)[None, :], mask=inside, other=VALUE)
    tl.store(
        y_ptr + dst[:, None] + _run_offset(j, YS0, Y_UNIT)[None, :], v.to(y_ptr.dtype.element_ty), mask=ok
    )


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
    offs_p, offs_c = tile_offsets(BLOCK_P, BLOCK_C, INT64)
    ok = (offs_p < M)[:, None] & (offs_c < C)[None, :]
    n, od, oh, ow = split_positions(offs_p, OD, OH, OW)
    di = _nearest_source(od, D, SCALE_D, EXACT)
    hi = _nearest_source(oh, H, SCALE_H, EXACT)
    wi = _nearest_source(ow, W, SCALE_W, EXACT)
    x_c, y_c = channel_offsets(offs_c, XSC, YSC, C_UNIT)
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
    offs_p, offs_c = tile_offsets(BLOCK_P, BLOCK_C, INT64)
    ok = (offs_p < M)[:, None] & (offs_c < C)[None, :]
    n, _, oh, ow = split_positions(offs_p, 1, OH, OW)
    h0, h1, lh = _linear_source(oh, H, RATIO_H, ALIGN_CORNERS)
    w0, w1, lw = _linear_source(ow, W, RATIO_W, ALIGN_CORNERS)
    x_c, y_c = channel_offsets(offs_c, XSC, YSC, C_UNIT)
    x_c = x_c[None, :]
    y_c = y_c[None, :]
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
    """A copy schedule: BLOCK elements per program for the strided walks (BLOCK_R rows by BLOCK_I run elements,
    the run tile as long as the run up to BLOCK: `copy_plan.run_tile`), TILE x TILE for transposes."""
    return Schedule.make(num_warps, 1, BLOCK=block, TILE=tile)


def copy_schedules() -> list[Schedule]:
    """The tuning space of the copy kernels (the heuristic's pick first)."""
    return [
        copy_schedule(),
        copy_schedule(2048, 64, 8),
        copy_schedule(512, 32, 4),
        copy_schedule(4096, 64, 8),
    ]
