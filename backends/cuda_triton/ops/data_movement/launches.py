"""`launches(spec, schedule)`: the kernel calls of a data-movement spec, in order, and its schedules.

Copy-like specs (`StridedCopySpec`, `CatSpec`, `SplitSpec`, `PadSpec`) launch one copy per piece
(copy_plan.py); `UpsampleSpec` one upsampling kernel. Upsampling arguments (PTX order): x, y pointers, then M, C,
the input's and output's spatial sizes, the input and output strides (N, C, spatial...), int32 (int64 when an
offset needs it), then the fp32 per-dim scales; constexprs EXACT/ALIGN_CORNERS, C_UNIT, INT64, BLOCK_P,
BLOCK_C. Grid: (cdiv(M, BLOCK_P), cdiv(C, BLOCK_C), 1) with M = batch * output positions.
"""

from __future__ import annotations

from ...kernel.launch import TRITON_PTR_DTYPE, KernelLaunch, ScalarArg, Schedule, TensorArg, cdiv
from ..tensor_meta import max_offset, needs_int64
from ..tiling import channels_adjacent, ncdhw, positions_by_channels, positions_by_channels_space
from .copy_plan import copy_launch
from .kernels import copy_schedule, copy_schedules, upsample_bilinear_kernel, upsample_nearest_kernel
from .spec import CatSpec, PadSpec, SplitSpec, StridedCopySpec
from .upsample import UpsampleSpec

DataMovementSpec = StridedCopySpec | CatSpec | SplitSpec | PadSpec | UpsampleSpec


def _channels_unit(spec: UpsampleSpec) -> bool:
    return channels_adjacent(spec.input.sizes[1], spec.input.strides[1], spec.outputs()[0].strides[1])


def heuristic_schedule(spec: DataMovementSpec) -> Schedule:
    if isinstance(spec, UpsampleSpec):
        return positions_by_channels(spec.input.sizes[1], _channels_unit(spec))
    return copy_schedule()


def schedules(spec: DataMovementSpec) -> list[Schedule]:
    """The tuning space (the heuristic's pick first)."""
    if isinstance(spec, UpsampleSpec):
        return positions_by_channels_space(spec.input.sizes[1], _channels_unit(spec))
    return copy_schedules()


def launches(spec: DataMovementSpec, schedule: Schedule) -> list[KernelLaunch]:
    support = spec.supports()
    if not support:
        raise ValueError(support.reason)
    if isinstance(spec, UpsampleSpec):
        return [_upsample_launch(spec, schedule)]
    return [copy_launch(piece, schedule) for piece in spec.pieces()]


def _upsample_launch(spec: UpsampleSpec, schedule: Schedule) -> KernelLaunch:
    out = spec.outputs()[0]
    x_sizes, x_strides = ncdhw(spec.input.sizes, spec.input.strides, spec.spatial)
    y_sizes, y_strides = ncdhw(out.sizes, out.strides, spec.spatial)
    n, c = x_sizes[0], x_sizes[1]
    m = n * y_sizes[2] * y_sizes[3] * y_sizes[4]
    int64 = needs_int64(
        m * c, max_offset(spec.input.sizes, spec.input.strides) + 1, max_offset(out.sizes, out.strides) + 1
    )
    index = "i64" if int64 else "i32"
    scales = (1.0,) * (3 - spec.spatial) + spec.kernel_scales()
    bilinear = spec.mode == "bilinear"
    if bilinear:  # (N, C, H, W) only
        named = [
            ("M", m),
            ("C", c),
            ("H", x_sizes[3]),
            ("W", x_sizes[4]),
            ("OH", y_sizes[3]),
            ("OW", y_sizes[4]),
        ]
        named += list(zip(("XSN", "XSC", "XSH", "XSW"), x_strides[:2] + x_strides[3:], strict=True))
        named += list(zip(("YSN", "YSC", "YSH", "YSW"), y_strides[:2] + y_strides[3:], strict=True))
        floats = list(zip(("RATIO_H", "RATIO_W"), scales[1:], strict=True))
    else:
        named = [("M", m), ("C", c)]
        named += list(zip(("D", "H", "W"), x_sizes[2:], strict=True))
        named += list(zip(("OD", "OH", "OW"), y_sizes[2:], strict=True))
        named += list(zip(("XSN", "XSC", "XSD", "XSH", "XSW"), x_strides, strict=True))
        named += list(zip(("YSN", "YSC", "YSD", "YSH", "YSW"), y_strides, strict=True))
        floats = list(zip(("SCALE_D", "SCALE_H", "SCALE_W"), scales, strict=True))
    dt = TRITON_PTR_DTYPE[spec.input.dtype]
    args = (
        TensorArg("in0", dt),
        TensorArg("out", dt),
        *(ScalarArg(k, index, v) for k, v in named),
        *(ScalarArg(k, "fp32", v) for k, v in floats),
    )
    block_p, block_c = schedule["BLOCK_P"], schedule["BLOCK_C"]
    mode_flag = ("ALIGN_CORNERS", spec.align_corners) if bilinear else ("EXACT", spec.mode == "nearest_exact")
    constexprs = (
        mode_flag,
        ("C_UNIT", _channels_unit(spec)),
        ("INT64", int64),
        ("BLOCK_P", block_p),
        ("BLOCK_C", block_c),
    )
    kernel = upsample_bilinear_kernel if bilinear else upsample_nearest_kernel
    grid = (cdiv(m, block_p), cdiv(c, block_c), 1)
    return KernelLaunch(kernel, args, constexprs, grid, schedule.num_warps, schedule.num_stages)
