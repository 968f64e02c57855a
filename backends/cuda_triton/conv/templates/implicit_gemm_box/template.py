"""The box template: support, tuning space, heuristic (and its claim over the implicit GEMM), prepared weight and
launches."""

from __future__ import annotations

import math

from ....kernel.launch import KernelLaunch, Schedule, ScratchTensor, Support, TensorArg, cdiv
from ....kernel.spaces import TILE_FIELDS, load_rows
from ...problem import ConvProblem
from .._cl_copy import copy_launch, input_cl
from .._f16_mma import amax_launch, f16_mma_allowed, f16_scratch, scale_launch, uses_f16_mma
from .._interpreter import dot_needs_fp32
from .._tf32 import tf32_rounding
from ..epilogue_args import epilogue_args, epilogue_constexprs
from ..gemm_common import tma_tap_problems
from ..geometry import INT32_MAX, NUM_SMS, Geometry, fit_block
from ..implicit_gemm import TapMajorWeightTemplate
from ..launch_args import channel_constexprs, dim_constexprs, size_args
from .boxes import box_count, box_of, box_shapes, box_waste, nvmma_swizzle, reads_strided_view, ws_maxnreg
from .gluon_kernel import GLUON_ARCHS, conv_box_kernel
from .portable_kernel import conv_box_portable_kernel

# (BLOCK_M, BLOCK_N, BLOCK_K, num_warps, STAGES); each with the box shapes that tile the output best.
_CONFIGS = load_rows(__file__, "CONFIGS", TILE_FIELDS)


# fp32 with TF32 (the A tile rounded in shared memory): 32 channels a K step (128-byte rows); small tiles too, for
# the small fp32 layers (r18.l1 at batch 1: 49 programs of 64 x 64) where the F16_MMA copy's two extra launches
# cost more than the conv.
_TF32_CONFIGS = load_rows(__file__, "TF32_CONFIGS", TILE_FIELDS)


# Warp-specialised (WS=1, 16-bit only): the wgmma warpgroup(s) plus a copy warp: 128 x 128 tiles on one
# warpgroup (128 fp32 accumulators a thread), 128 x 256 on two (`ws_maxnreg`); on the H200 they won only
# deeplab.d4 among box schedules.
_WS_CONFIGS = load_rows(__file__, "WS_CONFIGS", TILE_FIELDS)


_BOXES_PER_CONFIG = 2


class ImplicitGemmBoxTemplate(TapMajorWeightTemplate):
    """Gluon implicit GEMM on 4-D TMA boxes of the unpadded input (see the package docstring)."""

    def __init__(self) -> None:
        self.name = "implicit_gemm_box"

    def family_support(self, problem: ConvProblem) -> Support:
        if problem.dtype not in ("float16", "bfloat16") and not problem.allow_tf32:
            return Support.no(
                f"dtype {problem.dtype} without TF32 (wgmma has no exact fp32; fp32 runs as TF32 or on its scaled "
                "fp16 copy, F16_MMA=2)"
            )
        if problem.spatial_dims > 2:
            return Support.no("3-D convolutions (a box covers images, rows and columns)")
        reason = tma_tap_problems(problem, strided=True)
        if reason:
            return Support.no(reason)
        if problem.in_channels % 8:  # fp32 too: F16_MMA schedules read 16-bit rows (the fp16 copy)
            return Support.no("a TMA row must be a multiple of 16 bytes (input channels, 16-bit)")
        g = Geometry.of(problem)
        if reads_strided_view(g):
            if any(size % s for size, s in zip(g.spatial[1:], g.stride[1:], strict=True)):
                return Support.no(
                    "a strided conv needs input rows and columns divisible by the stride (the TMA view "
                    "[N, H/SH, SH, W/SW, SW*C])"
                )
            if g.cin % 16:
                return Support.no(
                    "a strided conv needs C_in % 16 == 0 (a channel block must not reach the next parity's "
                    "channels in the view)"
                )
        if g.int64 or g.batch * max(g.spatial[1] * g.spatial[2], 1) * g.cin > INT32_MAX:
            return Support.no("tensors beyond 32-bit offsets")
        if not g.in_cl and problem.batch > 65535:
            return Support.no(
                "a contiguous input's channels-last copy launches one grid row per image (<= 65535)"
            )
        return Support.yes()

    def _schedule(
        self,
        problem: ConvProblem,
        bm: int,
        bn: int,
        bk: int,
        warps: int,
        stages: int,
        box: tuple[int, int, int],
        ws: bool = False,
        f16: int = 0,
    ) -> Schedule:
        g = Geometry.of(problem)
        bn, bk = fit_block(bn, g.cout), fit_block(bk, g.cin)
        while (
            reads_strided_view(g) and g.cin % bk
        ):  # strided: whole channel blocks (`supports`: C_in % 16 == 0)
            bk //= 2
        extra = {"F16_MMA": f16} if f16 else {}
        if ws:
            extra["WS"] = 1
        return Schedule.make(
            warps, stages, BOX_N=box[0], BOX_H=box[1], BOX_W=box[2], BLOCK_N=bn, BLOCK_K=bk, **extra
        )

    def schedules(self, problem: ConvProblem) -> list[Schedule]:
        """16-bit: the pipelined and warp-specialised tile configs. fp32: the same on the scaled fp16 copy
        (F16_MMA=2, where allowed) and the TF32 configs (fp32 tiles, A rounded in shared memory)."""
        g = Geometry.of(problem)
        out = [self.heuristic_schedule(problem)]
        spaces: list[tuple[tuple[tuple[int, int, int, int, int], ...], bool, int]] = []
        if problem.dtype != "float32" or f16_mma_allowed(problem):
            f16 = _f16_mode(problem)
            spaces += [(_CONFIGS, False, f16), (_WS_CONFIGS, True, f16)]
        if problem.dtype == "float32":
            spaces.append((_TF32_CONFIGS, False, 0))
        for configs, ws, f16 in spaces:
            for bm, bn, bk, warps, stages in configs:
                for box in box_shapes(g, bm)[:_BOXES_PER_CONFIG]:
                    out.append(self._schedule(problem, bm, bn, bk, warps, stages, box, ws, f16))
        return list(dict.fromkeys(out))

    def heuristic_schedule(self, problem: ConvProblem) -> Schedule:
        """128-pixel boxes by 128 channels, 4 stages (vgg's best on the H200); 64-pixel boxes when 128-pixel
        ones would leave most SMs idle or waste more than a quarter of their pixels."""
        g = Geometry.of(problem)
        bn = 128 if g.cout >= 128 else 64
        best = box_shapes(g, 128)[0]
        tiles = cdiv(g.m, 128) * cdiv(g.cout, bn)
        f16 = _f16_mode(problem)
        bk = 64 if f16 or problem.dtype != "float32" else 32  # fp32 without F16_MMA: TF32, 128-byte rows
        if tiles < NUM_SMS // 2 or box_waste(g, best) > 1.25:
            return self._schedule(problem, 64, bn, bk, 4, 4, box_shapes(g, 64)[0], f16=f16)
        return self._schedule(problem, 128, bn, bk, 8, 4, best, f16=f16)

    def heuristic_claims(self, problem: ConvProblem) -> bool:
        """Dense 16-bit 2-D convs with stride 1, no dilation, 3x3 taps or more, C_in >= 128, a channels-last input
        and a map of at least 28 x 28 run here rather than on the implicit GEMM when no table entry has them. Of
        the 24 such model-zoo convs the H200 timed with both heuristic schedules (docs/performance.md), the box schedule was 1.18x faster in geometric mean and never below 0.94x. Left out
        for their worst cases: dilated convs (1.11x, but 0.79x on deeplab's at batch 4) and contiguous inputs
        (1.14x, down to 0.57x); maps under 28 x 28 lost outright (0.75x)."""
        if problem.dtype not in ("float16", "bfloat16") or problem.spatial_dims != 2:
            return False
        g = Geometry.of(problem)
        return (
            g.stride[1:] == (1, 1)
            and g.dilation[1:] == (1, 1)
            and g.kernel[1] * g.kernel[2] >= 9
            and g.cin >= 128
            and g.in_cl
            and g.spatial[1] * g.spatial[2] >= 28 * 28
        )

    def transfers_to(self, schedule: Schedule, problem: ConvProblem) -> bool:
        """A neighbour's schedule runs here only with this map's best box of the same size and a full wave of
        programs: its box was fitted to another map, and a grid under one wave idles SMs. (u.vgg.3x3.512 at batch 4
        took a 64 x 64 map's 128 x 256 schedule: 56 programs, 48 us against the heuristic's 38 us on the H200.)"""
        g = Geometry.of(problem)
        if reads_strided_view(g):  # strided schedules run only where measured (their own table entry)
            return False
        box = box_of(schedule)
        programs = box_count(g, box) * cdiv(g.cout, schedule["BLOCK_N"])
        return box == box_shapes(g, math.prod(box))[0] and programs >= NUM_SMS

    def takes_epilogue(self, problem: ConvProblem, schedule: Schedule) -> bool:
        return True  # one program stores each output element, once (no split, one group)

    # -- weight and launches -------------------------------------------------------------------------------
    def scratch(self, problem: ConvProblem, schedule: Schedule) -> list[ScratchTensor]:
        if uses_f16_mma(schedule):  # the scaled fp16 copy (channels-last whatever the input's layout)
            return f16_scratch(problem, 2)
        return [] if Geometry.of(problem).in_cl else [input_cl(problem)]

    def launches(self, problem: ConvProblem, schedule: Schedule) -> list[KernelLaunch]:
        g = Geometry.of(problem)
        taps, cin_p, cout_p = self.tap_major_shape(problem, schedule)
        _, h, w = g.spatial
        _, oh, ow = g.out_spatial
        dt = problem.ptr_dtype
        f16 = uses_f16_mma(schedule)
        tf32 = problem.dtype == "float32" and not f16  # fp32 tiles, TF32 wgmma (`supports`: TF32 allowed)
        mma_dt = "fp16" if f16 else dt  # what the kernel's TMA boxes and wgmma read
        ebytes = 4 if tf32 else 2
        args = (
            TensorArg("input_f16" if f16 else "input" if g.in_cl else "input_cl", mma_dt),
            TensorArg("weight", mma_dt),
            TensorArg("bias", dt),
            TensorArg("output", dt),
            TensorArg("amax", "fp32") if f16 else TensorArg("input", dt),  # unused without F16_MMA
            *size_args(BATCH=g.batch, H=h, W=w, OH=oh, OW=ow),
            *epilogue_args(problem),
        )
        box = box_of(schedule)
        bn, bk = schedule["BLOCK_N"], schedule["BLOCK_K"]
        constexprs = (
            *channel_constexprs(g.cin, g.cout, cin_p, cout_p),
            *dim_constexprs("HW", K=g.kernel[1:], P=g.pad[1:], D=g.dilation[1:], S=g.stride[1:]),
            ("OUT_CL", g.out_cl),
            ("HAS_BIAS", problem.has_bias),
            ("DOT_FP32", dot_needs_fp32(problem.dtype)),
            ("F16_MMA", bool(f16)),
            ("W_NUMEL", taps * cin_p * cout_p),
            ("TF32", tf32),
            ("ROUND_TF32", tf32_rounding(problem) if tf32 else 0),
            ("BOX_N", box[0]),
            ("BOX_H", box[1]),
            ("BOX_W", box[2]),
            ("BLOCK_N", bn),
            ("BLOCK_K", bk),
            ("A_SWIZZLE", nvmma_swizzle(bk * ebytes)),
            (
                "B_SWIZZLE",
                nvmma_swizzle((bk if tf32 else bn) * ebytes),
            ),  # the weight tile's rows: K (TF32) or N
            ("STAGES", schedule.num_stages),
            ("WARPS", schedule.num_warps),
            ("WS", dict(schedule.params).get("WS", 0)),
            *epilogue_constexprs(problem),
        )
        grid = (box_count(g, box), cdiv(g.cout, bn), 1)
        main = KernelLaunch(
            conv_box_kernel,
            args,
            constexprs,
            grid,
            schedule.num_warps,
            schedule.num_stages,
            portable_fn=conv_box_portable_kernel,
            fn_archs=GLUON_ARCHS,
            maxnreg=ws_maxnreg(schedule),
        )
        if (
            f16
        ):  # the partial maxima, then the scaled fp16 copy (channels-last: the copy transposes if needed)
            copy = scale_launch(problem) if g.in_cl else copy_launch(problem, scale_f16=True)
            return [amax_launch(problem), copy, main]
        return [main] if g.in_cl else [copy_launch(problem), main]


def _f16_mode(problem: ConvProblem) -> int:
    """2 for fp32 where fp16 tensor cores are allowed (run on the scaled fp16 copy, F16_MMA=2), else 0 (16-bit,
    or fp32 as TF32)."""
    return 2 if f16_mma_allowed(problem) else 0


TEMPLATES = [ImplicitGemmBoxTemplate()]
