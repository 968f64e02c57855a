"""The box implicit GEMM in Gluon for sm_90: TMA box copies into a shared-memory ring feeding wgmma, pipelined or
warp-specialised (the package docstring has the kernel's contract)."""

from __future__ import annotations

from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (
    fence_async_shared,
    mbarrier,
    tma,
    warpgroup_mma,
    warpgroup_mma_wait,
)

from .._f16_mma import AMAX_PARTS, MAX_SHIFT, TOP_EXP, pow2
from .._tf32 import round_to_tf32
from ..epilogue_jit import apply_epilogue
from .portable_kernel import box_origin

# Scalar and elementwise helpers are the Triton kernels' own @triton.jit functions (`box_origin`, `round_to_tf32`,
# `pow2`): Gluon compiles a Triton function it calls with Gluon's semantics, and their code needs no layouts.

# A barrier of all the CTA's threads: Triton 3.7 calls it gl.barrier, 3.6 (the GPU machine's) gl.thread_barrier.
_cta_barrier = getattr(gl, "barrier", None) or gl.thread_barrier


# The archs whose tensor cores the Gluon kernel is written for (wgmma: Hopper).
GLUON_ARCHS = (90,)


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
        # Strided (package docstring): input row oh*SH + dh is view row oh + dh // SH, parity dh % SH; the column
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
def _mma_step(a_ring, b_ring, ready, acc, i, STAGES: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_K: gl.constexpr,
              TF32: gl.constexpr, ROUND_TF32: gl.constexpr, ROUND_LAYOUT: gl.constexpr):  # fmt: skip
    """K step i: wait for its ring slot, issue its asynchronous wgmma (the A box viewed as [BLOCK_M, BLOCK_K]) and
    keep one group in flight, so step i-1's wgmma has finished reading its slot when this returns.

    TF32: the weight tile is K-major (TF32 wgmma reads shared operands only K-major) and viewed transposed; with
    ROUND_TF32 the A tile is rounded to nearest TF32 in place (_tf32.py: the tensor core would truncate): every
    thread loads its share of the slot, rounds and stores it back, then a proxy fence and a barrier hand the slot
    to wgmma, which reads both operands from shared memory as in 16-bit. (Feeding wgmma the rounded tile from
    registers instead ran wrong on the H200: with one group in flight the compiler reused the
    fragment's registers before the wgmma that read them had finished.)"""
    slot = i % STAGES
    mbarrier.wait(ready.index(slot), (i // STAGES) & 1)
    a = a_ring.index(slot).reshape([BLOCK_M, BLOCK_K])
    if TF32:
        b = b_ring.index(slot).permute((1, 0))
        if ROUND_TF32:
            a.store(round_to_tf32(a.load(ROUND_LAYOUT), ROUND_TF32))
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
    return pow2(0 - shift_x - shift_w)


@gluon.jit
def conv_box_kernel(
    x_ptr, w_ptr, b_ptr, y_ptr, amax_ptr,
    BATCH, H, W, OH, OW,
    e1_ptr, e1_sn, e1_sc, e2_ptr, e2_sn, e2_sc, e3_ptr, e3_sn, e3_sc,
    C_IN: gl.constexpr, C_OUT: gl.constexpr, CIN_P: gl.constexpr, COUT_P: gl.constexpr,
    KH: gl.constexpr, KW: gl.constexpr, PH: gl.constexpr, PW: gl.constexpr, DH: gl.constexpr, DW: gl.constexpr,
    SH: gl.constexpr, SW: gl.constexpr,
    OUT_CL: gl.constexpr, HAS_BIAS: gl.constexpr, DOT_FP32: gl.constexpr, F16_MMA: gl.constexpr, W_NUMEL: gl.constexpr,
    TF32: gl.constexpr, ROUND_TF32: gl.constexpr,
    BOX_N: gl.constexpr, BOX_H: gl.constexpr, BOX_W: gl.constexpr,
    BLOCK_N: gl.constexpr, BLOCK_K: gl.constexpr, A_SWIZZLE: gl.constexpr, B_SWIZZLE: gl.constexpr,
    STAGES: gl.constexpr, WARPS: gl.constexpr, WS: gl.constexpr, PROGRAM: gl.constexpr, E_KINDS: gl.constexpr,
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
    else:  # the strided view [N, H / SH, SH, W / SW, SW * C_IN] (package docstring): one parity
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

    n0, oh0, ow0, co0 = box_origin(OH, OW, BOX_N, BOX_H, BOX_W, BLOCK_N)

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
    if len(PROGRAM) > 0:  # the chain in the store's layout, where its operands like the output load coalesced
        y = apply_epilogue(
            gl.convert_layout(acc, out_layout), offs, n, co, ok,
            e1_ptr, e1_sn, e1_sc, e2_ptr, e2_sn, e2_sc, e3_ptr, e3_sn, e3_sc, PROGRAM, E_KINDS,
        )  # fmt: skip
        out = y.to(y_ptr.dtype.element_ty)
    else:
        out = gl.convert_layout(acc.to(y_ptr.dtype.element_ty), out_layout)
    gl.store(y_ptr + offs, out, mask=ok)
