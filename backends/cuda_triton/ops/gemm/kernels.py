"""The GEMM kernels and their schedules: a tiled ``tl.dot`` GEMM over strided, batched operands, and the split-K
reduction.

`gemm_kernel` computes one [BLOCK_M, BLOCK_N] tile of ``out[b] = alpha * (a[b] @ w[b]) + beta * bias`` per
program, accumulating in fp32 over BLOCK_K slices of K (the Triton tutorial's matmul: grouped program order so
weight tiles stay in L2, row and column indices wrapped modulo M and N so only the K tail needs a mask). Strides
are runtime arguments; the one that is 1 in each operand is a constexpr (``*_UNIT``) so that loads vectorise.
fp32 runs on TF32 tensor cores when allowed (both tiles rounded to nearest first, as the convolutions do: see
conv/templates/_tf32.py; a constant w is rounded once at export and ROUND_W is off), else in exact fp32. The epilogue (`_epilogue`) applies a fused elementwise chain
(``PROGRAM``, conv/epilogue.py; empty: none) after the bias, its operands read like the output (``E_KINDS`` 1) or
per column (2), before the one rounding to the output's dtype.

A row-normalising prologue (ROW_NORM, a layer norm over K folded into the GEMM: its weight scales the rows of
w and its bias is in ``bias``, preprocess/gemm_norm.py) first runs over the tile's rows of A once for their mean
and variance, shifted by each row's first element so that a large mean does not cancel the variance (the rows
are then in L2 for the main loop, which stays the plain GEMM's: A goes to the MMA as it is loaded); the epilogue
applies ``rstd * (acc - mean * colsum)`` with w's column sums (``colsum_ptr``, fp32 [N], made at export by
`row_norm.column_sums`), which is ``((a - mean) * rstd) @ w``. It needs the whole K in one program (no split).

Split-K (SPLIT_K > 1, for few output tiles over a long K such as a batch-1 classifier): program_id(2) takes one
contiguous share of the K slices and stores its fp32 partial sums into the workspace [SPLIT_K, B, M, N], then
counts itself done on its tile's counter (``cnt_ptr``, int32, one per program of grid axes 0 and 1, zero before
the launch); the tile's last share to finish adds the shares in a fixed order (deterministic), applies the
epilogue and resets the counter (conv/templates/_splitk.py says why there is no reduction kernel).
"""

from __future__ import annotations

import triton
import triton.language as tl

from ...conv.templates._splitk import MAX_SPLIT, MIN_SHARE
from ...conv.templates._tf32 import round_to_tf32
from ...conv.templates.epilogue_jit import apply_epilogue
from ...conv.templates.gemm_jit import grouped_tile_ids, is_last_split_k_share, split_k_range
from ...conv.templates.geometry import NUM_SMS, fit_block
from ...kernel.launch import Schedule, cdiv
from ...kernel.spaces import TILE_FIELDS, load_rows
from ..tensor_meta import INT32_LIMIT

GROUP_M = 8


@triton.jit
def _tile_ptrs(base, rows, cols, S_ROW, S_COL, ROW_UNIT: tl.constexpr, COL_UNIT: tl.constexpr):
    """[rows, cols] pointers of a strided matrix; a unit stride is written as 1 so the compiler sees it."""
    if COL_UNIT:
        ptrs = base + rows[:, None] * S_ROW + cols[None, :]
    elif ROW_UNIT:
        ptrs = base + rows[:, None] + cols[None, :] * S_COL
    else:
        ptrs = base + rows[:, None] * S_ROW + cols[None, :] * S_COL
    return ptrs


@triton.jit
def _epilogue(acc, bias_ptr, c_ptr, c_off, offs_m, offs_n, M, N, SBM, SBN, SCM, SCN, ALPHA, BETA,
              e1_ptr, e1_sn, e1_sc, e2_ptr, e2_sn, e2_sc, e3_ptr, e3_sn, e3_sc,
              HAS_BIAS: tl.constexpr, C_N_UNIT: tl.constexpr, PROGRAM: tl.constexpr, E_KINDS: tl.constexpr):  # fmt: skip
    """alpha * acc + beta * bias, then the chain PROGRAM, rounded once to the output's dtype and stored at
    ``c_off`` (the batch's offset) + the tile's offsets (rows past M, cols past N not)."""
    ok = (offs_m < M)[:, None] & (offs_n < N)[None, :]
    acc = acc * ALPHA
    if HAS_BIAS:
        bias = tl.load(bias_ptr + offs_m[:, None] * SBM + offs_n[None, :] * SBN, mask=ok, other=0.0)
        acc += BETA * bias.to(tl.float32)
    if C_N_UNIT:
        offs = offs_m[:, None] * SCM + offs_n[None, :]
    else:
        offs = offs_m[:, None] * SCM + offs_n[None, :] * SCN
    if len(PROGRAM) > 0:
        # An operand like the output is read at the output's offsets, the batch's included; a per-column one is
        # PER_NC with no image stride (offs_m stands in for the image).
        if E_KINDS[0] == 1:
            e1_ptr += c_off
        if E_KINDS[1] == 1:
            e2_ptr += c_off
        if E_KINDS[2] == 1:
            e3_ptr += c_off
        acc = apply_epilogue(
            acc, offs, offs_m, offs_n, ok, e1_ptr, e1_sn, e1_sc, e2_ptr, e2_sn, e2_sc, e3_ptr, e3_sn, e3_sc,
            PROGRAM, E_KINDS,
        )  # fmt: skip
    tl.store(c_ptr + c_off + offs, acc.to(c_ptr.dtype.element_ty), mask=ok)


@triton.jit
def _row_sums(a_base, rows, K, SAM, SAK, A_M_UNIT: tl.constexpr, A_K_UNIT: tl.constexpr, EVEN_K: tl.constexpr,
              BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr):  # fmt: skip
    """Each row's first element, and the sums of the row's elements and of their squares less that element."""
    shift = tl.load(a_base + rows * SAM).to(tl.float32)
    row_sum = tl.zeros((BLOCK_M,), dtype=tl.float32)
    row_sq = tl.zeros((BLOCK_M,), dtype=tl.float32)
    for kb in range(0, tl.cdiv(K, BLOCK_K)):
        ks = kb * BLOCK_K + tl.arange(0, BLOCK_K)
        a_ptrs = _tile_ptrs(a_base, rows, ks, SAM, SAK, A_M_UNIT, A_K_UNIT)
        if EVEN_K:
            d = tl.load(a_ptrs).to(tl.float32) - shift[:, None]
        else:
            d = tl.load(a_ptrs, mask=(ks < K)[None, :], other=0.0).to(tl.float32) - shift[:, None]
            d = tl.where((ks < K)[None, :], d, 0.0)
        row_sum += tl.sum(d, axis=1)
        row_sq += tl.sum(d * d, axis=1)
    return shift, row_sum, row_sq


@triton.jit
def _normalise_rows(acc, shift, row_sum, row_sq, col_sum, K, EPS: tl.constexpr, SHIFTED: tl.constexpr):
    """``acc = a @ w`` (``(a - shift) @ w`` when SHIFTED) turned into ``((a - mean) * rstd) @ w``: the rows' mean
    and biased variance (as a layer norm takes them) from their sums shifted by ``shift``."""
    shifted_mean = row_sum / K
    var = tl.maximum(row_sq / K - shifted_mean * shifted_mean, 0.0)
    rstd = tl.div_rn(1.0, tl.sqrt_rn(var + EPS))  # correctly rounded, as the norm kernels (ops/norm)
    mean = shifted_mean if SHIFTED else shift + shifted_mean
    return (acc - mean[:, None] * col_sum[None, :]) * rstd[:, None]


@triton.jit
def gemm_kernel(
    a_ptr, w_ptr, bias_ptr, c_ptr, ws_ptr, cnt_ptr, colsum_ptr,
    M, N, K,
    SAB, SAM, SAK, SWB, SWK, SWN, SBM, SBN, SCB, SCM, SCN,
    ALPHA, BETA,
    e1_ptr, e1_sn, e1_sc, e2_ptr, e2_sn, e2_sc, e3_ptr, e3_sn, e3_sc,
    A_M_UNIT: tl.constexpr, A_K_UNIT: tl.constexpr, W_K_UNIT: tl.constexpr, W_N_UNIT: tl.constexpr,
    C_N_UNIT: tl.constexpr, HAS_BIAS: tl.constexpr, EVEN_K: tl.constexpr, PRECISION: tl.constexpr,
    ROUND_TF32: tl.constexpr, ROUND_W: tl.constexpr, INT64: tl.constexpr, ROW_NORM: tl.constexpr, NORM_EPS: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
    SPLIT_K: tl.constexpr, PROGRAM: tl.constexpr, E_KINDS: tl.constexpr,
):  # fmt: skip
    """Grid: (tiles of [M, N], B, SPLIT_K). With SPLIT_K > 1, ``ws_ptr`` is the fp32 workspace and ``cnt_ptr``
    the tile counters (unused pointers otherwise)."""
    pid_m, pid_n = grouped_tile_ids(tl.program_id(0), tl.cdiv(M, BLOCK_M), tl.cdiv(N, BLOCK_N), GROUP_M)
    batch = tl.program_id(1).to(tl.int64)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    if INT64:
        offs_m = offs_m.to(tl.int64)
        offs_n = offs_n.to(tl.int64)
    rows = offs_m % M  # rows past M re-read valid ones; their results are never stored
    cols = offs_n % N
    a_base = a_ptr + batch * SAB
    w_base = w_ptr + batch * SWB

    k_lo, k_hi = split_k_range(tl.cdiv(K, BLOCK_K), SPLIT_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    # fp32 on TF32 tensor cores multiplies a - shift: the rounding of a row far from zero would cost the
    # normalised row most of its precision
    TF32_SHIFT: tl.constexpr = ROW_NORM and PRECISION == "tf32" and a_ptr.dtype.element_ty == tl.float32
    if ROW_NORM:
        shift, row_sum, row_sq = _row_sums(
            a_base, rows, K, SAM, SAK, A_M_UNIT, A_K_UNIT, EVEN_K, BLOCK_M, BLOCK_K
        )
    for kb in range(k_lo, k_hi):
        ks = kb * BLOCK_K + tl.arange(0, BLOCK_K)
        a_ptrs = _tile_ptrs(a_base, rows, ks, SAM, SAK, A_M_UNIT, A_K_UNIT)
        w_ptrs = _tile_ptrs(w_base, ks, cols, SWK, SWN, W_K_UNIT, W_N_UNIT)
        if EVEN_K:
            a = tl.load(a_ptrs)
            w = tl.load(w_ptrs)
        else:
            a = tl.load(a_ptrs, mask=(ks < K)[None, :], other=0.0)
            w = tl.load(w_ptrs, mask=(ks < K)[:, None], other=0.0)
        if TF32_SHIFT:  # rounded to TF32 below: shifted, a row's rounding error scales with its spread alone
            a = a - shift[:, None]
            if not EVEN_K:
                a = tl.where((ks < K)[None, :], a, 0.0)
        if ROUND_TF32:  # fp32 on TF32 tensor cores: round to nearest, not the MMA's truncation
            a = round_to_tf32(a, ROUND_TF32)
        if (
            ROUND_W
        ):  # a constant w is rounded at export instead, which keeps its loads on the asynchronous path
            w = round_to_tf32(w, ROUND_W)
        acc = tl.dot(a, w, acc, input_precision=PRECISION)
    if ROW_NORM:
        col_sum = tl.load(colsum_ptr + cols)
        acc = _normalise_rows(acc, shift, row_sum, row_sq, col_sum, K, NORM_EPS, TF32_SHIFT)

    if (
        SPLIT_K > 1
    ):  # this share's partial sums into the workspace [SPLIT_K, B, M, N]; the last share sums them
        ok = (offs_m < M)[:, None] & (offs_n < N)[None, :]
        tile = batch * M * N + offs_m[:, None] * N + offs_n[None, :]
        share_stride = tl.num_programs(1) * M * N
        tl.store(ws_ptr + tl.program_id(2) * share_stride + tile, acc, mask=ok)
        if is_last_split_k_share(cnt_ptr, SPLIT_K):
            acc = tl.zeros_like(acc)
            for s in tl.static_range(SPLIT_K):  # a fixed order: the sum is deterministic
                acc += tl.load(ws_ptr + s * share_stride + tile, mask=ok, other=0.0, cache_modifier=".cg")
            _epilogue(acc, bias_ptr, c_ptr, batch * SCB, offs_m, offs_n, M, N, SBM, SBN, SCM, SCN, ALPHA, BETA,
                      e1_ptr, e1_sn, e1_sc, e2_ptr, e2_sn, e2_sc, e3_ptr, e3_sn, e3_sc, HAS_BIAS, C_N_UNIT,
                      PROGRAM, E_KINDS)  # fmt: skip
    else:
        _epilogue(acc, bias_ptr, c_ptr, batch * SCB, offs_m, offs_n, M, N, SBM, SBN, SCM, SCN, ALPHA, BETA,
                  e1_ptr, e1_sn, e1_sc, e2_ptr, e2_sn, e2_sc, e3_ptr, e3_sn, e3_sc, HAS_BIAS, C_N_UNIT, PROGRAM,
                  E_KINDS)  # fmt: skip


# ---- schedules ---------------------------------------------------------------------------------------------
# (BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages) for 16-bit dtypes; fp32 halves BLOCK_K.
# The BLOCK_K 32 rows give short reductions (ConvNeXt's K = 96) an unmasked K loop and more programs per SM.
_CONFIGS = load_rows(__file__, "CONFIGS", TILE_FIELDS)


def _schedule(
    m: int, n: int, k: int, fp32: bool, bm: int, bn: int, bk: int, warps: int, stages: int, split: int = 1
):
    bk = bk // 2 if fp32 else bk
    params = {
        "BLOCK_M": fit_block(bm, m),
        "BLOCK_N": fit_block(bn, n),
        "BLOCK_K": fit_block(bk, k),
        "GROUP_M": GROUP_M,
    }
    if split > 1:
        params["SPLIT_K"] = split
    return Schedule.make(warps, stages, **params)


def split_k_options(
    batch: int, m: int, n: int, k: int, block_m: int, block_n: int, block_k: int
) -> list[int]:
    """SPLIT_K values that bring few output tiles towards a full wave of the GPU, each share keeping at least
    MIN_SHARE slices of K, the workspace addressable in 32 bits. Tiles that fill half the GPU but less than two
    waves get 2 and 3 (a last wave that leaves SMs idle, as M = 1568, N = 768 in 64 x 128 tiles: 150 programs on
    132 SMs); [] from two waves on."""
    tiles = cdiv(m, block_m) * cdiv(n, block_n) * batch
    iters = cdiv(k, block_k)
    if tiles * 2 > NUM_SMS:
        if tiles >= 2 * NUM_SMS:
            return []
        return [s for s in (2, 3) if iters // s >= MIN_SHARE and s * batch * m * n < INT32_LIMIT]
    split = 2
    while tiles * split < NUM_SMS and split * 2 <= MAX_SPLIT:
        split *= 2
    while split > 1 and (iters // split < MIN_SHARE or split * batch * m * n >= INT32_LIMIT):
        split //= 2
    return sorted({split, split // 2} - {0, 1})


# The heuristic's split-K rule, fitted to scripts/tune_gemm.py on the H100 (docs/performance.md, "GEMM
# schedules"): a split pays for its reduce launch only when few tiles each run a long K loop. fp32 tiles take
# twice the K steps (BLOCK_K halved) and each step rounds both tiles to TF32 in registers, so fp32 splits up to
# twice the tiles (ConvNeXt-T's 24-tile K = 1536 layer at batch 1 ran 38 us unsplit on the H100).
# An expanding layer with a fused chain and this many waves of 64 x 128 tiles or more runs 64 x 64 tiles:
# ConvNeXt-T's GELU layers at batch 32 on the H100 (scripts/tune_gemm.py, fp16, us, 64 x 128 -> 64 x 64):
# (M, K, N) = (100352, 96, 384), 35 waves: 87.6 -> 75.6; (25088, 192, 768), 18 waves: 53.7 -> 48.8; but
# (6272, 384, 1536), 9 waves, stays on 64 x 128 (37.1 against 38.7), as does every layer without a chain
# ((100352, 96, 384): 54.2 against 59.3).
CHAINED_SMALL_TILE_WAVES = 16
SPLIT_MAX_TILES = 16
SPLIT_MAX_TILES_FP32 = 32
SPLIT_MIN_K = 1024
SPLIT_MAX = 4
# fp32 layers with fewer 64 x 64 tiles than SMs run faster on 16-row tiles (four times the programs; a TF32 K
# step is half as long). ConvNeXt-T's batch-1 linear layers on the H200 (scripts/tune_gemm.py, docs/gemm.md),
# (M, K, N), 64-row -> 16-row tiles in us: (3136, 384, 96) 8.3 -> 7.4, (784, 768, 192) 13.4 -> 9.4,
# (196, 384, 1536) 8.5 -> 7.7, (49, 768, 3072) 12.6 -> 9.6, split 4 (49, 3072, 768) 15.8 -> 12.0; but a split of
# more rows keeps 64: (196, 1536, 384) 11.6 -> 12.3.


def heuristic_schedule_for(
    batch: int, m: int, n: int, k: int, fp32: bool, split_ok: bool = True, chained: bool = False
) -> Schedule:
    """Big tiles when there are many; small row tiles for small M (a batch-1 classifier has M = 1), split along
    K when few tiles each run a long K loop.

    With tiles to fill the GPU, 64 x 128 tiles on 4 warps beat 128 x 128 on 8 (more programs resident per SM
    overlap one tile's epilogue with another's loads); a layer whose output is wider than its reduction (an
    expanding MLP layer, store-bound) takes BLOCK_K 32 for the same reason, and with a fused chain
    (``chained``: a GELU costs about 22 instructions an element) 64 x 64 tiles once there are
    `CHAINED_SMALL_TILE_WAVES` waves of 64 x 128 ones."""
    bk = 64
    if m <= 64:
        bm, bn, warps, stages = (16 if m <= 32 else 64), 64, 4, 4
    elif cdiv(m, 128) * cdiv(n, 128) * batch >= NUM_SMS:
        bm, bn, warps, stages = 64, 128, 4, 4
        bk = 32 if n > k else 64
        if chained and n > k and cdiv(m, 64) * cdiv(n, 128) * batch >= CHAINED_SMALL_TILE_WAVES * NUM_SMS:
            bn = 64
    else:
        bm, bn, warps, stages = 64, 64, 4, 4
    base = _schedule(m, n, k, fp32, bm, bn, bk, warps, stages)
    tiles = cdiv(m, base["BLOCK_M"]) * cdiv(n, base["BLOCK_N"]) * batch
    # fp32 with fewer 64 x 64 tiles than SMs: 16-row tiles (the measurements above)
    rows16 = fp32 and (bm, bn) == (64, 64) and tiles < NUM_SMS
    if tiles > (SPLIT_MAX_TILES_FP32 if fp32 else SPLIT_MAX_TILES) or k < SPLIT_MIN_K or not split_ok:
        return _schedule(m, n, k, fp32, 16, bn, bk, warps, stages) if rows16 else base
    splits = split_k_options(batch, m, n, k, base["BLOCK_M"], base["BLOCK_N"], base["BLOCK_K"])
    if splits:  # the largest split the space offers, at most SPLIT_MAX (fewer shares only lengthen each)
        bm = 16 if rows16 and m <= 64 else bm  # a split of more than 64 rows keeps its 64-row tiles
        return _schedule(m, n, k, fp32, bm, bn, bk, warps, stages, min(splits[-1], SPLIT_MAX))
    return base


def schedule_space(batch: int, m: int, n: int, k: int, fp32: bool, chained: bool = False) -> list[Schedule]:
    """The tuning space (the heuristic's pick first), split-K variants of the small tiles included."""
    out = [heuristic_schedule_for(batch, m, n, k, fp32, chained=chained)]
    for bm, bn, bk, warps, stages in _CONFIGS:
        s = _schedule(m, n, k, fp32, bm, bn, bk, warps, stages)
        variants = [s] + [
            _schedule(m, n, k, fp32, bm, bn, bk, warps, stages, split)
            for split in split_k_options(batch, m, n, k, s["BLOCK_M"], s["BLOCK_N"], s["BLOCK_K"])
        ]
        out += [v for v in variants if v not in out]
    return out
