"""Static metadata of a tensor (sizes, strides, dtype) and the stride arithmetic the op families share.

Pure Python and torch-free: the output shape/stride rules built on it are mirrored into the C++ runtime.
Strides are in elements, as ``torch.Tensor.stride()`` gives them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

Shape = tuple[int, ...]

FLOAT_DTYPES = ("float32", "float16", "bfloat16")


@dataclass(frozen=True)
class TensorMeta:
    """One tensor as the graph records it: sizes, strides (elements) and torch dtype name ("float16", ...)."""

    sizes: Shape
    strides: Shape
    dtype: str

    def __post_init__(self) -> None:
        if len(self.sizes) != len(self.strides):
            raise ValueError(f"TensorMeta: {len(self.sizes)} sizes but {len(self.strides)} strides")

    @property
    def ndim(self) -> int:
        return len(self.sizes)

    @property
    def numel(self) -> int:
        return math.prod(self.sizes)

    @staticmethod
    def contiguous(sizes: Sequence[int], dtype: str) -> TensorMeta:
        return TensorMeta(tuple(sizes), contiguous_strides(sizes), dtype)

    @staticmethod
    def channels_last(sizes: Sequence[int], dtype: str) -> TensorMeta:
        return TensorMeta(tuple(sizes), channels_last_strides(sizes), dtype)


def contiguous_strides(sizes: Sequence[int]) -> Shape:
    """Row-major strides (a size-0 dim counts as 1, as ATen does)."""
    strides = []
    step = 1
    for size in reversed(sizes):
        strides.append(step)
        step *= max(size, 1)
    return tuple(reversed(strides))


def strides_in_order(sizes: Sequence[int], order: Sequence[int]) -> Shape:
    """Dense strides with the dims laid out in ``order`` (outermost first, as a permutation of dims)."""
    strides = [0] * len(sizes)
    step = 1
    for d in reversed(order):
        strides[d] = step
        step *= max(sizes[d], 1)
    return tuple(strides)


def channels_last_order(ndim: int) -> tuple[int, ...]:
    """Dims outermost first of a channels-last (N, C, *spatial) tensor: N, *spatial, C."""
    return (0, *range(2, ndim), 1)


def channels_last_strides(sizes: Sequence[int]) -> Shape:
    return strides_in_order(sizes, channels_last_order(len(sizes)))


def is_contiguous(sizes: Sequence[int], strides: Sequence[int]) -> bool:
    """ATen's is_contiguous(): row-major, size-1 dims ignored."""
    if math.prod(sizes) < 2:
        return True
    expected = 1
    for size, stride in zip(reversed(sizes), reversed(strides), strict=True):
        if size == 1:
            continue
        if stride != expected:
            return False
        expected *= size
    return True


def is_channels_last_contiguous(sizes: Sequence[int], strides: Sequence[int]) -> bool:
    """ATen's is_contiguous(memory_format=channels_last{,_3d}) for a 4-D or 5-D tensor (size-1 dims ignored)."""
    if len(sizes) not in (4, 5):
        return False
    expected = 1
    for d in reversed(channels_last_order(len(sizes))):
        if sizes[d] == 1:
            continue
        if strides[d] != expected:
            return False
        expected *= sizes[d]
    return True


def is_non_overlapping_and_dense(sizes: Sequence[int], strides: Sequence[int]) -> bool:
    """ATen's is_non_overlapping_and_dense(): the elements fill a block of memory exactly once, in some order."""
    if len(sizes) == 1:
        return sizes[0] < 2 or strides[0] == 1
    # Dims by increasing stride, size-0/1 dims last (they never matter).
    order = sorted(range(len(sizes)), key=lambda d: (sizes[d] < 2, strides[d]))
    expected = 1
    for d in order:
        if sizes[d] < 2:
            return True
        if strides[d] != expected:
            return False
        expected *= sizes[d]
    return True


def _strides_like_channels_last(sizes: Sequence[int], strides: Sequence[int], dims: Sequence[int]) -> bool:
    """c10's is_channels_last_strides_{2d,3d}: strides increase along ``dims`` (C, then W, H, [D], N), ambiguous
    cases resolved towards contiguous."""
    if strides[1] == 0:
        return False
    lowest = 0
    for d in dims:
        if sizes[d] == 0 or strides[d] < lowest:
            return False
        if d == 0 and lowest == strides[1]:
            return False
        lowest = strides[d] * (sizes[d] if sizes[d] > 1 else 1)
    return True


def suggest_memory_format(sizes: Sequence[int], strides: Sequence[int]) -> str:
    """ATen's Tensor.suggest_memory_format(): "channels_last" for 4-D or 5-D tensors whose strides are ordered
    channels-last (dense or not), else "contiguous"."""
    if len(sizes) == 4 and _strides_like_channels_last(sizes, strides, (1, 3, 2, 0)):
        return "channels_last"
    if len(sizes) == 5 and _strides_like_channels_last(sizes, strides, (1, 4, 3, 2, 0)):
        return "channels_last"
    return "contiguous"


def strides_for_format(sizes: Sequence[int], memory_format: str) -> Shape:
    """Dense strides of ``sizes`` in ``memory_format`` ("contiguous" or "channels_last")."""
    if memory_format == "channels_last":
        return channels_last_strides(sizes)
    return contiguous_strides(sizes)


def broadcast_shapes(*shapes: Sequence[int]) -> Shape:
    """NumPy/ATen broadcasting of ``shapes``; raises ValueError naming the two sizes that clash."""
    ndim = max((len(s) for s in shapes), default=0)
    out = [1] * ndim
    for shape in shapes:
        for i, size in enumerate(shape):
            d = ndim - len(shape) + i
            if size == out[d] or size == 1:
                continue
            if out[d] != 1:
                raise ValueError(f"sizes {tuple(shape)} do not broadcast to {tuple(out)} (dim {d})")
            out[d] = size
    return tuple(out)


def expand_strides(sizes: Sequence[int], strides: Sequence[int], shape: Sequence[int]) -> Shape:
    """Strides of ``(sizes, strides)`` expanded to ``shape`` (Tensor.expand): new and broadcast dims get 0."""
    lead = len(shape) - len(sizes)
    out = [0] * lead
    for size, stride, target in zip(sizes, strides, shape[lead:], strict=True):
        out.append(stride if size == target else 0)
    return tuple(out)


def coalesce(sizes: Sequence[int], strides_per_operand: Sequence[Sequence[int]]) -> tuple[Shape, list[Shape]]:
    """Merge adjacent dims (outermost first) wherever every operand steps through them as through one dim, and
    drop size-1 dims. Returns the merged sizes and each operand's strides over them (at least one dim)."""
    dims = [d for d in range(len(sizes)) if sizes[d] != 1]
    out_sizes: list[int] = []
    out_strides: list[list[int]] = [[] for _ in strides_per_operand]
    for d in dims:
        mergeable = bool(out_sizes) and all(
            s[-1] == st[d] * sizes[d] for s, st in zip(out_strides, strides_per_operand, strict=True)
        )
        if mergeable:
            out_sizes[-1] *= sizes[d]
            for s, st in zip(out_strides, strides_per_operand, strict=True):
                s[-1] = st[d]
        else:
            out_sizes.append(sizes[d])
            for s, st in zip(out_strides, strides_per_operand, strict=True):
                s.append(st[d])
    if not out_sizes:
        return (1,), [(0,) for _ in strides_per_operand]
    return tuple(out_sizes), [tuple(s) for s in out_strides]


def max_offset(sizes: Sequence[int], strides: Sequence[int]) -> int:
    """The largest element offset a strided view reaches (0 for an empty one)."""
    if math.prod(sizes) == 0:
        return 0
    return sum((size - 1) * abs(stride) for size, stride in zip(sizes, strides, strict=True))


INT32_MAX = 2**31 - 1
