"""The depthwise template: support, prepared weight and launches (the package docstring has the kernels'
contracts; `schedules` the tuning space and heuristic)."""

from __future__ import annotations

import math

import torch

from ....kernel.launch import KernelLaunch, Schedule, Support, TensorArg, cdiv, prod
from ...problem import ConvProblem
from .._interpreter import dot_needs_fp32
from ..base import ConvTemplate
from ..epilogue_args import epilogue_args, epilogue_constexprs
from ..geometry import INT32_MAX, Geometry, dense_sample_problems, pad3
from ..launch_args import dim_constexprs, size_args
from .geometry import (
    band_geometry,
    band_is_1d,
    block_c,
    channels_last,
    grid,
    is_band,
    is_columns,
    is_taps,
    output_channels_last,
    tap_rows_and_slots,
)
from .kernels import (
    COLUMNS_LOOP,
    DIRECT_LOOP,
    TAPS_LOOP,
    _depthwise_band1d_kernel,
    _depthwise_band_kernel,
    _depthwise_cl_kernel,
    _depthwise_nc_kernel,
)
from .schedules import heuristic_schedule, schedules


def sums_rows_in_16_bit(problem: ConvProblem, schedule: Schedule) -> bool:
    """Whether the launch sums filter rows in the 16-bit input type (kernels._interior_taps, the columns
    kernel's ROW_SUMS_16): an fp16 channels-last problem on a direct or columns schedule without F32_TAPS. Not bf16:
    with 8 significand bits a row of 7 products summed in bf16 was off by a whole bf16 unit of the row sums
    (0.03 on outputs of order 1, the public suite's 5x5 and 7x7 layers on the H100), where fp16's 11 bits keep
    it near one unit of the output."""
    direct = not is_taps(schedule) and not is_band(schedule) and not dict(schedule.params).get("F32_TAPS", 0)
    return direct and channels_last(problem) and problem.dtype == "float16"


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
        reason = dense_sample_problems(problem)
        if reason:
            return Support.no(reason)
        out_d, out_h, out_w = pad3(problem.out_spatial, 1)
        if problem.batch * problem.out_channels * out_d * out_h * cdiv(out_w, 16) > INT32_MAX:
            return Support.no("the launch grid would exceed 2^31 programs")
        return Support.yes()

    # -- schedules --------------------------------------------------------------------------------------------
    def schedules(self, problem: ConvProblem) -> list[Schedule]:
        return schedules(problem)

    def heuristic_schedule(self, problem: ConvProblem) -> Schedule:
        return heuristic_schedule(problem)

    # -- weight and launches ----------------------------------------------------------------------------------
    def prepare_weight(self, weight: torch.Tensor, problem: ConvProblem, schedule: Schedule) -> torch.Tensor:
        # fp32 taps where the kernels multiply in fp32 (a conversion per tap and channel saved), the input's
        # 16-bit type where the direct channels-last kernel sums rows in it.
        dtype = weight.dtype if sums_rows_in_16_bit(problem, schedule) else torch.float32
        flat = weight.reshape(problem.out_channels, prod(problem.kernel)).to(dtype)
        if channels_last(problem):
            return flat.t().contiguous()  # (taps, C_out)
        return flat.contiguous()  # (C_out, taps)

    def half_sum_length(self, problem: ConvProblem, schedule: Schedule) -> int:
        return problem.kernel[-1] if sums_rows_in_16_bit(problem, schedule) else 0  # one filter row

    def takes_epilogue(self, problem: ConvProblem, schedule: Schedule) -> bool:
        return channels_last(problem) and not is_band(schedule)  # the channels-last tile kernel's

    def launches(self, problem: ConvProblem, schedule: Schedule) -> list[KernelLaunch]:
        g = Geometry.of(problem)
        (in_d, in_h, in_w), (out_d, out_h, out_w) = g.spatial, g.out_spatial
        out_cl = output_channels_last(problem)
        dt = problem.ptr_dtype
        args = (
            TensorArg("input", dt),
            TensorArg("weight", dt if sums_rows_in_16_bit(problem, schedule) else "fp32"),
            TensorArg("bias", dt),
            TensorArg("output", dt),
            *size_args(ID=in_d, IH=in_h, IW=in_w, OD=out_d, OH=out_h, OW=out_w),
        )
        constexprs: list[tuple[str, object]] = [
            ("C_IN", problem.in_channels),
            ("MULT", problem.out_channels // problem.in_channels),
            *dim_constexprs(K=g.kernel, S=g.stride, P=g.pad, D=g.dilation),
            ("OUT_CL", out_cl),
            ("HAS_BIAS", problem.has_bias),
        ]
        launch_grid = grid(problem, schedule)
        if is_band(schedule):
            halo_tail = band_geometry(problem)
            assert halo_tail is not None, "band schedules are offered only where band_geometry serves"
            tile = [(name, schedule[name]) for name in ("SEG", "SEGS", "IMG")]
            constexprs += [*tile, ("HALO", halo_tail[0]), ("TAIL", halo_tail[1])]
            fn = _depthwise_band_kernel
            if band_is_1d(problem):
                fn = _depthwise_band1d_kernel
                constexprs.append(("VEC", math.gcd(in_w, out_w, 8)))
            constexprs.append(("DOT_FP32", dot_needs_fp32(problem.dtype)))
            return [KernelLaunch(fn, args, tuple(constexprs), launch_grid, schedule.num_warps, 1)]
        constexprs += [
            ("BLOCK_H", schedule["BLOCK_H"]),
            ("BLOCK_W", schedule["BLOCK_W"]),
            ("BLOCK_C", block_c(schedule)),
        ]
        if channels_last(problem):
            fn, args = _depthwise_cl_kernel, (*args, *epilogue_args(problem))
            loop = TAPS_LOOP if is_taps(schedule) else COLUMNS_LOOP if is_columns(schedule) else DIRECT_LOOP
            rows, slots = tap_rows_and_slots(problem, schedule) if is_taps(schedule) else (0, 0)
            constexprs += [
                ("LOOP", loop.value),
                ("ROW_SUMS_16", sums_rows_in_16_bit(problem, schedule)),
                ("TAP_ROWS", rows),
                ("TAP_SLOTS", slots),
                *epilogue_constexprs(problem),
            ]
        else:
            fn = _depthwise_nc_kernel
        return [
            KernelLaunch(fn, args, tuple(constexprs), launch_grid, schedule.num_warps, schedule.num_stages)
        ]


TEMPLATES = [DepthwiseTemplate()]
