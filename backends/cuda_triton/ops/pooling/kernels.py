"""The pooling kernel and its schedules.

One kernel computes every pool kind: a program owns a tile of BLOCK_P output positions (batch and spatial
positions flattened, fastest last) by BLOCK_C channels and walks the window tap by tap, each tap one masked
load of the tile. Sizes and strides are runtime arguments, so any input and output layout works; channels-last
tensors (channel stride 1 on both sides: ``C_UNIT``) get a wide channel tile, so every load and store is a run of
adjacent channels; other layouts a one-channel tile along the output positions.

Semantics (ATen's CPU and CUDA kernels):

* max: taps in the padding are skipped; a NaN in the window wins (``v > best or v is NaN``), so NaN propagates.
* avg: the window starts at ``o * stride - padding``; its sum is divided by ``divisor_override`` when given,
  else by the window clipped to the padded input (``count_include_pad``) or to the input itself.
* adaptive avg: output o of a dim of length I out of O averages input [floor(o * I / O), ceil((o + 1) * I / O));
  the tap loop runs over the longest such window and masks the rest.

The sum is accumulated in fp32 in window order and rounded once. Grid: (cdiv(M, BLOCK_P), cdiv(C, BLOCK_C), 1),
M = batch * output positions.
"""

from __future__ import annotations

import triton
import triton.language as tl

from ...kernel.launch import Schedule
from ..tiling import channels_adjacent, positions_by_channels, positions_by_channels_space
from .spec import PoolSpec


@triton.jit
def pool_kernel(
    x_ptr, y_ptr,
    M, C, D, H, W, OD, OH, OW,
    XSN, XSC, XSD, XSH, XSW, YSN, YSC, YSD, YSH, YSW,
    KIND: tl.constexpr, KD: tl.constexpr, KH: tl.constexpr, KW: tl.constexpr,
    SD: tl.constexpr, SH: tl.constexpr, SW: tl.constexpr,
    PD: tl.constexpr, PH: tl.constexpr, PW: tl.constexpr,
    DD: tl.constexpr, DH: tl.constexpr, DW: tl.constexpr,
    COUNT_INCLUDE_PAD: tl.constexpr, DIVISOR: tl.constexpr, C_UNIT: tl.constexpr, INT64: tl.constexpr,
    BLOCK_P: tl.constexpr, BLOCK_C: tl.constexpr,
):  # fmt: skip
    """KIND 0: max, 1: avg, 2: adaptive avg (then KD, KH, KW are the longest windows)."""
    offs_p = tl.program_id(0) * BLOCK_P + tl.arange(0, BLOCK_P)
    offs_c = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)
    if INT64:
        offs_p = offs_p.to(tl.int64)
    p_ok = offs_p < M
    c_ok = offs_c < C
    ow = offs_p % OW
    oh = (offs_p // OW) % OH
    od = (offs_p // (OW * OH)) % OD
    n = offs_p // (OW * OH * OD)
    if C_UNIT:
        x_c = offs_c
        y_c = offs_c
    else:
        x_c = offs_c * XSC
        y_c = offs_c * YSC

    if KIND == 2:  # adaptive: [floor(o * I / O), ceil((o + 1) * I / O))
        d0 = (od * D) // OD
        h0 = (oh * H) // OH
        w0 = (ow * W) // OW
        d1 = ((od + 1) * D + OD - 1) // OD
        h1 = ((oh + 1) * H + OH - 1) // OH
        w1 = ((ow + 1) * W + OW - 1) // OW
    else:
        d0 = od * SD - PD
        h0 = oh * SH - PH
        w0 = ow * SW - PW
        d1 = d0 + (KD - 1) * DD + 1
        h1 = h0 + (KH - 1) * DH + 1
        w1 = w0 + (KW - 1) * DW + 1

    x_rows = x_ptr + n * XSN
    if KIND == 0:
        acc = tl.full((BLOCK_P, BLOCK_C), float("-inf"), tl.float32)
    else:
        acc = tl.zeros((BLOCK_P, BLOCK_C), tl.float32)
    for kd in range(KD):
        di = d0 + kd * DD
        d_ok = (di >= 0) & (di < D) & (di < d1)
        for kh in range(KH):
            hi = h0 + kh * DH
            h_ok = d_ok & (hi >= 0) & (hi < H) & (hi < h1)
            for kw in range(KW):
                wi = w0 + kw * DW
                ok = p_ok & h_ok & (wi >= 0) & (wi < W) & (wi < w1)
                ptrs = (x_rows + di * XSD + hi * XSH + wi * XSW)[:, None] + x_c[None, :]
                mask = ok[:, None] & c_ok[None, :]
                if KIND == 0:
                    v = tl.load(ptrs, mask=mask, other=float("-inf")).to(tl.float32)
                    acc = tl.where((v > acc) | (v != v), v, acc)
                else:
                    acc += tl.load(ptrs, mask=mask, other=0.0).to(tl.float32)

    if KIND == 1:
        if DIVISOR != 0:
            acc = acc / DIVISOR
        elif COUNT_INCLUDE_PAD:  # the window clipped to the padded input (ceil_mode windows may overhang it)
            count = (
                (tl.minimum(d0 + KD, D + PD) - d0)
                * (tl.minimum(h0 + KH, H + PH) - h0)
                * (tl.minimum(w0 + KW, W + PW) - w0)
            )
            acc = acc / count.to(tl.float32)[:, None]
        else:
            count = (
                (tl.minimum(d0 + KD, D) - tl.maximum(d0, 0))
                * (tl.minimum(h0 + KH, H) - tl.maximum(h0, 0))
                * (tl.minimum(w0 + KW, W) - tl.maximum(w0, 0))
            )
            acc = acc / count.to(tl.float32)[:, None]
    elif KIND == 2:
        count = (d1 - d0) * (h1 - h0) * (w1 - w0)
        acc = acc / count.to(tl.float32)[:, None]

    y_ptrs = (y_ptr + n * YSN + od * YSD + oh * YSH + ow * YSW)[:, None] + y_c[None, :]
    tl.store(y_ptrs, acc.to(y_ptr.dtype.element_ty), mask=p_ok[:, None] & c_ok[None, :])


# ---- schedules ---------------------------------------------------------------------------------------------
def channels_unit(spec: PoolSpec) -> bool:
    """Whether channels are adjacent in both the input and the output (the channels-last fast path)."""
    c_dim = 1 if spec.batched else 0
    return channels_adjacent(spec.input.sizes[c_dim], spec.input.strides[c_dim], spec.output().strides[c_dim])


def _channels(spec: PoolSpec) -> int:
    return spec.input.sizes[1 if spec.batched else 0]


def heuristic_schedule(spec: PoolSpec) -> Schedule:
    """1024-element tiles with 4 warps: a pool is memory-bound, its taps are served by L1/L2."""
    return positions_by_channels(_channels(spec), channels_unit(spec))


def schedules(spec: PoolSpec) -> list[Schedule]:
    """The tuning space (the heuristic's pick first)."""
    return positions_by_channels_space(_channels(spec), channels_unit(spec))
