"""The output-layout rule: sizes and strides of the tensor ATen's CUDA convolution returns.

This module is the single source of truth for convolution output layouts. The canonical op, its fake
implementation, the planner's layout gate and the C++ runtime all use it; the runtime through
``runtime/generated/conv_layout.h``, which ``scripts/gen_layout_header.py`` translates from the functions
below. For that reason every function here is written in a deliberately small subset of Python: integer
arithmetic, ``if``/``for i in range(...)`` and lists of ints, no recursion, no library calls. Keep it so.

The rule (verified on an H200 against real CUDA convolutions, see docs/convolution.md):

* Batch 0, C_in == 0 or float64: contiguous. With C_in == 0 ATen also reports 0 output channels.
* ``output_padding[i] >= stride[i]`` in some dim (ATen's slow path; ATen tests this for forward convs too,
  where output_padding otherwise has no effect): contiguous.
* 2-D convs (4-D weight): channels_last if the input OR the weight suggests channels_last.
* 3-D convs (5-D weight): channels_last_3d under the same condition.
* 1-D convs: ATen makes the input contiguous and views both as 4-D (N, C, 1, L), so mostly only the weight's
  layout counts (``contiguous()`` keeps odd strides of size-1 dims, so an (N, C, 1) input stored (N, 1, C) still
  counts); a channels-last 4-D result squeezes back to strides (C*L, 1, C).
* Unbatched inputs are given a batch of 1 and squeezed back.
* Asymmetric padding (forward) is ATen's 'same' path: the input is padded by constant_pad_nd into a tensor of the
  input's suggested memory format (so 2-D/3-D decisions are unchanged; a 1-D input becomes contiguous).
"""

from __future__ import annotations

# Memory formats, as small ints so the C++ translation is trivial.
CONTIGUOUS = 0
CHANNELS_LAST = 1


def conv_out_size(
    in_size: int,
    kernel: int,
    stride: int,
    padding_before: int,
    padding_after: int,
    dilation: int,
    transposed: bool,
    output_padding: int,
) -> int:
    """Length of one spatial dim of the output (docs/convolution.md gives the derivation)."""
    span = dilation * (kernel - 1) + 1
    if transposed:
        return (in_size - 1) * stride - padding_before - padding_after + span + output_padding
    return (in_size + padding_before + padding_after - span) // stride + 1


def is_channels_last_strides(sizes: list[int], strides: list[int]) -> bool:
    """c10's ``is_channels_last_strides_{2d,3d}``: do 4-D/5-D strides look like (N, *spatial, C) storage?

    The walk goes from the fastest dim (C) through the spatial dims from last to first, then N; ambiguous
    cases (size-1 dims with equal strides) fall back to contiguous exactly as c10 does.
    """
    rank = len(sizes)
    if rank != 4 and rank != 5:
        return False
    if strides[1] == 0:
        return False
    order = [1, 3, 2, 0]
    if rank == 5:
        order = [1, 4, 3, 2, 0]
    lower_bound = 0
    for i in range(rank):
        d = order[i]
        if sizes[d] == 0:
            return False
        if strides[d] < lower_bound:
            return False
        if d == 0 and lower_bound == strides[1]:
            return False
        lower_bound = strides[d]
        if sizes[d] > 1:
            lower_bound = lower_bound * sizes[d]
    return True


def is_contiguous_strides(sizes: list[int], strides: list[int]) -> bool:
    """c10's ``compute_contiguous``: row-major up to the strides of size-1 dims; empty tensors are contiguous."""
    rank = len(sizes)
    for i in range(rank):
        if sizes[i] == 0:
            return True
    expected = 1
    for i in range(rank - 1, -1, -1):
        if sizes[i] != 1:
            if strides[i] != expected:
                return False
            expected = expected * sizes[i]
    return True


def contiguous_strides(sizes: list[int]) -> list[int]:
    """Row-major strides; size-0 dims count as 1, as in c10's ``empty_tensor_restride``."""
    rank = len(sizes)
    strides = [1] * rank
    for i in range(rank - 2, -1, -1):
        inner = sizes[i + 1]
        if inner < 1:
            inner = 1
        strides[i] = strides[i + 1] * inner
    return strides


def channels_last_strides(sizes: list[int]) -> list[int]:
    """c10's ``get_channels_last_strides_{2d,3d}`` for a 4-D or 5-D size list (no clamping of zeros)."""
    rank = len(sizes)
    strides = [0] * rank
    strides[1] = 1
    running = sizes[1]
    for i in range(rank - 1, 1, -1):
        strides[i] = running
        running = running * sizes[i]
    strides[0] = running
    return strides


def output_memory_format(
    input_sizes: list[int],
    input_strides: list[int],
    weight_sizes: list[int],
    weight_strides: list[int],
    stride: list[int],
    output_padding: list[int],
    transposed: bool,
    is_float64: bool,
) -> int:
    """CONTIGUOUS or CHANNELS_LAST for a batched input (rank = spatial + 2)."""
    spatial = len(weight_sizes) - 2
    if is_float64:
        return CONTIGUOUS
    if input_sizes[0] == 0 or input_sizes[1] == 0:
        return CONTIGUOUS
    # ATen's ``is_output_padding_big`` disables cuDNN whether or not the conv is transposed.
    for i in range(spatial):
        if output_padding[i] >= stride[i]:
            return CONTIGUOUS
    if spatial == 1:
        # ATen calls input.contiguous(), which keeps the strides of a tensor c10 already deems contiguous
        # (size-1 dims may carry any stride), then views both tensors as 4-D with unsqueeze(2): the new dim
        # gets stride size[2] * stride[2]. An (N, C, 1) input with strides (C, 1, C) is thus channels-last.
        x3_strides = [input_strides[0], input_strides[1], input_strides[2]]
        if not is_contiguous_strides(input_sizes, input_strides):
            x3_strides = contiguous_strides(input_sizes)
        x4_sizes = [input_sizes[0], input_sizes[1], 1, input_sizes[2]]
        x4_strides = [x3_strides[0], x3_strides[1], input_sizes[2] * x3_strides[2], x3_strides[2]]
        if is_channels_last_strides(x4_sizes, x4_strides):
            return CHANNELS_LAST
        w4_sizes = [weight_sizes[0], weight_sizes[1], 1, weight_sizes[2]]
        w4_strides = [
            weight_strides[0],
            weight_strides[1],
            weight_sizes[2] * weight_strides[2],
            weight_strides[2],
        ]
        if is_channels_last_strides(w4_sizes, w4_strides):
            return CHANNELS_LAST
        return CONTIGUOUS
    if is_channels_last_strides(input_sizes, input_strides):
        return CHANNELS_LAST
    if is_channels_last_strides(weight_sizes, weight_strides):
        return CHANNELS_LAST
    return CONTIGUOUS


def out_shape_and_stride(
    input_sizes: list[int],
    input_strides: list[int],
    weight_sizes: list[int],
    weight_strides: list[int],
    stride: list[int],
    padding_before: list[int],
    padding_after: list[int],
    dilation: list[int],
    transposed: bool,
    output_padding: list[int],
    groups: int,
    is_float64: bool,
) -> tuple[list[int], list[int]]:
    """Output sizes and strides of ATen's CUDA convolution for these (validated, canonical) arguments.

    ``input_sizes`` may be batched (rank = spatial + 2) or unbatched (rank = spatial + 1); the list
    arguments have one entry per spatial dim.
    """
    spatial = len(weight_sizes) - 2
    unbatched = len(input_sizes) == spatial + 1
    in_sizes = list(input_sizes)
    in_strides = list(input_strides)
    if unbatched:
        # unsqueeze(0): the new leading stride is size[0] * stride[0].
        in_sizes = [1] + in_sizes
        in_strides = [input_sizes[0] * input_strides[0]] + in_strides

    out_channels = weight_sizes[0]
    if transposed:
        out_channels = weight_sizes[1] * groups
    if in_sizes[1] == 0:
        # ATen's empty-channel path reports 0 output channels (calc_output_size).
        out_channels = 0
    sizes = [in_sizes[0], out_channels]
    for i in range(spatial):
        sizes.append(
            conv_out_size(
                in_sizes[i + 2],
                weight_sizes[i + 2],
                stride[i],
                padding_before[i],
                padding_after[i],
                dilation[i],
                transposed,
                output_padding[i],
            )
        )

    if spatial == 1 and not transposed and padding_before[0] != padding_after[0]:
        # ATen's asymmetric 'same' pads the input with constant_pad_nd into a fresh tensor in the input's
        # suggested memory format, which for a 3-D tensor is always contiguous.
        in_strides = contiguous_strides(in_sizes)
    if spatial == 1 and not transposed and padding_before[0] != padding_after[0]:
        # ATen's asymmetric 'same' pads the input with constant_pad_nd into a fresh tensor in the input's
        # suggested memory format, which for a 3-D tensor is always contiguous.
        in_strides = contiguous_strides(in_sizes)
    fmt = output_memory_format(
        in_sizes, in_strides, weight_sizes, weight_strides, stride, output_padding, transposed, is_float64
    )
    if fmt == CHANNELS_LAST and spatial == 1:
        # Computed as (N, C, 1, L) channels-last, then dim 2 is squeezed away.
        strides = [sizes[1] * sizes[2], 1, sizes[1]]
    elif fmt == CHANNELS_LAST:
        strides = channels_last_strides(sizes)
    else:
        strides = contiguous_strides(sizes)

    if unbatched:
        return sizes[1:], strides[1:]
    return sizes, strides
