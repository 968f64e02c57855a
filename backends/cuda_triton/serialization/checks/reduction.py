"""Record check of reduction records (sum, mean, amax, ... over a set of dims): the parameters and the sizes.

Written in the small Python subset that ``scripts/gen_layout_header.py`` translates into
``runtime/generated/reduction_checks.h`` (see that script), so the C++ blob reader checks exactly this rule.
Torch-free.
"""

from __future__ import annotations


def reduction_out_sizes(input_sizes: list[int], dims: list[int], keepdim: bool) -> list[int]:
    """Output sizes of a reduction over ``dims`` (strictly increasing, each in [0, rank)): the reduced dims are
    removed, or kept with size 1 when ``keepdim``."""
    rank = len(input_sizes)
    if len(dims) == 0:
        raise ValueError("a reduction needs at least one reduced dim")
    for i in range(len(dims)):
        if dims[i] < 0 or dims[i] >= rank:
            raise ValueError("reduced dim out of range")
        if i > 0 and dims[i] <= dims[i - 1]:
            raise ValueError("reduced dims must be strictly increasing")
    out = []
    j = 0
    for d in range(rank):
        if j < len(dims) and dims[j] == d:
            if keepdim:
                out.append(1)
            j = j + 1
        else:
            out.append(input_sizes[d])
    return out
