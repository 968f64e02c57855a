"""`out_shape_and_stride` (the CUDA output-layout rule) against an emulation of ATen's CUDA convolution and against
hand-computed expectations for every case of docs/platform_facts.md's layout section; the op's fake allocates
with the rule.

A CPU-only torch cannot run the CUDA path (meta and fake CUDA tensors report contiguous outputs), so the emulation
replays ATen's ``_convolution`` steps with real tensor operations:

* batchify an unbatched input with ``unsqueeze(0)``; for 1-D convs make the input contiguous and ``unsqueeze(2)``
  both tensors (``view1d_as_2d``);
* empty batch or empty input channels -> the ``Empty`` backend: a contiguous ``view``, 0 output channels when C_in == 0;
* ``output_padding[i] >= stride[i]`` (``is_output_padding_big``) or float64 -> cuDNN is not used / its suggestion is
  contiguous -> contiguous;
* otherwise cuDNN's ``cudnn_conv_suggest_memory_format``: channels-last if the input or the weight suggests it. The
  suggestion itself is taken from torch's C++ (``torch._C._conv_determine_backend_memory_format`` with the
  Mkldnn backend evaluates the same ``suggest_memory_format(input) / (weight)`` test on CPU tensors);
* allocate with ``torch.empty(memory_format=...)``, then undo the 1-D / unbatched views with ``squeeze``.

Sizes come from ATen itself (meta convolution). scripts/check_layout_gpu.py checks the rule on real CUDA.
"""

from __future__ import annotations

import random

import cuda_triton  # noqa: F401  (registers torch.ops.triton.convolution)
import pytest
import torch
import torch.nn.functional as F
from cuda_triton.conv import ConvParams, out_shape_and_stride
from cuda_triton.conv.layout import channels_last_strides, contiguous_strides, is_channels_last_strides
from cuda_triton.conv.op import triton_convolution
from torch._subclasses.fake_tensor import FakeTensorMode

aten = torch.ops.aten


# ---------------------------------------------------------------------------------------------------------
# The emulation
# ---------------------------------------------------------------------------------------------------------
def _suggests_channels_last(x: torch.Tensor, w: torch.Tensor) -> torch.memory_format:
    """c10's suggest_memory_format(input) / (weight) test, evaluated by torch's C++ (see the module docstring)."""
    return torch._C._conv_determine_backend_memory_format(x.float(), w.float(), torch._C._ConvBackend.Mkldnn)


def aten_sizes(x: torch.Tensor, w: torch.Tensor, p: ConvParams) -> list[int]:
    """Output sizes from ATen's own shape logic (meta tensors), batched input."""
    xm = torch.empty(x.shape, device="meta")
    wm = torch.empty(w.shape, device="meta")
    n = p.spatial_dims
    if not p.transposed:
        pads: list[int] = []
        for i in reversed(range(n)):  # F.pad lists the last dim first
            pads += [p.padding_before[i], p.padding_after[i]]
        out = aten.convolution(
            F.pad(xm, pads), wm, None, p.stride, [0] * n, p.dilation, False, [0] * n, p.groups
        )
        return list(out.shape)
    full = aten.convolution(xm, wm, None, p.stride, [0] * n, p.dilation, True, [0] * n, p.groups)
    sizes = list(full.shape)
    for i in range(n):
        sizes[2 + i] += p.output_padding[i] - p.padding_before[i] - p.padding_after[i]
    return sizes


def emulate(x: torch.Tensor, w: torch.Tensor, p: ConvParams) -> tuple[list[int], list[int]]:
    n = w.dim() - 2
    unbatched = x.dim() == n + 1
    if unbatched:
        x = x.unsqueeze(0)
    sizes = aten_sizes(x, w, p)
    if not p.transposed and not p.symmetric_padding:
        # ATen's convolution_same: pad the difference with constant_pad_nd (a real CPU call: the same code runs
        # on CUDA), then a symmetric convolution.
        pads: list[int] = []
        for i in reversed(range(n)):
            delta = p.padding_after[i] - p.padding_before[i]
            pads += [0, delta] if delta > 0 else [-delta, 0]
        x = torch.ops.aten.constant_pad_nd(x, pads, 0.0)
    stride, output_padding = list(p.stride), list(p.output_padding)
    if n == 1:
        x = x.contiguous().unsqueeze(2)
        w = w.unsqueeze(2)
        sizes = sizes[:2] + [1] + sizes[2:]
        stride, output_padding = [1] + stride, [0] + output_padding
    if x.shape[0] == 0 or x.shape[1] == 0:
        fmt = torch.contiguous_format
    elif any(o >= s for o, s in zip(output_padding, stride, strict=True)):
        fmt = torch.contiguous_format
    elif x.dtype == torch.float64:
        fmt = torch.contiguous_format
    else:
        fmt = _suggests_channels_last(x, w)
    out = torch.empty(sizes, memory_format=fmt, device="meta")
    if n == 1:
        out = out.squeeze(2)
    if unbatched:
        out = out.squeeze(0)
    return list(out.shape), list(out.stride())


def rule(x: torch.Tensor, w: torch.Tensor, p: ConvParams) -> tuple[list[int], list[int]]:
    return out_shape_and_stride(
        list(x.shape),
        list(x.stride()),
        list(w.shape),
        list(w.stride()),
        list(p.stride),
        list(p.padding_before),
        list(p.padding_after),
        list(p.dilation),
        p.transposed,
        list(p.output_padding),
        p.groups,
        x.dtype == torch.float64,
    )


def P(n, stride=1, pad=0, dil=1, transposed=False, op=0, groups=1, pad_after=None) -> ConvParams:
    def t(v):
        return tuple(v) if isinstance(v, (list, tuple)) else (v,) * n

    return ConvParams(
        t(stride), t(pad), t(pad if pad_after is None else pad_after), t(dil), transposed, t(op), groups
    )


def strided(sizes, strides, dtype=torch.float32) -> torch.Tensor:
    return torch.empty_strided(tuple(sizes), tuple(strides), dtype=dtype)


# ---------------------------------------------------------------------------------------------------------
# The layout cases of docs/platform_facts.md, with hand-computed expectations
# ---------------------------------------------------------------------------------------------------------
CL, CL3 = torch.channels_last, torch.channels_last_3d


def _t(*shape, fmt=None, dtype=torch.float32):
    x = torch.randn(*shape, dtype=dtype)
    return x.to(memory_format=fmt) if fmt is not None else x


EXPECTED = [
    # (name, input, weight, params, expected sizes, expected strides)
    ("2d_contiguous", _t(2, 4, 8, 8), _t(6, 4, 3, 3), P(2), [2, 6, 6, 6], [216, 36, 6, 1]),
    ("2d_cl_input", _t(2, 4, 8, 8, fmt=CL), _t(6, 4, 3, 3), P(2), [2, 6, 6, 6], [216, 1, 36, 6]),
    ("2d_cl_weight", _t(2, 4, 8, 8), _t(6, 4, 3, 3, fmt=CL), P(2), [2, 6, 6, 6], [216, 1, 36, 6]),
    (
        "2d_cl_both_s2",
        _t(2, 4, 8, 8, fmt=CL),
        _t(6, 4, 3, 3, fmt=CL),
        P(2, 2, 1),
        [2, 6, 4, 4],
        [96, 1, 24, 6],
    ),
    ("batch0_cl_input", _t(0, 4, 8, 8, fmt=CL), _t(6, 4, 3, 3), P(2), [0, 6, 6, 6], [216, 36, 6, 1]),
    ("batch0_cl_weight", _t(0, 4, 8, 8), _t(6, 4, 3, 3, fmt=CL), P(2), [0, 6, 6, 6], [216, 36, 6, 1]),
    ("cin0_cl_input", _t(2, 0, 8, 8, fmt=CL), _t(6, 0, 3, 3), P(2), [2, 0, 6, 6], [36, 36, 6, 1]),
    ("cin0_1d", _t(3, 0, 9), _t(5, 0, 3), P(1), [3, 0, 7], [7, 7, 1]),
    (
        "3d_cl3d_input",
        _t(2, 4, 5, 6, 7, fmt=CL3),
        _t(6, 4, 3, 3, 3),
        P(3),
        [2, 6, 3, 4, 5],
        [360, 1, 120, 30, 6],
    ),
    (
        "3d_cl3d_weight",
        _t(2, 4, 5, 6, 7),
        _t(6, 4, 3, 3, 3, fmt=CL3),
        P(3),
        [2, 6, 3, 4, 5],
        [360, 1, 120, 30, 6],
    ),
    ("3d_contiguous", _t(2, 4, 5, 6, 7), _t(6, 4, 3, 3, 3), P(3), [2, 6, 3, 4, 5], [360, 60, 20, 5, 1]),
    # 1-D: the input is made contiguous, so a channels-last (N, L, C)-stored input does not count ...
    ("1d_cl_input", torch.randn(2, 9, 4).transpose(1, 2), _t(6, 4, 3), P(1), [2, 6, 7], [42, 7, 1]),
    # ... but a weight stored (C_out, k, C_in) is channels-last once viewed as (C_out, C_in, 1, k)
    ("1d_cl_weight", _t(2, 4, 9), torch.randn(6, 3, 4).transpose(1, 2), P(1), [2, 6, 7], [42, 1, 6]),
    ("1d_contiguous", _t(2, 4, 9), _t(6, 4, 3), P(1, 2, 1), [2, 6, 5], [30, 5, 1]),
    # transposed with output_padding >= stride (allowed because < dilation): contiguous even with channels-last
    (
        "t2d_op_ge_stride_cl",
        _t(2, 4, 5, 5, fmt=CL),
        _t(4, 6, 3, 3, fmt=CL),
        P(2, 1, 0, 2, True, 1),
        [2, 6, 10, 10],
        [600, 100, 10, 1],
    ),
    (
        "t2d_op_lt_stride_cl",
        _t(2, 4, 5, 5, fmt=CL),
        _t(4, 6, 3, 3),
        P(2, 2, 1, 1, True, 1),
        [2, 6, 10, 10],
        [600, 1, 60, 6],
    ),
    (
        "t3d_op_ge_stride_cl3d",
        _t(1, 4, 3, 3, 3, fmt=CL3),
        _t(4, 6, 2, 2, 2),
        P(3, 1, 0, 2, True, 1),
        [1, 6, 6, 6, 6],
        [1296, 216, 36, 6, 1],
    ),
    (
        "t1d_op_ge_stride",
        _t(2, 4, 5),
        torch.randn(4, 3, 6).transpose(1, 2),
        P(1, 1, 0, 3, True, 2),
        [2, 6, 13],
        [78, 13, 1],
    ),
    (
        "t1d_cl_weight",
        _t(2, 4, 5),
        torch.randn(4, 3, 6).transpose(1, 2),
        P(1, 2, 0, 1, True, 1),
        [2, 6, 12],
        [72, 1, 6],
    ),
    # float64: contiguous
    (
        "f64_cl_input",
        _t(2, 4, 8, 8, fmt=CL, dtype=torch.float64),
        _t(6, 4, 3, 3, dtype=torch.float64),
        P(2),
        [2, 6, 6, 6],
        [216, 36, 6, 1],
    ),
    (
        "f64_cl3d_weight",
        _t(1, 4, 4, 4, 4, dtype=torch.float64),
        _t(6, 4, 3, 3, 3, fmt=CL3, dtype=torch.float64),
        P(3),
        [1, 6, 2, 2, 2],
        [48, 8, 4, 2, 1],
    ),
    # unbatched: batchified with unsqueeze(0) (the new stride is C*stride[0]) then squeezed back
    ("unbatched_contiguous", _t(4, 8, 8), _t(6, 4, 3, 3), P(2), [6, 6, 6], [36, 6, 1]),
    (
        "unbatched_hwc_input",
        torch.randn(8, 8, 4).permute(2, 0, 1),
        _t(6, 4, 3, 3),
        P(2),
        [6, 6, 6],
        [36, 6, 1],
    ),
    ("unbatched_cl_weight", _t(4, 8, 8), _t(6, 4, 3, 3, fmt=CL), P(2), [6, 6, 6], [1, 36, 6]),
    ("unbatched_1d_cl_weight", _t(4, 9), torch.randn(6, 3, 4).transpose(1, 2), P(1), [6, 7], [1, 6]),
    # depthwise / grouped / dilated: the same rule
    (
        "dw_cl_input",
        _t(2, 8, 7, 7, fmt=CL),
        _t(8, 1, 3, 3),
        P(2, 1, 1, groups=8),
        [2, 8, 7, 7],
        [392, 1, 56, 8],
    ),
    (
        "dw_cl_weight",
        _t(2, 8, 7, 7),
        _t(8, 1, 3, 3, fmt=CL),
        P(2, 1, 1, groups=8),
        [2, 8, 7, 7],
        [392, 1, 56, 8],
    ),
    (
        "grouped_dilated_cl",
        _t(2, 4, 9, 9, fmt=CL),
        _t(6, 2, 3, 3),
        P(2, 1, 0, 2, groups=2),
        [2, 6, 5, 5],
        [150, 1, 30, 6],
    ),
    # ambiguous size-1 strides
    ("n_c_1_1_cl", _t(2, 4, 1, 1, fmt=CL), _t(6, 4, 1, 1), P(2), [2, 6, 1, 1], [6, 1, 6, 6]),
    ("n_c_1_1_contiguous", _t(2, 4, 1, 1), _t(6, 4, 1, 1), P(2), [2, 6, 1, 1], [6, 1, 1, 1]),
    ("n_1_1_1", _t(2, 1, 1, 1), _t(6, 1, 1, 1), P(2), [2, 6, 1, 1], [6, 1, 1, 1]),
    ("c1_input_cl", _t(2, 1, 5, 5, fmt=CL), _t(6, 1, 3, 3), P(2), [2, 6, 3, 3], [54, 1, 18, 6]),
    ("c1_input_contiguous", _t(2, 1, 5, 5), _t(6, 1, 3, 3), P(2), [2, 6, 3, 3], [54, 9, 3, 1]),
    ("k1_weight_cl_ambiguous", _t(2, 4, 5, 5), _t(6, 4, 1, 1, fmt=CL), P(2), [2, 6, 5, 5], [150, 1, 30, 6]),
    ("h1_input_cl", _t(2, 4, 1, 9, fmt=CL), _t(6, 4, 1, 3), P(2), [2, 6, 1, 7], [42, 1, 42, 6]),
    # forward conv given output_padding >= stride (aten.convolution accepts and ignores it): ATen's CUDA path
    # still tests is_output_padding_big, so the result is contiguous
    (
        "fwd_output_padding_big_cl",
        _t(2, 4, 8, 8, fmt=CL),
        _t(6, 4, 3, 3),
        P(2, op=1),
        [2, 6, 6, 6],
        [216, 36, 6, 1],
    ),
    # asymmetric padding (canonical op only): sizes use before + after
    (
        "asym_pad_cl",
        _t(1, 4, 8, 8, fmt=CL),
        _t(6, 4, 2, 2),
        P(2, 1, 0, pad_after=1),
        [1, 6, 8, 8],
        [384, 1, 48, 6],
    ),
    # asymmetric 'same' on an (N, C, 1) input stored (N, 1, C): the padded copy is contiguous
    (
        "1d_L1_nlc_asym",
        torch.randn(2, 1, 4).transpose(1, 2),
        _t(6, 4, 2),
        P(1, 1, 0, pad_after=1),
        [2, 6, 1],
        [6, 1, 1],
    ),
    ("1d_L1_nlc_sym", torch.randn(2, 1, 4).transpose(1, 2), _t(6, 4, 1), P(1), [2, 6, 1], [6, 1, 6]),
    (
        "t_asym_crop",
        _t(1, 4, 5),
        _t(4, 6, 4),
        P(1, 2, (1,), pad_after=(2,), transposed=True, op=1),
        [1, 6, 10],
        [60, 10, 1],
    ),
]


@pytest.mark.parametrize("case", EXPECTED, ids=[c[0] for c in EXPECTED])
def test_facts_cases(case) -> None:
    name, x, w, p, sizes, strides = case
    assert rule(x, w, p) == (sizes, strides), name
    assert emulate(x, w, p) == (sizes, strides), f"{name}: the emulation disagrees with the expectation"


def test_sizes_match_aten_on_cpu_for_expected_cases() -> None:
    """The rule's sizes are ATen's: run every ATen-expressible case for real on the CPU."""
    for name, x, w, p, sizes, _ in EXPECTED:
        if not p.symmetric_padding:
            continue
        xr, wr = torch.randn_like(x), torch.randn_like(w)
        xb = xr.unsqueeze(0) if x.dim() == w.dim() - 1 else xr
        out = aten.convolution(
            xb, wr, None, p.stride, p.padding_before, p.dilation, p.transposed, p.output_padding, p.groups
        )
        if x.dim() == w.dim() - 1:
            out = out.squeeze(0)
        assert list(out.shape) == sizes, name


# ---------------------------------------------------------------------------------------------------------
# Random sweep: the rule against the emulation
# ---------------------------------------------------------------------------------------------------------
def _random_layout(rng: random.Random, shape: list[int], dtype: torch.dtype) -> torch.Tensor:
    """A tensor of ``shape`` stored contiguous, channels-last, permuted or sliced (strides with gaps)."""
    kind = rng.choice(["contiguous", "channels_last", "permuted", "sliced", "expanded_dim"])
    rank = len(shape)
    if kind == "channels_last" and rank in (4, 5):
        return torch.empty(shape, dtype=dtype).to(memory_format=CL if rank == 4 else CL3)
    if kind == "permuted":
        perm = list(range(rank))
        rng.shuffle(perm)
        base = torch.empty([shape[i] for i in perm], dtype=dtype)
        inv = [perm.index(i) for i in range(rank)]
        return base.permute(inv)
    if kind == "sliced":
        dim = rng.randrange(rank)
        big = list(shape)
        big[dim] = big[dim] * 2 + 1
        return (
            torch.empty(big, dtype=dtype).narrow(dim, 1, shape[dim])
            if shape[dim]
            else torch.empty(shape, dtype=dtype)
        )
    if kind == "expanded_dim" and 1 in shape:
        # a size-1 dim may carry any stride: give it a random one
        strides = list(torch.empty(shape).stride())
        for i, s in enumerate(shape):
            if s == 1:
                strides[i] = rng.choice([1, 2, 7, 1000])
        numel = 1 + sum((s - 1) * st for s, st in zip(shape, strides, strict=True) if s > 0)
        return torch.empty(numel, dtype=dtype).as_strided(shape, strides)
    return torch.empty(shape, dtype=dtype)


def _random_case(rng: random.Random):
    n = rng.choice([1, 2, 2, 3])
    transposed = rng.random() < 0.35
    groups = rng.choice([1, 1, 2, 3])
    cin_g = rng.choice([1, 1, 2, 3])
    cout_g = rng.choice([1, 2, 3])
    if rng.random() < 0.05 and not transposed:  # empty input channels (ATen rejects them when transposed)
        cin_g = 0
    c_in, c_out = cin_g * groups, cout_g * groups
    batch = rng.choice([0, 1, 1, 2, 3]) if rng.random() < 0.15 else rng.choice([1, 2, 3])
    k = [rng.choice([1, 1, 2, 3]) for _ in range(n)]
    s = [rng.choice([1, 1, 2, 3]) for _ in range(n)]
    d = [rng.choice([1, 1, 2]) for _ in range(n)]
    if transposed:
        op = [rng.randrange(max(si, di)) for si, di in zip(s, d, strict=True)]
        pb = [rng.randrange(0, 2) for _ in range(n)]
        pa = list(pb) if rng.random() < 0.7 else [rng.randrange(0, 2) for _ in range(n)]
        spatial = [rng.choice([1, 2, 3, 5]) for _ in range(n)]
        w_shape = [c_in, cout_g, *k]
    else:
        op = [0] * n if rng.random() < 0.9 else [rng.randrange(0, 3) for _ in range(n)]
        pb = [rng.randrange(0, 2) for _ in range(n)]
        pa = list(pb) if rng.random() < 0.7 else [rng.randrange(0, 2) for _ in range(n)]
        spatial = [di * (ki - 1) + 1 + rng.choice([0, 0, 1, 2, 4]) for ki, di in zip(k, d, strict=True)]
        w_shape = [c_out, cin_g, *k]
    if transposed and any(
        (sp - 1) * si - b - a + di * (ki - 1) + 1 + o < 0
        for sp, si, b, a, di, ki, o in zip(spatial, s, pb, pa, d, k, op, strict=True)
    ):
        pb = pa = [0] * n
    dtype = torch.float64 if rng.random() < 0.1 else torch.float32
    unbatched = rng.random() < 0.15 and batch > 0
    x_shape = [c_in, *spatial] if unbatched else [batch, c_in, *spatial]
    x = _random_layout(rng, x_shape, dtype)
    w = _random_layout(rng, w_shape, dtype)
    return x, w, ConvParams(tuple(s), tuple(pb), tuple(pa), tuple(d), transposed, tuple(op), groups)


def test_rule_matches_emulation_on_random_cases() -> None:
    rng = random.Random(20261202)
    seen = {"channels_last": 0, "contiguous": 0, "1d_cl": 0}
    for i in range(1500):
        x, w, p = _random_case(rng)
        got, want = rule(x, w, p), emulate(x, w, p)
        assert got == want, (
            f"case {i}: x {list(x.shape)}/{list(x.stride())} w {list(w.shape)}/{list(w.stride())} {p}: "
            f"rule {got} != emulation {want}"
        )
        sizes, strides = got
        if sizes and 0 not in sizes and strides != contiguous_strides(sizes):
            seen["1d_cl" if w.dim() == 3 else "channels_last"] += 1
        else:
            seen["contiguous"] += 1
    assert min(seen.values()) > 20, seen  # the sweep exercises both outcomes and the 1-D weight case


# ---------------------------------------------------------------------------------------------------------
# The helpers the generated C++ header mirrors
# ---------------------------------------------------------------------------------------------------------
def test_is_channels_last_strides_matches_c10() -> None:
    rng = random.Random(7)
    for _ in range(400):
        rank = rng.choice([4, 5])
        shape = [rng.choice([0, 1, 1, 2, 3]) for _ in range(rank)]
        t = _random_layout(rng, shape, torch.float32)
        w = torch.empty([1] * rank)
        c10 = _suggests_channels_last(t, w) != torch.contiguous_format if 0 not in shape else None
        mine = is_channels_last_strides(list(t.shape), list(t.stride()))
        if c10 is not None:
            assert mine == c10, (list(t.shape), list(t.stride()))
        else:
            assert mine is False


def test_stride_helpers_match_torch() -> None:
    for shape in ([2, 3, 4, 5], [0, 3, 4, 5], [2, 0, 1, 5], [1, 1, 1, 1], [2, 3, 4, 5, 6], [2, 0, 3, 1, 2]):
        assert contiguous_strides(shape) == list(torch.empty(shape).stride())
        fmt = CL if len(shape) == 4 else CL3
        if 0 not in shape:
            assert channels_last_strides(shape) == list(torch.empty(shape, memory_format=fmt).stride())


# ---------------------------------------------------------------------------------------------------------
# The op: fake (meta) implementation and CPU body allocate with the rule
# ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("case", EXPECTED, ids=[c[0] for c in EXPECTED])
def test_fake_and_cpu_bodies_allocate_with_the_rule(case) -> None:
    name, x, w, p, sizes, strides = case
    x = torch.randn_like(x)
    w = torch.randn_like(w)
    with FakeTensorMode() as mode:
        fx, fw = mode.from_tensor(x), mode.from_tensor(w)
        out = triton_convolution(fx, fw, None, p)
        assert (list(out.shape), list(out.stride())) == (sizes, strides), f"{name}: fake"
    xm, wm = x.to("meta"), w.to("meta")
    assert xm.stride() == x.stride()
    out = triton_convolution(xm, wm, None, p)
    assert (list(out.shape), list(out.stride())) == (sizes, strides), f"{name}: meta"
    out = triton_convolution(x, w, None, p)
    assert (list(out.shape), list(out.stride())) == (sizes, strides), f"{name}: cpu"


# ---------------------------------------------------------------------------------------------------------
# scripts/check_layout_gpu.py: its cases build, their expectations agree with the rule, sizes agree with ATen
# ---------------------------------------------------------------------------------------------------------
def test_gpu_layout_script_dry_run(tmp_path) -> None:
    import importlib.util
    import json
    import sys
    from pathlib import Path

    path = Path(__file__).resolve().parent.parent / "scripts" / "check_layout_gpu.py"
    spec = importlib.util.spec_from_file_location("check_layout_gpu", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules["check_layout_gpu"] = mod  # its dataclasses look their module up
    spec.loader.exec_module(mod)
    counted = [c for c in mod.CASES if not c.informational]
    assert len(counted) >= 50
    rules = {r for c in counted for r in c.rules}
    for needed in ("batch0", "cin0", "cl_input", "cl_weight", "cl3d_input", "cl3d_weight", "kc_weight",
                   "nlc_input", "op_ge_stride", "fp64", "unbatched", "ambiguous", "1d", "2d", "3d", "transposed",
                   "depthwise", "grouped", "dilated", "fp16", "bf16", "same"):  # fmt: skip
        assert needed in rules, needed
    argv = sys.argv
    sys.argv = ["check_layout_gpu.py", "--out", str(tmp_path), "--dry-run"]
    try:
        rc = mod.main()
    finally:
        sys.argv = argv
    summary = json.loads((tmp_path / "check_layout_gpu.json").read_text())["summary"]
    assert rc == 0 and summary["passed"] == summary["cases"] == len(counted), summary["failed"]
