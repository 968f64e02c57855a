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
H200 and lost on every public-suite case (2026-12-03), so it is not offered.

Kernel arguments (PTX order): x_pad, w, bias, y pointers, then int32 BATCH, OD, OH, OW, DP, HP, WP.
Grid: (BATCH * cdiv(SPAN, BLOCK_M) * cdiv(C_OUT, BLOCK_N), 1, 1), SPAN = (OD-1)*HP*WP + (OH-1)*WP + OW.
The descriptors are made on the device (``tl.make_tensor_descriptor``): Triton's global scratch holds them
(128 bytes each per program; the C++ runtime allocates it from the kernel's metadata). Compiled for sm_80, the
same kernel uses ordinary loads (Triton lowers descriptors there), so it stays correct everywhere.

Prepared weight: the implicit GEMM's ([taps, CIN_P, COUT_P]).

fp16 and bf16 only: fp32 tiles (TF32, rounded in registers) gave wrong results on the H200 with Triton 3.6 for
most public-suite schedules, 128-byte rows included (2026-12-03 re-tunes), so ``supports`` refuses fp32, which
runs the implicit GEMM (on fp16 tensor cores where that pays, _f16_mma.py).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ..problem import ConvProblem
from ._geometry import (
    INT32_LIMIT,
    NUM_SMS,
    Geometry,
    common_support_problems,
    dot_precision,
    fit_block,
    weight_k_major,
)
from ._pad_copy import input_pad, pad_copy_launch, padded_extent
from ._tf32 import round_to_tf32, tf32_rounding
from .base import (
    TRITON_PTR_DTYPE,
    ConvTemplate,
    KernelLaunch,
    ScalarArg,
    Schedule,
    ScratchTensor,
    Support,
    TensorArg,
    cdiv,
)
from .implicit_gemm import ImplicitGemmTemplate, _swizzle, store_output


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
    pid_m, pid_n = _swizzle(
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


@triton.jit
def conv_tma_flat_kernel(
    x_ptr, w_ptr, b_ptr, y_ptr, corr_ptr,
    BATCH, H, W,
    C_IN: tl.constexpr, C_OUT: tl.constexpr, CIN_P: tl.constexpr, COUT_P: tl.constexpr, K_ROWS: tl.constexpr,
    KH: tl.constexpr, KW: tl.constexpr, PH: tl.constexpr, PW: tl.constexpr, DH: tl.constexpr, DW: tl.constexpr,
    LEFT: tl.constexpr, RIGHT: tl.constexpr, OUT_CL: tl.constexpr, HAS_BIAS: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
    NUM_PROGS: tl.constexpr, FLATTEN: tl.constexpr,
):  # fmt: skip
    """FLAT schedules: "same"-size 1-D/2-D convs read straight from the channels-last input, no padded copy.

    An image is the matrix [H * W, C_IN] and tap (kh, kw) is the row shift (kh*DH - PH) * W + kw*DW - PW, so each
    A tile is one TMA box of a 3-D descriptor [BATCH, H * W, C_IN]: rows above or below the image fall outside
    it and are zero-filled. A tap whose column leaves the image (the left and right padding) instead reads the
    neighbouring row's far end; `wrap_correction_kernel` has summed exactly those products for the LEFT + RIGHT
    border columns into corr (fp32), and the epilogue subtracts them before rounding. NUM_PROGS programs walk
    the tiles (persistent, one pipeline over tiles and K, when FLATTEN)."""
    plane = H * W
    tiles_per_image = (plane + BLOCK_M - 1) // BLOCK_M
    num_m = BATCH * tiles_per_image
    num_n = (C_OUT + BLOCK_N - 1) // BLOCK_N
    x_desc = tl.make_tensor_descriptor(
        x_ptr, shape=[BATCH, plane, C_IN], strides=[plane * C_IN, C_IN, 1], block_shape=[1, BLOCK_M, BLOCK_K]
    )
    w_desc = tl.make_tensor_descriptor(
        w_ptr, shape=[K_ROWS, COUT_P], strides=[COUT_P, 1], block_shape=[BLOCK_K, BLOCK_N]
    )
    C_BLOCKS: tl.constexpr = CIN_P // BLOCK_K
    for t in tl.range(tl.program_id(0), num_m * num_n, NUM_PROGS, flatten=FLATTEN):
        pid_m, pid_n = _swizzle(t, num_m, num_n, GROUP_M)
        n = pid_m // tiles_per_image
        p0 = (pid_m % tiles_per_image) * BLOCK_M
        co0 = pid_n * BLOCK_N
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for i in range(KH * KW * C_BLOCKS):
            tap = i // C_BLOCKS
            shift = ((tap // KW) * DH - PH) * W + (tap % KW) * DW - PW
            a = x_desc.load([n, p0 + shift, (i % C_BLOCKS) * BLOCK_K]).reshape(BLOCK_M, BLOCK_K)
            acc = tl.dot(a, w_desc.load([i * BLOCK_K, co0]), acc)
        p = p0 + tl.arange(0, BLOCK_M)
        m_ok = p < plane
        co = co0 + tl.arange(0, BLOCK_N)
        if LEFT + RIGHT > 0:
            w = p % W
            border = m_ok & ((w < LEFT) | (w >= W - RIGHT))
            j = tl.where(w < LEFT, w, w - (W - RIGHT) + LEFT)
            corr_rows = (n * H + p // W) * (LEFT + RIGHT) + j
            acc -= tl.load(
                corr_ptr + corr_rows[:, None] * C_OUT + co[None, :],
                mask=border[:, None] & (co < C_OUT)[None, :],
                other=0.0,
            )
        store_output(y_ptr, b_ptr, acc, n, p, m_ok, co, 0, C_OUT, C_OUT, plane, HAS_BIAS, OUT_CL)


@triton.jit
def wrap_correction_kernel(
    x_ptr, w_ptr, corr_ptr, BATCH, H, W,
    C_IN: tl.constexpr, C_OUT: tl.constexpr, CIN_P: tl.constexpr, COUT_P: tl.constexpr,
    KH: tl.constexpr, KW: tl.constexpr, PH: tl.constexpr, PW: tl.constexpr, DH: tl.constexpr, DW: tl.constexpr,
    LEFT: tl.constexpr, RIGHT: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
):  # fmt: skip
    """corr[n, h, j, :] = what conv_tma_flat_kernel wrongly adds at border column j of row h: the products of the
    taps whose column leaves the image with the values its flat row shift reads instead (zero outside the image).
    Grid: (cdiv(BATCH * H, BLOCK_M), LEFT + RIGHT, cdiv(C_OUT, BLOCK_N))."""
    j = tl.program_id(1)
    w = tl.where(j < LEFT, j, W - RIGHT + (j - LEFT))
    # The taps whose column leaves the image are kw in [kw_lo, kw_hi): left of it for the left columns, right of
    # it for the right ones. One flat K loop over (kh, kw in that range, channel block), so Triton pipelines it.
    kw_lo = tl.where(j < LEFT, 0, (W + PW - w + DW - 1) // DW)
    kw_hi = tl.where(j < LEFT, (PW - w + DW - 1) // DW, KW)
    n_kw = kw_hi - kw_lo
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)  # (image, output row) pairs
    rows_ok = rows < BATCH * H
    n = rows // H
    h = rows % H
    co = tl.program_id(2) * BLOCK_N + tl.arange(0, BLOCK_N)
    C_BLOCKS: tl.constexpr = CIN_P // BLOCK_K
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for i in range(0, KH * n_kw * C_BLOCKS):
        kh = i // (n_kw * C_BLOCKS)
        kw = kw_lo + (i // C_BLOCKS) % n_kw
        c = (i % C_BLOCKS) * BLOCK_K + tl.arange(0, BLOCK_K)
        q = (h + kh * DH - PH) * W + w + kw * DW - PW  # the flat row the main kernel read
        q_ok = rows_ok & (q >= 0) & (q < H * W)
        a = tl.load(
            x_ptr + ((n * H * W + q) * C_IN)[:, None] + c[None, :],
            mask=q_ok[:, None] & (c < C_IN)[None, :],
            other=0.0,
        )
        b = tl.load(
            w_ptr + ((kh * KW + kw) * CIN_P + c)[:, None] * COUT_P + co[None, :], mask=(co < C_OUT)[None, :]
        )
        acc = tl.dot(a, b, acc)
    out = corr_ptr + ((n * H + h) * (LEFT + RIGHT) + j)[:, None] * C_OUT + co[None, :]
    tl.store(out, acc, mask=rows_ok[:, None] & (co < C_OUT)[None, :])


# ---- tuning space ------------------------------------------------------------------------------------------
# (BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages).
_CONFIGS: tuple[tuple[int, int, int, int, int], ...] = (
    (128, 256, 64, 8, 3),
    (128, 128, 64, 8, 4),
    (128, 128, 64, 8, 3),
    (128, 128, 64, 4, 4),
    (128, 64, 64, 4, 4),
    (64, 128, 64, 4, 4),
    (64, 64, 64, 4, 4),
)
_GROUP_M = 8
# FLAT schedules (BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages, programs per SM; 0 = one tile per program).
# H200, vgg.3x3.256 fp16 main loop (scripts/exp_mainloop.py, 2026-12-03): 128 x 256 x 3 stages persistent 52 us,
# one tile per program 54 us, the implicit GEMM's best 57 us.
_FLAT_CONFIGS: tuple[tuple[int, int, int, int, int, int], ...] = (
    (128, 256, 64, 8, 3, 1),
    (128, 256, 64, 8, 3, 0),
    (128, 128, 64, 8, 4, 1),
    (128, 128, 64, 8, 3, 0),
    (256, 128, 64, 8, 3, 1),
)
# wrap_correction_kernel's tile (few rows: two border columns per image row).
_CORR_BLOCK_M, _CORR_BLOCK_N, _CORR_BLOCK_K, _CORR_WARPS = 64, 64, 64, 4


def wrap_columns(g: Geometry) -> tuple[int, int]:
    """(LEFT, RIGHT): border columns of a FLAT conv where some tap's column leaves the image (none in 1-D: a
    flat shift past either end of a 1-row image is outside the descriptor, zero-filled)."""
    if g.spatial[1] == 1:
        return 0, 0
    return g.pad[2], (g.kernel[2] - 1) * g.dilation[2] - g.pad[2]


def flat_eligible(g: Geometry) -> bool:
    """FLAT schedules need a 1-D/2-D channels-last input and an output of the input's size (a tap is then one
    row shift of the image matrix; the border columns it wraps are corrected)."""
    left, right = wrap_columns(g)
    same = g.out_spatial == g.spatial and g.kernel[0] == 1
    # (left and right border columns must not overlap: each is corrected for its own side's taps only)
    return same and g.in_cl and left >= 0 and right >= 0 and left + right <= g.spatial[2]


def span_rows(g: Geometry) -> int:
    """Padded-grid rows from an image's first output pixel to its last (the M extent of one image)."""
    _, hp, wp = padded_extent(g)
    od, oh, ow = g.out_spatial
    return (od - 1) * hp * wp + (oh - 1) * wp + ow


class ImplicitGemmTmaTemplate(ConvTemplate):
    """TMA-fed implicit GEMM for dense stride-1 convolutions (see module docstring)."""

    def __init__(self) -> None:
        self.name = "implicit_gemm_tma"

    def supports(self, problem: ConvProblem) -> Support:
        reason = common_support_problems(problem)
        if reason:
            return Support.no(reason)
        p = problem.params
        if any(s != 1 for s in p.stride):
            return Support.no("only stride 1 (a tap must be a constant row shift of the padded input)")
        if p.groups != 1:
            return Support.no("only groups == 1")
        if any(v < 0 for v in (*p.padding_before, *p.padding_after)):
            return Support.no("negative padding")
        if problem.dtype == "float32":
            # Triton 3.6 on the H200: fp32 TMA tiles (rounded to TF32 in registers) gave wrong results for most
            # schedules of the public suite (errors 3-80x the bound, 06:48 UTC re-tune), 128-byte rows included.
            return Support.no(
                "float32 (its TMA kernels miscompute on Triton 3.6; fp32 runs the implicit GEMM)"
            )
        if problem.in_channels * problem.element_size % 16:
            return Support.no("a TMA row must be a multiple of 16 bytes (input channels)")
        g = Geometry.of(problem)
        dp, hp, wp = padded_extent(g)
        padded = g.batch * dp * hp * wp * g.cin
        if g.int64 or padded > INT32_LIMIT or g.batch * dp * hp * wp * 2 > INT32_LIMIT:
            return Support.no("tensors beyond 32-bit offsets")
        return Support.yes()

    def worth_routing(self, problem: ConvProblem) -> bool:
        return bool(self.supports(problem))

    def _schedule(
        self,
        problem: ConvProblem,
        bm: int,
        bn: int,
        bk: int,
        warps: int,
        stages: int,
    ) -> Schedule:
        g = Geometry.of(problem)
        bm, bn, bk = fit_block(bm, span_rows(g)), fit_block(bn, g.cout), fit_block(bk, g.cin)
        return Schedule.make(warps, stages, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=_GROUP_M)

    def _flat_schedule(
        self, problem: ConvProblem, bm: int, bn: int, bk: int, warps: int, stages: int, per_sm: int
    ) -> Schedule:
        g = Geometry.of(problem)
        bm, bn = fit_block(bm, g.spatial[1] * g.spatial[2]), fit_block(bn, g.cout)
        params = dict(BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=fit_block(bk, g.cin), GROUP_M=_GROUP_M, FLAT=1)
        return Schedule.make(warps, stages, **params, **({"PERSISTENT": per_sm} if per_sm else {}))

    def schedules(self, problem: ConvProblem) -> list[Schedule]:
        out = [self._schedule(problem, *c) for c in _CONFIGS]
        if flat_eligible(Geometry.of(problem)):
            out += [self._flat_schedule(problem, *c) for c in _FLAT_CONFIGS]
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
    def _gemm_schedule(self, schedule: Schedule) -> Schedule:
        """The implicit GEMM schedule whose prepared weight this one reads (one group tile, tap-major rows)."""
        return Schedule.make(
            schedule.num_warps,
            schedule.num_stages,
            BLOCK_M=schedule["BLOCK_M"],
            BLOCK_N=schedule["BLOCK_N"],
            BLOCK_K=schedule["BLOCK_K"],
            GROUP_M=_GROUP_M,
            GROUP_TILE=1,
            FLAT_K=0,
            ROW_TILES=0,
        )

    def prepare_weight(self, weight: torch.Tensor, problem: ConvProblem, schedule: Schedule) -> torch.Tensor:
        return _IMPLICIT_GEMM.prepare_weight(weight, problem, self._gemm_schedule(schedule))

    def scratch(self, problem: ConvProblem, schedule: Schedule) -> list[ScratchTensor]:
        if not dict(schedule.params).get("FLAT", 0):
            return [input_pad(problem)]
        g = Geometry.of(problem)
        left, right = wrap_columns(g)
        if left + right == 0:
            return []
        # the border columns' wrapped products: [N * H, LEFT + RIGHT, C_out] fp32
        return [ScratchTensor("workspace", "float32", (g.batch * g.spatial[1], left + right, g.cout))]

    def _flat_launches(self, problem: ConvProblem, schedule: Schedule) -> list[KernelLaunch]:
        g = Geometry.of(problem)
        if not flat_eligible(g):
            raise ValueError(
                "FLAT schedules need a 1-D/2-D channels-last conv whose output has the input's size"
            )
        _, taps, cin_p, cout_p = _IMPLICIT_GEMM.prepared_shape(problem, self._gemm_schedule(schedule))
        left, right = wrap_columns(g)
        dt = TRITON_PTR_DTYPE[problem.dtype]
        _, h, w = g.spatial
        sizes = tuple(ScalarArg(nm, "i32", v) for nm, v in (("BATCH", g.batch), ("H", h), ("W", w)))
        geometry = (
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
            ("LEFT", left),
            ("RIGHT", right),
        )
        bm, bn = schedule["BLOCK_M"], schedule["BLOCK_N"]
        tiles = g.batch * cdiv(h * w, bm) * cdiv(g.cout, bn)
        per_sm = dict(schedule.params).get("PERSISTENT", 0)
        programs = min(tiles, NUM_SMS * per_sm) if per_sm else tiles
        corr = TensorArg("workspace", "fp32") if left + right else TensorArg("output", dt)
        main = KernelLaunch(
            conv_tma_flat_kernel,
            (
                TensorArg("input", dt),
                TensorArg("weight", dt),
                TensorArg("bias", dt),
                TensorArg("output", dt),
                corr,
            )
            + sizes,
            (
                *geometry[:4],
                ("K_ROWS", taps * cin_p),
                *geometry[4:],
                ("OUT_CL", g.out_cl),
                ("HAS_BIAS", problem.has_bias),
                ("BLOCK_M", bm),
                ("BLOCK_N", bn),
                ("BLOCK_K", schedule["BLOCK_K"]),
                ("GROUP_M", schedule["GROUP_M"]),
                ("NUM_PROGS", programs),
                ("FLATTEN", programs < tiles),
            ),
            (programs, 1, 1),
            schedule.num_warps,
            schedule.num_stages,
        )
        if left + right == 0:
            return [main]
        correction = KernelLaunch(
            wrap_correction_kernel,
            (TensorArg("input", dt), TensorArg("weight", dt), TensorArg("workspace", "fp32")) + sizes,
            (
                *geometry,
                ("BLOCK_M", _CORR_BLOCK_M),
                ("BLOCK_N", _CORR_BLOCK_N),
                ("BLOCK_K", min(_CORR_BLOCK_K, schedule["BLOCK_K"])),
            ),
            (cdiv(g.batch * h, _CORR_BLOCK_M), left + right, cdiv(g.cout, _CORR_BLOCK_N)),
            _CORR_WARPS,
            2,
        )
        return [correction, main]

    def launches(self, problem: ConvProblem, schedule: Schedule) -> list[KernelLaunch]:
        if dict(schedule.params).get("FLAT", 0):
            return self._flat_launches(problem, schedule)
        g = Geometry.of(problem)
        _, taps, cin_p, cout_p = _IMPLICIT_GEMM.prepared_shape(problem, self._gemm_schedule(schedule))
        dp, hp, wp = padded_extent(g)
        od, oh, ow = g.out_spatial
        dt = TRITON_PTR_DTYPE[problem.dtype]
        args = (
            TensorArg("input_pad", dt),
            TensorArg("weight", dt),
            TensorArg("bias", dt),
            TensorArg("output", dt),
            *(
                ScalarArg(nm, "i32", v)
                for nm, v in (
                    ("BATCH", g.batch),
                    ("OD", od),
                    ("OH", oh),
                    ("OW", ow),
                    ("DP", dp),
                    ("HP", hp),
                    ("WP", wp),
                )
            ),
        )
        bm, bn = schedule["BLOCK_M"], schedule["BLOCK_N"]
        constexprs = (
            ("C_IN", g.cin),
            ("C_OUT", g.cout),
            ("CIN_P", cin_p),
            ("COUT_P", cout_p),
            ("K_ROWS", taps * cin_p),
            ("KD", g.kernel[0]),
            ("KH", g.kernel[1]),
            ("KW", g.kernel[2]),
            ("DD", g.dilation[0]),
            ("DH", g.dilation[1]),
            ("DW", g.dilation[2]),
            ("OUT_CL", g.out_cl),
            ("HAS_BIAS", problem.has_bias),
            ("W_KMAJOR", weight_k_major(problem)),
            ("PRECISION", dot_precision(problem)),
            ("ROUND_TF32", tf32_rounding(problem)),
            ("BLOCK_M", bm),
            ("BLOCK_N", bn),
            ("BLOCK_K", schedule["BLOCK_K"]),
            ("GROUP_M", schedule["GROUP_M"]),
        )
        grid = (g.batch * cdiv(span_rows(g), bm) * cdiv(g.cout, bn), 1, 1)
        main = KernelLaunch(
            conv_tma_implicit_gemm_kernel, args, constexprs, grid, schedule.num_warps, schedule.num_stages
        )
        return [pad_copy_launch(problem), main]


_IMPLICIT_GEMM = ImplicitGemmTemplate()
TEMPLATES = [ImplicitGemmTmaTemplate()]
