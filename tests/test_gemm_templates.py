"""Implicit-GEMM and GEMM templates against ATen, on small shapes (TRITON_INTERPRET=1 on CPU machines).

Each case: fresh random inputs, the output pre-filled with NaN in the layout rule's strides, every element
compared with an fp32 ATen reference. fp32 cases run with exact fp32 (the interpreter's dot is plain fp32, so
TF32 tolerance would hide nothing); fp16/bf16 get their rounding tolerance.
"""

from __future__ import annotations

import os

os.environ.setdefault("TRITON_INTERPRET", "1")  # before any kernel module is imported (conftest does too)

import math  # noqa: E402

import pytest  # noqa: E402
import torch  # noqa: E402
from cuda_triton.conv import ConvParams, ConvProblem  # noqa: E402
from cuda_triton.conv.op import output_layout, reference_convolution  # noqa: E402
from cuda_triton.conv.templates import force_conv_candidate, get_template, select_candidate  # noqa: E402
from cuda_triton.conv.templates._interpreter import patch_interpreter_bf16_dot  # noqa: E402
from cuda_triton.kernel.launch import Schedule  # noqa: E402

INTERPRET = os.environ.get("TRITON_INTERPRET") == "1"
DEVICE = "cpu" if INTERPRET else "cuda"


if INTERPRET:  # the interpreter's tl.dot reads bf16 as raw integer bits (see _interpreter.py)
    patch_interpreter_bf16_dot()

# Output rounding allowance, relative. bf16 gets 2^-6: the interpreter converts fp32 -> bf16 by truncation
# (error up to 2^-7), not round-to-nearest as the GPU does (2^-8).
OUT_EPS = {
    torch.float16: 2.0**-10,
    torch.bfloat16: 2.0**-6 if INTERPRET else 2.0**-7,
    torch.float32: 2.0**-20,
}


def _params(dims, stride=1, pad_before=0, pad_after=None, dilation=1, groups=1) -> ConvParams:
    def t(v):
        return tuple(v) if isinstance(v, (tuple, list)) else (v,) * dims

    pa = pad_before if pad_after is None else pad_after
    return ConvParams(t(stride), t(pad_before), t(pa), t(dilation), False, (0,) * dims, groups)


def _tensors(n, c, k, spatial, kernel, groups, dtype, channels_last, bias, seed):
    gen = torch.Generator().manual_seed(seed)
    dims = len(spatial)
    kernel = kernel if isinstance(kernel, tuple) else (kernel,) * dims
    x = torch.randn((n, c, *spatial), generator=gen).to(dtype)
    w = (
        torch.randn((k, c // groups, *kernel), generator=gen) / math.sqrt(c // groups * math.prod(kernel))
    ).to(dtype)
    b = torch.randn((k,), generator=gen).to(dtype) if bias else None
    if channels_last and dims in (2, 3):
        fmt = torch.channels_last if dims == 2 else torch.channels_last_3d
        x, w = x.contiguous(memory_format=fmt), w.contiguous(memory_format=fmt)
    return x.to(DEVICE), w.to(DEVICE), None if b is None else b.to(DEVICE)


def _run(x, w, b, p: ConvParams, template: str | None = None, schedule: Schedule | None = None, exact=True):
    """Run like the op's CUDA body, into a NaN-poisoned output; returns (out, candidate)."""
    problem = ConvProblem.from_tensors(x, w, b, p, allow_tf32=not exact)
    if template is None:
        cand = select_candidate(problem)
    else:
        with force_conv_candidate(template, schedule):
            cand = select_candidate(problem)
    sizes, strides = output_layout(x, w, p)
    out = torch.empty_strided(sizes, strides, dtype=x.dtype, device=x.device).fill_(float("nan"))
    tensors = {
        "input": x,
        "weight": cand.template.prepare_weight(w, problem, cand.schedule),
        "bias": b,
        "output": out,
    }
    scratch = cand.allocate_scratch(problem, out.device)
    zeroed = {t.role for t in cand.template.scratch(problem, cand.schedule) if t.zeroed}
    for role, t in scratch.items():
        # the kernels must write every scratch element they read; zeroed ones (split-K tile counters) start zero
        tensors[role] = t if role in zeroed else t.fill_(float("nan"))
    for launch in cand.launches(problem):
        launch.run(tensors)
    for role in zeroed:
        assert not scratch[role].any(), f"{role}: the launches must leave a zeroed scratch tensor zero"
    return out, cand


def _check(out, x, w, b, p: ConvParams):
    ref = reference_convolution(x.float(), w.float(), None if b is None else b.float(), p)
    assert out.shape == ref.shape
    k = w.shape[1] * math.prod(w.shape[2:])
    walk = math.sqrt(k) * float(x.float().pow(2).mean().sqrt()) * float(w.float().pow(2).mean().sqrt())
    tol = OUT_EPS[x.dtype] * ref.abs() + 64 * 2.0**-24 * math.sqrt(k) * walk + 1e-6
    err = (out.float() - ref).abs()
    bad = ~(err <= tol)  # NaN (an element never written) fails too
    assert not bad.any(), (
        f"{int(bad.sum())} of {err.numel()} elements off; max error {float(err.nan_to_num(1e30).max())}"
    )


# (name, n, c, k, spatial, kernel, params kwargs, template expected)
CASES = [
    ("1d", 2, 8, 16, (37,), 3, dict(pad_before=1), "implicit_gemm"),
    (
        "1d_stride_dil_asym",
        2,
        16,
        24,
        (41,),
        5,
        dict(stride=2, dilation=3, pad_before=2, pad_after=5),
        "implicit_gemm",
    ),
    ("2d_same", 2, 16, 32, (9, 11), 3, dict(pad_before=1), "implicit_gemm"),
    ("2d_stride2", 1, 24, 16, (13, 10), 3, dict(stride=2, pad_before=1), "implicit_gemm"),
    (
        "2d_dil_asym",
        1,
        16,
        16,
        (12, 9),
        (3, 2),
        dict(dilation=(2, 3), pad_before=(2, 0), pad_after=(1, 3)),
        "implicit_gemm",
    ),
    ("2d_even_same", 2, 32, 16, (8, 8), 2, dict(pad_before=0, pad_after=1), "implicit_gemm"),
    ("2d_groups", 2, 32, 48, (7, 9), 3, dict(pad_before=1, groups=4), "implicit_gemm"),
    ("2d_groups_tiny", 1, 16, 16, (6, 7), 3, dict(pad_before=1, groups=8), "implicit_gemm"),
    ("2d_rgb_stem", 1, 3, 16, (15, 16), 7, dict(stride=2, pad_before=3), "implicit_gemm"),
    ("3d", 1, 16, 16, (4, 5, 6), 3, dict(pad_before=1), "implicit_gemm"),
    (
        "3d_temporal_stride",
        2,
        8,
        16,
        (5, 6, 4),
        (3, 1, 1),
        dict(stride=(2, 1, 1), pad_before=(1, 0, 0)),
        "implicit_gemm",
    ),
    # contiguous inputs with rows of >= 32 output pixels walk output rows (ROW_TILES)
    (
        "rows_2d_stride_pad",
        2,
        16,
        24,
        (5, 70),
        3,
        dict(stride=(1, 2), pad_before=(1, 2), pad_after=(0, 1)),
        "implicit_gemm",
    ),
    ("rows_1d_rgb_groups", 2, 6, 16, (50,), 4, dict(pad_before=3, groups=2), "implicit_gemm"),
    ("1x1", 2, 32, 48, (7, 6), 1, {}, "gemm"),
    ("1x1_stride2", 2, 16, 32, (9, 8), 1, dict(stride=2), "gemm"),
    ("1x1_1d", 2, 24, 16, (33,), 1, {}, "gemm"),
    ("patchify", 2, 3, 32, (16, 12), 4, dict(stride=4), "gemm"),
    ("patchify_3d", 1, 8, 16, (4, 4, 6), 2, dict(stride=2), "gemm"),
]
DTYPES = [torch.float32, torch.float16, torch.bfloat16]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
@pytest.mark.parametrize("channels_last", [True, False], ids=["cl", "contig"])
def test_matches_aten(case, channels_last: bool) -> None:
    name, n, c, k, spatial, kernel, kw, expected = case
    index = CASES.index(case)
    dtype = DTYPES[
        (index + channels_last) % len(DTYPES)
    ]  # every dtype on every family, each case once a layout
    bias = (index + channels_last) % 2 == 0
    p = _params(len(spatial), **kw)
    x, w, b = _tensors(n, c, k, spatial, kernel, p.groups, dtype, channels_last, bias, seed=index)
    out, cand = _run(x, w, b, p)
    assert cand.template.name == expected
    assert list(out.stride()) == list(output_layout(x, w, p)[1])
    _check(out, x, w, b, p)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: str(d).split(".")[-1])
@pytest.mark.parametrize("template", ["implicit_gemm", "gemm"])
def test_every_dtype_both_layouts_in_out(template: str, dtype: torch.dtype) -> None:
    # Contiguous input with a channels-last weight: the layout rule makes the output channels-last.
    # (a 1x1 weight's strides are ambiguous, so the GEMM case uses a 2x2 patchify weight)
    if template == "implicit_gemm":
        p, kernel = _params(2, pad_before=1), 3
    else:
        p, kernel = _params(2, stride=2), 2
    x, w, b = _tensors(2, 16, 16, (6, 8), kernel, 1, dtype, False, True, seed=7)
    w = w.contiguous(memory_format=torch.channels_last)
    out, cand = _run(x, w, b, p, template)
    assert out.is_contiguous(memory_format=torch.channels_last) and not x.is_contiguous(
        memory_format=torch.channels_last
    )
    _check(out, x, w, b, p)


def _schedule_cases():
    out = []
    for template, (n, c, k, spatial, kernel, kw) in [
        ("implicit_gemm", (1, 32, 32, (5, 7), 3, dict(pad_before=1))),
        ("implicit_gemm", (1, 32, 32, (5, 4), 3, dict(pad_before=1, groups=8))),
        ("implicit_gemm", (1, 3, 16, (7, 6), 3, dict(pad_before=1))),
        ("implicit_gemm", (1, 16, 32, (40,), 3, dict(pad_before=1))),  # contiguous 1-D: ROW_TILES
        ("gemm", (1, 32, 32, (5, 7), 1, {})),
    ]:
        p = _params(len(spatial), **kw)
        x, w, b = _tensors(n, c, k, spatial, kernel, p.groups, torch.float16, True, True, seed=3)
        problem = ConvProblem.from_tensors(x, w, b, p)
        if len(spatial) == 1:
            assert any(s["ROW_TILES"] for s in get_template(template).schedules(problem))
        for s in get_template(template).schedules(problem):
            out.append(
                pytest.param(
                    template, (n, c, k, spatial, kernel, kw), s, id=f"{template}-{p.groups}-{c}-{s.key()}"
                )
            )
    return out


@pytest.mark.parametrize("template,shape,schedule", _schedule_cases())
def test_every_schedule(template: str, shape, schedule: Schedule) -> None:
    n, c, k, spatial, kernel, kw = shape
    p = _params(len(spatial), **kw)
    x, w, b = _tensors(n, c, k, spatial, kernel, p.groups, torch.float16, True, True, seed=3)
    out, cand = _run(x, w, b, p, template, schedule)
    assert cand.schedule == schedule
    _check(out, x, w, b, p)


def test_unbatched_and_op_cpu_reference() -> None:
    # The templates see an unbatched call as a batch of one.
    p = _params(2, pad_before=1)
    x, w, b = _tensors(1, 16, 16, (6, 5), 3, 1, torch.float32, True, True, seed=11)
    problem = ConvProblem.from_tensors(x[0], w, b, p)
    assert problem.batch == 1 and get_template("implicit_gemm").supports(problem)


def test_support_reasons() -> None:
    ig, gm = get_template("implicit_gemm"), get_template("gemm")
    x, w, _ = _tensors(1, 8, 8, (6, 6), 3, 1, torch.float32, True, False, seed=0)
    p = _params(2, pad_before=1)
    assert not gm.supports(ConvProblem.from_tensors(x, w, None, p))  # padded 3x3 is not a GEMM
    x64, w64 = x.double(), w.double()
    verdict = ig.supports(ConvProblem.from_tensors(x64, w64, None, p))
    assert not verdict and "float64" in verdict.reason
    sliced = x[:, :, :, :3]  # not dense: refused with a reason
    verdict = ig.supports(ConvProblem.from_tensors(sliced, w, None, p))
    assert not verdict and "dense" in verdict.reason
    tp = ConvParams((1, 1), (0, 0), (0, 0), (1, 1), True, (0, 0), 1)
    assert not ig.supports(ConvProblem.from_tensors(x, w, None, tp))


def test_schedule_space_and_heuristics() -> None:
    for template in ("implicit_gemm", "gemm"):
        t = get_template(template)
        x, w, b = _tensors(2, 64, 64, (8, 8), 1, 1, torch.float16, True, False, seed=0)
        problem = ConvProblem.from_tensors(x, w, b, _params(2))
        space = t.schedules(problem)
        assert len(space) == len(set(space)) >= 4
        assert t.heuristic_schedule(problem) in space
        for s in space:
            assert min(s["BLOCK_M"], s["BLOCK_N"], s["BLOCK_K"]) >= 16


@pytest.mark.parametrize("template", ["implicit_gemm", "gemm", "implicit_gemm_rows"])
def test_int64_indexing_path(template: str, monkeypatch) -> None:
    # Tensors of >= 2^31 elements are too big for a CPU test; force the 64-bit index path on a small one.
    from cuda_triton.conv.templates import geometry as _geometry

    monkeypatch.setattr(_geometry, "needs_int64", lambda problem: True)
    p = _params(2, pad_before=1) if template != "gemm" else _params(2, stride=2)
    kernel = 3 if template != "gemm" else 2
    rows = template == "implicit_gemm_rows"  # contiguous input, 33-pixel rows: ROW_TILES
    template = "gemm" if template == "gemm" else "implicit_gemm"
    x, w, b = _tensors(
        2, 16, 16, (3, 33) if rows else (6, 8), kernel, 1, torch.float16, not rows, True, seed=5
    )
    out, cand = _run(x, w, b, p, template)
    if rows:
        assert cand.schedule["ROW_TILES"] == 1
    problem = ConvProblem.from_tensors(x, w, b, p)
    assert dict(cand.launches(problem)[0].constexprs)["INT64"] is True
    _check(out, x, w, b, p)


# ---- split-K ----------------------------------------------------------------------------------------------------
SPLIT_SHAPES = [
    ("implicit_gemm", (1, 256, 32, (4, 4), 3, dict(pad_before=1))),  # 3x3 on a 4x4 map: 36 K iterations
    ("implicit_gemm", (2, 128, 64, (3, 5), 3, dict(pad_before=(1, 2), pad_after=(0, 1), groups=2))),
    ("implicit_gemm", (1, 12, 32, (6, 6), 7, dict(pad_before=3))),  # FLAT_K (< 16 channels)
    ("implicit_gemm", (1, 256, 16, (9,), 3, dict(pad_before=2, dilation=2))),  # 1-D, dilated
    ("gemm", (1, 512, 48, (3, 3), 1, {})),  # 1x1 with a long K
    ("gemm", (2, 192, 40, (8, 8), 2, dict(stride=2))),  # patchify
]


@pytest.mark.parametrize(
    "template,shape", SPLIT_SHAPES, ids=[f"{t}-{i}" for i, (t, _) in enumerate(SPLIT_SHAPES)]
)
@pytest.mark.parametrize("channels_last", [True, False], ids=["cl", "contig"])
@pytest.mark.parametrize("dtype", [torch.float16, torch.float32], ids=["fp16", "fp32"])
def test_split_k_schedules_match_aten(template: str, shape, channels_last: bool, dtype) -> None:
    """Few output tiles, long K: the space offers SPLIT_K schedules; each runs (NaN-poisoned workspace and
    output) and matches ATen, bias added once, in both output layouts."""
    n, c, k, spatial, kernel, kw = shape
    p = _params(len(spatial), **kw)
    x, w, b = _tensors(n, c, k, spatial, kernel, p.groups, dtype, channels_last, True, seed=21)
    t = get_template(template)
    problem = ConvProblem.from_tensors(x, w, b, p)
    # (F16_MMA schedules, fp32 on fp16 tensor cores, have their own tests: tests/test_f16_mma.py)
    splits = [
        s
        for s in t.schedules(problem)
        if dict(s.params).get("SPLIT_K", 1) > 1 and not dict(s.params).get("F16_MMA")
    ]
    assert splits, "a few-tile, long-K problem must offer split-K schedules"
    for s in splits:
        (ws,) = [st for st in t.scratch(problem, s) if st.role == "workspace"]
        m = problem.batch * math.prod(problem.out_spatial)
        assert ws.dtype == "float32" and ws.sizes == (s["SPLIT_K"], m, k)
        (counters,) = [st for st in t.scratch(problem, s) if st.role == "tile_counters"]
        launches = t.launches(problem, s)
        assert counters.zeroed and counters.dtype == "int32"
        assert counters.sizes == (launches[-1].grid[0] * launches[-1].grid[1],)
        # one launch: the last share of each tile sums the shares (no reduction kernel)
        assert len(launches) == 1 + bool(dict(s.params).get("CL_COPY"))
        out, cand = _run(x, w, b, p, template, s)
        assert cand.schedule == s
        _check(out, x, w, b, p)


def test_split_k_heuristic_and_limits() -> None:
    ig, gm = get_template("implicit_gemm"), get_template("gemm")
    # A 7x7 map at batch 1 with 512 -> 512 channels: 1 x 8 tiles of 64x64 and 72 K iterations: split.
    x, w, b = _tensors(1, 512, 512, (7, 7), 3, 1, torch.float16, True, False, seed=0)
    small = ConvProblem.from_tensors(x, w, b, _params(2, pad_before=1))
    assert ig.heuristic_schedule(small)["SPLIT_K"] > 1
    x, w, b = _tensors(1, 1152, 192, (7, 7), 1, 1, torch.float16, True, False, seed=0)  # EfficientNet 1x1
    assert gm.heuristic_schedule(ConvProblem.from_tensors(x, w, b, _params(2)))["SPLIT_K"] > 1
    # Enough tiles already (a 56x56 map at batch 8): never split, and no workspace.
    x, w, b = _tensors(8, 64, 64, (56, 56), 3, 1, torch.float16, True, False, seed=0)
    big = ConvProblem.from_tensors(x, w, b, _params(2, pad_before=1))
    assert all(dict(s.params).get("SPLIT_K", 1) == 1 for s in ig.schedules(big))
    assert ig.scratch(big, ig.heuristic_schedule(big)) == []
    # A short reduction is not split either (each share keeps >= 4 iterations).
    x, w, b = _tensors(1, 16, 16, (4, 4), 1, 1, torch.float16, True, False, seed=0)
    tiny = ConvProblem.from_tensors(x, w, b, _params(2))
    assert all(dict(s.params).get("SPLIT_K", 1) == 1 for s in gm.schedules(tiny))


# ---- channels-last copy of a contiguous input (CL_COPY) --------------------------------------------------------
COPY_SHAPES = [
    (2, 64, 32, (5, 7), 3, dict(pad_before=1)),
    (1, 96, 48, (6, 5), 3, dict(stride=2, pad_before=(1, 0), pad_after=(0, 2), dilation=(1, 2))),
    (2, 32, 32, (3, 4, 5), 3, dict(pad_before=1, groups=2)),  # 3-D, grouped
    (1, 64, 40, (37,), 5, dict(pad_before=2, pad_after=4)),  # 1-D (ROW_TILES otherwise)
    (1, 256, 32, (4, 4), 3, dict(pad_before=1)),  # with split-K too
]


@pytest.mark.parametrize("shape", COPY_SHAPES, ids=[f"copy-{i}" for i in range(len(COPY_SHAPES))])
@pytest.mark.parametrize("dtype", [torch.float16, torch.float32], ids=["fp16", "fp32"])
def test_cl_copy_schedules_match_aten(shape, dtype) -> None:
    """A contiguous input is offered copied to channels-last first: each such schedule (NaN-poisoned scratch and
    output) matches ATen, the output written in the contiguous layout the rule gives."""
    n, c, k, spatial, kernel, kw = shape
    p = _params(len(spatial), **kw)
    x, w, b = _tensors(n, c, k, spatial, kernel, p.groups, dtype, False, True, seed=23)
    t = get_template("implicit_gemm")
    problem = ConvProblem.from_tensors(x, w, b, p)
    copies = [
        s for s in t.schedules(problem) if dict(s.params).get("CL_COPY") and not dict(s.params).get("F16_MMA")
    ]
    assert copies
    # The interpreter is slow: every tile shape once, and every split-K variant.
    seen: set[tuple[int, int]] = set()
    for s in copies:
        if (s["BLOCK_M"], s["BLOCK_N"]) in seen and "SPLIT_K" not in dict(s.params):
            continue
        seen.add((s["BLOCK_M"], s["BLOCK_N"]))
        roles = [st.role for st in t.scratch(problem, s)]
        assert roles[0] == "input_cl" and s["ROW_TILES"] == 0
        launches = t.launches(problem, s)
        assert launches[0].name == "to_channels_last_kernel"
        assert dict(launches[1].constexprs)["IN_CL"] is True
        out, _ = _run(x, w, b, p, "implicit_gemm", s)
        _check(out, x, w, b, p)


def test_cl_copy_heuristic() -> None:
    t = get_template("implicit_gemm")
    x, w, b = _tensors(2, 128, 64, (16, 16), 3, 1, torch.float16, False, False, seed=0)
    assert dict(t.heuristic_schedule(ConvProblem.from_tensors(x, w, b, _params(2, pad_before=1))).params)[
        "CL_COPY"
    ]
    # Few channels (an RGB stem, a 32-channel 1-D conv) and channels-last inputs are never copied.
    for c, cl, spatial in ((3, False, (16, 16)), (32, False, (64,)), (128, True, (16, 16))):
        x, w, b = _tensors(1, c, 16, spatial, 3, 1, torch.float16, cl, False, seed=0)
        problem = ConvProblem.from_tensors(x, w, b, _params(len(spatial), pad_before=1))
        assert "CL_COPY" not in dict(t.heuristic_schedule(problem).params)
        if cl or c < 16:
            assert all("CL_COPY" not in dict(s.params) for s in t.schedules(problem))
