"""Tail-split implicit GEMM schedules and the TMA implicit-GEMM template against ATen (TRITON_INTERPRET=1 on CPU).

Same checks as test_templates_part1 (fresh random inputs, NaN-poisoned output and scratch, every element against
an fp32 ATen reference): the tail split on small problems with forced tail geometry (the real trigger needs
more than a wave of 132 programs), and the TMA template over dims, dilation, asymmetric padding, layouts and
dtypes, its whole schedule space on one problem, its support rules and its scratch.
"""

from __future__ import annotations

import os

os.environ.setdefault("TRITON_INTERPRET", "1")

import math  # noqa: E402

import pytest  # noqa: E402
import torch  # noqa: E402
from cuda_triton.conv import ConvProblem  # noqa: E402
from cuda_triton.conv.templates import get_template  # noqa: E402
from cuda_triton.conv.templates._pad_copy import padded_extent  # noqa: E402
from cuda_triton.conv.templates._splitk import tail_options, tail_rows  # noqa: E402
from cuda_triton.conv.templates.geometry import NUM_SMS, Geometry  # noqa: E402
from cuda_triton.kernel.launch import Schedule  # noqa: E402
from test_templates_part1 import _check, _params, _run, _tensors  # noqa: E402


def _meta_problem(n, c, k, spatial, kernel, dtype="float16", **kw) -> ConvProblem:
    dims = len(spatial)
    x = torch.empty((n, c, *spatial), device="meta", dtype=getattr(torch, dtype))
    w = torch.empty((k, c, *(kernel,) * dims), device="meta", dtype=getattr(torch, dtype))
    if dims == 2:
        x = x.contiguous(memory_format=torch.channels_last)
        w = w.contiguous(memory_format=torch.channels_last)
    return ConvProblem.from_tensors(x, w, None, _params(dims, **kw))


# ---- tail split ------------------------------------------------------------------------------------------------
TAIL_CASES = [
    # (n, c, k, spatial, kernel, params, channels_last, dtype, bias, BLOCK_M, BLOCK_N, BLOCK_K, tail tiles, split)
    (2, 32, 48, (9, 11), 3, dict(pad_before=1), True, torch.float16, True, 32, 32, 16, 2, 3),
    (2, 32, 48, (9, 11), 3, dict(pad_before=1), False, torch.float32, False, 32, 32, 16, 1, 4),
    (1, 24, 40, (70,), 5, dict(pad_before=4, pad_after=2, dilation=2), False, torch.bfloat16, True, 16, 16, 16, 3, 2),
    (1, 16, 16, (3, 4, 5), 3, dict(pad_before=1), True, torch.float16, False, 16, 16, 16, 1, 5),
    (1, 3, 32, (15, 16), 7, dict(stride=2, pad_before=3), True, torch.float16, True, 32, 32, 32, 1, 3),  # FLAT_K
]  # fmt: skip


@pytest.mark.parametrize("case", TAIL_CASES, ids=[f"tail-{i}" for i in range(len(TAIL_CASES))])
def test_tail_split_matches_aten(case) -> None:
    n, c, k, spatial, kernel, kw, cl, dtype, bias, bm, bn, bk, tail_m, split = case
    p = _params(len(spatial), **kw)
    x, w, b = _tensors(n, c, k, spatial, kernel, 1, dtype, cl, bias, seed=31)
    t = get_template("implicit_gemm")
    problem = ConvProblem.from_tensors(x, w, b, p)
    d = t.heuristic_schedule(problem).as_dict()
    d.pop("SPLIT_K", None)
    d.pop("CL_COPY", None)
    d.update(BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, ROW_TILES=0, TAIL_M_TILES=tail_m, TAIL_SPLIT=split)
    s = Schedule.from_dict(d)
    g = Geometry.of(problem)
    row0, rows = tail_rows(g, bm, tail_m)
    assert 0 < rows <= tail_m * bm and row0 + rows == g.m
    (ws,) = t.scratch(problem, s)
    assert ws.role == "workspace" and ws.sizes == (split, rows, k)
    launches = t.launches(problem, s)
    assert [launch.name for launch in launches] == ["conv_implicit_gemm_kernel", "splitk_reduce_kernel"]
    m_tiles, n_tiles = math.ceil(g.m / bm), math.ceil(k / bn)
    assert launches[0].grid == ((m_tiles + tail_m * (split - 1)) * n_tiles, 1, 1)
    out, cand = _run(x, w, b, p, "implicit_gemm", s)
    assert cand.schedule == s
    _check(out, x, w, b, p)


def test_tail_options_and_heuristic() -> None:
    t = get_template("implicit_gemm")
    # deeplab's dilated 3x3 at batch 4 on a 65x65 map: M = 16900 = 132 * 128 + 4. 128x256 tiles: one whole wave
    # and one tile left over, which the heuristic splits along K.
    deeplab = _meta_problem(4, 512, 512, (65, 65), 3, pad_before=2, dilation=2)
    g = Geometry.of(deeplab)
    assert g.m == NUM_SMS * 128 + 4
    assert tail_options(g, 128, 2, 72) == [(1, 16)]
    h = t.heuristic_schedule(deeplab)
    assert (h["BLOCK_M"], h["BLOCK_N"], h["TAIL_M_TILES"], h["TAIL_SPLIT"]) == (128, 256, 1, 16)
    assert h in t.schedules(deeplab)
    # Tiles that fill their last wave well, or fewer than a wave of them, never split a tail.
    assert tail_options(g, 64, 4, 72) == [] or tail_options(g, 64, 4, 72)[0][1] >= 2
    resnet = _meta_problem(8, 64, 64, (56, 56), 3, pad_before=1)  # 25088 rows: 196 tiles of 128 -> 1.5 waves
    assert all("TAIL_SPLIT" not in dict(s.params) for s in t.schedules(resnet))
    small = _meta_problem(1, 64, 64, (14, 14), 3, pad_before=1)
    assert all("TAIL_SPLIT" not in dict(s.params) for s in t.schedules(small))
    # A short reduction keeps its last wave (the lone tiles are cheap): the heuristic does not split it.
    short = _meta_problem(4, 16, 256, (65, 65), 3, pad_before=1)
    assert "TAIL_SPLIT" not in dict(t.heuristic_schedule(short).params)


# ---- TMA implicit GEMM -----------------------------------------------------------------------------------------
TMA_CASES = [
    # (n, c, k, spatial, kernel, params, channels_last, dtype, bias)
    (2, 16, 24, (9, 11), 3, dict(pad_before=1), True, torch.float16, True),
    (1, 24, 40, (7, 13), (3, 5), dict(pad_before=(2, 0), pad_after=(1, 3), dilation=(2, 1)), False, torch.float16, False),
    (2, 8, 16, (30,), 7, dict(pad_before=3), False, torch.bfloat16, True),
    (1, 16, 8, (4, 5, 6), 3, dict(pad_before=1, dilation=(1, 2, 1)), True, torch.float16, False),
    (1, 40, 72, (6, 20), (2, 2), dict(pad_before=0, pad_after=1), True, torch.bfloat16, True),  # "same" even kernel
    (3, 8, 16, (12, 5), (1, 3), dict(pad_before=(0, 1), pad_after=(0, 2)), False, torch.bfloat16, False),
]  # fmt: skip


@pytest.mark.parametrize("case", TMA_CASES, ids=[f"tma-{i}" for i in range(len(TMA_CASES))])
def test_tma_template_matches_aten(case) -> None:
    n, c, k, spatial, kernel, kw, cl, dtype, bias = case
    p = _params(len(spatial), **kw)
    x, w, b = _tensors(n, c, k, spatial, kernel, 1, dtype, cl, bias, seed=37)
    t = get_template("implicit_gemm_tma")
    problem = ConvProblem.from_tensors(x, w, b, p)
    assert t.supports(problem), t.supports(problem).reason
    s = t.heuristic_schedule(problem)
    (pad,) = t.scratch(problem, s)
    dp, hp, wp = padded_extent(Geometry.of(problem))
    assert pad.role == "input_pad" and pad.sizes == (n, dp * hp * wp, c)
    assert [launch.name for launch in t.launches(problem, s)] == [
        "to_padded_channels_last_kernel",
        "conv_tma_implicit_gemm_kernel",
    ]
    out, cand = _run(x, w, b, p, "implicit_gemm_tma")
    assert cand.template.name == "implicit_gemm_tma"
    _check(out, x, w, b, p)


def test_tma_every_schedule() -> None:
    p = _params(2, pad_before=(1, 2), pad_after=(2, 1), dilation=(1, 2))
    x, w, b = _tensors(1, 32, 48, (6, 9), 3, 1, torch.float16, True, True, seed=41)
    t = get_template("implicit_gemm_tma")
    problem = ConvProblem.from_tensors(x, w, b, p)
    space = t.schedules(problem)
    assert len(space) == len(set(space)) >= 3 and t.heuristic_schedule(problem) in space
    for s in space:
        out, cand = _run(x, w, b, p, "implicit_gemm_tma", s)
        assert cand.schedule == s
        _check(out, x, w, b, p)


def test_tma_support_rules() -> None:
    t = get_template("implicit_gemm_tma")
    assert t.supports(_meta_problem(1, 64, 64, (16, 16), 3, pad_before=1))
    x = torch.empty((1, 64, 16, 16), device="meta", dtype=torch.float16)
    w = torch.empty((64, 16, 3, 3), device="meta", dtype=torch.float16)
    refusals = {
        "stride 1": _meta_problem(1, 64, 64, (16, 16), 3, stride=2, pad_before=1),
        "groups": ConvProblem.from_tensors(x, w, None, _params(2, pad_before=1, groups=4)),
        "16 bytes": _meta_problem(1, 12, 64, (16, 16), 3, pad_before=1),  # 12 fp16 channels = 24-byte rows
        # fp32 TMA kernels miscomputed on the H200 (Triton 3.6): fp32 runs the implicit GEMM instead
        "float32": _meta_problem(8, 256, 256, (28, 28), 3, dtype="float32", pad_before=1),
    }
    for words, problem in refusals.items():
        verdict = t.supports(problem)
        assert not verdict and words in verdict.reason, (words, verdict.reason)


def test_tma_kernel_makes_descriptors_on_device() -> None:
    """The kernel builds its TMA descriptors on the device (global scratch), so the C++ runtime needs no
    cuTensorMapEncode; compiled for sm_90 it uses TMA copies, for sm_80 ordinary loads."""
    from cuda_triton.kernel.aot import compile_launches

    t = get_template("implicit_gemm_tma")
    problem = _meta_problem(2, 64, 128, (20, 20), 3, pad_before=1)
    launch = t.launches(problem, t.heuristic_schedule(problem))[1]
    (sm90,) = compile_launches([launch], 90)
    (sm80,) = compile_launches([launch], 80)
    assert sm90.global_scratch_size >= 2 * 128 and "cp.async.bulk.tensor" in sm90.ptx
    assert sm80.global_scratch_size == 0 and "cp.async.bulk.tensor" not in sm80.ptx


def test_padded_extent() -> None:
    # Padding after may be smaller than before (an asymmetric "same"): the padded copy keeps every source pixel
    # and every position the last output's taps read.
    g = Geometry.of(_meta_problem(1, 16, 16, (10, 10), 3, pad_before=2, pad_after=0))
    assert padded_extent(g) == (1, 12, 12) and g.out_spatial == (1, 10, 10)
    g = Geometry.of(_meta_problem(1, 16, 16, (10, 10), 3, pad_before=1, dilation=3))
    assert padded_extent(g) == (1, 12, 12) and g.out_spatial == (1, 6, 6)
