"""`TensorMeta`: the static description of one tensor argument (sizes, strides, dtype) that op specs are built from,
and the stride arithmetic the op families share.

Specs describe an op instance from static metadata only, so they never hold tensors: the partitioner builds them
from a node's recorded values (``TensorMeta.of(node.meta["val"])``), tests from real tensors. The stride helpers
are pure Python and torch-free, like the output shape/stride rules built on them; strides are in
elements, as ``torch.Tensor.stride()`` gives them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from ..kernel.launch import Support

# Element types the op-family kernels take (Triton pointer types in kernel.launch.TRITON_PTR_DTYPE).
FLOAT_DTYPES = ("float32", "float16", "bfloat16")
_DTYPE_NAMES = {torch.float32: "float32", torch.float16: "float16", torch.bfloat16: "bfloat16"}
INT32_LIMIT = 2**31

Shape = tuple[int, ...]


def dtype_name(dtype: torch.dtype | str) -> str:
    """ "float32" for torch.float32 (names pass through); other dtypes keep their torch name ("int64", ...)."""
    if isinstance(dtype, str):
        return dtype
    return _DTYPE_NAMES.get(dtype, str(dtype).removeprefix("torch."))


@dataclass(frozen=True)
class TensorMeta:
    """Sizes, element strides and dtype name of one tensor (the data pointer is where element 0 is)."""

    sizes: tuple[int, ...]
    strides: tuple[int, ...]
    dtype: str

    def __post_init__(self) -> None:
        if len(self.sizes) != len(self.strides):
            raise ValueError(f"TensorMeta: {len(self.sizes)} sizes but {len(self.strides)} strides")

    @staticmethod
    def of(t: torch.Tensor) -> TensorMeta:
        """The metadata of a real, fake or meta tensor."""
        return TensorMeta(
            tuple(int(s) for s in t.shape), tuple(int(s) for s in t.stride()), dtype_name(t.dtype)
        )

    @staticmethod
    def contiguous(sizes: tuple[int, ...], dtype: str) -> TensorMeta:
        return TensorMeta(tuple(sizes), contiguous_strides(sizes), dtype)

    @staticmethod
    def channels_last(sizes: tuple[int, ...], dtype: str) -> TensorMeta:
        """Channels fastest: dim 1 of a batched tensor goes last in memory (channels_last / channels_last_3d)."""
        return TensorMeta(tuple(sizes), channels_last_strides(sizes), dtype)

    @property
    def rank(self) -> int:
        return len(self.sizes)

    @property
    def numel(self) -> int:
        return math.prod(self.sizes)


def max_offset(sizes: tuple[int, ...], strides: tuple[int, ...], offset: int = 0) -> int:
    """The largest element offset any index reaches (0 for an empty tensor): what decides 32- or 64-bit indexing."""
    if any(s == 0 for s in sizes):
        return 0
    return offset + sum((s - 1) * abs(st) for s, st in zip(sizes, strides, strict=True))


def needs_int64(*extents: int) -> bool:
    """Whether any of these element counts or offsets leaves int32 (kernels then index in 64 bits)."""
    return any(e >= INT32_LIMIT for e in extents)


def float_dtype_support(op: str, *metas: TensorMeta) -> Support:
    """Support.no naming the op and the dtype when a tensor is not fp32/fp16/bf16."""
    for meta in metas:
        if meta.dtype not in FLOAT_DTYPES:
            return Support.no(
                f"{op}: dtype {meta.dtype} is not supported (float32, float16 or bfloat16 only)"
            )
    return Support.yes()


# ---- stride arithmetic --------------------------------------------------------------------------------------
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
    """ATen's is_contiguous(memory_format=channels_last{,_3d}) for a 4-D or 5-D tensor, and its analogue (N, L, C)
    storage for a 3-D one (size-1 dims ignored)."""
    return _channels_last_walk(sizes, strides, dense=True)


def is_channels_last_ordered(sizes: Sequence[int], strides: Sequence[int]) -> bool:
    """Whether a 3-D, 4-D or 5-D tensor steps through memory in channels-last order without overlap, gaps allowed:
    C fastest, then the spatial dims last to first, then N (size-1 dims ignored). A channel slice of a
    channels-last tensor (``chunk`` along dim 1) is one; reading it in that order keeps accesses contiguous."""
    return _channels_last_walk(sizes, strides, dense=False)


def _channels_last_walk(sizes: Sequence[int], strides: Sequence[int], dense: bool) -> bool:
    """Each dim of size > 1, in channels-last order from C outwards, starts at (``dense``) or past the end of the
    dims inside it."""
    if len(sizes) not in (3, 4, 5):
        return False
    least = 1
    for d in reversed(channels_last_order(len(sizes))):
        if sizes[d] == 1:
            continue
        if strides[d] < least or (dense and strides[d] != least):
            return False
        least = strides[d] * sizes[d]
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
