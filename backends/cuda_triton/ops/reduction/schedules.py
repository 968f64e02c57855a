"""The reduction kernel's schedule (kernels.py) for a `ReductionSpec`: its tile, and a split of L across programs.

A tile is [BLOCK_K rows, BLOCK_R reduced elements] of at most 4096 elements. Where the input's rows are
adjacent in memory (the innermost kept dim has unit stride: channels-last global average pooling, whose rows
are the channels of one image), BLOCK_K spans up to 64 of them, so a load reads whole 128-byte lines of 16-bit
channels; else BLOCK_R covers the reduction (up to 1024 a step) and BLOCK_K fills the tile. Where that leaves fewer
than two programs per SM over a long reduction, SPLIT programs share each row block's L (kernels.py).

Both pay on large inputs (`WIDE_TILES_MIN_ELEMENTS`); a small one, such as a batch-1 squeeze-excitation mean,
takes one row per program over as many programs as it has rows, split only where a program would otherwise walk
`LONG_ROW_CHUNKS` chunks or more alone (a few very long rows).
"""

from __future__ import annotations

import triton

from ...conv.templates.geometry import NUM_SMS
from ...kernel.launch import Schedule, ScratchTensor, cdiv, split_k_scratch
from .spec import ReductionSpec, merged_dims

# Most rows a channels-last tile spans: 64 16-bit channels are one 128-byte line.
ADJACENT_ROWS = 64
# The programs a split aims for (about four per SM), the most shares, and the fewest BLOCK_R chunks a share takes.
SPLIT_TARGET_PROGRAMS = 4 * NUM_SMS
MAX_SPLIT = 32
MIN_CHUNKS_PER_SHARE = 2
# Fewest input elements for adjacent-row tiles and splits. Below it, the latency of a few programs' sequential
# chunks and of the split's combine outweighs the wider reads: on the H100, EfficientNet-B0's squeeze-excitation
# means took 4.3-9.4 us each at batch 1 on one-row tiles against 4.4-10.5 us with both (8.5 against 4.8 us on
# 480 channels of 14x14), and at batch 32 the 240- and 480-channel means on 14x14 maps (1.5M and 3M elements)
# took 6.5 and 7.6 us against 8.6 and 9.1 us; from 672 channels of 14x14 (4.2M) up the wide tiles won (8.5
# against 9.6 us; 25.9 -> 20.0 us on 32x112x112).
WIDE_TILES_MIN_ELEMENTS = 1 << 22
LONG_ROW_CHUNKS = 16


def split_of(schedule: Schedule) -> int:
    return dict(schedule.params).get("SPLIT", 1)


def heuristic_schedule(spec: ReductionSpec) -> Schedule:
    m, length = spec.out.numel, spec.length
    kept, kept_strides, _, red_strides = merged_dims(spec)
    wide = m * length >= WIDE_TILES_MIN_ELEMENTS
    rows_adjacent = wide and bool(kept) and kept_strides[0][-1] == 1 and kept[-1] >= 8
    rows_adjacent = rows_adjacent and not (red_strides and red_strides[-1] == 1)
    if rows_adjacent:
        block_k = min(ADJACENT_ROWS, triton.next_power_of_2(kept[-1]))
        block_r = max(2, min(triton.next_power_of_2(max(length, 1)), 4096 // block_k))
    else:
        block_r = max(2, min(1024, triton.next_power_of_2(max(length, 1))))
        block_k = max(1, min(triton.next_power_of_2(max(m, 1)), 4096 // block_r))
        while block_k > 1 and cdiv(m, block_k) < 2 * NUM_SMS:
            block_k //= 2
    programs, chunks = cdiv(m, block_k), cdiv(length, block_r)
    split = 1
    if (wide or chunks >= LONG_ROW_CHUNKS) and 0 < programs < 2 * NUM_SMS:
        split = max(1, min(MAX_SPLIT, cdiv(SPLIT_TARGET_PROGRAMS, programs), chunks // MIN_CHUNKS_PER_SHARE))
    tile = block_k * block_r
    params = {"BLOCK_K": block_k, "BLOCK_R": block_r}
    if split > 1:
        params["SPLIT"] = split
    return Schedule.make(num_warps=4 if tile >= 1024 else max(1, tile // 256), num_stages=1, **params)


def scratch(spec: ReductionSpec, schedule: Schedule) -> list[ScratchTensor]:
    """A split schedule's fp32 partial results [SPLIT, M] and zeroed counters, one per row block (none
    otherwise)."""
    split = split_of(schedule)
    if split == 1:
        return []
    m = spec.out.numel
    return split_k_scratch((split, m), cdiv(m, schedule["BLOCK_K"]))
