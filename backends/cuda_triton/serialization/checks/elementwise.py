"""Record check of elementwise records (and of every record's fused steps): broadcasting.

Written in the small Python subset that ``scripts/gen_layout_header.py`` translates into
``runtime/generated/elementwise_checks.h`` (ints, bools, lists of ints, ``if``/``for ... in range``, ``raise
ValueError``; no library calls), so the C++ blob reader checks exactly this rule. Torch-free.

Broadcasting follows NumPy (and ATen): sizes are aligned at the last dim; along each dim the sizes must be equal, or
one of them 1 (which stretches to the other, 0 included).
"""

from __future__ import annotations


def broadcast_sizes(a: list[int], b: list[int]) -> list[int]:
    """The broadcast of two size lists; raises ValueError when they do not broadcast."""
    rank = len(a)
    if len(b) > rank:
        rank = len(b)
    lead_a = rank - len(a)
    lead_b = rank - len(b)
    out = [0] * rank
    for i in range(rank):
        da = 1
        if i >= lead_a:
            da = a[i - lead_a]
        db = 1
        if i >= lead_b:
            db = b[i - lead_b]
        if da == db or db == 1:
            out[i] = da
        elif da == 1:
            out[i] = db
        else:
            raise ValueError("sizes do not broadcast")
    return out


def broadcasts_to(sizes: list[int], target: list[int]) -> bool:
    """Whether a tensor of ``sizes`` broadcasts to ``target`` without changing it (an epilogue operand's rule)."""
    if len(sizes) > len(target):
        return False
    lead = len(target) - len(sizes)
    for i in range(len(sizes)):
        if sizes[i] != 1 and sizes[i] != target[lead + i]:
            return False
    return True


def per_image_and_channel(sizes: list[int], target: list[int]) -> bool:
    """Whether ``sizes`` broadcasts to the batched ``target`` [N, C, *spatial] with every spatial dim 1: one value
    per image and channel (a convolution prologue's operand, a squeeze-excitation scale)."""
    if not broadcasts_to(sizes, target):
        return False
    lead = len(target) - len(sizes)
    for i in range(len(sizes)):
        if lead + i >= 2 and sizes[i] != 1:
            return False
    return True
