"""Shape rule of pooling records (max, avg, adaptive avg / max; 1-D to 3-D).

Written in the small Python subset that ``scripts/gen_layout_header.py`` translates into
``runtime/generated/pooling_layout.h`` (see that script), so the C++ blob reader checks exactly this rule.
Torch-free. The op codes are the blob's (docs/blob_format.md, kind 3).

The output size of a max / avg pool along one dim is ATen's ``pooling_output_shape``: windows of the dilated kernel
placed every ``stride`` over the input padded by ``padding`` on both sides; with ``ceil_mode`` a last partial window
counts too, unless it would start inside the right padding. ATen also requires the padding to be at most half the
(dilated) kernel, and avg pools have no dilation.
"""

from __future__ import annotations

MAX_POOL = 0
AVG_POOL = 1
ADAPTIVE_AVG_POOL = 2
ADAPTIVE_MAX_POOL = 3

# Kernel, stride, padding and dilation are below this, which keeps every intermediate below 2^63.
PARAM_LIMIT = 2147483648


def pooled_size(in_size: int, kernel: int, stride: int, padding: int, dilation: int, ceil_mode: bool) -> int:
    """One spatial output size of a max / avg pool (may be < 1: the caller rejects that)."""
    span = dilation * (kernel - 1) + 1
    numer = in_size + 2 * padding - span
    if ceil_mode:
        numer = numer + stride - 1
    out = numer // stride + 1
    if ceil_mode and (out - 1) * stride >= in_size + padding:
        out = out - 1
    return out


def pool_out_sizes(
    op: int,
    input_sizes: list[int],
    kernel: list[int],
    stride: list[int],
    padding: list[int],
    dilation: list[int],
    output_size: list[int],
    ceil_mode: bool,
    count_include_pad: bool,
    divisor_override: int,
) -> list[int]:
    """Output sizes of a pooling op on an input of rank n + 2 (batched) or n + 1, n = 1..3 spatial dims; raises
    ValueError on parameters the op does not take."""
    adaptive = op == ADAPTIVE_AVG_POOL or op == ADAPTIVE_MAX_POOL
    if adaptive:
        n = len(output_size)
        if len(kernel) != 0 or len(stride) != 0 or len(padding) != 0 or len(dilation) != 0:
            raise ValueError("adaptive pools take only an output size")
        if ceil_mode or count_include_pad or divisor_override != 0:
            raise ValueError("adaptive pools take no ceil_mode, count_include_pad or divisor_override")
        for i in range(n):
            if output_size[i] < 1:
                raise ValueError("adaptive pool output sizes must be >= 1")
    elif op == MAX_POOL or op == AVG_POOL:
        n = len(kernel)
        if len(stride) != n or len(padding) != n or len(dilation) != n or len(output_size) != 0:
            raise ValueError("kernel, stride, padding and dilation need one entry per spatial dim")
        for i in range(n):
            if kernel[i] < 1 or stride[i] < 1 or dilation[i] < 1 or padding[i] < 0:
                raise ValueError("kernel, stride and dilation must be >= 1 and padding >= 0")
            if kernel[i] >= PARAM_LIMIT or stride[i] >= PARAM_LIMIT or dilation[i] >= PARAM_LIMIT:
                raise ValueError("pooling parameter too large")
            if padding[i] >= PARAM_LIMIT:
                raise ValueError("pooling parameter too large")
            if 2 * padding[i] > dilation[i] * (kernel[i] - 1) + 1:
                raise ValueError("padding must be at most half the kernel")
            if op == AVG_POOL and dilation[i] != 1:
                raise ValueError("avg pools have no dilation")
        if op == MAX_POOL and (count_include_pad or divisor_override != 0):
            raise ValueError("max pools take no count_include_pad or divisor_override")
        if divisor_override < 0:
            raise ValueError("divisor_override must be >= 0 (0: none)")
    else:
        raise ValueError("unknown pooling op")
    if n < 1 or n > 3:
        raise ValueError("pools have 1 to 3 spatial dims")
    rank = len(input_sizes)
    if rank != n + 1 and rank != n + 2:
        raise ValueError("the input's rank does not match the pool's spatial dims")
    lead = rank - n
    out = input_sizes[0:lead]
    for i in range(n):
        if adaptive:
            out.append(output_size[i])
        else:
            size = pooled_size(
                input_sizes[lead + i], kernel[i], stride[i], padding[i], dilation[i], ceil_mode
            )
            if size < 1:
                raise ValueError("the pool's output would be empty")
            out.append(size)
    return out
