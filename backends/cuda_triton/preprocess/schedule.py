"""Which (template, schedule) the preprocess runs for a convolution: the tuning table's, else the heuristic's."""

from __future__ import annotations

from ..conv import tuning
from ..conv.problem import ConvProblem
from ..conv.templates import ConvTemplate, Schedule, select_candidate
from ..conv.templates._f16_mma import f16_mma_policy
from ..partition.options import CudaTritonOptions


class TuningLookup:
    """The tuning lookup for one options set (table path, primary arch)."""

    def __init__(self, options: CudaTritonOptions) -> None:
        self.arch = max(options.archs)
        self.tf32_on_fp16 = options.tf32_on_fp16
        self.table: tuning.TuningTable | None = None
        if options.tuning_table:
            self.table = tuning.load_table(options.tuning_table, arch=self.arch)

    def __call__(self, problem: ConvProblem) -> tuple[str, Schedule] | None:
        return tuning.lookup(problem, self.arch, self.table)


def choose_schedule(problem: ConvProblem, table: TuningLookup) -> tuple[ConvTemplate, Schedule, bool]:
    """(template, schedule, whether the tuning table chose them) for one convolution."""
    hits: list[tuple[str, Schedule]] = []

    def lookup(p: ConvProblem) -> tuple[str, Schedule] | None:
        hit = table(p)
        if hit is not None:
            hits.append(hit)
        return hit

    with f16_mma_policy(table.tf32_on_fp16):  # the export's choice of fp32 precisions (CudaTritonOptions)
        cand = select_candidate(problem, lookup)
    tuned = bool(hits) and hits[0][0] == cand.template.name and hits[0][1] == cand.schedule
    return cand.template, cand.schedule, tuned


__all__ = ["TuningLookup", "choose_schedule"]
