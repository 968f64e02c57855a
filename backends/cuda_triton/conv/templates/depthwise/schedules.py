"""The depthwise tuning space (six schedule families: channels-last, channels-last taps, channels-last columns,
contiguous one channel, contiguous several channels, band) and the heuristic that picks one schedule of it."""

from __future__ import annotations

import math

from ....kernel.launch import Schedule, cdiv, prod
from ....kernel.spaces import load_rows
from ...problem import ConvProblem
from ..geometry import INT32_MAX, NUM_SMS, next_pow2, pad3
from .geometry import (
    band_geometry,
    band_grid,
    band_is_1d,
    block_c,
    channels_last,
    grid,
    interior_fraction,
    is_band,
    is_columns,
    is_taps,
    tap_rows_and_slots,
)

# Fewest filter taps along W for which the heuristic picks the band kernel (see `heuristic_schedule`).
BAND_MIN_TAPS = 7

# Relative cost of an edge program's element (masked taps) to an interior one's, for the heuristic: the masked
# loop spends roughly half again as many instructions per tap.
EDGE_COST = 1.5


# (BLOCK_H, BLOCK_W, BLOCK_C, num_warps) for channels-last inputs. The later rows are small position tiles
# (most programs interior for 5x5/7x7 filters on 14..56-wide maps) and fewer warps (more positions per
# thread share one weight vector load).
CL_SPACE = load_rows(__file__, "CL_SPACE", ("BLOCK_H", "BLOCK_W", "BLOCK_C", "num_warps"))
# (BLOCK_H, BLOCK_W, BLOCK_C, TAP_ROWS, num_warps) of the channels-last taps kernel: the winners of an H100
# sweep over ConvNeXt's 7x7 and EfficientNet's 5x5 layers at batch 1 (small tiles, 1-2 warps: ~4 programs per
# SM), one or two filter rows per load, all rows for the smallest maps.
TAPS_SPACE = load_rows(__file__, "TAPS_SPACE", ("BLOCK_H", "BLOCK_W", "BLOCK_C", "TAP_ROWS", "num_warps"))
# (BLOCK_H, BLOCK_W, BLOCK_C, num_warps) of the channels-last columns kernel (columns_kernel.py): BLOCK_W output
# columns unrolled, each a [BLOCK_H, BLOCK_C] accumulator, 1-4 elements a thread.
COLS_SPACE = load_rows(__file__, "COLS_SPACE", ("BLOCK_H", "BLOCK_W", "BLOCK_C", "num_warps"))
# When the heuristic picks the columns kernel: a 2-D channels-last layer of at least 32 channels (the tile's
# channel block) that the taps kernel does not take or that has `COLS_OVER_TAPS_OUTPUTS` outputs, of unit dilation
# and stride at most 2, with a 5x5 or 7x7 filter on an output map at least `COLS_MIN_OUT_W` wide, on the tile
# `COLS_TILE` (BLOCK_H, BLOCK_W, BLOCK_C, num_warps). The H100 tuner at batch 32 (fp16, us, best columns / best
# direct / cuDNN): ConvNeXt-T's 7x7 layers 56x56x96 43.3 / 64.5 / 92.7, 28x28x192 25.7 / 38.1 / 54.1, 14x14x384
# 15.4 / 25.2 / 30.0; EfficientNet-B0's 5x5 layers 28x28x240 22.3 / 32.0 / 37.0 and stride 2 from 56x56x144
# 24.6 / 28.6 / 33.8. On 14x14 maps a 5x5 filter ran 2.2x slower on the columns kernel (46.0 /
# 21.1), and on 7x7 maps neither filter size was timed on it; 3x3 filters gained at most 8% (56x56 and 112x112
# maps). This tile won or came second on every layer above. Other filter sizes, 3-D filters and narrower
# layers are not timed, so they keep the direct kernel.
COLS_MIN_OUT_W = {5: 28, 7: 14}
COLS_MIN_CHANNELS = 32
COLS_TILE = (4, 8, 32, 2)
# Most tap-slot elements (positions x slots x channels) a thread of a taps schedule holds per load, by element
# size. ptxas -v for sm_90 on every taps schedule of a 5x5 and a 7x7 layer: no 16-bit schedule up to 256 spilled
# (at most 243 registers); in fp32 every schedule of 128 but one spilled (8-344 bytes), of 64 one (32 bytes).
TAPS_MAX_PER_THREAD = {2: 256, 4: 64}
# When the heuristic picks the taps kernel: a channels-last filter of at least 3x3 on a layer of at most
# `taps_max_outputs` outputs. The taps kernel wins where the direct kernel leaves SMs with few warps (the H100
# tuner, every batch-1 depthwise layer of ConvNeXt-T, EfficientNet-B0 and MobileNetV3: 5x5 and 7x7 filters
# 1.1-3.5x, 3x3 filters on maps up to 2^18 outputs 1.1-1.7x); 3x3 layers of more outputs, or of fewer than 32
# channels (a half-empty channel block), stayed faster on the direct kernel, and at batch 32 EfficientNet-B0 and
# MobileNetV3 ran 1-3% slower with taps on their 5x5 layers.
TAPS_MIN_SIDE = 3
TAPS_MIN_CHANNELS = 32
TAPS_MAX_OUTPUTS_3X3 = 2**18
TAPS_MAX_OUTPUTS = 2**21
# From 2^20 outputs a layer the columns kernel takes (`wants_columns`) goes to it rather than the taps kernel (H100
# tuner: 5x5 on 28x28x240 at batch 8, 1.5M outputs, columns 7.2 us against taps 18.7; 5x5 stride 2 on 56x56x72 at
# batch 32, 1.8M, 15.1 against 27.4). The batch-1 layers of the models hold at most 301K outputs.
COLS_OVER_TAPS_OUTPUTS = 2**20
# Programs the taps heuristic aims for: about four per SM, the H100 sweep's winners on every batch-1 layer.
TAPS_TARGET_PROGRAMS = 4 * NUM_SMS

# (BLOCK_H, BLOCK_W, num_warps) for contiguous inputs, one channel per program (BLOCK_C absent, i.e. 1).
NC_SPACE = load_rows(__file__, "NC_SPACE", ("BLOCK_H", "BLOCK_W", "num_warps"))
# (BLOCK_H, BLOCK_W, BLOCK_C, num_warps) for contiguous inputs, BLOCK_C channels per program: short column
# tiles keep most programs interior on long 1-D rows, several channels keep each program busy.
NC_MULTI_SPACE = load_rows(__file__, "NC_MULTI_SPACE", ("BLOCK_H", "BLOCK_W", "BLOCK_C", "num_warps"))
# (SEG, SEGS, IMG, num_warps) of the band kernel (contiguous fp16/bf16 input, W stride 1): a program is
# IMG images times SEGS row segments of SEG outputs of one channel, i.e. one (IMG * SEGS, SEG + TAIL) @
# (SEG + TAIL, SEG) tensor-core product. Big tiles share the band (built per program) across more rows.
# The first rows hold the H200 winners of a sweep of 1-D rows (N=8: IMG 8, SEG 32, SEGS 16, 4 warps;
# N=1: SEG 16 or long rows SEG 32, SEGS 64); 64-wide segments for 1-MB rows stayed only with 4+ warps (the
# others compiled to 670-810 SASS instructions and never won); the rest are bigger dots (M 128-256) and
# 8 warps, so the tuner can try fewer, fuller programs.
BAND_SPACE = load_rows(__file__, "BAND_SPACE", ("SEG", "SEGS", "IMG", "num_warps"))


def band_schedules(problem: ConvProblem) -> list[Schedule]:
    """The band kernel's schedules for ``problem`` (none where `band_geometry` does not serve it)."""
    if band_geometry(problem) is None:
        return []
    out_d, out_h, out_w = pad3(problem.out_spatial, 1)
    seg_cap = max(16, next_pow2(out_w))
    return [
        Schedule.make(warps, 1, SEG=seg, SEGS=segs, IMG=img)
        for seg, segs, img, warps in BAND_SPACE
        if problem.batch % img == 0
        and seg <= seg_cap
        and segs <= max(16, next_pow2(out_d * out_h * cdiv(out_w, seg)))
    ]


def taps_schedules(problem: ConvProblem) -> list[Schedule]:
    """The taps kernel's schedules for a channels-last ``problem`` whose loaded tile fits a thread's registers."""
    out_h, out_w = pad3(problem.out_spatial, 1)[1:]
    h_cap, w_cap = next_pow2(out_h), max(4, next_pow2(out_w))
    c_cap = max(32, next_pow2(problem.out_channels))  # the space's narrowest channel block
    found = []
    for bh, bw, bc, rows, warps in TAPS_SPACE:
        schedule = Schedule.make(warps, 1, BLOCK_H=bh, BLOCK_W=bw, BLOCK_C=bc, TAP_ROWS=rows)
        slots = tap_rows_and_slots(problem, schedule)[1]
        fits = bh * bw * bc * slots <= TAPS_MAX_PER_THREAD[problem.element_size] * 32 * warps
        if bh <= h_cap and bw <= w_cap and bc <= c_cap and fits and schedule not in found:
            found.append(schedule)
    return found


def schedules(problem: ConvProblem) -> list[Schedule]:
    """The tuning space for ``problem``: the direct kernel of its input layout, the taps kernel for channels-last
    inputs, and the band kernel where it serves."""
    out_h, out_w = pad3(problem.out_spatial, 1)[1:]
    h_cap = next_pow2(out_h)
    c_cap = next_pow2(problem.out_channels)
    if channels_last(problem):
        w_cap = max(4, next_pow2(out_w))
        direct = [
            Schedule.make(warps, 1, BLOCK_H=bh, BLOCK_W=bw, BLOCK_C=bc)
            for bh, bw, bc, warps in CL_SPACE
            if bh <= h_cap and bw <= w_cap and bc <= max(16, c_cap)
        ]
        if problem.dtype == "float16":  # each also with every product summed in fp32 (the kernels' F32_TAPS)
            direct += [Schedule.make(s.num_warps, 1, **dict(s.params), F32_TAPS=1) for s in direct]
        columns = [
            Schedule.make(warps, 1, BLOCK_H=bh, BLOCK_W=bw, BLOCK_C=bc, COLS=1)
            for bh, bw, bc, warps in COLS_SPACE
            if bh <= h_cap and bw <= w_cap and bc <= max(32, c_cap)
        ]
        if problem.dtype == "float16":
            columns += [Schedule.make(s.num_warps, 1, **dict(s.params), F32_TAPS=1) for s in columns]
        found = direct + taps_schedules(problem) + columns
        fallback = Schedule.make(4, 1, BLOCK_H=1, BLOCK_W=4, BLOCK_C=16)
    else:
        w_cap = max(16, next_pow2(out_w))
        found = [
            Schedule.make(warps, 1, BLOCK_H=bh, BLOCK_W=bw)
            for bh, bw, warps in NC_SPACE
            if bh <= h_cap and bw <= w_cap
        ] + [
            Schedule.make(warps, 1, BLOCK_H=bh, BLOCK_W=bw, BLOCK_C=bc)
            for bh, bw, bc, warps in NC_MULTI_SPACE
            if bh <= h_cap and bw <= w_cap and bc <= c_cap
        ]
        found += band_schedules(problem)
        fallback = Schedule.make(1, 1, BLOCK_H=1, BLOCK_W=16)
    # Small tiles on a huge problem could overflow grid axis 0 (`supports` vouches for the fallback).
    found = [s for s in found if grid(problem, s)[0] <= INT32_MAX and grid(problem, s)[1] <= 65535]
    return found or [fallback]


def heuristic_schedule(problem: ConvProblem) -> Schedule:
    """The band kernel for 1-D rows of 7+ taps (`band_cost`), the taps kernel for small channels-last layers
    (`taps_cost`), the columns kernel for larger channels-last layers of 5x5+ filters (`wants_columns`), else the
    direct kernel: least estimated work first (padding waste, edge programs' masked taps),
    then a tile near the size that keeps the memory system busy."""
    _, out_h, out_w = pad3(problem.out_spatial, 1)
    cl = channels_last(problem)
    # Elements per program (H200 sweeps): ~2048 fp16/bf16 or ~1024 fp32 channels-last; contiguous inputs
    # favour small tiles (the tuned table's winners hold 64-512 elements).
    target = (2048 if problem.element_size <= 2 else 1024) if cl else 256

    def cost(s: Schedule) -> tuple[float, float, float]:
        bh, bw, bc = s["BLOCK_H"], s["BLOCK_W"], block_c(s)
        programs = cdiv(out_h, bh) * cdiv(out_w, bw) * cdiv(problem.out_channels, bc)
        # A tile smaller than the program's threads leaves lanes idle: count them as padding too.
        waste = programs * max(bh * bw * bc, 32 * s.num_warps) / (out_h * out_w * problem.out_channels)
        inner = interior_fraction(problem, s)
        work = waste * (inner + EDGE_COST * (1.0 - inner))
        # Contiguous input: the warps span W first, so a thread's columns of one row share each weight
        # load (per-tap weight loads otherwise cost as much as the input's).
        shared_weight = 0.0 if cl else -min(bw / (32 * s.num_warps), 4.0)
        return (round(max(work, 1.2), 1), abs(math.log2(bh * bw * bc / target)), shared_weight)

    space = schedules(problem)
    band = [sch for sch in space if is_band(sch)]
    # Band for 1-D rows with 7+ taps only. On the H200 (us, best band vs best direct schedule): k=15
    # 6.16 vs 10.16 (N=8, L=500), 3.05 vs 3.36 (N=1); k=31 6.72 vs 17.58; but k=5 3.96 vs 3.80 (L=8000) and
    # k=3 8.43 vs 3.66: the direct kernels' per-tap cost grows with k, the band's barely does.
    if band and band_is_1d(problem) and problem.kernel[-1] >= BAND_MIN_TAPS:
        return min(band, key=lambda sch: band_cost(problem, sch))
    taps = [sch for sch in space if is_taps(sch)]
    _, kh, kw = pad3(problem.kernel, 1)
    outputs = problem.batch * prod(pad3(problem.out_spatial, 1)) * problem.out_channels
    columns = wants_columns(problem)
    columns_first = columns and outputs >= COLS_OVER_TAPS_OUTPUTS
    if taps and min(kh, kw) >= TAPS_MIN_SIDE and outputs <= taps_max_outputs(kh, kw) and not columns_first:
        if problem.out_channels >= TAPS_MIN_CHANNELS or min(kh, kw) > 3:
            return min(taps, key=lambda sch: taps_cost(problem, sch))
    if columns:
        bh, bw, bc, warps = COLS_TILE
        wanted = Schedule.make(warps, 1, BLOCK_H=bh, BLOCK_W=bw, BLOCK_C=bc, COLS=1)
        if wanted in space:
            return wanted
    space = [sch for sch in space if not (is_band(sch) or is_taps(sch) or is_columns(sch))] or space
    if not cl and out_h > 1:
        # Several channels per program were measured on 1-D rows only; 2-D/3-D planes keep one channel.
        space = [s for s in space if block_c(s) == 1] or space
    return min(space, key=cost)


def wants_columns(problem: ConvProblem) -> bool:
    """Whether the columns kernel suits a layer (see `COLS_MIN_OUT_W`): the heuristic gives it those the taps
    kernel does not take, and those of `COLS_OVER_TAPS_OUTPUTS` outputs or more."""
    if not channels_last(problem) or len(problem.kernel) != 2 or problem.out_channels < COLS_MIN_CHANNELS:
        return False
    side = min(problem.kernel)
    if side not in COLS_MIN_OUT_W or max(problem.params.dilation) > 1 or max(problem.params.stride) > 2:
        return False
    return problem.out_spatial[1] >= COLS_MIN_OUT_W[side]


def taps_max_outputs(kh: int, kw: int) -> int:
    """Most outputs of a layer with a ``kh`` x ``kw`` filter for which the heuristic picks the taps kernel."""
    return TAPS_MAX_OUTPUTS_3X3 if min(kh, kw) <= 3 else TAPS_MAX_OUTPUTS


def wanted_tap_rows(problem: ConvProblem) -> int:
    """Filter rows per load the heuristic wants: every row of a 5-wide filter (32 slots), else two (the tuner's
    winners on the H100: all rows on every 5x5 layer, two rows on 3x3 and on all but the smallest 7x7 map)."""
    kh = pad3(problem.kernel, 1)[1]
    return kh if problem.kernel[-1] == 5 else min(2, kh)


def taps_cost(problem: ConvProblem, schedule: Schedule) -> tuple[float, bool, float, int]:
    """The taps heuristic's order: padding waste; the filter rows per load of `wanted_tap_rows`; programs near
    `TAPS_TARGET_PROGRAMS`; fewer warps."""
    bh, bw, bc = schedule["BLOCK_H"], schedule["BLOCK_W"], schedule["BLOCK_C"]
    programs = prod(grid(problem, schedule))
    waste = (
        programs * bh * bw * bc / (problem.batch * prod(pad3(problem.out_spatial, 1)) * problem.out_channels)
    )
    rows_fit = tap_rows_and_slots(problem, schedule)[0] == wanted_tap_rows(problem)
    return (
        round(waste, 1),
        not rows_fit,
        abs(math.log2(programs / TAPS_TARGET_PROGRAMS)),
        schedule.num_warps,
    )


def band_cost(problem: ConvProblem, schedule: Schedule) -> tuple[float, bool, float]:
    """The band heuristic's order of schedules: padding waste first, then at least ~2 programs per SM (the H200's
    fastest conformer schedule ran 512 programs of 4 warps on 132 SMs), then loads per output: the window
    (SEG + TAIL per SEG outputs) plus the band's weight gathers shared by the tile's rows."""
    halo_tail = band_geometry(problem)
    assert halo_tail is not None
    seg, segs, img = schedule["SEG"], schedule["SEGS"], schedule["IMG"]
    programs = prod(band_grid(problem, schedule))
    out = prod(pad3(problem.out_spatial, 1)) * problem.out_channels * problem.batch
    waste = programs * img * segs * seg / out
    window = seg + halo_tail[1]
    loads = window / seg + window / (img * segs)
    return (round(waste, 1), programs < 2 * NUM_SMS, loads)
