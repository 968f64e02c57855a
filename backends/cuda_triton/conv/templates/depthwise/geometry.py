"""How a depthwise problem maps onto the kernels: input layout, schedule kinds, the band kernel's window
geometry, the share of interior programs and the launch grids."""

from __future__ import annotations

from ....kernel.launch import Schedule, cdiv
from ...problem import ConvProblem
from ..geometry import CHANNELS_LAST, CONTIGUOUS, dense_layout, next_pow2, pad3

# Of a tensor dense in both layouts (one channel or one pixel), these kernels take the contiguous reading.
DENSE_TIE = CONTIGUOUS


def channels_last(problem: ConvProblem) -> bool:
    """Whether the input is read channels-last (`_depthwise_cl_kernel`) rather than contiguous."""
    return dense_layout(problem.input_size, problem.input_stride, prefer=DENSE_TIE) == CHANNELS_LAST


def output_channels_last(problem: ConvProblem) -> bool:
    return dense_layout(problem.output_size, problem.output_stride, prefer=DENSE_TIE) == CHANNELS_LAST


def block_c(schedule: Schedule) -> int:
    """Channels per program. Contiguous-input schedules of one channel carry no BLOCK_C key (so they keep the
    names the shipped tuning tables use)."""
    return dict(schedule.params).get("BLOCK_C", 1)


def is_band(schedule: Schedule) -> bool:
    """Whether the schedule runs `_depthwise_band_kernel` (its schedules carry SEG, SEGS and IMG)."""
    return "SEG" in dict(schedule.params)


def is_taps(schedule: Schedule) -> bool:
    """Whether the schedule runs the channels-last kernel's taps loop (its schedules carry TAP_ROWS)."""
    return "TAP_ROWS" in dict(schedule.params)


def is_columns(schedule: Schedule) -> bool:
    """Whether the schedule runs the channels-last kernel's columns loop (its schedules carry COLS)."""
    return "COLS" in dict(schedule.params)


def tap_rows_and_slots(problem: ConvProblem, schedule: Schedule) -> tuple[int, int]:
    """(TAP_ROWS, TAP_SLOTS) of a taps schedule on ``problem``: filter rows per load (the schedule's, at most the
    filter's), and the power-of-two slot count covering that many rows of taps."""
    rows = min(schedule["TAP_ROWS"], pad3(problem.kernel, 1)[1])
    return rows, next_pow2(rows * problem.kernel[-1])


def band_is_1d(problem: ConvProblem) -> bool:
    """Whether the band kernel's problem is 1-D rows (one input and output row per plane, one filter row), which
    `_depthwise_band1d_kernel` serves."""
    in_d, in_h, _ = pad3(problem.in_spatial, 1)
    out_d, out_h, _ = pad3(problem.out_spatial, 1)
    kd, kh, _ = pad3(problem.kernel, 1)
    return in_d == in_h == out_d == out_h == kd == kh == 1


def band_geometry(problem: ConvProblem) -> tuple[int, int] | None:
    """(HALO, TAIL) of the band kernel for a problem it serves, else None: contiguous fp16/bf16 input (fp32
    would need a TF32 dot), stride 1 along W. HALO (window columns left of a segment's first output) is the
    left padding rounded up to 8, so window rows start 16-byte aligned when the row length allows; TAIL covers
    the columns the last outputs read beyond SEG, a power of two of at least 16 (the dot's minimum K)."""
    if problem.dtype not in ("float16", "bfloat16") or dense_layout(
        problem.input_size, problem.input_stride, prefer=DENSE_TIE
    ) != (CONTIGUOUS):
        return None
    p = problem.params
    if pad3(p.stride, 1)[2] != 1:
        return None
    pw, dw, kw = pad3(p.padding_before, 0)[2], pad3(p.dilation, 1)[2], problem.kernel[-1]
    halo = cdiv(pw, 8) * 8
    tail = max(16, next_pow2(halo - pw + (kw - 1) * dw))
    return (halo, tail) if tail <= 128 else None


def _interior_share(out: int, inp: int, block: int, k: int, s: int, p: int, d: int) -> float:
    """Share of the ``block``-wide tiles along one dim that are full and read only inside the input (the
    kernels' `_tile_is_interior`, per dim)."""
    tiles = cdiv(out, block)
    inner = sum(
        1
        for t in range(tiles)
        if (t + 1) * block <= out
        and t * block * s - p >= 0
        and ((t + 1) * block - 1) * s - p + (k - 1) * d < inp
    )
    return inner / tiles


def interior_fraction(problem: ConvProblem, schedule: Schedule) -> float:
    """Share of a launch's programs that take the unmasked interior path (none for the band, taps and columns
    kernels, whose single path masks every load)."""
    if is_band(schedule) or is_taps(schedule) or is_columns(schedule):
        return 0.0
    p = problem.params
    ins, outs = pad3(problem.in_spatial, 1), pad3(problem.out_spatial, 1)
    ks, ss = pad3(problem.kernel, 1), pad3(p.stride, 1)
    ps, ds = pad3(p.padding_before, 0), pad3(p.dilation, 1)
    blocks = (1, schedule["BLOCK_H"], schedule["BLOCK_W"])
    share = 1.0
    for dim in range(3):
        share *= _interior_share(outs[dim], ins[dim], blocks[dim], ks[dim], ss[dim], ps[dim], ds[dim])
    bc = block_c(schedule)
    return share * (problem.out_channels // bc) / cdiv(problem.out_channels, bc)


def band_grid(problem: ConvProblem, schedule: Schedule) -> tuple[int, int, int]:
    out_d, out_h, out_w = pad3(problem.out_spatial, 1)
    rows = out_d * out_h * cdiv(out_w, schedule["SEG"])
    images = problem.batch // schedule["IMG"]
    if band_is_1d(problem):  # (image block x channel, row block): no runtime division in the kernel
        return (images * problem.out_channels, cdiv(rows, schedule["SEGS"]), 1)
    return (images * problem.out_channels * cdiv(rows, schedule["SEGS"]), 1, 1)


def grid(problem: ConvProblem, schedule: Schedule) -> tuple[int, int, int]:
    """The launch grid of ``schedule`` (the package docstring gives each kernel's)."""
    if is_band(schedule):
        return band_grid(problem, schedule)
    out_d, out_h, out_w = pad3(problem.out_spatial, 1)
    spatial_tiles = out_d * cdiv(out_h, schedule["BLOCK_H"]) * cdiv(out_w, schedule["BLOCK_W"])
    channel_tiles = cdiv(problem.out_channels, block_c(schedule))
    if channels_last(problem):
        return (problem.batch * spatial_tiles, channel_tiles, 1)
    return (problem.batch * channel_tiles * spatial_tiles, 1, 1)
