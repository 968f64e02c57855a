"""Compiling kernels in worker processes ahead of a GPU measurement, so the measuring process hits the caches.

Triton's JIT keeps compiled kernels in its on-disk cache (``TRITON_CACHE_DIR``), Inductor its FX graphs and
autotuning results in its own: a worker that compiles a kernel leaves it there, and the measuring process then
loads it in milliseconds instead of compiling it between two timings. The workers are the export's compile pool
(`cuda_triton.conv.compile_pool.CompilePool`), spawned rather than forked (a forked child of a process that has
initialised CUDA cannot use it). Two kinds of job:

* `ScheduleWarmup` (scripts/tune.py): JIT-compile the launches of some schedules of one template for one
  problem, without launching them (no GPU memory is touched: tensors are stand-ins carrying their dtype);
* `CaseWarmup` (scripts/bench_conv.py, scripts/gpu_numerics.py): run a case once on the GPU through our op
  (its own choice or a forced template and schedule) or through Inductor, stopping at a deadline.

Depends on torch and cuda_triton.conv only.
"""

from __future__ import annotations

import concurrent.futures as cf
import signal
import time
from collections.abc import Iterator
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from typing import Any

import torch

from cuda_triton.conv.compile_pool import CompilePool

from . import conv_cases as nc

_TORCH_DTYPE = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32, "fp64": torch.float64}


def warmup_args(launch: Any, bound: set[str], default_dtype: torch.dtype) -> list[Any]:
    """``launch``'s positional arguments for ``fn.warmup``, specialised as the measured run's will be, so that the
    run finds the kernel the worker compiled: a tensor of a role in ``bound`` (the roles the run binds to a
    tensor) is a stand-in carrying its dtype (Triton assumes a 16-byte-aligned pointer); any other role (a
    bias-free problem's bias, the operand slots of a fused chain it does not have) is None, as the run passes it.
    Triton specialises on a None pointer, so a stand-in there would compile a kernel nobody runs."""
    from cuda_triton.kernel.launch import TensorArg

    args: list[Any] = []
    for a in launch.args:
        if not isinstance(a, TensorArg):
            args.append(a.value)
        elif a.role not in bound:
            args.append(None)
        else:
            args.append(_TORCH_DTYPE.get(a.dtype, default_dtype))
    return args


@dataclass(frozen=True)
class ScheduleWarmup:
    """JIT-compile the launches of ``schedules`` (dicts) of ``template`` for the problem ``spec``."""

    spec: dict[str, Any]
    template: str
    schedules: tuple[dict[str, int], ...]

    def compile(self) -> tuple[int, list[str]]:
        """(schedules compiled, errors): a template error is reported, never raised."""
        from cuda_triton.conv.templates import get_template
        from cuda_triton.conv.tuning_keys import problem_from_spec
        from cuda_triton.kernel.launch import Schedule, running_arch

        from .tuning_measure import tuned_roles

        problem = problem_from_spec(self.spec)
        template = get_template(self.template)
        errors: list[str] = []
        done = 0
        for sd in self.schedules:
            try:
                schedule = Schedule.from_dict(sd)
                for launch in template.launches(problem, schedule):
                    args = warmup_args(launch, tuned_roles(template, problem, schedule), problem.torch_dtype)
                    target = launch.for_arch(running_arch())
                    target.fn.warmup(
                        *args, grid=target.grid, **target.compile_options(), **dict(target.constexprs)
                    )
                done += 1
            except Exception as e:
                errors.append(f"{Schedule.from_dict(sd).key()}: {type(e).__name__}: {str(e)[:200]}")
        return done, errors


@dataclass(frozen=True)
class CaseWarmup:
    """Run ``case`` once on the GPU: ``kind`` "ours" (with ``template``/``schedule`` forced when given) or
    "inductor"; a run still going at ``deadline`` (``time.time()``) is stopped there."""

    kind: str
    case: nc.Case
    template: str | None = None
    schedule: dict[str, int] | None = None
    deadline: float | None = None

    @property
    def label(self) -> str:
        return job_label(self.kind, self.case, self.template, self.schedule)

    def compile(self) -> tuple[str, str]:
        """(label, "ok" or the error's first line)."""
        try:
            with nullcontext() if self.deadline is None else time_limit(self.deadline - time.time()):
                self._run()
            return self.label, "ok"
        except Exception as e:
            return self.label, f"{type(e).__name__}: {str(e).splitlines()[0][:300] if str(e) else ''}"

    def _run(self) -> None:
        from .bench_contenders import inductor_call, ours_call

        torch.backends.cudnn.benchmark = True
        x, w, b = nc.make_tensors(self.case, "cuda")
        if self.kind == "inductor":
            inductor_call(self.case, x, w, b)()
        elif self.template is None:
            ours_call(self.case, x, w, b)()
        else:
            from cuda_triton.conv.templates import force_conv_candidate
            from cuda_triton.conv.templates.base import Schedule

            with force_conv_candidate(self.template, Schedule.from_dict(self.schedule or {})):
                ours_call(self.case, x, w, b)()
        torch.cuda.synchronize()


def job_label(kind: str, case: nc.Case, template: str | None, schedule: dict | None) -> str:
    """The key under which `warm_cases` reports a case job: kind, case, and the forced template/schedule."""
    return f"{kind}:{nc.case_label(case)}" + (
        f"/{template}/{sorted((schedule or {}).items())}" if template else ""
    )


class CompileTimeout(Exception):
    """A compile (a warm-up job, an Inductor compile) ran past its time limit."""


@contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    """Raise CompileTimeout in this process's main thread after ``seconds`` (at once when there are none left)."""
    if seconds <= 0:
        raise CompileTimeout("no time left")

    def fire(signum: int, frame: Any) -> None:
        raise CompileTimeout(f"no result within {seconds:.1f} s")

    previous = signal.signal(signal.SIGALRM, fire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def warm_cases(jobs: list[CaseWarmup], workers: int, deadline_s: float) -> dict[str, str]:
    """Run case jobs in ``workers`` spawned processes for at most ``deadline_s`` seconds; returns label ->
    status for the jobs that finished in time. With one worker or fewer they run in this process."""
    if not jobs or workers <= 0:
        return {}
    deadline = time.time() + deadline_s
    timed = {job.label: CaseWarmup(job.kind, job.case, job.template, job.schedule, deadline) for job in jobs}
    pool = CompilePool(workers, start_method="spawn")
    status: dict[str, str] = {}
    if pool.executor() is None:
        for job in timed.values():
            if time.time() >= deadline:
                break
            label, st = job.compile()
            status[label] = st
        return status
    pool.submit(timed)
    try:
        for fut in cf.as_completed(list(pool.futures.values()), timeout=max(0.0, deadline - time.time())):
            label, st = fut.result()
            status[label] = st
    except (cf.TimeoutError, BrokenProcessPool):  # out of time, or a worker died: measure with what is warm
        pass
    finally:
        pool.shutdown()
    return status


class Precompiler:
    """Compiles every problem's schedule jobs in the background; `wait(key)` blocks until one problem's are
    done (or the deadline)."""

    def __init__(self, workers: int) -> None:
        self.pool = CompilePool(workers, start_method="spawn")
        self.keys: dict[str, list[str]] = {}

    def submit(self, key: str, jobs: list[ScheduleWarmup]) -> None:
        named = {f"{key}#{i}": job for i, job in enumerate(jobs)}
        self.keys[key] = list(named)
        self.pool.submit(named)

    def wait(self, key: str, deadline: float | None) -> None:
        futs = [self.pool.futures.pop(k) for k in self.keys.pop(key, []) if k in self.pool.futures]
        timeout = None if deadline is None else max(0.0, deadline - time.monotonic())
        cf.wait(futs, timeout=timeout)

    def shutdown(self) -> None:
        self.pool.shutdown()
