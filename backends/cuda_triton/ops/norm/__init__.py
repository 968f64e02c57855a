"""Normalisation: inference batch norm, layer norm, group norm, softmax and log_softmax.

- spec.py: `BatchNormSpec`, `LayerNormSpec`, `GroupNormSpec`, `SoftmaxSpec`, their constructors
  (`batch_norm_spec`, `layer_norm_spec`, `group_norm_spec`, `softmax_spec`) and `supports`.
- layout.py: each op's output shape/stride rule.
- kernels.py / launches.py: the batch norm (elementwise) and row kernels, schedules, `launches(spec, schedule)`.
- reference.py: the CPU references.
"""

from .launches import default_schedule, launches, schedules, scratch
from .layout import batch_norm_out, group_norm_out, layer_norm_out, softmax_out
from .reference import reference
from .spec import (
    BatchNormSpec,
    GroupNormSpec,
    LayerNormSpec,
    SoftmaxSpec,
    batch_norm_spec,
    group_norm_spec,
    layer_norm_spec,
    softmax_spec,
    supports,
)

__all__ = [
    "BatchNormSpec",
    "GroupNormSpec",
    "LayerNormSpec",
    "SoftmaxSpec",
    "batch_norm_out",
    "default_schedule",
    "batch_norm_spec",
    "group_norm_out",
    "group_norm_spec",
    "launches",
    "layer_norm_out",
    "layer_norm_spec",
    "reference",
    "schedules",
    "scratch",
    "softmax_out",
    "softmax_spec",
    "supports",
]
