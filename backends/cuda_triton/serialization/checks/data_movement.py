"""Record checks of data-movement records (copy, reshape, permute, cat, split, slice, pad, upsample): each op's
parameters, and its output sizes from the data-movement family's rules (`cuda_triton.ops.data_movement.shape`).

Written in the small Python subset that ``scripts/gen_layout_header.py`` translates into
``runtime/generated/data_movement_checks.h``, so the C++ blob reader checks exactly this. Torch-free. The op and
mode codes are the blob's (docs/blob_format.md, kind 6).
"""

from __future__ import annotations

from ...ops.data_movement.shape import (
    cat_out_shape_and_stride,
    pad_out_shape_and_stride,
    permute_sizes,
    slice_length,
    upsample_out_shape_and_stride,
)

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

# Element counts and slice steps stay below NUMEL_LIMIT, pad amounts below PAD_LIMIT in magnitude, so nothing
# overflows int64.
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


def reshape_record_sizes(input_sizes: list[int], output_sizes: list[int]) -> list[int]:
    """A reshape keeps the number of elements (taken in the input's row-major order)."""
    if numel(input_sizes) != numel(output_sizes):
        raise ValueError("a reshape must keep the number of elements")
    return list(output_sizes)


def permute_record_sizes(input_sizes: list[int], perm: list[int]) -> list[int]:
    """``out[i] = in[perm[i]]`` for a permutation ``perm`` of the input's dims."""
    rank = len(input_sizes)
    if len(perm) != rank:
        raise ValueError("perm needs one entry per dim")
    seen = [0] * rank
    for i in range(rank):
        if perm[i] < 0 or perm[i] >= rank:
            raise ValueError("perm entry out of range")
        if seen[perm[i]] != 0:
            raise ValueError("perm repeats a dim")
        seen[perm[i]] = 1
    return permute_sizes(input_sizes, perm)


def cat_record_sizes(rank: int, dim: int, part_sizes: list[int], part_strides: list[int]) -> list[int]:
    """Sizes of the concatenation along ``dim`` of the parts whose sizes (and strides) ``part_sizes`` holds back to
    back, ``rank`` entries each; the parts must agree outside ``dim``. A split's parts concatenate to its input."""
    if (
        rank < 1
        or len(part_sizes) == 0
        or len(part_sizes) % rank != 0
        or len(part_strides) != len(part_sizes)
    ):
        raise ValueError("cat / split parts have different ranks")
    if dim < 0 or dim >= rank:
        raise ValueError("cat / split dim out of range")
    for k in range(rank, len(part_sizes)):
        if k % rank != dim and part_sizes[k] != part_sizes[k % rank]:
            raise ValueError("cat / split parts differ outside the cat dim")
    return cat_out_shape_and_stride(rank, dim, part_sizes, part_strides)[0]


def slice_record_sizes(input_sizes: list[int], dim: int, start: int, end: int, step: int) -> list[int]:
    """Elements ``start, start + step, ...`` below ``end`` along ``dim`` (normalised: 0 <= start <= end <= size)."""
    rank = len(input_sizes)
    if dim < 0 or dim >= rank:
        raise ValueError("slice dim out of range")
    if start < 0 or start > end or end > input_sizes[dim]:
        raise ValueError("slice bounds must satisfy 0 <= start <= end <= size")
    if step < 1 or step >= NUMEL_LIMIT:
        raise ValueError("slice step must be in [1, 2^62)")
    out = list(input_sizes)
    out[dim] = slice_length(input_sizes[dim], start, end, step)
    return out


def pad_record_sizes(
    mode: int, input_sizes: list[int], input_strides: list[int], pad: list[int]
) -> list[int]:
    """``pad``: (before, after) pairs from the last dim backwards, as ``constant_pad_nd`` takes them. Constant
    pads may be negative (they crop); reflect pads lie in [0, size), replicate ones are >= 0 on a non-empty dim,
    circular ones in [0, size]."""
    rank = len(input_sizes)
    if mode < PAD_CONSTANT or mode > PAD_CIRCULAR:
        raise ValueError("unknown pad mode")
    if len(pad) % 2 != 0 or len(pad) > 2 * rank:
        raise ValueError("pad needs (before, after) pairs for at most every dim")
    for i in range(len(pad)):
        amount = pad[i]
        size = input_sizes[rank - 1 - i // 2]
        if amount <= -PAD_LIMIT or amount >= PAD_LIMIT:
            raise ValueError("pad too large")
        if mode != PAD_CONSTANT and amount < 0:
            raise ValueError("only constant pads may be negative")
        if mode == PAD_REFLECT and amount >= size:
            raise ValueError("reflect pads must be smaller than the dim")
        if mode == PAD_REPLICATE and size == 0 and amount > 0:
            raise ValueError("replicate pads need a non-empty dim")
        if mode == PAD_CIRCULAR and amount > size:
            raise ValueError("circular pads must be at most the dim")
    sizes = pad_out_shape_and_stride(input_sizes, input_strides, pad)[0]
    for i in range(rank):
        if sizes[i] < 0:
            raise ValueError("the pad would give a negative size")
    return sizes


def upsample_record_sizes(
    mode: int,
    input_sizes: list[int],
    input_strides: list[int],
    output_size: list[int],
    align_corners: bool,
    num_scales: int,
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
    for i in range(rank - 2):
        if output_size[i] < 1:
            raise ValueError("upsample output sizes must be >= 1")
    return upsample_out_shape_and_stride(input_sizes, input_strides, output_size)[0]
