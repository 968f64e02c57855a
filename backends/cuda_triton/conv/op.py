"""``torch.ops.triton.convolution``: the canonical convolution every overload is bound to.

Semantics (docs/convolution.md is the full definition):

* forward: the input is zero-padded by ``padding_before[i]`` elements at the low end and ``padding_after[i]``
  at the high end of spatial dim i, then cross-correlated with the weight ``(C_out, C_in/groups, *k)`` with
  the given stride and dilation.
* transposed: the adjoint of a forward convolution. Every input element scatters ``weight[c_in, :, *t]`` to
  full-output position ``x * stride + t * dilation``; the full output (length ``(L-1)*s + d*(k-1) + 1``) is
  extended by ``output_padding`` zeros at its high end, then ``padding_before`` elements are cropped from the low
  end and ``padding_after`` from the high end. Weight ``(C_in, C_out/groups, *k)``.

The CPU body is an exact reference built from ATen (16-bit calls computed in fp32 and rounded once, see
`reference_convolution`). The CUDA body runs the Triton templates. The fake
implementation allocates with `out_shape_and_stride`, so the output is allocated once, in the layout ATen's
CUDA convolution would return; both real bodies return exactly that layout too.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import torch
import torch.nn.functional as F

from .params import ConvParams

SCHEMA = (
    "convolution(Tensor input, Tensor weight, Tensor? bias, SymInt[] stride, SymInt[] padding_before, "
    "SymInt[] padding_after, SymInt[] dilation, bool transposed, SymInt[] output_padding, SymInt groups) -> Tensor"
)

_lib = torch.library.Library("triton", "FRAGMENT")
_lib.define(SCHEMA)


def canonical_params(
    weight: torch.Tensor,
    stride: Sequence[int],
    padding_before: Sequence[int],
    padding_after: Sequence[int],
    dilation: Sequence[int],
    transposed: bool,
    output_padding: Sequence[int],
    groups: int,
) -> ConvParams:
    """The op's scalar arguments as a `ConvParams` (a one-entry list serves every spatial dim)."""
    n = weight.dim() - 2

    def fit(name: str, v: Sequence[int]) -> tuple[int, ...]:
        v = tuple(int(x) for x in v)
        if len(v) == 1 and n > 1:
            v = v * n
        if len(v) != n:
            raise ValueError(f"triton::convolution: {name} has {len(v)} entries for a {n}-D convolution")
        return v

    return ConvParams(
        fit("stride", stride),
        fit("padding_before", padding_before),
        fit("padding_after", padding_after),
        fit("dilation", dilation),
        bool(transposed),
        fit("output_padding", output_padding) if (transposed or len(output_padding)) else (0,) * n,
        int(groups),
    )


def output_layout(input: torch.Tensor, weight: torch.Tensor, p: ConvParams) -> tuple[list[int], list[int]]:
    return p.output_layout(
        input.shape, input.stride(), weight.shape, weight.stride(), input.dtype == torch.float64
    )


HALF_DTYPES = (torch.float16, torch.bfloat16)


def reference_convolution(
    input: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, p: ConvParams
) -> torch.Tensor:
    """The canonical convolution computed with ATen (any device), in ATen's own output layout.

    On CPU, fp16/bf16 convolutions are computed in fp32 and rounded once to the input dtype. That is the more
    exact reference (one rounding, fp32 accumulation), and it keeps every CPU reference off ATen's 16-bit CPU
    convolution: on CPUs with AVX512-FP16, torch 2.13's oneDNN never finishes generating the kernel of a 1-D
    fp16 depthwise convolution with 15 or more taps (``F.conv1d`` of a 2x3x70 input with a 3x1x15 weight,
    padding 7, groups 3 spins forever), while bf16, fp32, and fp16 with ``torch.backends.mkldnn`` disabled
    finish. On CUDA the call stays in its own dtype (cuDNN: what benchmarks compare against).
    """
    named = [(name, t) for name, t in (("input", input), ("weight", weight), ("bias", bias)) if t is not None]
    if input.device.type == "cpu" and any(t.dtype in HALF_DTYPES for _, t in named):
        if len({t.dtype for _, t in named}) != 1:
            got = ", ".join(f"{name} {t.dtype}" for name, t in named)
            raise RuntimeError(f"triton::convolution: input, weight and bias must share one dtype, got {got}")
        wide = _aten_convolution(input.float(), weight.float(), None if bias is None else bias.float(), p)
        return wide.to(input.dtype)
    return _aten_convolution(input, weight, bias, p)


def _aten_convolution(
    input: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, p: ConvParams
) -> torch.Tensor:
    n = p.spatial_dims
    if not p.transposed:
        if p.symmetric_padding:
            return torch.ops.aten.convolution(
                input, weight, bias, p.stride, p.padding_before, p.dilation, False, [0] * n, p.groups
            )
        pads: list[int] = []
        for i in reversed(range(n)):  # F.pad lists the last dim first
            pads += [p.padding_before[i], p.padding_after[i]]
        padded = F.pad(input, pads)
        return torch.ops.aten.convolution(
            padded, weight, bias, p.stride, [0] * n, p.dilation, False, [0] * n, p.groups
        )

    if p.symmetric_padding and all(
        o < max(s, d) for o, s, d in zip(p.output_padding, p.stride, p.dilation, strict=True)
    ):
        return torch.ops.aten.convolution(
            input, weight, bias, p.stride, p.padding_before, p.dilation, True, p.output_padding, p.groups
        )
    # Asymmetric crop: compute the full (uncropped) output, then crop/extend each dim by F.pad.
    full = torch.ops.aten.convolution(
        input, weight, None, p.stride, [0] * n, p.dilation, True, [0] * n, p.groups
    )
    # Extend by output_padding zeros first, then crop: cropping first could ask for a negative length when
    # padding_before exceeds the full output that output_padding then extends.
    pads = []
    for i in reversed(range(n)):
        pads += [0, p.output_padding[i]]
    out = F.pad(full, pads)
    for i in range(n):
        length = out.shape[2 + i] - p.padding_before[i] - p.padding_after[i]
        out = out.narrow(2 + i, p.padding_before[i], length)
    if bias is not None:
        out = out + bias.reshape(1, -1, *([1] * n)).to(out.dtype)
    return out


def _into_layout(result: torch.Tensor, sizes: list[int], strides: list[int]) -> torch.Tensor:
    out = torch.empty_strided(sizes, strides, dtype=result.dtype, device=result.device)
    out.copy_(result.reshape(sizes))
    return out


def reference_in_layout(
    input: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, p: ConvParams
) -> torch.Tensor:
    """The reference result, unbatched inputs included, in the layout `out_shape_and_stride` gives."""
    sizes, strides = output_layout(input, weight, p)
    unbatched = input.dim() == weight.dim() - 1
    result = reference_convolution(input.unsqueeze(0) if unbatched else input, weight, bias, p)
    return _into_layout(result, sizes, strides)


def convolution_cpu(
    input, weight, bias, stride, padding_before, padding_after, dilation, transposed, output_padding, groups
):
    p = canonical_params(
        weight, stride, padding_before, padding_after, dilation, transposed, output_padding, groups
    )
    return reference_in_layout(input, weight, bias, p)


@functools.cache
def _cuda_body():
    from .dispatch import convolution  # imports triton: only the CUDA body needs it

    return convolution


def convolution_cuda(input, weight, bias, *op_args):
    return _cuda_body()(input, weight, bias, *op_args)


def convolution_fake(
    input, weight, bias, stride, padding_before, padding_after, dilation, transposed, output_padding, groups
):
    p = canonical_params(
        weight, stride, padding_before, padding_after, dilation, transposed, output_padding, groups
    )
    sizes, strides = output_layout(input, weight, p)
    return input.new_empty_strided(sizes, strides)


_lib.impl("convolution", convolution_cpu, "CPU")
_lib.impl("convolution", convolution_cuda, "CUDA")
torch.library.register_fake("triton::convolution", convolution_fake, lib=_lib)


def triton_convolution(
    input: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, p: ConvParams
) -> torch.Tensor:
    """Call ``torch.ops.triton.convolution`` with a `ConvParams`."""
    return torch.ops.triton.convolution(input, weight, bias, *p.as_op_args())
