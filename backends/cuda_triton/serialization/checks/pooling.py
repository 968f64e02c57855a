"""Record check of pooling records: the parameters a max / avg / adaptive avg pool takes, and its output sizes
from the pooling family's rule (`cuda_triton.ops.pooling.shape.out_shape_and_stride`).

Written in the small Python subset that ``scripts/gen_layout_header.py`` translates into
``runtime/generated/pooling_checks.h``, so the C++ blob reader checks exactly this. Torch-free.
"""

from __future__ import annotations

from ...ops.pooling.shape import ADAPTIVE_AVG_POOL, AVG_POOL, MAX_POOL, out_shape_and_stride

# Kernel, stride, padding, dilation and adaptive output sizes are below this: no intermediate overflows int64.
PARAM_LIMIT = 2147483648


def in_range(values: list[int], lo: int) -> bool:
    for i in range(len(values)):
        if values[i] < lo or values[i] >= PARAM_LIMIT:
            return False
    return True


def pool_record_sizes(
    op: int,
    input_sizes: list[int],
    input_strides: list[int],
    kernel: list[int],
    stride: list[int],
    padding: list[int],
    dilation: list[int],
    output_size: list[int],
    ceil_mode: bool,
    count_include_pad: bool,
    divisor_override: int,
) -> list[int]:
    """Output sizes of a pooling record over an input of rank n + 2 (batched) or n + 1, n = 1..3; raises
    ValueError on parameters the op does not take (ATen's: the padding at most half the dilated kernel, no
    dilation for avg pools)."""
    adaptive = op == ADAPTIVE_AVG_POOL
    if op != MAX_POOL and op != AVG_POOL and not adaptive:
        raise ValueError("unknown pooling op")
    window = kernel
    if adaptive:
        window = output_size
    n = len(window)
    if n < 1 or n > 3:
        raise ValueError("pools have 1 to 3 spatial dims")
    rank = len(input_sizes)
    if rank != n + 1 and rank != n + 2:
        raise ValueError("the input's rank does not match the pool's spatial dims")
    if adaptive:
        if len(kernel) != 0 or len(stride) != 0 or len(padding) != 0 or len(dilation) != 0:
            raise ValueError("adaptive pools take only an output size")
        if ceil_mode or count_include_pad or divisor_override != 0:
            raise ValueError("adaptive pools take no ceil_mode, count_include_pad or divisor_override")
        if not in_range(output_size, 1):
            raise ValueError("bad adaptive output sizes")
    else:
        if len(stride) != n or len(padding) != n or len(dilation) != n or len(output_size) != 0:
            raise ValueError("kernel, stride, padding and dilation need one entry per spatial dim")
        if not in_range(kernel, 1) or not in_range(stride, 1) or not in_range(dilation, 1):
            raise ValueError("kernel, stride and dilation must be in [1, 2^31)")
        if not in_range(padding, 0):
            raise ValueError("padding must be in [0, 2^31)")
        for i in range(n):
            if 2 * padding[i] > dilation[i] * (kernel[i] - 1) + 1:
                raise ValueError("padding must be at most half the kernel")
            if op == AVG_POOL and dilation[i] != 1:
                raise ValueError("avg pools have no dilation")
        if op == MAX_POOL and (count_include_pad or divisor_override != 0):
            raise ValueError("max pools take no count_include_pad or divisor_override")
        if divisor_override < 0:
            raise ValueError("divisor_override must be >= 0 (0: none)")
    sizes = out_shape_and_stride(
        op, input_sizes, input_strides, window, stride, padding, dilation, ceil_mode
    )[0]
    for i in range(rank - n, rank):
        if sizes[i] < 1:
            raise ValueError("the pool's output would be empty")
    return sizes
