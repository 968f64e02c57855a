"""Transposed convolution by phase (sub-pixel) decomposition, 1-D/2-D/3-D, any stride/dilation/padding/groups.

Semantics (op.py): input element ``x`` scatters ``weight[c_in, :, t]`` to full-output position
``f = x*s + t*d`` (per spatial dim); output position ``o = f - padding_before``. Write ``f = q*s + r`` with
``0 <= r < s``: the phase ``r`` of an output position decides which taps reach it, namely the ``t`` with
``t*d = r (mod s)``. With ``g = gcd(s, d)`` those are ``t = t0(r) + j*(s/g)`` (none when ``g`` does not divide
``r``), and the input they read is ``x = q - (t0*d - r)/s - j*(d/g)``. So every phase is a dense, stride-1
convolution of the input with its own (fewer) taps: a GEMM with M = N * (output positions of the phase),
N = C_out/groups, K = taps_in_phase * C_in/groups. No zero is ever inserted and no tap is ever masked out;
phases that receive no tap (``g`` does not divide ``r``, or ``t0 >= k``) run an empty K loop and write bias or 0.

One launch covers every phase (the phase is part of grid axis 0, next to the N tiles, so the phases that
read the same input rows run close together and share them in L2). Every problem is viewed as 3-D, missing
dims having kernel 1, stride 1, dilation 1 and no padding.

Kernel ``_conv_transpose_phase_kernel``:

    args (PTX order): x, w, b, y, amax (pointers; b is null when HAS_BIAS is False; amax is the "amax" scratch
                      for F16_MMA schedules, an unused pointer (the output) otherwise),
                      N, ID, IH, IW, OD, OH, OW (i32)
    constexprs: CIN_G, COUT_G, GROUPS, KD, KH, KW, SD, SH, SW, PD, PH, PW (padding_before), DD, DH, DW,
                GD, GH, GW (gcd(stride, dilation) per dim), IN_CL, OUT_CL, HAS_BIAS, ALLOW_TF32, ROUND_TF32
                (fp32 with TF32: the A tile is rounded to nearest TF32, see _tf32.py; 0 for F16_MMA), F16_MMA
                (0, 1 or 2, below), W_NUMEL (F16_MMA: elements of the prepared weight before its trailer, else
                0), ROW_TILED, W_FOLD (0/1, below), DOT_FP32 (True only under TRITON_INTERPRET for bf16: the
                interpreter's tl.dot mishandles bf16 operands, so they are widened first; compiled kernels always
                have False), BLOCK_M, BLOCK_N, BLOCK_K
    grid: (TILES_M * SD*SH*(1 if W_FOLD else SW) * cdiv(COUT_G, BLOCK_N), GROUPS, 1) where, with QX = the
          largest number of output positions any phase has along dim X,
          TILES_M = cdiv(N * QD * QH * QW, BLOCK_M)           (ROW_TILED = 0: tiles over all of M)
          TILES_M = N * QD * QH * cdiv(QW, BLOCK_M)            (ROW_TILED = 1: a tile stays in one W row, so
                                                                contiguous inputs are read along W)
    weight: prepared as (GROUPS, KD, KH, KW, COUT_G, CIN_G) contiguous (K-major B tiles: TF32 wgmma needs them);
            F16_MMA: that matrix scaled by 2^shift to fp16, flattened, then the trailer holding the shift.

W_FOLD schedules (offered only where `w_phases_fold` holds: KW == SW >= 2 a power of two, DW == 1, PW == 0,
OW % SW == 0, e.g. UNet's 2x2 stride-2 up-convolutions) have one program compute every W phase of its tile:
there W phase j has the single tap j, the same q range (0 .. OW/SW) and reads the same input pixels x = q, so
each K step loads (and rounds or scales) the A tile once and multiplies it by the SW phases' B tiles side by
side, one [BLOCK_K, SW*BLOCK_N] tile whose column c is tap c // BLOCK_N, channel c % BLOCK_N; the
[BLOCK_M, SW*BLOCK_N] accumulator's column c is stored at ow = qw*SW + c // BLOCK_N (with a channels-last output,
the SW*C_out elements of SW adjacent pixels). The grid's phase count is then SD*SH. Without W_FOLD, the SW
programs of a tile each re-load the same A tile and write every SW-th pixel. Every tile config whose SW
accumulators stay within 128 x 128 fp32 values (and SW*BLOCK_N <= 256) is offered folded too, F16_MMA ones
included, with 8 warps where the accumulators exceed 64 values a thread; the heuristic picks W_FOLD only for
channels-last fp32 with TF32 (`heuristic_schedule`, from the 2026-12-03 re-tune).

Input and output are dense channels-last or dense contiguous (``IN_CL``/``OUT_CL``; ``supports`` checks), so
strides are products of constexpr channel counts and runtime sizes. In-sample offsets are 32-bit
(``supports`` refuses samples of 2^31 elements or more); batch offsets are 64-bit.
fp16/bf16 run on tensor cores with fp32 accumulation; fp32 uses TF32 when ``ALLOW_TF32`` (PyTorch's default for
convolutions), with both operands rounded to nearest TF32 (weight at export, A tile in the kernel), and exact
fp32 otherwise.

F16_MMA schedules (fp32 with TF32 allowed, see _f16_mma.py) run the MMAs on fp16 tensor cores at TF32's
precision, with power-of-two scales: the weight is fp16 (scaled when prepared), the A tile is the fp32 input
times 2^shift converted to fp16 in the kernel (F16_MMA=1) or read from the scaled fp16 copy of the input
(F16_MMA=2: x is the "input_f16" scratch, same layout as the input), and the accumulator is multiplied by
2^-shift_x * 2^-shift_w before the bias. Launches: `amax_partial_kernel` (input -> "amax"), for F16_MMA=2
`scale_to_f16_kernel` (input, amax -> "input_f16"), then the phase kernel; other schedules launch the phase
kernel alone. The heuristic picks F16_MMA=2 for compute-heavy convs (`f16_mma_pays`).
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
    ScratchTensor,
    Support,
    TensorArg,
    cdiv,
    interpreting,
    prod,
)
from ..problem import ConvProblem
from ._f16_mma import (
    f16_block_k,
    f16_input_launches,
    f16_mma_allowed,
    f16_mma_pays,
    f16_scratch,
    input_scales,
    prepare_f16_weight,
    uses_f16_mma,
    weight_unscale,
)
from ._tf32 import prepare_tf32_weight, round_to_tf32, tf32_rounding
from .base import ConvTemplate
from .depthwise import _pad3, dense_layout

INT32_MAX = 2**31 - 1
SMEM_LIMIT = (
    160 * 1024
)  # pipeline buffers of one program: sm_80's shared memory (the space compiles for it too)
# The heuristic's F16_MMA threshold on the multiply-adds the phase GEMMs issue (_f16_mma.f16_mma_pays: its H200
# sweep of implicit GEMMs lost with 1e8 in all or 289 per input element and won from 3.7e9 in all and 2300 per
# element on). Transposed convs upsample (an input element feeds C_out/g * taps outputs: 512-1024 per element in the
# public suite) and their fp32 kernels were further behind cuDNN (0.77-0.83x) than their fp16 ones (~1.0x), so
# the total cut is one power of two lower, 2^29, to include gan.3x3s2op1 (6.0e8, 576 per element) with
# fcn.up4x4s2 (2.1e9, 1024) and unet3d.up2 (2.1e9, 512). Both cuts are estimates until measured on the GPU.
_F16_MIN_MACS = 2**29


@triton.jit
def _phase_geometry(
    r, out_len, K: tl.constexpr, S: tl.constexpr, P: tl.constexpr, D: tl.constexpr, G: tl.constexpr
):
    """For phase ``r`` of one dim: (first q, number of q, first tap, number of taps, input offset of tap 0)."""
    SG: tl.constexpr = S // G
    t0 = r * 0 - 1
    for t in tl.static_range(SG):
        t0 = tl.where(r == (t * D) % S, t, t0)
    n_taps = tl.where(t0 >= 0, (K - t0 + SG - 1) // SG, 0)
    t0 = tl.maximum(t0, 0)
    x_off = (t0 * D - r) // S  # exact and >= 0 whenever n_taps > 0
    q_start = (P - r + S - 1) // S
    q_count = (P + out_len - r + S - 1) // S - q_start
    return q_start, q_count, t0, n_taps, x_off


@triton.jit
def _conv_transpose_phase_kernel(
    x_ptr,
    w_ptr,
    b_ptr,
    y_ptr,
    amax_ptr,
    N,
    ID,
    IH,
    IW,
    OD,
    OH,
    OW,
    CIN_G: tl.constexpr,
    COUT_G: tl.constexpr,
    GROUPS: tl.constexpr,
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
    GD: tl.constexpr,
    GH: tl.constexpr,
    GW: tl.constexpr,
    IN_CL: tl.constexpr,
    OUT_CL: tl.constexpr,
    HAS_BIAS: tl.constexpr,
    ALLOW_TF32: tl.constexpr,
    ROUND_TF32: tl.constexpr,
    F16_MMA: tl.constexpr,
    W_NUMEL: tl.constexpr,
    ROW_TILED: tl.constexpr,
    W_FOLD: tl.constexpr,
    DOT_FP32: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
):
    CIN: tl.constexpr = CIN_G * GROUPS
    COUT: tl.constexpr = COUT_G * GROUPS
    W_PHASES: tl.constexpr = SW if W_FOLD else 1  # W phases one program computes
    GRID_SW: tl.constexpr = SW // W_PHASES  # W phases in the grid
    NPH: tl.constexpr = SD * SH * GRID_SW
    TILES_N: tl.constexpr = (COUT_G + BLOCK_N - 1) // BLOCK_N
    KCB: tl.constexpr = (CIN_G + BLOCK_K - 1) // BLOCK_K

    pid = tl.program_id(0)
    g = tl.program_id(1)
    tile_n = pid % TILES_N
    rest = pid // TILES_N
    phase = rest % NPH
    tile_m = rest // NPH
    rw = phase % GRID_SW  # W_FOLD: 0, whose geometry (q from 0, one tap, x = q) every W phase shares
    rh = (phase // GRID_SW) % SH
    rd = phase // (GRID_SW * SH)

    qd0, QD, td0, ntd, xd0 = _phase_geometry(rd, OD, KD, SD, PD, DD, GD)
    qh0, QH, th0, nth, xh0 = _phase_geometry(rh, OH, KH, SH, PH, DH, GH)
    qw0, QW, tw0, ntw, xw0 = _phase_geometry(rw, OW, KW, SW, PW, DW, GW)

    # Rows of this tile: (n, qd, qh, qw) positions of the phase.
    if ROW_TILED:
        row_tiles = tl.maximum(tl.cdiv(QW, BLOCK_M), 1)
        row = tile_m // row_tiles
        qw = (tile_m % row_tiles) * BLOCK_M + tl.arange(0, BLOCK_M)
        qh = row % tl.maximum(QH, 1)
        rest_r = row // tl.maximum(QH, 1)
        qd = rest_r % tl.maximum(QD, 1)
        n = rest_r // tl.maximum(QD, 1)
        m_ok = (qw < QW) & (n < N) & (QH > 0) & (QD > 0)
        n = n + qw * 0  # a row vector in both modes
    else:
        offs_m = tile_m * BLOCK_M + tl.arange(0, BLOCK_M)
        m_ok = offs_m < N * QD * QH * QW
        qw = offs_m % tl.maximum(QW, 1)
        rest_m = offs_m // tl.maximum(QW, 1)
        qh = rest_m % tl.maximum(QH, 1)
        rest_m = rest_m // tl.maximum(QH, 1)
        qd = rest_m % tl.maximum(QD, 1)
        n = rest_m // tl.maximum(QD, 1)
    qd = qd + qd0
    qh = qh + qh0
    qw = qw + qw0

    if W_FOLD:  # SW B tiles side by side: column c is W phase (= W tap) c // BLOCK_N, channel c % BLOCK_N
        cols = tl.arange(0, W_PHASES * BLOCK_N)
        w_tap = cols // BLOCK_N
        co = tile_n * BLOCK_N + cols % BLOCK_N
    else:
        w_tap = 0
        co = tile_n * BLOCK_N + tl.arange(0, BLOCK_N)
    co_ok = co < COUT_G
    ck = tl.arange(0, BLOCK_K)
    if IN_CL:
        x_rows = x_ptr + n.to(tl.int64) * (ID * IH * IW * CIN) + g * CIN_G
    else:
        x_rows = x_ptr + n.to(tl.int64) * (CIN * ID * IH * IW) + g * CIN_G * (ID * IH * IW)
    w_group = w_ptr + g * (KD * KH * KW * CIN_G * COUT_G)

    if F16_MMA:  # fp32 at TF32 precision on fp16 tensor cores: the input scaled by 2^shift (_f16_mma.py)
        a_scale, a_unscale = input_scales(amax_ptr)
    acc = tl.zeros((BLOCK_M, W_PHASES * BLOCK_N), dtype=tl.float32)
    n_hw = nth * ntw
    for it in range(0, ntd * n_hw * KCB):
        tap = it // KCB
        kc = it - tap * KCB
        jd = tap // n_hw
        rem = tap - jd * n_hw
        jh = rem // ntw
        jw = rem - jh * ntw
        xd = qd - xd0 - jd * (DD // GD)
        xh = qh - xh0 - jh * (DH // GH)
        xw = qw - xw0 - jw * (DW // GW)
        ok = m_ok & (xd >= 0) & (xd < ID) & (xh >= 0) & (xh < IH) & (xw >= 0) & (xw < IW)
        ci = kc * BLOCK_K + ck
        ci_ok = ci < CIN_G
        pos = (xd * IH + xh) * IW + xw
        if IN_CL:
            a_ptrs = x_rows[:, None] + pos[:, None] * CIN + ci[None, :]
        else:
            a_ptrs = x_rows[:, None] + ci[None, :] * (ID * IH * IW) + pos[:, None]
        a = tl.load(a_ptrs, mask=ok[:, None] & ci_ok[None, :], other=0.0)
        if F16_MMA == 1:  # (F16_MMA == 2 reads the scaled fp16 copy of the input)
            a = (a * a_scale).to(tl.float16)
        elif ROUND_TF32:  # fp32 with TF32: round to nearest, not the MMA's truncation (_tf32.py)
            a = round_to_tf32(a, ROUND_TF32)
        tap_idx = ((td0 + jd * (SD // GD)) * KH + th0 + jh * (SH // GH)) * KW + tw0 + jw * (SW // GW)
        b_ptrs = w_group + ((tap_idx + w_tap) * COUT_G + co)[None, :] * CIN_G + ci[:, None]
        b = tl.load(b_ptrs, mask=ci_ok[:, None] & co_ok[None, :], other=0.0)
        if DOT_FP32:  # Triton's interpreter only: its tl.dot reads bf16 operands as raw integers
            acc = tl.dot(a.to(tl.float32), b.to(tl.float32), acc, input_precision="ieee")
        elif F16_MMA:  # fp16 operands (input_precision only concerns fp32 ones)
            acc = tl.dot(a, b, acc)
        elif ALLOW_TF32:
            acc = tl.dot(a, b, acc, input_precision="tf32")
        else:
            acc = tl.dot(a, b, acc, input_precision="ieee")
    if F16_MMA:  # undo both scalings (powers of two: exact) before the bias and the store
        acc = acc * a_unscale * weight_unscale(w_ptr, W_NUMEL)

    if HAS_BIAS:
        acc += tl.load(b_ptr + g * COUT_G + co, mask=co_ok, other=0.0).to(tl.float32)[None, :]
    od = qd * SD + rd - PD
    oh = qh * SH + rh - PH
    ow = qw * SW + rw - PW
    out_pos = ((od * OH + oh) * OW + ow)[:, None]
    if W_FOLD:  # W phase j sits j pixels after phase 0 (channels-last: the SW pixels of a row are adjacent)
        out_pos = out_pos + w_tap[None, :]
    if OUT_CL:
        y_rows = y_ptr + n.to(tl.int64) * (OD * OH * OW * COUT) + g * COUT_G
        y_ptrs = y_rows[:, None] + out_pos * COUT + co[None, :]
    else:
        y_rows = y_ptr + n.to(tl.int64) * (COUT * OD * OH * OW) + g * COUT_G * (OD * OH * OW)
        y_ptrs = y_rows[:, None] + co[None, :] * (OD * OH * OW) + out_pos
    tl.store(y_ptrs, acc.to(y_ptr.dtype.element_ty), mask=m_ok[:, None] & co_ok[None, :])


# ---- geometry on the host -----------------------------------------------------------------------------------
def phase_counts(out_size: int, stride: int, padding_before: int) -> list[int]:
    """Number of output positions of each phase r (0 <= r < stride) along one dim."""
    counts = []
    for r in range(stride):
        q_start = (padding_before - r + stride - 1) // stride
        q_end = (padding_before + out_size - r + stride - 1) // stride
        counts.append(max(0, q_end - q_start))
    return counts


def phase_taps(kernel: int, stride: int, dilation: int) -> list[list[int]]:
    """The taps t of each phase r: those with t*dilation = r (mod stride)."""
    return [[t for t in range(kernel) if (t * dilation) % stride == r] for r in range(stride)]


def w_phases_fold(problem: ConvProblem) -> bool:
    """Whether one program may compute every phase along W (W_FOLD=1 schedules): kernel == stride >= 2 along W,
    dilation 1 and no padding before, so W phase j has the single tap j and reads input x = q (the same pixels
    for every phase), and the output is a whole number of strides long (every phase has OW / SW positions, q
    from 0). The stride must be a power of two: the folded tile is SW * BLOCK_N columns wide (a tl.arange)."""
    p = problem.params
    kernel, stride, dilation = problem.kernel[-1], p.stride[-1], p.dilation[-1]
    return (
        kernel == stride >= 2
        and stride & (stride - 1) == 0
        and dilation == 1
        and p.padding_before[-1] == 0
        and problem.out_spatial[-1] % stride == 0
    )


def uses_w_fold(schedule: Schedule) -> int:
    """The schedule's W_FOLD (0 when absent: every schedule from before it existed)."""
    return int(dict(schedule.params).get("W_FOLD", 0))


# DOT_FP32's test (base.interpreting), by a module name the depthwise band launches look up per call, so tests
# can patch it for both families.
_interpreting = interpreting


def _pow2_at_least(x: int) -> int:
    return 1 << max(0, (x - 1).bit_length())


class TransposedTemplate(ConvTemplate):
    """Transposed convolution as one dense GEMM per output phase, all phases in one launch."""

    def __init__(self) -> None:
        self.name = "transposed"

    # -- support ----------------------------------------------------------------------------------------------
    def supports(self, problem: ConvProblem) -> Support:
        if not problem.transposed:
            return Support.no("not a transposed convolution")
        if problem.spatial_dims not in (1, 2, 3):
            return Support.no(f"{problem.spatial_dims}-D convolutions are not supported")
        if problem.dtype not in ("float16", "bfloat16", "float32"):
            return Support.no(f"dtype {problem.dtype} is not supported (fp16/bf16/fp32 only)")
        if problem.in_channels == 0 or problem.batch == 0:
            return Support.no("empty input")
        if dense_layout(problem.input_size, problem.input_stride) is None:
            return Support.no("the input is neither dense channels-last nor dense contiguous")
        if dense_layout(problem.output_size, problem.output_stride) is None:
            return Support.no("the output layout is neither dense channels-last nor dense contiguous")
        if prod(problem.input_size[1:]) > INT32_MAX or prod(problem.output_size[1:]) > INT32_MAX:
            return Support.no("a sample has 2^31 elements or more (32-bit in-sample offsets)")
        if problem.batch * prod(problem.out_spatial) > INT32_MAX:
            return Support.no("N * output positions must stay below 2^31 (32-bit row indices)")
        if problem.groups > 65535:
            return Support.no("more than 65535 groups (grid axis 1)")
        if prod(problem.params.stride) > 4096:
            return Support.no("more than 4096 output phases (product of the strides)")
        return Support.yes()

    # -- schedules --------------------------------------------------------------------------------------------
    @staticmethod
    def _in_cl(problem: ConvProblem) -> bool:
        return dense_layout(problem.input_size, problem.input_stride) == "channels_last"

    def _q_max(self, problem: ConvProblem) -> tuple[int, int, int]:
        p = problem.params
        out = _pad3(problem.out_spatial, 1)
        st = _pad3(p.stride, 1)
        pb = _pad3(p.padding_before, 0)
        return tuple(max(phase_counts(o, s, b)) for o, s, b in zip(out, st, pb, strict=True))  # type: ignore[return-value]

    def tiles_m(self, problem: ConvProblem, block_m: int, row_tiled: int) -> int:
        """M tiles of the largest phase."""
        qd, qh, qw = self._q_max(problem)
        if row_tiled:
            return problem.batch * qd * qh * cdiv(qw, block_m)
        return cdiv(problem.batch * qd * qh * qw, block_m)

    # (BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages).
    # Channels-last inputs: tiles over all of M (ROW_TILED = 0).
    CL_SPACE = (
        (64, 32, 32, 4, 3),
        (64, 64, 32, 4, 3),
        (128, 64, 32, 4, 3),
        (128, 64, 64, 4, 3),
        (128, 128, 32, 8, 3),
        (256, 64, 32, 8, 3),
        (32, 32, 32, 4, 2),
        (64, 16, 16, 4, 2),
    )
    # Contiguous inputs: M tiles inside one W row (ROW_TILED = 1), so A is read along W; small flat tiles
    # (ROW_TILED = 0) for short rows. (Large flat tiles over a contiguous input gather element by element:
    # slow to run and 10-25 s to compile.)
    NC_ROW_SPACE = (
        (128, 64, 32, 4, 3),
        (128, 64, 64, 4, 3),
        (32, 32, 32, 4, 2),
    )
    NC_FLAT_SPACE = (
        (64, 32, 32, 4, 3),
        (32, 32, 32, 4, 2),
        (64, 16, 16, 4, 2),
    )

    # W_FOLD schedules keep SW accumulators of BLOCK_M x BLOCK_N: at most this many fp32 values in all (what the
    # 128 x 128 tiles hold unfolded), and SW * BLOCK_N columns at most (one wgmma's widest N); a warp holds at
    # most FOLD_ACC_PER_WARP of them (64 a thread, as 128 x 128 tiles with 8 warps: folded 128 x 64 tiles with
    # 4 warps took 255 registers and spilled for sm_90).
    FOLD_ACC_LIMIT = 128 * 128
    FOLD_N_LIMIT = 256
    FOLD_ACC_PER_WARP = 64 * 32

    @staticmethod
    def _make(entry: tuple[int, ...], row: int, f16: int = 0, fold: int = 0) -> Schedule:
        bm, bn, bk, warps, stages = entry
        extra = ({"F16_MMA": f16} if f16 else {}) | ({"W_FOLD": 1} if fold else {})
        return Schedule.make(warps, stages, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, ROW_TILED=row, **extra)

    @staticmethod
    def _f16_entry(entry: tuple[int, ...], f16: int, w_phases: int = 1) -> tuple[int, ...]:
        """A tile config for an F16_MMA schedule: A fp32 (F16_MMA=1, converted in registers) or fp16 (2), B
        fp16 (``w_phases`` B tiles side by side for W_FOLD); BLOCK_K halved until the stages fit in shared
        memory."""
        bm, bn, bk, warps, stages = entry
        return (bm, bn, f16_block_k(bk, bm, bn * w_phases, stages, f16, SMEM_LIMIT), warps, stages)

    @classmethod
    def _fold_entry(cls, entry: tuple[int, ...], w_phases: int) -> tuple[int, ...]:
        """A tile config for a W_FOLD schedule: ``w_phases`` accumulators, with enough warps to hold them."""
        bm, bn, bk, warps, stages = entry
        return (bm, bn, bk, max(warps, bm * bn * w_phases // cls.FOLD_ACC_PER_WARP), stages)

    def schedules(self, problem: ConvProblem) -> list[Schedule]:
        cin_g = problem.in_channels // problem.groups
        cout_g = problem.out_channels // problem.groups
        n_cap = max(16, _pow2_at_least(cout_g))
        k_cap = max(16, _pow2_at_least(cin_g))

        def fits(entry: tuple[int, ...], w_phases: int = 1) -> bool:
            bm, bn, bk, _, stages = entry
            if bn > n_cap or bk > k_cap:
                return False
            return (bm * bk + bk * bn * w_phases) * problem.element_size * stages <= SMEM_LIMIT

        if self._in_cl(problem):
            tiles = [(e, 0) for e in self.CL_SPACE if fits(e)]
        else:
            tiles = [(e, 1) for e in self.NC_ROW_SPACE if fits(e)]
            tiles += [(e, 0) for e in self.NC_FLAT_SPACE if fits(e)]
        tiles = tiles or [((64, 16, 16, 4, 2), 0)]
        found = [self._make(e, row) for e, row in tiles]
        # k == s along W (UNet's up-convolutions): the tiles whose SW accumulators stay within the fold limits
        # also with every W phase in one program (W_FOLD), where its SW B tiles fit in shared memory.
        sw = problem.params.stride[-1]
        foldable = []
        if w_phases_fold(problem):
            foldable = [
                (e, row)
                for e, row in tiles
                if e[0] * e[1] * sw <= self.FOLD_ACC_LIMIT and e[1] * sw <= self.FOLD_N_LIMIT
            ]
            found += [self._make(self._fold_entry(e, sw), row, fold=1) for e, row in foldable if fits(e, sw)]
        # fp32 with TF32 allowed: every tile config also on fp16 tensor cores (_f16_mma.py), scaled in the
        # kernel (F16_MMA=1) and from a scaled fp16 copy of the input (F16_MMA=2).
        if f16_mma_allowed(problem):
            for f16 in (1, 2):
                found += [self._make(self._f16_entry(e, f16), row, f16) for e, row in tiles]
                found += [
                    self._make(self._fold_entry(self._f16_entry(e, f16, sw), sw), row, f16, fold=1)
                    for e, row in foldable
                ]
        return list(dict.fromkeys(found))

    def phase_macs(self, problem: ConvProblem) -> int:
        """Multiply-adds the phase GEMMs issue (taps whose input falls outside included: the MMA runs them):
        per dim, the sum over phases of output positions x taps; dims multiply."""
        p = problem.params
        cin_g = problem.in_channels // problem.groups
        macs = problem.batch * problem.groups * cin_g * (problem.out_channels // problem.groups)
        for out, k, st, pb, dil in zip(
            problem.out_spatial, problem.kernel, p.stride, p.padding_before, p.dilation, strict=True
        ):
            counts = phase_counts(out, st, pb)
            macs *= sum(c * len(t) for c, t in zip(counts, phase_taps(k, st, dil), strict=True))
        return macs

    def f16_mma_pays(self, problem: ConvProblem) -> bool:
        """Whether the heuristic runs an fp32 conv on fp16 tensor cores (F16_MMA=2): compute-heavy convs only
        (thresholds: see _F16_MIN_MACS)."""
        return f16_mma_pays(self.phase_macs(problem), prod(problem.input_size), _F16_MIN_MACS)

    def heuristic_schedule(self, problem: ConvProblem) -> Schedule:
        """From the H200 sweep of the suite (scripts/bench_part2.py): 128 x 64 tiles with the deepest C_in
        block that fits (64 in fp16/bf16, 32 in fp32); contiguous inputs tile along W rows when they are long.
        Compute-heavy fp32 convs with TF32 allowed run on fp16 tensor cores from a scaled fp16 copy of the input
        (F16_MMA=2), with the tiles of the 16-bit dtypes. Channels-last fp32 (TF32) convs that `w_phases_fold`
        takes run W_FOLD 64 x 64 x 32 tiles without F16_MMA instead: the 2026-12-03 re-tune (16:18) picked
        exactly that for both such suite convs (unet3d.up2 46.2 us against this heuristic's former 58.6,
        unet.up2x2.128 44.4 against 49.8); in 16-bit the unfolded tiles stayed fastest."""
        cin_g = problem.in_channels // problem.groups
        cout_g = problem.out_channels // problem.groups
        fold = (
            problem.dtype == "float32"
            and problem.allow_tf32
            and self._in_cl(problem)
            and w_phases_fold(problem)
        )
        f16 = 2 if not fold and f16_mma_allowed(problem) and self.f16_mma_pays(problem) else 0
        half = problem.element_size <= 2 or f16 > 0
        bn = 128 if cout_g > 128 else 64 if cout_g > 32 else 32 if cout_g > 16 else 16
        bk = 64 if (cin_g >= 64 and half) else 32 if cin_g > 16 else 16
        bm = 128 if self.tiles_m(problem, 1, 0) >= 4096 else 64
        if fold:  # the re-tune's pick for these convs (above; bk is already fp32's, 32)
            bm, bn = 64, min(bn, 64)
        row = 0
        if not self._in_cl(problem):
            row = 1 if self._q_max(problem)[2] >= 32 else 0
            if not half:
                bm, bn, bk = 32, 32, 32
        want = (bm, bn, bk, row)

        def distance(s: Schedule) -> tuple[int, ...]:
            got = (s["BLOCK_M"], s["BLOCK_N"], s["BLOCK_K"], s["ROW_TILED"])
            return (
                uses_w_fold(s) != fold,
                uses_f16_mma(s) != f16,
                got[3] != want[3],
                abs(got[1].bit_length() - bn.bit_length()),
                abs(got[0].bit_length() - bm.bit_length()),
                abs(got[2].bit_length() - bk.bit_length()),
                s.num_stages != 3,
            )

        return min(self.schedules(problem), key=distance)

    # -- weight and launches ----------------------------------------------------------------------------------
    def prepare_weight(self, weight: torch.Tensor, problem: ConvProblem, schedule: Schedule) -> torch.Tensor:
        """(C_in, C_out/g, *k) -> (G, KD, KH, KW, COUT_G, CIN_G) contiguous (F16_MMA: that matrix scaled to
        fp16 and flattened, then its shift, see _f16_mma.py)."""
        g = problem.groups
        kd, kh, kw = _pad3(problem.kernel, 1)
        f16 = uses_f16_mma(schedule)
        if not f16:  # F16_MMA rounds to fp16's (= TF32's) significand when it scales instead
            weight = prepare_tf32_weight(weight, problem)  # rounded once here, never at run time
        w = weight.reshape(g, problem.in_channels // g, problem.out_channels // g, kd, kh, kw)
        matrix = w.permute(0, 3, 4, 5, 2, 1).contiguous()  # (G, KD, KH, KW, COUT_G, CIN_G)
        return prepare_f16_weight(matrix) if f16 else matrix

    def scratch(self, problem: ConvProblem, schedule: Schedule) -> list[ScratchTensor]:
        return f16_scratch(problem, uses_f16_mma(schedule))

    def launches(self, problem: ConvProblem, schedule: Schedule) -> list[KernelLaunch]:
        p = problem.params
        in_d, in_h, in_w = _pad3(problem.in_spatial, 1)
        out_d, out_h, out_w = _pad3(problem.out_spatial, 1)
        kd, kh, kw = _pad3(problem.kernel, 1)
        sd, sh, sw = _pad3(p.stride, 1)
        pd, ph, pw = _pad3(p.padding_before, 0)
        dd, dh, dw = _pad3(p.dilation, 1)
        groups = problem.groups
        cin_g = problem.in_channels // groups
        cout_g = problem.out_channels // groups
        bm, bn, bk = schedule["BLOCK_M"], schedule["BLOCK_N"], schedule["BLOCK_K"]
        row = schedule["ROW_TILED"]
        fold = uses_w_fold(schedule)
        grid = (  # W_FOLD: one program for all SW phases along W
            max(1, self.tiles_m(problem, bm, row)) * sd * sh * (1 if fold else sw) * cdiv(cout_g, bn),
            groups,
            1,
        )
        f16 = uses_f16_mma(schedule)
        dt = TRITON_PTR_DTYPE[problem.dtype]
        args = (
            TensorArg("input_f16", "fp16") if f16 == 2 else TensorArg("input", dt),
            TensorArg("weight", "fp16" if f16 else dt),
            TensorArg("bias", dt),
            TensorArg("output", dt),
            # the input's partial maxima (F16_MMA); otherwise an unused pointer
            TensorArg("amax", "fp32") if f16 else TensorArg("output", dt),
            ScalarArg("N", "i32", problem.batch),
            ScalarArg("ID", "i32", in_d),
            ScalarArg("IH", "i32", in_h),
            ScalarArg("IW", "i32", in_w),
            ScalarArg("OD", "i32", out_d),
            ScalarArg("OH", "i32", out_h),
            ScalarArg("OW", "i32", out_w),
        )
        constexprs = (
            ("CIN_G", cin_g),
            ("COUT_G", cout_g),
            ("GROUPS", groups),
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
            ("GD", math.gcd(sd, dd)),
            ("GH", math.gcd(sh, dh)),
            ("GW", math.gcd(sw, dw)),
            ("IN_CL", self._in_cl(problem)),
            ("OUT_CL", dense_layout(problem.output_size, problem.output_stride) == "channels_last"),
            ("HAS_BIAS", problem.has_bias),
            ("ALLOW_TF32", problem.allow_tf32 or problem.element_size <= 2),
            ("ROUND_TF32", 0 if f16 else tf32_rounding(problem)),
            ("F16_MMA", f16),
            ("W_NUMEL", groups * kd * kh * kw * cout_g * cin_g if f16 else 0),
            ("ROW_TILED", bool(row)),
            ("W_FOLD", fold),
            ("DOT_FP32", problem.dtype == "bfloat16" and _interpreting()),
            ("BLOCK_M", bm),
            ("BLOCK_N", bn),
            ("BLOCK_K", bk),
        )
        main = KernelLaunch(
            _conv_transpose_phase_kernel, args, constexprs, grid, schedule.num_warps, schedule.num_stages
        )
        # F16_MMA: the input's partial maxima first; F16_MMA=2 then writes the scaled fp16 copy the kernel reads.
        return [*f16_input_launches(problem, f16), main]


TEMPLATES = [TransposedTemplate()]
