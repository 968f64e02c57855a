"""Record check of normalisation records (inference batch norm, layer norm, group norm, softmax, log-softmax).

Written in the small Python subset that ``scripts/gen_layout_header.py`` translates into
``runtime/generated/norm_checks.h`` (see that script), so the C++ blob reader checks exactly this rule.
Torch-free. The op codes are the blob's (docs/blob_format.md, kind 5).
"""

from __future__ import annotations

BATCH_NORM = 0
LAYER_NORM = 1
GROUP_NORM = 2
SOFTMAX = 3
LOG_SOFTMAX = 4


def norm_out_sizes(op: int, input_sizes: list[int], dim: int, groups: int) -> list[int]:
    """Output sizes (the input's) after checking the op's parameters: batch and group norm normalise per channel
    (``dim`` 1, rank >= 2; group norm's ``groups`` divides the channels), layer norm the dims ``dim..rank-1``,
    softmax along ``dim``. ``groups`` is 0 for every op but group norm."""
    rank = len(input_sizes)
    if op == BATCH_NORM or op == GROUP_NORM:
        if rank < 2:
            raise ValueError("batch and group norm need an input of rank >= 2")
        if dim != 1:
            raise ValueError("batch and group norm normalise along dim 1")
    elif op == LAYER_NORM or op == SOFTMAX or op == LOG_SOFTMAX:
        if dim < 0 or dim >= rank:
            raise ValueError("dim out of range")
    else:
        raise ValueError("unknown normalisation op")
    if op == GROUP_NORM:
        if groups < 1:
            raise ValueError("group norm needs groups >= 1")
        if input_sizes[1] % groups != 0:
            raise ValueError("groups does not divide the channel count")
    elif groups != 0:
        raise ValueError("groups is only for group norm")
    return list(input_sizes)
