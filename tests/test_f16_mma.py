"""F16_MMA schedules: fp32 convolutions at TF32 precision on fp16 tensor cores (templates/_f16_mma.py).

Under TRITON_INTERPRET=1 on CPU: the power-of-two scaling of weights and inputs (far outside fp16's range), the
partial-maximum kernel, both modes (scaled in the kernel / from a scaled fp16 copy, also fused into the
channels-last copy) against ATen with the TF32 tolerance, non-finite inputs, the heuristic's choice, scratch
and launch lists, and ahead-of-time compiles for sm_80 and sm_90.
"""

from __future__ import annotations

import os

os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest  # noqa: E402
import torch  # noqa: E402
from cuda_triton.conv import ConvProblem  # noqa: E402
from cuda_triton.conv.op import reference_convolution  # noqa: E402
from cuda_triton.conv.templates import _f16_mma, get_template  # noqa: E402
from cuda_triton.conv.tf32 import round_to_tf32  # noqa: E402
from cuda_triton.kernel.launch import Schedule, TensorArg  # noqa: E402
from test_templates_part1 import DEVICE, _params, _run, _tensors  # noqa: E402

IG = get_template("implicit_gemm")


def _problem(x, w, b, p, allow_tf32=True) -> ConvProblem:
    return ConvProblem.from_tensors(x, w, b, p, allow_tf32=allow_tf32)


def _schedule(problem: ConvProblem, mode: int, **overrides: int) -> Schedule:
    d = IG.heuristic_schedule(problem).as_dict()
    for key in ("SPLIT_K", "TAIL_SPLIT", "TAIL_M_TILES", "F16_MMA", "CL_COPY"):
        d.pop(key, None)
    if mode:
        d["F16_MMA"] = mode
    d.update(overrides)
    return Schedule.from_dict(d)


def _check_tf32_accuracy(out, x, w, b, p) -> None:
    """|out - exact| within TF32's bound: each product off by < 2^-9 of |x||w| (both operands cut to 10 bits),
    plus the fp32 output's rounding. NaN (an element never written) fails."""
    exact = reference_convolution(x.double(), w.double(), None if b is None else b.double(), p)
    magnitude = reference_convolution(x.double().abs(), w.double().abs(), None, p)
    tol = 2.0**-9 * magnitude + 2.0**-22 * exact.abs() + 1e-300
    err = (out.double() - exact).abs()
    bad = ~(err <= tol)
    assert not bad.any(), f"{int(bad.sum())} of {err.numel()} off; worst ratio {float((err / tol).max()):.3g}"


# ---- host side: the weight's scale -------------------------------------------------------------------------
def test_prepared_weight_is_scaled_fp16_with_its_shift() -> None:
    w = torch.tensor([[3.0e-7, -1.0e-9], [2.5e-7, 0.0]])
    shift = _f16_mma.weight_shift(w)
    assert 2.0**14 <= 3.0e-7 * 2.0**shift < 2.0**15  # the largest magnitude lands in [2^14, 2^15)
    prepared = _f16_mma.prepare_f16_weight(w)
    assert prepared.dtype == torch.float16 and prepared.shape == (4 + _f16_mma.WEIGHT_TRAILER,)
    assert prepared[4].item() == shift and not prepared[5:].any()
    back = prepared[:4].float() * 2.0**-shift
    assert torch.allclose(back, w.reshape(-1), rtol=2.0**-11, atol=0)  # fp16's 11 significant bits


def test_weight_shift_edge_cases() -> None:
    assert _f16_mma.weight_shift(torch.zeros(3)) == 0
    assert _f16_mma.weight_shift(torch.tensor([1.0, float("inf"), float("nan")])) == 14  # non-finite ignored
    assert _f16_mma.weight_shift(torch.tensor([2.0**100])) == -86
    assert _f16_mma.weight_shift(torch.tensor([2.0**-149])) == 126  # clamped: 2^+-shift stay normal fp32


# ---- device side: the input's partial maxima ---------------------------------------------------------------------
def test_amax_partials_ignore_non_finite_and_cover_every_element() -> None:
    gen = torch.Generator().manual_seed(3)
    x = torch.randn(2, 5, 7, 9, generator=gen) * 1e5
    x[1, 2, 3, 4] = float("inf")
    x[0, 0, 0, 0] = float("nan")
    x[1, 4, 6, 8] = -7.5e5  # the last element: the biggest finite magnitude
    w = torch.randn(3, 5, 1, 1, generator=gen)
    problem = _problem(x, w, None, _params(2))
    launch = _f16_mma.amax_launch(problem)
    amax = torch.full((int(_f16_mma.AMAX_PARTS),), float("nan"))
    launch.run({"input": x.to(DEVICE), "amax": amax.to(DEVICE)})
    assert launch.grid == (int(_f16_mma.AMAX_PARTS), 1, 1)
    assert not amax.isnan().any()  # every slot written (empty slices write 0)
    assert amax.max().item() == 7.5e5


# ---- numerics ------------------------------------------------------------------------------------------------
CASES = [
    # (n, c, k, spatial, kernel, params, channels_last, bias, x scale, w scale)
    (2, 48, 40, (9, 11), 3, dict(pad_before=1), True, True, 1e6, 1.0),
    (2, 32, 24, (7, 8), 3, dict(stride=2, pad_before=1, pad_after=0), False, False, 1e-6, 1e3),
    (1, 40, 32, (60,), 5, dict(pad_before=4, pad_after=2, dilation=2), False, True, 3.0, 1e-5),
    (1, 32, 16, (3, 4, 5), 3, dict(pad_before=1), True, False, 1e-30, 1e30),
    (2, 64, 64, (6, 7), 3, dict(pad_before=1, groups=4), True, True, 1e4, 1.0),
]  # fmt: skip


@pytest.mark.parametrize("mode", [1, 2])
@pytest.mark.parametrize("case", CASES, ids=[f"case{i}" for i in range(len(CASES))])
def test_f16_mma_keeps_tf32_accuracy(case, mode: int) -> None:
    n, c, k, spatial, kernel, kw, cl, bias, xs, ws = case
    p = _params(len(spatial), **kw)
    x, w, b = _tensors(n, c, k, spatial, kernel, kw.get("groups", 1), torch.float32, cl, bias, seed=11)
    x, w = x * xs, w * ws
    problem = _problem(x, w, b, p)
    s = _schedule(problem, mode)
    out, cand = _run(x, w, b, p, "implicit_gemm", s, exact=False)
    assert cand.schedule == s
    _check_tf32_accuracy(out, x, w, b, p)
    # ... and is as close to ATen as TF32 with both operands rounded to nearest (what cuDNN does)
    exact = reference_convolution(x.double(), w.double(), None if b is None else b.double(), p)
    tf32 = reference_convolution(
        round_to_tf32(x).double(), round_to_tf32(w).double(), None if b is None else b.double(), p
    )
    scale = float(exact.abs().max())
    assert float((out.double() - exact).abs().max()) <= 2 * float((tf32 - exact).abs().max()) + 1e-6 * scale


@pytest.mark.parametrize(
    "overrides",
    [
        dict(CL_COPY=1, ROW_TILES=0),  # mode 2's fp16 copy is the channels-last copy
        dict(SPLIT_K=3, BLOCK_M=16, BLOCK_N=16, BLOCK_K=16),  # unscaled before the fp32 workspace
        dict(TAIL_SPLIT=3, TAIL_M_TILES=1, BLOCK_M=32, BLOCK_N=32, BLOCK_K=16, ROW_TILES=0),
    ],
    ids=["cl_copy", "split_k", "tail_split"],
)
@pytest.mark.parametrize("mode", [1, 2])
def test_f16_mma_with_copies_and_splits(overrides, mode: int) -> None:
    p = _params(2, pad_before=1)
    x, w, b = _tensors(2, 32, 48, (9, 11), 3, 1, torch.float32, False, True, seed=13)
    x = x * 1e5
    problem = _problem(x, w, b, p)
    s = _schedule(problem, mode, **overrides)
    out, _ = _run(x, w, b, p, "implicit_gemm", s, exact=False)
    _check_tf32_accuracy(out, x, w, b, p)
    names = [launch.name for launch in IG.launches(problem, s)]
    assert names[0] == "amax_partial_kernel" and "conv_implicit_gemm_kernel" in names
    if "CL_COPY" in overrides:
        roles = [t.role for t in IG.scratch(problem, s)]
        assert names[1] == "to_channels_last_kernel"
        assert roles == (["amax", "input_f16"] if mode == 2 else ["input_cl", "amax"])
    elif mode == 2:
        assert names[1] == "scale_to_f16_kernel"


@pytest.mark.parametrize("mode", [1, 2])
def test_non_finite_inputs_stay_local(mode: int) -> None:
    """One inf must not zero the rest (the maximum leaves it out): outputs that do not read it stay accurate."""
    p = _params(2, pad_before=1)
    x, w, _ = _tensors(1, 32, 16, (8, 8), 3, 1, torch.float32, True, False, seed=17)
    x = x.clone()
    x[0, 3, 1, 1] = float("inf")
    problem = _problem(x, w, None, p)
    out, _ = _run(x, w, None, p, "implicit_gemm", _schedule(problem, mode), exact=False)
    reached = torch.zeros(8, 8, dtype=torch.bool)
    reached[0:3, 0:3] = True  # the 3x3 outputs whose window holds (1, 1)
    assert not out[0, :, reached].isfinite().any()
    finite_x = x.clone()
    finite_x[0, 3, 1, 1] = 0.0
    ref = reference_convolution(finite_x.double(), w.double(), None, p)
    err = (out.double() - ref)[0, :, ~reached].abs()
    assert float(err.max()) <= 2.0**-8 * float(ref.abs().max())


# ---- choice -----------------------------------------------------------------------------------------------------
def _meta(n, c, k, hw, kernel, dtype=torch.float32, stride=1):
    x = torch.empty((n, c, *hw), device="meta", dtype=dtype).contiguous(memory_format=torch.channels_last)
    w = torch.empty((k, c, kernel, kernel), device="meta", dtype=dtype)
    return (
        x,
        w.contiguous(memory_format=torch.channels_last),
        None,
        _params(2, stride=stride, pad_before=kernel // 2),
    )


def test_heuristic_runs_only_compute_heavy_fp32_with_tf32_on_fp16(monkeypatch: pytest.MonkeyPatch) -> None:
    vgg = _meta(8, 256, 256, (56, 56), 3)
    assert IG.heuristic_schedule(_problem(*vgg, allow_tf32=True))["F16_MMA"] == 2
    exact = IG.heuristic_schedule(_problem(*vgg, allow_tf32=False))
    assert "F16_MMA" not in dict(exact.params)
    assert not any("F16_MMA" in dict(s.params) for s in IG.schedules(_problem(*vgg, allow_tf32=False)))
    for dtype in (torch.float16, torch.bfloat16):
        assert not any(
            "F16_MMA" in dict(s.params)
            for s in IG.schedules(_problem(*_meta(8, 256, 256, (56, 56), 3, dtype)))
        )
    small = _meta(
        1, 64, 64, (56, 56), 3
    )  # 1e8 multiply-adds: the extra passes would cost more than they save
    strided = _meta(32, 64, 128, (56, 56), 3, stride=2)  # 289 multiply-adds per input element
    for args in (small, strided):
        assert "F16_MMA" not in dict(IG.heuristic_schedule(_problem(*args)).params)
    modes = {dict(s.params).get("F16_MMA", 0) for s in IG.schedules(_problem(*vgg))}
    assert modes == {0, 1, 2}
    monkeypatch.setenv(_f16_mma.ENV_SWITCH, "0")
    assert not any("F16_MMA" in dict(s.params) for s in IG.schedules(_problem(*vgg)))
    monkeypatch.setenv(_f16_mma.ENV_SWITCH, "maybe")
    with pytest.raises(ValueError, match="expected 0 or 1"):
        IG.schedules(_problem(*vgg))


def test_shared_memory_of_f16_tiles_fits() -> None:
    vgg = _problem(*_meta(8, 256, 256, (56, 56), 3))
    for s in IG.schedules(vgg):
        mode = dict(s.params).get("F16_MMA", 0)
        if mode:
            a_bytes = 4 if mode == 1 else 2
            bm, bn, bk = s["BLOCK_M"], s["BLOCK_N"], s["BLOCK_K"]
            assert (bm * bk * a_bytes + bk * bn * 2) * s.num_stages <= 200 * 1024, s


@pytest.mark.slow
def test_f16_kernels_compile_ahead_of_time() -> None:
    from cuda_triton.kernel.aot import compile_launches

    x, w, _, p = _meta(4, 128, 128, (32, 32), 3)
    cl = _problem(x, w, None, p)
    xc = torch.empty((4, 128, 32, 32), device="meta")
    contiguous = _problem(xc, torch.empty((128, 128, 3, 3), device="meta"), None, p)
    launches = []
    for problem, overrides in ((cl, {}), (contiguous, dict(CL_COPY=1, ROW_TILES=0))):
        for mode in (1, 2):
            launches += IG.launches(problem, _schedule(problem, mode, **overrides))
    unique = list({(lc.name, lc.args, lc.constexprs): lc for lc in launches}.values())
    for arch in (80, 90):
        compiled = compile_launches(unique, arch)
        for launch, kernel in zip(unique, compiled, strict=True):
            assert kernel.cubin, launch.name
            if launch.name == "conv_implicit_gemm_kernel":
                weight = next(a for a in launch.args if isinstance(a, TensorArg) and a.role == "weight")
                assert weight.dtype == "fp16"
                if arch == 90:
                    assert "wgmma.mma_async.sync.aligned" in kernel.ptx and ".f16.f16" in kernel.ptx
    assert {lc.name for lc in unique} >= {
        "amax_partial_kernel",
        "scale_to_f16_kernel",
        "to_channels_last_kernel",
        "conv_implicit_gemm_kernel",
    }


def test_export_option_turns_f16_mma_off() -> None:
    """The compile spec tf32_on_fp16 reaches the preprocess step's schedule choice (and round-trips)."""
    from cuda_triton.partition.options import CudaTritonOptions
    from cuda_triton.preprocess.kernels import conv_jobs

    vgg = _problem(*_meta(8, 256, 256, (56, 56), 3))
    for allowed in (True, False):
        options = CudaTritonOptions(archs=(90,), tf32_on_fp16=allowed)
        assert CudaTritonOptions.from_compile_specs(options.compile_specs()).tf32_on_fp16 is allowed
        schedules = {job.schedule for job in conv_jobs(vgg, options).values()}
        assert schedules and all(("F16_MMA" in dict(s.params)) is allowed for s in schedules)
    with _f16_mma.f16_mma_policy(False):
        assert not _f16_mma.f16_mma_allowed(vgg)
        assert "F16_MMA" not in dict(IG.heuristic_schedule(vgg).params)
    assert _f16_mma.f16_mma_allowed(vgg)  # the eager op's default
