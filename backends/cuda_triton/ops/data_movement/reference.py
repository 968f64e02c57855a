"""CPU references of the data-movement ops in ATen (upsampling of 16-bit inputs in fp32, rounded once)."""

from __future__ import annotations

import torch

from .spec import CatSpec, PadSpec, SplitSpec, StridedCopySpec
from .upsample import UpsampleSpec

aten = torch.ops.aten


def reference_strided_copy(spec: StridedCopySpec, x: torch.Tensor) -> torch.Tensor:
    """The view of ``x``'s memory the spec describes, materialised in its output layout and dtype."""
    view = x.as_strided(spec.view_sizes, spec.view_strides, x.storage_offset() + spec.view_offset)
    if spec.reshapes:
        view = view.reshape(spec.out_sizes)
    out = torch.empty_strided(
        spec.out_sizes, spec.out_strides, dtype=getattr(torch, spec.out_dtype), device=x.device
    )
    return out.copy_(view)


def reference_cat(spec: CatSpec, xs: list[torch.Tensor]) -> torch.Tensor:
    return aten.cat(xs, spec.dim)


def reference_split(spec: SplitSpec, x: torch.Tensor) -> list[torch.Tensor]:
    return list(aten.split_with_sizes_copy(x, list(spec.split_sizes), spec.dim))


def reference_pad(spec: PadSpec, x: torch.Tensor) -> torch.Tensor:
    return aten.constant_pad_nd(x, list(spec.pad), spec.value)


def reference_upsample(spec: UpsampleSpec, x: torch.Tensor) -> torch.Tensor:
    """ATen's result; 1-D/3-D nearest from a contiguous copy (ATen's channels-last 3-D path takes other source
    indices, see upsample.py)."""
    xf = x.float()
    if spec.mode == "nearest" and spec.spatial != 2:
        xf = xf.contiguous()
    size = list(spec.output_size) if spec.scales[0] is None else None
    scales = None if spec.scales[0] is None else list(spec.scales)
    if spec.mode == "bilinear":
        y = aten.upsample_bilinear2d.vec(xf, size, spec.align_corners, scales)
    else:
        op = getattr(
            aten,
            f"{'_upsample_nearest_exact' if spec.mode == 'nearest_exact' else 'upsample_nearest'}{spec.spatial}d",
        )
        y = op.vec(xf, size, scales)
    return y.to(x.dtype)
