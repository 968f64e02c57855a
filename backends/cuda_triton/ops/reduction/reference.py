"""CPU reference of a reduction: the ATen op on the input widened to fp32, rounded once to the output dtype."""

from __future__ import annotations

import torch

from .spec import ReductionSpec


def reference(spec: ReductionSpec, tensors: dict[str, torch.Tensor]) -> torch.Tensor:
    x = tensors["in0"].float()
    dims = list(spec.dims)
    aten = torch.ops.aten
    if spec.op == "sum":
        y = aten.sum.dim_IntList(x, dims, spec.keepdim)
    elif spec.op == "mean":
        y = aten.mean.dim(x, dims, spec.keepdim)
    elif spec.op == "amax":
        y = aten.amax(x, dims, spec.keepdim)
    else:
        y = aten.amin(x, dims, spec.keepdim)
    out = torch.empty_strided(spec.out.sizes, spec.out.strides, dtype=getattr(torch, spec.out.dtype))
    return out.copy_(y)
