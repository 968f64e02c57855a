"""Reductions: sum.dim_IntList, mean.dim (global average pooling included), amax, amin over any dims.

- spec.py: `ReductionSpec`, `reduction_spec`, `supports`.
- layout.py: `out_shape_and_stride` (contiguous outputs), `normalize_dims`.
- kernels.py / launches.py: the strided [M, L] reduction kernel (split across programs or not) and
  `launches(spec, schedule)`.
- schedules.py: `heuristic_schedule(spec)` and a split schedule's `scratch`.
- reference.py: the CPU reference.
"""

from .launches import launches
from .layout import normalize_dims, out_shape_and_stride
from .reference import reference
from .schedules import heuristic_schedule, scratch
from .spec import REDUCTIONS, ReductionSpec, reduction_spec, supports

__all__ = [
    "REDUCTIONS",
    "ReductionSpec",
    "heuristic_schedule",
    "launches",
    "normalize_dims",
    "out_shape_and_stride",
    "reduction_spec",
    "reference",
    "scratch",
    "supports",
]
