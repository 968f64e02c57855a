"""Triton-language helpers the GEMM-shaped kernels share (gemm, implicit_gemm, implicit_gemm_tma,
implicit_gemm_box's portable twin; the op family's GEMM takes the split-K range): the input's sizes and strides,
program-id order, output-pixel rows, split-K ranges, weight-tile pointers and the output epilogue (with a fused
elementwise chain: conv/epilogue.py)."""

from __future__ import annotations

import triton
import triton.language as tl

from .epilogue_jit import apply_epilogue


@triton.jit
def widen_sizes(BATCH, D, H, W, INT64: tl.constexpr):
    """The input's sizes as int64 where offsets may pass 2^31 (INT64), so everything computed from them is."""
    if INT64:
        BATCH = BATCH.to(tl.int64)
        D = D.to(tl.int64)
        H = H.to(tl.int64)
        W = W.to(tl.int64)
    return BATCH, D, H, W


@triton.jit
def input_strides(D, H, W, C_IN: tl.constexpr, IN_CL: tl.constexpr):
    """Element strides (n, c, d, h, w) of the dense input in its layout (IN_CL: channels-last)."""
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
    return s_n, s_c, s_d, s_h, s_w


@triton.jit
def grouped_tile_ids(pid, num_pid_m, num_pid_n, GROUP_M: tl.constexpr):
    """Program id -> (tile row, tile column), GROUP_M row tiles at a time so weight tiles stay in L2."""
    width = GROUP_M * num_pid_n
    group_id = pid // width
    first_m = group_id * GROUP_M
    size_m = min(num_pid_m - first_m, GROUP_M)
    pid_m = first_m + (pid % width) % size_m
    pid_n = (pid % width) // size_m
    return pid_m, pid_n


@triton.jit
def gemm_rows(pid_m, M, OD, OH, OW, out_pixels, BLOCK_M: tl.constexpr, INT64: tl.constexpr):
    """Tile row pid_m of the GEMM whose M rows are the output pixels of every image: the rows (int64 where
    offsets may pass 2^31), which are in range, and each row's image and output coordinates (od, oh, ow)."""
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    if INT64:
        offs_m = offs_m.to(tl.int64)
    m_ok = offs_m < M
    ow = offs_m % OW
    oh = (offs_m // OW) % OH
    od = (offs_m // (OW * OH)) % OD
    n = offs_m // out_pixels
    return offs_m, m_ok, n, od, oh, ow


@triton.jit
def split_k_range(k_iters, SPLIT_K: tl.constexpr):
    """[k_lo, k_hi): the K iterations this program runs. With split-K, program_id(2) takes one contiguous share
    of the k_iters iterations; all of them when SPLIT_K == 1."""
    if SPLIT_K == 1:
        k_lo = 0
        k_hi = k_iters
    else:
        share = tl.cdiv(k_iters, SPLIT_K)
        k_lo = tl.program_id(2) * share
        k_hi = tl.minimum(k_lo + share, k_iters)
    return k_lo, k_hi


@triton.jit
def weight_ptrs(w_base, k_rows, offs_n, K_ROWS: tl.constexpr, COUT_P: tl.constexpr, W_KMAJOR: tl.constexpr):
    """[BLOCK_K, BLOCK_N] pointers into a prepared weight matrix stored [K_ROWS, COUT_P] or, K-major, [COUT_P, K_ROWS]."""
    if W_KMAJOR:
        return w_base + offs_n[None, :] * K_ROWS + k_rows[:, None]
    return w_base + k_rows[:, None] * COUT_P + offs_n[None, :]


@triton.jit
def add_bias(acc, b_ptr, co, n_ok, HAS_BIAS: tl.constexpr):
    if HAS_BIAS:
        acc += tl.load(b_ptr + co, mask=n_ok, other=0.0).to(tl.float32)[None, :]
    return acc


@triton.jit
def output_offsets(n, pixel, co, C_OUT: tl.constexpr, out_pixels, OUT_CL: tl.constexpr):
    """[rows, channels] element offsets of (image n, output pixel) x channels co in the dense output."""
    if OUT_CL:
        return ((n * out_pixels + pixel) * C_OUT)[:, None] + co[None, :]
    return (n * C_OUT * out_pixels + pixel)[:, None] + co[None, :] * out_pixels


@triton.jit
def store_output(
    y_ptr, b_ptr, acc, n, pixel, m_ok, offs_n, co_base, COUT_T: tl.constexpr, C_OUT: tl.constexpr, out_pixels,
    HAS_BIAS: tl.constexpr, OUT_CL: tl.constexpr,
):  # fmt: skip
    """Epilogue: add the bias, convert, store rows (image n, output pixel) x channels co_base + offs_n."""
    co = co_base + offs_n
    n_ok = offs_n < COUT_T
    acc = add_bias(acc, b_ptr, co, n_ok, HAS_BIAS)
    y_ptrs = y_ptr + output_offsets(n, pixel, co, C_OUT, out_pixels, OUT_CL)
    tl.store(y_ptrs, acc.to(y_ptr.dtype.element_ty), mask=m_ok[:, None] & n_ok[None, :])


@triton.jit
def store_split_k_share(ws_ptr, acc, n, pixel, m_ok, offs_n, co_base, COUT_T: tl.constexpr, C_OUT: tl.constexpr, M,
                        out_pixels):  # fmt: skip
    """A split-K share's partial sums (share program_id(2)) into the fp32 workspace [SPLIT_K, M, C_OUT], stored
    like a channels-last output without bias."""
    ws = ws_ptr + tl.program_id(2) * (M * C_OUT)
    # no bias: ws_ptr stands in for the bias pointer, which is never read
    store_output(ws, ws_ptr, acc, n, pixel, m_ok, offs_n, co_base, COUT_T, C_OUT, out_pixels, False, True)


@triton.jit
def is_last_split_k_share(cnt_ptr, SPLIT_K: tl.constexpr):
    """Counts this program's share of its tile as done; True for the tile's last share to finish, which then owns
    the tile's result (and has set the tile's counter back to zero for the next launch).

    The counters (one int32 per program of axes 0 and 1, zero before the launch) live in the delegate's state
    buffer, not the arena (`ScratchTensor.zeroed`). Ordering: the barrier makes every thread's partial sums
    precede the counter's release; the acquire lets the last share read the others' sums.
    """
    tl.debug_barrier()
    tile = tl.program_id(0) + tl.program_id(1) * tl.num_programs(0)
    done = tl.atomic_add(cnt_ptr + tile, 1, sem="acq_rel", scope="gpu")
    last = done == SPLIT_K - 1
    if last:
        tl.atomic_xchg(cnt_ptr + tile, 0, sem="relaxed", scope="gpu")
    return last


@triton.jit
def sum_split_k_shares(ws_ptr, acc, n, pixel, m_ok, offs_n, co_base, COUT_T: tl.constexpr, C_OUT: tl.constexpr, M,
                       out_pixels, SPLIT_K: tl.constexpr):  # fmt: skip
    """The tile's full sums (``acc``, this share's, gives the shape): its SPLIT_K shares in the workspace, added
    in share order whichever share runs this, so the result does not depend on which finished last. Read
    through L2 (``.cg``): the other shares' sums were written by other SMs."""
    offs = output_offsets(n, pixel, co_base + offs_n, C_OUT, out_pixels, True)
    mask = m_ok[:, None] & (offs_n < COUT_T)[None, :]
    acc = tl.zeros_like(acc)
    for s in tl.static_range(SPLIT_K):
        acc += tl.load(ws_ptr + s * (M * C_OUT) + offs, mask=mask, other=0.0, cache_modifier=".cg")
    return acc


@triton.jit
def store_output_with_epilogue(
    y_ptr, b_ptr, acc, n, pixel, m_ok, offs_n, C_OUT: tl.constexpr, out_pixels,
    e1_ptr, e1_sn, e1_sc, e2_ptr, e2_sn, e2_sc, e3_ptr, e3_sn, e3_sc,
    HAS_BIAS: tl.constexpr, OUT_CL: tl.constexpr, PROGRAM: tl.constexpr, E_KINDS: tl.constexpr,
):  # fmt: skip
    """`store_output` (all C_OUT channels from 0) with a fused elementwise chain applied after the bias: the
    chain's input 0 is the result, inputs 1-3 the operands E_KINDS says how to read (0: absent)."""
    n_ok = offs_n < C_OUT
    mask = m_ok[:, None] & n_ok[None, :]
    acc = add_bias(acc, b_ptr, offs_n, n_ok, HAS_BIAS)
    offs = output_offsets(n, pixel, offs_n, C_OUT, out_pixels, OUT_CL)
    y = apply_epilogue(
        acc, offs, n, offs_n, mask, e1_ptr, e1_sn, e1_sc, e2_ptr, e2_sn, e2_sc, e3_ptr, e3_sn, e3_sc, PROGRAM, E_KINDS,
    )  # fmt: skip
    tl.store(y_ptr + offs, y.to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def store_tile(
    y_ptr, b_ptr, ws_ptr, cnt_ptr, acc, n, pixel, m_ok, offs_n, co_base, COUT_T: tl.constexpr, C_OUT: tl.constexpr,
    M, out_pixels, e1_ptr, e1_sn, e1_sc, e2_ptr, e2_sn, e2_sc, e3_ptr, e3_sn, e3_sc,
    HAS_BIAS: tl.constexpr, OUT_CL: tl.constexpr, SPLIT_K: tl.constexpr, PROGRAM: tl.constexpr,
    E_KINDS: tl.constexpr,
):  # fmt: skip
    """A GEMM kernel's result tile, rows (image n, output pixel) x channels co_base + offs_n, with the bias and
    the fused elementwise chain (which comes with one tile of all C_OUT channels). With split-K (SPLIT_K > 1,
    program_id(2) the share), each share stores its partial sums into the fp32 workspace ws_ptr and the last
    share of the tile to finish adds them all up and stores the tile (`is_last_split_k_share`): one launch, no
    reduction kernel after it."""
    if SPLIT_K > 1:
        store_split_k_share(ws_ptr, acc, n, pixel, m_ok, offs_n, co_base, COUT_T, C_OUT, M, out_pixels)
        if is_last_split_k_share(cnt_ptr, SPLIT_K):
            acc = sum_split_k_shares(
                ws_ptr, acc, n, pixel, m_ok, offs_n, co_base, COUT_T, C_OUT, M, out_pixels, SPLIT_K
            )
            store_finished_tile(
                y_ptr, b_ptr, acc, n, pixel, m_ok, offs_n, co_base, COUT_T, C_OUT, out_pixels,
                e1_ptr, e1_sn, e1_sc, e2_ptr, e2_sn, e2_sc, e3_ptr, e3_sn, e3_sc, HAS_BIAS, OUT_CL, PROGRAM, E_KINDS,
            )  # fmt: skip
    else:
        store_finished_tile(
            y_ptr, b_ptr, acc, n, pixel, m_ok, offs_n, co_base, COUT_T, C_OUT, out_pixels,
            e1_ptr, e1_sn, e1_sc, e2_ptr, e2_sn, e2_sc, e3_ptr, e3_sn, e3_sc, HAS_BIAS, OUT_CL, PROGRAM, E_KINDS,
        )  # fmt: skip


@triton.jit
def store_finished_tile(
    y_ptr, b_ptr, acc, n, pixel, m_ok, offs_n, co_base, COUT_T: tl.constexpr, C_OUT: tl.constexpr, out_pixels,
    e1_ptr, e1_sn, e1_sc, e2_ptr, e2_sn, e2_sc, e3_ptr, e3_sn, e3_sc,
    HAS_BIAS: tl.constexpr, OUT_CL: tl.constexpr, PROGRAM: tl.constexpr, E_KINDS: tl.constexpr,
):  # fmt: skip
    """A tile's full sums into y: through the fused elementwise chain when there is one, else with the bias."""
    if len(PROGRAM) > 0:
        store_output_with_epilogue(
            y_ptr, b_ptr, acc, n, pixel, m_ok, offs_n, C_OUT, out_pixels,
            e1_ptr, e1_sn, e1_sc, e2_ptr, e2_sn, e2_sc, e3_ptr, e3_sn, e3_sc, HAS_BIAS, OUT_CL, PROGRAM, E_KINDS,
        )  # fmt: skip
    else:
        store_output(
            y_ptr, b_ptr, acc, n, pixel, m_ok, offs_n, co_base, COUT_T, C_OUT, out_pixels, HAS_BIAS, OUT_CL
        )
