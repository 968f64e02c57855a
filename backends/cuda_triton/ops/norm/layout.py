"""Output shapes and strides of the normalisation ops: what ATen's CPU kernels (and so fake tensors and the
graph torch.export records) allocate. Pure Python and torch-free (the C++ reader checks the output sizes with
``serialization/checks/norm.py``).

- batch norm (``_native_batch_norm_legit_no_training``): traced through PyTorch's decomposition, the output is
  ``(x - mean) * invstd [* weight] [+ bias]`` with the statistics broadcast along dim 1, so it takes the layout
  those elementwise ops give (a dense input keeps its dim order).
- group norm (``native_group_norm``): a dense input's strides (contiguous and channels-last inputs keep their
  layout), else the input's suggested memory format. For inputs that are not dense, PyTorch's decomposition gives
  layouts that also depend on the affine parameters; the spec constructors take the graph's strides
  (``out_strides``) for those.
- layer norm (``native_layer_norm``) and softmax/log_softmax (``_softmax``/``_log_softmax``): contiguous.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..elementwise.layout import out_shape_and_stride as elementwise_out
from ..tensor_meta import (
    Shape,
    contiguous_strides,
    is_non_overlapping_and_dense,
    strides_for_format,
    suggest_memory_format,
)


def batch_norm_out(
    sizes: Sequence[int], strides: Sequence[int], has_weight: bool = True, has_bias: bool = True
) -> tuple[Shape, Shape]:
    channel = (sizes[1], *(1,) * (len(sizes) - 2))  # a statistic or parameter, broadcast along dim 1
    param = (channel, contiguous_strides(channel))
    out = (tuple(sizes), tuple(strides))
    for _ in range(2 + has_weight + has_bias):  # - mean, * invstd, * weight, + bias
        out = elementwise_out([out, param])
    return out


def group_norm_out(sizes: Sequence[int], strides: Sequence[int]) -> tuple[Shape, Shape]:
    if is_non_overlapping_and_dense(sizes, strides):
        return tuple(sizes), tuple(strides)
    return tuple(sizes), strides_for_format(sizes, suggest_memory_format(sizes, strides))


def layer_norm_out(sizes: Sequence[int]) -> tuple[Shape, Shape]:
    return tuple(sizes), contiguous_strides(sizes)


def softmax_out(sizes: Sequence[int]) -> tuple[Shape, Shape]:
    return tuple(sizes), contiguous_strides(sizes)
