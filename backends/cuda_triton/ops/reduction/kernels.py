"""The reduction kernel: each program reduces BLOCK_K output elements, BLOCK_R input elements at a time.

The input is seen as [M, L]: M kept positions (the output's elements, in its order) by L reduced ones, each an
index space of up to 5 merged dims with its own runtime sizes and strides (spec.merged_dims), so channels-last
and contiguous inputs, views and any dim set run on the one kernel: global average pooling of a channels-last
[N, C, H, W] is M = [N, C] by L = [H*W] with stride C, of a contiguous one M = [N*C] by L = [H*W] with stride 1.
A tile [BLOCK_K, BLOCK_R] is loaded (Triton orders its threads along whichever axis has unit stride), combined
into an fp32 accumulator tile, and reduced along axis 1 once at the end.

A split reduction (SPLIT > 1, for few rows over a long L, such as the squeeze-excitation means of a batch-32
CNN: 1024 rows of 12544 positions) gives program_id(2) one contiguous share of the BLOCK_R chunks; each share
stores its partial results into the fp32 workspace [SPLIT, M], then counts itself done on its row block's counter
(int32, zero before the launch, in the delegate's state buffer); the last share to finish combines the SPLIT
partials in share order (so the result does not depend on which finished last), writes the output and sets the
counter back to zero, as the GEMM's one-launch split-K does (`is_last_split_k_share`).

``reduce_kernel`` arguments (PTX order): x, out, workspace and counter pointers (without a split, out's pointer,
never read); M, L; kept sizes 1-4, kept input strides 0-4, kept output strides 0-4; reduced sizes 1-4, reduced
input strides 0-4; divisor (fp32, mean's L). Constexprs: OP, K_RANK, R_RANK, the three stride patterns, BLOCK_K,
BLOCK_R, SPLIT, INDEX_64. Grid: (cdiv(M, BLOCK_K), 1, SPLIT). The heuristic is in schedules.py.
"""

from __future__ import annotations

import triton
import triton.language as tl

from ...conv.templates.gemm_jit import is_last_split_k_share, split_k_range
from ..elementwise.math import maximum, minimum
from ..indexing import program_range, strided_offset, unravel

SUM = tl.constexpr(0)
MEAN = tl.constexpr(1)
AMAX = tl.constexpr(2)
AMIN = tl.constexpr(3)
OP_CODES = {"sum": SUM.value, "mean": MEAN.value, "amax": AMAX.value, "amin": AMIN.value}


@triton.constexpr_function
def _identity(op):
    """The value a masked element reads as: what leaves the reduction unchanged."""
    return {AMAX.value: float("-inf"), AMIN.value: float("inf")}.get(op, 0.0)


@triton.jit
def _combine(acc, x, OP: tl.constexpr):
    """``acc`` with ``x`` folded in, elementwise: the sum, or the NaN-propagating max / min."""
    if OP == AMAX:
        return maximum(acc, x)
    elif OP == AMIN:
        return minimum(acc, x)
    else:
        return acc + x


@triton.jit
def _reduce_rows(acc, OP: tl.constexpr):
    """The [BLOCK_K, BLOCK_R] accumulator tile reduced along its reduced axis."""
    if OP == AMAX:
        return tl.reduce(acc, 1, maximum)
    elif OP == AMIN:
        return tl.reduce(acc, 1, minimum)
    else:
        return tl.sum(acc, axis=1)


@triton.jit
def reduce_kernel(
    x_ptr, out_ptr, ws_ptr, cnt_ptr, M, L,
    ksize1, ksize2, ksize3, ksize4, x_k0, x_k1, x_k2, x_k3, x_k4, out_k0, out_k1, out_k2, out_k3, out_k4,
    rsize1, rsize2, rsize3, rsize4, x_r0, x_r1, x_r2, x_r3, x_r4, divisor,
    OP: tl.constexpr, K_RANK: tl.constexpr, R_RANK: tl.constexpr, X_K_KINDS: tl.constexpr,
    OUT_K_KINDS: tl.constexpr, X_R_KINDS: tl.constexpr, BLOCK_K: tl.constexpr, BLOCK_R: tl.constexpr,
    SPLIT: tl.constexpr, INDEX_64: tl.constexpr,
):  # fmt: skip
    identity: tl.constexpr = _identity(OP)
    rows = program_range(BLOCK_K, INDEX_64)
    row_ok = rows < M
    kept = unravel(rows, (ksize1, ksize2, ksize3, ksize4), K_RANK)
    x_rows = strided_offset(0, (x_k0, x_k1, x_k2, x_k3, x_k4), kept, X_K_KINDS)
    acc = tl.full((BLOCK_K, BLOCK_R), identity, tl.float32)
    chunk_lo, chunk_hi = split_k_range(tl.cdiv(L, BLOCK_R), SPLIT)
    for chunk in range(chunk_lo, chunk_hi):
        cols = chunk * BLOCK_R + tl.arange(0, BLOCK_R)
        if INDEX_64:
            cols = cols.to(tl.int64)
        reduced = unravel(cols, (rsize1, rsize2, rsize3, rsize4), R_RANK)
        x_cols = strided_offset(0, (x_r0, x_r1, x_r2, x_r3, x_r4), reduced, X_R_KINDS)
        mask = row_ok[:, None] & (cols < L)[None, :]
        x = tl.load(x_ptr + x_rows[:, None] + x_cols[None, :], mask=mask, other=identity).to(tl.float32)
        acc = _combine(acc, x, OP)
    result = _reduce_rows(acc, OP)
    if SPLIT > 1:  # this share's partials into the workspace; the last share to finish combines them
        tl.store(ws_ptr + tl.program_id(2) * M + rows, result, mask=row_ok)
        last = is_last_split_k_share(cnt_ptr, SPLIT)
        if last:
            result = tl.full((BLOCK_K,), identity, tl.float32)
            for s in tl.static_range(SPLIT):  # share order: deterministic
                part = tl.load(ws_ptr + s * M + rows, mask=row_ok, other=identity, cache_modifier=".cg")
                result = _combine(result, part, OP)
        row_ok = row_ok & last
    if OP == MEAN:
        result = tl.div_rn(result, divisor)
    out = out_ptr + strided_offset(0, (out_k0, out_k1, out_k2, out_k3, out_k4), kept, OUT_K_KINDS)
    tl.store(out, result.to(out_ptr.dtype.element_ty), mask=row_ok)
