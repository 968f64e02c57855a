"""Reductions: sum.dim_IntList, mean.dim (global average pooling included), amax, amin over any dims.

- spec.py: `ReductionSpec`, `reduction_spec`, `supports`.
- layout.py: `out_shape_and_stride` (contiguous outputs), `normalize_dims`.
- kernels.py / launches.py: the strided [M, L] reduction kernel, its heuristic and `launches(spec, schedule)`.
- reference.py: the CPU reference.
"""

from .launches import launches
from .layout import normalize_dims, out_shape_and_stride
from .reference import reference
from .spec import REDUCTIONS, ReductionSpec, reduction_spec, supports

__all__ = [
    "REDUCTIONS",
    "ReductionSpec",
    "launches",
    "normalize_dims",
    "out_shape_and_stride",
    "reduction_spec",
    "reference",
    "supports",
]
