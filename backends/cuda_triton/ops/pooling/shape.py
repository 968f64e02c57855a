"""Output sizes and strides of the pooling ops, as the node's recorded value (ATen's meta functions) has them.

Written in the small subset of Python that ``scripts/gen_layout_header.py`` translates to C++ (integer
arithmetic, ``if``/``for i in range(...)``, lists of ints, calls of the layout helpers), so the C++ runtime can
check the same rule at execute.

* Output length per spatial dim: ATen's ``pooling_output_shape`` for max/avg pools (floor or ceil mode, the last
  window must start inside the input or its left padding), the requested size for adaptive pools.
* Layout: channels-last when the batched input suggests channels-last and the op keeps it (max_pool2d, avg_pool2d,
  adaptive avg_pool2d, max_pool3d); contiguous otherwise (avg_pool3d, adaptive avg_pool3d, 1-D, unbatched input).
"""

from __future__ import annotations

from ...conv.layout import channels_last_strides, contiguous_strides, is_channels_last_strides

# Pool kinds, as small ints so the C++ translation is trivial.
MAX_POOL = 0
AVG_POOL = 1
ADAPTIVE_AVG_POOL = 2


def pool_out_size(
    in_size: int, kernel: int, stride: int, padding: int, dilation: int, ceil_mode: bool
) -> int:
    """Output length of one spatial dim of a max or avg pool."""
    span = in_size + 2 * padding - dilation * (kernel - 1) - 1
    if ceil_mode:
        span = span + stride - 1
    out = span // stride + 1
    # With ceil_mode the last window must still start inside the input or its left padding.
    if ceil_mode and (out - 1) * stride >= in_size + padding:
        out = out - 1
    return out


def pool_keeps_channels_last(kind: int, spatial: int) -> bool:
    """Whether the op's output follows a channels-last (batched) input."""
    if spatial == 2:
        return True
    return spatial == 3 and kind == MAX_POOL


def out_shape_and_stride(
    kind: int,
    in_sizes: list[int],
    in_strides: list[int],
    kernel: list[int],
    stride: list[int],
    padding: list[int],
    dilation: list[int],
    ceil_mode: bool,
) -> tuple[list[int], list[int]]:
    """Output sizes and strides; ``kernel`` holds the output sizes for ADAPTIVE_AVG_POOL (then stride, padding and
    dilation are unused). ``in_sizes`` is (N, C, *spatial) or, unbatched, (C, *spatial)."""
    spatial = len(kernel)
    lead = len(in_sizes) - spatial
    sizes = in_sizes[0:lead]
    for i in range(spatial):
        if kind == ADAPTIVE_AVG_POOL:
            sizes.append(kernel[i])
        else:
            sizes.append(
                pool_out_size(in_sizes[lead + i], kernel[i], stride[i], padding[i], dilation[i], ceil_mode)
            )
    if (
        lead == 2
        and pool_keeps_channels_last(kind, spatial)
        and is_channels_last_strides(in_sizes, in_strides)
    ):
        return sizes, channels_last_strides(sizes)
    return sizes, contiguous_strides(sizes)
