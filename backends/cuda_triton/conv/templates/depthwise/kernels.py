"""The depthwise kernels: two direct ones (channels-last and contiguous inputs) and the band kernel (general and
1-D rows); the package docstring gives each one's arguments, constexprs, grid and prepared weight."""

from __future__ import annotations

import triton
import triton.language as tl

from ..epilogue_jit import apply_epilogue
from ..gemm_jit import add_bias
from .columns_kernel import _column_sums


@triton.jit
def _spatial_tile(pid, OD, OH, OW, BLOCK_H: tl.constexpr, BLOCK_W: tl.constexpr):
    """Program id -> (column tile, row tile, output depth, the rest of the id): W tiles fastest, then H, then D."""
    n_wt = tl.cdiv(OW, BLOCK_W)
    n_ht = tl.cdiv(OH, BLOCK_H)
    wt = pid % n_wt
    rest = pid // n_wt
    ht = rest % n_ht
    rest = rest // n_ht
    od = rest % OD
    return wt, ht, od, rest // OD


@triton.jit
def _cl_tile(
    OD, OH, OW, C_OUT: tl.constexpr, BLOCK_H: tl.constexpr, BLOCK_W: tl.constexpr, BLOCK_C: tl.constexpr
):
    """A channels-last program's tile (grid axis 0: image and spatial tile, axis 1: channel block): its column and
    row tile, output depth and image, and the [BLOCK_H * BLOCK_W] positions x [BLOCK_C] channels with masks."""
    wt, ht, od, n = _spatial_tile(tl.program_id(0), OD, OH, OW, BLOCK_H, BLOCK_W)
    offs_p = tl.arange(0, BLOCK_H * BLOCK_W)
    oh = ht * BLOCK_H + offs_p // BLOCK_W
    ow = wt * BLOCK_W + offs_p % BLOCK_W
    co = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)
    return wt, ht, od, n, oh, ow, (oh < OH) & (ow < OW), co, co < C_OUT


@triton.jit
def _output_offsets(n, co, out_pos, OD, OH, OW, C_OUT: tl.constexpr, OUT_CL: tl.constexpr):
    """Element offsets in y of the outputs (image n, channel co, position out_pos of the OD x OH x OW map), in
    y's layout."""
    if OUT_CL:
        y_off = n * (OD * OH * OW * C_OUT) + out_pos * C_OUT + co
    else:
        y_off = (n * C_OUT + co) * (OD * OH * OW) + out_pos
    return y_off


@triton.jit
def _tile_is_interior(
    od, ht, wt, c0, ID, IH, IW, OH, OW, C_OUT: tl.constexpr, KD: tl.constexpr, KH: tl.constexpr,
    KW: tl.constexpr, SD: tl.constexpr, SH: tl.constexpr, SW: tl.constexpr, PD: tl.constexpr,
    PH: tl.constexpr, PW: tl.constexpr, DD: tl.constexpr, DH: tl.constexpr, DW: tl.constexpr,
    BLOCK_H: tl.constexpr, BLOCK_W: tl.constexpr, BLOCK_C: tl.constexpr,
):  # fmt: skip
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
def _interior_taps(acc, x_tile, w_tile, IH, IW, X_COL: tl.constexpr, W_TAP: tl.constexpr, W_COLUMNS: tl.constexpr,
                   KD: tl.constexpr, KH: tl.constexpr, KW: tl.constexpr, DD: tl.constexpr, DH: tl.constexpr,
                   DW: tl.constexpr, ROW_SUMS_16: tl.constexpr):  # fmt: skip
    """acc + every tap of a tile none of whose taps reads outside the input (`_tile_is_interior`): tap (kd, kh, kw)
    reads x_tile + ((kd * DD * IH + kh * DH) * IW + kw * DW) * X_COL and the weights at w_tile + tap * W_TAP
    (X_COL, W_TAP: the input's column and the weight's tap strides; W_COLUMNS: w_tile is one vector over the
    tile's columns, else it broadcasts over the tile as it is). No bounds math at all: a tap is a load at a
    constant offset from its row, a convert and an FMA per element (the kernels are instruction-bound, not
    memory-bound). A channels-last weight vector is expanded after its load and after the input's convert:
    expanding its pointers first, or before the convert, compiles some tiles to different code.

    ROW_SUMS_16 (16-bit inputs): each filter row's KW products are summed in the input's type, two lanes per
    instruction (HFMA2), and only the row's sum is converted and added in fp32: half the instructions of a
    convert and an FFMA per product. The row sums round like the products of a 16-bit GEMM tile would."""
    for kd in tl.static_range(KD):
        for kh in tl.static_range(KH):
            x_row = x_tile + (kd * DD * IH + kh * DH) * IW * X_COL
            if ROW_SUMS_16:
                row = tl.zeros_like(acc).to(x_tile.dtype.element_ty)
                for kw in tl.static_range(KW):
                    xv = tl.load(x_row + kw * DW * X_COL)
                    wv = tl.load(w_tile + ((kd * KH + kh) * KW + kw) * W_TAP)  # 16-bit weights too
                    row += xv * (wv[None, :] if W_COLUMNS else wv)
                acc += row.to(tl.float32)
            else:
                for kw in tl.static_range(KW):
                    xv = tl.load(x_row + kw * DW * X_COL)
                    wv = tl.load(w_tile + ((kd * KH + kh) * KW + kw) * W_TAP)
                    acc += xv.to(tl.float32) * (wv[None, :] if W_COLUMNS else wv)
    return acc


# The channels-last kernel's LOOP: how a program accumulates its tile (the package docstring has each one):
# a tap at a time, interior tiles without bounds checks (`_direct_sums`); TAP_ROWS filter rows of taps per load
# (`_tap_rows_sums`); each input column of a filter row loaded once (`columns_kernel._column_sums`).
DIRECT_LOOP = tl.constexpr(0)
TAPS_LOOP = tl.constexpr(1)
COLUMNS_LOOP = tl.constexpr(2)


@triton.jit
def _depthwise_cl_kernel(
    x_ptr, w_ptr, b_ptr, y_ptr, ID, IH, IW, OD, OH, OW, e1_ptr, e1_sn, e1_sc, e2_ptr, e2_sn, e2_sc, e3_ptr,
    e3_sn, e3_sc,
    C_IN: tl.constexpr, MULT: tl.constexpr, KD: tl.constexpr, KH: tl.constexpr, KW: tl.constexpr,
    SD: tl.constexpr, SH: tl.constexpr, SW: tl.constexpr, PD: tl.constexpr, PH: tl.constexpr,
    PW: tl.constexpr, DD: tl.constexpr, DH: tl.constexpr, DW: tl.constexpr, OUT_CL: tl.constexpr,
    HAS_BIAS: tl.constexpr, BLOCK_H: tl.constexpr, BLOCK_W: tl.constexpr, BLOCK_C: tl.constexpr,
    LOOP: tl.constexpr, ROW_SUMS_16: tl.constexpr, TAP_ROWS: tl.constexpr, TAP_SLOTS: tl.constexpr,
    PROGRAM: tl.constexpr, E_KINDS: tl.constexpr,
):  # fmt: skip
    """Every channels-last schedule's kernel: LOOP picks how a program accumulates its tile; bias, fused epilogue
    and store are the same for all (`_store_cl_tile`). ROW_SUMS_16 (direct and columns loops): 16-bit inputs sum
    each filter row in their own type; TAP_ROWS, TAP_SLOTS: the taps loop's load shape (0 for the others)."""
    C_OUT: tl.constexpr = C_IN * MULT
    if LOOP == COLUMNS_LOOP:
        # BLOCK_H rows x BLOCK_W columns unrolled: one [rows, channels] accumulator and store per output column
        wt, ht, od, n = _spatial_tile(tl.program_id(0), OD, OH, OW, BLOCK_H, BLOCK_W)
        oh = ht * BLOCK_H + tl.arange(0, BLOCK_H)
        ow0 = wt * BLOCK_W
        co = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)
        c_ok = co < C_OUT
        acc = _column_sums(
            x_ptr, w_ptr, n, od, oh, ow0, co, c_ok, ID, IH, IW,
            C_IN, MULT, KD, KH, KW, SD, SH, SW, PD, PH, PW, DD, DH, DW, BLOCK_H, BLOCK_W, BLOCK_C, ROW_SUMS_16,
        )  # fmt: skip
        for w in tl.static_range(BLOCK_W):
            ow = ow0 + w + tl.zeros_like(oh)
            p_ok = (oh < OH) & (ow < OW)
            _store_cl_tile(
                acc[w], b_ptr, y_ptr, n, od, oh, ow, p_ok, co, c_ok, OD, OH, OW,
                e1_ptr, e1_sn, e1_sc, e2_ptr, e2_sn, e2_sc, e3_ptr, e3_sn, e3_sc,
                C_OUT, OUT_CL, HAS_BIAS, PROGRAM, E_KINDS,
            )  # fmt: skip
    else:
        wt, ht, od, n, oh, ow, p_ok, co, c_ok = _cl_tile(OD, OH, OW, C_OUT, BLOCK_H, BLOCK_W, BLOCK_C)
        ci = co // MULT
        if LOOP == TAPS_LOOP:
            acc = _tap_rows_sums(
                x_ptr, w_ptr, n, od, oh, ow, p_ok, co, c_ok, ci, ID, IH, IW, C_IN, C_OUT,
                KD, KH, KW, SD, SH, SW, PD, PH, PW, DD, DH, DW, BLOCK_H, BLOCK_W, BLOCK_C, TAP_ROWS, TAP_SLOTS,
            )  # fmt: skip
        else:
            tl.static_assert(LOOP == DIRECT_LOOP, "unknown depthwise loop")
            acc = _direct_sums(
                x_ptr, w_ptr, n, od, ht, wt, oh, ow, p_ok, co, c_ok, ci, ID, IH, IW, OH, OW, C_IN, C_OUT,
                KD, KH, KW, SD, SH, SW, PD, PH, PW, DD, DH, DW, BLOCK_H, BLOCK_W, BLOCK_C, ROW_SUMS_16,
            )  # fmt: skip
        _store_cl_tile(
            acc, b_ptr, y_ptr, n, od, oh, ow, p_ok, co, c_ok, OD, OH, OW,
            e1_ptr, e1_sn, e1_sc, e2_ptr, e2_sn, e2_sc, e3_ptr, e3_sn, e3_sc,
            C_OUT, OUT_CL, HAS_BIAS, PROGRAM, E_KINDS,
        )  # fmt: skip


@triton.jit
def _direct_sums(
    x_ptr, w_ptr, n, od, ht, wt, oh, ow, p_ok, co, c_ok, ci, ID, IH, IW, OH, OW, C_IN: tl.constexpr,
    C_OUT: tl.constexpr, KD: tl.constexpr, KH: tl.constexpr, KW: tl.constexpr, SD: tl.constexpr,
    SH: tl.constexpr, SW: tl.constexpr, PD: tl.constexpr, PH: tl.constexpr, PW: tl.constexpr, DD: tl.constexpr,
    DH: tl.constexpr, DW: tl.constexpr, BLOCK_H: tl.constexpr, BLOCK_W: tl.constexpr, BLOCK_C: tl.constexpr,
    ROW_SUMS_16: tl.constexpr,
):  # fmt: skip
    """The direct loop's [positions, channels] sums of the `_cl_tile` tile (positions oh, ow; channels co read
    from input channels ci): a tap at a time, interior tiles without bounds checks."""
    EVEN_C: tl.constexpr = C_OUT % BLOCK_C == 0
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
        od, ht, wt, tl.program_id(1) * BLOCK_C, ID, IH, IW, OH, OW,
        C_OUT, KD, KH, KW, SD, SH, SW, PD, PH, PW, DD, DH, DW, BLOCK_H, BLOCK_W, BLOCK_C,
    )  # fmt: skip
    if interior:
        acc = _interior_taps(
            acc, x_tile, w_tile, IH, IW, C_IN, C_OUT, True, KD, KH, KW, DD, DH, DW, ROW_SUMS_16
        )
    else:
        # Tiles touching the padding, the tensor's edge or a partial channel block: mask every tap.
        for kd in tl.static_range(KD):
            idd = id0 + kd * DD
            d_ok = (idd >= 0) & (idd < ID)
            for kh in tl.static_range(KH):
                ih = ih0 + kh * DH
                h_ok = p_ok & d_ok & (ih.to(tl.uint32) < IH)
                x_row = x_tile + (kd * DD * IH + kh * DH) * IW * C_IN
                if ROW_SUMS_16:
                    row = tl.zeros_like(acc).to(x_ptr.dtype.element_ty)
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
                    if ROW_SUMS_16:
                        row += xv * wv[None, :]
                    else:
                        acc += xv.to(tl.float32) * wv[None, :]
                if ROW_SUMS_16:
                    acc += row.to(tl.float32)
    return acc


@triton.jit
def _store_cl_tile(acc, b_ptr, y_ptr, n, od, oh, ow, p_ok, co, c_ok, OD, OH, OW,
                   e1_ptr, e1_sn, e1_sc, e2_ptr, e2_sn, e2_sc, e3_ptr, e3_sn, e3_sc,
                   C_OUT: tl.constexpr, OUT_CL: tl.constexpr, HAS_BIAS: tl.constexpr, PROGRAM: tl.constexpr,
                   E_KINDS: tl.constexpr):  # fmt: skip
    """Bias, the fused elementwise chain and the store of a channels-last kernel's [positions, channels] tile of
    image n (positions (od, oh, ow), channels co)."""
    acc = add_bias(acc, b_ptr, co, c_ok, HAS_BIAS)
    out_pos = (od * OH + oh) * OW + ow
    y_base = y_ptr + n.to(tl.int64) * (OD * OH * OW * C_OUT)
    y_off = _output_offsets(0, co[None, :], out_pos[:, None], OD, OH, OW, C_OUT, OUT_CL)  # within image n
    if len(PROGRAM) > 0:  # a fused elementwise chain (conv/epilogue.py); the tile is one image's
        rows_n = n.to(tl.int64) + tl.zeros_like(out_pos).to(tl.int64)
        offs = n.to(tl.int64) * (OD * OH * OW * C_OUT) + y_off
        mask = p_ok[:, None] & c_ok[None, :]
        acc = apply_epilogue(
            acc, offs, rows_n, co, mask, e1_ptr, e1_sn, e1_sc, e2_ptr, e2_sn, e2_sc, e3_ptr, e3_sn, e3_sc,
            PROGRAM, E_KINDS,
        )  # fmt: skip
    tl.store(y_base + y_off, acc.to(y_ptr.dtype.element_ty), mask=p_ok[:, None] & c_ok[None, :])


@triton.jit
def _tap_rows_sums(
    x_ptr, w_ptr, n, od, oh, ow, p_ok, co, c_ok, ci, ID, IH, IW, C_IN: tl.constexpr, C_OUT: tl.constexpr,
    KD: tl.constexpr, KH: tl.constexpr, KW: tl.constexpr, SD: tl.constexpr, SH: tl.constexpr, SW: tl.constexpr,
    PD: tl.constexpr, PH: tl.constexpr, PW: tl.constexpr, DD: tl.constexpr, DH: tl.constexpr, DW: tl.constexpr,
    BLOCK_H: tl.constexpr, BLOCK_W: tl.constexpr, BLOCK_C: tl.constexpr, TAP_ROWS: tl.constexpr,
    TAP_SLOTS: tl.constexpr,
):  # fmt: skip
    """The taps loop's [positions, channels] sums of the `_cl_tile` tile (as `_direct_sums`). One load per TAP_ROWS
    filter rows instead of one per tap: a [positions, taps, channels] tile, so the loads of every tap of those rows
    are in flight together. Small maps at batch 1 give each SM a few warps only, and a tap at a time leaves each
    warp waiting out a memory latency per tap."""
    # Tap slot s of a load is filter row (first row + s // KW), column s % KW; slots past the rows are masked.
    # The loaded tile is [slots, positions, channels]: the lanes of a warp spread over channels, then positions,
    # so each thread holds every slot of its elements and the reduction over slots needs no shuffles.
    slot = tl.arange(0, TAP_SLOTS)
    slot_kh = slot // KW
    slot_kw = slot % KW
    iw = (slot_kw * DW)[:, None] + (ow * SW - PW)[None, :]
    col_ok = p_ok[None, :] & (iw.to(tl.uint32) < IW)  # one unsigned compare checks 0 <= iw < IW
    x_base = x_ptr + n.to(tl.int64) * (ID * IH * IW * C_IN)
    # Built as a reduction over slots, so the accumulator has the layout the loop's sums have (no conversion
    # through shared memory per load).
    acc = tl.sum(tl.zeros((TAP_SLOTS, BLOCK_H * BLOCK_W, BLOCK_C), dtype=tl.float32), axis=0)
    for kd in tl.static_range(KD):
        idd = od * SD - PD + kd * DD
        d_ok = (idd >= 0) & (idd < ID)
        for first_row in tl.static_range(0, KH, TAP_ROWS):
            kh = first_row + slot_kh
            slot_ok = (slot < TAP_ROWS * KW) & (kh < KH)
            ih = (kh * DH)[:, None] + (oh * SH - PH)[None, :]
            ok = col_ok & slot_ok[:, None] & (ih.to(tl.uint32) < IH) & d_ok
            x_off = ((idd * IH + ih) * IW + iw) * C_IN
            xv = tl.load(
                x_base + x_off[:, :, None] + ci[None, None, :],
                mask=ok[:, :, None] & c_ok[None, None, :],
                other=0.0,
            )
            taps = (kd * KH + kh) * KW + slot_kw
            wv = tl.load(
                w_ptr + taps[:, None] * C_OUT + co[None, :], mask=slot_ok[:, None] & c_ok[None, :], other=0.0
            )
            acc += tl.sum(xv.to(tl.float32) * wv[:, None, :], axis=0)
    return acc


@triton.jit
def _depthwise_nc_kernel(
    x_ptr, w_ptr, b_ptr, y_ptr, ID, IH, IW, OD, OH, OW, C_IN: tl.constexpr, MULT: tl.constexpr,
    KD: tl.constexpr, KH: tl.constexpr, KW: tl.constexpr, SD: tl.constexpr, SH: tl.constexpr,
    SW: tl.constexpr, PD: tl.constexpr, PH: tl.constexpr, PW: tl.constexpr, DD: tl.constexpr,
    DH: tl.constexpr, DW: tl.constexpr, OUT_CL: tl.constexpr, HAS_BIAS: tl.constexpr, BLOCK_H: tl.constexpr,
    BLOCK_W: tl.constexpr, BLOCK_C: tl.constexpr,
):  # fmt: skip
    C_OUT: tl.constexpr = C_IN * MULT
    TAPS: tl.constexpr = KD * KH * KW
    N_CT: tl.constexpr = (C_OUT + BLOCK_C - 1) // BLOCK_C
    wt, ht, od, rest = _spatial_tile(tl.program_id(0), OD, OH, OW, BLOCK_H, BLOCK_W)
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
        acc = _interior_taps(acc, x_tile, w_rows, IH, IW, 1, 1, False, KD, KH, KW, DD, DH, DW, False)
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
    y_off = _output_offsets(n.to(tl.int64), co, out_pos, OD, OH, OW, C_OUT, OUT_CL)
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
    x_ptr, w_ptr, b_ptr, y_ptr, ID, IH, IW, OD, OH, OW, C_IN: tl.constexpr, MULT: tl.constexpr,
    KD: tl.constexpr, KH: tl.constexpr, KW: tl.constexpr, SD: tl.constexpr, SH: tl.constexpr,
    SW: tl.constexpr, PD: tl.constexpr, PH: tl.constexpr, PW: tl.constexpr, DD: tl.constexpr,
    DH: tl.constexpr, DW: tl.constexpr, OUT_CL: tl.constexpr, HAS_BIAS: tl.constexpr, SEG: tl.constexpr,
    SEGS: tl.constexpr, IMG: tl.constexpr, HALO: tl.constexpr, TAIL: tl.constexpr, DOT_FP32: tl.constexpr,
):  # fmt: skip
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
    y_off = _output_offsets(n, co, out_pos, OD, OH, OW, C_OUT, OUT_CL)
    tl.store(y_ptr + y_off, acc.to(y_ptr.dtype.element_ty), mask=row_ok[:, None] & (ow < OW))


@triton.jit
def _depthwise_band1d_kernel(
    x_ptr, w_ptr, b_ptr, y_ptr, ID, IH, IW, OD, OH, OW, C_IN: tl.constexpr, MULT: tl.constexpr,
    KD: tl.constexpr, KH: tl.constexpr, KW: tl.constexpr, SD: tl.constexpr, SH: tl.constexpr,
    SW: tl.constexpr, PD: tl.constexpr, PH: tl.constexpr, PW: tl.constexpr, DD: tl.constexpr,
    DH: tl.constexpr, DW: tl.constexpr, OUT_CL: tl.constexpr, HAS_BIAS: tl.constexpr, SEG: tl.constexpr,
    SEGS: tl.constexpr, IMG: tl.constexpr, HALO: tl.constexpr, TAIL: tl.constexpr, VEC: tl.constexpr,
    DOT_FP32: tl.constexpr,
):  # fmt: skip
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
