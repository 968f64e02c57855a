"""CPU references of the normalisation ops: the ATen op on fp32 copies of the inputs, then the fused epilogue's
chain by its ATen definitions, rounded once to the output dtype and laid out by the layout rule."""

from __future__ import annotations

import torch

from ..elementwise.reference import run_program
from .spec import AffineNormSpec, BatchNormSpec, GroupNormSpec, LayerNormSpec, NormSpec, SoftmaxSpec


def reference(spec: NormSpec, tensors: dict[str, torch.Tensor]) -> torch.Tensor:
    def get(role: str, present: object = True) -> torch.Tensor | None:
        return tensors[role].float() if present is not None else None

    aten = torch.ops.aten
    x = tensors["in0"].float()
    if isinstance(spec, BatchNormSpec):
        y = aten._native_batch_norm_legit_no_training(
            x, get("weight", spec.weight), get("bias", spec.bias), get("mean"), get("var"), 0.1, spec.eps
        )[0]
    elif isinstance(spec, LayerNormSpec):
        shape = list(spec.x.sizes[spec.x.rank - spec.normalized_ndim :])
        y = aten.native_layer_norm(x, shape, get("weight", spec.weight), get("bias", spec.bias), spec.eps)[0]
    elif isinstance(spec, GroupNormSpec):
        n, c = spec.x.sizes[0], spec.x.sizes[1]
        hxw = x.numel() // max(n * c, 1)
        y = aten.native_group_norm(  # ATen's CPU kernel takes dense inputs only; the values are the same
            x.contiguous(),
            get("weight", spec.weight),
            get("bias", spec.bias),
            n,
            c,
            hxw,
            spec.groups,
            spec.eps,
        )[0]
    elif isinstance(spec, SoftmaxSpec):
        y = (aten._log_softmax if spec.log else aten._softmax)(x, spec.dim, False)
    else:
        raise TypeError(type(spec).__name__)
    if isinstance(spec, AffineNormSpec) and spec.epilogue is not None:
        y = run_program(spec.epilogue, [y])
    out = torch.empty_strided(spec.out.sizes, spec.out.strides, dtype=getattr(torch, spec.out.dtype))
    return out.copy_(y)
