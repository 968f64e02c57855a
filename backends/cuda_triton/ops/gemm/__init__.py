"""GEMM: addmm, mm, bmm and linear as one tiled ``tl.dot`` kernel over strided batched operands (split-K for few
tiles over a long K).

The pipeline builds a `GemmSpec` from a node (`GemmSpec.addmm`/`.mm`/`.bmm`/`.linear`), asks
``spec.supports()``, takes the output layout from ``spec.output()`` (shape.py), a schedule from
`heuristic_schedule`, the scratch tensors from `scratch` and the kernel calls from `launches`.
"""

from .kernels import gemm_kernel, gemm_splitk_reduce_kernel
from .launches import heuristic_schedule, launches, schedules, scratch
from .reference import reference_gemm
from .shape import linear_out_shape_and_stride, matmul_out_shape_and_stride
from .spec import GemmSpec, Operand

__all__ = [
    "GemmSpec",
    "Operand",
    "gemm_kernel",
    "gemm_splitk_reduce_kernel",
    "heuristic_schedule",
    "launches",
    "linear_out_shape_and_stride",
    "matmul_out_shape_and_stride",
    "reference_gemm",
    "schedules",
    "scratch",
]
