"""CPU reference of the GEMM ops in ATen: computed in fp32 (16-bit inputs widened; TF32 inputs rounded to nearest
first) and rounded once to the dtype, as the kernels do."""

from __future__ import annotations

import torch

from ...conv.tf32 import round_to_tf32
from .spec import GemmSpec


def reference_gemm(spec: GemmSpec, tensors: dict[str, torch.Tensor], tf32: bool = False) -> torch.Tensor:
    """``alpha * (a @ w) + beta * bias`` for the spec's operands (by role) in the output's sizes; ``tf32``: the
    fp32 operands rounded to TF32 first (what the kernels feed TF32 tensor cores). The products are summed in
    fp64, so the reference carries no rounding of its own beyond the final one. A row norm (``row_norm_eps``)
    normalises ``a`` exactly, before any rounding: the kernel never rounds the normalised rows."""

    def operand(op, rounded: bool) -> torch.Tensor:
        t = tensors[op.role]
        view = t.as_strided(op.sizes, op.strides, t.storage_offset()).float()
        return round_to_tf32(view.contiguous()) if rounded else view

    a, w = operand(spec.a, False), operand(spec.w, tf32)
    if spec.row_norm_eps is not None:  # a layer norm of each row over K, in fp64 (biased variance)
        a64 = a.double()
        mean = a64.mean(dim=-1, keepdim=True)
        var = a64.var(dim=-1, unbiased=False, keepdim=True)
        a = ((a64 - mean) / torch.sqrt(var + spec.row_norm_eps)).float()
    elif tf32:
        a = round_to_tf32(a.contiguous())
    acc = torch.matmul(a.double(), w.double()) * spec.alpha
    if spec.bias is not None:
        acc = acc + spec.beta * operand(spec.bias, False).double()
    out = acc.float().to(getattr(torch, spec.dtype))
    return out.reshape(spec.out_sizes)
