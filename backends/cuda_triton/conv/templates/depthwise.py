"""Direct depthwise convolution (groups == C_in, any channel multiplier), 1-D/2-D/3-D.

A depthwise conv does only ``k`` multiply-adds per output element: a GEMM formulation (one tiny GEMM per
channel) wastes the tensor cores and the bandwidth. These kernels compute a tile of outputs directly, each tap
a load along the tensor's contiguous dimension (vectorized along C for channels-last inputs) that hits L1 for
all but the first tap reading an element, fp32 accumulation, bias fused.

Every problem is viewed as 3-D: a 1-D conv is (1, 1, L), a 2-D conv (1, H, W); missing dims get kernel 1,
stride 1, dilation 1, padding 0. Output channel ``co`` reads input channel ``co // MULT`` (ATen's grouping with
C_out = MULT * C_in).

Measured on an H200 these kernels are bound by instructions, not by DRAM (fp32 runs as fast as fp16), so each
program first asks one scalar question (`_tile_is_interior`): is the tile full and does every tap of every
output read inside the input? Such interior programs (most of them, with tiles small next to the map) run a tap
loop with no bounds math: a load at a compile-time offset from its row's pointer, a convert, an FMA. The rest
(tiles touching the padding or the edge, partial channel blocks) run the masked loop.

Four kernels: the two direct ones, chosen by the input layout (the read-heavy side), and the band kernel (general
and 1-D), a schedule choice for contiguous half-precision inputs (the heuristic picks it for 1-D rows with 7+
taps):

``_depthwise_cl_kernel`` (channels-last input): a program computes a tile of ``BLOCK_H x BLOCK_W`` output
positions of one (n, od) slice times ``BLOCK_C`` output channels; loads are vectors along C.

    args (PTX order): x, w, b, y (pointers; b is null when HAS_BIAS is False), ID, IH, IW, OD, OH, OW (i32)
    constexprs: C_IN, MULT, KD, KH, KW, SD, SH, SW, PD, PH, PW, DD, DH, DW, OUT_CL, HAS_BIAS,
                BLOCK_H, BLOCK_W, BLOCK_C
    grid: (N * OD * cdiv(OH, BLOCK_H) * cdiv(OW, BLOCK_W), cdiv(C_out, BLOCK_C), 1)
    weight: prepared as fp32 (KD*KH*KW, C_out) contiguous (taps major, channels contiguous).

``_depthwise_nc_kernel`` (contiguous input): a program computes ``BLOCK_C`` consecutive output channels times
a ``BLOCK_H x BLOCK_W`` tile of their (n, co, od) planes (tile rows are (channel, row) pairs, so a 1-D conv
gets several rows per program too); loads are vectors along W. Schedules of one channel have no BLOCK_C key.

    args (PTX order): x, w, b, y, ID, IH, IW, OD, OH, OW (i32)
    constexprs: as above (BLOCK_C = 1 when the schedule has none)
    grid: (N * cdiv(C_out, BLOCK_C) * OD * cdiv(OH, BLOCK_H) * cdiv(OW, BLOCK_W), 1, 1), program ids ordered
          (n, channel block, od, row tile, column tile), the column tile fastest.
    weight: prepared as fp32 (C_out, KD*KH*KW) contiguous.

``_depthwise_band_kernel`` (contiguous fp16/bf16 input, stride 1 along W; schedules carry SEG, SEGS, IMG): the
direct kernels issue one narrow load per tap and output (a shifted row pointer is never provably aligned), so
they are bound by L1 load instructions. For one channel, a W row segment of SEG outputs is its input window
times a banded (Toeplitz) matrix, band[j, i] = w[t] where j - i + PW - HALO == t * DW: a program loads the
windows of IMG images x SEGS segments once (rows of SEG + TAIL elements, every element loaded once per (kd, kh)
filter row), builds the band from the filter row (masked gathers) and runs ``tl.dot`` with fp32 accumulation
(fp16/bf16 products are exact, as in the direct kernels' FMAs). One masked path, no interior split.

    args (PTX order): x, w, b, y, ID, IH, IW, OD, OH, OW (i32), as the other kernels
    constexprs: C_IN, MULT, KD, KH, KW, SD, SH, SW (= 1), PD, PH, PW, DD, DH, DW, OUT_CL, HAS_BIAS,
                SEG, SEGS, IMG (IMG divides N), HALO (PW rounded up to 8), TAIL (power of two >= 16 covering
                HALO - PW + (KW-1)*DW), DOT_FP32 (True only under TRITON_INTERPRET for bf16, whose interpreter
                tl.dot reads bf16 as integers; compiled kernels always have False)
    grid: ((N / IMG) * C_out * cdiv(OD * OH * cdiv(OW, SEG), SEGS), 1, 1), program ids ordered
          (image block, channel, row block), the row block fastest.
    weight: prepared as fp32 (C_out, KD*KH*KW) contiguous, as for ``_depthwise_nc_kernel``.

``_depthwise_band1d_kernel`` (band schedules on 1-D rows: ID = IH = OD = OH = 1, KD = KH = 1): the band kernel
without its runtime divisions (grid axis 0 is image block x channel, split by the constexpr C_out; axis 1 the
row block) and with VEC-wide window loads and stores (VEC = gcd(IW, OW, 8), constexpr): conformer.dw15's
heuristic schedule (IMG 8, SEG 32, SEGS 16, 4 warps) compiles for sm_90 to 552 SASS instructions (1080 on the
general kernel; 196 integer/compare ones instead of 541), 12 8-byte window loads per thread instead of 48
2-byte ones. Same args; constexprs add VEC after TAIL.

    grid: ((N / IMG) * C_out, cdiv(cdiv(OW, SEG), SEGS), 1), the channel fastest along axis 0.

Strides are not arguments: inputs are dense channels-last or dense contiguous (``supports`` checks), outputs
follow the layout rule (``OUT_CL`` says which), so every stride is a product of constexpr channel counts and
runtime sizes, which lets the compiler prove vector alignment from the channel count alone. In-sample offsets
are 32-bit (``supports`` refuses samples of 2^31 elements or more); the batch offset is 64-bit.
"""

from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

from ...kernel.launch import (
    TRITON_PTR_DTYPE,
    KernelLaunch,
    ScalarArg,
    Schedule,
    Support,
    TensorArg,
    cdiv,
    prod,
)
from ..problem import ConvProblem
from ._geometry import NUM_SMS
from .base import ConvTemplate

INT32_MAX = 2**31 - 1


@triton.jit
def _tile_is_interior(
    od,
    ht,
    wt,
    c0,
    ID,
    IH,
    IW,
    OH,
    OW,
    C_OUT: tl.constexpr,
    KD: tl.constexpr,
    KH: tl.constexpr,
    KW: tl.constexpr,
    SD: tl.constexpr,
    SH: tl.constexpr,
    SW: tl.constexpr,
    PD: tl.constexpr,
    PH: tl.constexpr,
    PW: tl.constexpr,
    DD: tl.constexpr,
    DH: tl.constexpr,
    DW: tl.constexpr,
    BLOCK_H: tl.constexpr,
    BLOCK_W: tl.constexpr,
    BLOCK_C: tl.constexpr,
):
    """Whether the tile is full (every output row, column and channel exists) and every tap of every output
    reads inside the input, so the tile can skip all bounds checks. A scalar per program."""
    oh0 = ht * BLOCK_H
    ow0 = wt * BLOCK_W
    ok = (od * SD - PD >= 0) & (od * SD - PD + (KD - 1) * DD < ID)
    ok = ok & (oh0 + BLOCK_H <= OH) & (oh0 * SH - PH >= 0)
    ok = ok & ((oh0 + BLOCK_H - 1) * SH - PH + (KH - 1) * DH < IH)
    ok = ok & (ow0 + BLOCK_W <= OW) & (ow0 * SW - PW >= 0)
    ok = ok & ((ow0 + BLOCK_W - 1) * SW - PW + (KW - 1) * DW < IW)
    if C_OUT % BLOCK_C != 0:
        ok = ok & (c0 + BLOCK_C <= C_OUT)
    return ok


@triton.jit
def _depthwise_cl_kernel(
    x_ptr,
    w_ptr,
    b_ptr,
    y_ptr,
    ID,
    IH,
    IW,
    OD,
    OH,
    OW,
    C_IN: tl.constexpr,
    MULT: tl.constexpr,
    KD: tl.constexpr,
    KH: tl.constexpr,
    KW: tl.constexpr,
    SD: tl.constexpr,
    SH: tl.constexpr,
    SW: tl.constexpr,
    PD: tl.constexpr,
    PH: tl.constexpr,
    PW: tl.constexpr,
    DD: tl.constexpr,
    DH: tl.constexpr,
    DW: tl.constexpr,
    OUT_CL: tl.constexpr,
    HAS_BIAS: tl.constexpr,
    BLOCK_H: tl.constexpr,
    BLOCK_W: tl.constexpr,
    BLOCK_C: tl.constexpr,
):
    C_OUT: tl.constexpr = C_IN * MULT
    EVEN_C: tl.constexpr = C_OUT % BLOCK_C == 0
    pid = tl.program_id(0)
    pid_c = tl.program_id(1)
    n_wt = tl.cdiv(OW, BLOCK_W)
    n_ht = tl.cdiv(OH, BLOCK_H)
    wt = pid % n_wt
    rest = pid // n_wt
    ht = rest % n_ht
    rest = rest // n_ht
    od = rest % OD
    n = rest // OD

    offs_p = tl.arange(0, BLOCK_H * BLOCK_W)
    oh = ht * BLOCK_H + offs_p // BLOCK_W
    ow = wt * BLOCK_W + offs_p % BLOCK_W
    p_ok = (oh < OH) & (ow < OW)
    co = pid_c * BLOCK_C + tl.arange(0, BLOCK_C)
    c_ok = co < C_OUT
    if MULT == 1:
        ci = co
    else:
        ci = co // MULT

    # Pointers of tap (0, 0, 0); every other tap adds a scalar (the kw part a compile-time constant, which
    # the compiler folds into the load's address), so the per-element work of a tap is a load and an FMA.
    id0 = od * SD - PD
    ih0 = oh * SH - PH
    iw0 = ow * SW - PW
    x_base = x_ptr + n.to(tl.int64) * (ID * IH * IW * C_IN)
    x_tile = x_base + (((id0 * IH + ih0) * IW + iw0) * C_IN)[:, None] + ci[None, :]
    w_tile = w_ptr + co  # tap t's weights are at w_tile + t * C_OUT
    acc = tl.zeros((BLOCK_H * BLOCK_W, BLOCK_C), dtype=tl.float32)
    # The tap loops are unrolled (static_range), so each weight vector is loaded once per program whichever
    # path runs, and the compiler is free to issue those loads early.
    interior = _tile_is_interior(
        od, ht, wt, pid_c * BLOCK_C, ID, IH, IW, OH, OW,
        C_OUT, KD, KH, KW, SD, SH, SW, PD, PH, PW, DD, DH, DW, BLOCK_H, BLOCK_W, BLOCK_C,
    )  # fmt: skip
    if interior:
        # Most tiles: no bounds math at all, a tap is a load at a constant offset from its row, a convert and
        # an FMA per element (the kernels are instruction-bound, not memory-bound).
        for kd in tl.static_range(KD):
            for kh in tl.static_range(KH):
                x_row = x_tile + (kd * DD * IH + kh * DH) * IW * C_IN
                for kw in tl.static_range(KW):
                    xv = tl.load(x_row + kw * DW * C_IN)
                    wv = tl.load(w_tile + ((kd * KH + kh) * KW + kw) * C_OUT)
                    acc += xv.to(tl.float32) * wv[None, :]
    else:
        # Tiles touching the padding, the tensor's edge or a partial channel block: mask every tap.
        for kd in tl.static_range(KD):
            idd = id0 + kd * DD
            d_ok = (idd >= 0) & (idd < ID)
            for kh in tl.static_range(KH):
                ih = ih0 + kh * DH
                h_ok = p_ok & d_ok & (ih.to(tl.uint32) < IH)
                x_row = x_tile + (kd * DD * IH + kh * DH) * IW * C_IN
                for kw in tl.static_range(KW):
                    iw = iw0 + kw * DW
                    ok = h_ok & (iw.to(tl.uint32) < IW)  # one unsigned compare checks 0 <= iw < IW
                    w_tap = w_tile + ((kd * KH + kh) * KW + kw) * C_OUT
                    if EVEN_C:
                        xv = tl.load(x_row + kw * DW * C_IN, mask=ok[:, None], other=0.0)
                        wv = tl.load(w_tap)
                    else:
                        xv = tl.load(x_row + kw * DW * C_IN, mask=ok[:, None] & c_ok[None, :], other=0.0)
                        wv = tl.load(w_tap, mask=c_ok, other=0.0)
                    acc += xv.to(tl.float32) * wv[None, :]
    if HAS_BIAS:
        acc += tl.load(b_ptr + co, mask=c_ok, other=0.0).to(tl.float32)[None, :]

    out_pos = (od * OH + oh) * OW + ow
    y_base = y_ptr + n.to(tl.int64) * (OD * OH * OW * C_OUT)
    if OUT_CL:
        y_off = out_pos[:, None] * C_OUT + co[None, :]
    else:
        y_off = co[None, :] * (OD * OH * OW) + out_pos[:, None]
    tl.store(y_base + y_off, acc.to(y_ptr.dtype.element_ty), mask=p_ok[:, None] & c_ok[None, :])


@triton.jit
def _depthwise_nc_kernel(
    x_ptr,
    w_ptr,
    b_ptr,
    y_ptr,
    ID,
    IH,
    IW,
    OD,
    OH,
    OW,
    C_IN: tl.constexpr,
    MULT: tl.constexpr,
    KD: tl.constexpr,
    KH: tl.constexpr,
    KW: tl.constexpr,
    SD: tl.constexpr,
    SH: tl.constexpr,
    SW: tl.constexpr,
    PD: tl.constexpr,
    PH: tl.constexpr,
    PW: tl.constexpr,
    DD: tl.constexpr,
    DH: tl.constexpr,
    DW: tl.constexpr,
    OUT_CL: tl.constexpr,
    HAS_BIAS: tl.constexpr,
    BLOCK_H: tl.constexpr,
    BLOCK_W: tl.constexpr,
    BLOCK_C: tl.constexpr,
):
    C_OUT: tl.constexpr = C_IN * MULT
    TAPS: tl.constexpr = KD * KH * KW
    N_CT: tl.constexpr = (C_OUT + BLOCK_C - 1) // BLOCK_C
    pid = tl.program_id(0)
    n_wt = tl.cdiv(OW, BLOCK_W)
    n_ht = tl.cdiv(OH, BLOCK_H)
    wt = pid % n_wt
    rest = pid // n_wt
    ht = rest % n_ht
    rest = rest // n_ht
    od = rest % OD
    rest = rest // OD
    c0 = (rest % N_CT) * BLOCK_C
    n = rest // N_CT

    # Tile rows are (channel, output row) pairs, BLOCK_C channels of BLOCK_H rows each: a 1-D conv (one row
    # per plane) still gets several rows per program, so each program has several independent loads in flight.
    offs_r = tl.arange(0, BLOCK_C * BLOCK_H)
    oh = (ht * BLOCK_H + offs_r % BLOCK_H)[:, None]
    ow = (wt * BLOCK_W + tl.arange(0, BLOCK_W))[None, :]
    p_ok = (oh < OH) & (ow < OW)
    if BLOCK_C == 1:
        co = c0  # a scalar: one weight load per tap serves the whole tile
    else:
        co = (c0 + offs_r // BLOCK_H)[:, None]
        if C_OUT % BLOCK_C != 0:
            p_ok = p_ok & (co < C_OUT)
    if MULT == 1:
        ci = co
    else:
        ci = co // MULT

    id0 = od * SD - PD
    ih0 = oh * SH - PH
    iw0 = ow * SW - PW
    x_base = x_ptr + n.to(tl.int64) * (C_IN * ID * IH * IW)
    x_tile = x_base + (ci * (ID * IH * IW) + (id0 * IH + ih0) * IW + iw0)
    w_rows = w_ptr + co * TAPS
    acc = tl.zeros((BLOCK_C * BLOCK_H, BLOCK_W), dtype=tl.float32)
    # The tap loops are unrolled (static_range), so each weight is loaded once per program whichever path
    # runs, and the compiler is free to issue those loads early.
    interior = _tile_is_interior(
        od, ht, wt, c0, ID, IH, IW, OH, OW,
        C_OUT, KD, KH, KW, SD, SH, SW, PD, PH, PW, DD, DH, DW, BLOCK_H, BLOCK_W, BLOCK_C,
    )  # fmt: skip
    if interior:
        # Most tiles: no bounds math at all, a tap is a load at a constant offset from its row, a convert and
        # an FMA per element (the kernels are instruction-bound, not memory-bound).
        for kd in tl.static_range(KD):
            for kh in tl.static_range(KH):
                x_row = x_tile + (kd * DD * IH + kh * DH) * IW
                for kw in tl.static_range(KW):
                    xv = tl.load(x_row + kw * DW)
                    wv = tl.load(w_rows + (kd * KH + kh) * KW + kw)
                    acc += xv.to(tl.float32) * wv
    else:
        # Tiles touching the padding, the tensor's edge or a partial channel block: mask every tap.
        for kd in tl.static_range(KD):
            idd = id0 + kd * DD
            d_ok = (idd >= 0) & (idd < ID)
            for kh in tl.static_range(KH):
                ih = ih0 + kh * DH
                h_ok = d_ok & (ih.to(tl.uint32) < IH)
                x_row = x_tile + (kd * DD * IH + kh * DH) * IW
                for kw in tl.static_range(KW):
                    iw = iw0 + kw * DW
                    ok = p_ok & h_ok & (iw.to(tl.uint32) < IW)  # one unsigned compare checks 0 <= iw < IW
                    xv = tl.load(x_row + kw * DW, mask=ok, other=0.0)
                    wv = tl.load(w_rows + (kd * KH + kh) * KW + kw, mask=co < C_OUT, other=0.0)
                    acc += xv.to(tl.float32) * wv
    if HAS_BIAS:
        acc += tl.load(b_ptr + co, mask=co < C_OUT, other=0.0).to(tl.float32)

    out_pos = (od * OH + oh) * OW + ow
    if OUT_CL:
        y_off = n.to(tl.int64) * (OD * OH * OW * C_OUT) + out_pos * C_OUT + co
    else:
        y_off = (n.to(tl.int64) * C_OUT + co) * (OD * OH * OW) + out_pos
    tl.store(y_ptr + y_off, acc.to(y_ptr.dtype.element_ty), mask=p_ok)


@triton.jit
def _band_taps(
    w_row, j0, J: tl.constexpr, SEG: tl.constexpr, OFF: tl.constexpr, KW: tl.constexpr, DW: tl.constexpr
):
    """Rows ``j0 .. j0+J`` of one filter row's banded (Toeplitz) matrix, in the input's dtype: entry [j, i] is
    the weight of tap t when window element j is what output i reads at tap t (``j - i + OFF == t * DW``),
    else 0. A gather from the filter row (a few L1 lines), once per program and filter row."""
    d = (j0 + tl.arange(0, J))[:, None] - tl.arange(0, SEG)[None, :] + OFF
    ok = (d >= 0) & (d % DW == 0) & (d < KW * DW)
    return tl.load(w_row + d // DW, mask=ok, other=0.0)


@triton.jit
def _band_dot(xm, xt, w_row, acc, SEG: tl.constexpr, TAIL: tl.constexpr, OFF: tl.constexpr, KW: tl.constexpr,
              DW: tl.constexpr, DOT_FP32: tl.constexpr):  # fmt: skip
    """acc (None: zero) + one filter row applied to the rows' windows: main part xm [R, SEG] and tail xt [R, TAIL]
    times the row's band matrix (`_band_taps`). fp16/bf16 products are exact in the fp32 accumulator, as in the direct
    kernels' FMAs."""
    band_m = _band_taps(w_row, 0, SEG, SEG, OFF, KW, DW).to(xm.dtype)
    band_t = _band_taps(w_row, SEG, TAIL, SEG, OFF, KW, DW).to(xm.dtype)
    if DOT_FP32:  # Triton's interpreter only: its tl.dot reads bf16 operands as raw integers
        acc = tl.dot(xm.to(tl.float32), band_m.to(tl.float32), acc, input_precision="ieee")
        acc = tl.dot(xt.to(tl.float32), band_t.to(tl.float32), acc, input_precision="ieee")
    else:
        acc = tl.dot(xm, band_m, acc)
        acc = tl.dot(xt, band_t, acc)
    return acc


@triton.jit
def _depthwise_band_kernel(
    x_ptr,
    w_ptr,
    b_ptr,
    y_ptr,
    ID,
    IH,
    IW,
    OD,
    OH,
    OW,
    C_IN: tl.constexpr,
    MULT: tl.constexpr,
    KD: tl.constexpr,
    KH: tl.constexpr,
    KW: tl.constexpr,
    SD: tl.constexpr,
    SH: tl.constexpr,
    SW: tl.constexpr,
    PD: tl.constexpr,
    PH: tl.constexpr,
    PW: tl.constexpr,
    DD: tl.constexpr,
    DH: tl.constexpr,
    DW: tl.constexpr,
    OUT_CL: tl.constexpr,
    HAS_BIAS: tl.constexpr,
    SEG: tl.constexpr,
    SEGS: tl.constexpr,
    IMG: tl.constexpr,
    HALO: tl.constexpr,
    TAIL: tl.constexpr,
    DOT_FP32: tl.constexpr,
):
    tl.static_assert(SW == 1, "the band kernel slides along W with stride 1")
    C_OUT: tl.constexpr = C_IN * MULT
    TAPS: tl.constexpr = KD * KH * KW
    pid = tl.program_id(0)
    n_seg = tl.cdiv(OW, SEG)
    rows = OD * OH * n_seg  # segments per (image, channel) plane
    n_rb = tl.cdiv(rows, SEGS)
    rb = pid % n_rb
    rest = pid // n_rb
    co = rest % C_OUT
    n0 = (rest // C_OUT) * IMG
    ci = co // MULT

    # Tile rows are (image, segment) pairs: IMG images times SEGS segments of SEG outputs of one channel, all
    # convolved with the same filter, so one band matrix serves every row.
    r = tl.arange(0, IMG * SEGS)
    g = rb * SEGS + r % SEGS
    row_ok = g < rows
    ow0 = (g % n_seg) * SEG
    oh = (g // n_seg) % OH
    od = g // n_seg // OH
    plane = (n0 + r // SEGS).to(tl.int64) * C_IN + ci
    x_plane = x_ptr + plane * (ID * IH * IW)
    # Window element j of a row is input column ow0 - HALO + j: the row's SEG outputs read window elements
    # 0 .. SEG + TAIL - 1, loaded once as a SEG-wide main part and a TAIL-wide tail (power-of-two dot shapes).
    jm = tl.arange(0, SEG)[None, :]
    jt = tl.arange(0, TAIL)[None, :]
    iw_m = (ow0 - HALO)[:, None] + jm
    iw_t = (ow0 - HALO + SEG)[:, None] + jt
    acc = tl.zeros((IMG * SEGS, SEG), dtype=tl.float32)
    for kd in tl.static_range(KD):
        idd = od * SD - PD + kd * DD
        for kh in tl.static_range(KH):
            ih = oh * SH - PH + kh * DH
            ok = row_ok & (idd >= 0) & (idd < ID) & (ih.to(tl.uint32) < IH)
            x_row = (x_plane + (idd * IH + ih) * IW)[:, None]
            xm = tl.load(x_row + iw_m, mask=ok[:, None] & (iw_m.to(tl.uint32) < IW), other=0.0)
            xt = tl.load(x_row + iw_t, mask=ok[:, None] & (iw_t.to(tl.uint32) < IW), other=0.0)
            w_row = w_ptr + co * TAPS + (kd * KH + kh) * KW
            acc = _band_dot(xm, xt, w_row, acc, SEG, TAIL, PW - HALO, KW, DW, DOT_FP32)
    if HAS_BIAS:
        acc += tl.load(b_ptr + co).to(tl.float32)

    ow = iw_m + HALO  # output columns of the tile
    out_pos = ((od * OH + oh) * OW)[:, None] + ow
    n = (n0 + r // SEGS).to(tl.int64)[:, None]
    if OUT_CL:
        y_off = n * (OD * OH * OW * C_OUT) + out_pos * C_OUT + co
    else:
        y_off = (n * C_OUT + co) * (OD * OH * OW) + out_pos
    tl.store(y_ptr + y_off, acc.to(y_ptr.dtype.element_ty), mask=row_ok[:, None] & (ow < OW))


@triton.jit
def _depthwise_band1d_kernel(
    x_ptr,
    w_ptr,
    b_ptr,
    y_ptr,
    ID,
    IH,
    IW,
    OD,
    OH,
    OW,
    C_IN: tl.constexpr,
    MULT: tl.constexpr,
    KD: tl.constexpr,
    KH: tl.constexpr,
    KW: tl.constexpr,
    SD: tl.constexpr,
    SH: tl.constexpr,
    SW: tl.constexpr,
    PD: tl.constexpr,
    PH: tl.constexpr,
    PW: tl.constexpr,
    DD: tl.constexpr,
    DH: tl.constexpr,
    DW: tl.constexpr,
    OUT_CL: tl.constexpr,
    HAS_BIAS: tl.constexpr,
    SEG: tl.constexpr,
    SEGS: tl.constexpr,
    IMG: tl.constexpr,
    HALO: tl.constexpr,
    TAIL: tl.constexpr,
    VEC: tl.constexpr,
    DOT_FP32: tl.constexpr,
):
    """`_depthwise_band_kernel` for 1-D rows (ID = IH = OD = OH = 1, one filter row): a 2-D grid (image block x
    channel, row block) and power-of-two tile shapes leave no runtime division; VEC (a power of two dividing IW
    and OW) lets the window loads and the stores be VEC-wide vectors."""
    tl.static_assert((SW == 1) & (KD == 1) & (KH == 1), "1-D rows, stride 1")
    C_OUT: tl.constexpr = C_IN * MULT
    pid = tl.program_id(0)
    co = pid % C_OUT  # constexpr divisor: a multiply and a shift
    n0 = (pid // C_OUT) * IMG
    ci = co // MULT
    r = tl.arange(0, IMG * SEGS)
    ow0 = (tl.program_id(1) * SEGS + r % SEGS) * SEG  # first output column of each row segment
    n = (n0 + r // SEGS).to(tl.int64)
    # Row starts are multiples of VEC (IW is), window starts of 8 (SEG and HALO are); the bound IW_V equals IW,
    # written so the compiler sees it divisible by VEC and keeps each mask constant over a vector.
    x_rows = tl.multiple_of((n * C_IN + ci) * (IW // VEC * VEC), VEC)
    IW_V = IW // VEC * VEC
    iw_m = (ow0 - HALO)[:, None] + tl.arange(0, SEG)[None, :]
    iw_t = (ow0 - HALO + SEG)[:, None] + tl.arange(0, TAIL)[None, :]
    xm = tl.load(x_ptr + x_rows[:, None] + iw_m, mask=(iw_m >= 0) & (iw_m < IW_V), other=0.0)
    xt = tl.load(x_ptr + x_rows[:, None] + iw_t, mask=(iw_t >= 0) & (iw_t < IW_V), other=0.0)
    acc = _band_dot(xm, xt, w_ptr + co * KW, None, SEG, TAIL, PW - HALO, KW, DW, DOT_FP32)
    if HAS_BIAS:
        acc += tl.load(b_ptr + co).to(tl.float32)

    OW_V = OW // VEC * VEC  # = OW, divisible by VEC as far as the compiler can see
    ow = ow0[:, None] + tl.arange(0, SEG)[None, :]
    if OUT_CL:
        y_off = (n[:, None] * OW_V + ow) * C_OUT + co
    else:
        y_off = tl.multiple_of((n * C_OUT + co) * OW_V, VEC)[:, None] + ow
    tl.store(y_ptr + y_off, acc.to(y_ptr.dtype.element_ty), mask=ow < OW_V)


# ---- geometry helpers ---------------------------------------------------------------------------------------
def _pad3(values: tuple[int, ...], fill: int) -> tuple[int, int, int]:
    """A per-dim tuple of 1-3 entries as 3 entries, missing leading dims filled (the last dim stays last)."""
    return (fill,) * (3 - len(values)) + tuple(values)  # type: ignore[return-value]


def _dense_strides(sizes: tuple[int, ...], channels_last: bool) -> tuple[int, ...]:
    """Dense strides of a batched (N, C, *spatial) tensor in either layout."""
    rank = len(sizes)
    if channels_last:
        order = [1, *range(rank - 1, 1, -1), 0]  # fastest first
    else:
        order = list(range(rank - 1, -1, -1))
    strides = [0] * rank
    running = 1
    for d in order:
        strides[d] = running
        running *= sizes[d]
    return tuple(strides)


def dense_layout(sizes: tuple[int, ...], strides: tuple[int, ...]) -> str | None:
    """'channels_last' or 'contiguous' when the tensor is dense in that layout (size-1 dims' strides ignored)."""
    for name, cl in (("contiguous", False), ("channels_last", True)):
        want = _dense_strides(sizes, cl)
        if all(s == w or n == 1 for s, w, n in zip(strides, want, sizes, strict=True)):
            return name
    return None


def _pow2_at_least(x: int) -> int:
    return 1 << max(0, (x - 1).bit_length())


# Fewest filter taps along W for which the heuristic picks the band kernel (see `heuristic_schedule`).
BAND_MIN_TAPS = 7

# Relative cost of an edge program's element (masked taps) to an interior one's, for the heuristic: the masked
# loop spends roughly half again as many instructions per tap.
EDGE_COST = 1.5


def _block_c(schedule: Schedule) -> int:
    """Channels per program. Contiguous-input schedules of one channel carry no BLOCK_C key (the original
    space, which shipped tuning tables name)."""
    return dict(schedule.params).get("BLOCK_C", 1)


def _is_band(schedule: Schedule) -> bool:
    """Whether the schedule runs `_depthwise_band_kernel` (its schedules carry SEG, SEGS and IMG)."""
    return "SEG" in dict(schedule.params)


def _band_is_1d(problem: ConvProblem) -> bool:
    """Whether the band kernel's problem is 1-D rows (one input and output row per plane, one filter row), which
    `_depthwise_band1d_kernel` serves."""
    in_d, in_h, _ = _pad3(problem.in_spatial, 1)
    out_d, out_h, _ = _pad3(problem.out_spatial, 1)
    kd, kh, _ = _pad3(problem.kernel, 1)
    return in_d == in_h == out_d == out_h == kd == kh == 1


def band_geometry(problem: ConvProblem) -> tuple[int, int] | None:
    """(HALO, TAIL) of the band kernel for a problem it serves, else None: contiguous fp16/bf16 input (fp32
    would need a TF32 dot), stride 1 along W. HALO (window columns left of a segment's first output) is the
    left padding rounded up to 8, so window rows start 16-byte aligned when the row length allows; TAIL covers
    the columns the last outputs read beyond SEG, a power of two of at least 16 (the dot's minimum K)."""
    if problem.dtype not in ("float16", "bfloat16") or dense_layout(
        problem.input_size, problem.input_stride
    ) != ("contiguous"):
        return None
    p = problem.params
    if _pad3(p.stride, 1)[2] != 1:
        return None
    pw, dw, kw = _pad3(p.padding_before, 0)[2], _pad3(p.dilation, 1)[2], problem.kernel[-1]
    halo = cdiv(pw, 8) * 8
    tail = max(16, _pow2_at_least(halo - pw + (kw - 1) * dw))
    return (halo, tail) if tail <= 128 else None


def _interior_share(out: int, inp: int, block: int, k: int, s: int, p: int, d: int) -> float:
    """Share of the ``block``-wide tiles along one dim that are full and read only inside the input (the
    kernels' `_tile_is_interior`, per dim)."""
    tiles = cdiv(out, block)
    inner = sum(
        1
        for t in range(tiles)
        if (t + 1) * block <= out
        and t * block * s - p >= 0
        and ((t + 1) * block - 1) * s - p + (k - 1) * d < inp
    )
    return inner / tiles


def interior_fraction(problem: ConvProblem, schedule: Schedule) -> float:
    """Share of a launch's programs that take the unmasked interior path (none for the band kernel, whose single
    path masks every load)."""
    if _is_band(schedule):
        return 0.0
    p = problem.params
    ins, outs = _pad3(problem.in_spatial, 1), _pad3(problem.out_spatial, 1)
    ks, ss = _pad3(problem.kernel, 1), _pad3(p.stride, 1)
    ps, ds = _pad3(p.padding_before, 0), _pad3(p.dilation, 1)
    blocks = (1, schedule["BLOCK_H"], schedule["BLOCK_W"])
    share = 1.0
    for dim in range(3):
        share *= _interior_share(outs[dim], ins[dim], blocks[dim], ks[dim], ss[dim], ps[dim], ds[dim])
    bc = _block_c(schedule)
    return share * (problem.out_channels // bc) / cdiv(problem.out_channels, bc)


class DepthwiseTemplate(ConvTemplate):
    """Direct depthwise conv: one kernel per input layout, tiles of outputs per program."""

    def __init__(self) -> None:
        self.name = "depthwise"

    # -- support ----------------------------------------------------------------------------------------------
    def supports(self, problem: ConvProblem) -> Support:
        if problem.transposed:
            return Support.no("transposed convolutions are not depthwise (use the transposed template)")
        if not problem.is_depthwise:
            return Support.no(f"not depthwise (groups={problem.groups}, C_in={problem.in_channels})")
        if problem.spatial_dims not in (1, 2, 3):
            return Support.no(f"{problem.spatial_dims}-D convolutions are not supported")
        if problem.dtype not in ("float16", "bfloat16", "float32"):
            return Support.no(f"dtype {problem.dtype} is not supported (fp16/bf16/fp32 only)")
        if dense_layout(problem.input_size, problem.input_stride) is None:
            return Support.no("the input is neither dense channels-last nor dense contiguous")
        if dense_layout(problem.output_size, problem.output_stride) is None:
            return Support.no("the output layout is neither dense channels-last nor dense contiguous")
        if prod(problem.input_size[1:]) > INT32_MAX or prod(problem.output_size[1:]) > INT32_MAX:
            return Support.no("a sample has 2^31 elements or more (32-bit in-sample offsets)")
        out_d, out_h, out_w = _pad3(problem.out_spatial, 1)
        if problem.batch * problem.out_channels * out_d * out_h * cdiv(out_w, 16) > INT32_MAX:
            return Support.no("the launch grid would exceed 2^31 programs")
        return Support.yes()

    # -- schedules --------------------------------------------------------------------------------------------
    @staticmethod
    def _channels_last(problem: ConvProblem) -> bool:
        return dense_layout(problem.input_size, problem.input_stride) == "channels_last"

    # (BLOCK_H, BLOCK_W, BLOCK_C, num_warps) for channels-last inputs. The later rows are small position tiles
    # (most programs interior for 5x5/7x7 filters on 14..56-wide maps) and fewer warps (more positions per
    # thread share one weight vector load).
    CL_SPACE = (
        (4, 4, 64, 4),
        (2, 8, 64, 4),
        (4, 8, 64, 4),
        (2, 16, 64, 4),
        (4, 8, 128, 8),
        (4, 8, 32, 4),
        (8, 8, 32, 4),
        (2, 16, 32, 4),
        (4, 16, 16, 4),
        (1, 16, 32, 4),
        (1, 32, 16, 4),
        (2, 2, 64, 1),
        (1, 4, 64, 1),
        (2, 4, 32, 1),
        (2, 4, 64, 2),
        (4, 4, 16, 1),
        (4, 4, 32, 2),
        (2, 8, 32, 2),
        (4, 8, 16, 1),
        (4, 8, 32, 2),
        (8, 8, 16, 2),
        (1, 8, 32, 1),
        (1, 8, 64, 2),
        (1, 16, 16, 1),
    )
    # (BLOCK_H, BLOCK_W, num_warps) for contiguous inputs, one channel per program (BLOCK_C absent, i.e. 1).
    NC_SPACE = (
        (1, 16, 1),
        (4, 16, 1),
        (8, 32, 2),
        (16, 32, 4),
        (4, 64, 2),
        (8, 64, 4),
        (1, 128, 1),
        (1, 256, 2),
        (1, 512, 4),
        (1, 1024, 8),
        (1, 32, 1),
        (1, 64, 1),
        (2, 32, 1),
    )
    # (BLOCK_H, BLOCK_W, BLOCK_C, num_warps) for contiguous inputs, BLOCK_C channels per program: short column
    # tiles keep most programs interior on long 1-D rows, several channels keep each program busy.
    NC_MULTI_SPACE = (
        (1, 32, 4, 1),
        (1, 32, 8, 2),
        (1, 64, 2, 1),
        (1, 64, 4, 1),
        (1, 64, 8, 1),
        (1, 64, 8, 2),
        (1, 128, 2, 1),
        (1, 128, 4, 2),
        (2, 16, 4, 1),
        (2, 32, 2, 1),
        (4, 8, 4, 1),
        (4, 16, 2, 1),
        (8, 8, 4, 2),
    )
    # (SEG, SEGS, IMG, num_warps) of the band kernel (contiguous fp16/bf16 input, W stride 1): a program is
    # IMG images times SEGS row segments of SEG outputs of one channel, i.e. one (IMG * SEGS, SEG + TAIL) @
    # (SEG + TAIL, SEG) tensor-core product. Big tiles share the band (built per program) across more rows.
    # The first rows held the H200 winners of the 07:03 sweep (1-D rows, N=8: IMG 8, SEG 32, SEGS 16, 4 warps;
    # N=1: SEG 16 or long rows SEG 32, SEGS 64); 64-wide segments for 1-MB rows stayed only with 4+ warps (the
    # others compiled to 670-810 SASS instructions and never won); the rest are bigger dots (M 128-256) and
    # 8 warps, so the tuner can try fewer, fuller programs.
    BAND_SPACE = (
        (16, 16, 1, 1),
        (32, 16, 1, 1),
        (32, 16, 2, 2),
        (32, 16, 4, 4),
        (32, 16, 8, 4),
        (32, 32, 1, 2),
        (32, 64, 1, 4),
        (64, 8, 8, 4),
        (64, 32, 1, 4),
        (16, 16, 2, 1),
        (16, 16, 4, 2),
        (16, 16, 8, 4),
        (16, 32, 4, 4),
        (16, 32, 8, 8),
        (16, 64, 1, 2),
        (32, 16, 4, 2),
        (32, 16, 8, 8),
        (32, 32, 4, 8),
        (64, 8, 8, 8),
    )

    def _band_schedules(self, problem: ConvProblem) -> list[Schedule]:
        if band_geometry(problem) is None:
            return []
        out_d, out_h, out_w = _pad3(problem.out_spatial, 1)
        seg_cap = max(16, _pow2_at_least(out_w))
        return [
            Schedule.make(warps, 1, SEG=seg, SEGS=segs, IMG=img)
            for seg, segs, img, warps in self.BAND_SPACE
            if problem.batch % img == 0
            and seg <= seg_cap
            and segs <= max(16, _pow2_at_least(out_d * out_h * cdiv(out_w, seg)))
        ]

    def schedules(self, problem: ConvProblem) -> list[Schedule]:
        out_h, out_w = _pad3(problem.out_spatial, 1)[1:]
        h_cap = _pow2_at_least(out_h)
        c_cap = _pow2_at_least(problem.out_channels)
        if self._channels_last(problem):
            w_cap = max(4, _pow2_at_least(out_w))
            found = [
                Schedule.make(warps, 1, BLOCK_H=bh, BLOCK_W=bw, BLOCK_C=bc)
                for bh, bw, bc, warps in self.CL_SPACE
                if bh <= h_cap and bw <= w_cap and bc <= max(16, c_cap)
            ]
            fallback = Schedule.make(4, 1, BLOCK_H=1, BLOCK_W=4, BLOCK_C=16)
        else:
            w_cap = max(16, _pow2_at_least(out_w))
            found = [
                Schedule.make(warps, 1, BLOCK_H=bh, BLOCK_W=bw)
                for bh, bw, warps in self.NC_SPACE
                if bh <= h_cap and bw <= w_cap
            ] + [
                Schedule.make(warps, 1, BLOCK_H=bh, BLOCK_W=bw, BLOCK_C=bc)
                for bh, bw, bc, warps in self.NC_MULTI_SPACE
                if bh <= h_cap and bw <= w_cap and bc <= c_cap
            ]
            found += self._band_schedules(problem)
            fallback = Schedule.make(1, 1, BLOCK_H=1, BLOCK_W=16)
        # Small tiles on a huge problem could overflow grid axis 0 (`supports` vouches for the fallback).
        found = [
            s for s in found if self._grid(problem, s)[0] <= INT32_MAX and self._grid(problem, s)[1] <= 65535
        ]
        return found or [fallback]

    def heuristic_schedule(self, problem: ConvProblem) -> Schedule:
        """Least estimated work first (padding waste, edge programs' masked taps), then a tile near the size
        that keeps the memory system busy."""
        _, out_h, out_w = _pad3(problem.out_spatial, 1)
        cl = self._channels_last(problem)
        # Elements per program (H200 sweeps): ~2048 fp16/bf16 or ~1024 fp32 channels-last; contiguous inputs
        # favour small tiles (the tuned table's winners hold 64-512 elements).
        target = (2048 if problem.element_size <= 2 else 1024) if cl else 256

        def cost(s: Schedule) -> tuple[float, float, float]:
            bh, bw, bc = s["BLOCK_H"], s["BLOCK_W"], _block_c(s)
            programs = cdiv(out_h, bh) * cdiv(out_w, bw) * cdiv(problem.out_channels, bc)
            # A tile smaller than the program's threads leaves lanes idle: count them as padding too.
            waste = programs * max(bh * bw * bc, 32 * s.num_warps) / (out_h * out_w * problem.out_channels)
            inner = interior_fraction(problem, s)
            work = waste * (inner + EDGE_COST * (1.0 - inner))
            # Contiguous input: the warps span W first, so a thread's columns of one row share each weight
            # load (per-tap weight loads otherwise cost as much as the input's).
            shared_weight = 0.0 if cl else -min(bw / (32 * s.num_warps), 4.0)
            return (round(max(work, 1.2), 1), abs(math.log2(bh * bw * bc / target)), shared_weight)

        space = self.schedules(problem)
        band = [sch for sch in space if _is_band(sch)]
        # Band for 1-D rows with 7+ taps only. H200, 07:03 UTC (us, best band vs best direct schedule): k=15
        # 6.16 vs 10.16 (N=8, L=500), 3.05 vs 3.36 (N=1); k=31 6.72 vs 17.58; but k=5 3.96 vs 3.80 (L=8000) and
        # k=3 8.43 vs 3.66: the direct kernels' per-tap cost grows with k, the band's barely does.
        if band and _band_is_1d(problem) and problem.kernel[-1] >= BAND_MIN_TAPS:
            return min(band, key=lambda sch: self._band_cost(problem, sch))
        space = [sch for sch in space if not _is_band(sch)] or space
        if not cl and out_h > 1:
            # Several channels per program were measured on 1-D rows only; 2-D/3-D planes keep one channel.
            space = [s for s in space if _block_c(s) == 1] or space
        return min(space, key=cost)

    @staticmethod
    def _band_cost(problem: ConvProblem, schedule: Schedule) -> tuple[float, bool, float]:
        """Padding waste first, then at least ~2 programs per SM (the 07:03 sweep's conformer winner ran 512
        programs of 4 warps on 132 SMs), then loads per output:
        the window (SEG + TAIL per SEG outputs) plus the band's weight gathers shared by the tile's rows."""
        halo_tail = band_geometry(problem)
        assert halo_tail is not None
        seg, segs, img = schedule["SEG"], schedule["SEGS"], schedule["IMG"]
        programs = prod(DepthwiseTemplate._band_grid(problem, schedule))
        out = prod(_pad3(problem.out_spatial, 1)) * problem.out_channels * problem.batch
        waste = programs * img * segs * seg / out
        window = seg + halo_tail[1]
        loads = window / seg + window / (img * segs)
        return (round(waste, 1), programs < 2 * NUM_SMS, loads)

    @staticmethod
    def _band_grid(problem: ConvProblem, schedule: Schedule) -> tuple[int, int, int]:
        out_d, out_h, out_w = _pad3(problem.out_spatial, 1)
        rows = out_d * out_h * cdiv(out_w, schedule["SEG"])
        images = problem.batch // schedule["IMG"]
        if _band_is_1d(problem):  # (image block x channel, row block): no runtime division in the kernel
            return (images * problem.out_channels, cdiv(rows, schedule["SEGS"]), 1)
        return (images * problem.out_channels * cdiv(rows, schedule["SEGS"]), 1, 1)

    # -- weight and launches ----------------------------------------------------------------------------------
    def prepare_weight(self, weight: torch.Tensor, problem: ConvProblem, schedule: Schedule) -> torch.Tensor:
        # fp32 taps: the kernels accumulate in fp32, so this saves a conversion per tap and channel.
        flat = weight.reshape(problem.out_channels, prod(problem.kernel)).float()
        if self._channels_last(problem):
            return flat.t().contiguous()  # (taps, C_out)
        return flat.contiguous()  # (C_out, taps)

    def _grid(self, problem: ConvProblem, schedule: Schedule) -> tuple[int, int, int]:
        if _is_band(schedule):
            return self._band_grid(problem, schedule)
        out_d, out_h, out_w = _pad3(problem.out_spatial, 1)
        spatial_tiles = out_d * cdiv(out_h, schedule["BLOCK_H"]) * cdiv(out_w, schedule["BLOCK_W"])
        channel_tiles = cdiv(problem.out_channels, _block_c(schedule))
        if self._channels_last(problem):
            return (problem.batch * spatial_tiles, channel_tiles, 1)
        return (problem.batch * channel_tiles * spatial_tiles, 1, 1)

    def launches(self, problem: ConvProblem, schedule: Schedule) -> list[KernelLaunch]:
        p = problem.params
        in_d, in_h, in_w = _pad3(problem.in_spatial, 1)
        out_d, out_h, out_w = _pad3(problem.out_spatial, 1)
        kd, kh, kw = _pad3(problem.kernel, 1)
        sd, sh, sw = _pad3(p.stride, 1)
        pd, ph, pw = _pad3(p.padding_before, 0)
        dd, dh, dw = _pad3(p.dilation, 1)
        out_cl = dense_layout(problem.output_size, problem.output_stride) == "channels_last"
        dt = TRITON_PTR_DTYPE[problem.dtype]
        args = (
            TensorArg("input", dt),
            TensorArg("weight", "fp32"),
            TensorArg("bias", dt),
            TensorArg("output", dt),
            ScalarArg("ID", "i32", in_d),
            ScalarArg("IH", "i32", in_h),
            ScalarArg("IW", "i32", in_w),
            ScalarArg("OD", "i32", out_d),
            ScalarArg("OH", "i32", out_h),
            ScalarArg("OW", "i32", out_w),
        )
        constexprs: list[tuple[str, object]] = [
            ("C_IN", problem.in_channels),
            ("MULT", problem.out_channels // problem.in_channels),
            ("KD", kd),
            ("KH", kh),
            ("KW", kw),
            ("SD", sd),
            ("SH", sh),
            ("SW", sw),
            ("PD", pd),
            ("PH", ph),
            ("PW", pw),
            ("DD", dd),
            ("DH", dh),
            ("DW", dw),
            ("OUT_CL", out_cl),
            ("HAS_BIAS", problem.has_bias),
        ]
        grid = self._grid(problem, schedule)
        if _is_band(schedule):
            halo_tail = band_geometry(problem)
            assert halo_tail is not None, "band schedules are offered only where band_geometry serves"
            tile = [(name, schedule[name]) for name in ("SEG", "SEGS", "IMG")]
            constexprs += [*tile, ("HALO", halo_tail[0]), ("TAIL", halo_tail[1])]
            # (imported here: transposed.py imports this module; looked up per call so tests can patch it)
            from . import transposed

            fn = _depthwise_band_kernel
            if _band_is_1d(problem):
                fn = _depthwise_band1d_kernel
                constexprs.append(("VEC", math.gcd(in_w, out_w, 8)))
            constexprs.append(("DOT_FP32", problem.dtype == "bfloat16" and transposed._interpreting()))
            return [KernelLaunch(fn, args, tuple(constexprs), grid, schedule.num_warps, 1)]
        constexprs += [
            ("BLOCK_H", schedule["BLOCK_H"]),
            ("BLOCK_W", schedule["BLOCK_W"]),
            ("BLOCK_C", _block_c(schedule)),
        ]
        fn = _depthwise_cl_kernel if self._channels_last(problem) else _depthwise_nc_kernel
        return [KernelLaunch(fn, args, tuple(constexprs), grid, schedule.num_warps, schedule.num_stages)]


TEMPLATES = [DepthwiseTemplate()]
