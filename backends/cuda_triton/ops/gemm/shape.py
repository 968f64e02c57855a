"""Output sizes and strides of the GEMM ops: always contiguous, as ATen's meta functions give them.

Written in the small subset of Python that ``scripts/gen_layout_header.py`` translates to C++ (as the other
families' shape rules), so the C++ runtime can check the same rule at execute.

* ``mm(a, b)``, ``addmm(bias, a, b)``: [M, N] for a [M, K] and b [K, N];
* ``bmm(a, b)``: [B, M, N] for a [B, M, K] and b [B, K, N];
* ``linear(x, w, bias)``: x's leading sizes then N, for x [..., K] and w [N, K].
"""

from __future__ import annotations

from ...conv.layout import contiguous_strides


def matmul_out_shape_and_stride(a_sizes: list[int], b_sizes: list[int]) -> tuple[list[int], list[int]]:
    """mm/addmm/bmm: ``a``'s sizes with its last dim replaced by ``b``'s last."""
    sizes = a_sizes[0 : len(a_sizes) - 1] + [b_sizes[len(b_sizes) - 1]]
    return sizes, contiguous_strides(sizes)


def linear_out_shape_and_stride(x_sizes: list[int], weight_sizes: list[int]) -> tuple[list[int], list[int]]:
    """linear: ``x``'s sizes with its last dim replaced by the weight's output features."""
    sizes = x_sizes[0 : len(x_sizes) - 1] + [weight_sizes[0]]
    return sizes, contiguous_strides(sizes)
