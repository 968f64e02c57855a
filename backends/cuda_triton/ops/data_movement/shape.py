"""Shape rules of data-movement records (copy, reshape, permute, cat, split, slice, pad, upsample).

Written in the small Python subset that ``scripts/gen_layout_header.py`` translates into
``runtime/generated/data_movement_shape.h`` (see that script), so the C++ blob reader checks exactly these
rules. Torch-free. The op and mode codes are the blob's (docs/blob_format.md, kind 6).
"""

from __future__ import annotations

COPY = 0
RESHAPE = 1
PERMUTE = 2
CAT = 3
SPLIT = 4
SLICE = 5
PAD = 6
UPSAMPLE = 7

PAD_CONSTANT = 0
PAD_REFLECT = 1
PAD_REPLICATE = 2
PAD_CIRCULAR = 3

UPSAMPLE_NEAREST = 0
UPSAMPLE_NEAREST_EXACT = 1
UPSAMPLE_LINEAR = 2
UPSAMPLE_CUBIC = 3

# Element counts stay below this, and pad amounts below PAD_LIMIT in magnitude, so nothing overflows int64.
NUMEL_LIMIT = 4611686018427387904
PAD_LIMIT = 2147483648


def numel(sizes: list[int]) -> int:
    """Number of elements; raises ValueError above 2^62."""
    for i in range(len(sizes)):
        if sizes[i] == 0:
            return 0
    n = 1
    for i in range(len(sizes)):
        if n > NUMEL_LIMIT // sizes[i]:
            raise ValueError("too many elements")
        n = n * sizes[i]
    return n


def copy_out_sizes(input_sizes: list[int]) -> list[int]:
    """A copy keeps the sizes (strides and dtype may change)."""
    return list(input_sizes)


def reshape_out_sizes(input_sizes: list[int], output_sizes: list[int]) -> list[int]:
    """A reshape keeps the number of elements."""
    if numel(input_sizes) != numel(output_sizes):
        raise ValueError("a reshape must keep the number of elements")
    return list(output_sizes)


def permute_out_sizes(input_sizes: list[int], perm: list[int]) -> list[int]:
    """``out[i] = in[perm[i]]`` for a permutation ``perm`` of the input's dims."""
    rank = len(input_sizes)
    if len(perm) != rank:
        raise ValueError("perm needs one entry per dim")
    seen = [0] * rank
    out = []
    for i in range(rank):
        if perm[i] < 0 or perm[i] >= rank:
            raise ValueError("perm entry out of range")
        if seen[perm[i]] != 0:
            raise ValueError("perm repeats a dim")
        seen[perm[i]] = 1
        out.append(input_sizes[perm[i]])
    return out


def cat_out_sizes(acc: list[int], part: list[int], dim: int) -> list[int]:
    """One step of concatenating along ``dim``: ``acc`` is the concatenation so far (empty before the first
    part). A split's parts concatenate back to its input."""
    rank = len(part)
    if dim < 0 or dim >= rank:
        raise ValueError("cat / split dim out of range")
    if len(acc) == 0:
        return list(part)
    if len(acc) != rank:
        raise ValueError("cat / split parts have different ranks")
    out = list(acc)
    for i in range(rank):
        if i == dim:
            out[i] = acc[i] + part[i]
        elif acc[i] != part[i]:
            raise ValueError("cat / split parts differ outside the cat dim")
    return out


def slice_out_sizes(input_sizes: list[int], dim: int, start: int, end: int, step: int) -> list[int]:
    """Elements ``start, start + step, ...`` below ``end`` along ``dim`` (normalised: 0 <= start <= end <= size)."""
    rank = len(input_sizes)
    if dim < 0 or dim >= rank:
        raise ValueError("slice dim out of range")
    if start < 0 or start > end or end > input_sizes[dim]:
        raise ValueError("slice bounds must satisfy 0 <= start <= end <= size")
    if step < 1:
        raise ValueError("slice step must be >= 1")
    out = list(input_sizes)
    out[dim] = 0
    if end > start:
        out[dim] = (end - start - 1) // step + 1
    return out


def pad_out_sizes(mode: int, input_sizes: list[int], before: list[int], after: list[int]) -> list[int]:
    """``out[i] = in[i] + before[i] + after[i]``. Constant pads may be negative (they crop); reflect pads lie in
    [0, size), replicate ones are >= 0 on a non-empty dim, circular ones in [0, size]."""
    rank = len(input_sizes)
    if len(before) != rank or len(after) != rank:
        raise ValueError("pads need one entry per dim")
    if mode < PAD_CONSTANT or mode > PAD_CIRCULAR:
        raise ValueError("unknown pad mode")
    out = []
    for i in range(rank):
        lo = before[i]
        hi = after[i]
        size = input_sizes[i]
        if lo <= -PAD_LIMIT or lo >= PAD_LIMIT or hi <= -PAD_LIMIT or hi >= PAD_LIMIT:
            raise ValueError("pad too large")
        if mode != PAD_CONSTANT and (lo < 0 or hi < 0):
            raise ValueError("only constant pads may be negative")
        if mode == PAD_REFLECT and (lo >= size or hi >= size):
            raise ValueError("reflect pads must be smaller than the dim")
        if mode == PAD_REPLICATE and size == 0 and (lo > 0 or hi > 0):
            raise ValueError("replicate pads need a non-empty dim")
        if mode == PAD_CIRCULAR and (lo > size or hi > size):
            raise ValueError("circular pads must be at most the dim")
        total = size + lo + hi
        if total < 0:
            raise ValueError("the pad would give a negative size")
        out.append(total)
    return out


def upsample_out_sizes(
    mode: int, input_sizes: list[int], output_size: list[int], align_corners: bool, num_scales: int
) -> list[int]:
    """(N, C, *output_size) for an input of rank 3 to 5; ``num_scales`` (0 or one per spatial dim) counts the
    recorded scale factors; align_corners only for linear and cubic modes."""
    rank = len(input_sizes)
    if rank < 3 or rank > 5:
        raise ValueError("upsample needs an input of rank 3 to 5")
    if mode < UPSAMPLE_NEAREST or mode > UPSAMPLE_CUBIC:
        raise ValueError("unknown upsample mode")
    if len(output_size) != rank - 2:
        raise ValueError("output_size needs one entry per spatial dim")
    if num_scales != 0 and num_scales != rank - 2:
        raise ValueError("scales need none or one entry per spatial dim")
    if align_corners and mode != UPSAMPLE_LINEAR and mode != UPSAMPLE_CUBIC:
        raise ValueError("align_corners is only for linear and cubic upsampling")
    out = [input_sizes[0], input_sizes[1]]
    for i in range(rank - 2):
        if output_size[i] < 1:
            raise ValueError("upsample output sizes must be >= 1")
        out.append(output_size[i])
    return out
