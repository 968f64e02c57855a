"""Box geometry: the (BOX_N, BOX_H, BOX_W) pixel boxes that tile a convolution's output, the strided view, and the
launch options a box schedule implies (shared-memory swizzle, register cap of warp-specialised kernels)."""

from __future__ import annotations

import itertools
import math

from ....kernel.launch import Schedule, cdiv
from ..geometry import Geometry, next_pow2

REGISTERS_PER_SM = 65536


MAX_BOX_DIM = 256  # a TMA box side has at most 256 elements


def box_count(g: Geometry, box: tuple[int, int, int]) -> int:
    """How many (BOX_N, BOX_H, BOX_W) boxes cover the output: the grid's first axis."""
    _, oh, ow = g.out_spatial
    return cdiv(g.batch, box[0]) * cdiv(oh, box[1]) * cdiv(ow, box[2])


def box_waste(g: Geometry, box: tuple[int, int, int]) -> float:
    """Pixels the boxes cover over pixels the output has (1.0: the boxes tile the output exactly)."""
    return box_count(g, box) * math.prod(box) / g.m


def box_shapes(g: Geometry, block_m: int) -> list[tuple[int, int, int]]:
    """(BOX_N, BOX_H, BOX_W) of ``block_m`` pixels, least waste first (then wider, then taller boxes: longer TMA
    runs, fewer halo rows)."""
    _, oh, ow = g.out_spatial
    out = []
    powers = [1 << e for e in range(block_m.bit_length())]
    for bh, bw in itertools.product(powers, powers):
        if block_m % (bh * bw) or bh > next_pow2(oh) or bw > next_pow2(ow) or max(bh, bw) > MAX_BOX_DIM:
            continue
        if block_m // (bh * bw) <= MAX_BOX_DIM:
            out.append((block_m // (bh * bw), bh, bw))
    return sorted(out, key=lambda b: (box_waste(g, b), -b[2], -b[1]))


def reads_strided_view(g: Geometry) -> bool:
    """Whether the kernel reads the strided view (the package docstring describes it)."""
    return g.stride[1] * g.stride[2] > 1


def box_of(schedule: Schedule) -> tuple[int, int, int]:
    return (schedule["BOX_N"], schedule["BOX_H"], schedule["BOX_W"])


def ws_maxnreg(schedule: Schedule) -> int | None:
    """A warp-specialised kernel runs its schedule's warps plus a warpgroup for the copy warp; at launch every
    thread holds ``maxnreg`` registers (the partitions trade them with setmaxnreg afterwards), so with 8 MMA warps
    the 12 must fit the register file: at most 168 each. None where the compiler's own limit fits."""
    if not dict(schedule.params).get("WS"):
        return None
    limit = REGISTERS_PER_SM // ((schedule.num_warps + 4) * 32) // 8 * 8
    return limit if limit < 255 else None


def nvmma_swizzle(row_bytes: int) -> int:
    """The NVMMA swizzle width of a shared tile whose rows are ``row_bytes`` long (at most 128)."""
    return min(128, row_bytes)
