"""The implicit GEMM kernel (the package docstring describes its arguments, grid and prepared weight)."""

from __future__ import annotations

import triton
import triton.language as tl

from .._f16_mma import input_scales, weight_unscale
from .._tf32 import round_to_tf32
from ..epilogue_jit import apply_prologue, tile_images
from ..gemm_jit import (
    gemm_rows,
    grouped_tile_ids,
    input_strides,
    split_k_range,
    store_output,
    store_tile,
    weight_ptrs,
    widen_sizes,
)


@triton.jit
def conv_implicit_gemm_kernel(
    x_ptr, w_ptr, b_ptr, y_ptr, ws_ptr, cnt_ptr, amax_ptr,
    BATCH, D, H, W, OD, OH, OW,
    e1_ptr, e1_sn, e1_sc, e2_ptr, e2_sn, e2_sc, e3_ptr, e3_sn, e3_sc,
    p1_ptr, p1_sn, p1_sc, p2_ptr, p2_sn, p2_sc, p3_ptr, p3_sn, p3_sc,
    C_IN: tl.constexpr, C_OUT: tl.constexpr, CIN_T: tl.constexpr, COUT_T: tl.constexpr,
    CIN_P: tl.constexpr, COUT_P: tl.constexpr, K_ROWS: tl.constexpr,
    KD: tl.constexpr, KH: tl.constexpr, KW: tl.constexpr,
    SD: tl.constexpr, SH: tl.constexpr, SW: tl.constexpr,
    PD: tl.constexpr, PH: tl.constexpr, PW: tl.constexpr,
    DD: tl.constexpr, DH: tl.constexpr, DW: tl.constexpr,
    IN_CL: tl.constexpr, OUT_CL: tl.constexpr, HAS_BIAS: tl.constexpr, FLAT_K: tl.constexpr, W_KMAJOR: tl.constexpr,
    ROW_TILES: tl.constexpr, INT64: tl.constexpr, PRECISION: tl.constexpr, ROUND_TF32: tl.constexpr,
    F16_MMA: tl.constexpr, W_NUMEL: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
    SPLIT_K: tl.constexpr, TAIL_SPLIT: tl.constexpr, TAIL_M_TILES: tl.constexpr,
    PROGRAM: tl.constexpr, E_KINDS: tl.constexpr, PROLOGUE: tl.constexpr, P_KINDS: tl.constexpr,
    P_IMAGES: tl.constexpr,
):  # fmt: skip
    BATCH, D, H, W = widen_sizes(BATCH, D, H, W, INT64)
    s_n, s_c, s_d, s_h, s_w = input_strides(D, H, W, C_IN, IN_CL)
    out_pixels = OD * OH * OW
    if ROW_TILES:
        # Programs walk output rows: BLOCK_M consecutive pixels of one row, so contiguous (N, C, ...) loads
        # and stores are provably consecutive along M (and coalesce).
        row_blocks = (OW + BLOCK_M - 1) // BLOCK_M
        num_pid_m = BATCH * OD * OH * row_blocks
    else:
        num_pid_m = (BATCH * out_pixels + BLOCK_M - 1) // BLOCK_M
    num_pid_n = (COUT_T + BLOCK_N - 1) // BLOCK_N
    if TAIL_SPLIT == 1:
        pid_m, pid_n = grouped_tile_ids(tl.program_id(0), num_pid_m, num_pid_n, GROUP_M)
        share = 0
    else:
        # The first programs take whole tiles of all but the last TAIL_M_TILES rows of tiles; the rest take one
        # K share (share >= 1 below) of one tail tile each (_splitk.py).
        whole_m = num_pid_m - TAIL_M_TILES
        pid = tl.program_id(0)
        if pid < whole_m * num_pid_n:
            pid_m, pid_n = grouped_tile_ids(pid, whole_m, num_pid_n, GROUP_M)
            share = pid * 0  # a tensor in both branches
        else:
            j = pid - whole_m * num_pid_n
            pid_m = whole_m + (j // TAIL_SPLIT) // num_pid_n
            pid_n = (j // TAIL_SPLIT) % num_pid_n
            share = j % TAIL_SPLIT + 1
    tile = tl.program_id(1)  # group tile

    # Image, output pixel and output coordinates of each A row.
    if ROW_TILES:
        ow = (pid_m % row_blocks) * BLOCK_M + tl.arange(0, BLOCK_M)
        row = pid_m // row_blocks + 0 * ow  # as a vector, like the other coordinates
        if INT64:
            ow = ow.to(tl.int64)
            row = row.to(tl.int64)
        m_ok = ow < OW
        oh = row % OH
        od = (row // OH) % OD
        n = row // (OH * OD)
        pixel = (row % (OH * OD)) * OW + ow
    else:
        offs_m, m_ok, n, od, oh, ow = gemm_rows(
            pid_m, BATCH * out_pixels, OD, OH, OW, out_pixels, BLOCK_M, INT64
        )
        pixel = offs_m % out_pixels
    d0 = od * SD - PD
    h0 = oh * SH - PH
    w0 = ow * SW - PW
    x_tile = x_ptr + tile * CIN_T * s_c
    x_rows = n * s_n
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    w_tile = w_ptr + tile * (K_ROWS * COUT_P)

    # The K iterations this program runs: its tail share (TAIL_SPLIT), else its split-K share (split_k_range).
    if FLAT_K:
        K_ITERS: tl.constexpr = (KD * KH * KW * CIN_T + BLOCK_K - 1) // BLOCK_K
    else:
        K_ITERS: tl.constexpr = KD * KH * KW * (CIN_P // BLOCK_K)
    if TAIL_SPLIT > 1:  # a tail share (share >= 1) runs one of TAIL_SPLIT shares of its tile's iterations
        tl.static_assert(SPLIT_K == 1, "a tail-split schedule does not split K over program_id(2) too")
        TAIL_SHARE: tl.constexpr = (K_ITERS + TAIL_SPLIT - 1) // TAIL_SPLIT
        k_lo = tl.where(share > 0, (share - 1) * TAIL_SHARE, 0)
        k_hi = tl.where(share > 0, tl.minimum(k_lo + TAIL_SHARE, K_ITERS), K_ITERS)
    else:
        k_lo, k_hi = split_k_range(K_ITERS, SPLIT_K)

    if F16_MMA:  # fp32 at TF32 precision on fp16 tensor cores: the input scaled by 2^shift (_f16_mma.py)
        a_scale, a_unscale = input_scales(amax_ptr)
    if len(PROLOGUE) > 0:
        n_lo, n_hi = tile_images(n, m_ok)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    K_TOTAL: tl.constexpr = KD * KH * KW * CIN_T
    C_BLOCKS: tl.constexpr = CIN_P // BLOCK_K
    for kb in range(k_lo, k_hi):
        if FLAT_K:
            # K = (tap, channel) flattened: each A column has its own tap.
            offs_k = kb * BLOCK_K + tl.arange(0, BLOCK_K)
            c = offs_k % CIN_T
            tap = offs_k // CIN_T
            di = d0[:, None] + ((tap // (KH * KW)) * DD)[None, :]
            hi = h0[:, None] + (((tap // KW) % KH) * DH)[None, :]
            wi = w0[:, None] + ((tap % KW) * DW)[None, :]
            a_ok = m_ok[:, None] & (offs_k < K_TOTAL)[None, :]
            a_ok &= (di >= 0) & (di < D) & (hi >= 0) & (hi < H) & (wi >= 0) & (wi < W)
            a_ptrs = x_tile + x_rows[:, None] + di * s_d + hi * s_h + wi * s_w + c[None, :] * s_c
            a = tl.load(a_ptrs, mask=a_ok, other=0.0)
        else:
            # K = (tap, channel block): one tap a step, BLOCK_K of its channels.
            tap = kb // C_BLOCKS
            c = (kb % C_BLOCKS) * BLOCK_K + tl.arange(0, BLOCK_K)
            di = d0 + (tap // (KH * KW)) * DD
            hi = h0 + ((tap // KW) % KH) * DH
            wi = w0 + (tap % KW) * DW
            ok = m_ok & (di >= 0) & (di < D) & (hi >= 0) & (hi < H) & (wi >= 0) & (wi < W)
            rows = x_rows + di * s_d + hi * s_h + wi * s_w
            if CIN_T % BLOCK_K == 0:
                a_ok = ok[:, None]
            else:
                a_ok = ok[:, None] & (c < CIN_T)[None, :]
            a = tl.load(x_tile + rows[:, None] + c[None, :] * s_c, mask=a_ok, other=0.0)
        if len(PROLOGUE) > 0:  # a fused chain on the input, per (image, channel); padding stays zero
            a = apply_prologue(
                a, n, n_lo, n_hi, c, c < CIN_T, a_ok, p1_ptr, p1_sn, p1_sc, p2_ptr, p2_sn, p2_sc, p3_ptr, p3_sn,
                p3_sc, PROLOGUE, P_KINDS, P_IMAGES,
            )  # fmt: skip
        if F16_MMA == 1:  # (F16_MMA == 2 reads the scaled fp16 copy of the input)
            a = (a * a_scale).to(tl.float16)
        elif ROUND_TF32:  # fp32 with TF32: round to nearest, not the MMA's truncation (_tf32.py)
            a = round_to_tf32(a, ROUND_TF32)
        if FLAT_K:
            b = tl.load(weight_ptrs(w_tile, offs_k, offs_n, K_ROWS, COUT_P, W_KMAJOR))
        else:
            b = tl.load(weight_ptrs(w_tile, tap * CIN_P + c, offs_n, K_ROWS, COUT_P, W_KMAJOR))
        acc = tl.dot(a, b, acc, input_precision=PRECISION)
    if F16_MMA:  # undo both scalings (powers of two: exact) before any store
        acc = acc * a_unscale * weight_unscale(w_ptr, W_NUMEL)

    if TAIL_SPLIT > 1 and len(PROGRAM) == 0:  # (the template fuses no chain into a tail split)
        if share == 0:
            store_output(
                y_ptr, b_ptr, acc, n, pixel, m_ok, offs_n, tile * COUT_T, COUT_T, C_OUT, out_pixels, HAS_BIAS,
                OUT_CL,
            )  # fmt: skip
        else:
            # A tail share: partial sums of rows ROW0.. into ws_ptr [TAIL_SPLIT, TAIL_ROWS, C_OUT].
            row0 = (num_pid_m - TAIL_M_TILES) * BLOCK_M
            tail_rows = BATCH * out_pixels - row0
            ws = ws_ptr + (share - 1) * (tail_rows * C_OUT)
            store_output(
                ws, b_ptr, acc, 0, offs_m - row0, m_ok, offs_n, tile * COUT_T, COUT_T, C_OUT, 0, False, True
            )
    else:
        store_tile(
            y_ptr, b_ptr, ws_ptr, cnt_ptr, acc, n, pixel, m_ok, offs_n, tile * COUT_T, COUT_T, C_OUT, BATCH * out_pixels,
            out_pixels,
            e1_ptr, e1_sn, e1_sc, e2_ptr, e2_sn, e2_sc, e3_ptr, e3_sn, e3_sc, HAS_BIAS, OUT_CL, SPLIT_K, PROGRAM,
            E_KINDS,
        )  # fmt: skip
