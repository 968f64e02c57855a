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
    return {}


DRAFTERS: dict[str, Drafter] = _drafters()
DRAFTED_FAMILIES: tuple[str, ...] = ("conv", "elementwise", *DRAFTERS)

__all__ = ["DRAFTED_FAMILIES", "DRAFTERS", "Drafter"]
