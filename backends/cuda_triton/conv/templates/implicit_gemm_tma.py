"""Implicit GEMM with TMA loads, for stride-1 forward convolutions (1-D/2-D/3-D, any dilation and padding).

Hopper's tensor cores are fed best by TMA: a copy engine moves a whole tile from global to shared memory, with
no address arithmetic in the kernel's warps, and Triton then pipelines those copies into ``wgmma``. A TMA copy
is a rectangle of a tensor, not a gather, so the input is first copied into a zero-padded channels-last matrix
X = [N * DP * HP * WP, C_in] (_pad_copy.py). With stride 1, output pixel (od, oh, ow) of image n has row
r = n * DP*HP*WP + od * HP*WP + oh * WP + ow of X as its first tap, and tap (kd, kh, kw) is row
r + kd*DD*HP*WP + kh*DH*WP + kw*DW: one constant shift per tap. So a program's A tile for a tap is one TMA box
of BLOCK_M consecutive rows, and its B tile a box of the prepared weight [taps * CIN_P, COUT_P].

The M axis of a program is BLOCK_M consecutive rows of the *padded* grid, so rows with oh >= OH or ow >= OW
(the right and bottom borders) are computed and not stored: (WP / OW) * (HP / OH) more MMAs than the output
needs, which the faster main loop repays on the large compute-bound layers this template is for (the tuner
decides). Channels beyond C_in and rows beyond the end of X are zero-filled by the TMA unit.

Triton's warp specialisation of the main loop (a TMA producer warp, MMA consumer warps) was measured on the
H200 and lost on every public-suite case, so it is not offered.

Kernel arguments (PTX order): x_pad, w, bias, y pointers, then int32 BATCH, OD, OH, OW, DP, HP, WP.
Grid: (BATCH * cdiv(SPAN, BLOCK_M) * cdiv(C_OUT, BLOCK_N), 1, 1), SPAN = (OD-1)*HP*WP + (OH-1)*WP + OW.
The descriptors are made on the device (``tl.make_tensor_descriptor``): Triton's global scratch holds them
(128 bytes each per program; the C++ runtime allocates it from the kernel's metadata). Compiled for sm_80, the
same kernel uses ordinary loads (Triton lowers descriptors there), so it stays correct everywhere.

Prepared weight: the implicit GEMM's ([taps, CIN_P, COUT_P]).

fp16 and bf16 only: fp32 tiles (TF32, rounded in registers) gave wrong results on the H200 with Triton 3.6 for
most public-suite schedules, 128-byte rows included, so ``supports`` refuses fp32, which
runs the implicit GEMM (on fp16 tensor cores where that pays, _f16_mma.py).
"""

from __future__ import annotations

import triton
import triton.language as tl

from ...kernel.launch import KernelLaunch, Schedule, ScratchTensor, Support, TensorArg, cdiv
from ...kernel.spaces import TILE_FIELDS, load_rows
from ..problem import ConvProblem
from ._pad_copy import input_pad, pad_copy_launch, padded_extent
from ._tf32 import round_to_tf32
from .gemm_common import GROUP_M, dot_constexprs, tile_constexprs, tma_tap_problems, weight_k_major
from .gemm_jit import grouped_tile_ids, store_output
from .geometry import INT32_MAX, NUM_SMS, Geometry, fit_block
from .implicit_gemm import TapMajorWeightTemplate
from .launch_args import channel_constexprs, dim_constexprs, size_args


@triton.jit
def conv_tma_implicit_gemm_kernel(
    x_ptr, w_ptr, b_ptr, y_ptr,
    BATCH, OD, OH, OW, DP, HP, WP,
    C_IN: tl.constexpr, C_OUT: tl.constexpr, CIN_P: tl.constexpr, COUT_P: tl.constexpr, K_ROWS: tl.constexpr,
    KD: tl.constexpr, KH: tl.constexpr, KW: tl.constexpr,
    DD: tl.constexpr, DH: tl.constexpr, DW: tl.constexpr,
    OUT_CL: tl.constexpr, HAS_BIAS: tl.constexpr, W_KMAJOR: tl.constexpr,
    PRECISION: tl.constexpr, ROUND_TF32: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
):  # fmt: skip
    plane = HP * WP
    image_rows = DP * plane
    span = (OD - 1) * plane + (OH - 1) * WP + OW
    tiles_per_image = (span + BLOCK_M - 1) // BLOCK_M
    pid_m, pid_n = grouped_tile_ids(
        tl.program_id(0), BATCH * tiles_per_image, (C_OUT + BLOCK_N - 1) // BLOCK_N, GROUP_M
    )
    n = pid_m // tiles_per_image
    r0 = (pid_m % tiles_per_image) * BLOCK_M  # first padded-grid row of this tile, within image n
    row0 = n * image_rows + r0
    n0 = pid_n * BLOCK_N

    x_desc = tl.make_tensor_descriptor(
        x_ptr, shape=[BATCH * image_rows, C_IN], strides=[C_IN, 1], block_shape=[BLOCK_M, BLOCK_K]
    )
    if W_KMAJOR:
        w_desc = tl.make_tensor_descriptor(
            w_ptr, shape=[COUT_P, K_ROWS], strides=[K_ROWS, 1], block_shape=[BLOCK_N, BLOCK_K]
        )
    else:
        w_desc = tl.make_tensor_descriptor(
            w_ptr, shape=[K_ROWS, COUT_P], strides=[COUT_P, 1], block_shape=[BLOCK_K, BLOCK_N]
        )

    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    C_BLOCKS: tl.constexpr = CIN_P // BLOCK_K
    for i in range(KD * KH * KW * C_BLOCKS):
        tap = i // C_BLOCKS
        shift = (tap // (KH * KW)) * DD * plane + ((tap // KW) % KH) * DH * WP + (tap % KW) * DW
        a = x_desc.load([row0 + shift, (i % C_BLOCKS) * BLOCK_K])
        if ROUND_TF32:  # fp32 with TF32: round to nearest, not the MMA's truncation (_tf32.py)
            a = round_to_tf32(a, ROUND_TF32)
        # Weight row i * BLOCK_K == tap * CIN_P + channel block: the prepared matrix is [taps, CIN_P] rows.
        if W_KMAJOR:
            b = w_desc.load([n0, i * BLOCK_K]).T
        else:
            b = w_desc.load([i * BLOCK_K, n0])
        acc = tl.dot(a, b, acc, input_precision=PRECISION)

    r = r0 + tl.arange(0, BLOCK_M)
    ow = r % WP
    oh = (r // WP) % HP
    od = r // plane
    m_ok = (ow < OW) & (oh < OH) & (od < OD)
    pixel = (od * OH + oh) * OW + ow
    offs_n = n0 + tl.arange(0, BLOCK_N)
    store_output(y_ptr, b_ptr, acc, n, pixel, m_ok, offs_n, 0, C_OUT, C_OUT, OD * OH * OW, HAS_BIAS, OUT_CL)


# ---- tuning space ------------------------------------------------------------------------------------------
# (BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages).
_CONFIGS = load_rows(__file__, "IMPLICIT_GEMM_TMA_CONFIGS", TILE_FIELDS)


def span_rows(g: Geometry) -> int:
    """Padded-grid rows from an image's first output pixel to its last (the M extent of one image)."""
    _, hp, wp = padded_extent(g)
    od, oh, ow = g.out_spatial
    return (od - 1) * hp * wp + (oh - 1) * wp + ow


class ImplicitGemmTmaTemplate(TapMajorWeightTemplate):
    """TMA-fed implicit GEMM for dense stride-1 convolutions (see module docstring)."""

    def __init__(self) -> None:
        self.name = "implicit_gemm_tma"

    def family_support(self, problem: ConvProblem) -> Support:
        if problem.dtype == "float32":
            # Triton 3.6 on the H200: fp32 TMA tiles (rounded to TF32 in registers) gave wrong results for most
            # schedules of the public suite (errors 3-80x the bound), 128-byte rows included.
            return Support.no(
                "float32 (its TMA kernels miscompute on Triton 3.6; fp32 runs the implicit GEMM)"
            )
        reason = tma_tap_problems(problem)
        if reason:
            return Support.no(reason)
        g = Geometry.of(problem)
        dp, hp, wp = padded_extent(g)
        padded = g.batch * dp * hp * wp * g.cin
        if g.int64 or padded > INT32_MAX or g.batch * dp * hp * wp * 2 > INT32_MAX:
            return Support.no("tensors beyond 32-bit offsets")
        return Support.yes()

    def _schedule(self, problem: ConvProblem, bm: int, bn: int, bk: int, warps: int, stages: int) -> Schedule:
        g = Geometry.of(problem)
        bm, bn, bk = fit_block(bm, span_rows(g)), fit_block(bn, g.cout), fit_block(bk, g.cin)
        return Schedule.make(warps, stages, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=GROUP_M)

    def schedules(self, problem: ConvProblem) -> list[Schedule]:
        out = [self._schedule(problem, *c) for c in _CONFIGS]
        out = list(dict.fromkeys(out))
        heuristic = self.heuristic_schedule(problem)
        if heuristic not in out:
            out.insert(0, heuristic)
        return out

    def heuristic_schedule(self, problem: ConvProblem) -> Schedule:
        g = Geometry.of(problem)
        bn = 128 if g.cout >= 128 else 64
        tiles = g.batch * cdiv(span_rows(g), 128) * cdiv(g.cout, bn)
        bm = 128 if tiles >= NUM_SMS else 64
        warps = 8 if bm * bn >= 128 * 128 else 4
        return self._schedule(problem, bm, bn, 64, warps, 4)

    # -- weight and launches -------------------------------------------------------------------------------
    def scratch(self, problem: ConvProblem, schedule: Schedule) -> list[ScratchTensor]:
        return [input_pad(problem)]

    def launches(self, problem: ConvProblem, schedule: Schedule) -> list[KernelLaunch]:
        g = Geometry.of(problem)
        taps, cin_p, cout_p = self.tap_major_shape(problem, schedule)
        dp, hp, wp = padded_extent(g)
        od, oh, ow = g.out_spatial
        dt = problem.ptr_dtype
        args = (
            TensorArg("input_pad", dt),
            TensorArg("weight", dt),
            TensorArg("bias", dt),
            TensorArg("output", dt),
            *size_args(BATCH=g.batch, OD=od, OH=oh, OW=ow, DP=dp, HP=hp, WP=wp),
        )
        bm, bn = schedule["BLOCK_M"], schedule["BLOCK_N"]
        constexprs = (
            *channel_constexprs(g.cin, g.cout, cin_p, cout_p),
            ("K_ROWS", taps * cin_p),
            *dim_constexprs(K=g.kernel, D=g.dilation),
            ("OUT_CL", g.out_cl),
            ("HAS_BIAS", problem.has_bias),
            ("W_KMAJOR", weight_k_major(problem)),
            *dot_constexprs(problem),
            *tile_constexprs(schedule),
        )
        grid = (g.batch * cdiv(span_rows(g), bm) * cdiv(g.cout, bn), 1, 1)
        main = KernelLaunch(
            conv_tma_implicit_gemm_kernel, args, constexprs, grid, schedule.num_warps, schedule.num_stages
        )
        return [pad_copy_launch(problem), main]


TEMPLATES = [ImplicitGemmTmaTemplate()]
