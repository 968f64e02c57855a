"""Depthwise and phase-decomposed transposed convolution templates against ATen.

On CPU the kernels run in Triton's interpreter (TRITON_INTERPRET=1, set by conftest.py and again here before
anything imports the kernels); outputs are NaN-poisoned first and every element is compared against ATen
(`reference_in_layout`, and the real nn.ConvTranspose modules where the padding is symmetric). fp32 runs the
exact (allow_tf32=False) path: the interpreter's dot is plain fp32. Every schedule of each kernel variant runs
once through `force_conv_candidate`, and compiles ahead of time for sm_80 and sm_90 with no GPU.
"""

from __future__ import annotations

import os

os.environ.setdefault("TRITON_INTERPRET", "1")

import dataclasses  # noqa: E402
import math  # noqa: E402

import pytest  # noqa: E402
import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402
from cuda_triton.conv.op import reference_in_layout  # noqa: E402
from cuda_triton.conv.params import ConvParams  # noqa: E402
from cuda_triton.conv.problem import ConvProblem  # noqa: E402
from cuda_triton.conv.templates import NoTemplateError, force_conv_candidate, select_candidate  # noqa: E402
from cuda_triton.conv.templates.depthwise import TEMPLATES as DW_TEMPLATES  # noqa: E402
from cuda_triton.conv.templates.depthwise import DepthwiseTemplate  # noqa: E402
from cuda_triton.conv.templates.depthwise import schedules as depthwise_schedules  # noqa: E402
from cuda_triton.conv.templates.depthwise.geometry import (  # noqa: E402
    interior_fraction,
    is_columns,
    is_taps,
    tap_rows_and_slots,
)
from cuda_triton.conv.templates.depthwise.kernels import _tile_is_interior  # noqa: E402
from cuda_triton.conv.templates.transposed import TEMPLATES as TR_TEMPLATES  # noqa: E402
from cuda_triton.conv.templates.transposed import TransposedTemplate  # noqa: E402
from cuda_triton.conv.templates.transposed.phases import phase_counts, phase_taps  # noqa: E402
from cuda_triton.kernel.launch import Schedule  # noqa: E402

DW: DepthwiseTemplate = DW_TEMPLATES[0]
TR: TransposedTemplate = TR_TEMPLATES[0]
DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}


# ---- helpers --------------------------------------------------------------------------------------------------
def _channels_last(t: torch.Tensor) -> torch.Tensor:
    if t.dim() == 4:
        return t.contiguous(memory_format=torch.channels_last)
    if t.dim() == 5:
        return t.contiguous(memory_format=torch.channels_last_3d)
    if t.dim() == 3:  # 1-D channels-last: strides (L*C, 1, C)
        return t.transpose(1, 2).contiguous().transpose(1, 2)
    return t


def run_forced(template, x, w, b, p: ConvParams, schedule: Schedule | None = None) -> torch.Tensor:
    """What the op's CUDA body does, on CPU tensors: select (forced) -> prepare weight -> launches."""
    problem = ConvProblem.from_tensors(x, w, b, p, allow_tf32=False)
    with force_conv_candidate(template, schedule):
        cand = select_candidate(problem)
    assert cand.template is template
    if schedule is not None:
        assert cand.schedule == schedule
    out = torch.empty_strided(problem.output_size, problem.output_stride, dtype=x.dtype).fill_(float("nan"))
    tensors = {
        "input": x,
        "weight": template.prepare_weight(w, problem, cand.schedule),
        "bias": b,
        "output": out,
    }
    for launch in cand.launches(problem):
        launch.run(tensors)
    return out


def fewest_programs(template, x, w, b, p: ConvParams) -> Schedule:
    """The schedule with the smallest grid: the interpreter's cost grows with the number of programs.
    (Every schedule, the heuristic's included, also runs in the dedicated tests below.)"""
    problem = ConvProblem.from_tensors(x, w, b, p, allow_tf32=False)

    def programs(s: Schedule) -> tuple[int, int]:
        grid = template.launches(problem, s)[0].grid
        return (math.prod(grid), -s.num_warps)

    return min(template.schedules(problem), key=programs)


def tolerance(dtype: torch.dtype, reduction: int) -> tuple[float, float]:
    """(atol, rtol) for inputs ~ N(0, 1): rounding of the output plus accumulation error ~ sqrt(reduction)."""
    scale = math.sqrt(max(1, reduction))
    if dtype == torch.float32:
        return 2e-5 * scale, 1e-5
    if dtype == torch.float16:
        return 2e-3 * scale, 4e-3
    return 1.6e-2 * scale, 1.6e-2


def check(template, x, w, b, p: ConvParams, reduction: int, schedule: Schedule | None = None, module=None):
    out = run_forced(template, x, w, b, p, schedule)
    # Reference from the same (rounded) inputs, in fp64, so only our rounding is measured.
    ref = reference_in_layout(x.double(), w.double(), None if b is None else b.double(), p)
    want_sizes, want_strides = ConvProblem.from_tensors(x, w, b, p).output_size, out.stride()
    assert tuple(out.shape) == tuple(want_sizes) == tuple(ref.shape)
    ref_layout = reference_in_layout(x, w, b, p)  # the layout ATen's CUDA conv returns (the rule)
    assert out.stride() == ref_layout.stride(), (out.stride(), ref_layout.stride(), want_strides)
    atol, rtol = tolerance(x.dtype, reduction)
    assert not torch.isnan(out).any(), "some output elements were never written"
    torch.testing.assert_close(out.double(), ref, atol=atol, rtol=rtol)
    if module is not None:
        with torch.no_grad():
            m = module.double()
            torch.testing.assert_close(out.double(), m(x.double()), atol=atol, rtol=rtol)
    return out


# ---- depthwise --------------------------------------------------------------------------------------------------
# (name, N, C, mult, spatial, kernel, stride, pad_before, pad_after, dilation, layout, bias)
DW_CASES = [
    ("1d_basic", 2, 4, 1, (13,), (3,), (1,), (1,), (1,), (1,), "nc", True),
    ("1d_s2_d2_asym_m2", 1, 3, 2, (17,), (5,), (2,), (3,), (1,), (2,), "nc", False),
    ("1d_cl_same_even", 2, 5, 1, (12,), (4,), (1,), (1,), (2,), (1,), "cl", True),
    ("2d_basic", 1, 6, 1, (7, 9), (3, 3), (1, 1), (1, 1), (1, 1), (1, 1), "nc", True),
    ("2d_s2_asym", 2, 5, 1, (9, 8), (3, 5), (2, 1), (0, 2), (1, 3), (1, 1), "nc", False),
    ("2d_dil_m3", 1, 2, 3, (10, 7), (3, 2), (1, 2), (2, 1), (2, 0), (2, 3), "nc", True),
    ("2d_cl_basic", 2, 12, 1, (6, 7), (3, 3), (1, 1), (1, 1), (1, 1), (1, 1), "cl", True),
    ("2d_cl_s2_dil_asym", 1, 20, 1, (9, 11), (5, 3), (2, 3), (2, 0), (3, 2), (1, 2), "cl", False),
    ("2d_cl_m2", 1, 9, 2, (5, 6), (3, 3), (1, 2), (1, 1), (1, 1), (2, 1), "cl", True),
    ("2d_cl_7x7_big_c", 1, 70, 1, (5, 5), (7, 7), (1, 1), (3, 3), (3, 3), (1, 1), "cl", True),
    ("3d_basic", 1, 3, 1, (4, 5, 6), (3, 3, 3), (1, 1, 1), (1, 1, 1), (1, 1, 1), (1, 1, 1), "nc", True),
    (
        "3d_cl_s2_asym_m2",
        1,
        6,
        2,
        (5, 6, 7),
        (3, 2, 3),
        (2, 1, 2),
        (1, 0, 2),
        (0, 1, 1),
        (1, 2, 1),
        "cl",
        False,
    ),
    ("3d_cl_dil", 2, 8, 1, (4, 4, 5), (2, 3, 3), (1, 1, 1), (1, 2, 1), (1, 0, 2), (2, 1, 2), "cl", True),
]


def _dw_inputs(case, dtype):
    _, n, c, mult, sp, k, s, pb, pa, d, layout, has_bias = case
    x = torch.randn(n, c, *sp).to(dtype)
    w = torch.randn(c * mult, 1, *k).to(dtype)
    b = torch.randn(c * mult).to(dtype) if has_bias else None
    if layout == "cl":
        x = _channels_last(x)
        if len(sp) > 1:
            w = _channels_last(w)
    p = ConvParams(s, pb, pa, d, False, (0,) * len(sp), c)
    return x, w, b, p, math.prod(k)


# Half precision runs on a representative subset of the shapes (interpreter time); fp32 on all of them.
_DW_HALF = {
    "1d_s2_d2_asym_m2",
    "2d_s2_asym",
    "2d_cl_s2_dil_asym",
    "2d_cl_7x7_big_c",
    "3d_cl_s2_asym_m2",
    "1d_cl_same_even",
}
_DW_PARAMS = [(c, d) for d in ("fp32", "fp16", "bf16") for c in DW_CASES if d == "fp32" or c[0] in _DW_HALF]


@pytest.mark.parametrize(("case", "dtype"), _DW_PARAMS, ids=[f"{c[0]}-{d}" for c, d in _DW_PARAMS])
def test_depthwise_numerics(case, dtype):
    torch.manual_seed(hash((case[0], dtype)) % 2**31)
    x, w, b, p, taps = _dw_inputs(case, DTYPES[dtype])
    check(DW, x, w, b, p, taps, schedule=fewest_programs(DW, x, w, b, p))


def test_depthwise_unbatched_and_module():
    torch.manual_seed(1)
    conv = torch.nn.Conv2d(8, 16, 3, stride=2, padding=1, dilation=1, groups=8)
    x = torch.randn(1, 8, 9, 9)
    p = ConvParams((2, 2), (1, 1), (1, 1), (1, 1), False, (0, 0), 8)
    out = check(DW, x, conv.weight.detach(), conv.bias.detach(), p, 9)
    with torch.no_grad():
        torch.testing.assert_close(out, conv(x), atol=1e-5, rtol=1e-5)


def test_depthwise_every_schedule():
    """Each schedule of every kernel but the band's, on one shape where the whole space is valid."""
    torch.manual_seed(2)
    # channels-last kernel: C_out = 80 (so BLOCK_C up to 128), output 8x8 or wider
    x = _channels_last(torch.randn(1, 40, 8, 17))
    w = torch.randn(80, 1, 2, 2)
    b = torch.randn(80)
    p = ConvParams((1, 1), (1, 0), (0, 1), (1, 1), False, (0, 0), 40)
    problem = ConvProblem.from_tensors(x, w, b, p)
    schedules = DW.schedules(problem)
    # fp32: no F32_TAPS twins
    assert len(schedules) == sum(map(len, (depthwise_schedules.CL_SPACE, depthwise_schedules.TAPS_SPACE,
                                           depthwise_schedules.COLS_SPACE)))  # fmt: skip
    for s in schedules:
        check(DW, x, w, b, p, 4, schedule=s)
    # contiguous kernel: a 1-D row of 600 and a 2-D 9 x 33 plane between them make every
    # (BLOCK_H, BLOCK_W, BLOCK_C) of NC_SPACE and NC_MULTI_SPACE valid on one of them; 6 output channels
    # (C_in 3, multiplier 2) leave the last block of 4 or 8 channels partial.
    shapes = [
        (torch.randn(1, 3, 600), torch.randn(6, 1, 3), ConvParams((1,), (1,), (1,), (1,), False, (0,), 3)),
        (
            torch.randn(1, 3, 9, 33),
            torch.randn(6, 1, 1, 2),
            ConvParams((1, 1), (0, 1), (0, 0), (1, 1), False, (0, 0), 3),
        ),
    ]
    covered = set()
    for xx, ww, pp in shapes:
        prob = ConvProblem.from_tensors(xx, ww, None, pp)
        for s in DW.schedules(prob):
            if s in covered:
                continue
            covered.add(s)
            check(DW, xx, ww, None, pp, math.prod(ww.shape[2:]), schedule=s)
    assert len(covered) == len(depthwise_schedules.NC_SPACE) + len(depthwise_schedules.NC_MULTI_SPACE)


# Interior fast path vs masked edge path: each case is a (dims, stride, dilation, padding) class in one layout,
# sized so that a cheap schedule has both interior and edge programs.
# (name, N, C, mult, spatial, kernel, stride, pad_before, pad_after, dilation, layout)
DW_PATH_CASES = [
    ("1d_nc", 2, 3, 1, (70,), (5,), (1,), (2,), (2,), (1,), "nc"),
    ("1d_nc_s2_d2_asym_m2", 1, 3, 2, (80,), (3,), (2,), (3,), (1,), (2,), "nc"),
    ("1d_nc_nopad", 1, 5, 1, (45,), (4,), (1,), (0,), (0,), (1,), "nc"),
    ("1d_cl", 2, 32, 1, (24,), (5,), (1,), (2,), (2,), (1,), "cl"),
    ("1d_cl_s2_d2_asym", 1, 32, 1, (40,), (3,), (2,), (1,), (2,), (2,), "cl"),
    ("2d_nc", 1, 2, 1, (11, 40), (3, 3), (1, 1), (1, 1), (1, 1), (1, 1), "nc"),
    ("2d_nc_s2_d2_asym_m3", 1, 2, 3, (13, 70), (3, 2), (2, 1), (2, 0), (0, 1), (2, 3), "nc"),
    ("2d_cl", 1, 16, 1, (9, 9), (3, 3), (1, 1), (1, 1), (1, 1), (1, 1), "cl"),
    ("2d_cl_s2_d2_asym_m2", 1, 16, 2, (11, 12), (3, 2), (2, 1), (1, 2), (2, 0), (2, 2), "cl"),
    ("2d_cl_nopad_odd_c", 1, 24, 1, (7, 8), (2, 3), (1, 1), (0, 0), (0, 0), (1, 1), "cl"),
    ("3d_nc", 1, 2, 1, (5, 6, 34), (3, 3, 3), (1, 1, 1), (1, 1, 1), (1, 1, 1), (1, 1, 1), "nc"),
    ("3d_nc_s2_d2_asym", 1, 2, 1, (7, 9, 70), (3, 2, 3), (2, 1, 2), (1, 0, 2), (2, 1, 0), (1, 2, 1), "nc"),
    ("3d_cl", 1, 16, 1, (4, 10, 10), (3, 3, 3), (1, 1, 1), (1, 1, 1), (1, 1, 1), (1, 1, 1), "cl"),
    ("3d_cl_s2_d2_asym", 1, 32, 1, (6, 7, 9), (2, 3, 2), (2, 1, 2), (1, 2, 0), (0, 1, 1), (2, 1, 2), "cl"),
]


def _path_inputs(case, dtype=torch.float32):
    _, n, c, mult, sp, k, s, pb, pa, d, layout = case
    return _dw_inputs((case[0], n, c, mult, sp, k, s, pb, pa, d, layout, True), dtype)


@triton.jit
def _interior_probe(
    flags_ptr,
    ID,
    IH,
    IW,
    OH,
    OW,
    C_OUT: tl.constexpr,
    KD: tl.constexpr,
    KH: tl.constexpr,
    KW: tl.constexpr,
    SD: tl.constexpr,
    SH: tl.constexpr,
    SW: tl.constexpr,
    PD: tl.constexpr,
    PH: tl.constexpr,
    PW: tl.constexpr,
    DD: tl.constexpr,
    DH: tl.constexpr,
    DW: tl.constexpr,
    BLOCK_H: tl.constexpr,
    BLOCK_W: tl.constexpr,
    BLOCK_C: tl.constexpr,
):
    """Grid (OD, row tiles * column tiles, channel blocks): writes the kernels' interior verdict per tile."""
    n_wt = tl.cdiv(OW, BLOCK_W)
    od = tl.program_id(0)
    ht = tl.program_id(1) // n_wt
    wt = tl.program_id(1) % n_wt
    flag = _tile_is_interior(
        od, ht, wt, tl.program_id(2) * BLOCK_C, ID, IH, IW, OH, OW,
        C_OUT, KD, KH, KW, SD, SH, SW, PD, PH, PW, DD, DH, DW, BLOCK_H, BLOCK_W, BLOCK_C,
    )  # fmt: skip
    pid = (tl.program_id(0) * tl.num_programs(1) + tl.program_id(1)) * tl.num_programs(2) + tl.program_id(2)
    tl.store(flags_ptr + pid, flag.to(tl.int32))


def _kernel_interior_share(problem: ConvProblem, s: Schedule) -> float:
    """The share of tiles the kernels themselves call interior (their `_tile_is_interior`, run per tile)."""
    launch = DW.launches(problem, s)[0]
    k = dict(launch.constexprs)
    sizes = {a.name: a.value for a in launch.args if hasattr(a, "value")}
    n_ct = math.ceil(problem.out_channels / k["BLOCK_C"])
    grid = (sizes["OD"], math.ceil(sizes["OH"] / k["BLOCK_H"]) * math.ceil(sizes["OW"] / k["BLOCK_W"]), n_ct)
    flags = torch.full((math.prod(grid),), -1, dtype=torch.int32)
    names = (
        "KD",
        "KH",
        "KW",
        "SD",
        "SH",
        "SW",
        "PD",
        "PH",
        "PW",
        "DD",
        "DH",
        "DW",
        "BLOCK_H",
        "BLOCK_W",
        "BLOCK_C",
    )
    _interior_probe[grid](
        flags, sizes["ID"], sizes["IH"], sizes["IW"], sizes["OH"], sizes["OW"],
        problem.out_channels, *(k[name] for name in names),
    )  # fmt: skip
    assert bool((flags >= 0).all())
    return float(flags.double().mean())


def _cheapest(problem: ConvProblem, want) -> Schedule:
    """The schedule with the fewest programs whose interior share satisfies ``want``."""
    fits = [s for s in DW.schedules(problem) if want(interior_fraction(problem, s))]
    assert fits, "no schedule gives this case the wanted mix of interior and edge programs"
    return min(fits, key=lambda s: (math.prod(DW.launches(problem, s)[0].grid), -s.num_warps))


@pytest.mark.parametrize("case", DW_PATH_CASES, ids=[c[0] for c in DW_PATH_CASES])
def test_depthwise_interior_and_edge_paths(case):
    """Both paths in one launch: some programs interior (unmasked taps), some on the edge (masked taps)."""
    torch.manual_seed(hash(case[0]) % 2**31)
    x, w, b, p, taps = _path_inputs(case)
    problem = ConvProblem.from_tensors(x, w, b, p, allow_tf32=False)
    s = _cheapest(problem, lambda f: 0.0 < f < 1.0)
    share = interior_fraction(problem, s)
    assert _kernel_interior_share(problem, s) == pytest.approx(share)
    check(DW, x, w, b, p, taps, schedule=s)


@pytest.mark.parametrize("layout", ["nc", "cl"])
def test_depthwise_no_interior_program(layout):
    """Every program on the edge (the tile is wider than the map): only the masked path runs."""
    torch.manual_seed(7)
    case = ("tiny", 2, 16, 1, (5, 6), (3, 3), (1, 1), (1, 1), (1, 1), (1, 1), layout)
    x, w, b, p, taps = _path_inputs(case)
    problem = ConvProblem.from_tensors(x, w, b, p, allow_tf32=False)
    s = _cheapest(problem, lambda f: f == 0.0)
    assert _kernel_interior_share(problem, s) == 0.0
    check(DW, x, w, b, p, taps, schedule=s)


@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
@pytest.mark.parametrize("layout", ["nc", "cl"])
def test_depthwise_paths_half(layout, dtype):
    """The interior path's convert of half inputs (one mixed case per layout)."""
    case = DW_PATH_CASES[0] if layout == "nc" else DW_PATH_CASES[7]
    torch.manual_seed(11)
    x, w, b, p, taps = _path_inputs(case, DTYPES[dtype])
    problem = ConvProblem.from_tensors(x, w, b, p, allow_tf32=False)
    check(DW, x, w, b, p, taps, schedule=_cheapest(problem, lambda f: 0.0 < f < 1.0))


def test_depthwise_16_bit_row_sums_are_fp16_only():
    """The direct channels-last kernel sums filter rows in fp16 only: the template declares the row's length as
    its 16-bit sum (`half_sum_length`, which the GPU checks widen their bound by), the F32_TAPS twins and every
    bf16 or fp32 schedule declare none, and bf16 is offered no twins (its direct schedules are fp32 already)."""
    p = ConvParams((1, 1), (3, 3), (3, 3), (1, 1), False, (0, 0), 32)
    for dtype, row in ((torch.float16, 7), (torch.bfloat16, 0), (torch.float32, 0)):
        x = torch.randn(2, 32, 9, 9, dtype=dtype).to(memory_format=torch.channels_last)
        w = torch.randn(32, 1, 7, 7, dtype=dtype)
        problem = ConvProblem.from_tensors(x, w, None, p, allow_tf32=False)
        space = DW.schedules(problem)
        twins = [s for s in space if dict(s.params).get("F32_TAPS")]
        direct = [s for s in space if not {"TAP_ROWS", "COLS"} & set(dict(s.params)) and s not in twins]
        assert direct and bool(twins) == (dtype == torch.float16)
        assert {DW.half_sum_length(problem, s) for s in direct} == {row}
        assert {DW.half_sum_length(problem, s) for s in twins} <= {0}
        prepared = DW.prepare_weight(w, problem, direct[0])
        assert prepared.dtype == (torch.float16 if row else torch.float32)


_TAPS_CASES = [c for c in DW_CASES if c[10] == "cl"]
_TAPS_PARAMS = [
    (c, d) for d in ("fp32", "fp16", "bf16") for c in _TAPS_CASES if d == "fp32" or c[0] in _DW_HALF
]


@pytest.mark.parametrize(("case", "dtype"), _TAPS_PARAMS, ids=[f"{c[0]}-{d}" for c, d in _TAPS_PARAMS])
def test_depthwise_taps_kernel(case, dtype):
    """The channels-last taps kernel (several taps per load) on every channels-last case: strides, dilations,
    asymmetric padding, channel multipliers, 1-D to 3-D, a partial channel block; one, two and all filter rows
    per load."""
    torch.manual_seed(hash((case[0], dtype, "taps")) % 2**31)
    x, w, b, p, taps = _dw_inputs(case, DTYPES[dtype])
    problem = ConvProblem.from_tensors(x, w, b, p, allow_tf32=False)
    rows_seen = set()
    for rows in (1, 2, 7):
        s = Schedule.make(1, 1, BLOCK_H=2, BLOCK_W=4, BLOCK_C=16, TAP_ROWS=rows)
        effective = tap_rows_and_slots(problem, s)[0]
        if effective in rows_seen:
            continue
        rows_seen.add(effective)
        check(DW, x, w, b, p, taps, schedule=s)


@pytest.mark.parametrize(("case", "dtype"), _TAPS_PARAMS, ids=[f"{c[0]}-{d}" for c, d in _TAPS_PARAMS])
def test_depthwise_columns_kernel(case, dtype):
    """The channels-last columns kernel (each input column of a filter row loaded once, its output columns
    unrolled) on every channels-last case: strides, dilations, asymmetric padding, channel multipliers, 1-D to
    3-D, a partial channel block, a column tile wider than the map."""
    torch.manual_seed(hash((case[0], dtype, "columns")) % 2**31)
    x, w, b, p, taps = _dw_inputs(case, DTYPES[dtype])
    for bw in (4, 8):
        check(DW, x, w, b, p, taps, schedule=Schedule.make(1, 1, BLOCK_H=2, BLOCK_W=bw, BLOCK_C=16, COLS=1))


def test_depthwise_columns_schedules():
    """Columns schedules are offered for channels-last inputs only (a layer this small goes to the taps kernel);
    in fp16 they sum filter rows in fp16 (weights prepared in fp16, one row's length declared as their 16-bit
    sum) except their F32_TAPS twins."""
    p = ConvParams((1, 1), (3, 3), (3, 3), (1, 1), False, (0, 0), 32)
    w = torch.randn(32, 1, 7, 7, dtype=torch.float16)
    for layout, want in (("cl", True), ("nc", False)):
        x = torch.randn(2, 32, 14, 14, dtype=torch.float16)
        if layout == "cl":
            x = x.to(memory_format=torch.channels_last)
        problem = ConvProblem.from_tensors(x, w, None, p, allow_tf32=False)
        columns = [s for s in DW.schedules(problem) if "COLS" in dict(s.params)]
        assert bool(columns) == want
        assert "COLS" not in dict(DW.heuristic_schedule(problem).params)
        for s in columns:
            row_sums = not dict(s.params).get("F32_TAPS")
            assert DW.half_sum_length(problem, s) == (7 if row_sums else 0)
            assert DW.prepare_weight(w, problem, s).dtype == (torch.float16 if row_sums else torch.float32)
            assert DW.takes_epilogue(problem, s)
        assert 2 * sum(bool(dict(s.params).get("F32_TAPS")) for s in columns) == len(columns)  # a twin each


def test_depthwise_taps_schedules_fit_registers():
    """Taps schedules are offered for channels-last inputs only, and only where a thread's share of the loaded
    [positions, slots, channels] tile stays within `TAPS_MAX_PER_THREAD`."""
    cl = ConvProblem.from_shapes(
        (1, 96, 56, 56), (301056, 1, 5376, 96), (96, 1, 7, 7), (49, 1, 7, 1), True,
        ConvParams((1, 1), (3, 3), (3, 3), (1, 1), False, (0, 0), 96), "float16",
    )  # fmt: skip
    offered = [s for s in DW.schedules(cl) if is_taps(s)]
    assert offered
    for s in offered:
        slots = tap_rows_and_slots(cl, s)[1]
        per_thread = s["BLOCK_H"] * s["BLOCK_W"] * s["BLOCK_C"] * slots / (32 * s.num_warps)
        assert per_thread <= depthwise_schedules.TAPS_MAX_PER_THREAD[cl.element_size]
    nc = ConvProblem.from_shapes(
        (1, 96, 56, 56), (301056, 3136, 56, 1), (96, 1, 7, 7), (49, 49, 7, 1), True,
        ConvParams((1, 1), (3, 3), (3, 3), (1, 1), False, (0, 0), 96), "float16",
    )  # fmt: skip
    assert not any(is_taps(s) for s in DW.schedules(nc))


def _dw_cl_problem(n: int, c: int, hw: int, side: int) -> ConvProblem:
    pad = side // 2
    return ConvProblem.from_shapes(
        (n, c, hw, hw), (c * hw * hw, 1, hw * c, c), (c, 1, side, side), (side * side, 1, side, 1), True,
        ConvParams((1, 1), (pad, pad), (pad, pad), (1, 1), False, (0, 0), c), "float16",
    )  # fmt: skip


# (batch, channels, map side, filter side, taps kernel?, filter rows per load)
_TAPS_CHOICES = [
    (1, 96, 56, 7, True, 2),  # ConvNeXt-T's first stage
    (1, 240, 28, 5, True, 5),  # EfficientNet-B0: every row of a 5x5 filter per load
    (1, 384, 14, 3, True, 2),  # a small 3x3 layer
    (1, 96, 56, 3, False, None),  # a 3x3 layer of more than 2^18 outputs
    (1, 16, 28, 3, False, None),  # a 3x3 layer of 16 channels: half of a 32-channel block would be idle
    (32, 96, 56, 7, False, None),  # batch 32: the columns kernel (below)
]


@pytest.mark.parametrize(
    ("n", "c", "hw", "side", "stride", "want_columns"),
    [
        (32, 96, 56, 7, 1, True),  # ConvNeXt-T's batch-32 7x7 layers
        (32, 384, 14, 7, 1, True),
        (32, 768, 7, 7, 1, False),  # a 7x7 map
        (1, 96, 56, 7, 1, False),  # few outputs: the taps kernel
        (32, 240, 28, 5, 1, True),  # EfficientNet-B0's batch-32 5x5 layers on 28x28 maps
        (32, 144, 56, 5, 2, True),
        (8, 240, 28, 5, 1, True),  # the public suite's batch-8 5x5 layer: 1.5M outputs, columns before taps
        (32, 72, 56, 5, 2, True),  # MobileNetV3's batch-32 5x5 stride-2 layer, 1.8M outputs
        (32, 672, 14, 5, 1, False),  # a 5x5 filter on a 14x14 map: the direct kernel
        (32, 144, 56, 3, 1, False),  # a 3x3 filter
        (32, 96, 56, 7, 3, False),  # stride 3
        (32, 96, 56, 6, 1, False),  # a 6x6 filter: not timed
        (32, 96, 56, 9, 1, False),  # a 9x9 filter: not timed
        (32, 16, 112, 7, 1, False),  # 16 channels: half of the tile's channel block idle
    ],
)
def test_depthwise_heuristic_columns_choice(n, c, hw, side, stride, want_columns):
    """The heuristic gives the columns kernel's `COLS_TILE` to the large channels-last layers of 5x5 and 7x7
    filters that `wants_columns` names, and no other."""
    problem = _dw_cl_problem(n, c, hw, side)
    if stride > 1:
        params = dataclasses.replace(problem.params, stride=(stride, stride))
        problem = ConvProblem.from_shapes(
            (n, c, hw, hw),
            problem.input_stride,
            (c, 1, side, side),
            problem.weight_stride,
            True,
            params,
            "float16",
        )
    s = DW.heuristic_schedule(problem)
    assert s in DW.schedules(problem)
    assert is_columns(s) == want_columns
    if want_columns:
        bh, bw, bc, warps = depthwise_schedules.COLS_TILE
        assert (s["BLOCK_H"], s["BLOCK_W"], s["BLOCK_C"], s.num_warps) == (bh, bw, bc, warps)


@pytest.mark.parametrize(("n", "c", "hw", "side", "want_taps", "rows"), _TAPS_CHOICES)
def test_depthwise_heuristic_taps_choice(n, c, hw, side, want_taps, rows):
    """Which channels-last layers the heuristic gives the taps kernel, and how many filter rows per load."""
    problem = _dw_cl_problem(n, c, hw, side)
    s = DW.heuristic_schedule(problem)
    assert s in DW.schedules(problem)
    assert is_taps(s) == want_taps
    if want_taps:
        assert tap_rows_and_slots(problem, s)[0] == rows


def test_depthwise_heuristic_in_space():
    """The heuristic names a schedule of the space for the public suite's depthwise shapes."""
    conformer = ConvProblem.from_shapes(
        (8, 512, 500), (256000, 500, 1), (512, 1, 15), (15, 15, 1), False,
        ConvParams((1,), (7,), (7,), (1,), False, (0,), 512), "float16",
    )  # fmt: skip
    effnet = ConvProblem.from_shapes(
        (8, 240, 28, 28), (188160, 1, 6720, 240), (240, 1, 5, 5), (25, 1, 5, 1), False,
        ConvParams((1, 1), (2, 2), (2, 2), (1, 1), False, (0, 0), 240), "float16",
    )  # fmt: skip
    for problem in (conformer, effnet):
        s = DW.heuristic_schedule(problem)
        assert s in DW.schedules(problem)
        # The conformer's fp16 1-D rows take the band kernel (one masked path, tests/test_depthwise_band.py),
        # EfficientNet's 5x5 at batch 8 (1.5M outputs) the columns kernel.
        assert "SEG" in s.as_dict() if problem is conformer else is_columns(s)


def test_depthwise_supports():
    def prob(c_in, c_out, groups, transposed=False):
        p = ConvParams((1, 1), (1, 1), (1, 1), (1, 1), transposed, (0, 0), groups)
        wsz = (c_in, c_out // groups, 3, 3) if transposed else (c_out, c_in // groups, 3, 3)
        return ConvProblem.from_shapes(
            (2, c_in, 8, 8), (64 * c_in, 64, 8, 1), wsz, (0, 0, 0, 0), False, p, "float32"
        )

    assert DW.supports(prob(8, 8, 8))
    assert DW.supports(prob(8, 24, 8))
    for bad in (prob(8, 8, 1), prob(8, 8, 4), prob(8, 8, 8, transposed=True)):
        verdict = DW.supports(bad)
        assert not verdict and verdict.reason
    fp64 = ConvProblem.from_shapes(
        (2, 8, 8, 8), (512, 64, 8, 1), (8, 1, 3, 3), (9, 9, 3, 1), False,
        ConvParams((1, 1), (1, 1), (1, 1), (1, 1), False, (0, 0), 8), "float64",
    )  # fmt: skip
    assert not DW.supports(fp64)
    strided = ConvProblem.from_shapes(
        (2, 8, 8, 8), (1024, 128, 16, 2), (8, 1, 3, 3), (9, 9, 3, 1), False,
        ConvParams((1, 1), (1, 1), (1, 1), (1, 1), False, (0, 0), 8), "float32",
    )  # fmt: skip
    assert not DW.supports(strided)
    # A forced depthwise template refuses a dense conv with a reason instead of running it.
    with pytest.raises(NoTemplateError), force_conv_candidate(DW):
        select_candidate(prob(8, 8, 1))


# ---- transposed -------------------------------------------------------------------------------------------------
# (name, N, C_in, C_out, spatial, kernel, stride, pad_before, pad_after, dilation, output_padding, groups,
#  layout, bias)
TR_CASES = [
    ("1d_basic", 2, 4, 3, (7,), (3,), (2,), (1,), (1,), (1,), (1,), 1, "nc", True),
    ("1d_k8s4", 1, 6, 5, (6,), (8,), (4,), (2,), (2,), (1,), (0,), 1, "nc", False),
    ("1d_s3_d2_asym_g2", 1, 4, 6, (5,), (4,), (3,), (0,), (3,), (2,), (2,), 2, "nc", True),
    ("1d_gcd2_empty_phases", 2, 3, 4, (6,), (3,), (2,), (1,), (0,), (2,), (1,), 1, "nc", True),
    ("1d_cl_k1_s3", 1, 5, 4, (5,), (1,), (3,), (0,), (0,), (1,), (2,), 1, "cl", True),
    ("1d_s1_d2_op", 1, 3, 2, (6,), (3,), (1,), (2,), (0,), (2,), (1,), 1, "nc", False),
    ("2d_up2x2", 1, 8, 6, (5, 6), (2, 2), (2, 2), (0, 0), (0, 0), (1, 1), (0, 0), 1, "cl", True),
    ("2d_4x4s2p1", 2, 6, 5, (4, 5), (4, 4), (2, 2), (1, 1), (1, 1), (1, 1), (0, 0), 1, "cl", False),
    ("2d_3x3s2op1", 1, 5, 7, (5, 4), (3, 3), (2, 2), (1, 1), (1, 1), (1, 1), (1, 1), 1, "cl", True),
    ("2d_nc_asym_mixed", 1, 4, 6, (4, 5), (3, 4), (3, 2), (2, 0), (0, 3), (1, 2), (2, 1), 2, "nc", True),
    ("2d_nc_dil_gcd", 1, 6, 3, (4, 4), (3, 3), (2, 2), (1, 2), (2, 1), (2, 2), (1, 0), 3, "nc", False),
    ("2d_cl_groups4", 1, 8, 12, (3, 4), (3, 2), (1, 2), (1, 0), (1, 0), (1, 1), (0, 1), 4, "cl", True),
    (
        "3d_up2",
        1,
        4,
        3,
        (3, 4, 3),
        (2, 2, 2),
        (2, 2, 2),
        (0, 0, 0),
        (0, 0, 0),
        (1, 1, 1),
        (0, 0, 0),
        1,
        "cl",
        True,
    ),
    (
        "3d_nc_mixed",
        1,
        3,
        4,
        (3, 3, 4),
        (3, 2, 3),
        (2, 1, 3),
        (1, 0, 2),
        (2, 1, 0),
        (1, 2, 1),
        (1, 0, 2),
        1,
        "nc",
        True,
    ),
]


def _tr_inputs(case, dtype):
    _, n, cin, cout, sp, k, s, pb, pa, d, op, g, layout, has_bias = case
    x = torch.randn(n, cin, *sp).to(dtype)
    w = torch.randn(cin, cout // g, *k).to(dtype)
    b = torch.randn(cout).to(dtype) if has_bias else None
    if layout == "cl":
        x = _channels_last(x)
        if len(sp) > 1:
            w = _channels_last(w)
    p = ConvParams(s, pb, pa, d, True, op, g)
    reduction = (cin // g) * max(
        1,
        math.prod(math.ceil(kk / max(1, ss // math.gcd(ss, dd))) for kk, ss, dd in zip(k, s, d, strict=True)),
    )
    return x, w, b, p, reduction


def _module_for(case, w, b):
    """The real nn.ConvTransposeNd with these weights, when the padding is symmetric (else None)."""
    _, _, cin, cout, sp, k, s, pb, pa, d, op, g, _, _ = case
    if pb != pa or any(o >= max(ss, dd) for o, ss, dd in zip(op, s, d, strict=True)):
        return None
    cls = {1: torch.nn.ConvTranspose1d, 2: torch.nn.ConvTranspose2d, 3: torch.nn.ConvTranspose3d}[len(sp)]
    m = cls(cin, cout, k, stride=s, padding=pb, output_padding=op, groups=g, bias=b is not None, dilation=d)
    with torch.no_grad():
        m.weight.copy_(w.float())
        if b is not None:
            m.bias.copy_(b.float())
    return m


_TR_HALF = {"1d_k8s4", "2d_4x4s2p1", "2d_nc_asym_mixed", "3d_up2", "1d_gcd2_empty_phases"}
_TR_PARAMS = [(c, d) for d in ("fp32", "fp16", "bf16") for c in TR_CASES if d == "fp32" or c[0] in _TR_HALF]


@pytest.mark.parametrize(("case", "dtype"), _TR_PARAMS, ids=[f"{c[0]}-{d}" for c, d in _TR_PARAMS])
def test_transposed_numerics(case, dtype):
    torch.manual_seed(hash((case[0], dtype)) % 2**31)
    x, w, b, p, reduction = _tr_inputs(case, DTYPES[dtype])
    module = _module_for(case, w, b) if dtype == "fp32" else None
    check(TR, x, w, b, p, reduction, schedule=fewest_programs(TR, x, w, b, p), module=module)


def test_transposed_every_schedule():
    torch.manual_seed(3)
    # Channels-last input: C_in = C_out = 80 so that every block size is allowed.
    x = _channels_last(torch.randn(1, 80, 3, 4))
    w = _channels_last(torch.randn(80, 80, 2, 2))
    b = torch.randn(80)
    p = ConvParams((2, 2), (1, 0), (0, 1), (1, 1), True, (1, 0), 1)
    # Exact fp32, as `check` runs it (the F16_MMA schedules of fp32 with TF32: test_transposed_f16_mma.py).
    problem = ConvProblem.from_tensors(x, w, b, p, allow_tf32=False)
    schedules = TR.schedules(problem)
    assert len(schedules) == len(TransposedTemplate.CL_SPACE)
    for s in schedules:
        check(TR, x, w, b, p, 80, schedule=s)
    # Contiguous input: the row-tiled variant as well (one 1-D shape).
    x1 = torch.randn(2, 80, 9)
    w1 = torch.randn(80, 80, 4)
    p1 = ConvParams((2,), (1,), (1,), (1,), True, (0,), 1)
    prob1 = ConvProblem.from_tensors(x1, w1, None, p1, allow_tf32=False)
    nc_schedules = TR.schedules(prob1)
    assert len(nc_schedules) == len(TransposedTemplate.NC_ROW_SPACE) + len(TransposedTemplate.NC_FLAT_SPACE)
    for s in nc_schedules:
        check(TR, x1, w1, None, p1, 80 * 2, schedule=s)


def test_transposed_phase_geometry():
    # k=3, s=2: phase 0 gets taps {0, 2}, phase 1 gets {1}; d=2, s=2: phase 1 gets nothing.
    assert phase_taps(3, 2, 1) == [[0, 2], [1]]
    assert phase_taps(3, 2, 2) == [[0, 1, 2], []]
    assert phase_taps(1, 3, 1) == [[0], [], []]
    assert sum(phase_counts(11, 3, 2)) == 11
    assert phase_counts(64, 2, 1) == [32, 32]


def test_transposed_supports():
    p = ConvParams((2, 2), (0, 0), (0, 0), (1, 1), False, (0, 0), 1)
    fwd = ConvProblem.from_shapes(
        (1, 4, 8, 8), (256, 64, 8, 1), (4, 4, 2, 2), (16, 4, 2, 1), False, p, "float32"
    )
    verdict = TR.supports(fwd)
    assert not verdict and "transposed" in verdict.reason
    pt = ConvParams((2, 2), (0, 0), (0, 0), (1, 1), True, (0, 0), 1)
    tr = ConvProblem.from_shapes(
        (1, 4, 8, 8), (256, 64, 8, 1), (4, 4, 2, 2), (16, 4, 2, 1), False, pt, "float16"
    )
    assert TR.supports(tr)
    assert not DW.supports(tr)


# ---- ahead-of-time compilation ----------------------------------------------------------------------------------
def _aot_problems():
    """One problem per kernel variant whose schedule list is the whole tuning space, in two dtypes."""
    dwcl = ConvProblem.from_shapes(
        (1, 80, 8, 20), (12800, 1, 1600, 80), (80, 1, 2, 2), (4, 4, 2, 1), True,
        ConvParams((1, 1), (1, 1), (1, 1), (1, 1), False, (0, 0), 80), "float16",
    )  # fmt: skip
    dwnc = ConvProblem.from_shapes(
        (1, 8, 33, 1000), (264000, 33000, 1000, 1), (8, 1, 1, 2), (2, 2, 2, 1), True,
        ConvParams((1, 1), (1, 1), (1, 1), (1, 1), False, (0, 0), 8), "float32",
    )  # fmt: skip
    trcl = ConvProblem.from_shapes(
        (1, 128, 8, 8), (8192, 1, 1024, 128), (128, 128, 2, 2), (512, 1, 256, 128), True,
        ConvParams((2, 2), (0, 0), (0, 0), (1, 1), True, (0, 0), 1), "bfloat16",
    )  # fmt: skip
    trnc = ConvProblem.from_shapes(
        (2, 128, 100), (12800, 100, 1), (128, 128, 4), (512, 4, 1), False,
        ConvParams((4,), (0,), (0,), (1,), True, (0,), 1), "float32",
    )  # fmt: skip
    # A 7x7 filter gives the taps kernel its real slot counts (8, 16 and 64 taps per load).
    dwcl7 = ConvProblem.from_shapes(
        (1, 96, 14, 14), (18816, 1, 1344, 96), (96, 1, 7, 7), (49, 1, 7, 1), True,
        ConvParams((1, 1), (3, 3), (3, 3), (1, 1), False, (0, 0), 96), "bfloat16",
    )  # fmt: skip
    return [(DW, dwcl), (DW, dwcl7), (DW, dwnc), (TR, trcl), (TR, trnc)]


@pytest.mark.timeout(900)
def test_every_schedule_compiles_aot(monkeypatch):
    """Every schedule of both templates compiles for sm_80 and sm_90 (no GPU); the two arches in parallel."""
    from concurrent.futures import ThreadPoolExecutor

    aot = pytest.importorskip("cuda_triton.kernel.aot")
    # Build the launches exactly as an export (no interpreter) does.
    monkeypatch.setattr("cuda_triton.conv.templates._interpreter.interpreting", lambda: False)
    launches = {}
    for template, problem in _aot_problems():
        assert template.supports(problem)
        for schedule in template.schedules(problem):
            # The F32_TAPS twins of 16-bit direct schedules compile the fp32-product path: one problem's are enough.
            if "F32_TAPS" in dict(schedule.params) and problem.kernel != (7, 7):
                continue
            for launch in template.launches(problem, schedule):
                launches.setdefault(aot.compile_cache_key(launch, 90), launch)
    depthwise_space = (
        len(depthwise_schedules.CL_SPACE)
        + len(depthwise_schedules.NC_SPACE)
        + len(depthwise_schedules.NC_MULTI_SPACE)
        + len(depthwise_schedules.TAPS_SPACE)
    )
    assert len(launches) >= depthwise_space + len(TransposedTemplate.CL_SPACE)
    todo = list(launches.values())
    with ThreadPoolExecutor(2) as pool:
        results = dict(
            zip((80, 90), pool.map(lambda arch: aot.compile_launches(todo, arch), (80, 90)), strict=True)
        )
    for arch, kernels in results.items():
        assert len(kernels) == len(todo)
        for launch, kernel in zip(todo, kernels, strict=True):
            assert kernel.cubin and kernel.arch == arch and kernel.num_warps == launch.num_warps
