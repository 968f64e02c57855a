"""`TensorMeta`: the static description of one tensor argument (sizes, strides, dtype) that op specs are built from.

Specs describe an op instance from static metadata only, so they never hold tensors: the partitioner builds them
from a node's recorded values (``TensorMeta.of(node.meta["val"])``), tests from real tensors.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..kernel.launch import Support

# Element types the op-family kernels take (Triton pointer types in kernel.launch.TRITON_PTR_DTYPE).
FLOAT_DTYPES = ("float32", "float16", "bfloat16")
_DTYPE_NAMES = {torch.float32: "float32", torch.float16: "float16", torch.bfloat16: "bfloat16"}
INT32_LIMIT = 2**31


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
        strides, running = [], 1
        for size in reversed(sizes):
            strides.append(running)
            running *= max(size, 1)
        return TensorMeta(tuple(sizes), tuple(reversed(strides)), dtype)

    @property
    def rank(self) -> int:
        return len(self.sizes)

    @property
    def numel(self) -> int:
        n = 1
        for s in self.sizes:
            n *= s
        return n


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
