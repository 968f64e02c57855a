#!/usr/bin/env python
"""Experiment: the Gluon conv main loop fed by 4-D TMA boxes of the unpadded channels-last input (vgg.3x3.256).

    python scripts/exp_gluon_box.py --check-compile            # any machine: compile for sm_90, inspect the PTX
    PYTHONPATH=backends python scripts/exp_gluon_box.py --out $OUT/gluon   # GPU: check against ATen, time vs cuDNN

Why (docs/performance.md, session 6): a stride-1 conv's A tile for tap (kh, kw) is a rectangle of pixels of the
channels-last input, [BOX_N images, BH rows, BW columns, BK channels], whose out-of-bounds part (the padding) the
TMA unit zero-fills, so it needs no padded copy and no mask. Plain Triton (3.6, 3.7) turns the reshape of such a
box to the [BM, BK] MMA operand into a shared -> register -> shared round trip; Gluon's ``memdesc`` reshape is a
view of the same shared memory, so ``wgmma`` reads both operands from shared memory (`--check-compile` checks
that: the 4-D ``cp.async.bulk.tensor`` and descriptor-only ``wgmma`` operands).

The kernel became the ``implicit_gemm_box`` template (templates/implicit_gemm_box.py) after its first measurement
(H200, 2026-12-03 10:48 UTC, docs/bench/h200-2026-12-03-1048-gluon-box.json); this script runs that template's
kernel at the configurations measured then, so the experiment can be rerun.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "backends"))
sys.path.insert(0, str(ROOT / "scripts"))

from cuda_triton.conv import ConvProblem  # noqa: E402
from cuda_triton.conv.params import ConvParams  # noqa: E402
from cuda_triton.conv.templates import get_template  # noqa: E402
from cuda_triton.kernel.launch import Schedule  # noqa: E402

# (BOX_N, BH, BW, BN, BK, STAGES, warps): 8 x 8 pixel boxes tile 56-wide maps exactly.
CONFIGS = (
    (2, 8, 8, 128, 64, 4, 8),
    (2, 8, 8, 256, 64, 3, 8),
    (1, 8, 8, 128, 64, 4, 4),
    (2, 8, 8, 128, 64, 3, 8),
    (4, 8, 8, 128, 64, 3, 8),
)


def schedule_of(cfg: tuple[int, ...]) -> Schedule:
    box_n, bh, bw, bn, bk, stages, warps = cfg
    return Schedule.make(warps, stages, BOX_N=box_n, BOX_H=bh, BOX_W=bw, BLOCK_N=bn, BLOCK_K=bk)


def check_compile() -> int:
    """Compile every config for sm_90 here and report whether wgmma reads A from shared memory."""
    from cuda_triton.kernel.aot import compile_launches

    template = get_template("implicit_gemm_box")
    x = torch.empty((8, 256, 56, 56), device="meta", dtype=torch.float16)
    w = torch.empty((256, 256, 3, 3), device="meta", dtype=torch.float16)
    params = ConvParams((1, 1), (1, 1), (1, 1), (1, 1), False, (0, 0), 1)
    problem = ConvProblem.from_tensors(x.contiguous(memory_format=torch.channels_last), w, None, params)
    ok = True
    for cfg in CONFIGS:
        (compiled,) = compile_launches(template.launches(problem, schedule_of(cfg)), 90)
        operands = re.findall(r"wgmma\.mma_async[^\n]*\}, (%\w+), (%\w+),", compiled.ptx)
        smem_a = bool(operands) and all(a.startswith("%rd") for a, _ in operands)
        box = "cp.async.bulk.tensor.4d" in compiled.ptx
        ok &= smem_a and box
        print(
            f"{cfg}: shared {compiled.shared} B, 4-D TMA box {box}, "
            f"wgmma A from shared memory {smem_a} ({len(operands)} wgmma)"
        )
    return 0 if ok else 1


def run_gpu(out: Path) -> int:
    """vgg.3x3.256 fp16 from the public suite: every config checked element by element against ATen (the
    project's tolerance, NaN-poisoned output), then timed next to cuDNN."""
    import numerics_cases as nc
    from bench_conv import DEFAULT_SUITE, load_suite, time_gpu_us

    out.mkdir(parents=True, exist_ok=True)
    torch.backends.cudnn.benchmark = True
    (vgg,) = [c for c in load_suite(DEFAULT_SUITE) if c.name == "vgg.3x3.256"]
    case = nc.case_from_suite(vgg, "float16")
    x, wt, _ = nc.make_tensors(case, "cuda")
    ref = nc.reference(case, x, wt, None)
    template = get_template("implicit_gemm_box")
    problem = ConvProblem.from_tensors(x, wt, None, nc.params_of(case))
    sizes, strides = problem.output_size, problem.output_stride
    y = torch.empty_strided(sizes, strides, device="cuda", dtype=x.dtype)
    cudnn_us = time_gpu_us(lambda: torch.nn.functional.conv2d(x, wt, padding=1))[0]
    results: list[dict] = [{"variant": "cudnn", "us": cudnn_us}]
    print(f"cudnn {cudnn_us:.1f} us", flush=True)
    for cfg in CONFIGS:
        schedule = schedule_of(cfg)
        tensors = {
            "input": x,
            "weight": template.prepare_weight(wt, problem, schedule),
            "bias": None,
            "output": y,
        }
        launches = template.launches(problem, schedule)

        def run(launches=launches, tensors=tensors) -> None:
            for launch in launches:
                launch.run(tensors)

        try:
            y.fill_(float("nan"))
            run()
            check = nc.compare(case, y, ref, x, wt)
            us = time_gpu_us(run)[0]
        except Exception as e:  # a config that does not compile or launch on this Triton
            results.append({"config": cfg, "error": f"{type(e).__name__}: {e}"[:400]})
            print(f"{cfg}: ERROR {type(e).__name__}: {str(e)[:200]}", flush=True)
            continue
        results.append({"config": cfg, "us": us, **check})
        print(f"{cfg}: {us:.1f} us ({cudnn_us / us:.2f}x cuDNN), check {check}", flush=True)
    (out / "gluon_box.json").write_text(json.dumps(results, indent=1))
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check-compile", action="store_true", help="compile for sm_90 only (no GPU needed)")
    ap.add_argument("--out", type=Path, help="GPU run: results directory")
    args = ap.parse_args()
    if args.check_compile:
        return check_compile()
    if args.out is None:
        ap.error("--out is required for a GPU run")
    return run_gpu(args.out)


if __name__ == "__main__":
    raise SystemExit(main())
