"""Output shape and strides of one elementwise op: the rule torch.export records in the graph.

PyTorch's meta functions for elementwise ops (PrimTorch's ``compute_elementwise_output_strides``, what fake
tensors and so ``node.meta["val"]`` report) broadcast the tensor operands to one shape, then lay the output out
densely in the dim order the operands' strides suggest. Python scalars take no part. Eager CPU/CUDA ops follow
the same order except for size-1 dims, whose strides do not move any element.

Pure Python and torch-free (the C++ reader checks the broadcast sizes with ``serialization/checks/elementwise.py``).
Strides in elements.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..tensor_meta import (
    Shape,
    broadcast_shapes,
    expand_strides,
    is_channels_last_contiguous,
    is_contiguous,
    is_non_overlapping_and_dense,
    strides_for_format,
    strides_in_order,
    suggest_memory_format,
)


def out_shape_and_stride(operands: Sequence[tuple[Sequence[int], Sequence[int]]]) -> tuple[Shape, Shape]:
    """(sizes, strides) of the output of an elementwise op over the tensor ``operands`` (each (sizes, strides)).

    Raises ValueError when the operands do not broadcast.
    """
    if not operands:
        raise ValueError("an elementwise op needs at least one tensor operand")
    shape = broadcast_shapes(*(sizes for sizes, _ in operands))
    strides = [expand_strides(sizes, st, shape) for sizes, st in operands]
    ndim = len(shape)
    if ndim == 0:
        return (), ()
    if ndim == 1:
        return shape, (1,)
    if len(strides) == 1:
        if is_non_overlapping_and_dense(shape, strides[0]):
            return shape, strides[0]
        return shape, strides_for_format(shape, suggest_memory_format(shape, strides[0]))
    return shape, strides_in_order(shape, _output_dim_order(shape, strides))


def _output_dim_order(shape: Shape, strides: list[Shape]) -> list[int]:
    """Dims outermost first: contiguous or channels-last when every operand is (and not both), else an insertion
    sort of the dims by the operands' strides, the first operand that orders two dims deciding."""
    ndim = len(shape)
    contiguous = all(is_contiguous(shape, s) for s in strides)
    channels_last = ndim == 4 and all(is_channels_last_contiguous(shape, s) for s in strides)
    if contiguous and not channels_last:
        return list(range(ndim))
    if channels_last and not contiguous:
        return [0, *range(2, ndim), 1]

    def should_swap(a: int, b: int) -> int:
        for st in strides:
            if st[a] == 0 or st[b] == 0:
                continue
            if st[a] == st[b]:
                if shape[b] >= shape[a]:
                    continue
                return 1
            return -1 if st[b] >= st[a] else 1
        return 0

    perm = list(reversed(range(ndim)))  # innermost first while sorting
    for i in range(1, ndim):
        dim1 = i
        for dim0 in reversed(range(i)):
            comparison = should_swap(perm[dim0], perm[dim1])
            if comparison > 0:
                perm[dim0], perm[dim1] = perm[dim1], perm[dim0]
                dim1 = dim0
            elif comparison < 0:
                break
    return list(reversed(perm))


__all__ = ["out_shape_and_stride"]
