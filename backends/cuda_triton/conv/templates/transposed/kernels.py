"""The phase kernel of transposed convolutions (the package docstring gives its arguments, constexprs, grid and
prepared weight)."""

from __future__ import annotations

import triton
import triton.language as tl

from .._f16_mma import input_scales, weight_unscale
from .._tf32 import round_to_tf32


@triton.jit
def _phase_geometry(
    r, out_len, K: tl.constexpr, S: tl.constexpr, P: tl.constexpr, D: tl.constexpr, G: tl.constexpr
):
    """For phase ``r`` of one dim: (first q, number of q, first tap, number of taps, input offset of tap 0)."""
    SG: tl.constexpr = S // G
    t0 = r * 0 - 1
    for t in tl.static_range(SG):
        t0 = tl.where(r == (t * D) % S, t, t0)
    n_taps = tl.where(t0 >= 0, (K - t0 + SG - 1) // SG, 0)
    t0 = tl.maximum(t0, 0)
    x_off = (t0 * D - r) // S  # exact and >= 0 whenever n_taps > 0
    q_start = (P - r + S - 1) // S
    q_count = (P + out_len - r + S - 1) // S - q_start
    return q_start, q_count, t0, n_taps, x_off


@triton.jit
def _conv_transpose_phase_kernel(
    x_ptr, w_ptr, b_ptr, y_ptr, amax_ptr, N, ID, IH, IW, OD, OH, OW, CIN_G: tl.constexpr,
    COUT_G: tl.constexpr, GROUPS: tl.constexpr, KD: tl.constexpr, KH: tl.constexpr, KW: tl.constexpr,
    SD: tl.constexpr, SH: tl.constexpr, SW: tl.constexpr, PD: tl.constexpr, PH: tl.constexpr,
    PW: tl.constexpr, DD: tl.constexpr, DH: tl.constexpr, DW: tl.constexpr, GD: tl.constexpr,
    GH: tl.constexpr, GW: tl.constexpr, IN_CL: tl.constexpr, OUT_CL: tl.constexpr, HAS_BIAS: tl.constexpr,
    ALLOW_TF32: tl.constexpr, ROUND_TF32: tl.constexpr, F16_MMA: tl.constexpr, W_NUMEL: tl.constexpr,
    ROW_TILED: tl.constexpr, W_FOLD: tl.constexpr, DOT_FP32: tl.constexpr, BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
):  # fmt: skip
    CIN: tl.constexpr = CIN_G * GROUPS
    COUT: tl.constexpr = COUT_G * GROUPS
    W_PHASES: tl.constexpr = SW if W_FOLD else 1  # W phases one program computes
    GRID_SW: tl.constexpr = SW // W_PHASES  # W phases in the grid
    NPH: tl.constexpr = SD * SH * GRID_SW
    TILES_N: tl.constexpr = (COUT_G + BLOCK_N - 1) // BLOCK_N
    KCB: tl.constexpr = (CIN_G + BLOCK_K - 1) // BLOCK_K

    pid = tl.program_id(0)
    g = tl.program_id(1)
    tile_n = pid % TILES_N
    rest = pid // TILES_N
    phase = rest % NPH
    tile_m = rest // NPH
    rw = phase % GRID_SW  # W_FOLD: 0, whose geometry (q from 0, one tap, x = q) every W phase shares
    rh = (phase // GRID_SW) % SH
    rd = phase // (GRID_SW * SH)

    qd0, QD, td0, ntd, xd0 = _phase_geometry(rd, OD, KD, SD, PD, DD, GD)
    qh0, QH, th0, nth, xh0 = _phase_geometry(rh, OH, KH, SH, PH, DH, GH)
    qw0, QW, tw0, ntw, xw0 = _phase_geometry(rw, OW, KW, SW, PW, DW, GW)

    # Rows of this tile: (n, qd, qh, qw) positions of the phase.
    if ROW_TILED:
        row_tiles = tl.maximum(tl.cdiv(QW, BLOCK_M), 1)
        row = tile_m // row_tiles
        qw = (tile_m % row_tiles) * BLOCK_M + tl.arange(0, BLOCK_M)
        qh = row % tl.maximum(QH, 1)
        rest_r = row // tl.maximum(QH, 1)
        qd = rest_r % tl.maximum(QD, 1)
        n = rest_r // tl.maximum(QD, 1)
        m_ok = (qw < QW) & (n < N) & (QH > 0) & (QD > 0)
        n = n + qw * 0  # a row vector in both modes
    else:
        offs_m = tile_m * BLOCK_M + tl.arange(0, BLOCK_M)
        m_ok = offs_m < N * QD * QH * QW
        qw = offs_m % tl.maximum(QW, 1)
        rest_m = offs_m // tl.maximum(QW, 1)
        qh = rest_m % tl.maximum(QH, 1)
        rest_m = rest_m // tl.maximum(QH, 1)
        qd = rest_m % tl.maximum(QD, 1)
        n = rest_m // tl.maximum(QD, 1)
    qd = qd + qd0
    qh = qh + qh0
    qw = qw + qw0

    if W_FOLD:  # SW B tiles side by side: column c is W phase (= W tap) c // BLOCK_N, channel c % BLOCK_N
        cols = tl.arange(0, W_PHASES * BLOCK_N)
        w_tap = cols // BLOCK_N
        co = tile_n * BLOCK_N + cols % BLOCK_N
    else:
        w_tap = 0
        co = tile_n * BLOCK_N + tl.arange(0, BLOCK_N)
    co_ok = co < COUT_G
    ck = tl.arange(0, BLOCK_K)
    if IN_CL:
        x_rows = x_ptr + n.to(tl.int64) * (ID * IH * IW * CIN) + g * CIN_G
    else:
        x_rows = x_ptr + n.to(tl.int64) * (CIN * ID * IH * IW) + g * CIN_G * (ID * IH * IW)
    w_group = w_ptr + g * (KD * KH * KW * CIN_G * COUT_G)

    if F16_MMA:  # fp32 at TF32 precision on fp16 tensor cores: the input scaled by 2^shift (_f16_mma.py)
        a_scale, a_unscale = input_scales(amax_ptr)
    acc = tl.zeros((BLOCK_M, W_PHASES * BLOCK_N), dtype=tl.float32)
    n_hw = nth * ntw
    for it in range(0, ntd * n_hw * KCB):
        tap = it // KCB
        kc = it - tap * KCB
        jd = tap // n_hw
        rem = tap - jd * n_hw
        jh = rem // ntw
        jw = rem - jh * ntw
        xd = qd - xd0 - jd * (DD // GD)
        xh = qh - xh0 - jh * (DH // GH)
        xw = qw - xw0 - jw * (DW // GW)
        ok = m_ok & (xd >= 0) & (xd < ID) & (xh >= 0) & (xh < IH) & (xw >= 0) & (xw < IW)
        ci = kc * BLOCK_K + ck
        ci_ok = ci < CIN_G
        pos = (xd * IH + xh) * IW + xw
        if IN_CL:
            a_ptrs = x_rows[:, None] + pos[:, None] * CIN + ci[None, :]
        else:
            a_ptrs = x_rows[:, None] + ci[None, :] * (ID * IH * IW) + pos[:, None]
        a = tl.load(a_ptrs, mask=ok[:, None] & ci_ok[None, :], other=0.0)
        if F16_MMA == 1:  # (F16_MMA == 2 reads the scaled fp16 copy of the input)
            a = (a * a_scale).to(tl.float16)
        elif ROUND_TF32:  # fp32 with TF32: round to nearest, not the MMA's truncation (_tf32.py)
            a = round_to_tf32(a, ROUND_TF32)
        tap_idx = ((td0 + jd * (SD // GD)) * KH + th0 + jh * (SH // GH)) * KW + tw0 + jw * (SW // GW)
        b_ptrs = w_group + ((tap_idx + w_tap) * COUT_G + co)[None, :] * CIN_G + ci[:, None]
        b = tl.load(b_ptrs, mask=ci_ok[:, None] & co_ok[None, :], other=0.0)
        if DOT_FP32:  # Triton's interpreter only: its tl.dot reads bf16 operands as raw integers
            acc = tl.dot(a.to(tl.float32), b.to(tl.float32), acc, input_precision="ieee")
        elif F16_MMA:  # fp16 operands (input_precision only concerns fp32 ones)
            acc = tl.dot(a, b, acc)
        elif ALLOW_TF32:
            acc = tl.dot(a, b, acc, input_precision="tf32")
        else:
            acc = tl.dot(a, b, acc, input_precision="ieee")
    if F16_MMA:  # undo both scalings (powers of two: exact) before the bias and the store
        acc = acc * a_unscale * weight_unscale(w_ptr, W_NUMEL)

    if HAS_BIAS:
        acc += tl.load(b_ptr + g * COUT_G + co, mask=co_ok, other=0.0).to(tl.float32)[None, :]
    od = qd * SD + rd - PD
    oh = qh * SH + rh - PH
    ow = qw * SW + rw - PW
    out_pos = ((od * OH + oh) * OW + ow)[:, None]
    if W_FOLD:  # W phase j sits j pixels after phase 0 (channels-last: the SW pixels of a row are adjacent)
        out_pos = out_pos + w_tap[None, :]
    if OUT_CL:
        y_rows = y_ptr + n.to(tl.int64) * (OD * OH * OW * COUT) + g * COUT_G
        y_ptrs = y_rows[:, None] + out_pos * COUT + co[None, :]
    else:
        y_rows = y_ptr + n.to(tl.int64) * (COUT * OD * OH * OW) + g * COUT_G * (OD * OH * OW)
        y_ptrs = y_rows[:, None] + co[None, :] * (OD * OH * OW) + out_pos
    tl.store(y_ptrs, acc.to(y_ptr.dtype.element_ty), mask=m_ok[:, None] & co_ok[None, :])
