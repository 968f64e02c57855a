"""The preprocess's compile seam: compile keys, compile jobs, the early start from the partitioner, compile_all.

Every stage reaches the compiler through this module's names (``compile_all`` is the export's process pool,
`conv.compile_pool`), called as module attributes, so a test or an emulation can swap them in one place (e.g.
for stand-in kernel records without cubins).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Hashable

from ..conv.compile_pool import CompileJob, compile_all, default_pool
from ..conv.problem import ConvProblem
from ..kernel.aot import compile_cache_key
from ..kernel.launch import KernelLaunch, Schedule
from ..kernel.pdl import uses_pdl
from ..partition.options import CudaTritonOptions
from .schedule import TuningLookup, choose_schedule

logger = logging.getLogger("cuda_triton.backend")

# Cubins without line info are ~2.7x smaller; the runtime has no use for it. Set before any compile (forked
# compile workers inherit it; the partitioner's early start imports this module too); a user who wants line
# info sets TRITON_DISABLE_LINE_INFO=0 explicitly.
os.environ.setdefault("TRITON_DISABLE_LINE_INFO", "1")


def prefetch_enabled() -> bool:
    return os.environ.get("CUDA_TRITON_PREFETCH", "1").strip().lower() not in ("0", "false", "off", "no")


_KEYS: dict[tuple, str] = {}  # (template, problem, schedule, launch index, arch) -> compile key


def launch_key(
    template: str,
    problem: Hashable,
    schedule: Schedule,
    index: int,
    launch: KernelLaunch,
    arch: int,
    pdl: bool = False,
) -> str:
    """``compile_cache_key(launch, arch, pdl)``, memoized (it hashes the kernel's source, tens of ms each).

    ``template``/``problem`` name the convolution template and its `ConvProblem`, or an op family and its spec.
    """
    mk = (template, problem, schedule, index, int(arch), uses_pdl(pdl, arch))
    key = _KEYS.get(mk)
    if key is None:
        key = _KEYS[mk] = compile_cache_key(launch, arch, pdl)
    return key


def conv_jobs(
    problem: ConvProblem, options: CudaTritonOptions, tuning: TuningLookup | None = None
) -> dict[str, CompileJob]:
    """The compile jobs (key -> job) of one convolution, with the schedule the preprocess will choose."""
    template, schedule, _ = choose_schedule(problem, tuning or TuningLookup(options))
    jobs: dict[str, CompileJob] = {}
    for li, launch in enumerate(template.launches(problem, schedule)):
        for arch in options.archs:
            pdl = uses_pdl(options.programmatic_launch, arch)
            key = launch_key(template.name, problem, schedule, li, launch, arch, pdl)
            jobs[key] = CompileJob(
                template.name, problem, schedule=schedule, launch_index=li, arch=arch, pdl=pdl
            )
    return jobs


def prefetch(problems: list[ConvProblem], options: CudaTritonOptions) -> int:
    """Start compiling the kernels of these convolutions in the background (the partitioner calls this).

    Returns how many compile jobs were submitted. A wrong guess only costs CPU time: the preprocess compiles
    exactly what it needs and reuses what was prefetched.
    """
    pool = default_pool()
    if not prefetch_enabled() or pool.executor() is None:
        return 0
    tuning = TuningLookup(options)
    jobs: dict[str, CompileJob] = {}
    for problem in problems:
        try:
            jobs.update(conv_jobs(problem, options, tuning))
        except Exception as e:  # never let a speculative compile break partitioning
            logger.debug("cuda_triton: prefetch skipped a convolution: %s", e)
    before = pool.pending
    pool.submit(jobs)
    return pool.pending - before


__all__ = ["compile_all", "conv_jobs", "launch_key", "prefetch", "prefetch_enabled"]
