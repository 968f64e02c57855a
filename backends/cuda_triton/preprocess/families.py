"""The op families the preprocess drafts into the blob (the partitioner delegates only these), and their drafters.

A drafter takes one edge node of its family and the `ProgramDraft` it adds to; convolutions and elementwise
chains are drafted by `program.draft_program` itself (folds and fusion look across nodes).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from torch.fx import Node

    from .op_draft import ProgramDraft

Drafter = Callable[["Node", "ProgramDraft"], None]


def _drafters() -> dict[str, Drafter]:
    from .data_movement import draft_data_movement
    from .gemm import draft_gemm
    from .norm import draft_norm
    from .pooling import draft_pooling
    from .reduction import draft_reduction

    return {
        "data_movement": draft_data_movement,
        "gemm": draft_gemm,
        "norm": draft_norm,
        "pooling": draft_pooling,
        "reduction": draft_reduction,
    }


DRAFTERS: dict[str, Drafter] = _drafters()
DRAFTED_FAMILIES: tuple[str, ...] = ("conv", "elementwise", *DRAFTERS)

__all__ = ["DRAFTED_FAMILIES", "DRAFTERS", "Drafter"]
