"""Triton-language helpers the GEMM-shaped kernels share (gemm, implicit_gemm, implicit_gemm_tma,
implicit_gemm_box's portable twin): the input's sizes and strides, program-id order, weight-tile pointers and the
output epilogue (with a fused elementwise chain: conv/epilogue.py)."""

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
