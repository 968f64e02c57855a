"""F16_MMA schedules of the transposed template: fp32 at TF32 precision on fp16 tensor cores (_f16_mma.py).

Under TRITON_INTERPRET=1 on CPU, output and scratch NaN-poisoned: both modes (the input scaled in the kernel /
read from a scaled fp16 copy) on 1-D/2-D/3-D transposed problems (strides 2 and 3, dilation, output padding,
groups, both layouts, bias) with fp32 operands scaled far outside fp16's range, against fp64 ATen with TF32's
error bound and against TF32-rounded operands; every F16 tile config of both layouts; non-finite inputs; the
schedule space, the heuristic's choice, the prepared weight, scratch and launch lists; and ahead-of-time compiles
for sm_80 and sm_90 with the weight typed fp16.
"""

from __future__ import annotations

import os

os.environ.setdefault("TRITON_INTERPRET", "1")

import math  # noqa: E402
import re  # noqa: E402

import pytest  # noqa: E402
import torch  # noqa: E402
from cuda_triton.conv.op import reference_convolution  # noqa: E402
from cuda_triton.conv.params import ConvParams  # noqa: E402
from cuda_triton.conv.problem import ConvProblem  # noqa: E402
from cuda_triton.conv.templates import _f16_mma, force_conv_candidate, select_candidate  # noqa: E402
from cuda_triton.conv.templates.transposed import TransposedTemplate  # noqa: E402
from cuda_triton.conv.templates.transposed.phases import phase_taps  # noqa: E402
from cuda_triton.conv.templates.transposed.template import SMEM_LIMIT  # noqa: E402
from cuda_triton.conv.tf32 import round_to_tf32  # noqa: E402
from cuda_triton.kernel.launch import Schedule, TensorArg  # noqa: E402
from test_templates_part2 import TR, TR_CASES, _channels_last, _tr_inputs  # noqa: E402

NAN = float("nan")


def _mode(s: Schedule) -> int:
    return int(dict(s.params).get("F16_MMA", 0))


def _problem(x, w, b, p: ConvParams, allow_tf32: bool = True) -> ConvProblem:
    return ConvProblem.from_tensors(x, w, b, p, allow_tf32=allow_tf32)


def _fewest_programs(problem: ConvProblem, mode: int) -> Schedule:
    """The schedule of this F16_MMA mode with the smallest grid (the interpreter's cost grows with it)."""
    found = [s for s in TR.schedules(problem) if _mode(s) == mode]
    assert found
    return min(found, key=lambda s: (math.prod(TR.launches(problem, s)[-1].grid), -s.num_warps))


def _run(x, w, b, p: ConvParams, schedule: Schedule) -> torch.Tensor:
    """What the op's CUDA body does, on CPU tensors: select (forced) -> prepare weight -> scratch -> launches."""
    problem = _problem(x, w, b, p)
    with force_conv_candidate(TR, schedule):
        cand = select_candidate(problem)
    assert cand.template is TR and cand.schedule == schedule
    out = torch.empty_strided(problem.output_size, problem.output_stride, dtype=x.dtype).fill_(NAN)
    tensors = {"input": x, "weight": TR.prepare_weight(w, problem, schedule), "bias": b, "output": out}
    for role, t in cand.allocate_scratch(problem, out.device).items():
        tensors[role] = t.fill_(NAN)  # the launches must write whatever they read
    for launch in cand.launches(problem):
        launch.run(tensors)
    return out


def _check_tf32_accuracy(out: torch.Tensor, x, w, b, p: ConvParams) -> None:
    """|out - exact| within TF32's bound: each product off by < 2^-9 of |x||w| (both operands cut to 11
    significant bits, rounded), plus the fp32 output's rounding; and no farther from the exact result than
    twice what TF32 with both operands rounded to nearest (cuDNN) is. NaN (an element never written) fails."""
    bias = None if b is None else b.double()
    exact = reference_convolution(x.double(), w.double(), bias, p)
    magnitude = reference_convolution(x.double().abs(), w.double().abs(), None, p)
    tol = 2.0**-9 * magnitude + 2.0**-22 * exact.abs() + 1e-300
    err = (out.double() - exact).abs()
    bad = ~(err <= tol)
    assert not bad.any(), f"{int(bad.sum())} of {err.numel()} off; worst ratio {float((err / tol).max()):.3g}"
    tf32 = reference_convolution(round_to_tf32(x).double(), round_to_tf32(w).double(), bias, p)
    scale = float(exact.abs().max())
    assert float(err.max()) <= 2 * float((tf32 - exact).abs().max()) + 1e-6 * scale


# ---- numerics ----------------------------------------------------------------------------------------------------
# 1-D/2-D/3-D, strides 2 and 3 (and 4), dilation (with gcd(stride, dilation) > 1), output padding, groups, both
# layouts, with and without bias.
_NUMERIC_CASES = [
    c
    for c in TR_CASES
    if c[0]
    in {
        "1d_basic",
        "1d_s3_d2_asym_g2",
        "1d_cl_k1_s3",
        "2d_4x4s2p1",
        "2d_3x3s2op1",
        "2d_nc_dil_gcd",
        "2d_cl_groups4",
        "3d_up2",
        "3d_nc_mixed",
    }
]
# (x scale, w scale): fp16's range alone (6e-8 .. 65504) would overflow or flush these.
_SCALES = [(1e6, 1e-6), (1e-6, 1e6)]


@pytest.mark.parametrize("mode", [1, 2])
@pytest.mark.parametrize("scales", _SCALES, ids=["x1e6", "x1e-6"])
@pytest.mark.parametrize("case", _NUMERIC_CASES, ids=[c[0] for c in _NUMERIC_CASES])
def test_f16_mma_keeps_tf32_accuracy(case, scales: tuple[float, float], mode: int) -> None:
    torch.manual_seed(hash((case[0], scales, mode)) % 2**31)
    x, w, b, p, _ = _tr_inputs(case, torch.float32)
    x, w = x * scales[0], w * scales[1]
    if b is not None:
        b = b * scales[0] * scales[1]
    problem = _problem(x, w, b, p)
    out = _run(x, w, b, p, _fewest_programs(problem, mode))
    assert out.stride() == problem.output_stride
    _check_tf32_accuracy(out, x, w, b, p)


@pytest.mark.parametrize("mode", [1, 2])
def test_extreme_scales(mode: int) -> None:
    """1e-30 and 1e25: only the power-of-two scaling puts these in fp16's range; the product is ~1e-5."""
    case = next(c for c in TR_CASES if c[0] == "2d_3x3s2op1")
    torch.manual_seed(5)
    x, w, b, p, _ = _tr_inputs(case, torch.float32)
    x, w = x * 1e-30, w * 1e25
    out = _run(x, w, b, p, _fewest_programs(_problem(x, w, b, p), mode))
    _check_tf32_accuracy(out, x, w, b, p)


def _every_f16_schedule_inputs(layout: str):
    torch.manual_seed(7)
    if layout == "cl":  # C_in = C_out = 80: every block size of the space is allowed
        x = _channels_last(torch.randn(1, 80, 3, 4) * 1e5)
        w = _channels_last(torch.randn(80, 80, 2, 2))
        b = torch.randn(80) * 1e5
        p = ConvParams((2, 2), (1, 0), (0, 1), (1, 1), True, (1, 0), 1)
    else:  # contiguous 1-D: row-tiled and flat schedules
        x = torch.randn(2, 80, 9) * 1e-5
        w = torch.randn(80, 80, 4)
        b = None
        p = ConvParams((2,), (1,), (1,), (1,), True, (0,), 1)
    return x, w, b, p


@pytest.mark.slow
@pytest.mark.parametrize("layout", ["cl", "nc"])
def test_every_f16_schedule(layout: str) -> None:
    x, w, b, p = _every_f16_schedule_inputs(layout)
    problem = _problem(x, w, b, p)
    space = TR.schedules(problem)
    f16 = [s for s in space if _mode(s)]
    plain = TransposedTemplate.CL_SPACE if layout == "cl" else TransposedTemplate.NC_ROW_SPACE
    assert len(f16) >= 2 * len(plain)
    for s in f16:
        _check_tf32_accuracy(_run(x, w, b, p, s), x, w, b, p)


@pytest.mark.filterwarnings("ignore:invalid value encountered in matmul:RuntimeWarning")  # inf * 0: expected
@pytest.mark.parametrize("mode", [1, 2])
def test_non_finite_inputs_stay_local(mode: int) -> None:
    """One inf must not zero the rest (the maximum leaves it out): outputs it does not reach stay accurate."""
    case = next(c for c in TR_CASES if c[0] == "2d_4x4s2p1")
    torch.manual_seed(9)
    x, w, b, p, _ = _tr_inputs(case, torch.float32)
    x = x.clone()
    x[1, 2, 1, 3] = float("inf")
    out = _run(x, w, b, p, _fewest_programs(_problem(x, w, b, p), mode))
    hit = torch.zeros_like(x)
    hit[1, 2, 1, 3] = 1.0
    reached = reference_convolution(hit.double(), torch.ones_like(w).double(), None, p) > 0
    assert reached.any() and not reached.all()
    assert not out[reached].isfinite().any()
    finite_x = x.clone()
    finite_x[1, 2, 1, 3] = 0.0
    ref = reference_convolution(finite_x.double(), w.double(), None if b is None else b.double(), p)
    err = (out.double() - ref)[~reached].abs()
    assert float(err.max()) <= 2.0**-8 * float(ref.abs().max())


# ---- the schedule space, the weight, scratch and launches --------------------------------------------------------
def _meta(n, cin, cout, spatial, kernel, stride, pad, out_pad=0, dtype=torch.float32, cl=True):
    dims = len(spatial)
    x = torch.empty((n, cin, *spatial), device="meta", dtype=dtype)
    w = torch.empty((cin, cout, *(kernel,) * dims), device="meta", dtype=dtype)
    if cl and dims > 1:
        x, w = _channels_last(x), _channels_last(w)
    p = ConvParams((stride,) * dims, (pad,) * dims, (pad,) * dims, (1,) * dims, True, (out_pad,) * dims, 1)
    return x, w, None, p


FCN = dict(n=8, cin=64, cout=64, spatial=(64, 64), kernel=4, stride=2, pad=1)  # fcn.up4x4s2
GAN = dict(n=8, cin=128, cout=64, spatial=(32, 32), kernel=3, stride=2, pad=1, out_pad=1)  # gan.3x3s2op1
UNET3D = dict(n=2, cin=128, cout=64, spatial=(16, 32, 32), kernel=2, stride=2, pad=0)  # unet3d.up2


def test_phase_macs_count_every_tap_of_every_output() -> None:
    """phase_macs = sum over output positions of the taps of their phase (brute force), times the channels."""
    for case in TR_CASES:
        _, n, cin, cout, sp, k, s, pb, pa, d, op, g, layout, has_bias = case
        x, w, b, p, _ = _tr_inputs(case, torch.float32)
        problem = _problem(x, w, b, p)
        per_dim = [
            sum(len(phase_taps(kk, ss, dd)[(o + bb) % ss]) for o in range(out))
            for out, kk, ss, dd, bb in zip(problem.out_spatial, k, s, d, pb, strict=True)
        ]
        assert TR.phase_macs(problem) == n * cin * (cout // g) * math.prod(per_dim), case[0]
    fcn = _problem(*_meta(**FCN))
    assert TR.phase_macs(fcn) == 8 * 64 * 64 * 128 * 128 * 4  # each output: 2 x 2 of the 4 x 4 taps


def test_every_tile_config_on_offer_in_each_mode(monkeypatch: pytest.MonkeyPatch) -> None:
    for cl in (True, False):
        tf32 = _problem(*_meta(**FCN, cl=cl))
        exact = _problem(*_meta(**FCN, cl=cl), allow_tf32=False)
        space = TR.schedules(tf32)
        assert {_mode(s) for s in space} == {0, 1, 2}
        assert [s for s in space if not _mode(s)] == TR.schedules(exact)  # today's space, unchanged
        for s in TR.schedules(exact):
            for mode in (1, 2):
                twins = [
                    t
                    for t in space
                    if _mode(t) == mode
                    and (t.num_warps, t.num_stages, t["BLOCK_M"], t["BLOCK_N"], t["ROW_TILED"])
                    == (s.num_warps, s.num_stages, s["BLOCK_M"], s["BLOCK_N"], s["ROW_TILED"])
                ]
                assert twins, (s, mode)
        for s in space:
            mode = _mode(s)
            if mode:
                a_bytes = 4 if mode == 1 else 2
                bm, bn, bk = s["BLOCK_M"], s["BLOCK_N"], s["BLOCK_K"]
                assert (bm * bk * a_bytes + bk * bn * 2) * s.num_stages <= SMEM_LIMIT, s
    monkeypatch.setenv(_f16_mma.ENV_SWITCH, "0")
    assert not any(_mode(s) for s in TR.schedules(_problem(*_meta(**FCN))))


def test_heuristic_runs_compute_heavy_fp32_with_tf32_on_fp16(monkeypatch: pytest.MonkeyPatch) -> None:
    for shape in (FCN, GAN, UNET3D):
        for cl in (True, False):
            if shape is UNET3D and cl:
                continue  # kernel == stride, channels-last: W_FOLD without F16_MMA (test_transposed_fold.py)
            problem = _problem(*_meta(**shape, cl=cl))
            pick = TR.heuristic_schedule(problem)
            assert _mode(pick) == 2, (shape, cl)
            assert pick in TR.schedules(problem)
    fcn = _problem(*_meta(**FCN))
    assert TR.heuristic_schedule(fcn)["BLOCK_K"] == 64  # the 16-bit dtypes' tiles
    # Never for exact fp32 or 16-bit dtypes (not even on offer), nor for small convs.
    exact = _problem(*_meta(**FCN), allow_tf32=False)
    assert _mode(TR.heuristic_schedule(exact)) == 0
    for dtype in (torch.float16, torch.bfloat16):
        half = _problem(*_meta(**FCN, dtype=dtype))
        assert not any(_mode(s) for s in TR.schedules(half))
        assert _mode(TR.heuristic_schedule(half)) == 0
    small = _problem(*_meta(1, 64, 64, (16, 16), 4, 2, 1))  # 1.7e7 multiply-adds
    few_outputs = _problem(*_meta(8, 512, 16, (64, 64), 2, 2, 0))  # 1.1e9, but 64 per input element
    for problem in (small, few_outputs):
        assert _mode(TR.heuristic_schedule(problem)) == 0
    monkeypatch.setenv(_f16_mma.ENV_SWITCH, "0")
    assert _mode(TR.heuristic_schedule(fcn)) == 0
    assert not any(_mode(s) for s in TR.schedules(fcn))
    monkeypatch.setenv(_f16_mma.ENV_SWITCH, "maybe")
    with pytest.raises(ValueError, match="expected 0 or 1"):
        TR.schedules(fcn)


@pytest.mark.parametrize("mode", [1, 2])
def test_weight_scratch_and_launches(mode: int) -> None:
    case = next(c for c in TR_CASES if c[0] == "2d_nc_dil_gcd")
    torch.manual_seed(11)
    x, w, b, p, _ = _tr_inputs(case, torch.float32)
    w = w * 3e-7
    problem = _problem(x, w, b, p)
    s = _fewest_programs(problem, mode)
    plain = Schedule.from_dict({k: v for k, v in s.as_dict().items() if k != "F16_MMA"})
    # The weight: today's (unrounded) matrix, scaled to fp16 and flattened, then its shift.
    matrix = TR.prepare_weight(w, _problem(x, w, b, p, allow_tf32=False), plain)
    prepared = TR.prepare_weight(w, problem, s)
    assert prepared.dtype == torch.float16 and prepared.dim() == 1
    assert torch.equal(prepared, _f16_mma.prepare_f16_weight(matrix))
    assert prepared.numel() == w.numel() + _f16_mma.WEIGHT_TRAILER
    assert float(prepared[w.numel()]) == _f16_mma.weight_shift(w)
    # Scratch and launches.
    roles = [t.role for t in TR.scratch(problem, s)]
    assert roles == (["amax", "input_f16"] if mode == 2 else ["amax"])
    assert TR.scratch(problem, plain) == []
    launches = TR.launches(problem, s)
    names = [launch.name for launch in launches]
    want = ["amax_partial_kernel", "scale_to_f16_kernel"] if mode == 2 else ["amax_partial_kernel"]
    assert names == [*want, "_conv_transpose_phase_kernel"]
    main = launches[-1]
    pointers = [a for a in main.args if isinstance(a, TensorArg)]
    x_role = "input_f16" if mode == 2 else "input"
    assert [(a.role, a.dtype) for a in pointers] == [
        (x_role, "fp16" if mode == 2 else "fp32"),
        ("weight", "fp16"),
        ("bias", "fp32"),
        ("output", "fp32"),
        ("amax", "fp32"),
    ]
    constexprs = dict(main.constexprs)
    assert constexprs["F16_MMA"] == mode and constexprs["ROUND_TF32"] == 0
    assert constexprs["W_NUMEL"] == w.numel()
    # Plain schedules pass the output as the unused fifth pointer and keep TF32 rounding.
    (plain_main,) = TR.launches(problem, plain)
    assert [a.role for a in plain_main.args if isinstance(a, TensorArg)][4] == "output"
    assert dict(plain_main.constexprs)["F16_MMA"] == 0 and dict(plain_main.constexprs)["ROUND_TF32"] != 0


# ---- ahead-of-time compilation -----------------------------------------------------------------------------------
@pytest.mark.slow
def test_f16_kernels_compile_ahead_of_time(monkeypatch: pytest.MonkeyPatch) -> None:
    from cuda_triton.kernel.aot import compile_launches

    monkeypatch.setattr("cuda_triton.conv.templates._interpreter.interpreting", lambda: False)
    launches = []
    for cl in (True, False):
        problem = _problem(*_meta(**FCN, cl=cl))
        heuristic = TR.heuristic_schedule(problem)
        assert _mode(heuristic) == 2
        launches += TR.launches(problem, heuristic)
        mode1 = Schedule.from_dict({**heuristic.as_dict(), "F16_MMA": 1})
        assert mode1 in TR.schedules(problem)
        launches += TR.launches(problem, mode1)
    unique = list({(lc.name, lc.args, lc.constexprs): lc for lc in launches}.values())
    assert {lc.name for lc in unique} == {
        "amax_partial_kernel",
        "scale_to_f16_kernel",
        "_conv_transpose_phase_kernel",
    }
    for arch in (80, 90):
        compiled = compile_launches(unique, arch)
        assert len(compiled) == len(unique)
        for launch, kernel in zip(unique, compiled, strict=True):
            assert kernel.cubin and kernel.arch == arch, launch.name
            if launch.name == "_conv_transpose_phase_kernel":
                weight = next(a for a in launch.args if isinstance(a, TensorArg) and a.role == "weight")
                assert weight.dtype == "fp16"
                # fp16 tensor-core MMAs: wgmma on sm_90, mma.sync on sm_80
                mma = "wgmma.mma_async.sync.aligned" if arch == 90 else "mma.sync.aligned"
                assert re.search(re.escape(mma) + r"\.\S*\.f32\.f16\.f16", kernel.ptx), arch
