"""The channels-last depthwise kernel's columns loop: each input column of a filter row loaded once (key `COLS`).

The direct kernel loads a shifted [positions, channels] tile per tap, so the L1 serves KH * KW loads per output:
on a 7x7 layer at batch 32 that traffic, not DRAM, bounds it (docs/performance.md, "Known gaps"). Here a program
owns BLOCK_H output rows x BLOCK_W output columns x BLOCK_C channels with the columns unrolled: one [rows,
channels] accumulator per output column. For each filter row it loads the (BLOCK_W - 1) * SW + (KW - 1) * DW + 1
input columns those outputs read, one [rows, channels] tensor each, and every tap of the row reuses them from
registers: (BLOCK_W + KW - 1) loads per filter row instead of BLOCK_W * KW. With ROW_SUMS_16 (fp16 inputs, as
the direct kernel's `_interior_taps`) each output's filter row is summed in fp16 (HFMA2, no convert per load) and
only the row sums are widened and added in fp32; otherwise every product is summed in fp32, each input converted
once per load. Weights are the direct kernel's (taps, C_out) matrix, fp16 where rows sum in fp16, else fp32.
"""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def _column_sums(
    x_ptr, w_ptr, n, od, oh, ow0, co, c_ok, ID, IH, IW, C_IN: tl.constexpr, MULT: tl.constexpr, KD: tl.constexpr,
    KH: tl.constexpr, KW: tl.constexpr, SD: tl.constexpr, SH: tl.constexpr, SW: tl.constexpr, PD: tl.constexpr,
    PH: tl.constexpr, PW: tl.constexpr, DD: tl.constexpr, DH: tl.constexpr, DW: tl.constexpr,
    BLOCK_H: tl.constexpr, BLOCK_W: tl.constexpr, BLOCK_C: tl.constexpr, ROW_SUMS_16: tl.constexpr,
):  # fmt: skip
    """The columns loop of `kernels._depthwise_cl_kernel`: the BLOCK_W [rows, channels] sums (a tuple) of output
    columns ow0 .. ow0 + BLOCK_W - 1 at rows oh and channels co of image n, depth od."""
    SPAN: tl.constexpr = (BLOCK_W - 1) * SW + (KW - 1) * DW + 1  # input columns one filter row reads
    C_OUT: tl.constexpr = C_IN * MULT
    ci = co // MULT
    x_base = x_ptr + n.to(tl.int64) * (ID * IH * IW * C_IN)

    acc = ()
    for _ in tl.static_range(BLOCK_W):
        acc = acc + (tl.zeros((BLOCK_H, BLOCK_C), dtype=tl.float32),)
    for kd in tl.static_range(KD):
        idd = od * SD - PD + kd * DD
        d_ok = (idd >= 0) & (idd < ID)
        for kh in tl.static_range(KH):
            ih = oh * SH - PH + kh * DH
            rows_ok = ((ih.to(tl.uint32) < IH) & d_ok)[:, None] & c_ok[None, :]
            row_ptrs = x_base + ((idd * IH + ih) * IW * C_IN)[:, None] + ci[None, :]
            cols = ()
            for j in tl.static_range(SPAN):
                iw = ow0 * SW - PW + j
                col = tl.load(row_ptrs + iw * C_IN, mask=rows_ok & (iw >= 0) & (iw < IW), other=0.0)
                cols = cols + ((col if ROW_SUMS_16 else col.to(tl.float32)),)
            taps = ()
            for kw in tl.static_range(KW):
                tap = (kd * KH + kh) * KW + kw
                taps = taps + (tl.load(w_ptr + tap * C_OUT + co, mask=c_ok, other=0.0)[None, :],)
            summed = ()
            for w in tl.static_range(BLOCK_W):
                row = cols[w * SW] * taps[0]
                for kw in tl.static_range(1, KW):
                    row += cols[w * SW + kw * DW] * taps[kw]
                summed = summed + (acc[w] + row.to(tl.float32),)
            acc = summed
    return acc
