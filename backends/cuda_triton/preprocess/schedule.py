"""Which (template, schedule) the preprocess runs for a convolution: the tuning table's, else the heuristic's."""

from __future__ import annotations

from typing import Any

from ..conv.problem import ConvProblem
from ..conv.templates import ConvTemplate, Schedule, select_candidate
from ..conv.templates._f16_mma import f16_mma_policy
from ..partition.options import CudaTritonOptions


class TuningLookup:
    """The tuning lookup for one options set (table path, primary arch)."""

    def __init__(self, options: CudaTritonOptions) -> None:
        self.arch = max(options.archs)
        self.tf32_on_fp16 = options.tf32_on_fp16
        self.table: Any = None
        self.lookup: Any = None
        try:
            from .conv import tuning
        except ImportError:  # the tuning module has not landed: heuristics only
            return
        self.lookup = tuning.lookup
        if options.tuning_table:
            self.table = tuning.load_table(options.tuning_table, arch=self.arch)

    def __call__(self, problem: ConvProblem) -> tuple[str, Schedule] | None:
        if self.lookup is None:
            return None
        return self.lookup(problem, self.arch, self.table)


def choose_schedule(problem: ConvProblem, tuning: TuningLookup) -> tuple[ConvTemplate, Schedule, bool]:
    hits: list[tuple[str, Schedule]] = []

    def lookup(p: ConvProblem) -> tuple[str, Schedule] | None:
        hit = tuning(p)
        if hit is not None:
            hits.append(hit)
        return hit

    with f16_mma_policy(tuning.tf32_on_fp16):  # the export's choice of fp32 precisions (CudaTritonOptions)
        cand = select_candidate(problem, lookup)
    tuned = bool(hits) and hits[0][0] == cand.template.name and hits[0][1] == cand.schedule
    return cand.template, cand.schedule, tuned


__all__ = ["TuningLookup", "choose_schedule"]
