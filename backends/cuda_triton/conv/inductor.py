"""Which convolutions Inductor's Triton conv templates cannot compile (the planner's REQUIRED decision)."""

from __future__ import annotations

from typing import Any

import torch
from torch.fx.experimental.symbolic_shapes import is_concrete_int

from .binding import ConvArgs
from .problem import DTYPE_NAMES, ConvProblem

# The torch release whose Inductor conv lowering `inductor_cannot_compile` mirrors
# (torch/_inductor/kernel/conv.py, `convolution`: the TRITON branch and `use_triton_template`).
INDUCTOR_TORCH_VERSION = "2.13"


def concrete_int(x: Any) -> bool:
    """A concrete int (a SymInt that is really a constant counts; a free symbol does not)."""
    return type(x) is int or is_concrete_int(x)


def inductor_cannot_compile(conv: ConvProblem | ConvArgs) -> str | None:
    """Why Inductor's Triton conv templates cannot compile this call, or None when they can.

    Mirrors torch 2.13's ``torch/_inductor/kernel/conv.py`` (``convolution``: Triton choices are added only
    when ``dilation`` is all ones, the call is not transposed, ``output_padding`` is zero, the layout dtype is
    fp16/bf16/fp32 (``use_triton_template``), and the conv is 2-D or 3-D, or 1-D depthwise with channel multiplier
    1: ``groups > 1``, ``C_in/groups == 1``, ``C_out == groups``). With only the TRITON conv backend (as upstream
    ExecuTorch's CUDA backend configures Inductor) such a call has no GPU path but this delegate: Inductor
    raises NoValidChoicesError for it (docs/routing.md). A forward call with a nonzero ``output_padding``
    (possible only through ``convolution.default``; ATen ignores it) fails the same check.

    Not modelled: Inductor's ``aten_conv1x1_via_mm`` extern choice for pointwise convs, and upstream ExecuTorch
    1.5.1's ``CudaBackend`` decomposition of ``aten.conv1d.default`` into a (N, C, L, 1) 2-D conv
    (docs/routing.md discusses both).
    """
    if isinstance(conv, ConvProblem):
        spatial, dilation, transposed = conv.spatial_dims, conv.params.dilation, conv.transposed
        output_padding = conv.params.output_padding
        groups, dtype_name = conv.groups, conv.dtype
        w = conv.weight_size
        w0: Any = w[0]
        w1: Any = w[1]
    else:
        spatial, dilation, transposed, groups = conv.spatial_dims, conv.dilation, conv.transposed, conv.groups
        output_padding = conv.output_padding
        wv = conv.weight.meta.get("val")
        xv = conv.input.meta.get("val")
        w0 = wv.shape[0] if isinstance(wv, torch.Tensor) else None
        w1 = wv.shape[1] if isinstance(wv, torch.Tensor) else None
        dtype_name = DTYPE_NAMES.get(xv.dtype, str(xv.dtype)) if isinstance(xv, torch.Tensor) else "float32"
    v = f"torch {INDUCTOR_TORCH_VERSION}"
    if transposed:
        return (
            f"it is a transposed convolution, which Inductor's Triton conv templates ({v}) do not implement"
        )
    if any(d != 1 for d in dilation):
        return f"it is dilated (dilation {list(dilation)}), which Inductor's Triton conv templates ({v}) do not implement"
    if any(o != 0 for o in output_padding):
        return (
            f"it has a nonzero output_padding ({list(output_padding)}), which Inductor's Triton conv templates ({v}) "
            "do not implement"
        )
    if dtype_name == "float64":
        return f"it is float64, which Inductor's Triton conv templates ({v}) do not accept"
    if spatial == 1:
        depthwise = (
            concrete_int(w0) and concrete_int(w1) and groups > 1 and int(w1) == 1 and int(w0) == groups
        )
        if not depthwise:
            return (
                f"it is a 1-D convolution that is not depthwise with channel multiplier 1; Inductor's Triton conv "
                f"templates ({v}) cover only 2-D, 3-D and such depthwise 1-D convolutions"
            )
    return None
