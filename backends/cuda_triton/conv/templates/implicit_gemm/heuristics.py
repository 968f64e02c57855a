"""The implicit GEMM's heuristic: the schedule it runs when no tuning table has the convolution."""

from __future__ import annotations

import math

from ....kernel.launch import Schedule, cdiv
from ...problem import ConvProblem
from .._cl_copy import can_copy
from .._f16_mma import MIN_MACS_FORWARD, f16_mma_allowed, f16_mma_pays
from .._splitk import MIN_SHARE, split_options, tail_options
from ..geometry import NUM_SMS, Geometry, fit_block
from .tiling import block_k, k_iterations, row_tiles, tile_channels, tile_schedule, widest_group_tile


def heuristic_schedule(problem: ConvProblem, allow_copy: bool = True) -> Schedule:
    """The implicit GEMM's schedule for ``problem`` when no tuning table has it. ``allow_copy=False``: the pick
    without the channels-last copy (CL_COPY), which tuning-table entries tuned without CL_COPY name."""
    g = Geometry.of(problem)
    gt = widest_group_tile(g)
    cin_t, cout_t = tile_channels(g, gt)
    flat = 1 if cin_t < 16 else 0
    k_extent = g.taps * cin_t if flat else cin_t
    # fp32 on fp16 tensor cores (_f16_mma.py) where the MMAs outweigh the two extra passes over the input
    # (its scale, its fp16 copy); such tiles are shaped as for 16-bit dtypes.
    macs = g.m * g.cout * g.taps * g.cin_g
    long_k = (
        f16_mma_allowed(problem)
        and not flat
        and f16_mma_pays(macs, g.batch * g.cin * math.prod(g.spatial), MIN_MACS_FORWARD)
    )
    f16 = 0
    fp32 = problem.dtype == "float32" and not long_k
    tiles_n = g.groups // gt
    # Rules fitted to H200 measurements of the public suite (docs/performance.md): BLOCK_N up to 128 (256
    # lost everywhere); 128-row tiles only with two waves of programs, else 64; flat-K (gather-bound)
    # tiles go down to 32 rows to put more loads in flight.
    bn = fit_block(128, cout_t)
    # A contiguous input with many channels per group is copied to channels-last first (_cl_copy.py): its
    # A tiles are then rows of contiguous channels instead of a gather across channel planes.
    copy = int(
        allow_copy
        and not g.in_cl
        and not flat
        and g.groups == 1
        and cin_t >= 64
        and can_copy(problem, g.int64)
    )
    rows = 0 if copy else row_tiles(g)
    if long_k:  # from a scaled fp16 copy of the input (channels-last when it is copied anyway)
        f16 = 2

    def programs(bm: int) -> int:
        if rows:
            return g.m // g.out_spatial[2] * cdiv(g.out_spatial[2], bm) * cdiv(cout_t, bn) * tiles_n
        return cdiv(g.m, bm) * cdiv(cout_t, bn) * tiles_n

    bm = 128 if programs(128) >= 2 * NUM_SMS else 64
    if flat and programs(64) < 2 * NUM_SMS:
        bm = 32
    bm = fit_block(bm, g.out_spatial[2] if rows else g.m)
    bk = fit_block(32 if fp32 or (flat and k_extent > 64) else 64, k_extent)
    big = bm * bn >= 128 * 128
    warps = 8 if big else 4
    stages = 3 if bk >= 64 or (fp32 and big) or flat else 4
    bk = fit_block(block_k(bk, bm, bn, stages, fp32, f16), k_extent)
    if bm * bn <= 32 * 32:
        warps = 2
    # Too few tiles for a long reduction: split K (64x64 tiles, the split that fills a wave).
    split = {}
    iters = k_iterations(g, cin_t, flat, fit_block(64 if not fp32 else 32, k_extent))
    if not rows and programs(bm) * 2 <= NUM_SMS and iters >= 4 * MIN_SHARE:
        bm2, bn2 = fit_block(64, g.m), fit_block(64, cout_t)
        bk2 = fit_block(64, k_extent)
        splits = split_options(
            g, cdiv(g.m, bm2) * cdiv(cout_t, bn2) * tiles_n, k_iterations(g, cin_t, flat, bk2)
        )
        if splits:
            bm, bn, bk, warps, stages = bm2, bn2, bk2, 4, 3
            split = {"SPLIT_K": splits[-1]}
    # Whole waves and a nearly empty last one, with a long reduction (so the lone last wave costs a whole
    # tile's time): split the last rows of tiles along K instead.
    # 128 x 256 tiles first when they have such a tail (deeplab's 65x65 maps on the H200: one whole wave and
    # one split tile beat two waves of 128 x 128 tiles and a split one).
    if not split and not rows and tiles_n == 1 and k_iterations(g, cin_t, flat, bk) >= 32:
        shapes = [(bm, bn, warps, stages)]
        if bm == 128 and cout_t >= 256 and bn < 256:
            shapes.insert(0, (128, 256, 8, 3))
        for bm2, bn2, warps2, stages2 in shapes:
            found = tail_options(g, bm2, cdiv(cout_t, bn2), k_iterations(g, cin_t, flat, bk))
            if found:
                bm, bn, warps, stages = bm2, bn2, warps2, stages2
                split = {"TAIL_M_TILES": found[0][0], "TAIL_SPLIT": found[0][1]}
                break
    return tile_schedule(
        warps, stages, bm, bn, bk, group_tile=gt, flat=flat, rows=rows, copy=copy, f16=f16, **split
    )
