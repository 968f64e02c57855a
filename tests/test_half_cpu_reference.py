"""CPU references of fp16/bf16 convolutions are computed in fp32 and rounded once, never by ATen's 16-bit CPU
convolution (which never finishes for some 1-D fp16 depthwise convolutions on CPUs with AVX512-FP16: see
`cuda_triton.conv.op.reference_convolution`). conftest.py refuses 16-bit CPU convolutions for the whole session;
these tests check that the guard is on and that the op's CPU body and the reference pass it."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from cuda_triton.conv.op import reference_convolution, reference_in_layout, triton_convolution
from cuda_triton.conv.params import ConvParams

HALF = [torch.float16, torch.bfloat16]
# The call that spins forever in oneDNN on AVX512-FP16 CPUs: 2x3x70 input, 3x1x15 weight, padding 7, groups 3.
DW15 = ConvParams((1,), (7,), (7,), (1,), False, (0,), 3)


def _dw15_inputs(dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    return torch.randn(2, 3, 70).to(dtype), torch.randn(3, 1, 15).to(dtype), torch.randn(3).to(dtype)


@pytest.mark.parametrize("dtype", HALF, ids=["fp16", "bf16"])
def test_guard_refuses_half_cpu_convolutions(dtype):
    x, w, b = _dw15_inputs(dtype)
    calls = [
        lambda: F.conv1d(x, w, b, 1, 7, 1, 3),
        lambda: F.conv1d(x, w, b, 1, "same", 1, 3),
        lambda: torch.convolution(x, w, b, [1], [7], [1], False, [0], 3),
        lambda: torch.ops.aten.convolution.default(x, w, b, [1], [7], [1], False, [0], 3),
        lambda: F.conv_transpose1d(x, w.transpose(0, 1).repeat(3, 1, 1), None, 1, 0, 0, 1),
        lambda: torch.nn.Conv2d(3, 3, 3).to(dtype)(x.unsqueeze(2).expand(2, 3, 5, 70)),
    ]
    for call in calls:
        with pytest.raises(RuntimeError, match="fp32 and round once"):
            call()
    # fp32 passes through to ATen unchanged.
    got = F.conv1d(x.float(), w.float(), b.float(), 1, 7, 1, 3)
    assert torch.equal(got, torch.ops.aten._convolution(
        x.float(), w.float(), b.float(), [1], [7], [1], False, [0], 3, False, False, True, True))  # fmt: skip


@pytest.mark.parametrize("dtype", HALF, ids=["fp16", "bf16"])
@pytest.mark.parametrize(
    "p, x_shape, w_shape",
    [
        (DW15, (2, 3, 70), (3, 1, 15)),
        (
            ConvParams((1, 2), (2, 0), (1, 1), (1, 2), False, (0, 0), 2),
            (1, 4, 9, 11),
            (6, 2, 3, 3),
        ),  # asymmetric
        (ConvParams((2,), (1,), (1,), (1,), True, (1,), 1), (2, 4, 9), (4, 5, 4)),  # transposed
        (
            ConvParams((2, 1), (3, 0), (0, 1), (1, 1), True, (0, 0), 2),
            (1, 4, 5, 6),
            (4, 3, 3, 2),
        ),  # asymmetric crop
    ],
    ids=["dw15", "asymmetric", "transposed", "transposed_crop"],
)
def test_reference_is_fp32_rounded_once(dtype, p, x_shape, w_shape):
    torch.manual_seed(0)
    x, w = torch.randn(x_shape).to(dtype), torch.randn(w_shape).to(dtype)
    b = torch.randn(w_shape[1] * p.groups if p.transposed else w_shape[0]).to(dtype)
    want = reference_convolution(x.float(), w.float(), b.float(), p).to(dtype)
    got = reference_convolution(x, w, b, p)
    assert got.dtype == dtype and torch.equal(got, want)
    op = triton_convolution(x, w, b, p)  # the op's CPU body
    assert op.dtype == dtype and torch.equal(op, want)
    assert op.stride() == reference_in_layout(x.float(), w.float(), b.float(), p).stride()


def test_channels_last_layout_is_kept():
    x = torch.randn(1, 4, 6, 7).half().contiguous(memory_format=torch.channels_last)
    w = torch.randn(8, 4, 3, 3).half()
    p = ConvParams((1, 1), (1, 1), (1, 1), (1, 1), False, (0, 0), 1)
    assert (
        triton_convolution(x, w, None, p).stride()
        == reference_in_layout(x.float(), w.float(), None, p).stride()
    )


def test_mixed_dtypes_are_a_clear_error():
    x, w, b = _dw15_inputs(torch.float16)
    with pytest.raises(RuntimeError, match="triton::convolution: .*same dtype|share one dtype"):
        reference_convolution(x, w, b.float(), DW15)
