"""Benchmark ``torch.ops.triton.convolution`` against cuDNN and Inductor on the public suite (GPU).

    PYTHONPATH=backends python scripts/bench_conv.py --out OUT [--tune] [--no-inductor] [--md]

For every case of the suite (bench/public_suite.py) and every dtype:
  * ours: the op (heuristic schedule, or the shipped tuning table's), and with --tune the best of every schedule
    of every template that supports the case;
  * cuDNN: PyTorch eager (aten.convolution, cudnn.benchmark=True; fp32 with TF32 allowed, PyTorch's conv default);
  * Inductor: torch.compile(mode="max-autotune-no-cudagraphs") with conv backends = TRITON only ('n/a' when it
    cannot compile the case);
each beside its roofline floor max(flops / peak, min bytes / bandwidth).

Timing (cuda_triton.tools.timing.time_side_by_side): GPU time per call, median over many replays of a CUDA graph
holding several calls, so the host's launch overhead is excluded for every contender (the C++ runtime launches a
kernel in ~4 us); the contenders of a case are replayed in interleaved rounds after a warm-up burn. The L2 cache
is warm (inference layers run back to back). Every case is checked against an fp32 ATen reference, output
poisoned with NaN, before it is timed.

Our kernels are compiled ahead of the timing loop by a pool of worker processes (they fill Triton's on-disk
cache; the main process then loads from it). Inductor's max-autotune compiles run first in the same pool (they fill
Inductor's FX-graph and autotune caches); the main process then compiles each case again (a cache hit) under
--inductor-timeout, and reads the generated code to tell a Triton-template kernel from an ATen fallback. Cases the
planner says Inductor's template cannot take (dilated, transposed, most 1-D) are reported 'n/a' with its reason
unless --inductor-all. Without --tune a
full run (17 target cases x 3 dtypes) takes about 5 minutes on the H200 machine; --tune adds ~5 s a case.
Writes OUT/bench.json (raw), OUT/bench.txt (table), OUT/speedup.png (when matplotlib is present) and, with
--md, OUT/performance.md. ``--from-json OUT/bench.json`` re-renders those without a GPU.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shlex
import sys
import time
import traceback
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "backends"))
from cuda_triton.tools import conv_cases as nc  # noqa: E402
from cuda_triton.tools.bench_contenders import (  # noqa: E402
    cudnn_call,
    inductor_call,
    inductor_cannot_compile,
    inductor_conv_path,
    ours_call,
)
from cuda_triton.tools.bench_report import fmt_us, is_target, render  # noqa: E402
from cuda_triton.tools.suites import PUBLIC_SUITE, load_cases  # noqa: E402
from cuda_triton.tools.timing import gpu_state, time_gpu_us, time_side_by_side  # noqa: E402
from cuda_triton.tools.warmup import CaseWarmup, job_label, time_limit, warm_cases  # noqa: E402

# Roofline ceilings of the H200 (docs/platform_facts.md: measured fp16 matmul 740 TFLOP/s and 4.3 TB/s device
# copy; TF32 is half the fp16 dense rate, plain fp32 FMA about 60 TFLOP/s).
PEAK_FLOPS = {"float16": 740e12, "bfloat16": 740e12, "tf32": 370e12, "float32": 60e12}
PEAK_BYTES_PER_S = 4.3e12

# CUDA-graph timing settings (command line: --graph-ms, --graph-calls, --warm-ms): the GPU time one timed graph
# holds, the most calls in it, and the replay time before the timed rounds.
TIMING = {"graph_ms": 2.0, "graph_calls": 500, "warm_ms": 20.0}


def roofline_us(case: nc.Case, problem) -> float:
    key = "tf32" if case["dtype"] == "float32" and problem.allow_tf32 else case["dtype"]
    return max(problem.flops() / PEAK_FLOPS[key], problem.min_bytes() / PEAK_BYTES_PER_S) * 1e6


def timed(fns: dict[str, Any], reps: int) -> dict[str, tuple[float, str, int]]:
    """`time_side_by_side` with this run's TIMING: (us per call, "cuda-graph"/"eager", calls per graph)."""
    got = time_side_by_side(fns, reps, TIMING["graph_ms"], int(TIMING["graph_calls"]), TIMING["warm_ms"])
    return {k: (us, "cuda-graph" if t.graph else "eager", t.calls) for k, (us, t) in got.items()}


def timed_one(fn: Any, reps: int) -> float:
    return time_gpu_us(
        fn,
        reps,
        target_ms=TIMING["graph_ms"],
        max_calls=int(TIMING["graph_calls"]),
        warm_ms=TIMING["warm_ms"],
    )[0]


def check(case: nc.Case, fn, x, w, b, ref: torch.Tensor | None = None, half_sum: int = 0) -> dict[str, Any]:
    """Run ``fn`` once with the caching allocator's free memory poisoned by NaN, compare every element
    (``half_sum``: the candidate's 16-bit sums, `conv_cases.tolerance`)."""
    if ref is None:
        ref = nc.reference(case, x, w, b)
    torch.cuda.synchronize()
    poison = torch.full((ref.numel(),), float("nan"), device=x.device, dtype=x.dtype)
    del poison  # the caching allocator hands this NaN-filled block to the next allocation of the same size
    out = fn()
    torch.cuda.synchronize()
    return nc.compare(case, out, ref, x, w, torch.backends.cudnn.allow_tf32, half_sum)


def candidates(problem) -> list[tuple[str, Any]]:
    from cuda_triton.conv.templates import support_report

    out = []
    for template, verdict in support_report(problem):
        if verdict:
            out.extend((template.name, s) for s in template.schedules(problem))
    return out


def table_times(problem) -> dict[str, Any] | None:
    """The tuning table's exact entry for ``problem``: the schedule and the times `tune.py` measured for it and
    for cuDNN (rotating operands, cold L2). Beside this run's times it separates noise of the run (ours moved
    against the tuner on the same schedule) from cuDNN's gain from a warm L2 (cuDNN faster here than there)."""
    from cuda_triton.conv.tuning import lookup_match

    m = lookup_match(problem)
    if m is None or not m.exact:
        return None
    e = m.entry
    return {"template": e.template, "schedule": e.schedule.as_dict(), "us": e.time_us, "cudnn_us": e.cudnn_us}


def run_case(case: nc.Case, args, ours_status: dict[str, str]) -> dict[str, Any]:
    from cuda_triton.conv.templates import (
        NoTemplateError,
        force_conv_candidate,
        get_template,
        select_candidate,
    )

    rec: dict[str, Any] = {"case": case, "label": nc.case_label(case), "target": is_target(case)}
    x, w, b = nc.make_tensors(case, "cuda")
    problem = nc.problem_of(case, x, w, b)
    rec.update(
        flops=problem.flops(),
        min_bytes=problem.min_bytes(),
        floor_us=roofline_us(case, problem),
        tf32=problem.allow_tf32,
    )
    # cuDNN, ours (tuning table) and ours with the heuristic alone (table off: how fast shapes outside the table
    # run), checked one by one, then timed side by side in interleaved rounds.
    cudnn_fn = cudnn_call(case, x, w, b)
    rec["cudnn_check"] = check(case, cudnn_fn, x, w, b)
    contenders = {"cudnn": cudnn_fn}
    try:
        from cuda_triton.conv.dispatch import tuning_lookup

        cand = select_candidate(problem, tuning_lookup)
        rec["template"], rec["schedule"] = cand.template.name, cand.schedule.as_dict()
        rec["table"] = table_times(problem)
    except NoTemplateError as e:
        rec["ours_us"], rec["ours_error"] = None, f"no template: {e}"
        cand = None
    fn = ours_call(case, x, w, b)
    if cand is not None:
        rec["ours_check"] = check(
            case, fn, x, w, b, half_sum=cand.template.half_sum_length(problem, cand.schedule)
        )
        contenders["ours"] = fn
        heur = select_candidate(problem, None)
        rec["heuristic"] = {"template": heur.template.name, "schedule": heur.schedule.as_dict()}
        if (heur.template.name, heur.schedule) != (cand.template.name, cand.schedule):
            try:
                with force_conv_candidate(heur.template.name, heur.schedule):
                    half = heur.template.half_sum_length(problem, heur.schedule)
                    rec["heuristic_check"] = check(case, fn, x, w, b, half_sum=half)

                def heur_fn(h=heur) -> Any:
                    with force_conv_candidate(h.template.name, h.schedule):
                        return fn()

                contenders["heuristic"] = heur_fn
            except Exception as e:
                rec["heuristic_us"], rec["heuristic_error"] = None, f"{type(e).__name__}: {e}"[:300]
    times = timed(contenders, args.reps)
    rec["gpu_state"] = gpu_state()
    rec["cudnn_us"] = times["cudnn"][0]
    rec["graph_calls"] = {k: v[2] for k, v in times.items()}
    if "ours" in times:
        rec["ours_us"], rec["timing_mode"] = times["ours"][:2]
        rec["heuristic_us"] = (
            times["heuristic"][0] if "heuristic" in times else rec.get("heuristic_us", rec["ours_us"])
        )
    if cand is not None:
        if args.tune and case["dtype"] in set((args.tune_dtypes or args.dtypes).split(",")):
            tuned = []
            ref = nc.reference(case, x, w, b)
            for name, sched in candidates(problem):
                st = ours_status.get(job_label("ours", case, name, sched.as_dict()))
                if st != "ok":  # not compiled within --compile-timeout, or failed there
                    tuned.append(
                        {"template": name, "schedule": sched.as_dict(), "error": st or "not compiled"}
                    )
                    continue
                try:
                    with force_conv_candidate(name, sched):
                        half = get_template(name).half_sum_length(problem, sched)
                        c = check(case, fn, x, w, b, ref, half)
                        us = timed_one(fn, max(5, args.reps // 3))
                    tuned.append({"template": name, "schedule": sched.as_dict(), "us": us, "ok": c["ok"]})
                except Exception as e:
                    tuned.append({"template": name, "schedule": sched.as_dict(), "error": str(e)[:300]})
            good = [t for t in tuned if t.get("ok")]
            rec["tuned"] = tuned
            if good:
                best = min(good, key=lambda t: t["us"])
                rec["best_us"], rec["best"] = (
                    best["us"],
                    {"template": best["template"], "schedule": best["schedule"]},
                )
    # Inductor (compiled here, one case at a time, under --inductor-timeout seconds each)
    cannot = None if args.inductor_all else inductor_cannot_compile(problem)
    if args.no_inductor or case["dtype"] not in set((args.inductor_dtypes or "float16").split(",")):
        rec["inductor_us"], rec["inductor_note"] = None, "not run"
    elif cannot is not None:  # no Triton template choice: Inductor would hand the conv to ATen
        rec["inductor_us"], rec["inductor_note"] = None, "cannot compile: " + cannot
    else:
        try:
            with time_limit(args.inductor_timeout):
                fn = inductor_call(case, x, w, b)
                rec["inductor_path"] = inductor_conv_path(fn)
                rec["inductor_check"] = check(case, fn, x, w, b)
            us = timed_one(fn, args.reps)
            if rec["inductor_path"] == "triton":
                rec["inductor_us"] = us
            else:  # Inductor handed the conv back to ATen (cuDNN): its Triton template cannot compile it
                rec["inductor_us"], rec["inductor_note"] = None, "ATen fallback"
                rec["inductor_fallback_us"] = us
        except Exception as e:
            rec["inductor_us"], rec["inductor_note"] = None, type(e).__name__
    return rec


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument(
        "--suite",
        default=str(PUBLIC_SUITE),
        help="a suite file (bench/*.py), or json:PATH for the convolutions of exported programs "
        "(scripts/pte_problems.py); with --all-cases, every one is timed",
    )
    ap.add_argument("--dtypes", default="float16,bfloat16,float32")
    ap.add_argument("--cases", default="", help="comma-separated substrings of case names to keep")
    ap.add_argument("--all-cases", action="store_true", help="also time cases outside the target set")
    ap.add_argument(
        "--tune", action="store_true", help="also time every schedule of every supporting template"
    )
    ap.add_argument("--tune-dtypes", default="", help="dtypes to tune (default: all of --dtypes)")
    ap.add_argument("--no-inductor", action="store_true")
    ap.add_argument("--inductor-dtypes", default="float16,bfloat16,float32", help="dtypes to run Inductor on")
    ap.add_argument(
        "--inductor-all",
        action="store_true",
        help="also compile cases the planner says Inductor's template cannot take (they fall back to ATen)",
    )
    ap.add_argument("--inductor-timeout", type=float, default=60.0, help="seconds for one Inductor compile")
    ap.add_argument(
        "--compile-timeout", type=float, default=150.0, help="seconds for all of our JIT compiles"
    )
    ap.add_argument("--workers", type=int, default=max(1, min(14, (os.cpu_count() or 2) - 2)))
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument(
        "--graph-ms", type=float, default=TIMING["graph_ms"], help="GPU time one timed graph holds"
    )
    ap.add_argument("--graph-calls", type=int, default=TIMING["graph_calls"], help="most calls in one graph")
    ap.add_argument("--warm-ms", type=float, default=TIMING["warm_ms"], help="replay time before timing")
    ap.add_argument(
        "--bias", action="store_true", help="give every conv a bias (cuDNN then adds it separately)"
    )
    ap.add_argument("--md", action="store_true", help="also write OUT/performance.md")
    ap.add_argument("--from-json", type=Path, help="re-render a previous bench.json (no GPU needed)")
    args = ap.parse_args()
    TIMING.update(graph_ms=args.graph_ms, graph_calls=args.graph_calls, warm_ms=args.warm_ms)
    return args


def select_cases(args: argparse.Namespace) -> list[nc.Case]:
    """The suite's cases in every --dtypes, narrowed by --cases and (without --all-cases) to the target set."""
    keep = [s for s in args.cases.split(",") if s]
    suite = load_cases(args.suite)
    cases = []
    for dtype in args.dtypes.split(","):
        for c in suite:
            case = nc.case_from_suite(c, dtype, bias=args.bias)
            if keep and not any(k in c.name for k in keep):
                continue
            if not args.all_cases and not is_target(case):
                continue
            cases.append(case)
    return cases


def warmup_jobs(cases: list[nc.Case], args: argparse.Namespace) -> list[CaseWarmup]:
    """Inductor's max-autotune compiles first (the long jobs), then ours: the op's own choice, the heuristic's
    (table off, timed beside it) and with --tune every candidate."""
    from cuda_triton.conv.templates import NoTemplateError, select_candidate

    jobs: list[CaseWarmup] = []
    if not args.no_inductor:
        ind_dtypes = set(args.inductor_dtypes.split(","))
        for c in cases:
            if c["dtype"] in ind_dtypes and (
                args.inductor_all
                or inductor_cannot_compile(nc.problem_of(c, *nc.make_tensors(c, "meta"))) is None
            ):
                jobs.append(CaseWarmup("inductor", c))
    jobs += [CaseWarmup("ours", c) for c in cases]
    for c in cases:
        try:
            heur = select_candidate(nc.problem_of(c, *nc.make_tensors(c, "meta")), None)
        except NoTemplateError:
            continue
        jobs.append(CaseWarmup("ours", c, heur.template.name, heur.schedule.as_dict()))
    tune_dtypes = set((args.tune_dtypes or args.dtypes).split(","))
    if args.tune:
        for c in [c for c in cases if c["dtype"] in tune_dtypes]:
            x, w, b = nc.make_tensors(c, "meta")
            for name, sched in candidates(nc.problem_of(c, x, w, b)):
                jobs.append(CaseWarmup("ours", c, name, sched.as_dict()))
    return jobs


def run_meta() -> dict[str, Any]:
    """What bench.json records about the run: date, GPU, versions, timing settings, GPU state, command."""
    import triton

    return {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "gpu": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "triton": triton.__version__,
        "host": platform.node(),
        "timing": dict(TIMING),
        "gpu_state_at_start": gpu_state(),
        "command": "PYTHONPATH=backends python scripts/bench_conv.py "
        + " ".join(map(shlex.quote, sys.argv[1:])),
        "peaks": {"flops": PEAK_FLOPS, "bytes_per_s": PEAK_BYTES_PER_S},
    }


def main() -> None:
    args = parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    if args.from_json:
        results = json.loads(args.from_json.read_text())
        print(render(results, args.out, args.md))
        return

    import cuda_triton.conv  # noqa: F401  (registers torch.ops.triton.convolution)

    torch.backends.cudnn.benchmark = True
    cases = select_cases(args)
    t0 = time.time()
    jobs = warmup_jobs(cases, args)
    ours_status = warm_cases(jobs, args.workers, args.compile_timeout)
    print(f"warmed {len(ours_status)}/{len(jobs)} of our kernels in {time.time() - t0:.0f} s", flush=True)
    results: dict[str, Any] = {
        "meta": run_meta(),
        "cases": [],
        "warm_failures": {k: v for k, v in ours_status.items() if v != "ok"},
    }
    for case in cases:
        try:
            rec = run_case(case, args, ours_status)
        except Exception as e:
            rec = {
                "case": case,
                "label": nc.case_label(case),
                "target": is_target(case),
                "floor_us": float("nan"),
                "error": f"{type(e).__name__}: {e}",
                "trace": traceback.format_exc()[-2000:],
            }
        results["cases"].append(rec)
        print(
            f"{rec['label']:40} ours {fmt_us(rec.get('ours_us'))} tuned {fmt_us(rec.get('best_us'))} "
            f"cudnn {fmt_us(rec.get('cudnn_us'))} ind {fmt_us(rec.get('inductor_us'))} "
            f"ok {rec.get('ours_check', {}).get('ok')} {rec.get('error', '')}",
            flush=True,
        )
        (args.out / "bench.json").write_text(json.dumps(results, indent=1, default=str))
    print(render(results, args.out, args.md))
    (args.out / "bench.json").write_text(json.dumps(results, indent=1, default=str))
    print(f"total {time.time() - t0:.0f} s")


if __name__ == "__main__":
    main()
