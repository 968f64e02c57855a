"""The box kernel's Triton-language twin: the same parameters, grid and results with masked pointer loads, for
Triton's CPU interpreter and the archs the Gluon kernel is not written for."""

from __future__ import annotations

import triton
import triton.language as tl

from .._f16_mma import input_scales, weight_unscale
from .._tf32 import round_to_tf32
from ..gemm_jit import store_output, store_output_with_epilogue


@triton.jit
def box_origin(OH, OW, BOX_N: tl.constexpr, BOX_H: tl.constexpr, BOX_W: tl.constexpr, BLOCK_N: tl.constexpr):
    """The program's first image, output row, output column and output channel: grid axis 0 walks the boxes
    row-major over (images, rows, columns), axis 1 the channel blocks. The Gluon kernel calls it too."""
    tiles_h = (OH + BOX_H - 1) // BOX_H
    tiles_w = (OW + BOX_W - 1) // BOX_W
    pid = tl.program_id(0)
    return (
        pid // (tiles_h * tiles_w) * BOX_N,
        pid // tiles_w % tiles_h * BOX_H,
        pid % tiles_w * BOX_W,
        tl.program_id(1) * BLOCK_N,
    )


@triton.jit
def conv_box_portable_kernel(
    x_ptr, w_ptr, b_ptr, y_ptr, amax_ptr,
    BATCH, H, W, OH, OW,
    e1_ptr, e1_sn, e1_sc, e2_ptr, e2_sn, e2_sc, e3_ptr, e3_sn, e3_sc,
    C_IN: tl.constexpr, C_OUT: tl.constexpr, CIN_P: tl.constexpr, COUT_P: tl.constexpr,
    KH: tl.constexpr, KW: tl.constexpr, PH: tl.constexpr, PW: tl.constexpr, DH: tl.constexpr, DW: tl.constexpr,
    SH: tl.constexpr, SW: tl.constexpr,
    OUT_CL: tl.constexpr, HAS_BIAS: tl.constexpr, DOT_FP32: tl.constexpr, F16_MMA: tl.constexpr, W_NUMEL: tl.constexpr,
    TF32: tl.constexpr, ROUND_TF32: tl.constexpr,
    BOX_N: tl.constexpr, BOX_H: tl.constexpr, BOX_W: tl.constexpr,
    BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, A_SWIZZLE: tl.constexpr, B_SWIZZLE: tl.constexpr,
    STAGES: tl.constexpr, WARPS: tl.constexpr, WS: tl.constexpr, PROGRAM: tl.constexpr, E_KINDS: tl.constexpr,
):  # fmt: skip
    """`conv_box_kernel` with masked loads: same tiles, same K steps, same epilogue (swizzles unused)."""
    BLOCK_M: tl.constexpr = BOX_N * BOX_H * BOX_W
    C_BLOCKS: tl.constexpr = CIN_P // BLOCK_K
    n0, oh0, ow0, co0 = box_origin(OH, OW, BOX_N, BOX_H, BOX_W, BLOCK_N)

    r = tl.arange(0, BLOCK_M)  # the box's pixels in row-major order: the Gluon kernel's A rows
    n = n0 + r // (BOX_H * BOX_W)
    oh = oh0 + r // BOX_W % BOX_H
    ow = ow0 + r % BOX_W
    offs_k = tl.arange(0, BLOCK_K)
    offs_n = co0 + tl.arange(0, BLOCK_N)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for i in range(KH * KW * C_BLOCKS):
        tap = i // C_BLOCKS
        ih = oh * SH + (tap // KW) * DH - PH
        iw = ow * SW + (tap % KW) * DW - PW
        c = (i % C_BLOCKS) * BLOCK_K + offs_k
        inside = (n < BATCH) & (ih >= 0) & (ih < H) & (iw >= 0) & (iw < W)
        a = tl.load(
            x_ptr + (((n * H + ih) * W + iw) * C_IN)[:, None] + c[None, :],
            mask=inside[:, None] & (c < C_IN)[None, :],
            other=0.0,
        )
        k_rows = i * BLOCK_K + offs_k  # the prepared weight is padded: always in bounds
        if TF32:  # K-major [COUT_P, taps * CIN_P]; A rounded to nearest TF32 as in the Gluon kernel
            b = tl.load(w_ptr + offs_n[None, :] * (KH * KW * CIN_P) + k_rows[:, None])
            if ROUND_TF32:
                a = round_to_tf32(a, ROUND_TF32)
        else:
            b = tl.load(w_ptr + k_rows[:, None] * COUT_P + offs_n[None, :])
        if DOT_FP32:  # Triton's interpreter only: its tl.dot reads bf16 operands as raw integers
            a = a.to(tl.float32)
            b = b.to(tl.float32)
        acc = tl.dot(a, b, acc)
    if F16_MMA:  # fp32 on fp16 tensor cores: undo the power-of-two scales (exact)
        _, x_unscale = input_scales(amax_ptr)
        acc = acc * (x_unscale * weight_unscale(w_ptr, W_NUMEL))
    m_ok = (n < BATCH) & (oh < OH) & (ow < OW)
    if len(PROGRAM) > 0:
        store_output_with_epilogue(
            y_ptr, b_ptr, acc, n, oh * OW + ow, m_ok, offs_n, C_OUT, OH * OW,
            e1_ptr, e1_sn, e1_sc, e2_ptr, e2_sn, e2_sc, e3_ptr, e3_sn, e3_sc, HAS_BIAS, OUT_CL, PROGRAM, E_KINDS,
        )  # fmt: skip
    else:
        store_output(
            y_ptr, b_ptr, acc, n, oh * OW + ow, m_ok, offs_n, 0, C_OUT, C_OUT, OH * OW, HAS_BIAS, OUT_CL
        )
