"""The reduction kernel's schedule (kernels.py) for a `ReductionSpec`: its tile, and a split of L across programs.

A tile is [BLOCK_K rows, BLOCK_R reduced elements] of at most 4096 elements. Where the input's rows are
adjacent in memory (the innermost kept dim has unit stride: channels-last global average pooling, whose rows
are the channels of one image), BLOCK_K spans up to 64 of them, so a load reads whole 128-byte lines of 16-bit
channels (narrower where the reduction is too short to split and the tiles would leave SMs idle); else BLOCK_R
covers the reduction (up to 1024 a step) and BLOCK_K fills the tile. Where that leaves fewer than two programs
per SM over a long reduction, SPLIT programs share each row block's L (kernels.py).
"""

from __future__ import annotations

import triton

from ...conv.templates.geometry import NUM_SMS
from ...kernel.launch import Schedule, ScratchTensor, cdiv, split_k_scratch
from .spec import ReductionSpec, merged_dims

# Most and fewest rows a channels-last tile spans: 64 16-bit channels are one 128-byte line, 16 one sector.
ADJACENT_ROWS = 64
MIN_ADJACENT_ROWS = 16
# The programs a split aims for (about four per SM), the most shares, and the fewest BLOCK_R chunks a share takes.
SPLIT_TARGET_PROGRAMS = 4 * NUM_SMS
MAX_SPLIT = 32
MIN_CHUNKS_PER_SHARE = 2


def split_of(schedule: Schedule) -> int:
    return dict(schedule.params).get("SPLIT", 1)


def heuristic_schedule(spec: ReductionSpec) -> Schedule:
    m, length = spec.out.numel, spec.length
    kept, kept_strides, _, red_strides = merged_dims(spec)
    rows_adjacent = bool(kept) and kept_strides[0][-1] == 1 and kept[-1] >= 8
    rows_adjacent = rows_adjacent and not (red_strides and red_strides[-1] == 1)
    if rows_adjacent:
        block_k = min(ADJACENT_ROWS, triton.next_power_of_2(kept[-1]))
        block_r = max(2, min(triton.next_power_of_2(max(length, 1)), 4096 // block_k))
        # A reduction too short to split (a batch-1 classifier's pooling: 960 channels of 49 positions) fills
        # the GPU with narrower row tiles instead, down to 16 rows (32 bytes of a 16-bit input).
        while (
            block_k > MIN_ADJACENT_ROWS
            and cdiv(m, block_k) < 2 * NUM_SMS
            and cdiv(length, block_r) < 2 * MIN_CHUNKS_PER_SHARE
        ):
            block_k //= 2
    else:
        block_r = max(2, min(1024, triton.next_power_of_2(max(length, 1))))
        block_k = max(1, min(triton.next_power_of_2(max(m, 1)), 4096 // block_r))
        while block_k > 1 and cdiv(m, block_k) < 2 * NUM_SMS:
            block_k //= 2
    programs, chunks = cdiv(m, block_k), cdiv(length, block_r)
    split = 1
    if 0 < programs < 2 * NUM_SMS:
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
