#!/usr/bin/env python
"""Measure every schedule of every template on a list of convolutions and write the tuning table (GPU).

    PYTHONPATH=backends python scripts/tune.py --out $OUT/tuning \\
        --problems public,models --dtypes fp16,bf16,fp32 --model-dtypes fp16 --batches 1,8 --budget-s 280

For each convolution it runs every schedule of every template whose ``supports`` accepts it: first once on a
NaN-poisoned output, checked element by element against ATen (fp32 reference without TF32, tolerance from the
dtype's rounding times sum |x||w|); then timed with CUDA events over a CUDA graph of back-to-back calls that
rotate through enough copies of input/weight/output to overflow L2 (median of several replays). ATen/cuDNN
(``cudnn.benchmark=True``) is timed the same way on the same inputs.

Output (``--out DIR`` writes ``DIR/sm<arch>.json``; ``--out FILE.json`` writes that file):
  * the table, ``cuda_triton.conv.tuning`` format, directly usable as ``backends/cuda_triton/conv/tuning/sm90.json``;
  * ``<table>.log.jsonl``: one line per convolution with every candidate's time or error (appended and fsynced
    as it goes; a rerun with the same --out, or ``--resume OLD.log.jsonl``, skips what is done);
  * ``<table>.md``: a summary (speed-up over cuDNN, heuristic vs tuned, failures).
The table is rewritten every 30 s and at the end (a budget stop or Ctrl-C ends cleanly with a complete table);
after a hard kill, ``--rebuild LOG...`` writes the table from the log without measuring anything.

Problem sources (``--problems``, comma-separated, in priority order): ``public`` (bench/public_suite.py, its own
batch sizes and layouts, every --dtypes), ``models`` (all of scripts/tuning_signatures.py) or ``model:NAME``
(one of them; --model-dtypes, --batches, --layouts), ``zoo:NAME`` (a cuda_triton.models.zoo model, its convs
found by torch.export + cuda_triton.conv.binding), ``json:PATH`` (a list of signature strings, expanded over
--dtypes and --layouts; or problem specs; or a table or a log).

Kernels are compiled ahead of the measurements by --jobs worker processes (they warm Triton's on-disk cache,
which the measuring process then hits). Without a GPU the script runs the kernels in the Triton interpreter and
times them on the CPU: only for smoke tests; such tables are marked ``meta.timing = "cpu-interpreter"``.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import hashlib
import importlib.util
import json
import math
import os
import signal
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
if str(ROOT / "backends") not in sys.path:
    sys.path.insert(0, str(ROOT / "backends"))

import torch  # noqa: E402

LOG_VERSION = 1
_T_START = time.monotonic()  # --budget-s counts from here (imports included)


# ---- small utilities ----------------------------------------------------------------------------------------
def _stderr(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


class _Progress:
    """tqdm when importable, else a line every few seconds."""

    def __init__(self, total: int, desc: str) -> None:
        self.total, self.n, self.desc = total, 0, desc
        self._last = 0.0
        try:
            from tqdm import tqdm

            interval = 1.0 if sys.stderr.isatty() else 15.0  # a captured log stays short
            self._bar = tqdm(
                total=total, desc=desc, dynamic_ncols=True, file=sys.stderr, mininterval=interval
            )
        except ImportError:
            self._bar = None

    def update(self, postfix: str = "") -> None:
        self.n += 1
        if self._bar is not None:
            self._bar.set_postfix_str(postfix[:60], refresh=False)
            self._bar.update(1)
            return
        now = time.monotonic()
        if now - self._last > 5 or self.n == self.total:
            self._last = now
            _stderr(f"{self.desc}: {self.n}/{self.total} {postfix}")

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()


# ---- problem sources ----------------------------------------------------------------------------------------
def _load_public_suite():
    for path in (ROOT / "bench" / "public_suite.py", Path("/work/shared/bench/public_suite.py")):
        if path.exists():
            spec = importlib.util.spec_from_file_location("public_suite", path)
            assert spec is not None and spec.loader is not None
            module = importlib.util.module_from_spec(spec)
            sys.modules["public_suite"] = module
            spec.loader.exec_module(module)
            return module.PUBLIC
    raise FileNotFoundError(
        "bench/public_suite.py not found in the repository (copy /work/shared/bench/public_suite.py there)"
    )


def public_problems(dtypes: list[str], bias: bool) -> list[tuple[str, Any]]:
    from tuning_signatures import Layer, layer_problem, parse_dtype

    out = []
    for dt in dtypes:
        dtype, tf32 = parse_dtype(dt)
        for case in _load_public_suite():
            layer = Layer(
                f"public:{case.name}",
                case.C,
                tuple(case.spatial),
                case.K,
                tuple(case.kernel),
                tuple(case.stride),
                tuple(case.pad_before),
                tuple(case.pad_after),
                tuple(case.dilation),
                case.groups,
                case.transposed,
                tuple(case.output_padding) if case.transposed else (),
                bias,
            )
            layout = "channels_last" if case.channels_last else "contiguous"
            out.append((layer.net, layer_problem(layer, case.N, dtype, layout, tf32)))
    return out


def model_problems(names: list[str] | None, dtypes: list[str], batches: list[int], layouts: list[str]):
    from tuning_signatures import problems

    return [(f"model:{net}", p) for net, p in problems(names, batches, dtypes, layouts)]


def zoo_problems(name: str, dtypes: list[str], batches: list[int]) -> list[tuple[str, Any]]:
    """The convolutions of a zoo model as torch.export records them (no executorch involved)."""
    from cuda_triton.conv.binding import bind_conv, is_conv_node
    from cuda_triton.conv.problem import ConvProblem
    from cuda_triton.models import zoo
    from tuning_signatures import parse_dtype

    out = []
    for dt in dtypes:
        dtype, tf32 = parse_dtype(dt)
        for batch in batches:
            shape = (batch, *zoo.ZOO[name].input_shape[1:])
            model, example = zoo.build(name, getattr(torch, dtype), shape)
            ep = torch.export.export(model, example)
            for node in ep.graph.nodes:
                if node.op != "call_function" or not is_conv_node(node):
                    continue
                args = bind_conv(node)
                x, w = args.input.meta["val"], args.weight.meta["val"]
                p = ConvProblem.from_shapes(
                    tuple(x.shape), tuple(x.stride()), tuple(w.shape), tuple(w.stride()),
                    args.bias is not None, args.params, dtype, tf32,
                )  # fmt: skip
                out.append((f"zoo:{name}", p))
    return out


def json_problems(path: str, dtypes: list[str], layouts: list[str]) -> list[tuple[str, Any]]:
    """Problems from a JSON list (or a table's entries, or a .jsonl log). Items may be:

    * a signature string (``ConvProblem.signature()``): every --dtypes x --layouts (dense tensors);
    * an object with "signature" and optional "dtype" (fp16/bf16/fp32/fp32-ieee) and "layout";
    * a problem spec (what tables and logs store), or an object holding one under "problem".
    """
    from cuda_triton.conv.tuning_keys import problem_from_signature, problem_from_spec
    from tuning_signatures import parse_dtype

    text = Path(path).read_text()
    if path.endswith(".jsonl"):
        items = [json.loads(line) for line in text.splitlines() if line.strip()]
    else:
        data = json.loads(text)
        items = data["entries"] if isinstance(data, dict) else data
    name = f"json:{Path(path).name}"
    out = []
    for item in items:
        if isinstance(item, str) or (
            isinstance(item, dict) and "signature" in item and "problem" not in item
        ):
            sig = item if isinstance(item, str) else item["signature"]
            dts = [item["dtype"]] if isinstance(item, dict) and "dtype" in item else dtypes
            lays = [item["layout"]] if isinstance(item, dict) and "layout" in item else layouts
            seen = set()
            for dt in dts:
                dtype, tf32 = parse_dtype(dt)
                for lay in lays:
                    p = problem_from_signature(sig, dtype, lay, tf32)
                    if p not in seen:
                        seen.add(p)
                        out.append((name, p))
        else:
            out.append((name, problem_from_spec(item.get("problem", item))))
    return out


def collect_problems(args: argparse.Namespace) -> list[tuple[str, Any]]:
    found: list[tuple[str, Any]] = []
    for source in [s.strip() for s in args.problems.split(",") if s.strip()]:
        if source == "public":
            found += public_problems(args.dtypes, args.bias)
        elif source == "models":
            found += model_problems(None, args.model_dtypes, args.batches, args.layouts)
        elif source.startswith("model:"):
            found += model_problems([source[6:]], args.model_dtypes, args.batches, args.layouts)
        elif source.startswith("zoo:"):
            found += zoo_problems(source[4:], args.model_dtypes, args.batches)
        elif source.startswith("json:"):
            found += json_problems(source[5:], args.dtypes, args.layouts)
        else:
            raise SystemExit(
                f"unknown problem source {source!r} (public, models, model:NAME, zoo:NAME, json:PATH)"
            )
    return found


# ---- the measuring machinery ------------------------------------------------------------------------------
@dataclass
class Env:
    device: torch.device
    cuda: bool
    arch: int
    l2_bytes: int
    rep_ms: float
    repeats: int
    max_rotations: int
    prune: float
    stream: Any = None  # the CUDA graph capture stream
    inflight: Path | None = None  # names the candidate being run, so a crash is not repeated on resume
    skip: set[str] = field(default_factory=set)  # candidates that crashed an earlier run


# Errors after which the CUDA context is unusable: the run must stop (and not retry that candidate).
CONTEXT_LOST = (
    "illegal memory access",
    "misaligned address",
    "unspecified launch failure",
    "illegal instruction",
    "device-side assert",
    "CUDA_ERROR_ILLEGAL",
    "CUDA_ERROR_LAUNCH_FAILED",
)


class ContextLost(RuntimeError):
    pass


def _candidate_id(key: list[Any], template: str, schedule: dict[str, int]) -> str:
    return json.dumps([key, template, schedule], sort_keys=True)


def read_inflight(path: Path) -> set[str]:
    """The candidate an earlier run was running when it died (empty when it finished cleanly)."""
    try:
        return {path.read_text().strip()} if path.exists() and path.read_text().strip() else set()
    except OSError:
        return set()


def _seed_for(problem) -> int:
    return int(hashlib.sha1(problem.signature().encode() + problem.dtype.encode()).hexdigest()[:8], 16)


def _dense_like(size, stride, dtype, device, gen) -> torch.Tensor:
    t = torch.empty_strided(size, stride, dtype=dtype, device=device)
    t.copy_(torch.randn(size, generator=gen, device=device))
    return t


@dataclass
class Operands:
    inputs: list[torch.Tensor]
    weights: list[torch.Tensor]
    biases: list[torch.Tensor | None]
    outputs: list[torch.Tensor]
    reference: torch.Tensor  # fp32, logical shape of the output
    bound: torch.Tensor  # allowed |error| per element


def unit_roundoff(problem) -> float:
    if problem.dtype == "float16":
        return 2.0**-11
    if problem.dtype == "bfloat16":
        return 2.0**-8
    return 2.0**-11 if problem.allow_tf32 else 2.0**-24


def make_operands(problem, env: Env) -> Operands:
    """Random operands (rotated copies), the fp32 reference and the per-element error bound."""
    from cuda_triton.conv.op import reference_convolution

    gen = torch.Generator(device=env.device).manual_seed(_seed_for(problem))
    dt = problem.torch_dtype
    x0 = _dense_like(problem.input_size, problem.input_stride, dt, env.device, gen)
    w0 = _dense_like(problem.weight_size, problem.weight_stride, dt, env.device, gen)
    w0.mul_(1.0 / math.sqrt(max(1, math.prod(problem.weight_size[1:]))))
    b0 = (
        torch.randn(problem.out_channels, generator=gen, device=env.device).to(dt)
        if problem.has_bias
        else None
    )

    p = problem.params
    with _exact_fp32():
        ref = reference_convolution(x0.float(), w0.float(), None if b0 is None else b0.float(), p)
        absref = reference_convolution(x0.float().abs(), w0.float().abs(), None, p)
    taps = (problem.in_channels // problem.groups) * math.prod(problem.kernel)
    u = unit_roundoff(problem)
    # Inputs rounded to the dtype (exact here: operands are already in it), products exact in fp32, sums of
    # `taps` terms in fp32 (ours and the reference's), output rounded once: |err| <= (4u + 2*taps*2^-24) * sum|x||w|
    # plus one rounding of the bias-added value.
    rel = 4 * u + 2 * taps * 2.0**-24
    bound = rel * absref + 2 * u * ref.abs() + 1e-6

    per_set = problem.min_bytes()
    rot = 1
    if env.cuda:
        rot = max(2, min(env.max_rotations, math.ceil(2 * env.l2_bytes / max(per_set, 1))))
        rot = max(1, min(rot, (2 << 30) // max(per_set, 1)))
    inputs, weights, biases, outputs = [x0], [w0], [b0], []
    for _ in range(rot - 1):
        inputs.append(x0.clone(memory_format=torch.preserve_format))
        weights.append(w0.clone(memory_format=torch.preserve_format))
        biases.append(None if b0 is None else b0.clone())
    for _ in range(rot):
        outputs.append(
            torch.empty_strided(problem.output_size, problem.output_stride, dtype=dt, device=env.device)
        )
    return Operands(inputs, weights, biases, outputs, ref, bound)


@contextlib.contextmanager
def _exact_fp32():
    """Exact fp32 for the reference, without cuDNN's per-shape benchmark (only its timing needs that)."""
    b = torch.backends
    saved = (b.cudnn.allow_tf32, b.cuda.matmul.allow_tf32, b.cudnn.benchmark)
    b.cudnn.allow_tf32, b.cuda.matmul.allow_tf32, b.cudnn.benchmark = False, False, False
    try:
        yield
    finally:
        b.cudnn.allow_tf32, b.cuda.matmul.allow_tf32, b.cudnn.benchmark = saved


def schedule_runner(template, problem, schedule, ops: Operands) -> Callable[[int], None]:
    """run(i): the schedule's launches on rotating operand set i (its prepared weight and scratch made once)."""
    launches = template.launches(problem, schedule)
    tensors = [
        {
            "input": ops.inputs[i],
            "weight": template.prepare_weight(ops.weights[i], problem, schedule),
            "bias": ops.biases[i],
            "output": ops.outputs[i],
            **template.allocate_scratch(problem, schedule, ops.outputs[i].device),
        }
        for i in range(len(ops.inputs))
    ]

    def run(i: int) -> None:
        for launch in launches:
            launch.run(tensors[i])

    return run


def check_output(out: torch.Tensor, ops: Operands) -> tuple[bool, float]:
    """Every element finite and within its bound; returns (ok, max |err| / bound)."""
    o = out.float()
    err = (o - ops.reference).abs()
    finite = bool(torch.isfinite(o).all())
    ratio = float((err / ops.bound).max()) if o.numel() else 0.0
    return finite and ratio <= 1.0, (ratio if finite else math.inf)


def _sync(env: Env) -> None:
    if env.cuda:
        torch.cuda.synchronize(env.device)


def _graph_samples(fn, nrot: int, n_inner: int, env: Env) -> list[float]:
    """Capture ``n_inner`` calls (rotating) in a CUDA graph, replay it ``env.repeats`` times: us per call.

    Uses capture_begin/capture_end on a side stream rather than ``torch.cuda.graph`` (whose gc.collect and
    empty_cache per capture would dominate a tuning run).
    """
    graph = torch.cuda.CUDAGraph()
    stream = env.stream
    assert stream is not None
    stream.wait_stream(torch.cuda.current_stream(env.device))
    with torch.cuda.stream(stream):
        fn(0)  # a warm-up on the capture stream
        graph.capture_begin()
        try:
            for i in range(n_inner):
                fn(i % nrot)
        finally:
            graph.capture_end()
    torch.cuda.current_stream(env.device).wait_stream(stream)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    graph.replay()
    samples = []
    for _ in range(env.repeats):
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end) * 1e3 / n_inner)
    del graph
    return samples


def time_us(fn, nrot: int, env: Env, best_est: float | None = None) -> tuple[float, str, float]:
    """Median microseconds per call of ``fn(i)`` (i = rotation index): (time, method, eager estimate).

    The eager estimate includes host launch overhead; when it exceeds ``env.prune`` times the best eager
    estimate so far (and 50 us, so host-bound small kernels are never pruned) the precise timing is skipped.
    """
    if not env.cuda:
        fn(0)
        samples = []
        for i in range(3):
            t0 = time.perf_counter()
            fn(i % nrot)
            samples.append((time.perf_counter() - t0) * 1e6)
        med = statistics.median(samples)
        return med, "cpu", med

    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for i in range(nrot):  # warm up every rotation once
        fn(i)
    n_est = max(nrot, 3)

    def estimate(calls: int) -> float:
        start.record()
        for i in range(calls):
            fn(i % nrot)
        end.record()
        end.synchronize()
        return start.elapsed_time(end) * 1e3 / calls

    est = estimate(n_est)
    if best_est is not None and est > env.prune * best_est and est > 50:
        # Confirm before pruning: right after an in-process compile (a first launch of 0.3 s) the idle GPU has
        # clocked down, and the first estimate read 349 us for a 17.7 us kernel (box template, 2026-12-03).
        est = min(est, estimate(max(n_est, math.ceil(20e3 / est))))  # ~20 ms of calls: clocks back up
        if est > env.prune * best_est and est > 50:
            return est, "eager-pruned", est
    n_inner = max(nrot, min(2000, math.ceil(env.rep_ms * 1e3 / max(est, 1.0))))
    try:
        samples = _graph_samples(fn, nrot, n_inner, env)
        per_graph_us = statistics.median(samples) * n_inner
        if per_graph_us < 0.5 * env.rep_ms * 1e3 and n_inner < 2000:
            # Host-bound estimate: the graph ran shorter than wanted; capture a longer one for precision.
            n_inner = max(nrot, min(2000, math.ceil(n_inner * env.rep_ms * 1e3 / max(per_graph_us, 1.0))))
            samples = _graph_samples(fn, nrot, n_inner, env)
        method = "graph"
    except Exception as e:  # capture not possible: fall back to an eager loop
        method = f"eager ({type(e).__name__})"
        torch.cuda.synchronize(env.device)
        samples = []
        for _ in range(env.repeats):
            start.record()
            for i in range(n_inner):
                fn(i % nrot)
            end.record()
            end.synchronize()
            samples.append(start.elapsed_time(end) * 1e3 / n_inner)
    return statistics.median(samples), method, est


@dataclass
class CandidateResult:
    template: str
    schedule: dict[str, int]
    time_us: float | None = None
    method: str = ""
    error: str | None = None
    max_err_ratio: float | None = None
    offered: bool | None = None  # False: not in template.schedules(problem) (the heuristic's own choice)
    first_run_s: float | None = None  # the first launch's wall time: large when it had to compile

    def to_json(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if v is not None}


@dataclass
class ProblemResult:
    key: list[Any]
    problem: dict[str, Any]
    sources: list[str]
    candidates: list[CandidateResult] = field(default_factory=list)
    cudnn_us: float | None = None
    heuristic: dict[str, Any] | None = None
    seconds: float = 0.0

    def best(self) -> CandidateResult | None:
        ok = [
            c
            for c in self.candidates
            if c.time_us is not None
            and c.error is None
            and c.method != "eager-pruned"
            and c.offered is not False
        ]
        return min(ok, key=lambda c: c.time_us) if ok else None

    def to_json(self, run: dict[str, Any]) -> dict[str, Any]:
        best = self.best()
        return {
            "log_version": LOG_VERSION,
            "run": run,
            "key": self.key,
            "problem": self.problem,
            "sources": self.sources,
            "cudnn_us": self.cudnn_us,
            "heuristic": self.heuristic,
            "best": None if best is None else best.to_json(),
            "candidates": [c.to_json() for c in self.candidates],
            "seconds": round(self.seconds, 3),
        }


class BudgetExceeded(Exception):
    pass


def measure_problem(
    problem,
    sources: list[str],
    env: Env,
    deadline: float | None,
    cudnn: bool,
    max_schedules: int | None = None,
    templates: set[str] | None = None,
) -> ProblemResult:
    from cuda_triton.conv.templates import heuristic_template, registered_templates
    from cuda_triton.conv.tuning_keys import problem_spec, table_key

    t_start = time.monotonic()
    result = ProblemResult(list(table_key(problem, env.arch)), problem_spec(problem), sources)
    ops = make_operands(problem, env)
    nrot = len(ops.inputs)
    supporting = []
    for t in registered_templates():
        if templates is not None and t.name not in templates:
            continue
        try:
            if t.supports(problem):
                supporting.append(t)
        except Exception as e:  # a template bug must not stop the run
            result.candidates.append(
                CandidateResult(t.name, {}, error=f"supports(): {type(e).__name__}: {e}")
            )
    heuristic = None
    if supporting:
        chosen = supporting[0]
        try:  # the op's own choice without a table entry (a claiming template first)
            chosen = heuristic_template(supporting, problem)
            heuristic = (chosen.name, chosen.heuristic_schedule(problem))
        except Exception as e:
            result.candidates.append(
                CandidateResult(chosen.name, {}, error=f"heuristic_schedule(): {type(e).__name__}: {e}")
            )
    best_est: float | None = None
    tf32_saved = torch.backends.cudnn.allow_tf32
    for template in supporting:
        try:
            schedules = candidate_schedules(template, problem, schedule_limit(sources, max_schedules))
        except Exception as e:  # a template bug must not stop the run
            result.candidates.append(
                CandidateResult(template.name, {}, error=f"schedules(): {type(e).__name__}: {e}")
            )
            continue
        offered = set(schedules)
        if heuristic is not None and heuristic[0] == template.name:
            # Measure the heuristic's choice first (it sets the pruning bar), even when the template's
            # tuning space lacks it (then it only gives heuristic_us and can never be the table's choice).
            schedules = [heuristic[1], *[s for s in schedules if s != heuristic[1]]]
        for schedule in schedules:
            if deadline is not None and time.monotonic() > deadline:
                raise BudgetExceeded
            cand = CandidateResult(template.name, schedule.as_dict())
            if schedule not in offered:
                cand.offered = False
            result.candidates.append(cand)
            cid = _candidate_id(result.key, template.name, cand.schedule)
            if cid in env.skip:
                cand.error = "crashed an earlier tuning run (CUDA context lost); not run again"
                continue
            if env.inflight is not None:
                env.inflight.write_text(cid)
            try:
                run = schedule_runner(template, problem, schedule, ops)
                ops.outputs[0].fill_(float("nan"))
                t_first = time.monotonic()
                run(0)  # compiles here unless the precompile workers filled Triton's cache
                _sync(env)
                cand.first_run_s = round(time.monotonic() - t_first, 3)
                ok, ratio = check_output(ops.outputs[0], ops)
                cand.max_err_ratio = round(ratio, 4) if math.isfinite(ratio) else None
                if not ok:
                    cand.error = f"numerics: max |err|/bound = {ratio:.3g}"
                else:
                    cand.time_us, cand.method, est = time_us(run, nrot, env, best_est)
                    best_est = est if best_est is None else min(best_est, est)
            except BudgetExceeded:
                raise
            except Exception as e:
                cand.error = f"{type(e).__name__}: {str(e).splitlines()[0][:300] if str(e) else ''}"
                if any(m in str(e) for m in CONTEXT_LOST):
                    raise ContextLost(
                        f"{template.name} {schedule.key()} on {problem.signature()} ({problem.dtype}) broke the "
                        f"CUDA context: {cand.error}"
                    ) from e
                _sync_quiet(env)
            if env.inflight is not None:
                env.inflight.write_text("")
    if heuristic is not None:
        hd = heuristic[1].as_dict()
        h = next((c for c in result.candidates if c.template == heuristic[0] and c.schedule == hd), None)
        result.heuristic = {
            "template": heuristic[0],
            "schedule": hd,
            "time_us": None if h is None else h.time_us,
        }
        if h is not None and h.error:
            result.heuristic["error"] = h.error
    if cudnn:
        from cuda_triton.conv.op import reference_convolution

        try:
            torch.backends.cudnn.allow_tf32 = problem.allow_tf32
            result.cudnn_us, _, _ = time_us(
                lambda i: reference_convolution(ops.inputs[i], ops.weights[i], ops.biases[i], problem.params),
                nrot,
                env,
            )
        except Exception as e:
            _stderr(f"cuDNN timing failed for {problem.signature()}: {type(e).__name__}: {e}")
        finally:
            torch.backends.cudnn.allow_tf32 = tf32_saved
    result.seconds = time.monotonic() - t_start
    return result


def _sync_quiet(env: Env) -> None:
    with contextlib.suppress(Exception):
        _sync(env)


# ---- which schedules to try -----------------------------------------------------------------------------------
def _schedule_distance(a, b) -> float:
    """How far apart two schedules are: log2 steps summed over their shared knobs (flags count 1 when they differ)."""
    da, db = a.as_dict(), b.as_dict()
    dist = 0.0
    for name in set(da) | set(db):
        x, y = da.get(name, 0), db.get(name, 0)
        if x == y:
            continue
        dist += abs(math.log2(x) - math.log2(y)) if x > 0 and y > 0 else 1.0
    return dist


def candidate_schedules(template, problem, limit: int | None) -> list:
    """``template.schedules(problem)``, or with ``limit`` only the ``limit`` nearest its heuristic choice.

    The full spaces hold 15-30 schedules per convolution and every convolution shape compiles its own kernels,
    so tuning hundreds of model layers with all of them costs hours of compile time; the schedules near the
    heuristic's choice are where the heuristic's misses lie (the public suite is always tuned in full)."""
    schedules = template.schedules(problem)
    if limit is None or len(schedules) <= limit:
        return schedules
    try:
        anchor = template.heuristic_schedule(problem)
    except Exception:
        return schedules[:limit]
    return sorted(schedules, key=lambda s: _schedule_distance(s, anchor))[:limit]


def schedule_limit(sources: list[str], args_limit: int | None) -> int | None:
    """The public suite is tuned over every schedule; other sources over ``--max-schedules``."""
    if args_limit is None or any(src.startswith("public") for src in sources):
        return None
    return args_limit


# ---- ahead-of-time compilation in worker processes -----------------------------------------------------------
_TORCH_DTYPE = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32, "fp64": torch.float64}


def warm_job(
    spec: dict[str, Any], template_name: str, schedules: list[dict[str, int]]
) -> tuple[int, list[str]]:
    """Compile (JIT warm-up, no launch) the kernels of some schedules; fills Triton's on-disk cache."""
    from cuda_triton.conv.templates import get_template
    from cuda_triton.conv.tuning_keys import problem_from_spec
    from cuda_triton.kernel.launch import Schedule, TensorArg, running_arch

    problem = problem_from_spec(spec)
    template = get_template(template_name)
    errors: list[str] = []
    done = 0
    for sd in schedules:
        try:
            for launch in template.launches(problem, Schedule.from_dict(sd)):
                args = []
                for a in launch.args:
                    if isinstance(a, TensorArg):
                        if a.role == "bias" and not problem.has_bias:
                            args.append(None)
                        else:  # a MockTensor: the dtype and a 16-byte-aligned pointer
                            args.append(_TORCH_DTYPE.get(a.dtype, problem.torch_dtype))
                    else:
                        args.append(a.value)
                target = launch.for_arch(running_arch())
                target.fn.warmup(
                    *args,
                    grid=target.grid,
                    **target.compile_options(),
                    **dict(target.constexprs),
                )
            done += 1
        except Exception as e:
            errors.append(f"{Schedule.from_dict(sd).key()}: {type(e).__name__}: {str(e)[:200]}")
    return done, errors


class Precompiler:
    """Submits every (problem, template) compile job up front; `wait(key)` blocks until a problem's are done."""

    def __init__(self, jobs: int) -> None:
        import concurrent.futures as cf
        import multiprocessing as mp

        self._cf = cf
        self.pool = cf.ProcessPoolExecutor(max_workers=jobs, mp_context=mp.get_context("spawn"))
        self.futures: dict[str, list[Any]] = {}

    def submit(self, key: str, problem, limit: int | None = None, templates: set[str] | None = None) -> None:
        from cuda_triton.conv.templates import registered_templates
        from cuda_triton.conv.tuning_keys import problem_spec

        spec = problem_spec(problem)
        futs = []
        for t in registered_templates():
            if (templates is not None and t.name not in templates) or not t.supports(problem):
                continue
            scheds = [s.as_dict() for s in candidate_schedules(t, problem, limit)]
            for i in range(0, len(scheds), 4):
                futs.append(self.pool.submit(warm_job, spec, t.name, scheds[i : i + 4]))
        self.futures[key] = futs

    def wait(self, key: str, deadline: float | None) -> None:
        futs = self.futures.pop(key, [])
        timeout = None if deadline is None else max(0.0, deadline - time.monotonic())
        self._cf.wait(futs, timeout=timeout)

    def shutdown(self) -> None:
        self.pool.shutdown(wait=False, cancel_futures=True)


# ---- the table from the log ---------------------------------------------------------------------------------
def read_logs(paths: list[Path]) -> dict[str, dict[str, Any]]:
    records: dict[str, dict[str, Any]] = {}
    for path in paths:
        if not path.exists():
            continue
        for n, line in enumerate(path.read_text().splitlines()):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError:
                _stderr(f"{path}:{n + 1}: skipping a truncated line")
                continue
            if rec.get("log_version") != LOG_VERSION:
                continue
            records[json.dumps(rec["key"])] = rec
    return records


def build_table(records: dict[str, dict[str, Any]], arch: int, meta: dict[str, Any]):
    from cuda_triton.conv.tuning import TuningEntry, TuningTable
    from cuda_triton.conv.tuning_keys import problem_from_spec
    from cuda_triton.kernel.launch import Schedule

    entries = []
    for rec in records.values():
        best = rec.get("best")
        if not best or rec["key"][0] != arch:
            continue
        h = rec.get("heuristic") or {}
        entries.append(
            TuningEntry.from_problem(
                problem_from_spec(rec["problem"]),
                arch,
                best["template"],
                Schedule.from_dict(best["schedule"]),
                best["time_us"],
                rec.get("cudnn_us"),
                h.get("time_us"),
            )
        )
    return TuningTable(entries, arch, meta)


def _geomean(xs: list[float]) -> float | None:
    xs = [x for x in xs if x and x > 0 and math.isfinite(x)]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def table_meta(records: dict[str, dict[str, Any]], command: str) -> dict[str, Any]:
    """Provenance of a table: the measuring runs' device/timing/versions (joined when they differ)."""
    meta: dict[str, Any] = {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    }
    for name in ("device", "timing", "torch", "triton"):
        values = sorted({str(r.get("run", {}).get(name, "unknown")) for r in records.values()})
        meta[name] = " + ".join(values) if values else "none"
    meta["commands"] = sorted({str(r.get("run", {}).get("command", "unknown")) for r in records.values()})
    meta["written_by"] = command
    meta["convolutions_measured"] = len(records)
    return meta


def generalisation_report(records: dict[str, dict[str, Any]]) -> list[str]:
    """Leave-one-out: for each measured convolution, the time of what lookup would pick were it not in the
    table (its nearest neighbour's schedule, else the heuristic), against the tuned best and the heuristic."""
    from cuda_triton.conv.tuning_keys import problem_from_spec

    arch_of = {r["key"][0] for r in records.values()}
    if len(arch_of) != 1:
        return []
    arch = arch_of.pop()
    try:
        table = build_table(records, arch, {})
    except Exception as e:  # a summary must not stop a run
        return ["", f"(generalisation report unavailable: {type(e).__name__}: {e})"]
    by_prec: dict[str, list[tuple[float, float, bool]]] = {}
    for rec in records.values():
        best, heur = rec.get("best"), rec.get("heuristic") or {}
        if not best or not heur.get("time_us"):
            continue
        times = {
            (c["template"], json.dumps(c["schedule"], sort_keys=True)): c["time_us"]
            for c in rec["candidates"]
            if c.get("time_us") is not None and not c.get("error") and c.get("method") != "eager-pruned"
        }
        m = table.nearest(problem_from_spec(rec["problem"]), arch)
        t_fallback = heur["time_us"]
        used = False
        if m is not None:
            t = times.get((m.template, json.dumps(m.schedule.as_dict(), sort_keys=True)))
            if t is not None:  # (a pruned or failed schedule has no time: count the heuristic's)
                t_fallback, used = t, True
        by_prec.setdefault(rec["key"][1], []).append(
            (t_fallback / best["time_us"], heur["time_us"] / best["time_us"], used)
        )
    if not by_prec:
        return []
    out = [
        "",
        "Generalisation (leave-one-out): each convolution looked up as if it were not in the table.",
        "",
        "| precision | convs | neighbour used | geomean lookup/tuned | geomean heuristic/tuned | worst lookup/tuned |",
        "|---|---|---|---|---|---|",
    ]
    for prec, rows in sorted(by_prec.items()):
        g1 = _geomean([r[0] for r in rows])
        g2 = _geomean([r[1] for r in rows])
        out.append(
            f"| {prec} | {len(rows)} | {sum(r[2] for r in rows)} | {g1:.3f} | {g2:.3f} | {max(r[0] for r in rows):.2f} |"
        )
    return out


def write_summary(path: Path, records: dict[str, dict[str, Any]], meta: dict[str, Any]) -> None:
    lines = [
        "# Tuning run summary",
        "",
        f"- date: {meta.get('date')}; device: {meta.get('device')}; timing: {meta.get('timing')}",
        f"- torch {meta.get('torch')}, triton {meta.get('triton')}; commands: {meta.get('commands')}",
        "",
    ]
    by_prec: dict[str, list[dict[str, Any]]] = {}
    for rec in records.values():
        by_prec.setdefault(rec["key"][1], []).append(rec)
    lines += [
        "| precision | convs | tuned | geomean cuDNN/tuned | geomean heuristic/tuned | < 0.8x cuDNN |",
        "|---|---|---|---|---|---|",
    ]
    for prec, recs in sorted(by_prec.items()):
        tuned = [r for r in recs if r.get("best")]
        sp = [r["cudnn_us"] / r["best"]["time_us"] for r in tuned if r.get("cudnn_us")]
        hr = [
            r["heuristic"]["time_us"] / r["best"]["time_us"]
            for r in tuned
            if r.get("heuristic") and r["heuristic"].get("time_us")
        ]
        g1, g2 = _geomean(sp), _geomean(hr)
        slow = sum(1 for s in sp if s < 0.8)
        lines.append(
            f"| {prec} | {len(recs)} | {len(tuned)} | {'-' if g1 is None else f'{g1:.2f}x'} | "
            f"{'-' if g2 is None else f'{g2:.3f}'} | {slow} |"
        )
    lines += [
        "",
        "| precision | layout | signature | sources | template | schedule | us | cuDNN us | speed-up | heuristic us |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for rec in sorted(records.values(), key=lambda r: r["key"]):
        b = rec.get("best")
        cud = rec.get("cudnn_us")
        h = (rec.get("heuristic") or {}).get("time_us")
        if b:
            sched = "_".join(f"{k}{v}" for k, v in sorted(b["schedule"].items()))
            sp = f"{cud / b['time_us']:.2f}x" if cud else "-"
            lines.append(
                f"| {rec['key'][1]} | {rec['key'][2]} | `{rec['key'][3]}` | {', '.join(rec['sources'][:3])} | "
                f"{b['template']} | {sched} | {b['time_us']:.1f} | {'-' if cud is None else f'{cud:.1f}'} | {sp} | "
                f"{'-' if h is None else f'{h:.1f}'} |"
            )
        else:
            lines.append(
                f"| {rec['key'][1]} | {rec['key'][2]} | `{rec['key'][3]}` | {', '.join(rec['sources'][:3])} | none | - | - | - | - | - |"
            )
    lines += generalisation_report(records)
    firsts = sorted(
        c["first_run_s"] for rec in records.values() for c in rec.get("candidates", []) if "first_run_s" in c
    )
    if firsts:
        slow = sum(1 for f in firsts if f > 0.5)
        lines += [
            "",
            f"First launches: median {firsts[len(firsts) // 2]:.3f} s; {slow} of {len(firsts)} took > 0.5 s "
            "(compiled in the measuring process; on a GPU run, compiles the precompile workers missed).",
        ]
    failures = [
        (rec["key"], c)
        for rec in records.values()
        for c in rec.get("candidates", [])
        if c.get("error", "").startswith("numerics")
    ]
    if failures:
        lines += ["", f"## Candidates that failed numerics ({len(failures)})", ""]
        for key, c in failures[:200]:
            lines.append(f"- {key[1]} {key[2]} `{key[3]}` {c['template']} {c['schedule']}: {c['error']}")
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text("\n".join(lines) + "\n")
    os.replace(tmp, path)


def print_plan(
    todo: list[tuple[str, Any, list[str]]],
    max_schedules: int | None = None,
    templates: set[str] | None = None,
) -> None:
    """Convolutions, candidates and distinct kernels (what compiling costs) per source, without a GPU."""
    from cuda_triton.conv.templates import registered_templates

    rows: dict[str, list[int]] = {}
    kernels: set[Any] = set()
    for _, problem, sources in todo:
        row = rows.setdefault(sources[0].split(":")[0] + ":" + problem.dtype, [0, 0, 0])
        row[0] += 1
        for t in registered_templates():
            if (templates is not None and t.name not in templates) or not t.supports(problem):
                continue
            for sched in candidate_schedules(t, problem, schedule_limit(sources, max_schedules)):
                row[1] += 1
                for launch in t.launches(problem, sched):
                    k = (
                        launch.name,
                        launch.constexprs,
                        tuple(launch.compile_options().items()),
                        problem.dtype,
                    )
                    if k not in kernels:
                        kernels.add(k)
                        row[2] += 1
    print(f"{'source:dtype':28s} {'convs':>6s} {'candidates':>10s} {'new kernels':>11s}")
    for name, (n, c, k) in rows.items():
        print(f"{name:28s} {n:6d} {c:10d} {k:11d}")
    print(f"{'total':28s} {len(todo):6d} {sum(r[1] for r in rows.values()):10d} {len(kernels):11d}")


# ---- main ------------------------------------------------------------------------------------------------
def _csv(s: str) -> list[str]:
    return [x.strip() for x in s.split(",") if x.strip()]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument(
        "--out", required=True, help="output directory (writes sm<arch>.json) or a .json table path"
    )
    ap.add_argument("--problems", default="public,models", help="comma-separated sources, in priority order")
    ap.add_argument(
        "--dtypes", type=_csv, default=["fp16", "bf16", "fp32"], help="for the public suite and json"
    )
    ap.add_argument("--model-dtypes", type=_csv, default=None, help="for models/zoo (default: --dtypes)")
    ap.add_argument("--batches", type=lambda s: [int(x) for x in _csv(s)], default=[1, 8])
    ap.add_argument(
        "--layouts",
        type=_csv,
        default=["contiguous", "channels_last"],
        help="2-D/3-D model layers, in priority order (exported models are contiguous unless converted)",
    )
    ap.add_argument("--bias", action="store_true", help="give public-suite convs a bias (default: none)")
    ap.add_argument(
        "--budget-s", type=float, default=None, help="stop cleanly this many seconds after the script started"
    )
    ap.add_argument("--jobs", type=int, default=None, help="compile worker processes (0: compile inline)")
    ap.add_argument(
        "--arch", type=int, default=None, help="table arch (default: the GPU's, 90 without a GPU)"
    )
    ap.add_argument("--resume", type=Path, nargs="*", default=[], help="earlier .log.jsonl files to reuse")
    ap.add_argument(
        "--rebuild", type=Path, nargs="*", default=None, help="only write the table from these logs"
    )
    ap.add_argument("--rep-ms", type=float, default=0.5, help="GPU time per timed graph replay")
    ap.add_argument("--repeats", type=int, default=7, help="timed replays per candidate (median)")
    ap.add_argument(
        "--prune", type=float, default=4.0, help="skip precise timing when the estimate is this x the best"
    )
    ap.add_argument(
        "--max-schedules",
        type=int,
        default=None,
        help="outside the public suite, try only this many schedules per template (nearest its heuristic)",
    )
    ap.add_argument(
        "--supported-by",
        default=None,
        help="measure only the convolutions this template supports (after adding or changing it)",
    )
    ap.add_argument(
        "--templates",
        type=_csv,
        default=None,
        help="measure only these templates' schedules (merge the result with --keep-faster: the table's other "
        "templates were not tried)",
    )
    ap.add_argument("--no-cudnn", action="store_true", help="do not time ATen/cuDNN")
    ap.add_argument("--limit", type=int, default=None, help="measure at most this many convolutions")
    ap.add_argument(
        "--dry-run",
        action="store_true",
        help="print what would be measured (convs, candidates, kernels) and exit",
    )
    args = ap.parse_args(argv)
    if args.model_dtypes is None:
        args.model_dtypes = args.dtypes
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    cuda = torch.cuda.is_available()
    if not cuda:
        os.environ.setdefault("TRITON_INTERPRET", "1")  # before any kernel module is imported
    import triton
    from cuda_triton.conv.tuning import clear_cache

    if args.arch is None:
        if cuda:
            major, minor = torch.cuda.get_device_capability()
            args.arch = major * 10 + minor
        else:
            args.arch = 90
    out = Path(args.out)
    table_path = out if out.suffix == ".json" else out / f"sm{args.arch}.json"
    log_path = table_path.with_name(table_path.stem + ".log.jsonl")
    inflight_path = table_path.with_name(table_path.stem + ".inflight")
    summary_path = table_path.with_name(table_path.stem + ".md")

    command = " ".join(["scripts/tune.py", *(argv if argv is not None else sys.argv[1:])])
    run_info = {
        "device": torch.cuda.get_device_name() if cuda else "cpu",
        "timing": "cuda-graph" if cuda else "cpu-interpreter",
        "torch": torch.__version__,
        "triton": triton.__version__,
        "command": command,
    }

    last_table = [time.monotonic()]

    def flush_outputs(records: dict[str, dict[str, Any]], final: bool = True) -> int:
        """Rewrite the table every 30 s while measuring (the log is the per-convolution record; `--rebuild`
        turns a log into a table) and at the end, with the summary."""
        if not final and time.monotonic() - last_table[0] < 30:
            return -1
        meta = table_meta(records, command)
        table = build_table(records, args.arch, meta)
        table.write(table_path)
        last_table[0] = time.monotonic()
        if final:
            write_summary(summary_path, records, meta)
        clear_cache()
        return len(table)

    if args.rebuild is not None:
        records = read_logs(list(args.rebuild))
        n = flush_outputs(records)
        print(f"wrote {table_path} ({n} entries from {len(records)} logged convolutions)")
        return 0

    records = read_logs([*args.resume, log_path])

    from cuda_triton.conv.templates import get_template, registered_templates
    from cuda_triton.conv.tuning_keys import table_key

    registered_templates()
    only = get_template(args.supported_by) if args.supported_by else None
    only_templates = None if args.templates is None else {get_template(n).name for n in args.templates}
    todo: list[tuple[str, Any, list[str]]] = []
    by_key: dict[str, int] = {}
    for source, problem in collect_problems(args):
        key = json.dumps(list(table_key(problem, args.arch)))
        if key in records or (only is not None and not only.supports(problem)):
            continue
        if key in by_key:
            todo[by_key[key]][2].append(source)
            continue
        by_key[key] = len(todo)
        todo.append((key, problem, [source]))
    if args.limit is not None:
        todo = todo[: args.limit]
    if args.dry_run:
        print_plan(todo, args.max_schedules, only_templates)
        return 0
    table_path.parent.mkdir(parents=True, exist_ok=True)
    if args.resume:  # carry the resumed records into this run's log, so the new log is complete on its own
        with log_path.open("w") as f:
            for rec in records.values():
                f.write(json.dumps(rec) + "\n")
    _stderr(f"{len(records)} convolutions already measured, {len(todo)} to go -> {table_path}")

    t0 = time.monotonic()
    deadline = None if args.budget_s is None else _T_START + args.budget_s
    env = Env(
        device=torch.device("cuda" if cuda else "cpu"),
        cuda=cuda,
        arch=args.arch,
        l2_bytes=getattr(torch.cuda.get_device_properties(0), "L2_cache_size", 50 << 20) if cuda else 0,
        rep_ms=args.rep_ms,
        repeats=args.repeats,
        max_rotations=64,
        prune=args.prune,
    )
    env.inflight = inflight_path
    for old_log in [*args.resume, log_path]:
        env.skip |= read_inflight(old_log.with_name(old_log.name.replace(".log.jsonl", "") + ".inflight"))
    if env.skip:
        _stderr(f"skipping {len(env.skip)} candidate(s) that crashed an earlier run")
    if cuda:
        torch.backends.cudnn.benchmark = True
        env.stream = torch.cuda.Stream(env.device)
        if hasattr(triton, "set_allocator"):  # kernels with global scratch (device-side TMA descriptors)
            triton.set_allocator(
                lambda size, align, stream: torch.empty(size, dtype=torch.int8, device="cuda")
            )
    jobs = args.jobs if args.jobs is not None else (min(16, max(1, (os.cpu_count() or 2) - 1)) if cuda else 0)
    pre = Precompiler(jobs) if (cuda and jobs > 0 and todo) else None
    if pre is not None:
        for key, problem, sources in todo:
            pre.submit(key, problem, schedule_limit(sources, args.max_schedules), only_templates)

    def _terminate(signum, frame):  # `timeout` sends SIGTERM: stop like Ctrl-C, writing the table
        raise KeyboardInterrupt

    previous_sigterm = signal.signal(signal.SIGTERM, _terminate)
    bar = _Progress(len(todo), "tuning")
    stopped = None
    measured = 0
    try:
        with log_path.open("a") as log:
            for key, problem, sources in todo:
                if deadline is not None and time.monotonic() > deadline:
                    stopped = "budget"
                    break
                if pre is not None:
                    pre.wait(key, deadline)
                try:
                    res = measure_problem(
                        problem,
                        sources,
                        env,
                        deadline,
                        not args.no_cudnn,
                        args.max_schedules,
                        only_templates,
                    )
                except BudgetExceeded:
                    stopped = "budget"
                    break
                except ContextLost as e:
                    _stderr(f"STOPPED: {e}")
                    _stderr(
                        f"rerun the same command (or --resume {log_path}) to continue without that candidate"
                    )
                    stopped = "CUDA context lost"
                    break
                inflight_path.write_text("")
                rec = res.to_json(run_info)
                log.write(json.dumps(rec) + "\n")
                log.flush()
                os.fsync(log.fileno())
                records[key] = rec
                measured += 1
                flush_outputs(records, final=False)
                b = rec["best"]
                sp = ""
                if b and rec["cudnn_us"]:
                    sp = f" {rec['cudnn_us'] / b['time_us']:.2f}x"
                bar.update(f"{rec['key'][1]} {problem.signature()[:30]}{sp}")
    except KeyboardInterrupt:
        stopped = "interrupt"
        inflight_path.write_text("")  # interrupted, not crashed: run that candidate again next time
    finally:
        signal.signal(signal.SIGTERM, previous_sigterm)
        bar.close()
        if pre is not None:
            pre.shutdown()
    n = flush_outputs(records)
    elapsed = time.monotonic() - t0
    state = "complete" if stopped is None else f"stopped ({stopped}); rerun the same command to continue"
    print(f"{state}: measured {measured} convolutions in {elapsed:.0f} s; table {table_path} has {n} entries")
    print(f"log {log_path}; summary {summary_path}")
    return 3 if stopped == "CUDA context lost" else 0


if __name__ == "__main__":
    sys.exit(main())
