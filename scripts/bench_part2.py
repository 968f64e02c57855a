"""GPU numerics, schedule sweep and cuDNN comparison for the depthwise and transposed templates (issue 5).

    PYTHONPATH=backends python scripts/bench_part2.py --out OUT [--count 240] [--dtypes float16,bfloat16,float32]

1. Numerics: ``--count`` random shapes from ``numerics_cases.gen_depthwise``/``gen_transposed`` (half each),
   every schedule on two random cases per family, and the suite cases below in every dtype; each with a fresh
   input, output NaN-poisoned in the layout rule's strides, every element checked against fp32 ATen (TF32 off).
2. Timing (same method as scripts/bench_conv.py: median GPU time of CUDA-graph replays, warm L2): cuDNN
   (PyTorch eager, cudnn.benchmark=True, TF32 allowed for fp32), ours with the heuristic schedule, and ours with
   every schedule (the best is reported as "tuned").
Every kernel is compiled first by a pool of worker processes (bench_conv.warm), then everything runs in order.
Writes OUT/part2.json and OUT/part2.txt.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
import time
import traceback
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_conv  # noqa: E402
import numerics_cases as nc  # noqa: E402


def _case(name, N, C, spatial, K, kernel, stride, pb, pa, dil, groups=1, transposed=False, op=None, cl=True):
    dims = len(spatial)
    return {
        "name": name,
        "N": N,
        "C": C,
        "K": K,
        "spatial": spatial,
        "kernel": kernel,
        "stride": stride,
        "pad_before": pb,
        "pad_after": pa,
        "dilation": dil,
        "groups": groups,
        "transposed": transposed,
        "output_padding": op or (0,) * dims,
        "channels_last": cl,
        "bias": False,
    }


# The depthwise and transposed cases of bench/public_suite.py (same geometry and memory format).
SUITE = [
    _case("effnet.dw5x5", 8, 240, (28, 28), 240, (5, 5), (1, 1), (2, 2), (2, 2), (1, 1), 240),
    _case("convnext.dw7x7", 8, 96, (56, 56), 96, (7, 7), (1, 1), (3, 3), (3, 3), (1, 1), 96),
    _case("conformer.dw15", 8, 512, (500,), 512, (15,), (1,), (7,), (7,), (1,), 512, cl=False),
    _case("x3d.dw3x3x3", 4, 96, (16, 28, 28), 96, (3, 3, 3), (1, 1, 1), (1, 1, 1), (1, 1, 1), (1, 1, 1), 96),
    _case("unet.up2x2.128", 4, 128, (128, 128), 64, (2, 2), (2, 2), (0, 0), (0, 0), (1, 1), 1, True),
    _case("fcn.up4x4s2", 8, 64, (64, 64), 64, (4, 4), (2, 2), (1, 1), (1, 1), (1, 1), 1, True),
    _case("gan.3x3s2op1", 8, 128, (32, 32), 64, (3, 3), (2, 2), (1, 1), (1, 1), (1, 1), 1, True, (1, 1)),
    _case("demucs.up8s4", 4, 256, (1500,), 128, (8,), (4,), (2,), (2,), (1,), 1, True, cl=False),
    _case(
        "unet3d.up2", 2, 128, (16, 32, 32), 64, (2, 2, 2), (2, 2, 2), (0, 0, 0), (0, 0, 0), (1, 1, 1), 1, True
    ),
]


def family(case: nc.Case) -> str:
    return "transposed" if case["transposed"] else "depthwise"


def template_of(name: str):
    from cuda_triton.conv.templates.depthwise import TEMPLATES as DW
    from cuda_triton.conv.templates.transposed import TEMPLATES as TR

    return {"depthwise": DW[0], "transposed": TR[0]}[name]


def run_forced(case: nc.Case, x, w, b, schedule=None) -> tuple[torch.Tensor, Any]:
    """Our template for the case (forced, heuristic or given schedule) through the op's CUDA body."""
    from cuda_triton.conv.templates import force_conv_candidate

    t = template_of(family(case))
    with force_conv_candidate(t, schedule):
        out = torch.ops.triton.convolution(x, w, b, *nc.params_of(case).as_op_args())
    return out


def _warm_worker(job: tuple[nc.Case, dict | None]) -> tuple[str, str]:
    case, schedule = job
    label = nc.case_label(case) + (f"/{schedule}" if schedule else "")
    try:
        from cuda_triton.kernel.launch import Schedule

        x, w, b = nc.make_tensors(case, "cuda")
        run_forced(case, x, w, b, Schedule.from_dict(schedule) if schedule else None)
        torch.cuda.synchronize()
        return label, "ok"
    except Exception as e:
        return label, f"{type(e).__name__}: {str(e)[:300]}"


def warm(jobs: list[tuple[nc.Case, dict | None]], workers: int, deadline_s: float) -> dict[str, str]:
    """Compile in ``workers`` spawned processes (fills Triton's on-disk cache) until done or the deadline."""
    import multiprocessing as mp

    status: dict[str, str] = {}
    t0 = time.time()
    with mp.get_context("spawn").Pool(workers, maxtasksperchild=64) as pool:
        pending = pool.imap_unordered(_warm_worker, jobs)
        for _ in range(len(jobs)):
            left = deadline_s - (time.time() - t0)
            if left <= 0:
                break
            try:
                label, st = pending.next(timeout=left)
            except mp.TimeoutError:
                break
            status[label] = st
        pool.terminate()
    return status


def numerics_one(case: nc.Case, seed: int, schedule=None) -> dict[str, Any]:
    rec: dict[str, Any] = {"label": nc.case_label(case), "case": case}
    if schedule is not None:
        rec["schedule"] = schedule.as_dict()
    try:
        x, w, b = nc.make_tensors(case, "cuda", seed)
        ref = nc.reference(case, x, w, b)
        torch.cuda.synchronize()
        poison = torch.full((max(1, ref.numel()),), float("nan"), device="cuda", dtype=x.dtype)
        del poison
        out = run_forced(case, x, w, b, schedule)
        torch.cuda.synchronize()
        want = reference_layout(case, x, w, b)
        rec.update(nc.compare(case, out, ref, x, w, torch.backends.cudnn.allow_tf32))
        if out.stride() != want.stride():
            rec.update(ok=False, error=f"strides {out.stride()} != {want.stride()}")
        rec["status"] = "ok" if rec["ok"] else "FAIL"
    except Exception as e:
        rec.update(
            status="ERROR", error=f"{type(e).__name__}: {e}"[:500], trace=traceback.format_exc()[-1500:]
        )
    return rec


def reference_layout(case, x, w, b) -> torch.Tensor:
    from cuda_triton.conv.op import output_layout

    sizes, strides = output_layout(x, w, nc.params_of(case))
    return torch.empty_strided(sizes, strides, device="meta")


def time_case(case: nc.Case, scheds: list[Any], reps: int) -> dict[str, Any]:
    from cuda_triton.conv import ConvProblem

    row: dict[str, Any] = {"label": nc.case_label(case), "case": case}
    try:
        x, w, b = nc.make_tensors(case, "cuda")
        problem = ConvProblem.from_tensors(x, w, b, nc.params_of(case))
        row["floor_us"] = bench_conv.roofline_us(case, problem)
        p = nc.params_of(case)
        from cuda_triton.conv.op import reference_convolution

        row["cudnn_us"], _ = bench_conv.time_gpu_us(lambda: reference_convolution(x, w, b, p), reps)
        t = template_of(family(case))
        heur = t.heuristic_schedule(problem)
        row["heuristic"] = heur.as_dict()
        row["ours_us"], row["mode"] = bench_conv.time_gpu_us(lambda: run_forced(case, x, w, b, heur), reps)
        sweep = []
        for s in scheds:
            try:
                us, _ = bench_conv.time_gpu_us(lambda s=s: run_forced(case, x, w, b, s), max(5, reps // 3))
                sweep.append((us, s.as_dict()))
            except Exception as e:  # a schedule that fails to launch is a bug: record it
                sweep.append((float("inf"), {**s.as_dict(), "error": str(e)[:200]}))
        sweep.sort(key=lambda r: r[0])
        row["sweep"] = sweep
        if sweep:
            row["best_us"], row["best"] = sweep[0]
    except Exception as e:
        row["error"] = f"{type(e).__name__}: {e}"[:500]
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--count", type=int, default=240)
    ap.add_argument("--seed", type=int, default=5)
    ap.add_argument("--dtypes", default="float16,bfloat16,float32")
    ap.add_argument("--workers", type=int, default=14)
    ap.add_argument("--compile-timeout", type=float, default=170.0)
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--no-sweep", action="store_true", help="time only the heuristic schedule")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    t_start = time.time()

    import cuda_triton.conv  # noqa: F401
    from cuda_triton.conv import ConvProblem

    torch.backends.cudnn.benchmark = True
    rng = random.Random(args.seed)
    dtypes = args.dtypes.split(",")

    # ---- plan ----
    numerics_plan: list[tuple[str, nc.Case, Any]] = []
    for i in range(args.count):
        fam = ("depthwise", "transposed")[i % 2]
        numerics_plan.append(("random:" + fam, nc.CASE_GENERATORS[fam](rng), None))
    for fam in ("depthwise", "transposed"):
        found = 0
        while found < 2:
            case = nc.CASE_GENERATORS[fam](rng)
            x, w, b = nc.make_tensors(case, "meta")
            problem = ConvProblem.from_tensors(x, w, b, nc.params_of(case))
            if problem.batch * math.prod(problem.out_spatial) > 50000:
                continue
            found += 1
            for s in template_of(fam).schedules(problem):
                numerics_plan.append(("schedules:" + fam, case, s))
    bench_plan: list[tuple[nc.Case, list[Any]]] = []
    for dtype in dtypes:
        for c in SUITE:
            case = dict(c, dtype=dtype)
            x, w, b = nc.make_tensors(case, "meta")
            problem = ConvProblem.from_tensors(x, w, b, nc.params_of(case))
            t = template_of(family(case))
            scheds = [] if args.no_sweep else t.schedules(problem)
            bench_plan.append((case, scheds))
            numerics_plan.append(("suite", case, None))

    # ---- compile everything in parallel ----
    jobs = [(c, s.as_dict() if s is not None else None) for _, c, s in numerics_plan]
    for case, scheds in bench_plan:
        jobs += [(case, s.as_dict()) for s in scheds]
    t0 = time.time()
    status = warm(jobs, args.workers, args.compile_timeout)
    warm_fail = {k: v for k, v in status.items() if v != "ok"}
    print(
        f"warmed {len(status)}/{len(jobs)} kernels in {time.time() - t0:.0f} s; failures {len(warm_fail)}",
        flush=True,
    )
    for k, v in list(warm_fail.items())[:10]:
        print("  warm failure:", k, v)

    # ---- numerics ----
    t0 = time.time()
    records = []
    for i, (group, case, sched) in enumerate(numerics_plan):
        rec = numerics_one(case, args.seed * 7919 + i, sched)
        rec["group"] = group
        records.append(rec)
        if rec["status"] != "ok":
            print(
                f"{rec['status']}: {group} {rec['label']} {rec.get('error', '')} ratio {rec.get('max_ratio')}",
                flush=True,
            )
    fails = [r for r in records if r["status"] != "ok"]
    worst = max((r.get("max_ratio", 0.0) for r in records if r["status"] == "ok"), default=0.0)
    num_text = (
        f"numerics: {len(records)} cases ({sum(r['group'].startswith('random') for r in records)} random), "
        f"{len(fails)} failures, worst passing error/tolerance {worst:.3f}, {time.time() - t0:.0f} s"
    )
    print(num_text, flush=True)

    # ---- timing ----
    rows = []
    for case, scheds in bench_plan:
        row = time_case(case, scheds, args.reps)
        rows.append(row)
        print(
            f"{row['label']:34} cudnn {row.get('cudnn_us', float('nan')):8.1f} ours {row.get('ours_us', float('nan')):8.1f} "
            f"best {row.get('best_us', float('nan')):8.1f} floor {row.get('floor_us', float('nan')):6.1f} "
            f"{row.get('best', '')} {row.get('error', '')}",
            flush=True,
        )

    lines = [
        num_text,
        "",
        f"{'case':34} {'cuDNN us':>9} {'ours us':>9} {'x':>6} {'tuned us':>9} {'x':>6} {'floor':>7}",
    ]
    summary: dict[str, dict[str, list[float]]] = {}
    for row in rows:
        if "ours_us" not in row:
            lines.append(f"{row['label']:34} ERROR {row.get('error', '')}")
            continue
        sp = row["cudnn_us"] / row["ours_us"]
        spt = row["cudnn_us"] / row.get("best_us", row["ours_us"])
        key = f"{family(row['case'])}/{row['case']['dtype']}"
        summary.setdefault(key, {"heur": [], "tuned": []})
        summary[key]["heur"].append(sp)
        summary[key]["tuned"].append(spt)
        lines.append(
            f"{row['label']:34} {row['cudnn_us']:9.1f} {row['ours_us']:9.1f} {sp:6.2f} {row.get('best_us', 0):9.1f} "
            f"{spt:6.2f} {row['floor_us']:7.1f}"
        )
    lines.append("")
    for key, d in sorted(summary.items()):
        lines.append(
            f"geomean speed-up over cuDNN {key:22} heuristic {bench_conv.gmean(d['heur']):5.2f}  "
            f"tuned {bench_conv.gmean(d['tuned']):5.2f}  min {min(d['heur']):5.2f}"
        )
    lines.append(
        f"device {torch.cuda.get_device_name()}, torch {torch.__version__}, total {time.time() - t_start:.0f} s"
    )
    text = "\n".join(lines)
    print(text)
    (args.out / "part2.txt").write_text(text + "\n")
    (args.out / "part2.json").write_text(
        json.dumps({"numerics": records, "bench": rows, "warm_failures": warm_fail}, indent=1, default=str)
    )


if __name__ == "__main__":
    main()
