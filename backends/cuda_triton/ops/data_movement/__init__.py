"""Data movement: cat, split, slice, select, permute, expand, as_strided, dim-order/clone copies, views, pad,
upsample.

The pipeline builds a spec from a node (`StridedCopySpec.permute`/`.slice`/`.select`/`.expand`/`.as_strided`/
`.dim_order_copy`/`.view`/`.squeeze`/`.unsqueeze`, `CatSpec.of`, `SplitSpec.of`, `PadSpec.of`,
`UpsampleSpec.of`), asks ``spec.supports()``, takes the output layouts from ``spec.outputs()`` (the rules in
shape.py), a schedule from `heuristic_schedule` and the kernel calls from `launches`. Views that cost nothing:
`view_strides`/`view_is_free` (views.py).
"""

from .copy_plan import CopyPiece, copy_launch, simplify
from .kernels import (
    pad_copy_kernel,
    strided_copy_kernel,
    transpose_copy_kernel,
    upsample_bilinear_kernel,
    upsample_nearest_kernel,
)
from .launches import DataMovementSpec, heuristic_schedule, launches, schedules
from .reference import (
    reference_cat,
    reference_pad,
    reference_split,
    reference_strided_copy,
    reference_upsample,
)
from .spec import CatSpec, PadSpec, SplitSpec, StridedCopySpec, input_role, output_role
from .upsample import UpsampleSpec
from .views import view_is_free, view_strides

__all__ = [
    "CatSpec",
    "CopyPiece",
    "DataMovementSpec",
    "PadSpec",
    "SplitSpec",
    "StridedCopySpec",
    "UpsampleSpec",
    "copy_launch",
    "heuristic_schedule",
    "input_role",
    "launches",
    "output_role",
    "pad_copy_kernel",
    "reference_cat",
    "reference_pad",
    "reference_split",
    "reference_strided_copy",
    "reference_upsample",
    "schedules",
    "simplify",
    "strided_copy_kernel",
    "transpose_copy_kernel",
    "upsample_bilinear_kernel",
    "upsample_nearest_kernel",
    "view_is_free",
    "view_strides",
]
