"""Pooling: max (values of ``max_pool*_with_indices``), avg and adaptive avg pools over 1-3 spatial dims.

The pipeline builds a `PoolSpec` from a node (`PoolSpec.max_pool`, `.avg_pool`, `.adaptive_avg_pool`), asks
``spec.supports()``, takes the output layout from ``spec.output()`` (the rule in shape.py), a schedule from
`heuristic_schedule` and the kernel calls from `launches`.
"""

from .kernels import heuristic_schedule, pool_kernel, schedules
from .launches import launches
from .reference import reference_pool
from .shape import ADAPTIVE_AVG_POOL, AVG_POOL, MAX_POOL, out_shape_and_stride, pool_out_size
from .spec import PoolSpec

__all__ = [
    "ADAPTIVE_AVG_POOL",
    "AVG_POOL",
    "MAX_POOL",
    "PoolSpec",
    "heuristic_schedule",
    "launches",
    "out_shape_and_stride",
    "pool_kernel",
    "pool_out_size",
    "reference_pool",
    "schedules",
]
