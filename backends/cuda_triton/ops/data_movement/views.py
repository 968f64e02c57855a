"""Which views cost nothing: `view_strides` says whether new sizes are expressible as strides over the same bytes.

A ``view_copy`` (reshape, flatten), ``squeeze_copy`` or ``unsqueeze_copy`` whose result can be described by new
sizes and strides over the input's memory needs no kernel: the consumer reads the input's bytes through those
strides. Otherwise it is a copy into a contiguous tensor of the input's sizes, which the new sizes then view
(`StridedCopySpec.view`).

The rule (ATen's ``computeStride``, restated): walking the input's dims from the innermost, cut them into chunks,
a chunk ending where the next outer dim (of size > 1) does not step exactly over the chunk (its stride is not the
chunk's element count times the chunk's innermost stride). A view is free when the new dims, also taken from the
innermost, fill those chunks one after another exactly: a new dim never straddles two chunks. A new dim's stride
is the chunk's innermost stride times the elements the new dims already placed in the chunk cover; new dims of size
1 go with the chunk being filled. Written in the translator's subset of Python (as shape.py).
"""

from __future__ import annotations


def view_strides(sizes: list[int], strides: list[int], new_sizes: list[int]) -> list[int]:
    """Strides of the view of (``sizes``, ``strides``) as ``new_sizes`` (same element count, no -1 entry): the
    strides ``Tensor.view`` gives, or [] when there is no such view (see `view_is_free` for rank-0 results)."""
    rank = len(sizes)
    result = [1] * len(new_sizes)
    if rank == 0:
        return result
    numel = 1
    for i in range(rank):
        numel = numel * sizes[i]
    if numel == 0:
        if sizes == new_sizes:
            return list(strides)
        running = 1
        for back in range(len(new_sizes)):
            d = len(new_sizes) - 1 - back
            result[d] = running
            size = new_sizes[d]
            if size < 1:
                size = 1
            running = running * size
        return result
    view_d = len(new_sizes) - 1
    base = strides[rank - 1]  # innermost stride of the chunk being filled
    chunk_numel = 1
    placed = 1
    ok = True
    for back in range(rank):
        d = rank - 1 - back
        chunk_numel = chunk_numel * sizes[d]
        ends = d == 0
        if d > 0 and sizes[d - 1] != 1 and strides[d - 1] != chunk_numel * base:
            ends = True
        if ends:
            for _i in range(len(new_sizes)):
                if view_d >= 0 and (placed < chunk_numel or new_sizes[view_d] == 1):
                    result[view_d] = placed * base
                    placed = placed * new_sizes[view_d]
                    view_d = view_d - 1
            if placed != chunk_numel:
                ok = False
            if d > 0:
                base = strides[d - 1]
                chunk_numel = 1
                placed = 1
    if view_d != -1 or not ok:
        return []
    return result


def view_is_free(sizes: list[int], strides: list[int], new_sizes: list[int]) -> bool:
    """Whether ``new_sizes`` can view the tensor without a copy."""
    return len(new_sizes) == 0 or len(view_strides(sizes, strides, new_sizes)) == len(new_sizes)
