"""Host overhead and eager speed of ``torch.ops.triton.convolution`` against cuDNN's eager convolution (GPU).

    PYTHONPATH=backends python scripts/bench_eager_op.py --out OUT [--dtypes float16,bfloat16,float32]
        [--cases NAME,...] [--calls 100] [--reps 15] [--profile-calls 0]

For every case of the public suite (bench/public_suite.py) and dtype, each side called eagerly as a PyTorch user
calls it (ours: the op; cuDNN: ``aten.convolution`` with ``cudnn.benchmark=True``, as scripts/bench_conv.py):

* host us: CPU wall time of ``--calls`` back-to-back calls with no synchronisation, per call: what the host spends
  issuing one call (the eager op's overhead; the target is at most 20 us);
* gpu us: the kernels' GPU time per call (CUDA-graph replays, `bench_conv.time_gpu_us`);
* eager us: wall time of the same calls up to the synchronisation after the last, per call: what an eager caller
  sees, about max(host, gpu);
* for ours also the body alone (``dispatch.convolution``, the op without PyTorch's dispatcher) and the
  dispatcher's floor (a do-nothing Python kernel registered with the op's schema), which split ours' host time.

``--profile-calls N`` also runs the body N more times per case under cProfile and writes the profile summed over
every case to OUT/body_profile.txt (functions by own time): where the body's host time goes.

Prints a table and, per dtype, the geomean of eager speed ours/cuDNN (cuDNN eager us / ours eager us) and the
median and worst host us of ours; writes OUT/eager.json and OUT/eager.txt. Every case is checked against an fp32
reference (output poisoned with NaN) before it is timed. Our kernels are compiled first by a pool of workers
(`cuda_triton.tools.warmup.warm_cases`), so the timed process loads them from Triton's cache.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "backends"))
import bench_conv  # noqa: E402
from cuda_triton.tools import conv_cases as nc  # noqa: E402
from cuda_triton.tools.bench_report import gmean  # noqa: E402
from cuda_triton.tools.suites import PUBLIC_SUITE, load_suite  # noqa: E402
from cuda_triton.tools.warmup import CaseWarmup, warm_cases  # noqa: E402


def host_and_eager_us(fn, calls: int, reps: int) -> tuple[float, float]:
    """Medians over ``reps`` rounds of (host us, eager us) per call for ``calls`` back-to-back calls of ``fn``."""
    fn()
    torch.cuda.synchronize()
    host, eager = [], []
    for _ in range(reps):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        t1 = time.perf_counter()
        torch.cuda.synchronize()
        t2 = time.perf_counter()
        host.append((t1 - t0) / calls * 1e6)
        eager.append((t2 - t0) / calls * 1e6)
    return statistics.median(host), statistics.median(eager)


def dispatcher_floor() -> Any:
    """A do-nothing CUDA kernel registered under the op's schema: PyTorch's dispatch cost of one call of it."""
    from cuda_triton.conv.op import SCHEMA

    lib = torch.library.Library("eager_bench_floor", "FRAGMENT")
    lib.define(SCHEMA)
    lib.impl("convolution", lambda input, *rest: input, "CUDA")
    return lib


def run_case(
    case: nc.Case, calls: int, reps: int, profiler: cProfile.Profile | None, profile_calls: int
) -> dict[str, Any]:
    from cuda_triton.conv import dispatch

    x, w, b = nc.make_tensors(case, "cuda")
    p = nc.params_of(case)
    args = p.as_op_args()
    rec: dict[str, Any] = {"label": nc.case_label(case), "dtype": case["dtype"]}
    ours = bench_conv.ours_call(case, x, w, b)
    cudnn = bench_conv.cudnn_call(case, x, w, b)
    rec["ours_check"] = bench_conv.check(case, ours, x, w, b, half_sum=nc.half_sum_length(case, x, w, b))
    rec["cudnn_check"] = bench_conv.check(case, cudnn, x, w, b)
    plan = dispatch.plan_for(x, w, b, p)
    rec["launches"] = len(getattr(plan, "launches", []))
    rec["plan"] = type(plan).__name__
    rec["bound"] = bool(getattr(plan, "bound", False))
    if isinstance(plan, dispatch.ConvPlan):
        rec["template"] = plan.candidate.template.name
    floor = torch.ops.eager_bench_floor.convolution
    sides = {
        "ours": ours,
        "cudnn": cudnn,
        "body": lambda: dispatch.convolution(x, w, b, *args),
        "floor": lambda: floor(x, w, b, *args),
    }
    for name, fn in sides.items():
        rec[f"{name}_host_us"], rec[f"{name}_eager_us"] = host_and_eager_us(fn, calls, reps)
    if profiler is not None:
        body = sides["body"]
        profiler.enable()
        for _ in range(profile_calls):
            body()
        profiler.disable()
        torch.cuda.synchronize()
    gpu = bench_conv.time_side_by_side({"ours": ours, "cudnn": cudnn}, reps)
    rec["ours_gpu_us"], rec["cudnn_gpu_us"] = gpu["ours"][0], gpu["cudnn"][0]
    rec["speed"] = rec["cudnn_eager_us"] / rec["ours_eager_us"]
    return rec


def render(rows: list[dict[str, Any]]) -> str:
    head = (
        f"{'case':44} {'dtype':9} {'ok':3} {'L':>2} {'host':>7} {'body':>7} {'floor':>6} {'gpu':>8} {'eager':>8}"
        f" | {'cuDNN host':>10} {'gpu':>8} {'eager':>8} | {'speed':>6}"
    )
    lines = ["host/gpu/eager: us per call (ours first, then cuDNN); L: our launches per call; speed: eager cuDNN/ours",
             head, "-" * len(head)]  # fmt: skip
    for r in rows:
        if "error" in r:
            lines.append(f"{r['label']:44} {r['dtype']:9} ERROR {r['error'][:80]}")
            continue
        ok = "ok" if r["ours_check"].get("ok") and r["cudnn_check"].get("ok") else "BAD"
        lines.append(
            f"{r['label'][:44]:44} {r['dtype']:9} {ok:3} {r['launches']:>2} {r['ours_host_us']:7.1f}"
            f" {r['body_host_us']:7.1f} {r['floor_host_us']:6.1f} {r['ours_gpu_us']:8.1f} {r['ours_eager_us']:8.1f}"
            f" | {r['cudnn_host_us']:10.1f} {r['cudnn_gpu_us']:8.1f} {r['cudnn_eager_us']:8.1f} | {r['speed']:5.2f}x"
        )
    lines.append("")
    for dtype in dict.fromkeys(r["dtype"] for r in rows):
        done = [r for r in rows if r["dtype"] == dtype and "error" not in r]
        if not done:
            continue
        host = [r["ours_host_us"] for r in done]
        lines.append(
            f"{dtype:9} eager speed ours/cuDNN geomean {gmean([r['speed'] for r in done]):.2f}x"
            f" (worst {min(r['speed'] for r in done):.2f}x); host us of ours median {statistics.median(host):.1f},"
            f" worst {max(host):.1f}; cuDNN median {statistics.median(r['cudnn_host_us'] for r in done):.1f};"
            f" {len(done)} cases"
        )
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--suite", type=Path, default=PUBLIC_SUITE)
    ap.add_argument("--dtypes", default="float16,bfloat16,float32")
    ap.add_argument("--cases", default="", help="comma-separated substrings of case names to keep")
    ap.add_argument("--calls", type=int, default=100, help="back-to-back calls per timed round")
    ap.add_argument("--reps", type=int, default=15, help="timed rounds (medians)")
    ap.add_argument("--workers", type=int, default=max(1, min(14, (os.cpu_count() or 2) - 2)))
    ap.add_argument(
        "--profile-calls", type=int, default=0, help="body calls per case under cProfile (0: none)"
    )
    ap.add_argument(
        "--compile-timeout", type=float, default=300.0, help="seconds for all of our JIT compiles"
    )
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)

    import cuda_triton.conv  # noqa: F401  (registers torch.ops.triton.convolution)

    torch.backends.cudnn.benchmark = True
    keep = [s for s in args.cases.split(",") if s]
    cases = [
        nc.case_from_suite(c, dtype)
        for dtype in args.dtypes.split(",")
        for c in load_suite(args.suite)
        if not keep or any(k in c.name for k in keep)
    ]
    t0 = time.time()
    status = warm_cases([CaseWarmup("ours", c) for c in cases], args.workers, args.compile_timeout)
    print(f"warmed {sum(v == 'ok' for v in status.values())}/{len(cases)} cases in {time.time() - t0:.0f} s")
    _floor = dispatcher_floor()  # noqa: F841  (the registration lives as long as the library object)
    rows = []
    profiler = cProfile.Profile() if args.profile_calls > 0 else None
    for case in cases:
        try:
            rows.append(run_case(case, args.calls, args.reps, profiler, args.profile_calls))
        except Exception as e:  # a failing case is reported in the table, the others still run
            rows.append(
                {"label": nc.case_label(case), "dtype": case["dtype"], "error": f"{type(e).__name__}: {e}"}
            )
        print(render(rows[-1:]).splitlines()[3], flush=True)  # the case's row
    text = render(rows)
    meta = {
        "gpu": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "calls": args.calls,
        "reps": args.reps,
    }
    (args.out / "eager.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1, default=str))
    (args.out / "eager.txt").write_text(text + "\n")
    print(text)
    if profiler is not None:
        summary = io.StringIO()
        pstats.Stats(profiler, stream=summary).sort_stats("tottime").print_stats(30)
        (args.out / "body_profile.txt").write_text(summary.getvalue())


if __name__ == "__main__":
    main()
