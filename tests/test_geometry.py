"""The shared geometry helpers (conv/templates/geometry.py): dense strides, the dense-layout tie-break and each
template family's choice of it, next_pow2 and pad3. Host code only: no kernel runs."""

from __future__ import annotations

import pytest
import torch
from cuda_triton.conv.params import ConvParams
from cuda_triton.conv.problem import ConvProblem
from cuda_triton.conv.templates import get_template
from cuda_triton.conv.templates.depthwise import geometry as depthwise_geometry
from cuda_triton.conv.templates.geometry import (
    CHANNELS_LAST,
    CONTIGUOUS,
    Geometry,
    dense_layout,
    dense_strides,
    is_dense,
    next_pow2,
    pad3,
)
from cuda_triton.conv.templates.transposed import template as transposed_template


@pytest.mark.parametrize("sizes", [(2, 3, 5, 7), (2, 3, 4, 5, 6), (1, 1, 1, 1), (3, 8, 1, 1), (2, 1, 4, 4)])
def test_dense_strides_match_torch(sizes):
    assert dense_strides(sizes, False) == torch.empty(sizes).stride()
    fmt = torch.channels_last if len(sizes) == 4 else torch.channels_last_3d
    assert dense_strides(sizes, True) == torch.empty(sizes, memory_format=fmt).stride()


def test_dense_strides_1d():
    assert dense_strides((2, 3, 5), False) == (15, 5, 1)
    assert dense_strides((2, 3, 5), True) == (15, 1, 3)  # (C*L, 1, C): channels-last 1-D


def test_dense_layout_of_unambiguous_tensors_ignores_prefer():
    cl = torch.empty(2, 3, 5, 7).contiguous(memory_format=torch.channels_last)
    nc = torch.empty(2, 3, 5, 7)
    for prefer in (CHANNELS_LAST, CONTIGUOUS):
        assert dense_layout(tuple(cl.shape), cl.stride(), prefer=prefer) == CHANNELS_LAST
        assert dense_layout(tuple(nc.shape), nc.stride(), prefer=prefer) == CONTIGUOUS
    sliced = torch.empty(2, 3, 5, 14)[..., ::2]
    assert dense_layout(tuple(sliced.shape), sliced.stride(), prefer=CHANNELS_LAST) is None
    assert not is_dense(tuple(sliced.shape), sliced.stride())


@pytest.mark.parametrize(
    "sizes, strides",
    [
        ((2, 1, 5, 7), (35, 35, 7, 1)),  # one channel, contiguous strides
        ((2, 1, 5, 7), (35, 1, 7, 1)),  # one channel, channels-last strides
        ((2, 8, 1, 1), (8, 1, 8, 8)),  # one pixel, channels-last strides
        ((2, 8, 1, 1), (8, 1, 1, 1)),  # one pixel, contiguous strides
        ((4, 8, 1), (8, 1, 1)),  # 1-D, one position
    ],
)
def test_dense_layout_tie_is_prefer(sizes, strides):
    """A tensor with one channel or one pixel is dense in both layouts: the answer is the caller's ``prefer``."""
    assert is_dense(sizes, strides)
    assert dense_layout(sizes, strides, prefer=CHANNELS_LAST) == CHANNELS_LAST
    assert dense_layout(sizes, strides, prefer=CONTIGUOUS) == CONTIGUOUS


def test_dense_layout_rejects_unknown_prefer():
    with pytest.raises(ValueError, match="prefer"):
        dense_layout((1, 2, 3, 4), (24, 12, 4, 1), prefer="nhwc")


def _one_pixel_problem(transposed: bool, groups: int, dtype: str = "float16") -> ConvProblem:
    """A 1x1-pixel input stored channels-last (dense in both layouts), 8 channels."""
    c, k = 8, 8
    isize = (2, c, 1, 1)
    wsize = (c, k // groups, 1, 1) if transposed else (k, c // groups, 1, 1)
    params = ConvParams((1, 1), (0, 0), (0, 0), (1, 1), transposed, (0, 0), groups)
    return ConvProblem.from_shapes(
        isize, dense_strides(isize, True), wsize, dense_strides(wsize, True), False, params, dtype
    )


def test_each_family_keeps_its_tie_break():
    """The depthwise and transposed kernels read a tensor dense in both layouts as contiguous; the GEMM-shaped
    templates (`Geometry`) as channels-last. Both readings are correct; these pin which kernel variant runs."""
    assert depthwise_geometry.DENSE_TIE == CONTIGUOUS
    assert transposed_template.DENSE_TIE == CONTIGUOUS

    dw = _one_pixel_problem(transposed=False, groups=8)
    depthwise = get_template("depthwise")
    assert depthwise.supports(dw)
    assert not depthwise_geometry.channels_last(dw)
    (launch,) = depthwise.launches(dw, depthwise.heuristic_schedule(dw))
    assert launch.name == "_depthwise_nc_kernel"
    assert dict(launch.constexprs)["OUT_CL"] is False

    tr = _one_pixel_problem(transposed=True, groups=1)
    transposed = get_template("transposed")
    assert transposed.supports(tr)
    constexprs = dict(transposed.launches(tr, transposed.heuristic_schedule(tr))[-1].constexprs)
    assert constexprs["IN_CL"] is False and constexprs["OUT_CL"] is False

    g = Geometry.of(_one_pixel_problem(transposed=False, groups=1))
    assert g.in_cl and g.out_cl


def test_next_pow2_and_pad3():
    assert [next_pow2(x) for x in (-3, 0, 1, 2, 3, 4, 5, 17, 64)] == [1, 1, 1, 2, 4, 4, 8, 32, 64]
    assert pad3((5,), 1) == (1, 1, 5)
    assert pad3((4, 5), 0) == (0, 4, 5)
    assert pad3((3, 4, 5), 9) == (3, 4, 5)
