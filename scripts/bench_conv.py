"""Benchmark ``torch.ops.triton.convolution`` against cuDNN and Inductor on the public suite (GPU).

    PYTHONPATH=backends python scripts/bench_conv.py --out OUT [--tune] [--no-inductor] [--md]

For every case of the suite (bench/public_suite.py, a verbatim copy of the shared file) and every dtype:
  * ours: the op (heuristic schedule, or the shipped tuning table's), and with --tune the best of every schedule
    of every template that supports the case;
  * cuDNN: PyTorch eager (aten.convolution, cudnn.benchmark=True; fp32 with TF32 allowed, PyTorch's conv default);
  * Inductor: torch.compile(mode="max-autotune-no-cudagraphs") with conv backends = TRITON only ('n/a' when it
    cannot compile the case);
each beside its roofline floor max(flops / peak, min bytes / bandwidth).

Timing: GPU time per call, median over many replays of a CUDA graph holding several calls, so the host's
launch overhead is excluded for every contender (the C++ runtime launches a kernel in ~4 us). The L2 cache is
warm (inference layers run back to back). Every case is checked against an fp32 ATen reference, output
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
import contextlib
import datetime
import importlib.util
import json
import math
import multiprocessing as mp
import os
import platform
import shlex
import signal
import statistics
import sys
import time
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
import numerics_cases as nc  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
DEFAULT_SUITE = REPO / "bench" / "public_suite.py"

# Roofline ceilings of the H200 (FACTS.md: measured fp16 matmul 740 TFLOP/s and 4.3 TB/s device copy; TF32 is
# half the fp16 dense rate, plain fp32 FMA about 60 TFLOP/s).
PEAK_FLOPS = {"float16": 740e12, "bfloat16": 740e12, "tf32": 370e12, "float32": 60e12}
PEAK_BYTES_PER_S = 4.3e12


# ---- suite ----------------------------------------------------------------------------------------------
def load_suite(path: Path) -> list[Any]:
    spec = importlib.util.spec_from_file_location("public_suite", path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"cannot load the suite from {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules["public_suite"] = module  # dataclasses need the module registered
    spec.loader.exec_module(module)
    return list(module.PUBLIC)


def is_target(case: nc.Case) -> bool:
    """The issue's target set: forward, non-depthwise cases."""
    depthwise = case["groups"] > 1 and case["groups"] == case["C"]
    return not case["transposed"] and not depthwise


def problem_of(case: nc.Case, x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None):
    from cuda_triton.conv import ConvProblem

    return ConvProblem.from_tensors(x, w, b, nc.params_of(case))


def roofline_us(case: nc.Case, problem) -> float:
    key = "tf32" if case["dtype"] == "float32" and problem.allow_tf32 else case["dtype"]
    return max(problem.flops() / PEAK_FLOPS[key], problem.min_bytes() / PEAK_BYTES_PER_S) * 1e6


# ---- timing ---------------------------------------------------------------------------------------------
# CUDA-graph timing settings (command line: --graph-ms, --graph-calls, --warm-ms). Single kernels under ~20 us
# moved up to 2x between runs with the defaults (docs/performance.md, session 6); longer graphs and a warm-up
# burn before the timed replays are there to test what steadies them.
TIMING = {"graph_ms": 2.0, "graph_calls": 500, "warm_ms": 20.0}


def _capture(fn, calls: int) -> Any:
    """A CUDA graph of ``calls`` calls of ``fn`` (captured on a side stream after one warm-up call there)."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        fn()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(calls):
            fn()
    graph.replay()
    return graph


def _graph_of(fn, target_ms: float) -> tuple[Any, int, str]:
    """(run, calls per run, mode): a CUDA graph of enough calls of ``fn`` for ``target_ms``, at most
    TIMING["graph_calls"] (each call of ours or cuDNN allocates its output from the graph's pool, so the cap bounds
    that memory); eager calls where capture fails.

    The call count is sized twice: from eager calls (host-bound, so an over-estimate of the GPU time), then from
    a replay of that graph. The second step matters: a first call that compiles, loads a module or autotunes
    (cuDNN's benchmark mode) inflates the eager estimate a thousandfold, and a graph of one call then times the
    replay's own launch latency, 5-10 us, as if the kernel took it (2026-12-03: r18.l1.3x3.b1 fp32 read 17.4 us
    that way for both ours and cuDNN, 8.2 and 7.2 us in graphs of many calls; tune.py has long resized its
    graphs the same way)."""
    torch.cuda.synchronize()
    fn()  # lazy loads and autotuning happen here, not in the estimate
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(3):
        fn()
    end.record()
    end.synchronize()
    per_call_ms = max(start.elapsed_time(end) / 3, 1e-3)
    inner = int(min(TIMING["graph_calls"], max(1, target_ms / per_call_ms)))
    try:
        graph = _capture(fn, inner)
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        replay_ms = start.elapsed_time(end)
        if replay_ms < 0.5 * target_ms and inner < TIMING["graph_calls"]:
            inner = int(min(TIMING["graph_calls"], max(inner, target_ms * inner / max(replay_ms, 1e-3))))
            del graph
            graph = _capture(fn, inner)
        return graph.replay, inner, "cuda-graph"
    except Exception:
        torch.cuda.synchronize()

        def run() -> None:
            for _ in range(inner):
                fn()

        return run, inner, "eager"


def _burn(runs: list[Any], ms: float) -> None:
    """Replay the graphs in turn for ``ms`` (GPU clocks up before the timed replays)."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    while True:
        for run in runs:
            run()
        end.record()
        end.synchronize()
        if start.elapsed_time(end) >= ms:
            return


def time_side_by_side(
    fns: dict[str, Any], reps: int = 30, target_ms: float | None = None
) -> dict[str, tuple[float, str, int]]:
    """Median GPU time per call (us), timing mode and calls per graph of each contender, measured in interleaved
    rounds.

    Each round replays every contender's graph once, so drift of the GPU's clocks or of the machine's load during
    a case affects all contenders alike (timed one after the other, ours on small kernels moved up to 3.6x between
    runs while cuDNN's times held within 10%: 2026-12-03 13:46 against 11:17)."""
    target_ms = TIMING["graph_ms"] if target_ms is None else target_ms
    graphs = {k: _graph_of(fn, target_ms) for k, fn in fns.items()}
    if TIMING["warm_ms"] > 0:
        _burn([g[0] for g in graphs.values()], TIMING["warm_ms"])
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(reps):
        for k, (run, inner, _) in graphs.items():
            start.record()
            run()
            end.record()
            end.synchronize()
            times[k].append(start.elapsed_time(end) * 1e3 / inner)
    return {k: (statistics.median(times[k]), graphs[k][2], graphs[k][1]) for k in fns}


_GPU_STATE_FIELDS = (
    "clocks.sm",
    "clocks.mem",
    "temperature.gpu",
    "power.draw",
    "clocks_throttle_reasons.active",
)


def gpu_state() -> dict[str, str]:
    """The GPU's clocks, temperature, power and active throttle reasons now (nvidia-smi), recorded beside each
    case's times: small kernels of ours moved 2-4x between runs while cuDNN's held (session 8), and this is what
    tells clocks apart from other causes (GPU fields are absent where nvidia-smi is missing or slow)."""
    import subprocess

    try:
        out = subprocess.run(
            ["nvidia-smi", f"--query-gpu={','.join(_GPU_STATE_FIELDS)}", "--format=csv,noheader,nounits", "-i", "0"],
            capture_output=True, text=True, timeout=5, check=True,
        ).stdout.strip()  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        out = ""
    state = dict(zip(_GPU_STATE_FIELDS, (v.strip() for v in out.split(",")), strict=False)) if out else {}
    # CPU load too: the slow runs coincided with runs that compiled their kernels first (a cold Triton cache)
    state["host.loadavg1"] = f"{os.getloadavg()[0]:.1f}"
    return state


def time_gpu_us(fn, reps: int = 30, target_ms: float | None = None) -> tuple[float, str]:
    """Median GPU time per call in microseconds, CUDA-graph replays (fallback: eager calls); see
    `time_side_by_side` (this is it with one contender)."""
    return time_side_by_side({"fn": fn}, reps, target_ms)["fn"][:2]


# ---- contenders -----------------------------------------------------------------------------------------
def ours_call(case: nc.Case, x, w, b):
    args = nc.params_of(case).as_op_args()
    return lambda: torch.ops.triton.convolution(x, w, b, *args)


def cudnn_call(case: nc.Case, x, w, b):
    from cuda_triton.conv.op import reference_convolution

    p = nc.params_of(case)
    return lambda: reference_convolution(x, w, b, p)


def inductor_call(case: nc.Case, x, w, b):
    import torch._inductor.config as icfg
    from cuda_triton.conv.op import reference_convolution

    icfg.max_autotune_conv_backends = "TRITON"
    # Every case compiles the same lambda's code object: without a reset, Dynamo's recompile limit (8) makes
    # the 9th and later cases silently run eagerly (i.e. on cuDNN).
    torch._dynamo.reset()
    p = nc.params_of(case)
    compiled = torch.compile(lambda t: reference_convolution(t, w, b, p), mode="max-autotune-no-cudagraphs")
    return lambda: compiled(x)


def inductor_conv_path(fn) -> str:
    """Compile ``fn`` (its first call) and say how Inductor ran the convolution: 'triton' when its Triton conv
    template generated the kernel, 'aten' when it emitted an extern call to ATen's convolution (cuDNN) because
    the template cannot compile the case; max-autotune with TRITON-only conv backends still falls back."""
    from torch._inductor.utils import run_and_get_code

    _, codes = run_and_get_code(fn)
    code = "\n".join(codes)
    # Only the call counts: the output code's comments name aten.convolution for template kernels too.
    if "extern_kernels.convolution(" in code:
        return "aten"
    return "triton"


def check(case: nc.Case, fn, x, w, b, ref: torch.Tensor | None = None) -> dict[str, Any]:
    """Run ``fn`` once with the caching allocator's free memory poisoned by NaN, compare every element."""
    if ref is None:
        ref = nc.reference(case, x, w, b)
    torch.cuda.synchronize()
    poison = torch.full((ref.numel(),), float("nan"), device=x.device, dtype=x.dtype)
    del poison  # the caching allocator hands this NaN-filled block to the next allocation of the same size
    out = fn()
    torch.cuda.synchronize()
    return nc.compare(case, out, ref, x, w, torch.backends.cudnn.allow_tf32)


def candidates(problem) -> list[tuple[str, Any]]:
    from cuda_triton.conv.templates import support_report

    out = []
    for template, verdict in support_report(problem):
        if verdict:
            out.extend((template.name, s) for s in template.schedules(problem))
    return out


# ---- parallel warm-up (compiles fill the on-disk caches) --------------------------------------------------
def job_label(kind: str, case: nc.Case, template: str | None, schedule: dict | None) -> str:
    return f"{kind}:{nc.case_label(case)}" + (
        f"/{template}/{sorted((schedule or {}).items())}" if template else ""
    )


def _warm_worker(job: tuple[str, nc.Case, str | None, dict | None]) -> tuple[str, str]:
    kind, case, template, schedule = job
    label = job_label(kind, case, template, schedule)
    try:
        torch.backends.cudnn.benchmark = True
        x, w, b = nc.make_tensors(case, "cuda")
        if kind == "ours":
            from cuda_triton.conv.templates import force_conv_candidate
            from cuda_triton.kernel.launch import Schedule

            if template is None:
                ours_call(case, x, w, b)()
            else:
                with force_conv_candidate(template, Schedule.from_dict(schedule)):
                    ours_call(case, x, w, b)()
        else:
            inductor_call(case, x, w, b)()
        torch.cuda.synchronize()
        return label, "ok"
    except Exception as e:
        return label, f"{type(e).__name__}: {str(e).splitlines()[0][:300] if str(e) else ''}"


def warm(jobs: list[tuple], workers: int, deadline_s: float) -> dict[str, str]:
    """Run jobs in ``workers`` spawned processes until done or ``deadline_s``; returns label -> status."""
    if not jobs or workers <= 0:
        return {}
    status: dict[str, str] = {}
    ctx = mp.get_context("spawn")
    t0 = time.time()
    with ctx.Pool(workers, maxtasksperchild=64) as pool:
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


class CompileTimeout(Exception):
    pass


@contextlib.contextmanager
def alarm(seconds: float) -> Iterator[None]:
    """Raise CompileTimeout in the main thread after ``seconds`` (Inductor compiles can take minutes)."""

    def fire(signum, frame):
        raise CompileTimeout(f"no result within {seconds:.0f} s")

    previous = signal.signal(signal.SIGALRM, fire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


# ---- main -----------------------------------------------------------------------------------------------
def gmean(xs: list[float]) -> float:
    xs = [x for x in xs if x and x > 0 and math.isfinite(x)]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


def inductor_cannot_compile(problem) -> str | None:
    """The planner's reason why Inductor's Triton conv template cannot take ``problem`` (None: it can)."""
    from cuda_triton.conv.inductor import inductor_cannot_compile as reason

    return reason(problem)


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
    from cuda_triton.conv.templates import NoTemplateError, force_conv_candidate, select_candidate

    rec: dict[str, Any] = {"case": case, "label": nc.case_label(case), "target": is_target(case)}
    x, w, b = nc.make_tensors(case, "cuda")
    problem = problem_of(case, x, w, b)
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
        rec["ours_check"] = check(case, fn, x, w, b)
        contenders["ours"] = fn
        heur = select_candidate(problem, None)
        rec["heuristic"] = {"template": heur.template.name, "schedule": heur.schedule.as_dict()}
        if (heur.template.name, heur.schedule) != (cand.template.name, cand.schedule):
            try:
                with force_conv_candidate(heur.template.name, heur.schedule):
                    rec["heuristic_check"] = check(case, fn, x, w, b)

                def heur_fn(h=heur) -> Any:
                    with force_conv_candidate(h.template.name, h.schedule):
                        return fn()

                contenders["heuristic"] = heur_fn
            except Exception as e:
                rec["heuristic_us"], rec["heuristic_error"] = None, f"{type(e).__name__}: {e}"[:300]
    timed = time_side_by_side(contenders, args.reps)
    rec["gpu_state"] = gpu_state()
    rec["cudnn_us"] = timed["cudnn"][0]
    rec["graph_calls"] = {k: v[2] for k, v in timed.items()}
    if "ours" in timed:
        rec["ours_us"], rec["timing_mode"] = timed["ours"][:2]
        rec["heuristic_us"] = (
            timed["heuristic"][0] if "heuristic" in timed else rec.get("heuristic_us", rec["ours_us"])
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
                        c = check(case, fn, x, w, b, ref)
                        us, _ = time_gpu_us(fn, max(5, args.reps // 3))
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
            with alarm(args.inductor_timeout):
                fn = inductor_call(case, x, w, b)
                rec["inductor_path"] = inductor_conv_path(fn)
                rec["inductor_check"] = check(case, fn, x, w, b)
            us, _ = time_gpu_us(fn, args.reps)
            if rec["inductor_path"] == "triton":
                rec["inductor_us"] = us
            else:  # Inductor handed the conv back to ATen (cuDNN): its Triton template cannot compile it
                rec["inductor_us"], rec["inductor_note"] = None, "ATen fallback"
                rec["inductor_fallback_us"] = us
        except Exception as e:
            rec["inductor_us"], rec["inductor_note"] = None, type(e).__name__
    return rec


def family_of(case: nc.Case) -> str:
    if case["transposed"]:
        return "transposed"
    return "forward" if is_target(case) else "depthwise"


def family_summary(rows: list[dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    """Per (family, dtype) and for the whole suite per dtype: geometric-mean and minimum speed-up over cuDNN."""
    out: dict[tuple[str, str], dict[str, Any]] = {}
    for fam in ("forward", "depthwise", "transposed", "all"):
        for dtype in nc.DTYPES:
            sel = [
                r
                for r in rows
                if r["case"]["dtype"] == dtype
                and (fam == "all" or family_of(r["case"]) == fam)
                and r.get("ours_us")
                and r.get("cudnn_us")
            ]
            if not sel:
                continue
            sp = {r["case"]["name"]: r["cudnn_us"] / r["ours_us"] for r in sel}
            worst = min(sp, key=sp.__getitem__)
            out[(fam, dtype)] = {
                "gmean": gmean(list(sp.values())),
                "min": sp[worst],
                "min_case": worst,
                "below_0.8": sorted(f"{k} {v:.2f}" for k, v in sp.items() if v < 0.8),
                "gmean_heuristic": gmean(
                    [r["cudnn_us"] / r["heuristic_us"] for r in sel if r.get("heuristic_us")]
                ),
                "n": len(sel),
            }
    return out


def fmt_us(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.1f}"


def fmt_x(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.2f}"


def against_table(rows: list[dict]) -> dict[str, Any] | None:
    """This run's times over `tune.py`'s for the cases that ran the table's own schedule: ours near 1.0x says the
    run is steady; ours well above it with cuDNN near 1.0x is this run's noise (session 8); cuDNN below 1.0x is
    its gain from a warm L2 (the tuner rotates operands)."""
    pairs = [
        (r["label"], r["ours_us"] / r["table"]["us"], r["cudnn_us"] / r["table"]["cudnn_us"])
        for r in rows
        if r.get("table") and r.get("ours_us") and r.get("cudnn_us") and r["table"].get("cudnn_us")
        and (r["table"]["template"], r["table"]["schedule"]) == (r.get("template"), r.get("schedule"))
    ]  # fmt: skip
    if not pairs:
        return None
    worst = max(pairs, key=lambda p: p[1])
    return {
        "n": len(pairs),
        "ours_gmean": math.exp(statistics.fmean(math.log(p[1]) for p in pairs)),
        "cudnn_gmean": math.exp(statistics.fmean(math.log(p[2]) for p in pairs)),
        "ours_worst": worst[1],
        "ours_worst_case": worst[0],
    }


def render(results: dict[str, Any], out: Path, md: bool) -> str:
    rows = results["cases"]
    lines = [
        f"{'case':24} {'dtype':9} {'ours':>8} {'tuned':>8} {'cuDNN':>8} {'Induct':>8} {'floor':>7} "
        f"{'x cuDNN':>7} {'tuned x':>7} {'ind x':>6} ok  template"
    ]
    summary: dict[str, dict[str, float]] = {}
    for r in rows:
        c = r["case"]
        ours, cud, ind, best = r.get("ours_us"), r.get("cudnn_us"), r.get("inductor_us"), r.get("best_us")
        sp = cud / ours if ours else None
        spb = cud / best if best else None
        spi = cud / ind if ind else None
        ok = r.get("ours_check", {}).get("ok")
        lines.append(
            f"{c['name']:24} {c['dtype']:9} {fmt_us(ours):>8} {fmt_us(best):>8} {fmt_us(cud):>8} {fmt_us(ind):>8} "
            f"{r['floor_us']:7.1f} {fmt_x(sp):>7} {fmt_x(spb):>7} {fmt_x(spi):>6} "
            f"{'yes' if ok else ('n/a' if ok is None else 'NO'):3} {r.get('template', '-')}"
        )
    for dtype in nc.DTYPES:
        sel = [r for r in rows if r["case"]["dtype"] == dtype and r["target"]]
        if not sel:
            continue
        sp = [r["cudnn_us"] / r["ours_us"] for r in sel if r.get("ours_us")]
        spb = [r["cudnn_us"] / r["best_us"] for r in sel if r.get("best_us")]
        spi = [r["cudnn_us"] / r["inductor_us"] for r in sel if r.get("inductor_us")]
        sph = [r["cudnn_us"] / r["heuristic_us"] for r in sel if r.get("heuristic_us")]
        summary[dtype] = {
            "gmean_speedup_heuristic": gmean(sph),
            "gmean_speedup_ours": gmean(sp),
            "gmean_speedup_tuned": gmean(spb),
            "min_speedup_ours": min(sp) if sp else float("nan"),
            "gmean_speedup_inductor": gmean(spi),
            "inductor_cases": len(spi),
            "cases": len(sel),
        }
    lines.append("")
    lines.append("Geometric-mean speed-up over cuDNN, forward non-depthwise cases:")
    for dtype, s in summary.items():
        lines.append(
            f"  {dtype:9} ours {s['gmean_speedup_ours']:.2f}x (min {s['min_speedup_ours']:.2f}x), heuristic "
            f"{s.get('gmean_speedup_heuristic', float('nan')):.2f}x, tuned {s['gmean_speedup_tuned']:.2f}x, Inductor {s['gmean_speedup_inductor']:.2f}x on "
            f"{s['inductor_cases']}/{s['cases']} cases"
        )
    families = family_summary(rows)
    lines.append("")
    lines.append("By family (geometric mean / minimum speed-up over cuDNN; heuristic = tuning table off):")
    for (fam, dtype), f in families.items():
        lines.append(
            f"  {fam:10} {dtype:9} ours {f['gmean']:.2f}x (min {f['min']:.2f}x {f['min_case']}), heuristic "
            f"{f['gmean_heuristic']:.2f}x, n={f['n']}"
        )
    consistency = against_table(rows)
    if consistency:
        lines.append("")
        lines.append(
            f"Against tune.py on the table's schedule ({consistency['n']} cases): ours here / there "
            f"{consistency['ours_gmean']:.2f}x (worst {consistency['ours_worst']:.2f}x {consistency['ours_worst_case']}), "
            f"cuDNN here / there {consistency['cudnn_gmean']:.2f}x"
        )
    text = "\n".join(lines)
    results["summary"] = summary
    results["families"] = {f"{k[0]}/{k[1]}": v for k, v in families.items()}
    results["against_table"] = consistency
    (out / "bench.txt").write_text(text + "\n")
    plot(rows, out / "speedup.png")
    if md:
        (out / "performance.md").write_text(markdown(results))
    return text


# The plot's speed-up axis: Inductor's depthwise convs (0.001x) would squash everything else; they sit on its edge.
_PLOT_RANGE = (0.08, 150.0)


def plot(rows: list[dict], path: Path) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        import matplotlib.ticker
    except ImportError:
        return
    dtypes = [d for d in nc.DTYPES if any(r["case"]["dtype"] == d for r in rows)]
    names = list(dict.fromkeys(r["case"]["name"] for r in rows))
    fig, ax = plt.subplots(figsize=(max(8, len(names) * 0.55), 4.5))
    width = 0.8 / max(1, len(dtypes))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, d in enumerate(dtypes):
        xs, ys, ind_x, ind_y, roof_x, roof_y = [], [], [], [], [], []
        for j, n in enumerate(names):
            r = next((r for r in rows if r["case"]["name"] == n and r["case"]["dtype"] == d), None)
            x = j + i * width
            xs.append(x)
            ys.append(r["cudnn_us"] / r["ours_us"] if r and r.get("ours_us") else 0.0)
            if r and r.get("inductor_us"):  # Inductor, where its Triton template compiles the case
                ind_x.append(x)  # (below the axis: drawn on its lower edge)
                ind_y.append(max(r["cudnn_us"] / r["inductor_us"], _PLOT_RANGE[0] * 1.05))
            if r and r.get("floor_us") and r["floor_us"] == r["floor_us"]:  # the roofline: the most possible
                roof_x.append(x)
                roof_y.append(r["cudnn_us"] / r["floor_us"])
        color = colors[i % len(colors)]
        ax.bar(xs, ys, width, label=f"ours, {d}", color=color)
        ax.scatter(ind_x, ind_y, marker="v", s=14, color=color, edgecolors="black", linewidths=0.4, zorder=3,
                   label=f"Inductor, {d}")  # fmt: skip
        ax.scatter(roof_x, roof_y, marker="_", s=40, color=color, zorder=3)
    ax.scatter([], [], marker="_", color="gray", label="roofline floor (cuDNN / floor)")
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_yscale("log")
    ax.set_ylim(*_PLOT_RANGE)
    ax.yaxis.set_major_locator(matplotlib.ticker.FixedLocator([0.1, 0.2, 0.5, 0.8, 1, 2, 5, 10, 20, 50, 100]))
    ax.yaxis.set_major_formatter(matplotlib.ticker.FormatStrFormatter("%gx"))
    ax.yaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    ax.set_xticks([j + 0.4 - width / 2 for j in range(len(names))])
    ax.set_xticklabels(names, rotation=70, ha="right", fontsize=7)
    ax.set_ylabel("speed-up over cuDNN (higher is better)")
    ax.legend(fontsize=7, ncol=3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def markdown(results: dict[str, Any]) -> str:
    meta = results["meta"]
    out = [
        f"Date: {meta['date']}  ",
        f"GPU: {meta['gpu']} (torch {meta['torch']}, triton {meta['triton']})  ",
        f"Command: `{meta['command']}`",
        "",
        "| case | dtype | ours us | heuristic us | cuDNN us | Inductor us | floor us | ours x cuDNN "
        "| heuristic x cuDNN | Inductor x cuDNN | ours / floor | template |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in results["cases"]:
        c = r["case"]
        ours, cud, heur = r.get("ours_us"), r.get("cudnn_us"), r.get("heuristic_us")
        ind = r.get("inductor_us")
        ind_s = fmt_us(ind) if ind is not None else f"n/a ({r.get('inductor_note', '')})"[:40]
        out.append(
            f"| {c['name']} | {c['dtype']} | {fmt_us(ours)} | {fmt_us(heur)} | {fmt_us(cud)} | {ind_s} | "
            f"{r['floor_us']:.1f} | {fmt_x(cud / ours if ours else None)} | {fmt_x(cud / heur if heur else None)} "
            f"| {fmt_x(cud / ind if ind else None)} | {fmt_x(ours / r['floor_us'] if ours else None)} "
            f"| {r.get('template', '-')} |"
        )
    out.append("")
    out.append(
        "| dtype | gmean ours x cuDNN | min ours x cuDNN | gmean heuristic x cuDNN | gmean Inductor x cuDNN (cases) |"
    )
    out.append("|---|---:|---:|---:|---:|")
    for dtype, s in results.get("summary", {}).items():
        out.append(
            f"| {dtype} | {s['gmean_speedup_ours']:.2f} | {s['min_speedup_ours']:.2f} | {s.get('gmean_speedup_heuristic', float('nan')):.2f} "
            f"| {s['gmean_speedup_inductor']:.2f} ({s['inductor_cases']}/{s['cases']}) |"
        )
    out += [
        "",
        "By family (ours with the tuning table; heuristic: table off):",
        "",
        "| family | dtype | n | gmean ours x cuDNN | min (case) | gmean heuristic x cuDNN | below 0.8x |",
        "|---|---|---:|---:|---|---:|---|",
    ]
    for key, f in results.get("families", {}).items():
        fam, dtype = key.split("/")
        out.append(
            f"| {fam} | {dtype} | {f['n']} | {f['gmean']:.2f} | {f['min']:.2f} ({f['min_case']}) | "
            f"{f['gmean_heuristic']:.2f} | {', '.join(f['below_0.8']) or '-'} |"
        )
    return "\n".join(out) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--suite", type=Path, default=DEFAULT_SUITE)
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
    args.out.mkdir(parents=True, exist_ok=True)
    if args.from_json:
        results = json.loads(args.from_json.read_text())
        print(render(results, args.out, args.md))
        return

    import cuda_triton.conv  # noqa: F401  (registers torch.ops.triton.convolution)
    import triton

    torch.backends.cudnn.benchmark = True
    suite = load_suite(args.suite)
    keep = [s for s in args.cases.split(",") if s]
    cases = []
    for dtype in args.dtypes.split(","):
        for c in suite:
            case = nc.case_from_suite(c, dtype, bias=args.bias)
            if keep and not any(k in c.name for k in keep):
                continue
            if not args.all_cases and not is_target(case):
                continue
            cases.append(case)

    t0 = time.time()
    jobs: list[tuple] = []
    if not args.no_inductor:  # Inductor's max-autotune compiles first (the long jobs), in the worker pool
        ind_dtypes = set(args.inductor_dtypes.split(","))
        for c in cases:
            if c["dtype"] in ind_dtypes and (
                args.inductor_all
                or inductor_cannot_compile(problem_of(c, *nc.make_tensors(c, "meta"))) is None
            ):
                jobs.append(("inductor", c, None, None))
    jobs += [("ours", c, None, None) for c in cases]
    from cuda_triton.conv.templates import NoTemplateError, select_candidate

    for c in cases:  # the heuristic's choice (table off), timed beside the table's
        try:
            heur = select_candidate(problem_of(c, *nc.make_tensors(c, "meta")), None)
        except NoTemplateError:
            continue
        jobs.append(("ours", c, heur.template.name, heur.schedule.as_dict()))
    tune_dtypes = set((args.tune_dtypes or args.dtypes).split(","))
    if args.tune:
        for c in [c for c in cases if c["dtype"] in tune_dtypes]:
            x, w, b = nc.make_tensors(c, "meta")
            for name, sched in candidates(problem_of(c, x, w, b)):
                jobs.append(("ours", c, name, sched.as_dict()))
    ours_status = warm(jobs, args.workers, args.compile_timeout)
    print(f"warmed {len(ours_status)}/{len(jobs)} of our kernels in {time.time() - t0:.0f} s", flush=True)
    results: dict[str, Any] = {
        "meta": {
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
        },
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
