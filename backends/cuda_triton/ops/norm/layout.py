"""Output shapes and strides of the normalisation ops: what ATen's CPU kernels (and so fake tensors and the
graph torch.export records) allocate. Pure Python and torch-free (mirrored into the C++ runtime).

- batch norm (``_native_batch_norm_legit_no_training``) and group norm (``native_group_norm``): the input's
  suggested memory format: channels-last when the input's strides are ordered channels-last (4-D/5-D), else
  contiguous.
- layer norm (``native_layer_norm``) and softmax/log_softmax (``_softmax``/``_log_softmax``): contiguous.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..tensor_meta import Shape, contiguous_strides, strides_for_format, suggest_memory_format


def batch_norm_out(sizes: Sequence[int], strides: Sequence[int]) -> tuple[Shape, Shape]:
    return tuple(sizes), strides_for_format(sizes, suggest_memory_format(sizes, strides))


def group_norm_out(sizes: Sequence[int], strides: Sequence[int]) -> tuple[Shape, Shape]:
    return batch_norm_out(sizes, strides)


def layer_norm_out(sizes: Sequence[int]) -> tuple[Shape, Shape]:
    return tuple(sizes), contiguous_strides(sizes)


def softmax_out(sizes: Sequence[int]) -> tuple[Shape, Shape]:
    return tuple(sizes), contiguous_strides(sizes)
