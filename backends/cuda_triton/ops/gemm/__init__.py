"""GEMM: addmm, mm, bmm and linear as one tiled ``tl.dot`` kernel over strided batched operands (split-K for few
tiles over a long K).

The pipeline builds a `GemmSpec` from a node (`GemmSpec.addmm`/`.mm`/`.bmm`/`.linear`), asks
``spec.supports()``, takes the output layout from ``spec.output()`` (shape.py), a schedule from
`heuristic_schedule`, the scratch tensors from `scratch` and the kernel calls from `launches`. On sm_90 the tuning
space (`schedules`) also holds the TMA variant (tma.py, `gemm_tma_kernel`), which the heuristic does not pick.
"""

from .kernels import gemm_kernel
from .launches import heuristic_schedule, launches, schedules, scratch
from .reference import reference_gemm
from .row_norm import COLSUM_ROLE, column_sums
from .shape import linear_out_shape_and_stride, matmul_out_shape_and_stride
from .spec import GemmSpec, Operand
from .tma import TMA_ARCH, is_persistent, is_tma, tma_problem, tma_schedules
from .tma_kernel import gemm_tma_kernel

__all__ = [
    "COLSUM_ROLE",
    "GemmSpec",
    "Operand",
    "TMA_ARCH",
    "gemm_kernel",
    "gemm_tma_kernel",
    "heuristic_schedule",
    "is_persistent",
    "is_tma",
    "column_sums",
    "launches",
    "linear_out_shape_and_stride",
    "matmul_out_shape_and_stride",
    "reference_gemm",
    "schedules",
    "scratch",
    "tma_problem",
    "tma_schedules",
]
