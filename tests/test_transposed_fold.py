"""W_FOLD schedules of the transposed template: one program computes every W phase of a k == s (along W) conv.

Under TRITON_INTERPRET=1 on CPU, outputs NaN-poisoned, against ATen (fp64 from the same inputs, and the real
nn.ConvTransposeNd where the padding is symmetric): 1-D/2-D/3-D, k = s = 2 and 4 along W (other dims any
geometry), both layouts, groups 1 and 2, with and without bias, fp16, exact fp32, and fp32 with TF32 (plain and
both F16_MMA modes, with TF32's error bound); every W_FOLD schedule of one case; the schedule space (offered
exactly where `w_phases_fold` holds, within the accumulator limits; the heuristic's pick only for channels-last
fp32 with TF32); the launch (grid,
constexpr); and ahead-of-time compiles of a few folded kernels for sm_80 and sm_90.
"""

from __future__ import annotations

import os

os.environ.setdefault("TRITON_INTERPRET", "1")

import math  # noqa: E402
import re  # noqa: E402

import pytest  # noqa: E402
import torch  # noqa: E402
from cuda_triton.conv.params import ConvParams  # noqa: E402
from cuda_triton.conv.problem import ConvProblem  # noqa: E402
from cuda_triton.conv.templates._f16_mma import uses_f16_mma  # noqa: E402
from cuda_triton.conv.templates.transposed import TransposedTemplate  # noqa: E402
from cuda_triton.conv.templates.transposed import template as transposed_mod  # noqa: E402
from cuda_triton.conv.templates.transposed.phases import uses_w_fold, w_phases_fold  # noqa: E402
from cuda_triton.conv.templates.transposed.template import SMEM_LIMIT  # noqa: E402
from cuda_triton.kernel.launch import Schedule, TensorArg  # noqa: E402
from test_templates_part2 import DTYPES, TR, _channels_last, _module_for, _tr_inputs, check  # noqa: E402
from test_transposed_f16_mma import UNET3D, _check_tf32_accuracy, _meta, _run  # noqa: E402


def _problem(x, w, b, p: ConvParams, allow_tf32: bool = True) -> ConvProblem:
    return ConvProblem.from_tensors(x, w, b, p, allow_tf32=allow_tf32)


def _folded(problem: ConvProblem, f16: int = 0) -> list[Schedule]:
    return [s for s in TR.schedules(problem) if uses_w_fold(s) and uses_f16_mma(s) == f16]


def _fewest_programs(problem: ConvProblem, f16: int = 0) -> Schedule:
    """The W_FOLD schedule (of this F16_MMA mode) with the smallest grid: the interpreter's cost grows with it."""
    found = _folded(problem, f16)
    assert found, "no W_FOLD schedule on offer"
    return min(found, key=lambda s: (math.prod(TR.launches(problem, s)[-1].grid), -s.num_warps))


# ---- numerics ----------------------------------------------------------------------------------------------------
# As test_templates_part2.TR_CASES: (name, N, C_in, C_out, spatial, kernel, stride, pad_before, pad_after, dilation,
# output_padding, groups, layout, bias). Along W always kernel == stride, dilation 1, no padding before.
FOLD_CASES = [
    ("2d_k2s2_cl", 2, 8, 6, (3, 5), (2, 2), (2, 2), (0, 0), (0, 0), (1, 1), (0, 0), 1, "cl", True),
    ("2d_k2s2_nc_g2", 1, 8, 6, (4, 3), (2, 2), (2, 2), (0, 0), (0, 0), (1, 1), (0, 0), 2, "nc", False),
    ("2d_k4s4_cl_g2", 1, 6, 4, (3, 2), (4, 4), (4, 4), (0, 0), (0, 0), (1, 1), (0, 0), 2, "cl", False),
    ("2d_k4s4_nc", 2, 5, 3, (2, 3), (4, 4), (4, 4), (0, 0), (0, 0), (1, 1), (0, 0), 1, "nc", True),
    # H phases of their own (k=3, s=2, padding, output padding) beside the folded W phases
    ("2d_h3s2_w2s2_cl", 1, 6, 5, (4, 3), (3, 2), (2, 2), (1, 0), (1, 0), (1, 1), (1, 0), 1, "cl", True),
    # padding after along W: every W phase one position short of the input (OW = 2 * IW - 2)
    ("2d_k2s2_trim_nc", 1, 4, 6, (3, 4), (2, 2), (2, 2), (0, 0), (1, 2), (1, 1), (0, 0), 1, "nc", True),
    ("3d_k2s2_cl", 1, 4, 3, (2, 3, 2), (2, 2, 2), (2, 2, 2), (0,) * 3, (0,) * 3, (1,) * 3, (0,) * 3, 1, "cl", True),
    ("3d_k2s2_nc_g2", 2, 4, 6, (2, 2, 3), (2, 2, 2), (2, 2, 2), (0,) * 3, (0,) * 3, (1,) * 3, (0,) * 3, 2, "nc", False),
    ("1d_k2s2_nc", 2, 5, 4, (7,), (2,), (2,), (0,), (0,), (1,), (0,), 1, "nc", True),
    # a channels-last 1-D input (its output is contiguous)
    ("1d_k2s2_cl_g2", 1, 6, 4, (5,), (2,), (2,), (0,), (0,), (1,), (0,), 2, "cl", False),
]  # fmt: skip
_IDS = [c[0] for c in FOLD_CASES]


def test_cases_offer_folded_schedules() -> None:
    in_layouts, out_cl = set(), set()
    for case in FOLD_CASES:
        x, w, b, p, _ = _tr_inputs(case, torch.float32)
        problem = _problem(x, w, b, p, allow_tf32=False)
        assert w_phases_fold(problem), case[0]
        assert _folded(problem), case[0]
        main = TR.launches(problem, _folded(problem)[0])[-1]
        in_layouts.add(dict(main.constexprs)["IN_CL"])
        out_cl.add(dict(main.constexprs)["OUT_CL"])
    assert in_layouts == out_cl == {True, False}  # both layouts, of the input and of the output


@pytest.mark.parametrize("dtype", ["fp32", "fp16"])
@pytest.mark.parametrize("case", FOLD_CASES, ids=_IDS)
def test_folded_numerics(case, dtype: str) -> None:
    """Exact fp32 (the interpreter's dot is plain fp32) and fp16, every element against ATen."""
    torch.manual_seed(hash((case[0], dtype)) % 2**31)
    x, w, b, p, reduction = _tr_inputs(case, DTYPES[dtype])
    problem = _problem(x, w, b, p, allow_tf32=False)
    module = _module_for(case, w, b) if dtype == "fp32" else None
    check(TR, x, w, b, p, reduction, schedule=_fewest_programs(problem), module=module)


@pytest.mark.parametrize("f16", [0, 1, 2], ids=["tf32", "f16_mma1", "f16_mma2"])
@pytest.mark.parametrize("case", FOLD_CASES, ids=_IDS)
def test_folded_tf32(case, f16: int) -> None:
    """fp32 with TF32 allowed: the A tile rounded to TF32 once per K step (f16=0), or scaled to fp16 in the kernel
    (1) / read from the scaled fp16 copy (2), with operands far outside fp16's range; TF32's error bound."""
    torch.manual_seed(hash((case[0], f16)) % 2**31)
    x, w, b, p, _ = _tr_inputs(case, torch.float32)
    if f16:
        x, w = x * 1e6, w * 1e-6
    out = _run(x, w, b, p, _fewest_programs(_problem(x, w, b, p, allow_tf32=True), f16))
    _check_tf32_accuracy(out, x, w, b, p)


def _every_schedule_inputs():
    """C_in = C_out = 80 (every block size allowed), channels-last, bias, H phases with output padding."""
    torch.manual_seed(13)
    x = _channels_last(torch.randn(1, 80, 3, 4))
    w = _channels_last(torch.randn(80, 80, 2, 2))
    b = torch.randn(80)
    p = ConvParams((2, 2), (1, 0), (0, 0), (1, 1), True, (1, 0), 1)
    return x, w, b, p


@pytest.mark.slow
@pytest.mark.parametrize("dtype", ["fp32", "fp16"])
def test_every_folded_schedule(dtype: str) -> None:
    x, w, b, p = _every_schedule_inputs()
    x, w, b = x.to(DTYPES[dtype]), w.to(DTYPES[dtype]), b.to(DTYPES[dtype])
    folded = _folded(_problem(x, w, b, p, allow_tf32=False))
    assert len(folded) >= 5
    for s in folded:
        check(TR, x, w, b, p, 80, schedule=s)


@pytest.mark.slow
def test_every_folded_f16_mma_schedule() -> None:
    x, w, b, p = _every_schedule_inputs()
    x, b = x * 1e5, b * 1e5
    problem = _problem(x, w, b, p, allow_tf32=True)
    folded = [s for s in TR.schedules(problem) if uses_w_fold(s)]
    assert {uses_f16_mma(s) for s in folded} == {0, 1, 2}
    for s in folded:
        _check_tf32_accuracy(_run(x, w, b, p, s), x, w, b, p)


# ---- the schedule space and the launch ---------------------------------------------------------------------------
def _geometry(
    kernel=(2, 2), stride=(2, 2), pad=(0, 0), pad_after=None, dilation=(1, 1), out_pad=(0, 0), cl=True
):
    """A 2-D fp16 problem (C_in = C_out = 64, 6 x 8 input) of the given geometry."""
    x = torch.empty((1, 64, 6, 8), device="meta", dtype=torch.float16)
    w = torch.empty((64, 64, *kernel), device="meta", dtype=torch.float16)
    if cl:
        x, w = _channels_last(x), _channels_last(w)
    p = ConvParams(stride, pad, pad if pad_after is None else pad_after, dilation, True, out_pad, 1)
    return ConvProblem.from_tensors(x, w, None, p)


def test_fold_offered_exactly_when_valid() -> None:
    valid = {
        "k2s2": _geometry(),
        "k4s4": _geometry(kernel=(4, 4), stride=(4, 4)),
        "k8s8": _geometry(kernel=(8, 8), stride=(8, 8)),
        "k2s2 nc": _geometry(cl=False),
        "h k3s2p1op1": _geometry(kernel=(3, 2), pad=(1, 0), out_pad=(1, 0)),
        "w padding after 2": _geometry(pad=(0, 0), pad_after=(0, 2)),
    }
    invalid = {
        "k != s": _geometry(kernel=(3, 3)),
        "k4s2": _geometry(kernel=(4, 4), pad=(1, 1)),
        "dilation 2": _geometry(dilation=(2, 2)),
        "padding 1": _geometry(pad=(1, 1)),
        "output padding 1": _geometry(out_pad=(1, 1)),
        "odd output (padding after 1)": _geometry(pad_after=(0, 1)),
        "k = s = 3 (not a power of two)": _geometry(kernel=(3, 3), stride=(3, 3)),
        "k = s = 1": _geometry(kernel=(1, 1), stride=(1, 1)),
        "only H k == s": _geometry(kernel=(2, 3), stride=(2, 2), pad=(0, 1)),
    }
    for name, problem in valid.items():
        assert TR.supports(problem), name
        assert w_phases_fold(problem), name
        assert any(uses_w_fold(s) for s in TR.schedules(problem)), name
    for name, problem in invalid.items():
        assert TR.supports(problem), name
        assert not w_phases_fold(problem), name
        assert not any(uses_w_fold(s) for s in TR.schedules(problem)), name


def _twin_key(s: Schedule, w_phases: int = 1) -> tuple[int, ...]:
    """What a folded schedule shares with its unfolded twin (BLOCK_K aside: halved where SW B tiles would not
    fit); ``w_phases`` > 1 gives the warps a folded twin of ``s`` has (64 accumulator values a thread at most)."""
    warps = max(s.num_warps, s["BLOCK_M"] * s["BLOCK_N"] * w_phases // (64 * 32))
    return (warps, s.num_stages, s["BLOCK_M"], s["BLOCK_N"], s["ROW_TILED"], uses_f16_mma(s))


def test_folded_space_is_the_plain_space_within_the_limits() -> None:
    for problem in (
        _geometry(),
        _geometry(kernel=(4, 4), stride=(4, 4)),
        _geometry(cl=False),
        _problem(*_meta(**UNET3D)),  # fp32 with TF32: F16_MMA folded too
    ):
        sw = problem.params.stride[-1]
        space = TR.schedules(problem)
        plain = [s for s in space if not uses_w_fold(s)]
        folded = [s for s in space if uses_w_fold(s)]
        assert folded and len(set(space)) == len(space)
        for s in folded:
            bm, bn, bk = s["BLOCK_M"], s["BLOCK_N"], s["BLOCK_K"]
            assert (
                bm * bn * sw <= TransposedTemplate.FOLD_ACC_LIMIT
                and bn * sw <= TransposedTemplate.FOLD_N_LIMIT
            )
            a_bytes = {0: problem.element_size, 1: 4, 2: 2}[uses_f16_mma(s)]
            b_bytes = 2 if uses_f16_mma(s) else problem.element_size
            assert (bm * bk * a_bytes + bk * bn * sw * b_bytes) * s.num_stages <= SMEM_LIMIT, s
            assert bm * bn * sw <= 64 * 32 * s.num_warps, s  # 64 accumulator values a thread at most
            assert any(_twin_key(t, sw) == _twin_key(s) for t in plain), s  # the same tile unfolded
        # ... and every unfolded tile within the limits has a folded twin (F16_MMA ones halve BLOCK_K to fit;
        # plain ones where the SW B tiles fit as they are)
        for t in plain:
            bm, bn, bk = t["BLOCK_M"], t["BLOCK_N"], t["BLOCK_K"]
            if bm * bn * sw > TransposedTemplate.FOLD_ACC_LIMIT or bn * sw > TransposedTemplate.FOLD_N_LIMIT:
                continue
            plain_fits = (bm * bk + bk * bn * sw) * problem.element_size * t.num_stages <= SMEM_LIMIT
            if uses_f16_mma(t) or plain_fits:
                assert any(_twin_key(s) == _twin_key(t, sw) for s in folded), t


def test_heuristic_folds_only_channels_last_tf32(monkeypatch: pytest.MonkeyPatch) -> None:
    """The heuristic takes W_FOLD 64 x 64 x 32 without F16_MMA for channels-last fp32 with TF32 (the tuner's pick
    for both such suite convs, 2026-12-03); elsewhere it picks what it picked before W_FOLD existed."""
    unfolded = [
        _geometry(),
        _geometry(cl=False),
        _geometry(kernel=(4, 4), stride=(4, 4)),
        _problem(*_meta(**UNET3D, cl=False)),
        _problem(*_meta(**UNET3D, dtype=torch.float16)),
        _problem(*_meta(**UNET3D), allow_tf32=False),
    ]
    folded = [
        _problem(*_meta(**UNET3D)),
        _problem(*_meta(n=4, cin=128, cout=64, spatial=(128, 128), kernel=2, stride=2, pad=0)),
    ]
    picks = [TR.heuristic_schedule(problem) for problem in unfolded]
    for problem, pick in zip(unfolded, picks, strict=True):
        assert w_phases_fold(problem) and not uses_w_fold(pick) and pick in TR.schedules(problem)
    for problem in folded:
        pick = TR.heuristic_schedule(problem)
        assert pick in TR.schedules(problem) and uses_w_fold(pick) and not uses_f16_mma(pick)
        assert (pick["BLOCK_M"], pick["BLOCK_N"], pick["BLOCK_K"], pick.num_warps) == (64, 64, 32, 4)
    # Without the fold rule, the other picks are the ones from before W_FOLD existed.
    monkeypatch.setattr(transposed_mod, "w_phases_fold", lambda problem: False)
    assert picks == [TR.heuristic_schedule(problem) for problem in unfolded]


def test_folded_launch() -> None:
    """SD*SH phases in the grid instead of SD*SH*SW, W_FOLD passed as a constexpr; weight and args unchanged."""
    for problem in (_geometry(), _geometry(kernel=(4, 4), stride=(4, 4)), _problem(*_meta(**UNET3D))):
        sw = problem.params.stride[-1]
        for s in _folded(problem) + _folded(problem, 2):
            plain = Schedule.from_dict({k: v for k, v in s.as_dict().items() if k != "W_FOLD"})
            (*pre, main), (*plain_pre, plain_main) = TR.launches(problem, s), TR.launches(problem, plain)
            assert main.grid[0] * sw == plain_main.grid[0] and main.grid[1:] == plain_main.grid[1:]
            assert dict(main.constexprs)["W_FOLD"] == 1 and dict(plain_main.constexprs)["W_FOLD"] == 0
            assert main.args == plain_main.args and [la.name for la in pre] == [la.name for la in plain_pre]
            assert TR.scratch(problem, s) == TR.scratch(problem, plain)


# ---- ahead-of-time compilation -----------------------------------------------------------------------------------
@pytest.mark.slow
def test_folded_kernels_compile_ahead_of_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """A few W_FOLD kernels (SW 2 and 4, fp32 with TF32, F16_MMA=2, fp16, a contiguous row-tiled input) compile
    for sm_80 and sm_90, on tensor cores (one [BLOCK_M, SW*BLOCK_N] MMA tile)."""
    from concurrent.futures import ThreadPoolExecutor

    from cuda_triton.kernel.aot import compile_launches

    monkeypatch.setattr("cuda_triton.conv.templates._interpreter.interpreting", lambda: False)
    unet3d = _problem(*_meta(**UNET3D))
    k4s4 = _geometry(kernel=(4, 4), stride=(4, 4))
    row_tiled = _problem(*_meta(2, 64, 64, (200,), 2, 2, 0, dtype=torch.bfloat16))

    def pick(problem: ConvProblem, f16: int, **tile: int) -> Schedule:
        found = [s for s in _folded(problem, f16) if all(s[k] == v for k, v in tile.items())]
        assert found, (f16, tile)
        return found[0]

    chosen = [
        (unet3d, pick(unet3d, 0, BLOCK_M=64, BLOCK_N=64)),  # the table's tf32 tile for unet3d.up2, folded
        (unet3d, pick(unet3d, 2, BLOCK_M=128, BLOCK_N=64, BLOCK_K=64)),  # the heuristic's tile, folded
        (k4s4, pick(k4s4, 0, BLOCK_M=64, BLOCK_N=64)),
        (row_tiled, pick(row_tiled, 0, ROW_TILED=1)),
    ]
    launches = [TR.launches(problem, s)[-1] for problem, s in chosen]
    with ThreadPoolExecutor(2) as pool:
        by_arch = dict(
            zip((80, 90), pool.map(lambda arch: compile_launches(launches, arch), (80, 90)), strict=True)
        )
    for arch, compiled in by_arch.items():
        assert len(compiled) == len(launches)
        for (_, s), launch, kernel in zip(chosen, launches, compiled, strict=True):
            assert kernel.cubin and kernel.arch == arch and kernel.num_warps == launch.num_warps, s
            assert dict(launch.constexprs)["W_FOLD"] == 1
            assert kernel.param_types == tuple(
                "ptr" if isinstance(a, TensorArg) else a.type for a in launch.args
            )
            mma = r"wgmma\.mma_async\.sync\.aligned" if arch == 90 else r"mma\.sync\.aligned"
            assert re.search(mma, kernel.ptx), (arch, s)
