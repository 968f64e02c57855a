"""Output sizes and strides of the data-movement ops, as the node's recorded value (ATen's meta functions) has them.

Written in the small subset of Python that ``scripts/gen_layout_header.py`` translates to C++ (integer
arithmetic, ``if``/``for i in range(...)``, lists of ints, calls of the layout helpers), so the C++ runtime can
check the same rules at execute. Arguments are normalised first (dims non-negative, slice bounds resolved, -1
sizes inferred: `spec.py` does it and validates).

Layouts ATen gives:

* the ``*_copy`` views (permute, slice, select, split, expand, view, as_strided, squeeze, unsqueeze): contiguous;
* ``_clone_dim_order``/``_to_dim_order_copy``: the dim order asked for; without one, the input's strides when it
  is non-overlapping and dense, else dense strides in the input's stride order (`dense_strides_like`);
* ``cat``: channels-last when every input suggests channels-last (4-D/5-D), else contiguous;
* ``constant_pad_nd``: the format the input suggests (channels-last or contiguous); a pad with no positive
  amount is a narrow and a clone, so it keeps the input's stride order;
* ``upsample_*``: the format the input suggests.
"""

from __future__ import annotations

from ...conv.layout import channels_last_strides, contiguous_strides, is_channels_last_strides


def dim_order_strides(sizes: list[int], dim_order: list[int]) -> list[int]:
    """Dense strides with dims laid out outermost to innermost as ``dim_order`` lists them."""
    rank = len(sizes)
    strides = [0] * rank
    running = 1
    for i in range(rank):
        d = dim_order[rank - 1 - i]
        strides[d] = running
        size = sizes[d]
        if size < 1:
            size = 1
        running = running * size
    return strides


def is_non_overlapping_and_dense(sizes: list[int], strides: list[int]) -> bool:
    """c10's rule: taken by increasing stride, the dims of size >= 2 tile memory without gaps or overlaps."""
    rank = len(sizes)
    used = [0] * rank
    required = 1
    for _step in range(rank):
        best = -1
        for d in range(rank):
            if used[d] == 0 and sizes[d] >= 2 and (best < 0 or strides[d] < strides[best]):
                best = d
        if best >= 0:
            used[best] = 1
            if strides[best] != required:
                return False
            required = required * sizes[best]
    return True


def stride_order(sizes: list[int], strides: list[int], a: int, b: int) -> int:
    """1 when dim ``a`` belongs inside dim ``b`` (smaller stride), -1 when outside, 0 when undecided (a zero
    stride, or equal strides with ``a`` not the larger dim)."""
    if strides[a] == 0 or strides[b] == 0:
        return 0
    if strides[a] < strides[b]:
        return -1
    if strides[a] > strides[b]:
        return 1
    if sizes[a] > sizes[b]:
        return 1
    return 0


def dense_strides_like(sizes: list[int], strides: list[int]) -> list[int]:
    """Dense strides that order the dims as ``strides`` do (ATen's ``infer_dense_strides``): a stable insertion
    sort of the dims from innermost (starting from the contiguous order) that moves a dim inwards only past dims
    with larger strides, then row-major strides in that order."""
    rank = len(sizes)
    perm = [0] * rank
    for i in range(rank):
        perm[i] = rank - 1 - i
    for i in range(1, rank):
        pos = i
        moving = True
        for back in range(i):
            j = i - 1 - back
            if moving:
                order = stride_order(sizes, strides, perm[j], perm[pos])
                if order > 0:
                    inner = perm[pos]
                    perm[pos] = perm[j]
                    perm[j] = inner
                    pos = j
                elif order < 0:
                    moving = False
    result = [0] * rank
    running = 1
    for i in range(rank):
        d = perm[i]
        result[d] = running
        if sizes[d] > 1:
            running = running * sizes[d]
    return result


def preserve_format_strides(sizes: list[int], strides: list[int]) -> list[int]:
    """The strides ``clone`` (memory_format=preserve) gives a tensor with these sizes and strides."""
    if is_non_overlapping_and_dense(sizes, strides):
        return list(strides)
    return dense_strides_like(sizes, strides)


def suggested_strides(in_sizes: list[int], in_strides: list[int], out_sizes: list[int]) -> list[int]:
    """Strides for ``out_sizes`` in the memory format the input suggests (channels-last or contiguous)."""
    if is_channels_last_strides(in_sizes, in_strides):
        return channels_last_strides(out_sizes)
    return contiguous_strides(out_sizes)


def dim_order_copy_strides(sizes: list[int], strides: list[int], dim_order: list[int]) -> list[int]:
    """Output strides of ``_clone_dim_order``/``_to_dim_order_copy``; an empty ``dim_order`` means none given."""
    if len(dim_order) == 0:
        return preserve_format_strides(sizes, strides)
    return dim_order_strides(sizes, dim_order)


def slice_length(size: int, start: int, end: int, step: int) -> int:
    """Elements ``slice_copy`` keeps of a dim of ``size``: negative bounds count from the end, bounds clamp to
    [0, size] (``end`` may be huge: the edge graph writes an open end as 2^63 - 1)."""
    if start < 0:
        start = start + size
    if end < 0:
        end = end + size
    if start < 0:
        start = 0
    if start > size:
        start = size
    if end > size:
        end = size
    if end < start:
        end = start
    return (end - start + step - 1) // step


def slice_start(size: int, start: int) -> int:
    """The first index ``slice_copy`` keeps (``start`` normalised as in `slice_length`)."""
    if start < 0:
        start = start + size
    if start < 0:
        start = 0
    if start > size:
        start = size
    return start


def permute_sizes(sizes: list[int], dims: list[int]) -> list[int]:
    out = []
    for i in range(len(dims)):
        out.append(sizes[dims[i]])
    return out


def drop_dim(sizes: list[int], dim: int) -> list[int]:
    """Sizes without ``dim`` (``select_copy``, ``squeeze_copy`` of one dim)."""
    return sizes[0:dim] + sizes[dim + 1 : len(sizes)]


def infer_view_sizes(numel: int, sizes: list[int]) -> list[int]:
    """``view_copy`` sizes with a -1 entry replaced by what the element count leaves for it."""
    out = list(sizes)
    known = 1
    missing = -1
    for i in range(len(sizes)):
        if sizes[i] == -1:
            missing = i
        else:
            known = known * sizes[i]
    if missing >= 0:
        out[missing] = 0
        if known > 0:
            out[missing] = numel // known
    return out


def expand_sizes(in_sizes: list[int], sizes: list[int]) -> list[int]:
    """``expand_copy`` sizes: -1 keeps the input's size of that (trailing-aligned) dim."""
    out = list(sizes)
    lead = len(sizes) - len(in_sizes)
    for i in range(len(sizes)):
        if sizes[i] == -1:
            out[i] = in_sizes[i - lead]
    return out


def cat_out_shape_and_stride(
    rank: int, dim: int, in_sizes: list[int], in_strides: list[int]
) -> tuple[list[int], list[int]]:
    """``cat`` of ``len(in_sizes) // rank`` inputs whose sizes and strides are concatenated in ``in_sizes`` and
    ``in_strides``."""
    count = len(in_sizes) // rank
    sizes = in_sizes[0:rank]
    sizes[dim] = 0
    all_channels_last = rank == 4 or rank == 5
    for k in range(count):
        sizes[dim] = sizes[dim] + in_sizes[k * rank + dim]
        k_sizes = in_sizes[k * rank : (k + 1) * rank]
        k_strides = in_strides[k * rank : (k + 1) * rank]
        if not is_channels_last_strides(k_sizes, k_strides):
            all_channels_last = False
    if all_channels_last:
        return sizes, channels_last_strides(sizes)
    return sizes, contiguous_strides(sizes)


def pad_out_shape_and_stride(
    sizes: list[int], strides: list[int], pad: list[int]
) -> tuple[list[int], list[int]]:
    """``constant_pad_nd``: ``pad`` holds (before, after) pairs from the last dim backwards; negative amounts crop."""
    rank = len(sizes)
    out = list(sizes)
    positive = False
    for i in range(len(pad) // 2):
        d = rank - 1 - i
        out[d] = sizes[d] + pad[2 * i] + pad[2 * i + 1]
        if pad[2 * i] > 0 or pad[2 * i + 1] > 0:
            positive = True
    if not positive:
        return out, preserve_format_strides(out, strides)
    return out, suggested_strides(sizes, strides, out)


def upsample_out_shape_and_stride(
    sizes: list[int], strides: list[int], output_size: list[int]
) -> tuple[list[int], list[int]]:
    """``upsample_*``: (N, C, *output_size) in the format the input suggests."""
    out = sizes[0:2] + output_size
    return out, suggested_strides(sizes, strides, out)
