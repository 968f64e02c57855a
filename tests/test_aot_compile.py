"""Every schedule of the implicit-GEMM and GEMM templates compiles ahead of time for sm_80 and sm_90, no GPU.

One representative problem per template (plus fp32 and grouped/flat-K variants); each distinct kernel is
compiled once per arch (compile_cache_key deduplicates). Also checks the AOT signature against the PTX entry.
"""

from __future__ import annotations

import os

os.environ.setdefault("TRITON_INTERPRET", "1")  # as conftest does on CPU machines; aot.py copes with it

from concurrent.futures import ThreadPoolExecutor  # noqa: E402

import pytest  # noqa: E402
from cuda_triton.conv import ConvParams, ConvProblem  # noqa: E402
from cuda_triton.conv.templates import get_template  # noqa: E402
from cuda_triton.kernel.aot import (  # noqa: E402
    AotCompileError,
    CompiledKernel,
    check_entry,
    compile_cache_key,
    compile_launches,
)
from cuda_triton.kernel.launch import KernelLaunch, ScalarArg, TensorArg  # noqa: E402

ARCHS = (80, 90)


def _cl_strides(n: int, c: int, h: int, w: int) -> tuple[int, ...]:
    return (h * w * c, 1, w * c, c)


def _problem(n, c, k, hw, kernel, stride=1, pad=0, dilation=1, groups=1, dtype="float16", cl=True):
    h, w = hw
    x_stride = _cl_strides(n, c, h, w) if cl else (c * h * w, h * w, w, 1)
    cg = c // groups
    w_stride = (
        (cg * kernel * kernel, 1, kernel * cg, cg)
        if cl
        else (cg * kernel * kernel, kernel * kernel, kernel, 1)
    )
    p = ConvParams((stride,) * 2, (pad,) * 2, (pad,) * 2, (dilation,) * 2, False, (0, 0), groups)
    return ConvProblem.from_shapes(
        (n, c, h, w), x_stride, (k, cg, kernel, kernel), w_stride, True, p, dtype, True
    )


# (template, problem, every schedule?): the representative problems compile every schedule of their template
# (fp32 has its own big-tile BLOCK_K), the variants (grouped, FLAT_K, contiguous, patchify) their heuristic one.
CASES = [
    ("implicit_gemm", _problem(8, 256, 256, (28, 28), 3, pad=1), True),
    ("implicit_gemm", _problem(8, 256, 256, (28, 28), 3, pad=1, dtype="float32"), True),
    ("gemm", _problem(8, 256, 512, (28, 28), 1), True),
    (
        "implicit_gemm",
        _problem(4, 224, 224, (28, 28), 3, pad=1, groups=28, dtype="bfloat16", cl=False),
        False,
    ),
    ("implicit_gemm", _problem(1, 3, 64, (64, 64), 7, stride=2, pad=3), False),  # FLAT_K
    ("implicit_gemm", _problem(4, 32, 64, (16, 96), 3, pad=1, dtype="float32", cl=False), False),  # ROW_TILES
    ("gemm", _problem(8, 256, 512, (28, 28), 1, dtype="float32", cl=False), False),
    ("gemm", _problem(8, 3, 768, (64, 64), 16, stride=16), False),
    # Few tiles, long K: split-K schedules (the main kernel with SPLIT_K and the reduction kernel).
    ("implicit_gemm", _problem(1, 512, 512, (7, 7), 3, pad=1), True),
    ("gemm", _problem(1, 1152, 192, (7, 7), 1, dtype="float32"), False),
    # A contiguous input with many channels: copied to channels-last first (CL_COPY), also with split-K.
    ("implicit_gemm", _problem(4, 128, 128, (32, 32), 3, pad=1, cl=False), False),
    ("implicit_gemm", _problem(1, 512, 256, (7, 7), 3, pad=1, dtype="bfloat16", cl=False), False),
    # > 2^31 elements: 64-bit indexing (shapes only, nothing is allocated)
    ("implicit_gemm", _problem(64, 256, 256, (512, 512), 3, pad=1), False),
    ("gemm", _problem(64, 256, 256, (512, 512), 1), False),
    # TMA implicit GEMM (every schedule; 16-bit only) and a tail-split implicit GEMM (deeplab at batch 4).
    ("implicit_gemm_tma", _problem(8, 256, 256, (28, 28), 3, pad=1), True),
    ("implicit_gemm_tma", _problem(8, 256, 256, (28, 28), 3, pad=1, dtype="bfloat16"), False),
    # Gluon box implicit GEMM (every schedule; sm_90 compiles the Gluon kernel, sm_80 its Triton twin), and a
    # contiguous bf16 input (a channels-last copy first).
    ("implicit_gemm_box", _problem(8, 256, 256, (56, 56), 3, pad=1), True),
    ("implicit_gemm_box", _problem(2, 64, 96, (30, 50), 5, pad=2, dtype="bfloat16", cl=False), False),
    # fp32: F16_MMA=2 (the scaled fp16 copy) and TF32 schedules (fp32 boxes, A rounded in registers), every one;
    # strided fp32 (r18.l2: the 5-D view) too.
    ("implicit_gemm_box", _problem(8, 256, 256, (56, 56), 3, pad=1, dtype="float32"), True),
    ("implicit_gemm_box", _problem(32, 64, 128, (56, 56), 3, stride=2, pad=1, dtype="float32"), True),
    ("implicit_gemm", _problem(4, 512, 512, (65, 65), 3, pad=2, dilation=2), False),
]


def _unique_launches() -> dict[str, tuple[str, KernelLaunch]]:
    """Launches to compile, one per distinct kernel; a schedule already compiled for another problem of the same
    template (e.g. fp16) is not compiled again for fp32 (only fp32's own big-tile BLOCK_K variants are)."""
    unique: dict[str, tuple[str, KernelLaunch]] = {}
    seen: set[tuple[str, object]] = set()
    for name, problem, every in CASES:
        template = get_template(name)
        assert template.supports(problem), (name, template.supports(problem).reason)
        schedules = template.schedules(problem)
        heuristic = template.heuristic_schedule(problem)
        assert heuristic in schedules
        chosen = [s for s in schedules if (name, s) not in seen] if every else [heuristic]
        seen.update((name, s) for s in schedules)
        for schedule in chosen:
            for launch in template.launches(problem, schedule):
                key = compile_cache_key(launch, 90)
                unique.setdefault(key, (f"{name}/{problem.dtype}/{schedule.key()}", launch))
    return unique


@pytest.mark.timeout(2400)  # compiles every schedule for two archs: 16 minutes on a loaded 2-core machine
def test_every_schedule_compiles() -> None:
    unique = _unique_launches()
    labels = [label for label, _ in unique.values()]
    launches = [launch for _, launch in unique.values()]
    with ThreadPoolExecutor(2) as pool:  # one compile process per arch, side by side
        by_arch = dict(
            zip(ARCHS, pool.map(lambda arch: compile_launches(launches, arch), ARCHS), strict=True)
        )
    for arch, compiled in by_arch.items():
        assert len(compiled) == len(launches)
        _check_compiled(arch, labels, launches, compiled)


def _check_compiled(arch, labels, launches, compiled) -> None:
    for label, launch, ck in zip(labels, launches, compiled, strict=True):
        assert isinstance(ck, CompiledKernel), label
        assert ck.arch == arch and ck.cubin and ".entry" in ck.ptx, label
        # A warp-specialised Gluon kernel adds a warpgroup for its copy partition (box template, WS=1).
        ws = arch == 90 and bool(dict(launch.constexprs).get("WS"))
        assert ck.num_warps == launch.num_warps + (4 if ws else 0), label
        assert ck.param_types == tuple("ptr" if isinstance(a, TensorArg) else a.type for a in launch.args)
        assert ck.shared <= 232448, f"{label}: {ck.shared} B of shared memory"
        assert ck.name == launch.for_arch(arch).name
        check_entry(launch, ck.ptx, ck.param_types)  # 4 pointers + 7 int32 + 2 scratch pointers


def test_row_tiles_and_copy_variants_are_covered() -> None:
    name, problem, _ = CASES[5]
    assert get_template(name).heuristic_schedule(problem)["ROW_TILES"] == 1
    copies = [CASES[i] for i in (10, 11)]
    for name, problem, _ in copies:
        schedule = get_template(name).heuristic_schedule(problem)
        assert dict(schedule.params).get("CL_COPY") == 1, schedule
    assert dict(get_template("implicit_gemm").heuristic_schedule(CASES[11][1]).params).get("SPLIT_K", 1) > 1


def test_tail_split_is_covered() -> None:
    name, problem, _ = CASES[-1]
    assert dict(get_template(name).heuristic_schedule(problem).params).get("TAIL_SPLIT", 1) > 1


def test_big_problems_index_in_64_bits() -> None:
    for name, problem, _ in CASES:
        launches = get_template(name).launches(problem, get_template(name).heuristic_schedule(problem))
        (launch,) = [la for la in launches if la.name.startswith("conv_")]  # not the copy/reduce kernels
        # (the TMA template has no 64-bit path: it refuses such problems)
        assert dict(launch.constexprs).get("INT64", False) == (
            problem.batch * problem.in_channels >= 64 * 256
        ), name


def test_cache_key_separates_arch_and_schedule() -> None:
    name, problem, _ = CASES[0]
    t = get_template(name)
    s0, s1 = t.schedules(problem)[:2]
    l0, l1 = t.launches(problem, s0)[0], t.launches(problem, s1)[0]
    assert compile_cache_key(l0, 90) == compile_cache_key(t.launches(problem, s0)[0], 90)
    assert compile_cache_key(l0, 90) != compile_cache_key(l0, 80)
    assert compile_cache_key(l0, 90) != compile_cache_key(l1, 90)


def test_entry_mismatch_is_a_clear_error() -> None:
    name, problem, _ = CASES[2]
    t = get_template(name)
    launch = t.launches(problem, t.heuristic_schedule(problem))[0]
    ptx = ".visible .entry conv_gemm_kernel(\n\t.param .u64 .ptr .global .align 1 p0,\n\t.param .u32 p1\n)\n{\n}\n"
    with pytest.raises(AotCompileError, match="parameters"):
        check_entry(launch, ptx, ("ptr",) * 4 + ("i32",) * 7)
    # A launch whose argument list disagrees with the kernel's parameters is refused before compiling.
    bad = KernelLaunch(
        launch.fn, launch.args + (ScalarArg("extra", "i32", 1),), launch.constexprs, launch.grid, 4, 3
    )
    with pytest.raises(AotCompileError, match="runtime parameters"):
        compile_cache_key(bad, 90)


@pytest.mark.timeout(600)
def test_kernel_stats_reports_and_diffs(tmp_path) -> None:
    """`scripts/kernel_stats.py`: ptxas usage and PTX counts of a problem's launches, and `diff` of two runs."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    spec = {
        "input_size": [1, 16, 12, 12], "input_stride": [2304, 1, 192, 16], "weight_size": [16, 1, 5, 5],
        "weight_stride": [25, 1, 5, 1], "has_bias": True, "dtype": "float16", "allow_tf32": True,
        "stride": [1, 1], "padding_before": [2, 2], "padding_after": [2, 2], "dilation": [1, 1],
        "transposed": False, "output_padding": [0, 0], "groups": 16,
    }  # fmt: skip
    (tmp_path / "p.json").write_text(json.dumps([spec]))
    env = {**os.environ, "PYTHONPATH": str(root / "backends")}
    env.pop("TRITON_INTERPRET", None)
    script = str(root / "scripts" / "kernel_stats.py")
    out = tmp_path / "a.json"
    subprocess.run([sys.executable, script, f"json:{tmp_path / 'p.json'}", "--json", str(out)], env=env,
                   check=True, capture_output=True, timeout=500)  # fmt: skip
    rows = json.loads(out.read_text())["rows"]
    assert rows and all(r["registers"] > 0 and r["spill_stores"] >= 0 and r["st_global"] > 0 for r in rows)
    same = subprocess.run(
        [sys.executable, script, "diff", str(out), str(out)], capture_output=True, text=True
    )
    assert same.returncode == 0 and f"0 of {len(rows)} launches differ" in same.stdout
    rows[0]["ptx_sha256"], rows[0]["registers"] = "0" * 16, rows[0]["registers"] + 8
    (tmp_path / "b.json").write_text(json.dumps({"arch": 90, "rows": rows}))
    changed = subprocess.run([sys.executable, script, "diff", str(out), str(tmp_path / "b.json")],
                             capture_output=True, text=True)  # fmt: skip
    assert changed.returncode == 1 and "registers" in changed.stdout
