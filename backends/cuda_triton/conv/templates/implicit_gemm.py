"""Implicit GEMM for forward convolutions, 1-D/2-D/3-D, any stride, dilation, (asymmetric) padding and groups.

The GEMM: M = batch * output pixels, N = output channels of a group tile, K = taps * input channels of the
tile. A program computes a BLOCK_M x BLOCK_N output tile; its K loop runs over (tap, channel block) pairs in one
flat loop (so Triton pipelines it), taps outer and channels inner, so a channels-last A tile is BLOCK_M rows of
BLOCK_K contiguous channels. Padding is a load mask. When a group has few channels, GROUP_TILE groups share a
program: the prepared weight of such a tile is block-diagonal (zeros between groups), so one dense MMA covers
them, instead of a grid axis of tiny GEMMs. When the tile has fewer than 16 input channels (RGB stems), FLAT_K
walks the flattened (tap, channel) axis instead, so K blocks are not mostly padding.

Kernel arguments (PTX order): x, w, bias, y, ws, amax pointers, then int32 BATCH, D, H, W, OD, OH, OW (1-D/2-D
problems have leading sizes 1). Everything else is a constexpr. Grid: (cdiv(M, BLOCK_M) * cdiv(COUT_T, BLOCK_N),
groups / GROUP_TILE, SPLIT_K), plus TAIL_M_TILES * (TAIL_SPLIT - 1) * cdiv(COUT_T, BLOCK_N) programs on axis 0
for tail-split schedules.

Split-K schedules (SPLIT_K > 1, for few output tiles and a long K): the same kernel, y = the fp32 workspace and
no bias, then ``splitk_reduce_kernel`` (see _splitk.py). Tail-split schedules (TAIL_SPLIT > 1, for whole waves
plus a nearly empty last one): the last TAIL_M_TILES rows of tiles are split along K into ws, then the same
reduction writes them; ws is an unused pointer (the output) otherwise.

Prepared weight: [groups / GROUP_TILE, taps, CIN_P, COUT_P] contiguous, CIN_P = CIN_T rounded up to BLOCK_K,
COUT_P = COUT_T rounded up to BLOCK_N, zero-filled, so weight loads need no mask (FLAT_K: [tiles, 1, K_ROWS,
COUT_P] with the taps * CIN_T (tap, channel) rows rounded up to BLOCK_K). K_ROWS = rows of one tile's matrix.
fp32 with TF32 allowed: the weight is rounded to the nearest TF32 values when prepared and the A tile in the
kernel (ROUND_TF32), instead of the tensor core's truncation (see _tf32.py); or, with F16_MMA, both run on fp16
tensor cores scaled by powers of two (_f16_mma.py): x is then the scaled fp16 copy (F16_MMA=2) or scaled in the
kernel (1), the prepared weight is fp16 with a trailer after its W_NUMEL values, amax the input's partial maxima
(an unused pointer otherwise). Launches: [amax, scale or channels-last copy,] conv [, split-K reduction].
"""

from __future__ import annotations

import itertools
import math

import torch
import triton
import triton.language as tl

from ...kernel.launch import (
    TRITON_PTR_DTYPE,
    KernelLaunch,
    ScalarArg,
    Schedule,
    ScratchTensor,
    Support,
    TensorArg,
    cdiv,
)
from ..problem import ConvProblem
from ._cl_copy import can_copy, copy_launch, input_cl
from ._f16_mma import (
    f16_block_k,
    f16_input_launches,
    f16_mma_allowed,
    f16_mma_pays,
    f16_scratch,
    input_scales,
    prepare_f16_weight,
    uses_f16_mma,
    weight_unscale,
)
from ._geometry import (
    NUM_SMS,
    Geometry,
    common_support_problems,
    dot_precision,
    fit_block,
    weight_k_major,
)
from ._splitk import (
    MIN_SHARE,
    SPLIT_CONFIGS,
    split_k_of,
    split_options,
    splitk_reduce_launch,
    tail_options,
    tail_rows,
    tail_split_of,
    workspace,
)
from ._tf32 import prepare_tf32_weight, round_to_tf32, tf32_rounding
from .base import ConvTemplate


@triton.jit
def _swizzle(pid, num_pid_m, num_pid_n, GROUP_M: tl.constexpr):
    """Program id -> (tile row, tile column), GROUP_M row tiles at a time so weight tiles stay in L2."""
    width = GROUP_M * num_pid_n
    group_id = pid // width
    first_m = group_id * GROUP_M
    size_m = min(num_pid_m - first_m, GROUP_M)
    pid_m = first_m + (pid % width) % size_m
    pid_n = (pid % width) // size_m
    return pid_m, pid_n


@triton.jit
def weight_ptrs(w_base, k_rows, offs_n, K_ROWS: tl.constexpr, COUT_P: tl.constexpr, W_KMAJOR: tl.constexpr):
    """[BLOCK_K, BLOCK_N] pointers into a prepared weight matrix stored [K_ROWS, COUT_P] or, K-major, [COUT_P, K_ROWS]."""
    if W_KMAJOR:
        return w_base + offs_n[None, :] * K_ROWS + k_rows[:, None]
    return w_base + k_rows[:, None] * COUT_P + offs_n[None, :]


@triton.jit
def store_output(
    y_ptr, b_ptr, acc, n, pixel, m_ok, offs_n, co_base, COUT_T: tl.constexpr, C_OUT: tl.constexpr, out_pixels,
    HAS_BIAS: tl.constexpr, OUT_CL: tl.constexpr,
):  # fmt: skip
    """Epilogue: add the bias, convert, store rows (image n, output pixel) x channels co_base + offs_n."""
    co = co_base + offs_n
    n_ok = offs_n < COUT_T
    if HAS_BIAS:
        acc += tl.load(b_ptr + co, mask=n_ok, other=0.0).to(tl.float32)[None, :]
    if OUT_CL:
        y_ptrs = y_ptr + ((n * out_pixels + pixel) * C_OUT)[:, None] + co[None, :]
    else:
        y_ptrs = y_ptr + (n * C_OUT * out_pixels + pixel)[:, None] + co[None, :] * out_pixels
    tl.store(y_ptrs, acc.to(y_ptr.dtype.element_ty), mask=m_ok[:, None] & n_ok[None, :])


@triton.jit
def conv_implicit_gemm_kernel(
    x_ptr, w_ptr, b_ptr, y_ptr, ws_ptr, amax_ptr,
    BATCH, D, H, W, OD, OH, OW,
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
):  # fmt: skip
    if INT64:
        BATCH = BATCH.to(tl.int64)
        D = D.to(tl.int64)
        H = H.to(tl.int64)
        W = W.to(tl.int64)
    # Input strides in elements, from the layout.
    if IN_CL:
        s_c = 1
        s_w = C_IN
        s_h = W * C_IN
        s_d = H * W * C_IN
        s_n = D * H * W * C_IN
    else:
        s_w = 1
        s_h = W
        s_d = H * W
        s_c = D * H * W
        s_n = C_IN * D * H * W
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
        pid_m, pid_n = _swizzle(tl.program_id(0), num_pid_m, num_pid_n, GROUP_M)
        share = 0
    else:
        # The first programs take whole tiles of all but the last TAIL_M_TILES rows of tiles; the rest take one
        # K share (share >= 1 below) of one tail tile each (_splitk.py).
        whole_m = num_pid_m - TAIL_M_TILES
        pid = tl.program_id(0)
        if pid < whole_m * num_pid_n:
            pid_m, pid_n = _swizzle(pid, whole_m, num_pid_n, GROUP_M)
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
        offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
        if INT64:
            offs_m = offs_m.to(tl.int64)
        m_ok = offs_m < BATCH * out_pixels
        ow = offs_m % OW
        oh = (offs_m // OW) % OH
        od = (offs_m // (OW * OH)) % OD
        n = offs_m // out_pixels
        pixel = offs_m % out_pixels
    d0 = od * SD - PD
    h0 = oh * SH - PH
    w0 = ow * SW - PW
    x_tile = x_ptr + tile * CIN_T * s_c
    x_rows = n * s_n
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    w_tile = w_ptr + tile * (K_ROWS * COUT_P)

    # Split-K: program_id(2) takes one contiguous share of the K iterations (all of them when SPLIT_K == 1).
    if FLAT_K:
        K_ITERS: tl.constexpr = (KD * KH * KW * CIN_T + BLOCK_K - 1) // BLOCK_K
    else:
        K_ITERS: tl.constexpr = KD * KH * KW * (CIN_P // BLOCK_K)
    if SPLIT_K > 1:
        SHARE: tl.constexpr = (K_ITERS + SPLIT_K - 1) // SPLIT_K
        k_lo = tl.program_id(2) * SHARE
        k_hi = tl.minimum(k_lo + SHARE, K_ITERS)
    elif TAIL_SPLIT > 1:
        TAIL_SHARE: tl.constexpr = (K_ITERS + TAIL_SPLIT - 1) // TAIL_SPLIT
        k_lo = tl.where(share > 0, (share - 1) * TAIL_SHARE, 0)
        k_hi = tl.where(share > 0, tl.minimum(k_lo + TAIL_SHARE, K_ITERS), K_ITERS)
    else:
        k_lo = 0
        k_hi = K_ITERS

    if F16_MMA:  # fp32 at TF32 precision on fp16 tensor cores: the input scaled by 2^shift (_f16_mma.py)
        a_scale, a_unscale = input_scales(amax_ptr)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    if FLAT_K:
        # K = (tap, channel) flattened: each A column has its own tap.
        K_TOTAL: tl.constexpr = KD * KH * KW * CIN_T
        for kb in range(k_lo, k_hi):
            offs_k = kb * BLOCK_K + tl.arange(0, BLOCK_K)
            c = offs_k % CIN_T
            tap = offs_k // CIN_T
            di = d0[:, None] + ((tap // (KH * KW)) * DD)[None, :]
            hi = h0[:, None] + (((tap // KW) % KH) * DH)[None, :]
            wi = w0[:, None] + ((tap % KW) * DW)[None, :]
            ok = m_ok[:, None] & (offs_k < K_TOTAL)[None, :]
            ok &= (di >= 0) & (di < D) & (hi >= 0) & (hi < H) & (wi >= 0) & (wi < W)
            a_ptrs = x_tile + x_rows[:, None] + di * s_d + hi * s_h + wi * s_w + c[None, :] * s_c
            a = tl.load(a_ptrs, mask=ok, other=0.0)
            if F16_MMA == 1:  # (F16_MMA == 2 reads the scaled fp16 copy of the input)
                a = (a * a_scale).to(tl.float16)
            elif ROUND_TF32:  # fp32 with TF32: round to nearest, not the MMA's truncation (_tf32.py)
                a = round_to_tf32(a, ROUND_TF32)
            b = tl.load(weight_ptrs(w_tile, offs_k, offs_n, K_ROWS, COUT_P, W_KMAJOR))
            acc = tl.dot(a, b, acc, input_precision=PRECISION)
    else:
        C_BLOCKS: tl.constexpr = CIN_P // BLOCK_K
        for i in range(k_lo, k_hi):
            tap = i // C_BLOCKS
            c = (i % C_BLOCKS) * BLOCK_K + tl.arange(0, BLOCK_K)
            di = d0 + (tap // (KH * KW)) * DD
            hi = h0 + ((tap // KW) % KH) * DH
            wi = w0 + (tap % KW) * DW
            ok = m_ok & (di >= 0) & (di < D) & (hi >= 0) & (hi < H) & (wi >= 0) & (wi < W)
            rows = x_rows + di * s_d + hi * s_h + wi * s_w
            if CIN_T % BLOCK_K == 0:
                a = tl.load(x_tile + rows[:, None] + c[None, :] * s_c, mask=ok[:, None], other=0.0)
            else:
                a_ok = ok[:, None] & (c < CIN_T)[None, :]
                a = tl.load(x_tile + rows[:, None] + c[None, :] * s_c, mask=a_ok, other=0.0)
            if F16_MMA == 1:  # (F16_MMA == 2 reads the scaled fp16 copy of the input)
                a = (a * a_scale).to(tl.float16)
            elif ROUND_TF32:
                a = round_to_tf32(a, ROUND_TF32)
            b = tl.load(weight_ptrs(w_tile, tap * CIN_P + c, offs_n, K_ROWS, COUT_P, W_KMAJOR))
            acc = tl.dot(a, b, acc, input_precision=PRECISION)
    if F16_MMA:  # undo both scalings (powers of two: exact) before any store
        acc = acc * a_unscale * weight_unscale(w_ptr, W_NUMEL)

    if SPLIT_K > 1:
        # y_ptr is the fp32 workspace [SPLIT_K, BATCH * out_pixels, C_OUT]: this share's partial sums, stored
        # like a channels-last output without bias; `splitk_reduce_kernel` adds the shares up.
        ws = y_ptr + tl.program_id(2) * (BATCH * out_pixels * C_OUT)
        store_output(
            ws, b_ptr, acc, n, pixel, m_ok, offs_n, tile * COUT_T, COUT_T, C_OUT, out_pixels, False, True
        )
    elif TAIL_SPLIT > 1:
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
        store_output(
            y_ptr,
            b_ptr,
            acc,
            n,
            pixel,
            m_ok,
            offs_n,
            tile * COUT_T,
            COUT_T,
            C_OUT,
            out_pixels,
            HAS_BIAS,
            OUT_CL,
        )


# ---- tuning space ------------------------------------------------------------------------------------------
# (BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages) for 16-bit dtypes; fp32 halves BLOCK_K of the big tiles
# (shared memory). Ordered from large to small tiles.
_BASE_CONFIGS: tuple[tuple[int, int, int, int, int], ...] = (
    (128, 256, 64, 8, 3),
    (128, 256, 64, 8, 4),  # deeper pipelines for compute-bound 3x3s (vgg: 0.8x of cuDNN with 3 stages)
    (256, 128, 64, 8, 3),
    (256, 128, 64, 8, 4),
    (128, 128, 64, 8, 3),
    (128, 128, 64, 8, 4),
    (128, 128, 64, 4, 3),
    (128, 128, 32, 4, 4),
    (128, 64, 64, 4, 3),
    (128, 64, 32, 4, 4),
    (64, 128, 64, 4, 3),
    (64, 64, 64, 4, 3),
    (64, 64, 32, 4, 4),
    (128, 32, 32, 4, 4),
    (64, 32, 32, 4, 3),
    (32, 64, 32, 4, 3),
    (32, 32, 32, 2, 3),
)
_GROUP_M = 8
# The heuristic's F16_MMA threshold on the multiply-adds of the whole conv (_f16_mma.f16_mma_pays).
_F16_MIN_MACS = 2**30


# A group tile is widened until it has this many output channels (block-diagonal weight; wasted MMAs are
# cheap next to the memory traffic of a grouped conv).
_GROUP_TILE_CHANNELS = 64


def widest_group_tile(g: Geometry, channels: int = _GROUP_TILE_CHANNELS) -> int:
    """The most groups (a divisor of groups) whose tile has at most ``channels`` input and output channels."""
    fits = [t for t in range(1, g.groups + 1) if g.groups % t == 0 and t * max(g.cin_g, g.cout_g) <= channels]
    return max(fits, default=1)


def group_tile_options(g: Geometry) -> list[int]:
    """Divisors of groups worth trying as GROUP_TILE: 1, the widest tile of <= 64 channels (the heuristic's) and
    the widest of <= 128 (fewer, denser programs: RegNet's 8-channel groups)."""
    if g.groups == 1:
        return [1]
    return list(dict.fromkeys((1, widest_group_tile(g), widest_group_tile(g, 2 * _GROUP_TILE_CHANNELS))))


def row_tiles(g: Geometry) -> int:
    """1 when programs should walk output rows: contiguous (N, C, ...) inputs with rows of >= 32 pixels, whose
    loads along M are then provably consecutive; channels-last inputs are contiguous along K instead."""
    return 1 if not g.in_cl and g.out_spatial[2] >= 32 else 0


# Shared memory the pipeline's buffers may take (H100/H200: 227 KB per block; Triton needs some for barriers and
# the epilogue's layout conversion).
_SMEM_BUDGET = 200 * 1024


def block_k(bk: int, bm: int, bn: int, stages: int, fp32: bool, f16: int) -> int:
    """BLOCK_K of a tile shape given for 16-bit dtypes: fp32 tiles of 128 x 128 and up take 32 (shared memory);
    F16_MMA tiles (A fp32 for F16_MMA=1, fp16 for 2; B fp16) halve it until their stages fit."""
    if f16:
        return f16_block_k(bk, bm, bn, stages, f16, _SMEM_BUDGET)
    if fp32 and bm * bn >= 128 * 128 and bk > 32:
        return 32
    return bk


def k_iterations(g: Geometry, cin_t: int, flat: int, bk: int) -> int:
    """Iterations of the kernel's K loop (see K_ITERS in the kernel)."""
    if flat:
        return cdiv(g.taps * cin_t, bk)
    return g.taps * cdiv(cin_t, bk)


class ImplicitGemmTemplate(ConvTemplate):
    """Implicit GEMM over channels-last or contiguous dense tensors (see module docstring)."""

    def __init__(self) -> None:
        self.name = "implicit_gemm"

    # -- support -------------------------------------------------------------------------------------------
    def supports(self, problem: ConvProblem) -> Support:
        reason = common_support_problems(problem)
        if reason:
            return Support.no(reason)
        if problem.groups > 65535:
            return Support.no("more than 65535 groups")
        return Support.yes()

    # -- schedules -----------------------------------------------------------------------------------------
    def _tile_channels(self, g: Geometry, group_tile: int) -> tuple[int, int]:
        return g.cin_g * group_tile, g.cout_g * group_tile

    def schedules(self, problem: ConvProblem) -> list[Schedule]:
        g = Geometry.of(problem)
        fp32 = problem.dtype == "float32"
        # fp32 with TF32 allowed: each tile shape also on fp16 tensor cores (F16_MMA, _f16_mma.py), with the
        # 16-bit BLOCK_K where shared memory allows.
        all_precisions = [0, 1, 2] if f16_mma_allowed(problem) else [0]
        out: list[Schedule] = []
        for gt in group_tile_options(g):
            cin_t, cout_t = self._tile_channels(g, gt)
            flat = 1 if cin_t < 16 else 0
            k_extent = g.taps * cin_t if flat else cin_t
            # A contiguous input is also offered copied to channels-last first (_cl_copy.py), then read by
            # channel rows instead of ROW_TILES.
            copies = [0, 1] if not g.in_cl and not flat and can_copy(problem, g.int64) else [0]
            for copy in copies:
                rows = 0 if copy else row_tiles(g)
                extra = {"CL_COPY": 1} if copy else {}

                common = dict(GROUP_M=_GROUP_M, GROUP_TILE=gt, FLAT_K=flat, ROW_TILES=rows, **extra)
                candidates: list[Schedule] = []
                for (bm, bn, bk0, warps, stages), f16 in itertools.product(_BASE_CONFIGS, all_precisions):
                    mma = {"F16_MMA": f16} if f16 else {}
                    bm, bn, bk = (
                        fit_block(bm, g.out_spatial[2] if rows else g.m),
                        fit_block(bn, cout_t),
                        fit_block(block_k(bk0, bm, bn, stages, fp32, f16), k_extent),
                    )
                    candidates.append(
                        Schedule.make(warps, stages, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, **common, **mma)
                    )
                    if not rows and g.groups == gt and bm * bn >= 64 * 128:
                        iters = k_iterations(g, cin_t, flat, bk)
                        for tail_m, tail in tail_options(g, bm, cdiv(cout_t, bn), iters):
                            candidates.append(
                                Schedule.make(
                                    warps,
                                    stages,
                                    BLOCK_M=bm,
                                    BLOCK_N=bn,
                                    BLOCK_K=bk,
                                    TAIL_M_TILES=tail_m,
                                    TAIL_SPLIT=tail,
                                    **common,
                                    **mma,
                                )  # fmt: skip
                            )
                for (bm, bn, bk0, warps, stages), f16 in itertools.product(SPLIT_CONFIGS, all_precisions):
                    if rows:  # row tiles walk whole output rows: long rows have enough tiles already
                        break
                    mma = {"F16_MMA": f16} if f16 else {}
                    bk = block_k(bk0, bm, bn, stages, fp32, f16)
                    bm, bn, bk = fit_block(bm, g.m), fit_block(bn, cout_t), fit_block(bk, k_extent)
                    programs = cdiv(g.m, bm) * cdiv(cout_t, bn) * (g.groups // gt)
                    for split in split_options(g, programs, k_iterations(g, cin_t, flat, bk)):
                        candidates.append(
                            Schedule.make(
                                warps,
                                stages,
                                BLOCK_M=bm,
                                BLOCK_N=bn,
                                BLOCK_K=bk,
                                SPLIT_K=split,
                                **common,
                                **mma,
                            )  # fmt: skip
                        )
                out.extend(c for c in dict.fromkeys(candidates) if c not in out)
        # The heuristic's pick is always part of the space, and so is its pick without the channels-last copy
        # (what it chose before CL_COPY existed: tables tuned then name it).
        for heuristic in (self._heuristic(problem, allow_copy=False), self.heuristic_schedule(problem)):
            if heuristic not in out:
                out.insert(0, heuristic)
        return out

    def heuristic_schedule(self, problem: ConvProblem) -> Schedule:
        return self._heuristic(problem, allow_copy=True)

    def _heuristic(self, problem: ConvProblem, allow_copy: bool) -> Schedule:
        g = Geometry.of(problem)
        gt = widest_group_tile(g)
        cin_t, cout_t = self._tile_channels(g, gt)
        flat = 1 if cin_t < 16 else 0
        k_extent = g.taps * cin_t if flat else cin_t
        # fp32 on fp16 tensor cores (_f16_mma.py) where the MMAs outweigh the two extra passes over the input
        # (its scale, its fp16 copy); such tiles are shaped as for 16-bit dtypes.
        macs = g.m * g.cout * g.taps * g.cin_g
        long_k = (
            f16_mma_allowed(problem)
            and not flat
            and f16_mma_pays(macs, g.batch * g.cin * math.prod(g.spatial), _F16_MIN_MACS)
        )
        f16 = 0
        fp32 = problem.dtype == "float32" and not long_k
        tiles_n = g.groups // gt
        # Rules fitted to H200 measurements of the public suite (docs/performance.md): BLOCK_N up to 128 (256
        # lost everywhere); 128-row tiles only with two waves of programs, else 64; flat-K (gather-bound)
        # tiles go down to 32 rows to put more loads in flight.
        bn = fit_block(128, cout_t)
        # A contiguous input with many channels per group is copied to channels-last first (_cl_copy.py): its
        # A tiles are then rows of contiguous channels instead of a gather across channel planes.
        copy = int(
            allow_copy
            and not g.in_cl
            and not flat
            and g.groups == 1
            and cin_t >= 64
            and can_copy(problem, g.int64)
        )
        rows = 0 if copy else row_tiles(g)
        if long_k:  # from a scaled fp16 copy of the input (channels-last when it is copied anyway)
            f16 = 2

        def programs(bm: int) -> int:
            if rows:
                return g.m // g.out_spatial[2] * cdiv(g.out_spatial[2], bm) * cdiv(cout_t, bn) * tiles_n
            return cdiv(g.m, bm) * cdiv(cout_t, bn) * tiles_n

        bm = 128 if programs(128) >= 2 * NUM_SMS else 64
        if flat and programs(64) < 2 * NUM_SMS:
            bm = 32
        bm = fit_block(bm, g.out_spatial[2] if rows else g.m)
        bk = fit_block(32 if fp32 or (flat and k_extent > 64) else 64, k_extent)
        big = bm * bn >= 128 * 128
        warps = 8 if big else 4
        stages = 3 if bk >= 64 or (fp32 and big) or flat else 4
        bk = fit_block(block_k(bk, bm, bn, stages, fp32, f16), k_extent)
        if bm * bn <= 32 * 32:
            warps = 2
        # Too few tiles for a long reduction: split K (64x64 tiles, the split that fills a wave).
        split = {}
        iters = k_iterations(g, cin_t, flat, fit_block(64 if not fp32 else 32, k_extent))
        if not rows and programs(bm) * 2 <= NUM_SMS and iters >= 4 * MIN_SHARE:
            bm2, bn2 = fit_block(64, g.m), fit_block(64, cout_t)
            bk2 = fit_block(64, k_extent)
            splits = split_options(
                g, cdiv(g.m, bm2) * cdiv(cout_t, bn2) * tiles_n, k_iterations(g, cin_t, flat, bk2)
            )
            if splits:
                bm, bn, bk, warps, stages = bm2, bn2, bk2, 4, 3
                split = {"SPLIT_K": splits[-1]}
        # Whole waves and a nearly empty last one, with a long reduction (so the lone last wave costs a whole
        # tile's time): split the last rows of tiles along K instead.
        # 128 x 256 tiles first when they have such a tail (deeplab's 65x65 maps on the H200: one whole wave and
        # one split tile beat two waves of 128 x 128 tiles and a split one).
        if not split and not rows and tiles_n == 1 and k_iterations(g, cin_t, flat, bk) >= 32:
            shapes = [(bm, bn, warps, stages)]
            if bm == 128 and cout_t >= 256 and bn < 256:
                shapes.insert(0, (128, 256, 8, 3))
            for bm2, bn2, warps2, stages2 in shapes:
                found = tail_options(g, bm2, cdiv(cout_t, bn2), k_iterations(g, cin_t, flat, bk))
                if found:
                    bm, bn, warps, stages = bm2, bn2, warps2, stages2
                    split = {"TAIL_M_TILES": found[0][0], "TAIL_SPLIT": found[0][1]}
                    break
        return Schedule.make(
            warps,
            stages,
            BLOCK_M=bm,
            BLOCK_N=bn,
            BLOCK_K=bk,
            GROUP_M=_GROUP_M,
            GROUP_TILE=gt,
            FLAT_K=flat,
            ROW_TILES=rows,
            **split,
            **({"CL_COPY": 1} if copy else {}),
            **({"F16_MMA": f16} if f16 else {}),
        )

    # -- weight and launches -------------------------------------------------------------------------------
    @staticmethod
    def tap_major_schedule(block_n: int, block_k: int, f16_mma: int = 0) -> Schedule:
        """A schedule whose prepared weight is the plain tap-major matrix [taps, CIN_P, COUT_P] (one group tile,
        K not flattened; with ``f16_mma`` scaled to fp16, then its trailer) for these blocks: the weight the
        TMA-fed templates read (`prepare_weight`, `prepared_shape`; their other keys do not change it)."""
        return Schedule.make(
            BLOCK_M=64,
            BLOCK_N=block_n,
            BLOCK_K=block_k,
            GROUP_M=_GROUP_M,
            GROUP_TILE=1,
            FLAT_K=0,
            ROW_TILES=0,
            **({"F16_MMA": f16_mma} if f16_mma else {}),
        )

    def prepared_shape(self, problem: ConvProblem, schedule: Schedule) -> tuple[int, int, int, int]:
        g = Geometry.of(problem)
        gt = schedule["GROUP_TILE"]
        cin_t, cout_t = self._tile_channels(g, gt)
        if schedule["FLAT_K"]:
            rows = cdiv(g.taps * cin_t, schedule["BLOCK_K"]) * schedule["BLOCK_K"]
            return (g.groups // gt, 1, rows, cdiv(cout_t, schedule["BLOCK_N"]) * schedule["BLOCK_N"])
        cin_p = cdiv(cin_t, schedule["BLOCK_K"]) * schedule["BLOCK_K"]
        return (g.groups // gt, g.taps, cin_p, cdiv(cout_t, schedule["BLOCK_N"]) * schedule["BLOCK_N"])

    def prepare_weight(self, weight: torch.Tensor, problem: ConvProblem, schedule: Schedule) -> torch.Tensor:
        """(C_out, C_in/g, *k) -> [groups/GT, taps, CIN_P, COUT_P], block-diagonal within a group tile
        (F16_MMA: that matrix scaled to fp16 and flattened, then its scale, see _f16_mma.py)."""
        g = Geometry.of(problem)
        gt = schedule["GROUP_TILE"]
        f16 = uses_f16_mma(schedule)
        tiles, taps_dim, rows, cout_p = self.prepared_shape(problem, schedule)
        # [groups, cout_g, cin_g, taps] -> [groups, taps, cin_g, cout_g]
        weight = weight.detach()
        if not f16:
            weight = prepare_tf32_weight(weight, problem)  # rounded once here, never at run time
        w = weight.reshape(g.groups, g.cout_g, g.cin_g, g.taps).permute(0, 3, 2, 1)
        out = weight.new_zeros((tiles, g.taps, gt * g.cin_g, cout_p))
        for j in range(gt):  # group j of each tile sits on the diagonal block j
            ci = slice(j * g.cin_g, (j + 1) * g.cin_g)
            co = slice(j * g.cout_g, (j + 1) * g.cout_g)
            out[:, :, ci, co] = w[j::gt]
        if schedule["FLAT_K"]:
            flat = out.reshape(tiles, 1, g.taps * gt * g.cin_g, cout_p)
            padded = weight.new_zeros((tiles, 1, rows, cout_p))
            padded[:, :, : flat.shape[2]] = flat
        else:
            padded = weight.new_zeros((tiles, g.taps, rows, cout_p))
            padded[:, :, : gt * g.cin_g] = out
        if f16:
            return prepare_f16_weight(padded)
        if weight_k_major(problem):  # [tiles, K_ROWS, COUT_P] -> [tiles, COUT_P, K_ROWS]
            return padded.reshape(tiles, taps_dim * rows, cout_p).transpose(1, 2).contiguous()
        return padded.contiguous()

    def scratch(self, problem: ConvProblem, schedule: Schedule) -> list[ScratchTensor]:
        f16 = uses_f16_mma(schedule)
        # F16_MMA=2: one copy, "input_f16", is both the fp16 and (with CL_COPY) the channels-last copy
        copy = [input_cl(problem)] if dict(schedule.params).get("CL_COPY", 0) and f16 != 2 else []
        return copy + f16_scratch(problem, f16) + workspace(problem, schedule)

    def launches(self, problem: ConvProblem, schedule: Schedule) -> list[KernelLaunch]:
        g = Geometry.of(problem)
        gt = schedule["GROUP_TILE"]
        split = split_k_of(schedule)
        tail = tail_split_of(schedule)
        tail_m = dict(schedule.params).get("TAIL_M_TILES", 0)
        copy = bool(dict(schedule.params).get("CL_COPY", 0))
        f16 = uses_f16_mma(schedule)
        if f16 and not (problem.dtype == "float32" and problem.allow_tf32):
            raise ValueError("F16_MMA schedules run fp32 convolutions with TF32 allowed only")
        if g.groups % gt:
            raise ValueError(f"GROUP_TILE {gt} does not divide groups {g.groups}")
        cin_t, cout_t = self._tile_channels(g, gt)
        _, taps_dim, cin_p, cout_p = self.prepared_shape(problem, schedule)
        k_rows = taps_dim * cin_p  # rows of one group tile's weight matrix
        if schedule["FLAT_K"]:
            cin_p = cin_t  # flat rows: (tap * CIN_T + c), padded at the end only
        dt = TRITON_PTR_DTYPE[problem.dtype]
        (d, h, w), (od, oh, ow) = g.spatial, g.out_spatial
        args = (
            TensorArg("input_f16", "fp16") if f16 == 2 else TensorArg("input_cl" if copy else "input", dt),
            TensorArg("weight", "fp16" if f16 else dt),
            TensorArg("bias", dt),
            TensorArg("output", dt) if split == 1 else TensorArg("workspace", "fp32"),
            # the tail shares' partial sums (TAIL_SPLIT > 1); otherwise an unused pointer
            TensorArg("workspace", "fp32") if tail > 1 else TensorArg("output", dt),
            # the input's partial maxima (F16_MMA); otherwise an unused pointer
            TensorArg("amax", "fp32") if f16 else TensorArg("output", dt),
            *(ScalarArg(nm, "i32", v) for nm, v in (("BATCH", g.batch), ("D", d), ("H", h), ("W", w))),
            *(ScalarArg(nm, "i32", v) for nm, v in (("OD", od), ("OH", oh), ("OW", ow))),
        )
        bm, bn = schedule["BLOCK_M"], schedule["BLOCK_N"]
        constexprs = (
            ("C_IN", g.cin),
            ("C_OUT", g.cout),
            ("CIN_T", cin_t),
            ("COUT_T", cout_t),
            ("CIN_P", cin_p),
            ("COUT_P", cout_p),
            ("K_ROWS", k_rows),
            ("KD", g.kernel[0]),
            ("KH", g.kernel[1]),
            ("KW", g.kernel[2]),
            ("SD", g.stride[0]),
            ("SH", g.stride[1]),
            ("SW", g.stride[2]),
            ("PD", g.pad[0]),
            ("PH", g.pad[1]),
            ("PW", g.pad[2]),
            ("DD", g.dilation[0]),
            ("DH", g.dilation[1]),
            ("DW", g.dilation[2]),
            ("IN_CL", g.in_cl or copy),
            ("OUT_CL", g.out_cl),
            ("HAS_BIAS", problem.has_bias and split == 1),
            ("FLAT_K", bool(schedule["FLAT_K"])),
            ("W_KMAJOR", weight_k_major(problem) and not f16),
            ("ROW_TILES", bool(schedule["ROW_TILES"])),
            ("INT64", g.int64),
            ("PRECISION", "ieee" if f16 else dot_precision(problem)),
            ("ROUND_TF32", 0 if f16 else tf32_rounding(problem)),
            ("F16_MMA", f16),
            ("W_NUMEL", k_rows * cout_p * (g.groups // gt) if f16 else 0),
            ("BLOCK_M", bm),
            ("BLOCK_N", bn),
            ("BLOCK_K", schedule["BLOCK_K"]),
            ("GROUP_M", schedule["GROUP_M"]),
            ("SPLIT_K", split),
            ("TAIL_SPLIT", tail),
            ("TAIL_M_TILES", tail_m),
        )
        if schedule["ROW_TILES"]:
            m_programs = g.m // g.out_spatial[2] * cdiv(g.out_spatial[2], bm)
        else:
            m_programs = cdiv(g.m, bm)
        if tail > 1:  # the tail's programs: TAIL_SPLIT per tile of its TAIL_M_TILES rows of tiles
            m_programs += tail_m * (tail - 1)
        grid = (m_programs * cdiv(cout_t, bn), g.groups // gt, split)
        main = KernelLaunch(
            conv_implicit_gemm_kernel, args, constexprs, grid, schedule.num_warps, schedule.num_stages
        )
        launches = f16_input_launches(problem, f16, copy_elsewhere=copy)
        if copy:
            launches.append(copy_launch(problem, scale_f16=f16 == 2))
        launches.append(main)
        if split > 1:
            launches.append(splitk_reduce_launch(problem, split))
        if tail > 1:
            row0, rows = tail_rows(g, bm, tail_m)
            launches.append(splitk_reduce_launch(problem, tail, row0, rows))
        return launches


TEMPLATES = [ImplicitGemmTemplate()]
