"""1x1 and patchify (kernel == stride) convolutions without padding, as plain GEMMs.

With no padding every tap of every window is in bounds, so the A matrix (M = batch * output pixels rows,
K = taps * C_in columns) is addressed as ``row(m) + col(k)``: no masks but the tile edges, no per-tap loop.
For a channels-last 1x1 stride-1 conv, row(m) = m * C_in and col(k) = k: the input *is* the A matrix. K is
ordered (tap, channel) for channels-last inputs and (channel, tap) for contiguous ones, so consecutive k are
adjacent in memory in both layouts (within a patch row).

Kernel arguments (PTX order): x, w, bias, y, ws, tile-counter pointers, then int32 BATCH, D, H, W, OD, OH, OW (leading sizes 1
for 1-D/2-D), then the fused epilogue's three operands (pointer, int32 batch and channel strides each;
epilogue_args.py), then the fused prologue's three, read per (image, input channel) of each A element.
Everything else is a constexpr. Grid: (cdiv(M, BLOCK_M) * cdiv(C_out, BLOCK_N), 1, SPLIT_K).
Split-K schedules (SPLIT_K > 1): ws is the fp32 workspace and the tile counters those of _splitk.py (the last
share of each tile stores it, with bias and epilogue); both are unused pointers (the output) otherwise.

Prepared weight: [K_P, COUT_P] contiguous, rows in the kernel's K order, zero-padded to BLOCK_K / BLOCK_N.
Groups are left to the implicit GEMM.
fp32 with TF32 allowed: weight and A tile are rounded to nearest TF32 (ROUND_TF32, see _tf32.py).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ...kernel.launch import KernelLaunch, Schedule, ScratchTensor, Support, TensorArg, cdiv, split_k_args
from ...kernel.spaces import TILE_FIELDS, load_rows
from ..problem import ConvProblem
from ._splitk import SPLIT_CONFIGS, split_k_of, split_options, split_scratch
from ._tf32 import prepare_tf32_weight, round_to_tf32
from .epilogue_args import (
    epilogue_args,
    epilogue_constexprs,
    prologue_args,
    prologue_constexprs,
    prologue_images,
)
from .epilogue_jit import apply_prologue, tile_images
from .gemm_common import GROUP_M, GemmShapedTemplate, dot_constexprs, tile_constexprs, weight_k_major
from .gemm_jit import (
    gemm_rows,
    grouped_tile_ids,
    input_strides,
    split_k_range,
    store_tile,
    weight_ptrs,
    widen_sizes,
)
from .geometry import NUM_SMS, Geometry, fit_block
from .launch_args import dim_constexprs, size_args


@triton.jit
def conv_gemm_kernel(
    x_ptr, w_ptr, b_ptr, y_ptr, ws_ptr, cnt_ptr,
    BATCH, D, H, W, OD, OH, OW,
    e1_ptr, e1_sn, e1_sc, e2_ptr, e2_sn, e2_sc, e3_ptr, e3_sn, e3_sc,
    p1_ptr, p1_sn, p1_sc, p2_ptr, p2_sn, p2_sc, p3_ptr, p3_sn, p3_sc,
    C_IN: tl.constexpr, C_OUT: tl.constexpr, K_P: tl.constexpr, COUT_P: tl.constexpr, W_KMAJOR: tl.constexpr,
    KD: tl.constexpr, KH: tl.constexpr, KW: tl.constexpr,
    SD: tl.constexpr, SH: tl.constexpr, SW: tl.constexpr,
    DD: tl.constexpr, DH: tl.constexpr, DW: tl.constexpr,
    IN_CL: tl.constexpr, OUT_CL: tl.constexpr, HAS_BIAS: tl.constexpr, INT64: tl.constexpr,
    PRECISION: tl.constexpr, ROUND_TF32: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
    SPLIT_K: tl.constexpr, PROGRAM: tl.constexpr, E_KINDS: tl.constexpr, PROLOGUE: tl.constexpr,
    P_KINDS: tl.constexpr, P_IMAGES: tl.constexpr,
):  # fmt: skip
    BATCH, D, H, W = widen_sizes(BATCH, D, H, W, INT64)
    s_n, s_c, s_d, s_h, s_w = input_strides(D, H, W, C_IN, IN_CL)
    TAPS: tl.constexpr = KD * KH * KW
    K_TOTAL: tl.constexpr = TAPS * C_IN
    out_pixels = OD * OH * OW
    M = BATCH * out_pixels
    pid_m, pid_n = grouped_tile_ids(
        tl.program_id(0), (M + BLOCK_M - 1) // BLOCK_M, (C_OUT + BLOCK_N - 1) // BLOCK_N, GROUP_M
    )

    offs_m, m_ok, n, od, oh, ow = gemm_rows(pid_m, M, OD, OH, OW, out_pixels, BLOCK_M, INT64)
    rows = n * s_n + od * (SD * s_d) + oh * (SH * s_h) + ow * (SW * s_w)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)

    K_ITERS: tl.constexpr = (K_TOTAL + BLOCK_K - 1) // BLOCK_K
    k_lo, k_hi = split_k_range(K_ITERS, SPLIT_K)

    if len(PROLOGUE) > 0:
        n_lo, n_hi = tile_images(n, m_ok)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for kb in range(k_lo, k_hi):
        offs_k = kb * BLOCK_K + tl.arange(0, BLOCK_K)
        if IN_CL:
            c = offs_k % C_IN
            tap = offs_k // C_IN
        else:
            c = offs_k // TAPS
            tap = offs_k % TAPS
        cols = (
            c * s_c
            + (tap // (KH * KW)) * (DD * s_d)
            + ((tap // KW) % KH) * (DH * s_h)
            + (tap % KW) * (DW * s_w)
        )
        if K_TOTAL % BLOCK_K == 0:
            a_ok = m_ok[:, None]
        else:
            a_ok = m_ok[:, None] & (offs_k < K_TOTAL)[None, :]
        a = tl.load(x_ptr + rows[:, None] + cols[None, :], mask=a_ok, other=0.0)
        if len(PROLOGUE) > 0:  # a fused chain on the input (squeeze-excitation's scale), per (image, channel)
            a = apply_prologue(
                a, n, n_lo, n_hi, c, c < C_IN, a_ok, p1_ptr, p1_sn, p1_sc, p2_ptr, p2_sn, p2_sc, p3_ptr, p3_sn, p3_sc,
                PROLOGUE, P_KINDS, P_IMAGES,
            )  # fmt: skip
        if ROUND_TF32:  # fp32 with TF32: round to nearest, not the MMA's truncation (_tf32.py)
            a = round_to_tf32(a, ROUND_TF32)
        b = tl.load(weight_ptrs(w_ptr, offs_k, offs_n, K_P, COUT_P, W_KMAJOR))
        acc = tl.dot(a, b, acc, input_precision=PRECISION)

    pixel = offs_m % out_pixels
    store_tile(
        y_ptr, b_ptr, ws_ptr, cnt_ptr, acc, n, pixel, m_ok, offs_n, 0, C_OUT, C_OUT, M, out_pixels,
        e1_ptr, e1_sn, e1_sc, e2_ptr, e2_sn, e2_sc, e3_ptr, e3_sn, e3_sc, HAS_BIAS, OUT_CL, SPLIT_K, PROGRAM, E_KINDS,
    )  # fmt: skip


# (BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages) for 16-bit dtypes; fp32 halves BLOCK_K of the big tiles.
_BASE_CONFIGS = load_rows(__file__, "GEMM_CONFIGS", TILE_FIELDS)


class GemmTemplate(GemmShapedTemplate):
    """Unpadded 1x1 / patchify convolutions as GEMMs with separable addressing (see module docstring)."""

    def __init__(self) -> None:
        self.name = "gemm"

    def family_support(self, problem: ConvProblem) -> Support:
        p = problem.params
        if p.groups != 1:
            return Support.no("grouped convolutions go to the implicit GEMM")
        if any(p.padding_before) or any(p.padding_after):
            return Support.no("padded convolutions go to the implicit GEMM")
        for k, s, d in zip(problem.kernel, p.stride, p.dilation, strict=True):
            if not (k == 1 or (k == s and d == 1)):
                return Support.no("only 1x1 and kernel == stride (patchify) convolutions are plain GEMMs")
        return Support.yes()

    def schedules(self, problem: ConvProblem) -> list[Schedule]:
        g = Geometry.of(problem)
        fp32 = problem.dtype == "float32"
        out: list[Schedule] = []
        for bm, bn, bk, warps, stages in _BASE_CONFIGS:
            if fp32 and bm * bn >= 128 * 128 and bk > 32:
                bk = 32
            s = Schedule.make(
                warps,
                stages,
                BLOCK_M=fit_block(bm, g.m),
                BLOCK_N=fit_block(bn, g.cout),
                BLOCK_K=fit_block(bk, g.taps * g.cin),
                GROUP_M=GROUP_M,
            )
            if s not in out:
                out.append(s)
        for bm, bn, bk, warps, stages in SPLIT_CONFIGS:
            if fp32 and bm * bn >= 128 * 128:
                bk = 32
            bm, bn, bk = fit_block(bm, g.m), fit_block(bn, g.cout), fit_block(bk, g.taps * g.cin)
            programs = cdiv(g.m, bm) * cdiv(g.cout, bn)
            for split in split_options(g, programs, cdiv(g.taps * g.cin, bk)):
                s = Schedule.make(
                    warps, stages, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=GROUP_M, SPLIT_K=split
                )
                if s not in out:
                    out.append(s)
        heuristic = self.heuristic_schedule(problem)
        if heuristic not in out:  # the heuristic's pick is always part of the space
            out.insert(0, heuristic)
        return out

    def heuristic_schedule(self, problem: ConvProblem) -> Schedule:
        g = Geometry.of(problem)
        fp32 = problem.dtype == "float32"
        # Same rules as the implicit GEMM's (fitted to H200 measurements, docs/performance.md).
        bn = fit_block(128, g.cout)
        bm = 128 if cdiv(g.m, 128) * cdiv(g.cout, bn) >= 2 * NUM_SMS else 64
        bm = fit_block(bm, g.m)
        bk = fit_block(32 if fp32 else 64, g.taps * g.cin)
        big = bm * bn >= 128 * 128
        warps = 8 if big else 4
        stages = 3 if big else 4
        # Too few tiles for a long reduction: split K (64x64 tiles, the split that fills a wave; _splitk.py).
        bm2, bn2, bk2 = fit_block(64, g.m), fit_block(64, g.cout), fit_block(64, g.taps * g.cin)
        if cdiv(g.m, bm) * cdiv(g.cout, bn) * 2 <= NUM_SMS and cdiv(g.taps * g.cin, bk2) >= 16:
            splits = split_options(g, cdiv(g.m, bm2) * cdiv(g.cout, bn2), cdiv(g.taps * g.cin, bk2))
            if splits:
                return Schedule.make(
                    4, 3, BLOCK_M=bm2, BLOCK_N=bn2, BLOCK_K=bk2, GROUP_M=GROUP_M, SPLIT_K=splits[-1]
                )
        return Schedule.make(warps, stages, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=GROUP_M)

    def takes_epilogue(self, problem: ConvProblem, schedule: Schedule) -> bool:
        return True  # in the kernel's store (with split-K, the last share's)

    def takes_prologue(self, problem: ConvProblem, schedule: Schedule) -> bool:
        # On each A tile as it is loaded, whatever the split; on long reductions only a cheap chain (gemm_common).
        return self.prologue_pays(problem)

    def scratch(self, problem: ConvProblem, schedule: Schedule) -> list[ScratchTensor]:
        return split_scratch(problem, schedule, self._tiles(problem, schedule))

    @staticmethod
    def _tiles(problem: ConvProblem, schedule: Schedule) -> int:
        """Output tiles: the programs of grid axis 0."""
        g = Geometry.of(problem)
        return cdiv(g.m, schedule["BLOCK_M"]) * cdiv(g.cout, schedule["BLOCK_N"])

    def prepare_weight(self, weight: torch.Tensor, problem: ConvProblem, schedule: Schedule) -> torch.Tensor:
        """(C_out, C_in, *k) -> [K_P, COUT_P]: rows (tap, c) for channels-last input, (c, tap) otherwise."""
        g = Geometry.of(problem)
        weight = prepare_tf32_weight(weight.detach(), problem)  # rounded once here, never at run time
        w = weight.reshape(g.cout, g.cin, g.taps)
        w = w.permute(2, 1, 0) if g.in_cl else w.permute(1, 2, 0)  # [taps, cin, cout] or [cin, taps, cout]
        k_total = g.taps * g.cin
        bk, bn = schedule["BLOCK_K"], schedule["BLOCK_N"]
        out = weight.new_zeros((cdiv(k_total, bk) * bk, cdiv(g.cout, bn) * bn))
        out[:k_total, : g.cout] = w.reshape(k_total, g.cout)
        if weight_k_major(problem):  # [K_P, COUT_P] -> [COUT_P, K_P]
            return out.t().contiguous()
        return out.contiguous()

    def launches(self, problem: ConvProblem, schedule: Schedule) -> list[KernelLaunch]:
        g = Geometry.of(problem)
        split = split_k_of(schedule)
        dt = problem.ptr_dtype
        (d, h, w), (od, oh, ow) = g.spatial, g.out_spatial
        args = (
            TensorArg("input", dt),
            TensorArg("weight", dt),
            TensorArg("bias", dt),
            TensorArg("output", dt),
            *split_k_args(split, TensorArg("output", dt)),
            *size_args(BATCH=g.batch, D=d, H=h, W=w, OD=od, OH=oh, OW=ow),
            *epilogue_args(problem),
            *prologue_args(problem),
        )
        bm, bn = schedule["BLOCK_M"], schedule["BLOCK_N"]
        constexprs = (
            ("C_IN", g.cin),
            ("C_OUT", g.cout),
            ("K_P", cdiv(g.taps * g.cin, schedule["BLOCK_K"]) * schedule["BLOCK_K"]),
            ("COUT_P", cdiv(g.cout, bn) * bn),
            ("W_KMAJOR", weight_k_major(problem)),
            *dim_constexprs(K=g.kernel, S=g.stride, D=g.dilation),
            ("IN_CL", g.in_cl),
            ("OUT_CL", g.out_cl),
            ("HAS_BIAS", problem.has_bias),
            ("INT64", g.int64),
            *dot_constexprs(problem),
            *tile_constexprs(schedule),
            ("SPLIT_K", split),
            *epilogue_constexprs(problem),
            *prologue_constexprs(problem, prologue_images(problem, bm)),
        )
        grid = (self._tiles(problem, schedule), 1, split)
        return [
            KernelLaunch(conv_gemm_kernel, args, constexprs, grid, schedule.num_warps, schedule.num_stages)
        ]


TEMPLATES = [GemmTemplate()]
