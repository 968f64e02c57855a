"""Index arithmetic the op-family kernels share: a linear index split over up to 5 dims, and strided offsets.

A kernel's operand is addressed through runtime sizes and strides (one compiled kernel serves every shape) and a
constexpr *stride pattern*, ``(offset kind, dim 0 kind, ..., dim 4 kind)``, each kind one of `ZERO` (a
broadcast dim, or no offset: the term is dropped), `UNIT` (stride 1: the compiler sees contiguous addresses and
vectorizes) or `ANY` (the stride argument is read). `stride_pattern` computes it; `pad_dims` gives a launch
its five sizes and strides.
"""

from __future__ import annotations

from collections.abc import Sequence

import triton
import triton.language as tl

MAX_DIMS = 5  # dims a kernel indexes, after merging the dims every operand steps through alike
ZERO = tl.constexpr(0)  # stride kinds
UNIT = tl.constexpr(1)
ANY = tl.constexpr(2)


def stride_pattern(offset: int, strides: Sequence[int]) -> tuple[int, ...]:
    """The constexpr stride pattern of an operand at ``offset`` with ``strides`` (padded to `MAX_DIMS`)."""

    def kind(s: int) -> int:
        return (ZERO if s == 0 else UNIT if s == 1 else ANY).value

    padded = tuple(strides) + (0,) * (MAX_DIMS - len(strides))
    return (kind(0) if offset == 0 else ANY.value, *(kind(s) for s in padded))


def pad_dims(
    sizes: Sequence[int], strides: Sequence[Sequence[int]]
) -> tuple[tuple[int, ...], list[tuple[int, ...]]]:
    """Sizes padded with 1 and each operand's strides with 0 to `MAX_DIMS` dims (the extra dims are unused)."""
    if len(sizes) > MAX_DIMS:
        raise ValueError(f"{len(sizes)} dims; kernels index at most {MAX_DIMS}")
    pad = MAX_DIMS - len(sizes)
    return tuple(sizes) + (1,) * pad, [tuple(s) + (0,) * pad for s in strides]


@triton.jit
def program_range(BLOCK: tl.constexpr, INDEX_64: tl.constexpr):
    """The BLOCK consecutive indices of this program along grid axis 0 (64-bit when INDEX_64)."""
    pid = tl.program_id(0)
    if INDEX_64:
        pid = pid.to(tl.int64)
    return pid * BLOCK + tl.arange(0, BLOCK)


@triton.jit
def unravel(lin, sizes, RANK: tl.constexpr):
    """``lin`` split over the first RANK of 5 dims, last fastest: the tuple (i0, ..., i4), 0 past RANK.
    ``sizes`` holds the sizes of dims 1-4 (dim 0's is implied)."""
    rest = lin
    inner = ()
    for d in tl.static_range(4, 0, -1):  # dims 4 .. 1, fastest first
        i = 0
        if RANK > d:
            i = rest % sizes[d - 1]
            rest = rest // sizes[d - 1]
        inner = (i,) + inner
    return (rest,) + inner


@triton.jit
def strided_offset(off, strides, idx, KINDS: tl.constexpr):
    """Element offsets ``off + sum(idx[d] * strides[d])`` of an operand with stride pattern KINDS (a tensor shaped
    like ``idx[0]`` even when every stride is 0)."""
    o = idx[0] * 0
    if KINDS[0] != ZERO:
        o += off
    for d in tl.static_range(len(idx)):
        if KINDS[d + 1] == UNIT:
            o += idx[d]
        elif KINDS[d + 1] == ANY:
            o += idx[d] * strides[d]
    return o


@triton.jit
def load_fp32(ptr, off, strides, idx, KINDS: tl.constexpr, mask):
    """An operand's elements at indices ``idx`` (see `strided_offset`), widened to fp32."""
    return tl.load(ptr + strided_offset(off, strides, idx, KINDS), mask=mask).to(tl.float32)
