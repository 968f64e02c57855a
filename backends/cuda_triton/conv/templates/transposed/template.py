"""The transposed-convolution template: support, tuning space, heuristic, prepared weight and launches (the
package docstring has the phase kernel's contract)."""

from __future__ import annotations

import math

import torch

from ....kernel.launch import KernelLaunch, Schedule, ScratchTensor, Support, TensorArg, cdiv, prod
from ....kernel.spaces import TILE_FIELDS, load_rows
from ...problem import ConvProblem
from .._f16_mma import (
    MIN_MACS_TRANSPOSED,
    f16_block_k,
    f16_input_launches,
    f16_mma_allowed,
    f16_mma_pays,
    f16_scratch,
    prepare_f16_weight,
    uses_f16_mma,
)
from .._interpreter import dot_needs_fp32
from .._tf32 import prepare_tf32_weight, tf32_rounding
from ..base import ConvTemplate
from ..geometry import (
    CHANNELS_LAST,
    CONTIGUOUS,
    INT32_MAX,
    Geometry,
    dense_layout,
    dense_sample_problems,
    next_pow2,
    pad3,
)
from ..launch_args import dim_constexprs, size_args
from .kernels import _conv_transpose_phase_kernel
from .phases import phase_counts, phase_taps, uses_w_fold, w_phases_fold

# Pipeline buffers of one program: sm_80's shared memory (the tuning space compiles for it too).
SMEM_LIMIT = 160 * 1024

# Of a tensor dense in both layouts (one channel or one pixel), the phase kernel takes the contiguous reading.
DENSE_TIE = CONTIGUOUS


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
        reason = dense_sample_problems(problem)
        if reason:
            return Support.no(reason)
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
        return dense_layout(problem.input_size, problem.input_stride, prefer=DENSE_TIE) == CHANNELS_LAST

    def _q_max(self, problem: ConvProblem) -> tuple[int, int, int]:
        p = problem.params
        out = pad3(problem.out_spatial, 1)
        st = pad3(p.stride, 1)
        pb = pad3(p.padding_before, 0)
        return tuple(max(phase_counts(o, s, b)) for o, s, b in zip(out, st, pb, strict=True))  # type: ignore[return-value]

    def tiles_m(self, problem: ConvProblem, block_m: int, row_tiled: int) -> int:
        """M tiles of the largest phase."""
        qd, qh, qw = self._q_max(problem)
        if row_tiled:
            return problem.batch * qd * qh * cdiv(qw, block_m)
        return cdiv(problem.batch * qd * qh * qw, block_m)

    # (BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages).
    # Channels-last inputs: tiles over all of M (ROW_TILED = 0).
    CL_SPACE = load_rows(__file__, "CL_SPACE", TILE_FIELDS)
    # Contiguous inputs: M tiles inside one W row (ROW_TILED = 1), so A is read along W; small flat tiles
    # (ROW_TILED = 0) for short rows. (Large flat tiles over a contiguous input gather element by element:
    # slow to run and 10-25 s to compile.)
    NC_ROW_SPACE = load_rows(__file__, "NC_ROW_SPACE", TILE_FIELDS)
    NC_FLAT_SPACE = load_rows(__file__, "NC_FLAT_SPACE", TILE_FIELDS)

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
        n_cap = max(16, next_pow2(cout_g))
        k_cap = max(16, next_pow2(cin_g))

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
        (thresholds: see MIN_MACS_TRANSPOSED)."""
        return f16_mma_pays(self.phase_macs(problem), prod(problem.input_size), MIN_MACS_TRANSPOSED)

    def heuristic_schedule(self, problem: ConvProblem) -> Schedule:
        """From H200 measurements of the suite's transposed convs (docs/performance.md): 128 x 64 tiles with the
        deepest C_in block that fits (64 in fp16/bf16, 32 in fp32); contiguous inputs tile along W rows when they
        are long. Compute-heavy fp32 convs with TF32 allowed run on fp16 tensor cores from a scaled fp16 copy of
        the input (F16_MMA=2), with the tiles of the 16-bit dtypes. Channels-last fp32 (TF32) convs that
        `w_phases_fold` takes run W_FOLD 64 x 64 x 32 tiles without F16_MMA instead: tuning picked exactly that
        for both such suite convs (unet3d.up2 46.2 us against 58.6 for the unfolded heuristic tiles,
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
        if fold:  # tuning's pick for these convs (above; bk is already fp32's, 32)
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
        kd, kh, kw = pad3(problem.kernel, 1)
        f16 = uses_f16_mma(schedule)
        if not f16:  # F16_MMA rounds to fp16's (= TF32's) significand when it scales instead
            weight = prepare_tf32_weight(weight, problem)  # rounded once here, never at run time
        w = weight.reshape(g, problem.in_channels // g, problem.out_channels // g, kd, kh, kw)
        matrix = w.permute(0, 3, 4, 5, 2, 1).contiguous()  # (G, KD, KH, KW, COUT_G, CIN_G)
        return prepare_f16_weight(matrix) if f16 else matrix

    def scratch(self, problem: ConvProblem, schedule: Schedule) -> list[ScratchTensor]:
        return f16_scratch(problem, uses_f16_mma(schedule))

    def launches(self, problem: ConvProblem, schedule: Schedule) -> list[KernelLaunch]:
        g = Geometry.of(problem)
        (in_d, in_h, in_w), (out_d, out_h, out_w) = g.spatial, g.out_spatial
        kd, kh, kw = g.kernel
        sd, sh, sw = g.stride
        dd, dh, dw = g.dilation
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
        dt = problem.ptr_dtype
        args = (
            TensorArg("input_f16", "fp16") if f16 == 2 else TensorArg("input", dt),
            TensorArg("weight", "fp16" if f16 else dt),
            TensorArg("bias", dt),
            TensorArg("output", dt),
            # the input's partial maxima (F16_MMA); otherwise an unused pointer
            TensorArg("amax", "fp32") if f16 else TensorArg("output", dt),
            *size_args(N=problem.batch, ID=in_d, IH=in_h, IW=in_w, OD=out_d, OH=out_h, OW=out_w),
        )
        constexprs = (
            ("CIN_G", cin_g),
            ("COUT_G", cout_g),
            ("GROUPS", groups),
            *dim_constexprs(K=g.kernel, S=g.stride, P=g.pad, D=g.dilation),
            ("GD", math.gcd(sd, dd)),
            ("GH", math.gcd(sh, dh)),
            ("GW", math.gcd(sw, dw)),
            ("IN_CL", self._in_cl(problem)),
            (
                "OUT_CL",
                dense_layout(problem.output_size, problem.output_stride, prefer=DENSE_TIE) == CHANNELS_LAST,
            ),
            ("HAS_BIAS", problem.has_bias),
            ("ALLOW_TF32", problem.allow_tf32 or problem.element_size <= 2),
            ("ROUND_TF32", 0 if f16 else tf32_rounding(problem)),
            ("F16_MMA", f16),
            ("W_NUMEL", groups * kd * kh * kw * cout_g * cin_g if f16 else 0),
            ("ROW_TILED", bool(row)),
            ("W_FOLD", fold),
            ("DOT_FP32", dot_needs_fp32(problem.dtype)),
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
