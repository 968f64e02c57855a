"""`CopyPiece`: one strided copy (a box of elements from one tensor to another), and its kernel launch.

Every copy-like op is a list of pieces (spec.py): a permute or clone is one piece, a cat one piece per input, a
split one per output, a pad one piece with padding. `copy_launch` simplifies a piece before choosing a kernel:
dims of size 1 are dropped, the rest ordered by the destination's strides (outermost first, so consecutive
programs write consecutive memory) and adjacent dims merged wherever both tensors step over the inner dim exactly.
A channels-last <-> contiguous change of an NCHW tensor thus becomes a batch of [C, H*W] transposes, a slice a
few long runs, a contiguous clone a single run.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch

from ...kernel.launch import TRITON_PTR_DTYPE, KernelLaunch, ScalarArg, Schedule, TensorArg, cdiv
from ..tensor_meta import max_offset, needs_int64
from .kernels import MAX_RANK, pad_copy_kernel, strided_copy_kernel, transpose_copy_kernel

GRID_Y_LIMIT = 65535
_MIN_TRANSPOSE = 16  # both matrix sides at least this long, else the plain walk is as good


@dataclass(frozen=True)
class CopyPiece:
    """dst[dst_offset + c . dst_strides] = src[src_offset + (c - pad_before) . src_strides] for every coordinate c
    of the box ``sizes``; with padding (``src_sizes`` given) coordinates outside the source write ``value``."""

    src_role: str
    dst_role: str
    src_dtype: str
    dst_dtype: str
    sizes: tuple[int, ...]
    src_strides: tuple[int, ...]
    dst_strides: tuple[int, ...]
    src_offset: int = 0
    dst_offset: int = 0
    pad_before: tuple[int, ...] | None = None
    src_sizes: tuple[int, ...] | None = None
    value: float = 0.0

    @property
    def padded(self) -> bool:
        return self.pad_before is not None

    @property
    def numel(self) -> int:
        n = 1
        for s in self.sizes:
            n *= s
        return n


def simplify(piece: CopyPiece) -> CopyPiece:
    """The same copy over as few dims as possible (see the module docstring); at least one dim."""
    rank = len(piece.sizes)
    before = piece.pad_before or (0,) * rank
    src_sizes = piece.src_sizes or piece.sizes
    dims = [
        d for d in range(rank) if not (piece.sizes[d] == 1 and before[d] == 0 and src_sizes[d] == 1)
    ]  # size-1 dims that read the source's only index
    dims.sort(key=lambda d: (-abs(piece.dst_strides[d]), -abs(piece.src_strides[d])))  # stable
    merged: list[list[int]] = []  # [size, src stride, dst stride, before, src size] outermost first
    for d in dims:
        cur = [piece.sizes[d], piece.src_strides[d], piece.dst_strides[d], before[d], src_sizes[d]]
        if merged:
            outer = merged[-1]
            inner_unpadded = cur[3] == 0 and cur[4] == cur[0]
            if inner_unpadded and outer[1] == cur[1] * cur[0] and outer[2] == cur[2] * cur[0]:
                merged[-1] = [outer[0] * cur[0], cur[1], cur[2], outer[3] * cur[0], outer[4] * cur[0]]
                continue
        merged.append(cur)
    if not merged:
        merged = [[1, 0, 0, 0, 1]]
    cols = list(zip(*merged, strict=True))
    return replace(
        piece,
        sizes=tuple(cols[0]),
        src_strides=tuple(cols[1]),
        dst_strides=tuple(cols[2]),
        pad_before=tuple(cols[3]) if piece.padded else None,
        src_sizes=tuple(cols[4]) if piece.padded else None,
    )


def _int64(piece: CopyPiece) -> bool:
    src_sizes = piece.src_sizes or piece.sizes
    return needs_int64(
        piece.numel,
        max_offset(src_sizes, piece.src_strides, piece.src_offset) + 1,
        max_offset(piece.sizes, piece.dst_strides, piece.dst_offset) + 1,
    )


def _transpose_dims(piece: CopyPiece) -> tuple[int, int, int | None] | None:
    """(a, c, batch dim) when the simplified piece is a batch of transposes: the destination's innermost dim a
    has stride 1 in it, another dim c has stride 1 in the source, at most one dim is left over."""
    rank = len(piece.sizes)
    if piece.padded or rank not in (2, 3) or piece.dst_strides[-1] != 1 or piece.src_strides[-1] == 1:
        return None
    a = rank - 1
    unit = [d for d in range(rank - 1) if piece.src_strides[d] == 1]
    if not unit:
        return None
    c = unit[0]
    rest = [d for d in range(rank) if d not in (a, c)]
    batch = rest[0] if rest else None
    if piece.sizes[a] < _MIN_TRANSPOSE or piece.sizes[c] < _MIN_TRANSPOSE:
        return None
    if batch is not None and piece.sizes[batch] > GRID_Y_LIMIT:
        return None
    return a, c, batch


def copy_launch(piece: CopyPiece, schedule: Schedule) -> KernelLaunch:
    """The kernel call that performs ``piece``."""
    piece = simplify(piece)
    if len(piece.sizes) > MAX_RANK:
        raise ValueError(
            f"a copy over {len(piece.sizes)} dims that cannot be merged (at most {MAX_RANK}): {piece.sizes}"
        )
    int64 = _int64(piece)
    index = "i64" if int64 else "i32"
    tensors = (
        TensorArg(piece.src_role, TRITON_PTR_DTYPE[piece.src_dtype]),
        TensorArg(piece.dst_role, TRITON_PTR_DTYPE[piece.dst_dtype]),
    )
    offsets = (ScalarArg("X_OFFSET", index, piece.src_offset), ScalarArg("Y_OFFSET", index, piece.dst_offset))
    transpose = _transpose_dims(piece)
    if transpose is not None:
        a, c, batch = transpose
        tile = schedule["TILE"]
        scalars = (
            ScalarArg("A", index, piece.sizes[a]),
            ScalarArg("C", index, piece.sizes[c]),
            *offsets,
            ScalarArg("XSB", index, 0 if batch is None else piece.src_strides[batch]),
            ScalarArg("XSA", index, piece.src_strides[a]),
            ScalarArg("YSB", index, 0 if batch is None else piece.dst_strides[batch]),
            ScalarArg("YSC", index, piece.dst_strides[c]),
        )
        grid = (
            cdiv(piece.sizes[a], tile) * cdiv(piece.sizes[c], tile),
            1 if batch is None else piece.sizes[batch],
            1,
        )
        constexprs = (("INT64", int64), ("TILE_A", tile), ("TILE_C", tile))
        return KernelLaunch(
            transpose_copy_kernel, (*tensors, *scalars), constexprs, grid, schedule.num_warps, 1
        )

    rank = len(piece.sizes)
    inner_first = list(range(rank - 1, -1, -1))
    pad = MAX_RANK - rank

    def padded_list(values: tuple[int, ...], fill: int) -> list[int]:
        return [values[d] for d in inner_first] + [fill] * pad

    sizes = padded_list(piece.sizes, 1)[: MAX_RANK - 1]
    scalars = [ScalarArg("NUMEL", index, piece.numel), *offsets]
    if piece.padded:
        value = float(torch.full((), piece.value, dtype=getattr(torch, piece.dst_dtype)).item())
        scalars.append(ScalarArg("VALUE", "fp32", value))
    scalars += [ScalarArg(f"S{k}", index, v) for k, v in enumerate(sizes)]
    if piece.padded:
        scalars += [ScalarArg(f"B{k}", index, v) for k, v in enumerate(padded_list(piece.pad_before, 0))]
        scalars += [ScalarArg(f"I{k}", index, v) for k, v in enumerate(padded_list(piece.src_sizes, 1))]
    scalars += [ScalarArg(f"XS{k}", index, v) for k, v in enumerate(padded_list(piece.src_strides, 0))]
    scalars += [ScalarArg(f"YS{k}", index, v) for k, v in enumerate(padded_list(piece.dst_strides, 0))]
    block = schedule["BLOCK"]
    constexprs = (
        ("RANK", rank),
        ("X_UNIT", piece.src_strides[-1] == 1),
        ("Y_UNIT", piece.dst_strides[-1] == 1),
        ("INT64", int64),
        ("BLOCK", block),
    )
    kernel = pad_copy_kernel if piece.padded else strided_copy_kernel
    grid = (cdiv(piece.numel, block), 1, 1)
    return KernelLaunch(kernel, (*tensors, *scalars), constexprs, grid, schedule.num_warps, 1)
