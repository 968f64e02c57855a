"""Tile shapes shared by the kernels that tile (output positions x channels): pooling and upsampling."""

from __future__ import annotations

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
