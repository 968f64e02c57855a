"""The depthwise template's band kernel (contiguous fp16/bf16 input, W stride 1): a tile of (image, segment)
rows of one channel times a banded weight matrix, on the tensor cores.

Every schedule of BAND_SPACE runs under the interpreter against ATen (outputs NaN-poisoned first), on 1-D shapes
(the 1-D kernel: vector widths 1, 2, 4 and 8) with dilation, asymmetric padding, channel multiplier 2, with and
without bias, and on 2-D/3-D planes (the general kernel, strides along H/D); the heuristic picks it for 1-D rows
with 7+ taps like conformer.dw15 and keeps the direct kernels for short filters and everything else;
every band kernel compiles ahead of time for sm_80 and sm_90.
"""

from __future__ import annotations

import os

os.environ.setdefault("TRITON_INTERPRET", "1")  # as conftest does on CPU machines


import pytest  # noqa: E402
import torch  # noqa: E402
from cuda_triton.conv.params import ConvParams  # noqa: E402
from cuda_triton.conv.problem import ConvProblem  # noqa: E402
from cuda_triton.conv.templates.depthwise import schedules as depthwise_schedules  # noqa: E402
from cuda_triton.conv.templates.depthwise.geometry import band_geometry, interior_fraction  # noqa: E402
from cuda_triton.conv.templates.depthwise.geometry import is_band as _is_band  # noqa: E402
from cuda_triton.conv.templates.depthwise.kernels import _depthwise_band1d_kernel  # noqa: E402
from cuda_triton.conv.templates.depthwise.schedules import BAND_MIN_TAPS  # noqa: E402
from cuda_triton.kernel.launch import Schedule  # noqa: E402
from test_templates_part2 import DTYPES, DW, _dw_inputs, check  # noqa: E402

# (name, N, C, mult, spatial, kernel, stride, pad_before, pad_after, dilation, layout, bias)
BAND_CASES = [
    ("1d_k15_same", 2, 3, 1, (70,), (15,), (1,), (7,), (7,), (1,), "nc", True),
    ("1d_d2_asym_m2", 2, 2, 2, (45,), (5,), (1,), (3,), (1,), (2,), "nc", False),
    ("1d_nopad_n8", 8, 2, 1, (150,), (4,), (1,), (0,), (0,), (1,), "nc", True),
    ("1d_vec8_n8", 8, 2, 1, (600,), (4,), (1,), (2,), (1,), (1,), "nc", False),
    ("1d_conformer_c2", 8, 2, 1, (500,), (15,), (1,), (7,), (7,), (1,), "nc", True),
    ("1d_long", 1, 2, 1, (1100,), (3,), (1,), (1,), (1,), (1,), "nc", False),
    ("1d_bigpad_k31", 1, 2, 1, (40,), (31,), (1,), (17,), (9,), (1,), "nc", False),
    ("2d_s2h_dil", 2, 2, 1, (7, 40), (3, 3), (2, 1), (1, 1), (0, 1), (1, 2), "nc", True),
    ("3d_m2", 1, 2, 2, (3, 4, 20), (2, 3, 3), (1, 2, 1), (1, 1, 1), (0, 0, 1), (2, 1, 1), "nc", False),
]


def _band_schedules(problem: ConvProblem) -> list[Schedule]:
    return [s for s in DW.schedules(problem) if _is_band(s)]


@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
@pytest.mark.parametrize("case", BAND_CASES, ids=[c[0] for c in BAND_CASES])
def test_band_every_schedule(case, dtype):
    torch.manual_seed(hash((case[0], dtype)) % 2**31)
    x, w, b, p, taps = _dw_inputs(case, DTYPES[dtype])
    problem = ConvProblem.from_tensors(x, w, b, p)
    schedules = _band_schedules(problem)
    assert schedules, "the band kernel should serve this problem"
    for s in schedules:
        check(DW, x, w, b, p, taps, schedule=s)


def test_band_space_is_covered():
    """Between them the 1-D cases offer every schedule of BAND_SPACE (so each one ran above)."""
    covered: set[Schedule] = set()
    for case in BAND_CASES:
        x, w, b, p, _ = _dw_inputs(case, torch.float16)
        covered.update(_band_schedules(ConvProblem.from_tensors(x, w, b, p)))
    assert len(covered) == len(depthwise_schedules.BAND_SPACE)


def _conformer(dtype: str, stride: int = 1, cl: bool = False) -> ConvProblem:
    x_stride = (256000, 1, 512) if cl else (256000, 500, 1)
    return ConvProblem.from_shapes(
        (8, 512, 500), x_stride, (512, 1, 15), (15, 15, 1), False,
        ConvParams((stride,), (7,), (7,), (1,), False, (0,), 512), dtype,
    )  # fmt: skip


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_heuristic_picks_band_for_1d_rows(dtype):
    problem = _conformer(dtype)
    s = DW.heuristic_schedule(problem)
    assert _is_band(s) and s in DW.schedules(problem)
    assert band_geometry(problem) == (8, 16)
    assert interior_fraction(problem, s) == 0.0  # one masked path, no interior split
    # Whole rows per program, 2+ programs per SM of an H200, no padding waste beyond the last segment: the 07:03
    # sweep's winner (IMG 8, SEG 32, SEGS 16, 4 warps), on the 1-D kernel's 2-D grid.
    launch = DW.launches(problem, s)[0]
    assert launch.fn is _depthwise_band1d_kernel
    assert launch.grid == (512, 1, 1) and s == Schedule.make(4, 1, SEG=32, SEGS=16, IMG=8)
    assert dict(launch.constexprs)["VEC"] == 4  # L = 500: 8-byte window loads and stores


def _row(n: int, c: int, length: int, k: int, dtype: str = "float16") -> ConvProblem:
    """The 1-D shapes of scripts/bench_depthwise1d.py: contiguous, stride 1, 'same' padding."""
    return ConvProblem.from_shapes(
        (n, c, length), (c * length, length, 1), (c, 1, k), (k, k, 1), False,
        ConvParams((1,), (k // 2,), (k // 2,), (1,), False, (0,), c), dtype,
    )  # fmt: skip


def test_heuristic_keeps_direct_for_short_filters():
    """Band only from BAND_MIN_TAPS taps, as the 07:03 H200 sweep (us, best band vs best direct): short.dw3
    (N=8, C=1024, L=100) 8.43 vs 3.66 and long.dw5 (N=1, C=256, L=4000, bf16) 3.96 vs 3.80 stay direct;
    conformer.dw15 (6.16 vs 10.16), its N=1 row (3.05 vs 3.36) and wide.dw31 (6.72 vs 17.58) take the band, each
    on the schedule that won there."""
    for problem in (_row(8, 1024, 100, 3), _row(1, 256, 4000, 5, "bfloat16"), _row(8, 512, 500, 5)):
        assert any(_is_band(s) for s in DW.schedules(problem))  # offered to the tuner, not picked
        assert not _is_band(DW.heuristic_schedule(problem))
    won = {
        (8, 512, 500, 15): Schedule.make(4, 1, SEG=32, SEGS=16, IMG=8),
        (1, 512, 500, 15): Schedule.make(1, 1, SEG=16, SEGS=16, IMG=1),
        (8, 512, 512, 15): Schedule.make(4, 1, SEG=32, SEGS=16, IMG=8),
        (8, 256, 1000, 31): Schedule.make(4, 1, SEG=32, SEGS=16, IMG=8),
    }
    for shape, schedule in won.items():
        assert DW.heuristic_schedule(_row(*shape)) == schedule, shape
    assert _is_band(DW.heuristic_schedule(_row(8, 512, 500, BAND_MIN_TAPS)))


def test_band_not_offered_elsewhere():
    """fp32, channels-last input and W stride 2 keep the direct kernels' space exactly."""
    for problem in (_conformer("float32"), _conformer("float16", cl=True), _conformer("float16", stride=2)):
        assert band_geometry(problem) is None
        assert not any(_is_band(s) for s in DW.schedules(problem))
        assert not _is_band(DW.heuristic_schedule(problem))
    # 2-D planes are offered the band kernel (tuning may pick it) but the heuristic keeps the direct kernel.
    plane = ConvProblem.from_shapes(
        (8, 64, 32, 32), (65536, 1024, 32, 1), (64, 1, 3, 3), (9, 9, 3, 1), False,
        ConvParams((1, 1), (1, 1), (1, 1), (1, 1), False, (0, 0), 64), "float16",
    )  # fmt: skip
    assert _band_schedules(plane)
    assert not _is_band(DW.heuristic_schedule(plane))


def test_band_kernels_compile_aot(monkeypatch):
    """Every band schedule compiles for sm_80 and sm_90 (fp16 every schedule, bf16 and a 2-D plane the
    heuristic's / first one), with the ABI the C++ runtime expects; the two arches in parallel."""
    from concurrent.futures import ThreadPoolExecutor

    aot = pytest.importorskip("cuda_triton.kernel.aot")
    monkeypatch.setattr("cuda_triton.conv.templates._interpreter.interpreting", lambda: False)
    fp16 = _conformer("float16")
    plane = ConvProblem.from_shapes(
        (2, 16, 9, 40), (5760, 360, 40, 1), (32, 1, 3, 5), (15, 15, 5, 1), True,
        ConvParams((2, 1), (1, 2), (1, 2), (1, 1), False, (0, 0), 16), "bfloat16",
    )  # fmt: skip
    launches = [DW.launches(fp16, s)[0] for s in _band_schedules(fp16)]
    launches.append(DW.launches(_conformer("bfloat16"), DW.heuristic_schedule(_conformer("bfloat16")))[0])
    launches.append(DW.launches(plane, _band_schedules(plane)[0])[0])
    assert all(dict(la.constexprs)["DOT_FP32"] is False for la in launches)
    with ThreadPoolExecutor(2) as pool:
        results = dict(
            zip((80, 90), pool.map(lambda arch: aot.compile_launches(launches, arch), (80, 90)), strict=True)
        )
    for arch, kernels in results.items():
        assert len(kernels) == len(launches)
        for launch, kernel in zip(launches, kernels, strict=True):
            assert kernel.cubin and kernel.arch == arch and kernel.num_warps == launch.num_warps
            assert kernel.param_types == ("ptr",) * 4 + ("i32",) * 6
            aot.check_entry(launch, kernel.ptx, kernel.param_types)
    # 1-D: the window is read once per program, (SEG + TAIL) / SEG <= 2 loads per output and thread, not once
    # per tap (15 narrow loads per output in the direct kernel).
    for launch, kernel in zip(launches, results[90], strict=False):
        k = dict(launch.constexprs)
        if k["KD"] * k["KH"] == 1:
            per_thread = k["IMG"] * k["SEGS"] * k["SEG"] // (32 * launch.num_warps)
            assert kernel.ptx.count("ld.global.b16") <= 2 * per_thread, launch
    # The conformer row (L = 500, VEC 4): window loads and stores are 8-byte vectors, no 2-byte accesses.
    heur = results[90][len(launches) - 2].ptx
    assert "ld.global.v2.b32" in heur and "st.global.v2.b32" in heur
    assert "ld.global.b16" not in heur and "st.global.b16" not in heur
