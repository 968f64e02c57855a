"""Record check of GEMM records: the operand shapes a matrix product takes, and its output sizes from the GEMM
family's rule (`cuda_triton.ops.gemm.shape.matmul_out_shape_and_stride`).

Written in the small Python subset that ``scripts/gen_layout_header.py`` translates into
``runtime/generated/gemm_checks.h``, so the C++ blob reader checks exactly this. Torch-free.
"""

from __future__ import annotations

from ...ops.gemm.shape import matmul_out_shape_and_stride


def gemm_record_sizes(a_sizes: list[int], b_sizes: list[int]) -> list[int]:
    """Output sizes of ``a @ b``: a is (M, K) or (B, M, K); b is (K, N), or (B, K, N) when a is batched with the
    same B. A batched a with a 2-D b multiplies every batch by the same b (linear on a 3-D input)."""
    ra = len(a_sizes)
    rb = len(b_sizes)
    if ra != 2 and ra != 3:
        raise ValueError("a must be 2-D or 3-D")
    if rb != 2 and rb != 3:
        raise ValueError("b must be 2-D or 3-D")
    if rb == 3 and ra != 3:
        raise ValueError("a batched b needs a batched a")
    if rb == 3 and a_sizes[0] != b_sizes[0]:
        raise ValueError("a and b have different batch sizes")
    if a_sizes[ra - 1] != b_sizes[rb - 2]:
        raise ValueError("the inner dims of a and b differ")
    return matmul_out_shape_and_stride(a_sizes, b_sizes)[0]
