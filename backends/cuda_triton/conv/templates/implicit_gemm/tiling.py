"""Tile shapes of the implicit GEMM: its tuning space's tile configs, group tiles, row tiles, BLOCK_K, the K loop's
length and the schedule that names a choice of them."""

from __future__ import annotations

from ....kernel.launch import Schedule, cdiv
from ....kernel.spaces import TILE_FIELDS, load_rows
from .._f16_mma import f16_block_k
from ..gemm_common import GROUP_M
from ..geometry import Geometry

# (BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages) for 16-bit dtypes; fp32 halves BLOCK_K of the big tiles
# (shared memory). Ordered from large to small tiles; the 4-stage twins of the big tiles are deeper pipelines for
# compute-bound 3x3s (vgg: 0.8x of cuDNN with 3 stages).
BASE_CONFIGS = load_rows(__file__, "BASE_CONFIGS", TILE_FIELDS)

# A group tile is widened until it has this many output channels (block-diagonal weight; wasted MMAs are
# cheap next to the memory traffic of a grouped conv).
GROUP_TILE_CHANNELS = 64


def widest_group_tile(g: Geometry, channels: int = GROUP_TILE_CHANNELS) -> int:
    """The most groups (a divisor of groups) whose tile has at most ``channels`` input and output channels."""
    fits = [t for t in range(1, g.groups + 1) if g.groups % t == 0 and t * max(g.cin_g, g.cout_g) <= channels]
    return max(fits, default=1)


def group_tile_options(g: Geometry) -> list[int]:
    """Divisors of groups worth trying as GROUP_TILE: 1, the widest tile of <= 64 channels (the heuristic's) and
    the widest of <= 128 (fewer, denser programs: RegNet's 8-channel groups)."""
    if g.groups == 1:
        return [1]
    return list(dict.fromkeys((1, widest_group_tile(g), widest_group_tile(g, 2 * GROUP_TILE_CHANNELS))))


def row_tiles(g: Geometry) -> int:
    """1 when programs should walk output rows: contiguous (N, C, ...) inputs with rows of >= 32 pixels, whose
    loads along M are then provably consecutive; channels-last inputs are contiguous along K instead."""
    return 1 if not g.in_cl and g.out_spatial[2] >= 32 else 0


# Shared memory the pipeline's buffers may take (H100/H200: 227 KB per block; Triton needs some for barriers and
# the epilogue's layout conversion).
SMEM_BUDGET = 200 * 1024


def block_k(bk: int, bm: int, bn: int, stages: int, fp32: bool, f16: int) -> int:
    """BLOCK_K of a tile shape given for 16-bit dtypes: fp32 tiles of 128 x 128 and up take 32 (shared memory);
    F16_MMA tiles (A fp32 for F16_MMA=1, fp16 for 2; B fp16) halve it until their stages fit."""
    if f16:
        return f16_block_k(bk, bm, bn, stages, f16, SMEM_BUDGET)
    if fp32 and bm * bn >= 128 * 128 and bk > 32:
        return 32
    return bk


def k_iterations(g: Geometry, cin_t: int, flat: int, bk: int) -> int:
    """Iterations of the kernel's K loop (see K_ITERS in the kernel)."""
    if flat:
        return cdiv(g.taps * cin_t, bk)
    return g.taps * cdiv(cin_t, bk)


def tile_channels(g: Geometry, group_tile: int) -> tuple[int, int]:
    """(input, output) channels of a tile of ``group_tile`` groups."""
    return g.cin_g * group_tile, g.cout_g * group_tile


def tile_schedule(
    warps: int,
    stages: int,
    bm: int,
    bn: int,
    bk: int,
    *,
    group_tile: int,
    flat: int,
    rows: int,
    copy: int,
    f16: int,
    **extra: int,
) -> Schedule:
    """The implicit GEMM's schedule of these tiles: the blocks, the keys every schedule has (GROUP_M, GROUP_TILE,
    FLAT_K, ROW_TILES), then ``extra`` (a tail or a K split). CL_COPY (the input copied to channels-last first)
    and F16_MMA (the tiles on fp16 tensor cores) are left out rather than 0 when off, so such a schedule equals
    the tuning-table entries that never name them."""
    keys = {"GROUP_M": GROUP_M, "GROUP_TILE": group_tile, "FLAT_K": flat, "ROW_TILES": rows}
    if copy:
        keys["CL_COPY"] = 1
    if f16:
        keys["F16_MMA"] = f16
    return Schedule.make(warps, stages, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, **keys, **extra)
