"""The normalisation kernels: inference batch norm (elementwise), layer/group norm and softmax (row kernels).

``batch_norm_kernel`` is elementwise over the output in its memory order (dims merged as in the elementwise
kernel); the per-channel parameters are read at the channel index, which the stride pattern C_KINDS picks out of
the merged dims (1 on the channel dim, 0 elsewhere). Arguments (PTX order): out, x, mean, var, weight, bias
pointers (an absent weight/bias is given the mean's pointer and HAS_WEIGHT/HAS_BIAS False), numel, sizes 1-4,
out strides 0-4, x strides 0-4, eps; constexprs RANK, OUT_KINDS, X_KINDS, C_KINDS, HAS_WEIGHT, HAS_BIAS, EPILOGUE
(the fused chain, or None), BLOCK, INDEX_64. Grid: (cdiv(numel, BLOCK), 1, 1).

The row kernels see input and output as [M, L] (spec.RowView): M rows over the kept dims, L elements per row
over the normalized dims, each an index space of up to 5 merged dims with runtime sizes and the input's and
output's strides. A program takes BLOCK_K rows. With ONE_TILE a row fits in one [BLOCK_K, BLOCK_R] tile held in
registers (one read of the input); otherwise the kernel sweeps each row in BLOCK_R steps: two statistics passes
and a writing pass for the norms, an online max/sum pass and a writing pass for softmax. Statistics in fp32.

``row_norm_kernel`` (layer and group norm) arguments (PTX order): x, out, weight, bias, part pointers (part: the
fp32 scratch [chunks, M, 2] of a split row's statistics; an unsplit launch is given x), chunk, chunks (a split
row's chunk length and count), M, L, row sizes 1-4, row x strides 0-4, row out strides 0-4, in-row sizes 1-4,
in-row x strides 0-4, in-row out strides 0-4, groups, group_channels, channel_stride (group norm's channel of
element (row, col) is (row % groups) * group_channels + col // channel_stride; layer norm's parameter index is
col), divisor (fp32 L), eps. Constexprs: K_RANK, R_RANK, four stride patterns, HAS_WEIGHT, HAS_BIAS, PER_GROUP,
EPILOGUE, PHASE (WHOLE_ROWS, or a split row's CHUNK_STATS then NORMALIZE_CHUNK launch), ONE_TILE, BLOCK_K,
BLOCK_R, INDEX_64. Grid: (cdiv(M, BLOCK_K), chunks, 1).
``softmax_kernel``: x, out, then the arguments from M, without groups, group_channels, channel_stride, divisor and
eps, and with LOG. Grid: (cdiv(M, BLOCK_K), 1, 1).
"""

from __future__ import annotations

import triton
import triton.language as tl

from ...conv.templates.geometry import NUM_SMS
from ...kernel.launch import Schedule, ScratchTensor, cdiv
from ..elementwise.math import apply_chain
from ..indexing import load_fp32, program_range, strided_offset, unravel

ONE_TILE_MAX = 4096  # longest row held in registers
WHOLE_ROWS = tl.constexpr(0)  # row_norm_kernel's PHASE: each program normalizes whole rows
CHUNK_STATS = tl.constexpr(1)  # a split row's first launch: each chunk's statistics
NORMALIZE_CHUNK = tl.constexpr(2)  # its second launch: the statistics combined, each chunk normalized


# ---- batch norm ------------------------------------------------------------------------------------------------
@triton.jit
def batch_norm(x, mean, var, weight, bias, eps, HAS_WEIGHT: tl.constexpr, HAS_BIAS: tl.constexpr):
    """Inference batch norm of fp32 ``x`` with its channel's statistics and parameters (also an epilogue's)."""
    y = (x - mean) * tl.div_rn(1.0, tl.sqrt_rn(var + eps))
    if HAS_WEIGHT:
        y = y * weight
    if HAS_BIAS:
        y = y + bias
    return y


@triton.jit
def _epilogue(y, EPILOGUE: tl.constexpr):
    """The fused elementwise chain on the normalized fp32 tile (value 0 of the chain), if any."""
    if EPILOGUE is not None:
        y = apply_chain(y, None, None, None, EPILOGUE)
    return y


@triton.jit
def batch_norm_kernel(
    out_ptr, x_ptr, mean_ptr, var_ptr, w_ptr, b_ptr,
    numel, size1, size2, size3, size4,
    out_s0, out_s1, out_s2, out_s3, out_s4, x_s0, x_s1, x_s2, x_s3, x_s4, eps,
    RANK: tl.constexpr, OUT_KINDS: tl.constexpr, X_KINDS: tl.constexpr, C_KINDS: tl.constexpr,
    HAS_WEIGHT: tl.constexpr, HAS_BIAS: tl.constexpr, EPILOGUE: tl.constexpr, BLOCK: tl.constexpr,
    INDEX_64: tl.constexpr,
):  # fmt: skip
    lin = program_range(BLOCK, INDEX_64)
    mask = lin < numel
    idx = unravel(lin, (size1, size2, size3, size4), RANK)
    x = load_fp32(x_ptr, 0, (x_s0, x_s1, x_s2, x_s3, x_s4), idx, X_KINDS, mask)
    c = strided_offset(
        0, (0, 0, 0, 0, 0), idx, C_KINDS
    )  # the channel: C_KINDS has only unit and zero strides
    mean = tl.load(mean_ptr + c, mask=mask).to(tl.float32)
    var = tl.load(var_ptr + c, mask=mask).to(tl.float32)
    weight = 1.0
    if HAS_WEIGHT:
        weight = tl.load(w_ptr + c, mask=mask).to(tl.float32)
    bias = 0.0
    if HAS_BIAS:
        bias = tl.load(b_ptr + c, mask=mask).to(tl.float32)
    y = _epilogue(batch_norm(x, mean, var, weight, bias, eps, HAS_WEIGHT, HAS_BIAS), EPILOGUE)
    out = out_ptr + strided_offset(0, (out_s0, out_s1, out_s2, out_s3, out_s4), idx, OUT_KINDS)
    tl.store(out, y.to(out_ptr.dtype.element_ty), mask=mask)


# ---- row kernels -----------------------------------------------------------------------------------------------
@triton.jit
def _offsets(
    lin, sizes, x_strides, out_strides, RANK: tl.constexpr, X_KINDS: tl.constexpr, OUT_KINDS: tl.constexpr
):
    """Input and output element offsets of the linear indices ``lin`` of a merged index space."""
    idx = unravel(lin, sizes, RANK)
    return strided_offset(0, x_strides, idx, X_KINDS), strided_offset(0, out_strides, idx, OUT_KINDS)


@triton.jit
def _affine(y, w_ptr, b_ptr, rows, cols, mask, col_ok, groups, group_channels, channel_stride,
            HAS_WEIGHT: tl.constexpr, HAS_BIAS: tl.constexpr, PER_GROUP: tl.constexpr):  # fmt: skip
    """``y * weight + bias`` with the parameters of each element's channel (group norm) or in-row position."""
    if PER_GROUP:
        ch = (rows % groups)[:, None] * group_channels + (cols // channel_stride)[None, :]
        ok = mask
    else:
        ch = cols[None, :]
        ok = col_ok[None, :]
    if HAS_WEIGHT:
        y = y * tl.load(w_ptr + ch, mask=ok, other=0.0).to(tl.float32)
    if HAS_BIAS:
        y = y + tl.load(b_ptr + ch, mask=ok, other=0.0).to(tl.float32)
    return y


@triton.jit
def _row_view(
    x_ptr, M, L,
    ksize1, ksize2, ksize3, ksize4, x_k0, x_k1, x_k2, x_k3, x_k4, out_k0, out_k1, out_k2, out_k3, out_k4,
    rsize1, rsize2, rsize3, rsize4, x_r0, x_r1, x_r2, x_r3, x_r4, out_r0, out_r1, out_r2, out_r3, out_r4,
    K_RANK: tl.constexpr, X_K_KINDS: tl.constexpr, OUT_K_KINDS: tl.constexpr, BLOCK_K: tl.constexpr,
    INDEX_64: tl.constexpr,
):  # fmt: skip
    """The row kernels' [M, L] view of their arguments: this program's rows, their output offsets, what
    `_row_tile` reads them with (x_ptr, x offsets, mask) and the in-row index space (L, sizes, x and out
    strides)."""
    rows = program_range(BLOCK_K, INDEX_64)
    x_rows, out_rows = _offsets(rows, (ksize1, ksize2, ksize3, ksize4), (x_k0, x_k1, x_k2, x_k3, x_k4),
                                (out_k0, out_k1, out_k2, out_k3, out_k4), K_RANK, X_K_KINDS,
                                OUT_K_KINDS)  # fmt: skip
    shape = (L, (rsize1, rsize2, rsize3, rsize4), (x_r0, x_r1, x_r2, x_r3, x_r4),
             (out_r0, out_r1, out_r2, out_r3, out_r4))  # fmt: skip
    return rows, out_rows, (x_ptr, x_rows, rows < M), shape


@triton.jit
def _row_tile(x_ptr, x_rows, row_ok, start, L, rsizes, x_r, out_r, R_RANK: tl.constexpr, X_R_KINDS: tl.constexpr,
              OUT_R_KINDS: tl.constexpr, BLOCK_R: tl.constexpr, OTHER: tl.constexpr):  # fmt: skip
    """In-row elements start..start+BLOCK_R of the program's rows: (x in fp32, OTHER where masked; cols; mask;
    the output's in-row offsets)."""
    cols = start + tl.arange(0, BLOCK_R)
    x_cols, out_cols = _offsets(cols, rsizes, x_r, out_r, R_RANK, X_R_KINDS, OUT_R_KINDS)
    mask = row_ok[:, None] & (cols < L)[None, :]
    x = tl.load(x_ptr + x_rows[:, None] + x_cols[None, :], mask=mask, other=OTHER).to(tl.float32)
    return x, cols, mask, out_cols


@triton.jit
def _chunk_stats(tile, shape, start, stop, R_RANK: tl.constexpr, X_R_KINDS: tl.constexpr,
                 OUT_R_KINDS: tl.constexpr, BLOCK_K: tl.constexpr, BLOCK_R: tl.constexpr):  # fmt: skip
    """Mean and sum of squared deviations of in-row elements [start, stop) of the program's rows (two sweeps)."""
    in_chunk = (stop, shape[1], shape[2], shape[3])  # tiles masked at the chunk's end
    total = tl.zeros((BLOCK_K,), tl.float32)
    for s in range(start, stop, BLOCK_R):
        x, _, _, _ = _row_tile(*tile, s, *in_chunk, R_RANK, X_R_KINDS, OUT_R_KINDS, BLOCK_R, 0.0)
        total += tl.sum(x, axis=1)
    mean = tl.div_rn(total, (stop - start).to(tl.float32))
    squares = tl.zeros((BLOCK_K,), tl.float32)
    for s in range(start, stop, BLOCK_R):
        x, _, mask, _ = _row_tile(*tile, s, *in_chunk, R_RANK, X_R_KINDS, OUT_R_KINDS, BLOCK_R, 0.0)
        d = tl.where(mask, x - mean[:, None], 0.0)
        squares += tl.sum(d * d, axis=1)
    return mean, squares


@triton.jit
def _combined_stats(part_ptr, rows, M, L, chunk, chunks, BLOCK_K: tl.constexpr):
    """The rows' mean and sum of squared deviations from every chunk's (Chan's pairwise combination, as precise
    as two sweeps over the whole row)."""
    mean = tl.zeros((BLOCK_K,), tl.float32)
    m2 = tl.zeros((BLOCK_K,), tl.float32)
    seen = 0.0
    for c in range(0, chunks):
        count = tl.minimum(chunk, L - c * chunk).to(tl.float32)
        part = part_ptr + (c * M + rows) * 2
        c_mean = tl.load(part, mask=rows < M, other=0.0)
        c_m2 = tl.load(part + 1, mask=rows < M, other=0.0)
        both = seen + count
        delta = c_mean - mean
        mean += delta * tl.div_rn(count, both)
        m2 += c_m2 + delta * delta * tl.div_rn(seen * count, both)
        seen = both
    return mean, m2


@triton.jit
def row_norm_kernel(
    x_ptr, out_ptr, w_ptr, b_ptr, part_ptr, chunk, chunks, M, L,
    ksize1, ksize2, ksize3, ksize4, x_k0, x_k1, x_k2, x_k3, x_k4, out_k0, out_k1, out_k2, out_k3, out_k4,
    rsize1, rsize2, rsize3, rsize4, x_r0, x_r1, x_r2, x_r3, x_r4, out_r0, out_r1, out_r2, out_r3, out_r4,
    groups, group_channels, channel_stride, divisor, eps,
    K_RANK: tl.constexpr, R_RANK: tl.constexpr, X_K_KINDS: tl.constexpr, OUT_K_KINDS: tl.constexpr,
    X_R_KINDS: tl.constexpr, OUT_R_KINDS: tl.constexpr, HAS_WEIGHT: tl.constexpr, HAS_BIAS: tl.constexpr,
    PER_GROUP: tl.constexpr, EPILOGUE: tl.constexpr, PHASE: tl.constexpr, ONE_TILE: tl.constexpr,
    BLOCK_K: tl.constexpr, BLOCK_R: tl.constexpr, INDEX_64: tl.constexpr,
):  # fmt: skip
    rows, out_rows, tile, shape = _row_view(
        x_ptr, M, L,
        ksize1, ksize2, ksize3, ksize4, x_k0, x_k1, x_k2, x_k3, x_k4, out_k0, out_k1, out_k2, out_k3, out_k4,
        rsize1, rsize2, rsize3, rsize4, x_r0, x_r1, x_r2, x_r3, x_r4, out_r0, out_r1, out_r2, out_r3, out_r4,
        K_RANK, X_K_KINDS, OUT_K_KINDS, BLOCK_K, INDEX_64,
    )  # fmt: skip
    if ONE_TILE:  # the whole row in registers: one read of the input
        x, cols, mask, out_cols = _row_tile(*tile, 0, *shape, R_RANK, X_R_KINDS, OUT_R_KINDS, BLOCK_R, 0.0)
        mean = tl.div_rn(tl.sum(x, axis=1), divisor)
        d = tl.where(mask, x - mean[:, None], 0.0)
        rstd = tl.div_rn(1.0, tl.sqrt_rn(tl.div_rn(tl.sum(d * d, axis=1), divisor) + eps))
        y = _affine(d * rstd[:, None], w_ptr, b_ptr, rows, cols, mask, cols < L, groups, group_channels,
                    channel_stride, HAS_WEIGHT, HAS_BIAS, PER_GROUP)  # fmt: skip
        y = _epilogue(y, EPILOGUE)
        tl.store(out_ptr + out_rows[:, None] + out_cols[None, :], y.to(out_ptr.dtype.element_ty), mask=mask)
    else:
        # WHOLE_ROWS: the row's statistics in two sweeps, then a writing sweep. A split row (grid axis 1: its
        # chunks) takes two launches: CHUNK_STATS writes each chunk's statistics to part[chunk, row, 0:2],
        # then NORMALIZE_CHUNK combines them and writes its chunk.
        start, stop = 0, L
        if PHASE != WHOLE_ROWS:
            start = tl.program_id(1) * chunk
            stop = tl.minimum(start + chunk, L)  # never empty: chunks = cdiv(L, chunk)
        if PHASE == NORMALIZE_CHUNK:
            mean, m2 = _combined_stats(part_ptr, rows, M, L, chunk, chunks, BLOCK_K)
        else:
            mean, m2 = _chunk_stats(
                tile, shape, start, stop, R_RANK, X_R_KINDS, OUT_R_KINDS, BLOCK_K, BLOCK_R
            )
        if PHASE == CHUNK_STATS:
            part = part_ptr + (tl.program_id(1) * M + rows) * 2
            tl.store(part, mean, mask=rows < M)
            tl.store(part + 1, m2, mask=rows < M)
        else:
            rstd = tl.div_rn(1.0, tl.sqrt_rn(tl.div_rn(m2, divisor) + eps))
            for s in range(start, stop, BLOCK_R):
                x, cols, mask, out_cols = _row_tile(*tile, s, stop, shape[1], shape[2], shape[3], R_RANK,
                                                    X_R_KINDS, OUT_R_KINDS, BLOCK_R, 0.0)  # fmt: skip
                y = _affine((x - mean[:, None]) * rstd[:, None], w_ptr, b_ptr, rows, cols, mask, cols < L,
                            groups, group_channels, channel_stride, HAS_WEIGHT, HAS_BIAS, PER_GROUP)  # fmt: skip
                y = _epilogue(y, EPILOGUE)
                tl.store(out_ptr + out_rows[:, None] + out_cols[None, :], y.to(out_ptr.dtype.element_ty),
                         mask=mask)  # fmt: skip


@triton.jit
def _softmax_row_stats(x, m, s):
    """Running max ``m`` and sum ``s`` of exp(x - m) per row, updated with the tile ``x`` (-inf where masked);
    rows that are -inf so far keep s = 0 rather than exp(-inf - -inf) = NaN."""
    m_new = tl.maximum(m, tl.max(x, axis=1))
    finite = m_new != float("-inf")
    scale = tl.where(finite, tl.exp(m - m_new), 0.0)
    p = tl.where(finite[:, None], tl.exp(x - m_new[:, None]), 0.0)
    return m_new, s * scale + tl.sum(p, axis=1)


@triton.jit
def _softmax_tile(x, m, s, LOG: tl.constexpr):
    """softmax (or log_softmax) of the tile ``x`` given its rows' max ``m`` and sum of exp(x - m) ``s``."""
    if LOG:
        return x - m[:, None] - tl.log(s)[:, None]
    return tl.div_rn(tl.exp(x - m[:, None]), s[:, None])


@triton.jit
def softmax_kernel(
    x_ptr, out_ptr, M, L,
    ksize1, ksize2, ksize3, ksize4, x_k0, x_k1, x_k2, x_k3, x_k4, out_k0, out_k1, out_k2, out_k3, out_k4,
    rsize1, rsize2, rsize3, rsize4, x_r0, x_r1, x_r2, x_r3, x_r4, out_r0, out_r1, out_r2, out_r3, out_r4,
    K_RANK: tl.constexpr, R_RANK: tl.constexpr, X_K_KINDS: tl.constexpr, OUT_K_KINDS: tl.constexpr,
    X_R_KINDS: tl.constexpr, OUT_R_KINDS: tl.constexpr, LOG: tl.constexpr, ONE_TILE: tl.constexpr,
    BLOCK_K: tl.constexpr, BLOCK_R: tl.constexpr, INDEX_64: tl.constexpr,
):  # fmt: skip
    rows, out_rows, tile, shape = _row_view(
        x_ptr, M, L,
        ksize1, ksize2, ksize3, ksize4, x_k0, x_k1, x_k2, x_k3, x_k4, out_k0, out_k1, out_k2, out_k3, out_k4,
        rsize1, rsize2, rsize3, rsize4, x_r0, x_r1, x_r2, x_r3, x_r4, out_r0, out_r1, out_r2, out_r3, out_r4,
        K_RANK, X_K_KINDS, OUT_K_KINDS, BLOCK_K, INDEX_64,
    )  # fmt: skip
    m = tl.full((BLOCK_K,), float("-inf"), tl.float32)
    s = tl.zeros((BLOCK_K,), tl.float32)
    if ONE_TILE:
        x, _, mask, out_cols = _row_tile(
            *tile, 0, *shape, R_RANK, X_R_KINDS, OUT_R_KINDS, BLOCK_R, float("-inf")
        )
        m, s = _softmax_row_stats(x, m, s)
        y = _softmax_tile(x, m, s, LOG)
        tl.store(out_ptr + out_rows[:, None] + out_cols[None, :], y.to(out_ptr.dtype.element_ty), mask=mask)
    else:  # an online max/sum sweep, then the writing sweep
        for start in range(0, L, BLOCK_R):
            x, _, _, _ = _row_tile(
                *tile, start, *shape, R_RANK, X_R_KINDS, OUT_R_KINDS, BLOCK_R, float("-inf")
            )
            m, s = _softmax_row_stats(x, m, s)
        for start in range(0, L, BLOCK_R):
            x, _, mask, out_cols = _row_tile(*tile, start, *shape, R_RANK, X_R_KINDS, OUT_R_KINDS, BLOCK_R,
                                             float("-inf"))  # fmt: skip
            y = _softmax_tile(x, m, s, LOG)
            tl.store(
                out_ptr + out_rows[:, None] + out_cols[None, :], y.to(out_ptr.dtype.element_ty), mask=mask
            )


# ---- schedules -------------------------------------------------------------------------------------------------
ADJACENT_TILE = 8192  # elements of a [BLOCK_K, BLOCK_R] tile when rows are adjacent in memory
INTERLEAVED_TILE = 4096  # the same when rows continue each other's runs of several elements
SPLIT_MIN_CHUNK = 256  # fewest in-row elements a chunk of a split row takes


def split_chunk(length: int, schedule: Schedule) -> tuple[int, int]:
    """(chunk, chunks) of a row split SPLIT ways: chunks of a multiple of BLOCK_R elements, none empty."""
    split, block_r = schedule["SPLIT"], schedule["BLOCK_R"]
    chunk = cdiv(cdiv(length, split), block_r) * block_r
    return chunk, cdiv(length, chunk)


def split_scratch(m: int, length: int, schedule: Schedule) -> list[ScratchTensor]:
    """The per-chunk statistics of rows split by ``schedule``: fp32 [chunks, M, 2] (mean, sum of squared
    deviations), the ``part`` argument of both launches."""
    _, chunks = split_chunk(length, schedule)
    return [ScratchTensor("partials", "float32", (chunks, m, 2))]


def _split_for(row_blocks: int, length: int) -> int:
    """How many ways to split rows so that about two programs per SM run (1: rows alone fill the GPU)."""
    if row_blocks >= NUM_SMS:
        return 1
    return max(1, min(cdiv(2 * NUM_SMS, row_blocks), length // SPLIT_MIN_CHUNK))


def row_schedule(m: int, length: int, row_run: int = 0, splittable: bool = True) -> Schedule:
    """A row in one tile up to ONE_TILE_MAX elements (BLOCK_R its next power of 2), else 1024-element steps;
    BLOCK_K fills a tile of up to 4096 elements, halved while that leaves fewer than two programs per SM.

    ``row_run`` (`launches.row_run`): 1 when consecutive rows are consecutive in memory and a row's own elements
    are not (a group norm with one channel per group over a channels-last map). A tile then spans 16 rows (32
    bytes per access in 16-bit) and up to ADJACENT_TILE / 16 elements of them, since one-row tiles would read one
    element per 32-byte sector. R > 1 when each row's runs of R contiguous elements continue in the next row's
    (R channels per group, channels-last): a tile then spans 64 / R rows, so a tile row touches 64 contiguous
    elements, and at most INTERLEAVED_TILE elements (an H100 sweep of 4x256x4000 with 32 groups: 155 us with
    one-row tiles, 51 us with 8 rows by 512).

    ``splittable`` (layer and group norm): when the rows leave most SMs idle, each row is split into SPLIT
    chunks (`row_norm_kernel` launched twice, PHASE CHUNK_STATS then NORMALIZE_CHUNK)."""
    if row_run:
        block_k = max(2, min(16, triton.next_power_of_2(max(m, 1)), max(1, 64 // row_run)))
        split = _split_for(cdiv(m, block_k), length) if splittable else 1
        tile = ADJACENT_TILE if row_run == 1 else INTERLEAVED_TILE
        block_r = max(2, min(triton.next_power_of_2(cdiv(length, split)), tile // block_k))
        return Schedule.make(num_warps=8, num_stages=1, BLOCK_K=block_k, BLOCK_R=block_r,
                             ONE_TILE=int(split == 1 and length <= block_r), SPLIT=split)  # fmt: skip
    one_tile = length <= ONE_TILE_MAX
    block_r = max(2, triton.next_power_of_2(max(length, 1))) if one_tile else 1024
    block_k = max(1, min(triton.next_power_of_2(max(m, 1)), 4096 // block_r))
    while block_k > 1 and cdiv(m, block_k) < 2 * NUM_SMS:
        block_k //= 2
    split = 1 if one_tile or not splittable else _split_for(cdiv(m, block_k), length)
    warps = min(8, max(1, block_k * block_r // 512))
    return Schedule.make(num_warps=warps, num_stages=1, BLOCK_K=block_k, BLOCK_R=block_r,
                         ONE_TILE=int(one_tile and split == 1), SPLIT=split)  # fmt: skip


def row_schedules(m: int, length: int, row_run: int = 0, splittable: bool = True) -> list[Schedule]:
    """The tuning space of the row kernels: the heuristic's schedule, then tiles of 1-32 rows by 128-4096
    elements (a row in one tile where it fits, else swept) on 4 or 8 warps, unsplit and (layer and group norm)
    split 2-16 ways; adjacent rows also 64 at a time (128 contiguous bytes in 16-bit)."""
    out = [row_schedule(m, length, row_run, splittable)]
    pow_m, pow_l = triton.next_power_of_2(max(m, 1)), max(2, triton.next_power_of_2(max(length, 1)))
    for split in (1, 2, 4, 8, 16) if splittable else (1,):
        if split > 1 and length // split < SPLIT_MIN_CHUNK:
            continue
        for block_k in (1, 4, 8, 16, 32, 64) if row_run == 1 else (1, 4, 8, 16, 32):
            for block_r in (128, 256, 512, 1024, 2048, 4096):
                if block_k > pow_m or block_r > pow_l or block_k * block_r > 16384:
                    continue
                for warps in (4, 8):
                    s = Schedule.make(num_warps=warps, num_stages=1, BLOCK_K=block_k, BLOCK_R=block_r,
                                      ONE_TILE=int(split == 1 and length <= block_r), SPLIT=split)  # fmt: skip
                    if s not in out:
                        out.append(s)
    return out
