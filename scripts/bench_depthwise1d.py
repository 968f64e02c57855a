#!/usr/bin/env python
"""Time every schedule of the depthwise template on 1-D depthwise convolutions next to cuDNN (GPU).

    PYTHONPATH=backends python scripts/bench_depthwise1d.py --out $OUT/dw1d [--jobs 16] [--budget-s 55]

Cases: the public suite's conformer.dw15 (N=8, C=512, L=500, k=15, pad 7, fp16/bf16/fp32) and a few other 1-D
depthwise shapes (batch 1 and 8, C 256..1024, L 100..4000, k 3..31). For each case every schedule the template
offers (direct kernels and the band kernel) first runs once on a NaN-poisoned output checked element by element
against an fp32 ATen reference, then is timed; cuDNN is ``F.conv1d`` with ``cudnn.benchmark=True`` on the same
operands. The operands, the error bound and the timing (median over replays of a CUDA graph of back-to-back calls
rotating through enough operand copies to overflow L2) are scripts/tune.py's, so numbers compare with the tuning
table's. Kernels are compiled ahead of the timing loop by --jobs worker processes (tune.warm_job).

Writes OUT/bench_depthwise1d.json (every candidate's time or error) and OUT/bench_depthwise1d.txt (per case:
cuDNN, the heuristic's schedule, the best direct and the best band schedule, the DRAM floor).
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import json
import multiprocessing as mp
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
if str(ROOT / "backends") not in sys.path:
    sys.path.insert(0, str(ROOT / "backends"))

import torch  # noqa: E402
import tune  # noqa: E402

HBM_BYTES_PER_S = 4.3e12  # H200, as the module docstring's floor

# (name, N, C, L, kernel, padding, dtypes)
CASES: list[tuple[str, int, int, int, int, int, tuple[str, ...]]] = [
    ("conformer.dw15", 8, 512, 500, 15, 7, ("float16", "bfloat16", "float32")),
    ("conformer.dw15.n1", 1, 512, 500, 15, 7, ("float16",)),
    ("aligned.dw15", 8, 512, 512, 15, 7, ("float16",)),
    ("wide.dw31", 8, 256, 1000, 31, 15, ("float16",)),
    ("short.dw3", 8, 1024, 100, 3, 1, ("float16",)),
    ("long.dw5", 1, 256, 4000, 5, 2, ("bfloat16",)),
]


def make_problem(n: int, c: int, length: int, k: int, pad: int, dtype: str):
    from cuda_triton.conv import ConvParams, ConvProblem

    params = ConvParams((1,), (pad,), (pad,), (1,), False, (0,), c)
    return ConvProblem.from_shapes(
        (n, c, length), (c * length, length, 1), (c, 1, k), (k, k, 1), True, params, dtype
    )


def run_case(label: str, problem, env: tune.Env, deadline: float) -> dict[str, Any]:
    from cuda_triton.conv.op import reference_convolution
    from cuda_triton.conv.templates import get_template

    template = get_template("depthwise")
    ops = tune.make_operands(problem, env)
    nrot = len(ops.inputs)
    heuristic = template.heuristic_schedule(problem)
    rows: list[dict[str, Any]] = []
    for schedule in template.schedules(problem):
        row: dict[str, Any] = {"schedule": schedule.as_dict(), "band": "SEG" in schedule.as_dict()}
        rows.append(row)
        if time.monotonic() > deadline:
            row["error"] = "skipped: --budget-s reached"
            continue
        try:
            run = tune.schedule_runner(template, problem, schedule, ops)
            ops.outputs[0].fill_(float("nan"))
            run(0)
            tune._sync(env)
            ok, ratio = tune.check_output(ops.outputs[0], ops)
            row["max_err_ratio"] = ratio
            if not ok:
                row["error"] = f"numerics: max |err|/bound = {ratio:.3g}"
                continue
            row["time_us"], row["method"], _ = tune.time_us(run, nrot, env)
        except Exception as e:  # one schedule's failure must not stop the others
            row["error"] = f"{type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"
            tune._sync_quiet(env)
    cudnn_us, _, _ = tune.time_us(
        lambda i: reference_convolution(ops.inputs[i], ops.weights[i], ops.biases[i], problem.params),
        nrot,
        env,
    )
    timed = [r for r in rows if "time_us" in r]
    h = next((r for r in rows if r["schedule"] == heuristic.as_dict()), None)
    return {
        "case": label,
        "dtype": problem.dtype,
        "signature": problem.signature(),
        "floor_us": problem.min_bytes() / HBM_BYTES_PER_S * 1e6,
        "cudnn_us": cudnn_us,
        "heuristic": {"schedule": heuristic.as_dict(), "time_us": None if h is None else h.get("time_us")},
        "best_direct": min((r for r in timed if not r["band"]), key=lambda r: r["time_us"], default=None),
        "best_band": min((r for r in timed if r["band"]), key=lambda r: r["time_us"], default=None),
        "candidates": rows,
    }


def _fmt(row: dict[str, Any] | None) -> str:
    if row is None or row.get("time_us") is None:
        return f"{'-':>8} {'':<40}"
    key = "_".join(f"{k}{v}" for k, v in row["schedule"].items() if k != "num_stages")
    return f"{row['time_us']:8.2f} {key:<40}"


def table(results: list[dict[str, Any]]) -> str:
    lines = [
        f"{'case':<20} {'dtype':<9} {'floor':>6} {'cuDNN':>7} {'heur':>8} {'best direct':>8} {'':<31}"
        f" {'best band':>8}",
    ]
    for r in results:
        lines.append(
            f"{r['case']:<20} {r['dtype']:<9} {r['floor_us']:6.2f} {r['cudnn_us']:7.2f} "
            f"{(r['heuristic']['time_us'] or float('nan')):8.2f} {_fmt(r['best_direct'])} {_fmt(r['best_band'])}"
        )
        errors = [c for c in r["candidates"] if "error" in c]
        for c in errors:
            lines.append(f"    ERROR {c['schedule']}: {c['error']}")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--jobs", type=int, default=16, help="compile worker processes")
    ap.add_argument("--budget-s", type=float, default=55.0, help="stop timing new schedules after this")
    ap.add_argument("--rep-ms", type=float, default=2.0, help="GPU time per CUDA graph replay")
    ap.add_argument("--repeats", type=int, default=7, help="graph replays per schedule (median)")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("needs an NVIDIA GPU", file=sys.stderr)
        return 2
    from cuda_triton.conv.templates import get_template
    from cuda_triton.conv.tuning_keys import problem_spec

    t0 = time.monotonic()
    deadline = t0 + args.budget_s
    problems = [
        (name, make_problem(n, c, length, k, pad, dt))
        for name, n, c, length, k, pad, dtypes in CASES
        for dt in dtypes
    ]
    template = get_template("depthwise")
    # Compile every (problem, schedule) ahead of time in worker processes (fills Triton's on-disk cache).
    with cf.ProcessPoolExecutor(max_workers=args.jobs, mp_context=mp.get_context("spawn")) as pool:
        futs = [
            pool.submit(tune.warm_job, problem_spec(p), "depthwise", [s.as_dict()])
            for _, p in problems
            for s in template.schedules(p)
        ]
        compile_errors = [e for f in cf.as_completed(futs) for e in f.result()[1]]
    print(f"compiled {len(futs)} kernels in {time.monotonic() - t0:.1f} s", file=sys.stderr)
    for e in compile_errors:
        print(f"compile error: {e}", file=sys.stderr)

    props = torch.cuda.get_device_properties(0)
    env = tune.Env(
        device=torch.device("cuda"),
        cuda=True,
        arch=props.major * 10 + props.minor,
        l2_bytes=getattr(props, "L2_cache_size", 50 << 20),
        rep_ms=args.rep_ms,
        repeats=args.repeats,
        max_rotations=64,
        prune=1e9,  # time every schedule precisely
    )
    env.stream = torch.cuda.Stream(env.device)
    torch.backends.cudnn.benchmark = True
    results = []
    for name, problem in problems:
        results.append(run_case(name, problem, env, deadline))
        print(table(results[-1:]).splitlines()[-1], file=sys.stderr)
    args.out.mkdir(parents=True, exist_ok=True)
    meta = {"device": props.name, "torch": torch.__version__, "seconds": round(time.monotonic() - t0, 1)}
    (args.out / "bench_depthwise1d.json").write_text(
        json.dumps({"meta": meta, "compile_errors": compile_errors, "results": results}, indent=1)
    )
    text = table(results)
    (args.out / "bench_depthwise1d.txt").write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
