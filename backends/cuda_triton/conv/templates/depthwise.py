"""Direct depthwise convolution (groups == C_in, any channel multiplier), 1-D/2-D/3-D.

A depthwise conv does ``k`` multiply-adds per output element, so it is bound by memory traffic, not by math:
a GEMM formulation (one tiny GEMM per channel) wastes the tensor cores and the bandwidth. These kernels compute
a tile of outputs directly, each tap a vectorized load along the tensor's contiguous dimension, the filter
taps of the tile's channels held in registers, fp32 accumulation, bias fused.

Every problem is viewed as 3-D: a 1-D conv is (1, 1, L), a 2-D conv (1, H, W); missing dims get kernel 1,
stride 1, dilation 1, padding 0. Output channel ``co`` reads input channel ``co // MULT`` (ATen's grouping with
C_out = MULT * C_in).

Two kernels, chosen by the input layout (the read-heavy side):

``_depthwise_cl_kernel`` (channels-last input): a program computes a tile of ``BLOCK_H x BLOCK_W`` output
positions of one (n, od) slice times ``BLOCK_C`` output channels; loads are vectors along C.

    args (PTX order): x, w, b, y (pointers; b is null when HAS_BIAS is False), ID, IH, IW, OD, OH, OW (i32)
    constexprs: C_IN, MULT, KD, KH, KW, SD, SH, SW, PD, PH, PW, DD, DH, DW, OUT_CL, HAS_BIAS,
                BLOCK_H, BLOCK_W, BLOCK_C
    grid: (N * OD * cdiv(OH, BLOCK_H) * cdiv(OW, BLOCK_W), cdiv(C_out, BLOCK_C), 1)
    weight: prepared as fp32 (KD*KH*KW, C_out) contiguous (taps major, channels contiguous).

``_depthwise_nc_kernel`` (contiguous input): a program computes a ``BLOCK_H x BLOCK_W`` tile of one
(n, co, od) output plane; loads are vectors along W.

    args (PTX order): x, w, b, y, ID, IH, IW, OD, OH, OW (i32)
    constexprs: as above without BLOCK_C
    grid: (N * C_out * OD * cdiv(OH, BLOCK_H) * cdiv(OW, BLOCK_W), 1, 1)
    weight: prepared as fp32 (C_out, KD*KH*KW) contiguous.

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

from ..problem import ConvProblem
from .base import (
    TRITON_PTR_DTYPE,
    ConvTemplate,
    KernelLaunch,
    ScalarArg,
    Schedule,
    Support,
    TensorArg,
    cdiv,
    prod,
)

INT32_MAX = 2**31 - 1


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
    acc = tl.zeros((BLOCK_H * BLOCK_W, BLOCK_C), dtype=tl.float32)
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
                w_tap = w_ptr + ((kd * KH + kh) * KW + kw) * C_OUT + co
                if EVEN_C:
                    xv = tl.load(x_row + kw * DW * C_IN, mask=ok[:, None], other=0.0)
                    wv = tl.load(w_tap)
                else:
                    xv = tl.load(x_row + kw * DW * C_IN, mask=ok[:, None] & c_ok[None, :], other=0.0)
                    wv = tl.load(w_tap, mask=c_ok, other=0.0)
                acc += xv.to(tl.float32) * wv.to(tl.float32)[None, :]
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
):
    C_OUT: tl.constexpr = C_IN * MULT
    TAPS: tl.constexpr = KD * KH * KW
    pid = tl.program_id(0)
    n_wt = tl.cdiv(OW, BLOCK_W)
    n_ht = tl.cdiv(OH, BLOCK_H)
    wt = pid % n_wt
    rest = pid // n_wt
    ht = rest % n_ht
    rest = rest // n_ht
    od = rest % OD
    rest = rest // OD
    co = rest % C_OUT
    n = rest // C_OUT
    if MULT == 1:
        ci = co
    else:
        ci = co // MULT

    oh = ht * BLOCK_H + tl.arange(0, BLOCK_H)[:, None]
    ow = wt * BLOCK_W + tl.arange(0, BLOCK_W)[None, :]
    p_ok = (oh < OH) & (ow < OW)
    id0 = od * SD - PD
    ih0 = oh * SH - PH
    iw0 = ow * SW - PW
    x_base = x_ptr + (n.to(tl.int64) * C_IN + ci) * (ID * IH * IW)
    x_tile = x_base + (id0 * IH + ih0) * IW + iw0
    w_base = w_ptr + co * TAPS
    acc = tl.zeros((BLOCK_H, BLOCK_W), dtype=tl.float32)
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
                wv = tl.load(w_base + (kd * KH + kh) * KW + kw)
                acc += xv.to(tl.float32) * wv.to(tl.float32)
    if HAS_BIAS:
        acc += tl.load(b_ptr + co).to(tl.float32)

    out_pos = (od * OH + oh) * OW + ow
    if OUT_CL:
        y_off = n.to(tl.int64) * (OD * OH * OW * C_OUT) + out_pos * C_OUT + co
    else:
        y_off = (n.to(tl.int64) * C_OUT + co) * (OD * OH * OW) + out_pos
    tl.store(y_ptr + y_off, acc.to(y_ptr.dtype.element_ty), mask=p_ok)


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

    def worth_routing(self, problem: ConvProblem) -> bool:
        return bool(self.supports(problem))

    # -- schedules --------------------------------------------------------------------------------------------
    @staticmethod
    def _channels_last(problem: ConvProblem) -> bool:
        return dense_layout(problem.input_size, problem.input_stride) == "channels_last"

    # (BLOCK_H, BLOCK_W, BLOCK_C, num_warps) for channels-last inputs, (BLOCK_H, BLOCK_W, num_warps) otherwise.
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
    )
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
    )

    def schedules(self, problem: ConvProblem) -> list[Schedule]:
        out_h, out_w = _pad3(problem.out_spatial, 1)[1:]
        h_cap = _pow2_at_least(out_h)
        if self._channels_last(problem):
            c_cap = max(16, _pow2_at_least(problem.out_channels))
            w_cap = max(4, _pow2_at_least(out_w))
            found = [
                Schedule.make(warps, 1, BLOCK_H=bh, BLOCK_W=bw, BLOCK_C=bc)
                for bh, bw, bc, warps in self.CL_SPACE
                if bh <= h_cap and bw <= w_cap and bc <= c_cap
            ]
            return found or [Schedule.make(4, 1, BLOCK_H=1, BLOCK_W=4, BLOCK_C=16)]
        w_cap = max(16, _pow2_at_least(out_w))
        found = [
            Schedule.make(warps, 1, BLOCK_H=bh, BLOCK_W=bw)
            for bh, bw, warps in self.NC_SPACE
            if bh <= h_cap and bw <= w_cap
        ]
        return found or [Schedule.make(1, 1, BLOCK_H=1, BLOCK_W=16)]

    def heuristic_schedule(self, problem: ConvProblem) -> Schedule:
        """Little padding waste first, then a tile near the size that keeps the memory system busy."""
        _, out_h, out_w = _pad3(problem.out_spatial, 1)
        cl = self._channels_last(problem)
        # Elements per program (H200 sweep, scripts/bench_part2.py): ~2048 fp16/bf16 or ~1024 fp32 channels-last.
        target = (2048 if problem.element_size <= 2 else 1024) if cl else 1024

        def cost(s: Schedule) -> tuple[float, float]:
            bh, bw = s["BLOCK_H"], s["BLOCK_W"]
            bc = s["BLOCK_C"] if cl else 1
            c = problem.out_channels if cl else 1
            covered = cdiv(out_h, bh) * bh * cdiv(out_w, bw) * bw * cdiv(c, bc) * bc
            waste = covered / (out_h * out_w * c)
            tile = bh * bw * bc
            return (round(max(waste, 1.2), 2), abs(math.log2(tile / target)))

        return min(self.schedules(problem), key=cost)

    # -- weight and launches ----------------------------------------------------------------------------------
    def prepare_weight(self, weight: torch.Tensor, problem: ConvProblem, schedule: Schedule) -> torch.Tensor:
        # fp32 taps: the kernels accumulate in fp32, so this saves a conversion per tap and channel.
        flat = weight.reshape(problem.out_channels, prod(problem.kernel)).float()
        if self._channels_last(problem):
            return flat.t().contiguous()  # (taps, C_out)
        return flat.contiguous()  # (C_out, taps)

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
            ("BLOCK_H", schedule["BLOCK_H"]),
            ("BLOCK_W", schedule["BLOCK_W"]),
        ]
        spatial_tiles = out_d * cdiv(out_h, schedule["BLOCK_H"]) * cdiv(out_w, schedule["BLOCK_W"])
        if self._channels_last(problem):
            constexprs.append(("BLOCK_C", schedule["BLOCK_C"]))
            fn = _depthwise_cl_kernel
            grid = (problem.batch * spatial_tiles, cdiv(problem.out_channels, schedule["BLOCK_C"]), 1)
        else:
            fn = _depthwise_nc_kernel
            grid = (problem.batch * problem.out_channels * spatial_tiles, 1, 1)
        return [KernelLaunch(fn, args, tuple(constexprs), grid, schedule.num_warps, schedule.num_stages)]


TEMPLATES = [DepthwiseTemplate()]
