"""Split-K for the GEMM templates: the rules for when to split, the scratch a split needs, and the workspace
reduction kernel that finishes tail splits.

Layers with few output positions and a long reduction (7x7 or 14x14 maps at batch 1, 1x1 convs with many input
channels) give too few output tiles to fill the GPU. A split-K schedule (SPLIT_K > 1) launches the template's
kernel with a third grid axis: program_id(2) takes one contiguous share of the K iterations and stores its fp32
partial sums, without bias, into the workspace [SPLIT_K, M, C_out] (role "workspace", M = batch * output
pixels, channels fastest), then counts itself done on its tile's counter (role "tile_counters", one int32 per
program of grid axes 0 and 1). The tile's last share to finish adds the shares up in a fixed order
(deterministic), applies the bias and the fused epilogue, writes the output and sets the counter back to zero
(`gemm_jit.store_tile`). One launch: a reduction kernel after it would cost a launch and a round trip of the
workspace, which at batch 1 took as long as the split saved. The counters are a zeroed scratch tensor
(`ScratchTensor.zeroed`): the delegate keeps them in its state buffer, zeroed once at init.

*Tail-split* schedules (TAIL_SPLIT > 1, implicit GEMM) still end with `splitk_reduce_kernel`: when the output
tiles fill a few whole waves of the GPU plus a nearly empty last one (deeplab's 65x65 maps at batch 4: M = 16900 =
132 * 128 + 4 rows), the last TAIL_M_TILES rows of tiles are split along K over TAIL_SPLIT programs each, which
run beside the whole tiles instead of one lone wave after them (the "stream-K" idea, kept deterministic). Their
partial sums go to a workspace [TAIL_SPLIT, TAIL_ROWS, C_out]; the reduction writes them at output row ROW0.

``splitk_reduce_kernel`` arguments (PTX order): ws, bias, y pointers, int32 M (the tail's rows), OUT_PIXELS, ROW0;
constexprs C_OUT, SPLIT_K (the tail's shares), HAS_BIAS, OUT_CL, BLOCK_M, BLOCK_C. Grid: (cdiv(M, BLOCK_M),
cdiv(C_out, BLOCK_C), 1).
"""

from __future__ import annotations

import triton
import triton.language as tl

from ...kernel.launch import KernelLaunch, Schedule, ScratchTensor, TensorArg, cdiv, split_k_scratch
from ...kernel.spaces import TILE_FIELDS, load_rows
from ..problem import ConvProblem
from .geometry import NUM_SMS, Geometry
from .launch_args import size_args


@triton.jit
def splitk_reduce_kernel(
    ws_ptr, b_ptr, y_ptr, M, OUT_PIXELS, ROW0,
    C_OUT: tl.constexpr, SPLIT_K: tl.constexpr, HAS_BIAS: tl.constexpr, OUT_CL: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_C: tl.constexpr,
):  # fmt: skip
    """y rows ROW0.. = the sum of the SPLIT_K partial sums in the workspace [SPLIT_K, M, C_OUT] (+ bias), in y's
    layout."""
    offs_m = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_c = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)
    ok = (offs_m < M)[:, None] & (offs_c < C_OUT)[None, :]
    ws = ws_ptr + offs_m[:, None] * C_OUT + offs_c[None, :]
    acc = tl.zeros((BLOCK_M, BLOCK_C), dtype=tl.float32)
    for s in tl.static_range(SPLIT_K):  # a fixed order: the sum is deterministic
        acc += tl.load(ws + s * M * C_OUT, mask=ok, other=0.0)
    if HAS_BIAS:
        acc += tl.load(b_ptr + offs_c, mask=offs_c < C_OUT, other=0.0).to(tl.float32)[None, :]
    rows = ROW0 + offs_m
    n = rows // OUT_PIXELS
    if OUT_CL:
        y_off = rows[:, None] * C_OUT + offs_c[None, :]
    else:
        pixel = rows % OUT_PIXELS
        y_off = (n[:, None] * C_OUT + offs_c[None, :]) * OUT_PIXELS + pixel[:, None]
    tl.store(y_ptr + y_off, acc.to(y_ptr.dtype.element_ty), mask=ok)


# Tile shapes (BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages) offered with a split: the split is for few
# tiles, so big ones rarely win.
SPLIT_CONFIGS = load_rows(__file__, "SPLIT_CONFIGS", TILE_FIELDS)
MAX_SPLIT = 16
MIN_SHARE = 4  # K iterations each share keeps at least (fewer cannot hide the load latency)
_REDUCE_BLOCK_M, _REDUCE_BLOCK_C, _REDUCE_WARPS = 64, 64, 4


def split_k_of(schedule: Schedule) -> int:
    """The schedule's SPLIT_K (1 when absent: schedules without a split do not carry the key)."""
    return dict(schedule.params).get("SPLIT_K", 1)


def split_options(g: Geometry, programs: int, iters: int) -> list[int]:
    """SPLIT_K values worth trying for a tile shape with ``programs`` programs and ``iters`` K iterations.

    None when the programs already fill half the GPU; else the power of two that brings them to a full wave,
    and half of it, each share keeping at least MIN_SHARE iterations. The workspace must stay addressable with
    32-bit offsets (64-bit problems are never split).
    """
    if g.int64 or programs * 2 > NUM_SMS:
        return []
    split = 2
    while programs * split < NUM_SMS and split * 2 <= MAX_SPLIT:
        split *= 2
    while split > 1 and iters // split < MIN_SHARE:
        split //= 2
    while split > 1 and split * g.m * g.cout >= 2**31:
        split //= 2
    return sorted({split, split // 2} - {0, 1})


def tail_split_of(schedule: Schedule) -> int:
    """The schedule's TAIL_SPLIT (1 when absent)."""
    return dict(schedule.params).get("TAIL_SPLIT", 1)


def tail_rows(g: Geometry, block_m: int, tail_m_tiles: int) -> tuple[int, int]:
    """(ROW0, TAIL_ROWS): the first output row of the split tail and how many rows it has."""
    row0 = (cdiv(g.m, block_m) - tail_m_tiles) * block_m
    return row0, g.m - row0


def tail_options(g: Geometry, block_m: int, n_programs: int, iters: int) -> list[tuple[int, int]]:
    """(TAIL_M_TILES, TAIL_SPLIT) worth trying for a tile shape: when the whole programs fill at least one wave
    and leave a last wave under a quarter full that is a few rows of tiles, split those rows so the tail
    fills the idle SMs; [] otherwise. ``n_programs`` is the programs per row of M tiles."""
    m_tiles = cdiv(g.m, block_m)
    programs = m_tiles * n_programs
    left = programs % NUM_SMS
    if g.int64 or programs < NUM_SMS or left == 0 or left * 4 > NUM_SMS:
        return []
    tail_m = cdiv(left, n_programs)
    if tail_m >= m_tiles:
        return []
    tail_programs = tail_m * n_programs
    split = 2
    while tail_programs * split * 2 <= NUM_SMS and split * 2 <= 4 * MAX_SPLIT:
        split *= 2
    while split > 1 and iters // split < MIN_SHARE:
        split //= 2
    row0, rows = tail_rows(g, block_m, tail_m)
    if split < 2 or split * rows * g.cout >= 2**31:
        return []
    return [(tail_m, split)]


def split_scratch(problem: ConvProblem, schedule: Schedule, tiles: int) -> list[ScratchTensor]:
    """A split schedule's fp32 partial sums [SPLIT_K, M, C_out] and its zeroed tile counters (``tiles``: the
    programs of grid axes 0 and 1); a tail-split schedule's partial sums [TAIL_SPLIT, TAIL_ROWS, C_out]; nothing
    otherwise."""
    split = split_k_of(schedule)
    g = Geometry.of(problem)
    if split > 1:
        return split_k_scratch((split, g.m, g.cout), tiles)
    tail = tail_split_of(schedule)
    if tail > 1:
        _, rows = tail_rows(g, schedule["BLOCK_M"], schedule["TAIL_M_TILES"])
        return [ScratchTensor("workspace", "float32", (tail, rows, g.cout))]
    return []


def splitk_reduce_launch(problem: ConvProblem, split: int, row0: int, rows: int) -> KernelLaunch:
    """The launch that turns a tail split's partial sums into output rows row0 .. row0 + rows (a tail split takes
    no fused epilogue: its rows are written by two launches)."""
    g = Geometry.of(problem)
    dt = problem.ptr_dtype
    args = (
        TensorArg("workspace", "fp32"),
        TensorArg("bias", dt),
        TensorArg("output", dt),
        *size_args(M=rows, OUT_PIXELS=g.m // g.batch, ROW0=row0),
    )
    constexprs = (
        ("C_OUT", g.cout),
        ("SPLIT_K", split),
        ("HAS_BIAS", problem.has_bias),
        ("OUT_CL", g.out_cl),
        ("BLOCK_M", _REDUCE_BLOCK_M),
        ("BLOCK_C", _REDUCE_BLOCK_C),
    )
    grid = (cdiv(rows, _REDUCE_BLOCK_M), cdiv(g.cout, _REDUCE_BLOCK_C), 1)
    return KernelLaunch(splitk_reduce_kernel, args, constexprs, grid, _REDUCE_WARPS, 1)
