"""The reduction kernel: each program reduces BLOCK_K output elements, BLOCK_R input elements at a time.

The input is seen as [M, L]: M kept positions (the output's elements, in its order) by L reduced ones, each an
index space of up to 5 merged dims with its own runtime sizes and strides (spec.merged_dims), so channels-last
and contiguous inputs, views and any dim set run on the one kernel: global average pooling of a channels-last
[N, C, H, W] is M = [N, C] by L = [H*W] with stride C, of a contiguous one M = [N*C] by L = [H*W] with stride 1.
A tile [BLOCK_K, BLOCK_R] is loaded (Triton orders its threads along whichever axis has unit stride), combined
into an fp32 accumulator tile, and reduced along axis 1 once at the end.

``reduce_kernel`` arguments (PTX order): x, out pointers; M, L; kept sizes 1-4, kept input strides 0-4, kept
output strides 0-4; reduced sizes 1-4, reduced input strides 0-4; divisor (fp32, mean's L). Constexprs: OP,
K_RANK, R_RANK, the three stride patterns, BLOCK_K, BLOCK_R, INDEX_64. Grid: (cdiv(M, BLOCK_K), 1, 1).
"""

from __future__ import annotations

import triton
import triton.language as tl

from ...conv.templates.geometry import NUM_SMS
from ...kernel.launch import Schedule, cdiv
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
def reduce_kernel(
    x_ptr, out_ptr, M, L,
    ksize1, ksize2, ksize3, ksize4, x_k0, x_k1, x_k2, x_k3, x_k4, out_k0, out_k1, out_k2, out_k3, out_k4,
    rsize1, rsize2, rsize3, rsize4, x_r0, x_r1, x_r2, x_r3, x_r4, divisor,
    OP: tl.constexpr, K_RANK: tl.constexpr, R_RANK: tl.constexpr, X_K_KINDS: tl.constexpr,
    OUT_K_KINDS: tl.constexpr, X_R_KINDS: tl.constexpr, BLOCK_K: tl.constexpr, BLOCK_R: tl.constexpr,
    INDEX_64: tl.constexpr,
):  # fmt: skip
    identity: tl.constexpr = _identity(OP)
    rows = program_range(BLOCK_K, INDEX_64)
    kept = unravel(rows, (ksize1, ksize2, ksize3, ksize4), K_RANK)
    x_rows = strided_offset(0, (x_k0, x_k1, x_k2, x_k3, x_k4), kept, X_K_KINDS)
    acc = tl.full((BLOCK_K, BLOCK_R), identity, tl.float32)
    for start in range(0, L, BLOCK_R):
        cols = start + tl.arange(0, BLOCK_R)
        if INDEX_64:
            cols = cols.to(tl.int64)
        reduced = unravel(cols, (rsize1, rsize2, rsize3, rsize4), R_RANK)
        x_cols = strided_offset(0, (x_r0, x_r1, x_r2, x_r3, x_r4), reduced, X_R_KINDS)
        mask = (rows < M)[:, None] & (cols < L)[None, :]
        x = tl.load(x_ptr + x_rows[:, None] + x_cols[None, :], mask=mask, other=identity).to(tl.float32)
        if OP == AMAX:
            acc = maximum(acc, x)
        elif OP == AMIN:
            acc = minimum(acc, x)
        else:
            acc += x
    if OP == AMAX:
        result = tl.reduce(acc, 1, maximum)
    elif OP == AMIN:
        result = tl.reduce(acc, 1, minimum)
    else:
        result = tl.sum(acc, axis=1)
    if OP == MEAN:
        result = tl.div_rn(result, divisor)
    out = out_ptr + strided_offset(0, (out_k0, out_k1, out_k2, out_k3, out_k4), kept, OUT_K_KINDS)
    tl.store(out, result.to(out_ptr.dtype.element_ty), mask=rows < M)


def heuristic_schedule(m: int, length: int) -> Schedule:
    """BLOCK_R covers the reduction (up to 1024 a step), BLOCK_K fills a tile of up to 4096 elements, halved
    while that leaves fewer than two programs per SM."""
    block_r = max(2, min(1024, triton.next_power_of_2(max(length, 1))))
    block_k = max(1, min(triton.next_power_of_2(max(m, 1)), 4096 // block_r))
    while block_k > 1 and cdiv(m, block_k) < 2 * NUM_SMS:
        block_k //= 2
    tile = block_k * block_r
    return Schedule.make(num_warps=4 if tile >= 1024 else max(1, tile // 256), num_stages=1,
                         BLOCK_K=block_k, BLOCK_R=block_r)  # fmt: skip
