"""Output shape and strides of a reduction (sum.dim_IntList, mean.dim, amax, amin) over ``dims``.

ATen allocates a reduction's output contiguous whatever the input's layout: the reduced dims dropped, or kept
with size 1 under ``keepdim``. An empty ``dims`` reduces every dim. Pure Python and torch-free (the C++
reader checks the output sizes with ``serialization/checks/reduction.py``).
"""

from __future__ import annotations

from collections.abc import Sequence

from ..tensor_meta import Shape, contiguous_strides


def normalize_dims(dims: Sequence[int] | None, rank: int, op: str = "reduction") -> tuple[int, ...]:
    """``dims`` as sorted non-negative dims (None or empty: every dim); raises ValueError naming ``op``."""
    if not dims:
        return tuple(range(rank))
    out = []
    for d in dims:
        if not -max(rank, 1) <= d < max(rank, 1):
            raise ValueError(f"{op}: dim {d} is out of range for a {rank}-D tensor")
        out.append(d % max(rank, 1))
    if len(set(out)) != len(out):
        raise ValueError(f"{op}: dim list {tuple(dims)} names a dim twice")
    return tuple(sorted(d for d in out if d < rank))


def out_shape_and_stride(
    sizes: Sequence[int], dims: Sequence[int] | None, keepdim: bool
) -> tuple[Shape, Shape]:
    """(sizes, strides) of the reduction of a ``sizes`` tensor over ``dims``."""
    reduced = set(normalize_dims(dims, len(sizes)))
    if keepdim:
        out = tuple(1 if d in reduced else n for d, n in enumerate(sizes))
    else:
        out = tuple(n for d, n in enumerate(sizes) if d not in reduced)
    return out, contiguous_strides(out)
