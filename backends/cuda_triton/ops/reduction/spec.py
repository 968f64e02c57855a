"""The reduction op spec: sum / mean / amax / amin of one tensor over any dims, from static metadata only.

Edge ops: ``sum.dim_IntList(x, dims, keepdim, dtype=None)``, ``mean.dim(x, dims, keepdim, dtype=None)``,
``amax(x, dims, keepdim)``, ``amin(x, dims, keepdim)``; global average pooling is ``mean.dim`` over the spatial
dims. Inputs of any strides (contiguous, channels-last, views); accumulation in fp32.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...kernel.launch import Support
from ..indexing import MAX_DIMS
from ..tensor_meta import TensorMeta, coalesce, float_dtype_support
from .layout import normalize_dims, out_shape_and_stride

REDUCTIONS = ("sum", "mean", "amax", "amin")


@dataclass(frozen=True)
class ReductionSpec:
    """``out = op(x, dims, keepdim)``; ``dims`` sorted and non-negative (every dim when the op got none)."""

    op: str  # one of REDUCTIONS
    x: TensorMeta
    dims: tuple[int, ...]
    keepdim: bool
    out: TensorMeta

    @property
    def kept(self) -> tuple[int, ...]:
        return tuple(d for d in range(self.x.rank) if d not in self.dims)

    @property
    def length(self) -> int:
        """Elements reduced into each output element."""
        n = 1
        for d in self.dims:
            n *= self.x.sizes[d]
        return n


def reduction_spec(
    op: str,
    x: TensorMeta,
    dims: tuple[int, ...] | list[int] | None,
    keepdim: bool = False,
    dtype: str | None = None,
) -> ReductionSpec:
    """The spec of edge reduction ``op`` ("sum", "mean", "amax", "amin"); ``dtype`` is sum/mean's output dtype."""
    if op not in REDUCTIONS:
        raise ValueError(f"unknown reduction {op!r} (expected one of {', '.join(REDUCTIONS)})")
    if dtype is not None and op in ("amax", "amin"):
        raise ValueError(f"{op} takes no dtype")
    norm = normalize_dims(dims, x.rank, op)
    sizes, strides = out_shape_and_stride(x.sizes, norm, keepdim)
    return ReductionSpec(op, x, norm, keepdim, TensorMeta(sizes, strides, dtype or x.dtype))


def merged_dims(
    spec: ReductionSpec,
) -> tuple[tuple[int, ...], list[tuple[int, ...]], tuple[int, ...], tuple[int, ...]]:
    """The kept dims (output order, merged where input and output step through them alike) with the input's and
    the output's strides over them; then the reduced dims (by decreasing input stride, merged) with the input's
    strides over them."""
    kept = spec.kept
    out_pos = kept if spec.keepdim else range(len(kept))
    kept_sizes, kept_strides = coalesce(
        [spec.x.sizes[d] for d in kept],
        [[spec.x.strides[d] for d in kept], [spec.out.strides[p] for p in out_pos]],
    )
    order = sorted(spec.dims, key=lambda d: -spec.x.strides[d])
    red_sizes, (red_strides,) = coalesce(
        [spec.x.sizes[d] for d in order], [[spec.x.strides[d] for d in order]]
    )
    return kept_sizes, kept_strides, red_sizes, red_strides


def supports(spec: ReductionSpec) -> Support:
    """Whether the reduction kernel computes ``spec`` exactly; if not, why, in words a user understands."""
    what = f"{spec.op} over dims {spec.dims}"
    dtypes = float_dtype_support(what, spec.x, spec.out)
    if not dtypes:
        return dtypes
    if spec.op in ("amax", "amin") and spec.out.dtype != spec.x.dtype:
        return Support.no(f"{what}: the output dtype must be the input's ({spec.x.dtype})")
    if spec.op in ("amax", "amin") and spec.length == 0 and spec.out.numel:
        return Support.no(f"{what}: a reduced dim has size 0 (amax/amin of no elements is undefined)")
    if any(s < 0 for s in spec.x.strides):
        return Support.no(f"{what}: negative input strides are not supported")
    kept_sizes, _, red_sizes, _ = merged_dims(spec)
    if len(kept_sizes) > MAX_DIMS or len(red_sizes) > MAX_DIMS:
        return Support.no(
            f"{what}: the input's layout leaves more than {MAX_DIMS} kept or reduced dims after merging"
        )
    return Support.yes()
