"""Implicit GEMM on TMA pixel boxes, written in Gluon, for 1-D/2-D convolutions on Hopper.

A program computes BOX_N images x BOX_H rows x BOX_W columns of output pixels (BLOCK_M = their product) by
BLOCK_N output channels. With stride 1, the input pixels that tap (kh, kw) multiplies for those outputs are
again a box: rows oh0 + kh*DH - PH .. + BOX_H, columns ow0 + kw*DW - PW .. + BOX_W, of the channels-last
input [N, H, W, C]. One 4-D TMA copy moves that box (BLOCK_K channels) into shared memory, and the copy engine
writes zeros wherever the box leaves the tensor: the convolution's padding, the last images and channels past
C_in. So the input is read as it is, with no padded copy (implicit_gemm_tma.py's 11 us on vgg) and no masks.

Strided convolutions (strides SH, SW; H % SH == W % SW == 0, C_in % 16 == 0) read the same input through a
5-D view [N, H/SH, SH, W/SW, SW*C_in] (strides N: H*W*C, H/SH: SH*W*C, SH: W*C, W/SW: SW*C, SW*C: 1): input row
oh*SH + dh is view row oh + floor(dh/SH) of parity dh mod SH, and column ow*SW + dw is view column
ow + floor(dw/SW), its parity selecting channels (dw mod SW)*C_in.. of the merged last dim. So each tap is again
one box [BOX_N, BOX_H, 1, BOX_W, BLOCK_K] of the view, zero-filled exactly where the input row or column is
outside the tensor (a parity never leaves it; channel blocks divide C_in so none reaches the next parity).
Checked on the H200 (2026-12-03 15:59, a third of 80 random box cases strided); used only where a tuning-table
entry of the conv itself names it (`transfers_to` refuses strided convs), and none does yet.

The shared-memory box [BOX_N, BOX_H, BOX_W, BLOCK_K] is, byte for byte, the [BLOCK_M, BLOCK_K] A operand
(the rows are the box's pixels in row-major order), so ``wgmma`` can read it from shared memory in place. Plain
Triton (3.6, 3.7) reshapes a box through registers instead; Gluon's ``memdesc`` reshape is a view, hence Gluon.
The main loop is a STAGES-deep ring of TMA copies (an mbarrier per slot) feeding asynchronous ``wgmma`` with
one group in flight. On the H200 this ran vgg.3x3.256 fp16 in 49.6 us against cuDNN's 48.5 us and the TMA
template's 56.8 us (scripts/exp_gluon_box.py, 2026-12-03). WS=1 schedules split the loop across warps instead
(`gl.warp_specialize`): one copy warp waits for a free slot and issues the TMA copies, the kernel's warpgroup
waits for full slots, issues wgmma and releases each slot once the wgmma that read it has finished (a second
ring of mbarriers); not yet measured.

Gluon kernels target one architecture and have no interpreter, so each launch carries a Triton-language twin,
``conv_box_portable_kernel``: the same parameters, grid and results, with masked pointer loads in place of
the boxes. Triton's CPU interpreter runs the twin (CI checks the tiling, tap offsets and epilogue with it), and
archs other than sm_90 compile it (`KernelLaunch.portable_fn`), so a multi-arch export still works.

fp32 (with TF32 allowed) runs the same 16-bit kernel as an F16_MMA=2 schedule (_f16_mma.py): a first launch
writes the input's partial maxima ("amax"), a second its copy scaled by a power of two to fp16, channels-last
("input_f16": `scale_to_f16_kernel`, or the channels-last copy with SCALE_F16 for a contiguous input); the
weight is prepared scaled to fp16 with its shift in a trailer, and the epilogue undoes both scales (exact) before
the fp32 bias and store. TF32's precision, fp16's tensor-core rate, and boxes of half the bytes.
fp32 also runs as TF32 itself (TF32=1: schedules without an F16_MMA key, 32-channel K steps): fp32 boxes, the
weight prepared K-major ([COUT_P, taps * CIN_P], TF32 wgmma reads shared operands only K-major) and rounded to
nearest TF32, and each A box rounded to nearest TF32 in place in shared memory (ROUND_TF32, the `_tf32.py`
mode; `_mma_step`), so wgmma still reads both operands from there. One launch for a channels-last input, where
F16_MMA=2 takes three (on the H200 it won no public fp32 conv: the implicit GEMM stayed faster, 2026-12-03).

Kernel arguments (PTX order): x, w, bias, y, amax pointers, int32 BATCH, H, W, OH, OW. x is the input if it is
channels-last, else its channels-last copy ("input_cl", _cl_copy.py, a first launch), or for F16_MMA the scaled
fp16 copy; amax is the partial maxima for F16_MMA and an unused pointer (the input) otherwise. Grid:
(cdiv(BATCH, BOX_N) * cdiv(OH, BOX_H) * cdiv(OW, BOX_W), cdiv(C_OUT, BLOCK_N), 1). The TMA descriptors are
made on the device: Triton's global scratch holds them (the C++ runtime allocates it from the metadata).

Prepared weight: the implicit GEMM's ([taps, CIN_P, COUT_P], CIN_P and COUT_P whole blocks); for F16_MMA that
matrix scaled to fp16 and flattened, then its shift (`prepare_f16_weight`); for TF32 its K-major transpose.
"""

from __future__ import annotations

import itertools
import math

import torch
import triton
import triton.language as tl
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (
    fence_async_shared,
    mbarrier,
    tma,
    warpgroup_mma,
    warpgroup_mma_wait,
)

from ...kernel.launch import (
    TRITON_PTR_DTYPE,
    KernelLaunch,
    ScalarArg,
    Schedule,
    ScratchTensor,
    Support,
    TensorArg,
    cdiv,
    interpreting,
)
from ..problem import ConvProblem
from ._cl_copy import copy_launch, input_cl
from ._f16_mma import (
    AMAX_PARTS,
    MAX_SHIFT,
    TOP_EXP,
    amax_launch,
    f16_mma_allowed,
    f16_scratch,
    input_scales,
    scale_launch,
    uses_f16_mma,
    weight_unscale,
)
from ._geometry import (
    INT32_LIMIT,
    NUM_SMS,
    Geometry,
    common_support_problems,
    fit_block,
    next_pow2,
    tma_tap_problems,
)
from ._tf32 import CVT_RNA_TF32_ASM, round_to_tf32, tf32_rounding
from .base import ConvTemplate
from .implicit_gemm import ImplicitGemmTemplate, store_output

# A barrier of all the CTA's threads: Triton 3.7 calls it gl.barrier, 3.6 (the GPU machine's) gl.thread_barrier.
_cta_barrier = getattr(gl, "barrier", None) or gl.thread_barrier

# The archs whose tensor cores the Gluon kernel is written for (wgmma: Hopper).
GLUON_ARCHS = (90,)


# ---- the Gluon kernel (sm_90) ---------------------------------------------------------------------------------
@gluon.jit
def _issue_box_loads(x_desc, w_desc, a_ring, b_ring, ready, i, n0, oh0, ow0, co0,
                     C_BLOCKS: gl.constexpr, KW: gl.constexpr, PH: gl.constexpr, PW: gl.constexpr,
                     DH: gl.constexpr, DW: gl.constexpr, SH: gl.constexpr, SW: gl.constexpr, C_IN: gl.constexpr,
                     BLOCK_K: gl.constexpr, STAGES: gl.constexpr, NBYTES: gl.constexpr, TF32: gl.constexpr):  # fmt: skip
    """TMA copies of K step i (tap i // C_BLOCKS, channel block i % C_BLOCKS) into ring slot i % STAGES."""
    slot = i % STAGES
    tap = i // C_BLOCKS
    bar = ready.index(slot)
    mbarrier.expect(bar, NBYTES)
    if SH * SW == 1:
        box = [n0, oh0 + (tap // KW) * DH - PH, ow0 + (tap % KW) * DW - PW, (i % C_BLOCKS) * BLOCK_K]
    else:
        # Strided (module docstring): input row oh*SH + dh is view row oh + dh // SH, parity dh % SH; the column
        # likewise, its parity selecting a C_IN-wide slice of the merged channels. dh + OFF_H >= 0, so // and %
        # are floor division and modulo on non-negative values.
        OFF_H: gl.constexpr = (PH + SH - 1) // SH * SH
        OFF_W: gl.constexpr = (PW + SW - 1) // SW * SW
        dh = (tap // KW) * DH - PH + OFF_H
        dw = (tap % KW) * DW - PW + OFF_W
        box = [
            n0,
            oh0 + dh // SH - OFF_H // SH,
            dh % SH,
            ow0 + dw // SW - OFF_W // SW,
            dw % SW * C_IN + (i % C_BLOCKS) * BLOCK_K,
        ]
    tma.async_copy_global_to_shared(x_desc, box, bar, a_ring.index(slot))
    # Weight row i * BLOCK_K is tap * CIN_P + channel block: the prepared matrix is [taps, CIN_P] rows (TF32: its
    # K-major transpose, [COUT_P, taps * CIN_P], so that column).
    if TF32:
        tma.async_copy_global_to_shared(w_desc, [co0, i * BLOCK_K], bar, b_ring.index(slot))
    else:
        tma.async_copy_global_to_shared(w_desc, [i * BLOCK_K, co0], bar, b_ring.index(slot))


@gluon.jit
def _pow2(k):
    """2^k as fp32 for an int32 |k| <= 126, from its exponent bits (`_f16_mma.pow2`, in Gluon)."""
    return ((k + 127) << 23).to(gl.float32, bitcast=True)


@gluon.jit
def _box_producer(x_desc, w_desc, a_ring, b_ring, ready, empty, n0, oh0, ow0, co0,
                  STEPS: gl.constexpr, C_BLOCKS: gl.constexpr, KW: gl.constexpr, PH: gl.constexpr,
                  PW: gl.constexpr, DH: gl.constexpr, DW: gl.constexpr, SH: gl.constexpr, SW: gl.constexpr,
                  C_IN: gl.constexpr, BLOCK_K: gl.constexpr, STAGES: gl.constexpr, NBYTES: gl.constexpr,
                  TF32: gl.constexpr):  # fmt: skip
    """WS=1, the copy partition (one warp): fills each ring slot once the MMA partition has released it.
    mbarriers start as if their phase 1 had completed, so the first round's waits pass at once."""
    for i in range(STEPS):
        mbarrier.wait(empty.index(i % STAGES), ((i // STAGES) & 1) ^ 1)
        _issue_box_loads(x_desc, w_desc, a_ring, b_ring, ready, i, n0, oh0, ow0, co0,
                         C_BLOCKS, KW, PH, PW, DH, DW, SH, SW, C_IN, BLOCK_K, STAGES, NBYTES, TF32)  # fmt: skip


@gluon.jit
def _round_tf32(x, MODE: gl.constexpr):
    """fp32 -> nearest TF32 value as fp32 (`_tf32.round_to_tf32`, in Gluon): MODE 2 the hardware conversion, 1
    the integer rounding (inf and NaN kept), 0 none (the tensor core truncates; for timing only)."""
    if MODE == 2:
        return gl.inline_asm_elementwise(
            CVT_RNA_TF32_ASM,
            "=r,r",
            [x],
            dtype=gl.float32,
            is_pure=True,
            pack=1,
        )
    elif MODE == 1:
        bits = x.to(gl.uint32, bitcast=True)
        rounded = ((bits + 0x1000) >> 13) << 13
        finite = (bits & 0x7F800000) != 0x7F800000
        return gl.where(finite, rounded, bits).to(gl.float32, bitcast=True)
    else:
        return x


@gluon.jit
def _mma_step(a_ring, b_ring, ready, acc, i, STAGES: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_K: gl.constexpr,
              TF32: gl.constexpr, ROUND_TF32: gl.constexpr, ROUND_LAYOUT: gl.constexpr):  # fmt: skip
    """K step i: wait for its ring slot, issue its asynchronous wgmma (the A box viewed as [BLOCK_M, BLOCK_K]) and
    keep one group in flight, so step i-1's wgmma has finished reading its slot when this returns.

    TF32: the weight tile is K-major (TF32 wgmma reads shared operands only K-major) and viewed transposed; with
    ROUND_TF32 the A tile is rounded to nearest TF32 in place (_tf32.py: the tensor core would truncate): every
    thread loads its share of the slot, rounds and stores it back, then a proxy fence and a barrier hand the slot
    to wgmma, which reads both operands from shared memory as in 16-bit. (Feeding wgmma the rounded tile from
    registers instead ran wrong on the H200, 2026-12-03: with one group in flight the compiler reused the
    fragment's registers before the wgmma that read them had finished.)"""
    slot = i % STAGES
    mbarrier.wait(ready.index(slot), (i // STAGES) & 1)
    a = a_ring.index(slot).reshape([BLOCK_M, BLOCK_K])
    if TF32:
        b = b_ring.index(slot).permute((1, 0))
        if ROUND_TF32:
            a.store(_round_tf32(a.load(ROUND_LAYOUT), ROUND_TF32))
            fence_async_shared()  # the generic-proxy stores, before the async proxy (wgmma, TMA) touches the slot
            _cta_barrier()  # every thread's share, before any warpgroup's wgmma reads the tile
    else:
        b = b_ring.index(slot)
    acc = warpgroup_mma(a, b, acc, is_async=True)
    return warpgroup_mma_wait(1, deps=[acc])


@gluon.jit
def _box_mma(a_ring, b_ring, ready, empty, STEPS: gl.constexpr, STAGES: gl.constexpr, BLOCK_M: gl.constexpr,
             BLOCK_N: gl.constexpr, BLOCK_K: gl.constexpr, MMA: gl.constexpr):  # fmt: skip
    """WS=1, the MMA partition (the kernel's own warps): one asynchronous wgmma group in flight; a slot is
    released to the copy partition once the wgmma that read it has finished."""
    acc = gl.zeros([BLOCK_M, BLOCK_N], gl.float32, MMA)
    for i in range(STEPS):
        acc = _mma_step(a_ring, b_ring, ready, acc, i, STAGES, BLOCK_M, BLOCK_K, False, 0, MMA)  # 16-bit only
        mbarrier.arrive(empty.index((i + STAGES - 1) % STAGES), count=1, pred=i > 0)  # step i-1's slot
    acc = warpgroup_mma_wait(0, deps=[acc])
    return (acc,)  # a tuple: Triton 3.6's warp_specialize takes only that


@gluon.jit
def _maximum(a, b):
    return gl.maximum(a, b)


@gluon.jit
def _f16_unscale(amax_ptr, w_ptr, W_NUMEL: gl.constexpr, WARPS: gl.constexpr):
    """2^-shift_x * 2^-shift_w of an F16_MMA conv (`_f16_mma.input_scales` and `weight_unscale`, in Gluon)."""
    parts: gl.constexpr = gl.BlockedLayout([1], [32], [WARPS], [0])
    amax = gl.reduce(gl.load(amax_ptr + gl.arange(0, AMAX_PARTS, layout=parts)), 0, _maximum)
    exponent = ((amax.to(gl.int32, bitcast=True) >> 23) & 0xFF) - 127  # floor(log2(amax)); -127 for 0
    shift_x = gl.minimum(gl.maximum(0 - (exponent - TOP_EXP), 0 - MAX_SHIFT), MAX_SHIFT)
    shift_w = gl.load(w_ptr + W_NUMEL).to(gl.int32)
    return _pow2(0 - shift_x - shift_w)


@gluon.jit
def conv_box_kernel(
    x_ptr, w_ptr, b_ptr, y_ptr, amax_ptr,
    BATCH, H, W, OH, OW,
    C_IN: gl.constexpr, C_OUT: gl.constexpr, CIN_P: gl.constexpr, COUT_P: gl.constexpr,
    KH: gl.constexpr, KW: gl.constexpr, PH: gl.constexpr, PW: gl.constexpr, DH: gl.constexpr, DW: gl.constexpr,
    SH: gl.constexpr, SW: gl.constexpr,
    OUT_CL: gl.constexpr, HAS_BIAS: gl.constexpr, DOT_FP32: gl.constexpr, F16_MMA: gl.constexpr, W_NUMEL: gl.constexpr,
    TF32: gl.constexpr, ROUND_TF32: gl.constexpr,
    BOX_N: gl.constexpr, BOX_H: gl.constexpr, BOX_W: gl.constexpr,
    BLOCK_N: gl.constexpr, BLOCK_K: gl.constexpr, A_SWIZZLE: gl.constexpr, B_SWIZZLE: gl.constexpr,
    STAGES: gl.constexpr, WARPS: gl.constexpr, WS: gl.constexpr,
):  # fmt: skip
    BLOCK_M: gl.constexpr = BOX_N * BOX_H * BOX_W
    C_BLOCKS: gl.constexpr = CIN_P // BLOCK_K
    STEPS: gl.constexpr = KH * KW * C_BLOCKS
    # TF32: fp32 tiles; otherwise fp16/bf16 (or the scaled fp16 copy)
    EBITS: gl.constexpr = 32 if TF32 else 16
    NBYTES: gl.constexpr = (BLOCK_M * BLOCK_K + BLOCK_K * BLOCK_N) * (EBITS // 8)
    dtype: gl.constexpr = x_ptr.dtype.element_ty

    b_layout: gl.constexpr = gl.NVMMASharedLayout(
        swizzle_byte_width=B_SWIZZLE, element_bitwidth=EBITS, rank=2
    )
    if SH * SW == 1:
        a_layout: gl.constexpr = gl.NVMMASharedLayout(
            swizzle_byte_width=A_SWIZZLE, element_bitwidth=EBITS, rank=4
        )
        x_desc = tma.make_tensor_descriptor(
            x_ptr,
            [BATCH, H, W, C_IN],
            [H * W * C_IN, W * C_IN, C_IN, 1],
            [BOX_N, BOX_H, BOX_W, BLOCK_K],
            a_layout,
        )
        a_ring = gl.allocate_shared_memory(dtype, [STAGES, BOX_N, BOX_H, BOX_W, BLOCK_K], a_layout)
    else:  # the strided view [N, H / SH, SH, W / SW, SW * C_IN] (module docstring): one parity
        a_layout: gl.constexpr = gl.NVMMASharedLayout(
            swizzle_byte_width=A_SWIZZLE, element_bitwidth=EBITS, rank=5
        )
        x_desc = tma.make_tensor_descriptor(
            x_ptr,
            [BATCH, H // SH, SH, W // SW, SW * C_IN],
            [H * W * C_IN, SH * W * C_IN, W * C_IN, SW * C_IN, 1],
            [BOX_N, BOX_H, 1, BOX_W, BLOCK_K],
            a_layout,
        )
        a_ring = gl.allocate_shared_memory(dtype, [STAGES, BOX_N, BOX_H, 1, BOX_W, BLOCK_K], a_layout)
    if TF32:  # the K-major weight [COUT_P, taps * CIN_P]
        w_desc = tma.make_tensor_descriptor(
            w_ptr, [COUT_P, KH * KW * CIN_P], [KH * KW * CIN_P, 1], [BLOCK_N, BLOCK_K], b_layout
        )
        b_ring = gl.allocate_shared_memory(dtype, [STAGES, BLOCK_N, BLOCK_K], b_layout)
    else:
        w_desc = tma.make_tensor_descriptor(
            w_ptr, [KH * KW * CIN_P, COUT_P], [COUT_P, 1], [BLOCK_K, BLOCK_N], b_layout
        )
        b_ring = gl.allocate_shared_memory(dtype, [STAGES, BLOCK_K, BLOCK_N], b_layout)
    ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for s in gl.static_range(STAGES):
        mbarrier.init(ready.index(s), count=1)

    tiles_h = (OH + BOX_H - 1) // BOX_H
    tiles_w = (OW + BOX_W - 1) // BOX_W
    pid = gl.program_id(0)
    n0 = pid // (tiles_h * tiles_w) * BOX_N
    oh0 = pid // tiles_w % tiles_h * BOX_H
    ow0 = pid % tiles_w * BOX_W
    co0 = gl.program_id(1) * BLOCK_N

    mma: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[WARPS, 1], instr_shape=[16, BLOCK_N, 256 // EBITS]
    )
    # TF32 rounding in place: a thread's 4 consecutive channels (16 bytes), a warp's 8 x 4 threads cover 4 rows
    round_layout: gl.constexpr = gl.BlockedLayout(
        [1, 4], [32 * 4 // BLOCK_K, BLOCK_K // 4], [WARPS, 1], [1, 0]
    )
    if WS:  # a copy warp fills the ring; the kernel's warps only wait, issue wgmma and release slots
        gl.static_assert(not TF32, "warp-specialised schedules are 16-bit (the MMA partition cannot round)")
        empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
        for s in gl.static_range(STAGES):
            mbarrier.init(empty.index(s), count=1)
        (acc,) = gl.warp_specialize(
            [
                (_box_mma, (a_ring, b_ring, ready, empty, STEPS, STAGES, BLOCK_M, BLOCK_N, BLOCK_K, mma)),
                (_box_producer, (x_desc, w_desc, a_ring, b_ring, ready, empty, n0, oh0, ow0, co0, STEPS,
                                 C_BLOCKS, KW, PH, PW, DH, DW, SH, SW, C_IN, BLOCK_K, STAGES, NBYTES, TF32)),
            ],
            [1],
            [24],
        )  # fmt: skip
        for s in gl.static_range(STAGES):
            mbarrier.invalidate(empty.index(s))
    else:  # software pipelined: the same warps issue the copies STAGES - 1 steps ahead
        acc = gl.zeros([BLOCK_M, BLOCK_N], gl.float32, mma)
        for i in gl.static_range(STAGES - 1):  # prologue: fill all but one slot
            if i < STEPS:
                _issue_box_loads(x_desc, w_desc, a_ring, b_ring, ready, i, n0, oh0, ow0, co0,
                                 C_BLOCKS, KW, PH, PW, DH, DW, SH, SW, C_IN, BLOCK_K, STAGES, NBYTES, TF32)  # fmt: skip
        for i in range(STEPS):
            acc = _mma_step(
                a_ring, b_ring, ready, acc, i, STAGES, BLOCK_M, BLOCK_K, TF32, ROUND_TF32, round_layout
            )
            if i + STAGES - 1 < STEPS:  # step i-1's slot is free: refill it
                _issue_box_loads(x_desc, w_desc, a_ring, b_ring, ready, i + STAGES - 1, n0, oh0, ow0, co0,
                                 C_BLOCKS, KW, PH, PW, DH, DW, SH, SW, C_IN, BLOCK_K, STAGES, NBYTES, TF32)  # fmt: skip
        acc = warpgroup_mma_wait(0, deps=[acc])
    for s in gl.static_range(STAGES):
        mbarrier.invalidate(ready.index(s))

    if F16_MMA:  # fp32 on fp16 tensor cores: undo the inputs' and the weight's power-of-two scales (exact)
        acc = acc * _f16_unscale(amax_ptr, w_ptr, W_NUMEL, WARPS)
    if HAS_BIAS:  # added in the accumulator's own layout, before the (narrower) output copy is shuffled
        co_acc = co0 + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, mma))
        bias = gl.load(b_ptr + co_acc, mask=co_acc < C_OUT, other=0.0).to(gl.float32)
        acc = acc + gl.expand_dims(bias, 0)
    # Stores run along the tensor's unit stride: channels (channels-last) or pixels (contiguous).
    if OUT_CL:
        out_layout: gl.constexpr = gl.BlockedLayout([1, 8], [4, 8], [WARPS, 1], [1, 0])
    else:
        out_layout: gl.constexpr = gl.BlockedLayout([4, 1], [32, 1], [1, WARPS], [0, 1])
    out = gl.convert_layout(acc.to(y_ptr.dtype.element_ty), out_layout)
    r = gl.arange(0, BLOCK_M, layout=gl.SliceLayout(1, out_layout))
    co = co0 + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, out_layout))
    n = n0 + r // (BOX_H * BOX_W)
    oh = oh0 + r // BOX_W % BOX_H
    ow = ow0 + r % BOX_W
    ok = gl.expand_dims((n < BATCH) & (oh < OH) & (ow < OW), 1) & gl.expand_dims(co < C_OUT, 0)
    pixel = oh * OW + ow
    if OUT_CL:
        offs = gl.expand_dims((n * (OH * OW) + pixel) * C_OUT, 1) + gl.expand_dims(co, 0)
    else:
        offs = gl.expand_dims(n * (C_OUT * OH * OW) + pixel, 1) + gl.expand_dims(co * (OH * OW), 0)
    gl.store(y_ptr + offs, out, mask=ok)


# ---- the Triton-language twin (interpreter, other archs) -------------------------------------------------------
@triton.jit
def conv_box_portable_kernel(
    x_ptr, w_ptr, b_ptr, y_ptr, amax_ptr,
    BATCH, H, W, OH, OW,
    C_IN: tl.constexpr, C_OUT: tl.constexpr, CIN_P: tl.constexpr, COUT_P: tl.constexpr,
    KH: tl.constexpr, KW: tl.constexpr, PH: tl.constexpr, PW: tl.constexpr, DH: tl.constexpr, DW: tl.constexpr,
    SH: tl.constexpr, SW: tl.constexpr,
    OUT_CL: tl.constexpr, HAS_BIAS: tl.constexpr, DOT_FP32: tl.constexpr, F16_MMA: tl.constexpr, W_NUMEL: tl.constexpr,
    TF32: tl.constexpr, ROUND_TF32: tl.constexpr,
    BOX_N: tl.constexpr, BOX_H: tl.constexpr, BOX_W: tl.constexpr,
    BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, A_SWIZZLE: tl.constexpr, B_SWIZZLE: tl.constexpr,
    STAGES: tl.constexpr, WARPS: tl.constexpr, WS: tl.constexpr,
):  # fmt: skip
    """`conv_box_kernel` with masked loads: same tiles, same K steps, same epilogue (swizzles unused)."""
    BLOCK_M: tl.constexpr = BOX_N * BOX_H * BOX_W
    C_BLOCKS: tl.constexpr = CIN_P // BLOCK_K
    tiles_h = (OH + BOX_H - 1) // BOX_H
    tiles_w = (OW + BOX_W - 1) // BOX_W
    pid = tl.program_id(0)
    n0 = pid // (tiles_h * tiles_w) * BOX_N
    oh0 = pid // tiles_w % tiles_h * BOX_H
    ow0 = pid % tiles_w * BOX_W
    co0 = tl.program_id(1) * BLOCK_N

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
    store_output(y_ptr, b_ptr, acc, n, oh * OW + ow, m_ok, offs_n, 0, C_OUT, C_OUT, OH * OW, HAS_BIAS, OUT_CL)


# ---- tuning space ------------------------------------------------------------------------------------------
# (BLOCK_M, BLOCK_N, BLOCK_K, num_warps, STAGES); each with the box shapes that tile the output best.
_CONFIGS: tuple[tuple[int, int, int, int, int], ...] = (
    (128, 128, 64, 8, 4),
    (128, 256, 64, 8, 3),
    (128, 128, 64, 8, 3),
    (128, 64, 64, 4, 4),
    (64, 128, 64, 4, 4),
    (64, 64, 64, 4, 4),
)
# fp32 with TF32 (the A tile rounded in shared memory): 32 channels a K step (128-byte rows); small tiles too, for
# the small fp32 layers (r18.l1 at batch 1: 49 programs of 64 x 64) where the F16_MMA copy's two extra launches
# cost more than the conv.
_TF32_CONFIGS: tuple[tuple[int, int, int, int, int], ...] = (
    (128, 128, 32, 8, 3),
    (128, 64, 32, 4, 4),
    (64, 128, 32, 4, 4),
    (64, 64, 32, 4, 4),
    (64, 32, 32, 4, 4),
)
# Warp-specialised (WS=1, 16-bit only): the wgmma warpgroup(s) plus a copy warp: 128 x 128 tiles on one
# warpgroup (128 fp32 accumulators a thread), 128 x 256 on two (`_ws_maxnreg`); measured 2026-12-03 13:27 (they
# won only deeplab.d4 among box schedules).
_WS_CONFIGS: tuple[tuple[int, int, int, int, int], ...] = (
    (128, 128, 64, 4, 4),
    (128, 128, 64, 4, 3),
    (128, 256, 64, 8, 3),
)
_REGISTERS_PER_SM = 65536
_BOXES_PER_CONFIG = 2
_MAX_BOX_DIM = 256  # a TMA box side has at most 256 elements


def box_count(g: Geometry, box: tuple[int, int, int]) -> int:
    """How many (BOX_N, BOX_H, BOX_W) boxes cover the output: the grid's first axis."""
    _, oh, ow = g.out_spatial
    return cdiv(g.batch, box[0]) * cdiv(oh, box[1]) * cdiv(ow, box[2])


def box_waste(g: Geometry, box: tuple[int, int, int]) -> float:
    """Pixels the boxes cover over pixels the output has (1.0: the boxes tile the output exactly)."""
    return box_count(g, box) * math.prod(box) / g.m


def box_shapes(g: Geometry, block_m: int) -> list[tuple[int, int, int]]:
    """(BOX_N, BOX_H, BOX_W) of ``block_m`` pixels, least waste first (then wider, then taller boxes: longer TMA
    runs, fewer halo rows)."""
    _, oh, ow = g.out_spatial
    out = []
    powers = [1 << e for e in range(block_m.bit_length())]
    for bh, bw in itertools.product(powers, powers):
        if block_m % (bh * bw) or bh > next_pow2(oh) or bw > next_pow2(ow) or max(bh, bw) > _MAX_BOX_DIM:
            continue
        if block_m // (bh * bw) <= _MAX_BOX_DIM:
            out.append((block_m // (bh * bw), bh, bw))
    return sorted(out, key=lambda b: (box_waste(g, b), -b[2], -b[1]))


def _strided(g: Geometry) -> bool:
    """Whether the kernel reads the strided view (module docstring)."""
    return g.stride[1] * g.stride[2] > 1


def _box_of(schedule: Schedule) -> tuple[int, int, int]:
    return (schedule["BOX_N"], schedule["BOX_H"], schedule["BOX_W"])


def _ws_maxnreg(schedule: Schedule) -> int | None:
    """A warp-specialised kernel runs its schedule's warps plus a warpgroup for the copy warp; at launch every
    thread holds ``maxnreg`` registers (the partitions trade them with setmaxnreg afterwards), so with 8 MMA warps
    the 12 must fit the register file: at most 168 each. None where the compiler's own limit fits."""
    if not dict(schedule.params).get("WS"):
        return None
    limit = _REGISTERS_PER_SM // ((schedule.num_warps + 4) * 32) // 8 * 8
    return limit if limit < 255 else None


def _swizzle(row_bytes: int) -> int:
    """The NVMMA swizzle width of a shared tile whose rows are ``row_bytes`` long (at most 128)."""
    return min(128, row_bytes)


class ImplicitGemmBoxTemplate(ConvTemplate):
    """Gluon implicit GEMM on 4-D TMA boxes of the unpadded input (see module docstring)."""

    def __init__(self) -> None:
        self.name = "implicit_gemm_box"

    def supports(self, problem: ConvProblem) -> Support:
        reason = common_support_problems(problem)
        if reason:
            return Support.no(reason)
        if problem.dtype not in ("float16", "bfloat16") and not problem.allow_tf32:
            return Support.no(
                f"dtype {problem.dtype} without TF32 (wgmma has no exact fp32; fp32 runs as TF32 or on its scaled "
                "fp16 copy, F16_MMA=2)"
            )
        if problem.spatial_dims > 2:
            return Support.no("3-D convolutions (a box covers images, rows and columns)")
        reason = tma_tap_problems(problem, strided=True)
        if reason:
            return Support.no(reason)
        if problem.in_channels % 8:  # fp32 too: F16_MMA schedules read 16-bit rows (the fp16 copy)
            return Support.no("a TMA row must be a multiple of 16 bytes (input channels, 16-bit)")
        g = Geometry.of(problem)
        if _strided(g):
            if any(size % s for size, s in zip(g.spatial[1:], g.stride[1:], strict=True)):
                return Support.no(
                    "a strided conv needs input rows and columns divisible by the stride (the TMA view "
                    "[N, H/SH, SH, W/SW, SW*C])"
                )
            if g.cin % 16:
                return Support.no(
                    "a strided conv needs C_in % 16 == 0 (a channel block must not reach the next parity's "
                    "channels in the view)"
                )
        if g.int64 or g.batch * max(g.spatial[1] * g.spatial[2], 1) * g.cin > INT32_LIMIT:
            return Support.no("tensors beyond 32-bit offsets")
        if not g.in_cl and problem.batch > 65535:
            return Support.no(
                "a contiguous input's channels-last copy launches one grid row per image (<= 65535)"
            )
        return Support.yes()

    def _schedule(
        self,
        problem: ConvProblem,
        bm: int,
        bn: int,
        bk: int,
        warps: int,
        stages: int,
        box: tuple[int, int, int],
        ws: bool = False,
        f16: int = 0,
    ) -> Schedule:
        g = Geometry.of(problem)
        bn, bk = fit_block(bn, g.cout), fit_block(bk, g.cin)
        while _strided(g) and g.cin % bk:  # strided: whole channel blocks (`supports`: C_in % 16 == 0)
            bk //= 2
        extra = {"F16_MMA": f16} if f16 else {}
        if ws:
            extra["WS"] = 1
        return Schedule.make(
            warps, stages, BOX_N=box[0], BOX_H=box[1], BOX_W=box[2], BLOCK_N=bn, BLOCK_K=bk, **extra
        )

    def schedules(self, problem: ConvProblem) -> list[Schedule]:
        """16-bit: the pipelined and warp-specialised tile configs. fp32: the same on the scaled fp16 copy
        (F16_MMA=2, where allowed) and the TF32 configs (fp32 tiles, A rounded in shared memory)."""
        g = Geometry.of(problem)
        out = [self.heuristic_schedule(problem)]
        spaces: list[tuple[tuple[tuple[int, int, int, int, int], ...], bool, int]] = []
        if problem.dtype != "float32" or f16_mma_allowed(problem):
            f16 = _f16_mode(problem)
            spaces += [(_CONFIGS, False, f16), (_WS_CONFIGS, True, f16)]
        if problem.dtype == "float32":
            spaces.append((_TF32_CONFIGS, False, 0))
        for configs, ws, f16 in spaces:
            for bm, bn, bk, warps, stages in configs:
                for box in box_shapes(g, bm)[:_BOXES_PER_CONFIG]:
                    out.append(self._schedule(problem, bm, bn, bk, warps, stages, box, ws, f16))
        return list(dict.fromkeys(out))

    def heuristic_schedule(self, problem: ConvProblem) -> Schedule:
        """128-pixel boxes by 128 channels, 4 stages (vgg's best, 2026-12-03); 64-pixel boxes when 128-pixel
        ones would leave most SMs idle or waste more than a quarter of their pixels."""
        g = Geometry.of(problem)
        bn = 128 if g.cout >= 128 else 64
        best = box_shapes(g, 128)[0]
        tiles = cdiv(g.m, 128) * cdiv(g.cout, bn)
        f16 = _f16_mode(problem)
        bk = 64 if f16 or problem.dtype != "float32" else 32  # fp32 without F16_MMA: TF32, 128-byte rows
        if tiles < NUM_SMS // 2 or box_waste(g, best) > 1.25:
            return self._schedule(problem, 64, bn, bk, 4, 4, box_shapes(g, 64)[0], f16=f16)
        return self._schedule(problem, 128, bn, bk, 8, 4, best, f16=f16)

    def heuristic_claims(self, problem: ConvProblem) -> bool:
        """Dense 16-bit 2-D convs with stride 1, no dilation, 3x3 taps or more, C_in >= 128, a channels-last input
        and a map of at least 28 x 28 run here rather than on the implicit GEMM when no table entry has them. Of
        the 24 such model-zoo convs the H200 timed with both heuristic schedules (2026-12-03 11:08-11:17 re-tune,
        docs/performance.md), the box schedule was 1.18x faster in geometric mean and never below 0.94x. Left out
        for their worst cases: dilated convs (1.11x, but 0.79x on deeplab's at batch 4) and contiguous inputs
        (1.14x, down to 0.57x); maps under 28 x 28 lost outright (0.75x)."""
        if problem.dtype not in ("float16", "bfloat16") or problem.spatial_dims != 2:
            return False
        g = Geometry.of(problem)
        return (
            g.stride[1:] == (1, 1)
            and g.dilation[1:] == (1, 1)
            and g.kernel[1] * g.kernel[2] >= 9
            and g.cin >= 128
            and g.in_cl
            and g.spatial[1] * g.spatial[2] >= 28 * 28
        )

    def transfers_to(self, schedule: Schedule, problem: ConvProblem) -> bool:
        """A neighbour's schedule runs here only with this map's best box of the same size and a full wave of
        programs: its box was fitted to another map, and a grid under one wave idles SMs. (u.vgg.3x3.512 at batch 4
        took a 64 x 64 map's 128 x 256 schedule: 56 programs, 48 us against the heuristic's 38 us, 2026-12-03.)"""
        g = Geometry.of(problem)
        if _strided(g):  # strided schedules run only where measured (their own table entry)
            return False
        box = _box_of(schedule)
        programs = box_count(g, box) * cdiv(g.cout, schedule["BLOCK_N"])
        return box == box_shapes(g, math.prod(box))[0] and programs >= NUM_SMS

    # -- weight and launches -------------------------------------------------------------------------------
    def _gemm_schedule(self, schedule: Schedule) -> Schedule:
        """The implicit GEMM schedule whose prepared weight this one reads (F16_MMA: scaled fp16 + trailer)."""
        return ImplicitGemmTemplate.tap_major_schedule(
            schedule["BLOCK_N"], schedule["BLOCK_K"], uses_f16_mma(schedule)
        )

    def prepare_weight(self, weight: torch.Tensor, problem: ConvProblem, schedule: Schedule) -> torch.Tensor:
        return _IMPLICIT_GEMM.prepare_weight(weight, problem, self._gemm_schedule(schedule))

    def scratch(self, problem: ConvProblem, schedule: Schedule) -> list[ScratchTensor]:
        if uses_f16_mma(schedule):  # the scaled fp16 copy (channels-last whatever the input's layout)
            return f16_scratch(problem, 2)
        return [] if Geometry.of(problem).in_cl else [input_cl(problem)]

    def launches(self, problem: ConvProblem, schedule: Schedule) -> list[KernelLaunch]:
        g = Geometry.of(problem)
        _, taps, cin_p, cout_p = _IMPLICIT_GEMM.prepared_shape(problem, self._gemm_schedule(schedule))
        _, h, w = g.spatial
        _, oh, ow = g.out_spatial
        dt = TRITON_PTR_DTYPE[problem.dtype]
        f16 = uses_f16_mma(schedule)
        tf32 = problem.dtype == "float32" and not f16  # fp32 tiles, TF32 wgmma (`supports`: TF32 allowed)
        mma_dt = "fp16" if f16 else dt  # what the kernel's TMA boxes and wgmma read
        ebytes = 4 if tf32 else 2
        args = (
            TensorArg("input_f16" if f16 else "input" if g.in_cl else "input_cl", mma_dt),
            TensorArg("weight", mma_dt),
            TensorArg("bias", dt),
            TensorArg("output", dt),
            TensorArg("amax", "fp32") if f16 else TensorArg("input", dt),  # unused without F16_MMA
            *(
                ScalarArg(nm, "i32", v)
                for nm, v in (("BATCH", g.batch), ("H", h), ("W", w), ("OH", oh), ("OW", ow))
            ),
        )
        box = _box_of(schedule)
        bn, bk = schedule["BLOCK_N"], schedule["BLOCK_K"]
        constexprs = (
            ("C_IN", g.cin),
            ("C_OUT", g.cout),
            ("CIN_P", cin_p),
            ("COUT_P", cout_p),
            ("KH", g.kernel[1]),
            ("KW", g.kernel[2]),
            ("PH", g.pad[1]),
            ("PW", g.pad[2]),
            ("DH", g.dilation[1]),
            ("DW", g.dilation[2]),
            ("SH", g.stride[1]),
            ("SW", g.stride[2]),
            ("OUT_CL", g.out_cl),
            ("HAS_BIAS", problem.has_bias),
            ("DOT_FP32", interpreting() and problem.dtype == "bfloat16"),
            ("F16_MMA", bool(f16)),
            ("W_NUMEL", taps * cin_p * cout_p),
            ("TF32", tf32),
            ("ROUND_TF32", tf32_rounding(problem) if tf32 else 0),
            ("BOX_N", box[0]),
            ("BOX_H", box[1]),
            ("BOX_W", box[2]),
            ("BLOCK_N", bn),
            ("BLOCK_K", bk),
            ("A_SWIZZLE", _swizzle(bk * ebytes)),
            ("B_SWIZZLE", _swizzle((bk if tf32 else bn) * ebytes)),  # the weight tile's rows: K (TF32) or N
            ("STAGES", schedule.num_stages),
            ("WARPS", schedule.num_warps),
            ("WS", dict(schedule.params).get("WS", 0)),
        )
        grid = (box_count(g, box), cdiv(g.cout, bn), 1)
        main = KernelLaunch(
            conv_box_kernel,
            args,
            constexprs,
            grid,
            schedule.num_warps,
            schedule.num_stages,
            portable_fn=conv_box_portable_kernel,
            fn_archs=GLUON_ARCHS,
            maxnreg=_ws_maxnreg(schedule),
        )
        if (
            f16
        ):  # the partial maxima, then the scaled fp16 copy (channels-last: the copy transposes if needed)
            copy = scale_launch(problem) if g.in_cl else copy_launch(problem, scale_f16=True)
            return [amax_launch(problem), copy, main]
        return [main] if g.in_cl else [copy_launch(problem), main]


def _f16_mode(problem: ConvProblem) -> int:
    """2 for fp32 where fp16 tensor cores are allowed (run on the scaled fp16 copy, F16_MMA=2), else 0 (16-bit,
    or fp32 as TF32)."""
    return 2 if f16_mma_allowed(problem) else 0


_IMPLICIT_GEMM = ImplicitGemmTemplate()
TEMPLATES = [ImplicitGemmBoxTemplate()]
