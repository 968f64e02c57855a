"""The Gluon box implicit GEMM (templates/implicit_gemm_box/): its twin against ATen, its box tiling, and its cubins.

On CPU the Triton interpreter runs the launch's Triton-language twin (Gluon has no interpreter) with the same
grid, constexprs and prepared weight as the Gluon kernel, into NaN-poisoned outputs, every element checked
against an fp32 ATen reference. The Gluon kernel itself is compiled here for sm_90 (4-D TMA copies, wgmma
reading shared memory) and checked against ATen on the GPU (scripts/gpu_numerics.py --families implicit_gemm_box).
"""

from __future__ import annotations

import os

os.environ.setdefault("TRITON_INTERPRET", "1")

import re  # noqa: E402

import pytest  # noqa: E402
import torch  # noqa: E402
from cuda_triton.conv import ConvProblem  # noqa: E402
from cuda_triton.conv.op import reference_convolution  # noqa: E402
from cuda_triton.conv.templates import get_template  # noqa: E402
from cuda_triton.conv.templates.geometry import Geometry  # noqa: E402
from cuda_triton.conv.templates.implicit_gemm_box.boxes import box_shapes, box_waste  # noqa: E402
from cuda_triton.kernel.aot import compile_cache_key, compile_launches  # noqa: E402
from test_gemm_templates import _check, _params, _run, _tensors  # noqa: E402

BOX = "implicit_gemm_box"

CASES = [
    # (n, c, k, spatial, kernel, params, channels_last, dtype, bias)
    (2, 16, 24, (9, 11), 3, dict(pad_before=1), True, torch.float16, True),
    (1, 24, 40, (7, 13), (3, 5), dict(pad_before=(2, 0), pad_after=(1, 3), dilation=(2, 1)), False, torch.float16, False),
    (2, 8, 16, (30,), 7, dict(pad_before=3), False, torch.bfloat16, True),
    (1, 40, 72, (6, 20), (2, 2), dict(pad_before=0, pad_after=1), True, torch.bfloat16, True),  # "same" even kernel
    (3, 8, 16, (12, 5), (1, 3), dict(pad_before=(0, 1), pad_after=(0, 2)), False, torch.bfloat16, False),
    (3, 72, 20, (5, 6), 1, dict(), True, torch.float16, True),  # 1x1, channels past a 64-block, batch tail
]  # fmt: skip


def _meta(n, c, k, spatial, kernel, dtype="float16", cl=True, **kw) -> ConvProblem:
    dims = len(spatial)
    x = torch.empty((n, c, *spatial), device="meta", dtype=getattr(torch, dtype))
    w = torch.empty((k, c, *(kernel,) * dims), device="meta", dtype=getattr(torch, dtype))
    if dims == 2 and cl:
        x = x.contiguous(memory_format=torch.channels_last)
    return ConvProblem.from_tensors(x, w, None, _params(dims, **kw))


@pytest.mark.parametrize("case", CASES, ids=[f"box-{i}" for i in range(len(CASES))])
def test_box_template_matches_aten(case) -> None:
    n, c, k, spatial, kernel, kw, cl, dtype, bias = case
    p = _params(len(spatial), **kw)
    x, w, b = _tensors(n, c, k, spatial, kernel, 1, dtype, cl, bias, seed=53)
    t = get_template(BOX)
    problem = ConvProblem.from_tensors(x, w, b, p)
    assert t.supports(problem), t.supports(problem).reason
    s = t.heuristic_schedule(problem)
    in_cl = Geometry.of(problem).in_cl
    names = [launch.name for launch in t.launches(problem, s)]
    assert names == (["conv_box_kernel"] if in_cl else ["to_channels_last_kernel", "conv_box_kernel"])
    out, cand = _run(x, w, b, p, BOX)
    assert cand.template.name == BOX
    _check(out, x, w, b, p)


def test_box_every_schedule() -> None:
    p = _params(2, pad_before=(1, 2), pad_after=(2, 1), dilation=(1, 2))
    x, w, b = _tensors(2, 32, 48, (6, 9), 3, 1, torch.float16, True, True, seed=59)
    t = get_template(BOX)
    problem = ConvProblem.from_tensors(x, w, b, p)
    space = t.schedules(problem)
    assert len(space) == len(set(space)) >= 6 and t.heuristic_schedule(problem) in space
    for s in space:
        out, cand = _run(x, w, b, p, BOX, s)
        assert cand.schedule == s
        _check(out, x, w, b, p)


def test_box_shapes_tile_the_output() -> None:
    # vgg.3x3.256: 8 images of 56 x 56 -> 8 x 8 pixel boxes tile exactly; two images per 128-row box.
    g = Geometry.of(_meta(8, 256, 256, (56, 56), 3, pad_before=1))
    assert box_shapes(g, 128)[0] == (2, 8, 8) and box_waste(g, (2, 8, 8)) == 1.0
    # A 1-D conv: one row per image, boxes run along the sequence.
    g = Geometry.of(_meta(2, 64, 64, (1000,), 3, pad_before=1))
    assert box_shapes(g, 128)[0] == (1, 1, 128)
    # A 7 x 7 map at batch 32: 8 x 8 boxes waste 31%, a box of two whole images...does not exist; the best wastes
    # less than an 8 x 8 one.
    g = Geometry.of(_meta(32, 512, 512, (7, 7), 3, pad_before=1))
    best = box_shapes(g, 128)[0]
    assert box_waste(g, best) <= box_waste(g, (2, 8, 8))
    for shapes in (box_shapes(g, 128), box_shapes(g, 64)):
        assert shapes and all(bn * bh * bw in (64, 128) and max(bn, bh, bw) <= 256 for bn, bh, bw in shapes)


def test_box_support_rules() -> None:
    t = get_template(BOX)
    assert t.supports(_meta(1, 64, 64, (16, 16), 3, pad_before=1))
    assert t.supports(_meta(1, 64, 64, (16, 16), 3, pad_before=1, cl=False))  # copied to channels-last first
    assert t.supports(_meta(1, 64, 64, (100,), 5, pad_before=2, dtype="bfloat16"))
    assert t.supports(_meta(32, 64, 128, (56, 56), 3, stride=2, pad_before=1))  # r18.l2: the strided view
    x = torch.empty((1, 64, 16, 16), device="meta", dtype=torch.float16)
    w = torch.empty((64, 16, 3, 3), device="meta", dtype=torch.float16)
    refusals = {
        "divisible by the stride": _meta(1, 64, 64, (15, 16), 3, stride=2, pad_before=1),
        "C_in % 16": _meta(1, 24, 64, (16, 16), 3, stride=2, pad_before=1),
        "groups": ConvProblem.from_tensors(x, w, None, _params(2, pad_before=1, groups=4)),
        "16 bytes": _meta(1, 12, 64, (16, 16), 3, pad_before=1),  # 12 fp16 channels = 24-byte rows
        "TF32": ConvProblem.from_tensors(  # exact fp32: no fp16 copy may stand in for it
            torch.empty((1, 64, 8, 8), device="meta"),
            torch.empty((64, 64, 3, 3), device="meta"),
            None,
            _params(2, pad_before=1),
            allow_tf32=False,
        ),
        "16 bytes (input channels, 16-bit)": _meta(1, 12, 64, (16, 16), 3, dtype="float32", pad_before=1),
        "3-D": _meta(1, 64, 64, (4, 8, 8), 3, pad_before=1),
    }
    for words, problem in refusals.items():
        verdict = t.supports(problem)
        assert not verdict and words in verdict.reason, (words, verdict.reason)


STRIDED_CASES = [
    # (n, c, k, spatial, kernel, params, channels_last, dtype, bias): parities of rows and columns, padding that
    # reaches a row before the image, odd padding, dilation with stride, 1-D, and C_in not a power of two
    (2, 32, 24, (10, 12), 3, dict(stride=2, pad_before=1), True, torch.float16, True),
    (1, 16, 40, (8, 12), (3, 5), dict(stride=(2, 3), pad_before=(1, 3), pad_after=(0, 1)), False, torch.bfloat16, False),
    (2, 48, 16, (12, 8), 3, dict(stride=2, pad_before=2, dilation=2), True, torch.float16, True),
    (2, 16, 16, (40,), 4, dict(stride=4, pad_before=0), False, torch.bfloat16, True),
    (3, 16, 20, (4, 6), 1, dict(stride=2), True, torch.float16, False),  # 1x1 strided (a downsample)
    (1, 32, 32, (6, 8), 2, dict(stride=2), True, torch.float32, True),  # fp32 on the scaled fp16 copy
]  # fmt: skip


@pytest.mark.parametrize("case", STRIDED_CASES, ids=[f"strided-{i}" for i in range(len(STRIDED_CASES))])
def test_box_strided_matches_aten(case) -> None:
    """Strided convs through the 5-D view (module docstring): the twin with the strided tap offsets, against
    ATen, on every schedule the template offers for the case."""
    n, c, k, spatial, kernel, kw, cl, dtype, bias = case
    p = _params(len(spatial), **kw)
    x, w, b = _tensors(n, c, k, spatial, kernel, 1, dtype, cl, bias, seed=61)
    t = get_template(BOX)
    problem = ConvProblem.from_tensors(x, w, b, p, allow_tf32=dtype == torch.float32)
    assert t.supports(problem), t.supports(problem).reason
    g = Geometry.of(problem)
    for s in t.schedules(problem)[:4]:
        assert g.cin % s["BLOCK_K"] == 0  # whole channel blocks: none reaches the next parity's channels
        out, cand = _run(x, w, b, p, BOX, s, exact=dtype != torch.float32)
        assert cand.schedule == s
        if dtype == torch.float32:
            from test_f16_mma import _check_tf32_accuracy

            _check_tf32_accuracy(out, x, w, b, p)
        else:
            _check(out, x, w, b, p)


def _tma_box(view: torch.Tensor, coords: list[int], box: list[int]) -> torch.Tensor:
    """What a TMA tiled copy of ``box`` at ``coords`` reads from ``view``: zeros wherever an index leaves its dim."""
    out = torch.zeros(box, dtype=view.dtype)
    src = [slice(max(c, 0), min(c + b, size)) for c, b, size in zip(coords, box, view.shape, strict=True)]
    dst = [slice(s.start - c, s.stop - c) for s, c in zip(src, coords, strict=True)]
    if all(s.stop > s.start for s in src):
        out[tuple(dst)] = view[tuple(src)]
    return out


@pytest.mark.parametrize(
    "sh,sw,ph,pw,dh,dw,kh,kw", [(2, 2, 1, 1, 1, 1, 3, 3), (2, 3, 0, 4, 2, 1, 2, 4), (1, 2, 3, 2, 1, 2, 5, 3)]
)
def test_box_strided_view_coordinates(sh, sw, ph, pw, dh, dw, kh, kw) -> None:
    """The Gluon kernel's strided tap coordinates (`_issue_box_loads`, written out here the same way) read, from
    the view [N, H/SH, SH, W/SW, SW*C] with TMA's zero fill, exactly the input pixels of a strided conv tap."""
    n, h, w, c, bk = 2, 6 * sh, 5 * sw, 32, 16
    x = torch.randn(n, h, w, c)
    view = x.as_strided((n, h // sh, sh, w // sw, sw * c), (h * w * c, sh * w * c, w * c, sw * c, 1))
    oh_n, ow_n = (h + 2 * ph - dh * (kh - 1) - 1) // sh + 1, (w + 2 * pw - dw * (kw - 1) - 1) // sw + 1
    off_h, off_w = -(-ph // sh) * sh, -(-pw // sw) * sw
    box_n, box_h, box_w = 2, 4, 4
    for oh0 in range(0, oh_n, box_h):
        for ow0 in range(0, ow_n, box_w):
            for tap in range(kh * kw):
                for c0 in range(0, c, bk):
                    dh_ = (tap // kw) * dh - ph + off_h
                    dw_ = (tap % kw) * dw - pw + off_w
                    coords = [0, oh0 + dh_ // sh - off_h // sh, dh_ % sh, ow0 + dw_ // sw - off_w // sw]
                    coords.append(dw_ % sw * c + c0)
                    got = _tma_box(view, coords, [box_n, box_h, 1, box_w, bk])[:, :, 0]
                    want = torch.zeros(box_n, box_h, box_w, bk)
                    for j in range(box_h):
                        for k in range(box_w):
                            ih = (oh0 + j) * sh + (tap // kw) * dh - ph
                            iw = (ow0 + k) * sw + (tap % kw) * dw - pw
                            if 0 <= ih < h and 0 <= iw < w:
                                want[:, j, k] = x[:, ih, iw, c0 : c0 + bk]
                    assert torch.equal(got, want), (oh0, ow0, tap, c0)


def test_box_strided_is_not_borrowed() -> None:
    """A strided conv runs the box template only from its own (measured) table entry: the fallback refuses."""
    t = get_template(BOX)
    strided = _meta(32, 64, 128, (56, 56), 3, stride=2, pad_before=1)
    assert not t.transfers_to(t.heuristic_schedule(strided), strided)


F32_CASES = [
    # (n, c, k, spatial, kernel, params, channels_last, bias, input scale, weight scale): outside fp16's range
    (2, 16, 24, (9, 11), 3, dict(pad_before=1), True, True, 1e6, 1.0),
    (1, 24, 40, (7, 13), (3, 5), dict(pad_before=(2, 0), pad_after=(1, 3), dilation=(2, 1)), False, False, 1e-4, 30.0),
    (2, 8, 16, (30,), 7, dict(pad_before=3), False, True, 1.0, 1e-5),
]  # fmt: skip


@pytest.mark.parametrize("case", F32_CASES, ids=[f"f32-{i}" for i in range(len(F32_CASES))])
def test_box_fp32_runs_on_the_scaled_fp16_copy(case) -> None:
    """fp32 with TF32 allowed: the partial maxima, the scaled fp16 copy (channels-last, transposing a contiguous
    input), the 16-bit kernel on it, the scales undone in the epilogue; TF32's accuracy (test_f16_mma's bound)."""
    from test_f16_mma import _check_tf32_accuracy

    n, c, k, spatial, kernel, kw, cl, bias, xs, ws = case
    p = _params(len(spatial), **kw)
    x, w, b = _tensors(n, c, k, spatial, kernel, 1, torch.float32, cl, bias, seed=61)
    x, w = x * xs, w * ws
    t = get_template(BOX)
    problem = ConvProblem.from_tensors(x, w, b, p, allow_tf32=True)
    assert t.supports(problem), t.supports(problem).reason
    s = t.heuristic_schedule(problem)
    assert s["F16_MMA"] == 2 and any(x["F16_MMA"] == 2 for x in t.schedules(problem))
    assert {x.role for x in t.scratch(problem, s)} == {"amax", "input_f16"}
    copy = "scale_to_f16_kernel" if Geometry.of(problem).in_cl else "to_channels_last_kernel"
    assert [launch.name for launch in t.launches(problem, s)] == [
        "amax_partial_kernel",
        copy,
        "conv_box_kernel",
    ]
    out, cand = _run(x, w, b, p, BOX, s, exact=False)
    assert cand.schedule == s and out.dtype == torch.float32
    _check_tf32_accuracy(out, x, w, b, p)


TF32_CASES = F32_CASES + [
    # strided (the 5-D view) and a 1x1, channels-last
    (2, 16, 32, (12, 10), 3, dict(stride=2, pad_before=1), True, True, 1.0, 1.0),
    (1, 32, 8, (6, 8), 1, dict(), True, False, 3.0, 0.5),
]  # fmt: skip


@pytest.mark.parametrize("case", TF32_CASES, ids=[f"tf32-{i}" for i in range(len(TF32_CASES))])
def test_box_tf32_schedules_round_to_nearest(case) -> None:
    """fp32 with TF32, the TF32 schedules (no F16_MMA key): fp32 boxes, the K-major weight, the A tile rounded to
    the nearest TF32 in the kernel. The result is the exact conv of the TF32-rounded operands up to fp32
    accumulation (truncated operands would miss that bound by ~2^-11 of each product)."""
    from cuda_triton.conv.tf32 import round_to_tf32

    n, c, k, spatial, kernel, kw, cl, bias, xs, ws = case
    p = _params(len(spatial), **kw)
    x, w, b = _tensors(n, c, k, spatial, kernel, 1, torch.float32, cl, bias, seed=67)
    x, w = x * xs, w * ws
    t = get_template(BOX)
    problem = ConvProblem.from_tensors(x, w, b, p, allow_tf32=True)
    tf32 = [s for s in t.schedules(problem) if "F16_MMA" not in dict(s.params)]
    assert tf32 and all(s["BLOCK_K"] <= 32 for s in tf32)
    in_cl = Geometry.of(problem).in_cl
    rounded = reference_convolution(round_to_tf32(x).double(), round_to_tf32(w).double(), None, p)
    if b is not None:
        rounded = rounded + b.double().reshape(1, -1, *([1] * len(spatial)))
    magnitude = reference_convolution(x.double().abs(), w.double().abs(), None, p)
    tol = 2.0**-20 * magnitude + 2.0**-22 * rounded.abs() + 1e-300
    for s in tf32[:2]:
        names = [launch.name for launch in t.launches(problem, s)]
        assert names == (["conv_box_kernel"] if in_cl else ["to_channels_last_kernel", "conv_box_kernel"])
        assert not t.scratch(problem, s) if in_cl else {x.role for x in t.scratch(problem, s)} == {"input_cl"}
        out, cand = _run(x, w, b, p, BOX, s, exact=False)
        assert cand.schedule == s and out.dtype == torch.float32
        err = (out.double() - rounded).abs()
        assert not (~(err <= tol)).any(), f"worst ratio {float((err / tol).max()):.3g}"


def test_box_fp32_needs_tf32() -> None:
    """Exact fp32 (TF32 off) has no wgmma: the box template refuses it; with TF32 allowed but fp16 tensor cores
    switched off (tf32_on_fp16=0) only the TF32 schedules remain."""
    from cuda_triton.conv.templates._f16_mma import f16_mma_policy

    x, w, _ = _tensors(1, 16, 16, (8, 8), 3, 1, torch.float32, True, False, seed=71)
    p = _params(2, pad_before=1)
    t = get_template(BOX)
    assert not t.supports(ConvProblem.from_tensors(x, w, None, p, allow_tf32=False))
    problem = ConvProblem.from_tensors(x, w, None, p, allow_tf32=True)
    with f16_mma_policy(False):
        assert t.supports(problem)
        space = t.schedules(problem)
        assert space and all("F16_MMA" not in dict(s.params) for s in space)
        assert "F16_MMA" not in dict(t.heuristic_schedule(problem).params)


def test_box_cubins_per_arch() -> None:
    """sm_90 compiles the Gluon kernel: 4-D TMA boxes and wgmma with both operands in shared memory (descriptor
    registers, not fragments), descriptors made on the device. sm_80 compiles the twin, with the same
    parameters. The compile key follows the kernel each arch compiles."""
    t = get_template(BOX)
    problem = _meta(8, 256, 256, (56, 56), 3, pad_before=1)
    (launch,) = t.launches(problem, t.heuristic_schedule(problem))
    (sm90,) = compile_launches([launch], 90)
    (sm80,) = compile_launches([launch], 80)
    assert sm90.name.startswith("conv_box_kernel") and sm80.name.startswith("conv_box_portable_kernel")
    assert "cp.async.bulk.tensor.4d" in sm90.ptx and sm90.global_scratch_size >= 2 * 128
    operands = re.findall(r"wgmma\.mma_async[^\n]*\}, (%\w+), (%\w+),", sm90.ptx)
    assert operands and all(a.startswith("%rd") and b.startswith("%rd") for a, b in operands)
    assert "cp.async.bulk.tensor" not in sm80.ptx and "wgmma" not in sm80.ptx
    assert sm90.param_types == sm80.param_types
    assert compile_cache_key(launch, 90) != compile_cache_key(launch, 80)
    # WS=1: a copy warp (its own warpgroup, registers handed back with setmaxnreg) beside the wgmma warps
    (ws,) = [s for s in t.schedules(problem) if dict(s.params).get("WS") and s.num_stages == 4][:1]
    (ws_sm90,) = compile_launches(t.launches(problem, ws), 90)
    assert ws_sm90.num_warps == ws.num_warps + 4 and "setmaxnreg" in ws_sm90.ptx
    assert "cp.async.bulk.tensor.4d" in ws_sm90.ptx and "mbarrier.arrive" in ws_sm90.ptx
    # 128 x 256 on two wgmma warpgroups: 12 warps, so at most 168 registers a thread at launch (65536 / 384)
    (ws8,) = [s for s in t.schedules(problem) if dict(s.params).get("WS") and s.num_warps == 8][:1]
    (ws8_launch,) = t.launches(problem, ws8)
    (ws8_sm90,) = compile_launches([ws8_launch], 90)
    assert ws8_launch.maxnreg == 168 and ws8_sm90.num_warps == 12 and ".maxnreg 168" in ws8_sm90.ptx
    (ws8_sm80,) = compile_launches([ws8_launch], 80)  # the twin: no register cap
    assert ws8_sm80.num_warps == 8 and ".maxnreg" not in ws8_sm80.ptx
    # fp32 (F16_MMA=2): the same kernel on the fp16 copy, fp32 bias and output, the scales' pointer
    f32 = _meta(8, 256, 256, (56, 56), 3, dtype="float32", pad_before=1)
    *_, f32_launch = t.launches(f32, t.heuristic_schedule(f32))
    (f32_sm90,) = compile_launches([f32_launch], 90)
    assert (
        "cp.async.bulk.tensor.4d" in f32_sm90.ptx
        and "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16" in f32_sm90.ptx
    )
    # fp32 as TF32 (r18.l1 at batch 1): fp32 boxes, the A tile rounded in place in shared memory (a proxy fence
    # and a barrier before wgmma), both operands from shared memory, one wgmma group kept in flight
    tf32 = _meta(1, 64, 64, (56, 56), 3, dtype="float32", pad_before=1)
    tf32_s = next(s for s in t.schedules(tf32) if "F16_MMA" not in dict(s.params))
    (tf32_launch,) = t.launches(tf32, tf32_s)
    (tf32_sm90,) = compile_launches([tf32_launch], 90)
    ops = re.findall(r"wgmma\.mma_async[^\n]*tf32\.tf32 \{[^}]*\}, (%\w+), (%\w+),", tf32_sm90.ptx)
    assert ops and all(a.startswith("%rd") and b.startswith("%rd") for a, b in ops)
    assert "fence.proxy.async" in tf32_sm90.ptx and "bar.sync" in tf32_sm90.ptx
    assert "cp.async.bulk.tensor.4d" in tf32_sm90.ptx and "wgmma.wait_group.sync.aligned 1" in tf32_sm90.ptx
    assert "cvt.rna.tf32.f32" in tf32_sm90.ptx or os.environ.get("TRITON_INTERPRET") == "1"
    (tf32_sm80,) = compile_launches([tf32_launch], 80)
    assert tf32_sm80.name.startswith("conv_box_portable_kernel")
    # strided (r18.l2.3x3s2): 5-D boxes of the view [N, H/2, 2, W/2, 2C], both operands still in shared memory
    strided = _meta(32, 64, 128, (56, 56), 3, stride=2, pad_before=1)
    (strided_launch,) = t.launches(strided, t.heuristic_schedule(strided))
    (strided_sm90,) = compile_launches([strided_launch], 90)
    assert "cp.async.bulk.tensor.5d" in strided_sm90.ptx and "cp.async.bulk.tensor.4d" not in strided_sm90.ptx
    operands = re.findall(r"wgmma\.mma_async[^\n]*\}, (%\w+), (%\w+),", strided_sm90.ptx)
    assert operands and all(a.startswith("%rd") and b.startswith("%rd") for a, b in operands)


def test_box_claims_deep_3x3_channels_last_16bit() -> None:
    """Without a table entry, dense 16-bit 3x3 stride-1 convs with C_in >= 128 on channels-last maps of 28 x 28 or
    more run the box template (its heuristic_claims rule, from the H200 re-tune); everything else keeps the
    implicit GEMM's heuristic."""
    from cuda_triton.conv.templates import select_candidate

    claimed = [
        _meta(4, 512, 512, (28, 28), 3, pad_before=1),  # u.vgg.3x3.512
        _meta(8, 256, 256, (56, 56), 3, pad_before=1, dtype="bfloat16"),  # vgg.3x3.256
        _meta(1, 128, 64, (64, 96), 5, pad_before=2),
    ]
    kept = [
        _meta(4, 512, 512, (28, 28), 3, pad_before=1, cl=False),  # contiguous input
        _meta(4, 512, 512, (28, 28), 3, pad_before=2, dilation=2),  # dilated
        _meta(32, 256, 256, (14, 14), 3, pad_before=1),  # map under 28 x 28
        _meta(8, 64, 64, (56, 56), 3, pad_before=1),  # C_in < 128
        _meta(8, 256, 256, (56, 56), 3, pad_before=1, dtype="float32"),  # fp32
        _meta(8, 256, 256, (56, 56), 1),  # 1x1
        _meta(8, 256, 256, (56, 56), 3, stride=2, pad_before=1),  # strided
        _meta(2, 256, 256, (4000,), 9, pad_before=4),  # 1-D
    ]
    from cuda_triton.conv.routing_verdicts import evaluate

    t = get_template(BOX)
    for problem in claimed:
        assert t.heuristic_claims(problem)
        cand = select_candidate(problem)
        assert cand.template is t and cand.schedule == t.heuristic_schedule(problem)
        verdict = evaluate(problem)  # the planner reports the template the op runs
        assert verdict.template == BOX and verdict.schedules[0] == cand.schedule
    for problem in kept:
        assert not t.heuristic_claims(problem)
        assert select_candidate(problem).template.name != BOX


def test_box_schedules_transfer_only_where_they_fit() -> None:
    """The tuning table's nearest-signature fallback hands a neighbour's box schedule on only with the new map's
    best box and a full wave of programs."""
    from cuda_triton.conv import tuning

    t = get_template(BOX)
    tuned = _meta(4, 512, 512, (28, 96), 3, pad_before=1)  # 4 x 7 x 3 boxes x 2 channel blocks
    s = next(s for s in t.schedules(tuned) if s["BLOCK_N"] == 256)
    assert (s["BOX_N"], s["BOX_H"], s["BOX_W"]) == (1, 4, 32)
    entry = tuning.TuningEntry.from_problem(tuned, 90, BOX, s, 100.0, 130.0, 140.0)
    table = tuning.TuningTable([entry], 90)
    small = _meta(4, 512, 512, (28, 28), 3, pad_before=1)  # u.vgg.3x3.512: 56 programs of 128 x 256
    assert s in t.schedules(small) and not t.transfers_to(s, small)
    assert tuning.lookup(small, 90, table) is None
    bigger = _meta(4, 512, 512, (28, 96), 3, pad_before=2, dilation=2)
    assert t.transfers_to(s, bigger) and tuning.lookup(bigger, 90, table) == (BOX, s)
