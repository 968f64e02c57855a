"""How scripts/tune.py measures one convolution: every schedule of every template that supports it.

For each candidate (template, schedule): one run on a NaN-poisoned output, checked element by element against
an fp32 ATen reference (no TF32) with a bound from the dtype's rounding times sum |x||w|; then, if correct, its
time from `timing.time_rotating` (CUDA graphs of back-to-back calls rotating through enough operand copies to
overflow L2, median of several replays). ATen/cuDNN (``cudnn.benchmark``) is timed the same way on the same
operands. Errors that leave the CUDA context unusable stop the run (`ContextLost`); the candidate being run is
named in an "inflight" file first, so a rerun skips the one that crashed.

Depends on torch and cuda_triton.conv only.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from .timing import time_rotating
from .warmup import ScheduleWarmup

LOG_VERSION = 1
MAX_GRAPH_CALLS = 2000  # calls in one timed graph at most (rotating operands: no output memory grows)


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
    # What each product a candidate sums in 16 bits adds to the bound: the unit roundoff times sum |x||w|.
    half_sum_unit: torch.Tensor


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
    return Operands(inputs, weights, biases, outputs, ref, bound, u * absref)


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


def tuned_roles(template, problem, schedule) -> set[str]:
    """The roles `schedule_runner` binds to a tensor (the compile workers stand in for exactly these,
    `tools.warmup.warmup_args`): input, weight, output, the schedule's scratch, and the bias when the problem has
    one; no fused chain's operands."""
    roles = {"input", "weight", "output", *(t.role for t in template.scratch(problem, schedule))}
    return roles | {"bias"} if problem.has_bias else roles


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


def check_output(out: torch.Tensor, ops: Operands, half_sum: int = 0) -> tuple[bool, float]:
    """Every element finite and within its bound, widened for a candidate that sums ``half_sum`` products in
    the 16-bit type (`ConvTemplate.half_sum_length`); returns (ok, max |err| / bound)."""
    o = out.float()
    err = (o - ops.reference).abs()
    finite = bool(torch.isfinite(o).all())
    bound = ops.bound + half_sum * ops.half_sum_unit if half_sum else ops.bound
    ratio = float((err / bound).max()) if o.numel() else 0.0
    return finite and ratio <= 1.0, (ratio if finite else math.inf)


def _sync(env: Env) -> None:
    if env.cuda:
        torch.cuda.synchronize(env.device)


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
                ok, ratio = check_output(ops.outputs[0], ops, template.half_sum_length(problem, schedule))
                cand.max_err_ratio = round(ratio, 4) if math.isfinite(ratio) else None
                if not ok:
                    cand.error = f"numerics: max |err|/bound = {ratio:.3g}"
                else:
                    cand.time_us, cand.method, est = time_rotating(
                        run, nrot, env.rep_ms, env.repeats, MAX_GRAPH_CALLS, env.prune, best_est
                    )
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
            result.cudnn_us, _, _ = time_rotating(
                lambda i: reference_convolution(ops.inputs[i], ops.weights[i], ops.biases[i], problem.params),
                nrot,
                env.rep_ms,
                env.repeats,
                MAX_GRAPH_CALLS,
            )
        except Exception as e:
            print(
                f"cuDNN timing failed for {problem.signature()}: {type(e).__name__}: {e}",
                file=sys.stderr,
                flush=True,
            )
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


def warmup_jobs(problem, limit: int | None, templates: set[str] | None = None) -> list[ScheduleWarmup]:
    """The compile jobs for every schedule `measure_problem` will try on ``problem``, four schedules a job."""
    from cuda_triton.conv.templates import registered_templates
    from cuda_triton.conv.tuning_keys import problem_spec

    spec = problem_spec(problem)
    jobs = []
    for t in registered_templates():
        if (templates is not None and t.name not in templates) or not t.supports(problem):
            continue
        scheds = [s.as_dict() for s in candidate_schedules(t, problem, limit)]
        for i in range(0, len(scheds), 4):
            jobs.append(ScheduleWarmup(spec, t.name, tuple(scheds[i : i + 4])))
    return jobs
