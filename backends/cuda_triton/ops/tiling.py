"""Tiles of (output positions x channels) shared by the pooling and upsampling kernels: their shapes and the
index helpers of the kernels."""

from __future__ import annotations

import triton
import triton.language as tl

from ..conv.templates.geometry import next_pow2
from ..kernel.launch import Schedule, cdiv

GRID_Y_LIMIT = 65535  # CUDA's limit on gridDim.y


def positions_by_channels(
    channels: int, channels_unit: bool, tile: int = 1024, num_warps: int = 4
) -> Schedule:
    """BLOCK_P positions x BLOCK_C channels, ``tile`` elements in all.

    With channels adjacent in memory (channels-last) the channel tile is wide (up to 128), so each load is a run
    of adjacent channels; otherwise it is one channel and the tile runs along the output positions. The channel
    tiles must fit the grid's y dimension.
    """
    block_c = min(next_pow2(channels), 128) if channels_unit else 1
    while cdiv(channels, block_c) > GRID_Y_LIMIT:
        block_c *= 2
    return Schedule.make(num_warps, 1, BLOCK_P=max(1, tile // block_c), BLOCK_C=block_c)


def positions_by_channels_space(channels: int, channels_unit: bool) -> list[Schedule]:
    """A small tuning space around `positions_by_channels` (its default first)."""
    out = [positions_by_channels(channels, channels_unit)]
    for tile, warps in ((512, 4), (2048, 8)):
        s = positions_by_channels(channels, channels_unit, tile, warps)
        if s not in out:
            out.append(s)
    return out


def ncdhw(sizes: tuple[int, ...], strides: tuple[int, ...], spatial: int) -> tuple[list[int], list[int]]:
    """(N, C, D, H, W) sizes and strides of a tensor with 1-3 spatial dims: missing leading spatial dims have
    size 1 (stride 0), an unbatched (C, *spatial) tensor is a batch of one."""
    sizes, strides = list(sizes), list(strides)
    if len(sizes) == spatial + 1:
        sizes, strides = [1, *sizes], [0, *strides]
    missing = 3 - spatial
    return sizes[:2] + [1] * missing + sizes[2:], strides[:2] + [0] * missing + strides[2:]


def channels_adjacent(channels: int, *channel_strides: int) -> bool:
    """Whether every tensor has its channels adjacent (stride 1), the channels-last fast path of the tiles."""
    return channels == 1 or all(s == 1 for s in channel_strides)


@triton.jit
def split_positions(offs_p, OD, OH, OW):
    """(n, od, oh, ow) of flat output positions (batch and spatial positions flattened, the last fastest)."""
    ow = offs_p % OW
    oh = (offs_p // OW) % OH
    od = (offs_p // (OW * OH)) % OD
    n = offs_p // (OW * OH * OD)
    return n, od, oh, ow


@triton.jit
def channel_offsets(offs_c, XSC, YSC, C_UNIT: tl.constexpr):
    """The channels' element offsets in the input and the output; C_UNIT: both strides are 1 (written as 1 so
    the compiler sees adjacent channels)."""
    if C_UNIT:
        x_c = offs_c
        y_c = offs_c
    else:
        x_c = offs_c * XSC
        y_c = offs_c * YSC
    return x_c, y_c


@triton.jit
def tile_offsets(BLOCK_P: tl.constexpr, BLOCK_C: tl.constexpr, INT64: tl.constexpr):
    """This program's output positions (grid axis 0; 64-bit with INT64) and channels (grid axis 1)."""
    offs_p = tl.program_id(0) * BLOCK_P + tl.arange(0, BLOCK_P)
    offs_c = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)
    if INT64:
        offs_p = offs_p.to(tl.int64)
    return offs_p, offs_c
