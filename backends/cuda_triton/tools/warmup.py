"""Compiling kernels in worker processes ahead of a GPU measurement, so the measuring process hits the caches.

Triton's JIT keeps compiled kernels in its on-disk cache (``TRITON_CACHE_DIR``), Inductor its FX graphs and
autotuning results in its own: a worker that compiles a kernel leaves it there, and the measuring process then
loads it in milliseconds instead of compiling it between two timings. Two kinds of job:

* `ScheduleWarmup` (scripts/tune.py): JIT-compile the launches of some schedules of one template for one
  problem, without launching them (no GPU memory is touched: tensors are stand-ins carrying their dtype);
* `CaseWarmup` (scripts/bench_conv.py, scripts/gpu_numerics.py): run a case once on the GPU through our op
  (its own choice or a forced template and schedule) or through Inductor.

Workers are spawned, not forked: a forked child of a process that has initialised CUDA cannot use it.
Depends on torch and cuda_triton.conv only.
"""

from __future__ import annotations

import concurrent.futures as cf
import multiprocessing as mp
import time
from dataclasses import dataclass
from typing import Any

import torch

from . import conv_cases as nc

_TORCH_DTYPE = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32, "fp64": torch.float64}


@dataclass(frozen=True)
class ScheduleWarmup:
    """JIT-compile the launches of ``schedules`` (dicts) of ``template`` for the problem ``spec``."""

    spec: dict[str, Any]
    template: str
    schedules: tuple[dict[str, int], ...]

    def run(self) -> tuple[int, list[str]]:
        """(schedules compiled, errors): a template error is reported, never raised."""
        from cuda_triton.conv.templates import get_template
        from cuda_triton.conv.templates.base import Schedule, TensorArg, running_arch
        from cuda_triton.conv.tuning import problem_from_spec

        problem = problem_from_spec(self.spec)
        template = get_template(self.template)
        errors: list[str] = []
        done = 0
        for sd in self.schedules:
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
                        *args, grid=target.grid, **target.compile_options(), **dict(target.constexprs)
                    )
                done += 1
            except Exception as e:
                errors.append(f"{Schedule.from_dict(sd).key()}: {type(e).__name__}: {str(e)[:200]}")
        return done, errors


@dataclass(frozen=True)
class CaseWarmup:
    """Run ``case`` once on the GPU: ``kind`` "ours" (with ``template``/``schedule`` forced when given) or
    "inductor"."""

    kind: str
    case: nc.Case
    template: str | None = None
    schedule: dict[str, int] | None = None

    @property
    def label(self) -> str:
        return job_label(self.kind, self.case, self.template, self.schedule)

    def run(self) -> tuple[str, str]:
        """(label, "ok" or the error's first line)."""
        from .bench_contenders import inductor_call, ours_call

        try:
            torch.backends.cudnn.benchmark = True
            x, w, b = nc.make_tensors(self.case, "cuda")
            if self.kind == "ours":
                from cuda_triton.conv.templates import force_conv_candidate
                from cuda_triton.conv.templates.base import Schedule

                if self.template is None:
                    ours_call(self.case, x, w, b)()
                else:
                    with force_conv_candidate(self.template, Schedule.from_dict(self.schedule or {})):
                        ours_call(self.case, x, w, b)()
            else:
                inductor_call(self.case, x, w, b)()
            torch.cuda.synchronize()
            return self.label, "ok"
        except Exception as e:
            return self.label, f"{type(e).__name__}: {str(e).splitlines()[0][:300] if str(e) else ''}"


def job_label(kind: str, case: nc.Case, template: str | None, schedule: dict | None) -> str:
    """The key under which `warm_cases` reports a case job: kind, case, and the forced template/schedule."""
    return f"{kind}:{nc.case_label(case)}" + (
        f"/{template}/{sorted((schedule or {}).items())}" if template else ""
    )


def _run(job: ScheduleWarmup | CaseWarmup) -> Any:
    return job.run()


def warm_cases(jobs: list[CaseWarmup], workers: int, deadline_s: float) -> dict[str, str]:
    """Run case jobs in ``workers`` spawned processes until done or ``deadline_s`` seconds have passed;
    returns label -> status for the jobs that finished."""
    if not jobs or workers <= 0:
        return {}
    status: dict[str, str] = {}
    t0 = time.time()
    with mp.get_context("spawn").Pool(workers, maxtasksperchild=64) as pool:
        pending = pool.imap_unordered(_run, jobs)
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


class Precompiler:
    """Submits every problem's schedule jobs up front; `wait(key)` blocks until one problem's are done."""

    def __init__(self, jobs: int) -> None:
        self.pool = cf.ProcessPoolExecutor(max_workers=jobs, mp_context=mp.get_context("spawn"))
        self.futures: dict[str, list[cf.Future]] = {}

    def submit(self, key: str, jobs: list[ScheduleWarmup]) -> None:
        self.futures[key] = [self.pool.submit(_run, job) for job in jobs]

    def wait(self, key: str, deadline: float | None) -> None:
        futs = self.futures.pop(key, [])
        timeout = None if deadline is None else max(0.0, deadline - time.monotonic())
        cf.wait(futs, timeout=timeout)

    def shutdown(self) -> None:
        self.pool.shutdown(wait=False, cancel_futures=True)
