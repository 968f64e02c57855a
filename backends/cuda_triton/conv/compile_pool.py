"""A process pool that compiles kernel launches ahead of time, each distinct kernel once.

The export uses one pool for the whole exporting process (`default_pool`): the partitioner submits the kernels
of every convolution it delegates as soon as it has decided (`CompilePool.submit`), and the preprocess collects
them (`CompilePool.compile_all`), so compiling overlaps ExecuTorch's own lowering work. Tuning and benchmark
scripts build their own `CompilePool` (e.g. with ``start_method="spawn"``).

A job is any picklable object with a ``compile() -> CompiledKernel`` method; `CompileJob` is the convolution
template's (it rebuilds the launch in the worker from the template name, problem and schedule). Jobs are keyed by
a caller-chosen string (the export uses ``aot.compile_cache_key``); a key compiled once is remembered for the life
of the pool.

Workers are forked by default (they inherit the imported templates; nothing re-imports torch or triton). With
one worker, or where fork is unavailable, or after the pool broke, jobs compile in the calling process.

Environment: ``CUDA_TRITON_JOBS`` (worker processes, default: every core this process may run on; 1 compiles in
this process), ``CUDA_TRITON_PROGRESS`` (1/0: force the progress bar on/off; default: shown when stderr is a
terminal). Depends on torch and triton only.
"""

from __future__ import annotations

import atexit
import logging
import multiprocessing
import os
import sys
from collections.abc import Mapping
from concurrent.futures import Future, ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from typing import Protocol

from ..kernel.aot import CompiledKernel, LaunchJob
from ..kernel.launch import KernelLaunch
from .problem import ConvProblem
from .templates import get_template

logger = logging.getLogger("cuda_triton.compile_pool")


class Job(Protocol):
    """What a pool compiles: a picklable recipe for one kernel."""

    def launch(self) -> KernelLaunch: ...

    def compile(self) -> CompiledKernel: ...


@dataclass(frozen=True)
class CompileJob(LaunchJob):
    """One launch of a convolution template, for one arch (everything a worker needs, all picklable)."""

    template: str
    problem: ConvProblem

    def launches(self) -> list[KernelLaunch]:
        return get_template(self.template).launches(self.problem, self.schedule)


def run_job(job: Job) -> CompiledKernel:
    """Compile one job (the function the workers run)."""
    return job.compile()


def jobs_setting() -> int:
    """Worker processes: ``CUDA_TRITON_JOBS`` if set, else the cores this process may run on."""
    raw = os.environ.get("CUDA_TRITON_JOBS", "").strip()
    if raw:
        return max(1, int(raw))
    return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1))


def progress_disabled() -> bool | None:
    """tqdm's ``disable``: False shows the bar, True hides it, None lets tqdm decide (shown on a terminal)."""
    raw = os.environ.get("CUDA_TRITON_PROGRESS", "").strip().lower()
    if raw in ("1", "true", "on", "yes"):
        return False
    if raw in ("0", "false", "off", "no"):
        return True
    return None


class CompilePool:
    """Compiles keyed jobs in worker processes; remembers every kernel it compiled.

    ``workers=None`` reads `jobs_setting` each time a pool is started (so a changed ``CUDA_TRITON_JOBS`` takes
    effect after `shutdown`).
    """

    def __init__(self, workers: int | None = None, start_method: str = "fork") -> None:
        self.workers = workers
        self.start_method = start_method
        self.pool: ProcessPoolExecutor | None = None
        self.futures: dict[str, Future[CompiledKernel]] = {}
        self.done: dict[str, CompiledKernel] = {}
        self.broken = False

    def _workers(self) -> int:
        return self.workers if self.workers is not None else jobs_setting()

    def executor(self) -> ProcessPoolExecutor | None:
        """The worker pool, started on first use; None when jobs compile in this process."""
        if (
            self.broken
            or self._workers() <= 1
            or self.start_method not in multiprocessing.get_all_start_methods()
        ):
            return None
        if self.pool is None:
            ctx = multiprocessing.get_context(self.start_method)
            self.pool = ProcessPoolExecutor(max_workers=self._workers(), mp_context=ctx)
            atexit.register(self.shutdown)
        return self.pool

    def shutdown(self, wait: bool = False) -> None:
        """Stop the workers (pending jobs are cancelled; compiled kernels are kept)."""
        if self.pool is not None:
            self.pool.shutdown(wait=wait, cancel_futures=True)
            self.pool = None
        self.futures.clear()

    @property
    def pending(self) -> int:
        """Jobs submitted to the workers and not yet collected."""
        return len(self.futures)

    def submit(self, jobs: Mapping[str, Job]) -> None:
        """Start compiling these jobs in the background (no-op without workers); returns at once."""
        pool = self.executor()
        if pool is None:
            return
        for key, job in jobs.items():
            if key in self.done or key in self.futures:
                continue
            try:
                self.futures[key] = pool.submit(run_job, job)
            except BrokenProcessPool:
                self._break()
                return

    def _break(self) -> None:
        logger.warning("cuda_triton: the compile process pool broke; compiling in this process instead")
        self.broken = True
        self.futures.clear()
        if self.pool is not None:
            self.pool.shutdown(wait=False, cancel_futures=True)
            self.pool = None

    def compile_all(self, jobs: Mapping[str, Job]) -> dict[str, CompiledKernel]:
        """Compile every job not compiled yet, in parallel, with a progress bar; returns key -> kernel."""
        from tqdm.auto import tqdm

        todo = {k: j for k, j in jobs.items() if k not in self.done}
        if todo:
            self.submit(todo)
            desc = f"cuda_triton: compiling {len(todo)} kernels"
            with tqdm(
                total=len(todo), desc=desc, unit="kernel", disable=progress_disabled(), file=sys.stderr
            ) as bar:
                pending = {self.futures[k]: k for k in todo if k in self.futures}
                try:
                    for fut in as_completed(pending):
                        key = pending[fut]
                        self.done[key] = fut.result()
                        self.futures.pop(key, None)
                        bar.update(1)
                except BrokenProcessPool:
                    self._break()
                for key, job in todo.items():  # no pool, or it broke: compile here
                    if key not in self.done:
                        self.done[key] = run_job(job)
                        bar.update(1)
        return {k: self.done[k] for k in jobs}


_DEFAULT = CompilePool()


def default_pool() -> CompilePool:
    """The pool the export shares across partitioner and preprocess (lives as long as the process)."""
    return _DEFAULT


def compile_all(jobs: Mapping[str, Job]) -> dict[str, CompiledKernel]:
    """`CompilePool.compile_all` on the default pool."""
    return _DEFAULT.compile_all(jobs)


def shutdown(wait: bool = False) -> None:
    """Stop the default pool's workers (e.g. to reap them before reading this process's CPU times)."""
    _DEFAULT.shutdown(wait=wait)


__all__ = [
    "CompileJob",
    "CompilePool",
    "Job",
    "compile_all",
    "default_pool",
    "jobs_setting",
    "progress_disabled",
    "run_job",
    "shutdown",
]
