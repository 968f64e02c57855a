"""Shape rule of GEMM records (mm, addmm, bmm, linear): (M, K) x (K, N) -> (M, N), optionally batched.

Written in the small Python subset that ``scripts/gen_layout_header.py`` translates into
``runtime/generated/gemm_shape.h`` (see that script), so the C++ blob reader checks exactly this rule.
Torch-free.
"""

from __future__ import annotations


def gemm_out_sizes(a_sizes: list[int], b_sizes: list[int]) -> list[int]:
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
    return a_sizes[0 : ra - 1] + [b_sizes[rb - 1]]
