"""`CudaTritonBackend`: the AOT preprocess that turns a delegated subgraph into a delegate blob.

For each convolution of a partition (in graph order) the preprocess

1. binds it (`bind_conv`), folding a zero spatial ``constant_pad_nd`` the partitioner put in front of it
   (`cuda_triton._passes.pad_fold`, the same function the partitioner used), and an inference batch
   norm it put after it (`cuda_triton._passes.batch_norm_fold`): the weight and bias become the folded
   ones (`fold_batch_norm`: per-channel terms in float64, cast to the convolution's dtype) and the convolution
   writes the batch norm's output; everything below sees a convolution with a bias;
2. builds its `ConvProblem` (static shapes and the recorded strides) and picks one (template, schedule): the
   tuning table's answer for the primary target arch (the highest one) when it has one, else the first
   supporting template's heuristic (`templates.select_candidate`, the same choice the eager op makes);
3. lays the weight out the way the kernels read it (``template.prepare_weight``), and stores weight and bias in
   ExecuTorch's NamedDataStore under content-addressed keys (in the .pte, or ``<tag>.ptd`` with an external tag);
4. asks the template for its `KernelLaunch` list and compiles every distinct kernel (``compile_cache_key``) for
   every target arch with ``kernel.aot.compile_launch`` - across all partitions of the program at once
   (`preprocess_multimethod`), in `conv.compile_pool`'s process pool with a progress bar; Triton's own cache
   (``TRITON_CACHE_DIR``) makes a re-export cheap;
5. writes the blob (`cuda_triton.serialization.blob.serialize`), each identical kernel once per arch; the cubins
   themselves go to the NamedDataStore under content-addressed keys (always in the .pte, never in a .ptd:
   they are code, not weights), so a cubin that several partitions use is stored once per .pte.

Environment: ``TRITON_DISABLE_LINE_INFO`` defaults to 1 here (smaller cubins); ``CUDA_TRITON_JOBS`` and
``CUDA_TRITON_PROGRESS`` set the compile pool's workers and progress bar (`cuda_triton.conv.compile_pool`);
``CUDA_TRITON_PREFETCH=0`` stops the partitioner from starting compiles early.

The other op families' nodes go through the same steps with their own drafters: a spec, the family's op record,
its launches (`cuda_triton.ops.registry`) and their compile jobs, in the same pool and the same blob.

Where each step lives (``cuda_triton.preprocess``): ``program`` walks the graph and hands each node to its
family's drafter (``families``; ``conv`` for convolutions, steps 1-3, ``elementwise`` for fused chains, one
module per other family), ``draft`` and ``op_draft`` hold the draft being built, ``schedule`` picks schedules,
``kernels`` is the compile seam (keys, jobs, the partitioner's early start), ``assemble`` writes the blob and the
named data (step 5), ``stats`` keeps what each call did, ``named_data`` reads a lowered module back. This module
holds the ExecuTorch entry points and runs the steps in order.
"""

from __future__ import annotations

import logging
import time

import torch
from executorch.exir.backend.backend_details import BackendDetails, PreprocessResult
from executorch.exir.backend.compile_spec_schema import CompileSpec
from torch.export import ExportedProgram

from .conv.compile_pool import CompileJob
from .ops.registry import OpCompileJob
from .partition.options import CudaTritonOptions
from .preprocess import kernels as kernel_pool
from .preprocess.assemble import assemble
from .preprocess.draft import CudaTritonPreprocessError
from .preprocess.named_data import named_data_of, read_lowered
from .preprocess.program import draft_program
from .preprocess.stats import STATS_HISTORY, PreprocessStats, last_stats, reset_stats

logger = logging.getLogger("cuda_triton.backend")


def preprocess_programs(items: list[tuple[ExportedProgram, list[CompileSpec]]]) -> list[PreprocessResult]:
    """Preprocess several delegated programs together: their kernels compile in one pool, deduplicated."""
    t0 = time.perf_counter()
    jobs: dict[str, CompileJob | OpCompileJob] = {}
    # The drafts' tensor work (weight layouts, folds, TF32 rounding) is many small ops: torch's intra-op threads
    # only contend with the compile workers and other jobs for the cores (seconds lost on a loaded 2-core
    # machine), so this runs on one thread.
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        drafts = [draft_program(ep, CudaTritonOptions.from_compile_specs(specs), jobs) for ep, specs in items]
    finally:
        torch.set_num_threads(threads)
    t1 = time.perf_counter()
    kernels = kernel_pool.compile_all(jobs)
    t2 = time.perf_counter()
    stats = PreprocessStats(kernels_unique=len(jobs), compile_seconds=t2 - t1)
    cubins_seen: set[str] = set()
    results = [assemble(d, kernels, stats, cubins_seen) for d in drafts]
    stats.total_seconds = time.perf_counter() - t0
    STATS_HISTORY.append(stats)
    logger.info(
        "CudaTritonBackend: %d partitions, %d ops, %d distinct kernels compiled in %.1f s",
        stats.partitions, stats.ops, stats.kernels_unique, stats.compile_seconds,
    )  # fmt: skip
    return results


class CudaTritonBackend(BackendDetails):
    """Compiles the delegated ops' kernels to cubins for every target arch and writes the delegate blob."""

    @staticmethod
    def preprocess(edge_program: ExportedProgram, compile_specs: list[CompileSpec]) -> PreprocessResult:
        return preprocess_programs([(edge_program, compile_specs)])[0]

    @classmethod
    def preprocess_multimethod(
        cls,
        edge_programs: dict[str, list[ExportedProgram]],
        compile_specs: dict[str, list[list[CompileSpec]]],
    ) -> dict[str, list[PreprocessResult]]:
        items: list[tuple[ExportedProgram, list[CompileSpec]]] = []
        where: list[tuple[str, int]] = []
        for method, programs in edge_programs.items():
            specs = compile_specs[method]
            if len(specs) != len(programs):
                raise CudaTritonPreprocessError(
                    f"method {method}: {len(programs)} partitions but {len(specs)} compile spec lists"
                )
            for i, (ep, s) in enumerate(zip(programs, specs, strict=True)):
                items.append((ep, s))
                where.append((method, i))
        results = preprocess_programs(items) if items else []
        out: dict[str, list[PreprocessResult]] = {m: [None] * len(p) for m, p in edge_programs.items()}  # type: ignore[misc]
        for (method, i), r in zip(where, results, strict=True):
            out[method][i] = r
        return out


__all__ = [
    "STATS_HISTORY",
    "CudaTritonBackend",
    "CudaTritonPreprocessError",
    "PreprocessStats",
    "last_stats",
    "named_data_of",
    "preprocess_programs",
    "read_lowered",
    "reset_stats",
]
