"""What every op family's partition config is: the edge ops it takes and a check that says yes, or no and why.

A config is one small class per op family, like the XNNPACK backend's ``partition/config``: ``targets`` names the
ATen overloads of the edge ops it takes; `OpConfig.check` looks at one node of the edge program (dtypes, shapes,
layouts, constants) and returns a `Verdict` with the reason when it declines. ``companions`` names the nodes that
must join the partition with an accepted node (the ``getitem`` that reads a multi-output op's result), and
``preserved`` the ATen overloads ``to_edge_transform_and_lower`` must keep from decomposition for the family.

The partitioner asks the config of each node's target (`partition/config/__init__.py` registers them); a node
whose target no config takes stays on the CPU with that reason.
"""

from __future__ import annotations

import operator
from abc import ABC, abstractmethod
from collections.abc import Collection
from dataclasses import dataclass
from typing import ClassVar

import torch
from torch.export import ExportedProgram
from torch.fx import Node

from ...conv.binding import aten_overload
from ...kernel.launch import Support
from ..options import CudaTritonOptions

# A config's answer for one node: taken, or declined with the reason. The same truthy answer with a reason that
# a template gives for a problem, so a family's `supports` answer passes through as it is.
Verdict = Support


@dataclass(frozen=True)
class PartitionContext:
    """What a check may read besides the node: the program, its constants' placeholder names, the options."""

    ep: ExportedProgram
    constants: frozenset[str]
    options: CudaTritonOptions

    def is_constant(self, node: object) -> bool:
        return isinstance(node, Node) and node.op == "placeholder" and node.name in self.constants


class OpConfig(ABC):
    """One op family's partition config."""

    family: ClassVar[str]
    targets: ClassVar[tuple[torch._ops.OpOverload, ...]]
    preserved: ClassVar[tuple[torch._ops.OpOverload, ...]] = ()

    def takes(self, node: Node) -> bool:
        return node.op == "call_function" and aten_overload(node.target) in self.targets

    # Ops among ``targets`` that return (result, extra outputs): taken only when nothing reads the extras (the
    # kernels compute the result alone), with the ``getitem(.., 0)`` that reads the result as their companion.
    multi_output: ClassVar[tuple[torch._ops.OpOverload, ...]] = ()
    # What the kernels compute of a multi-output op, for the reason given when an extra output is read.
    multi_output_computes: ClassVar[str] = "the first output only"

    def check(self, node: Node, ctx: PartitionContext) -> Verdict:
        """Whether the delegate runs ``node`` (one of ``targets``), with the reason when it does not: no when
        ``node`` is one of ``multi_output`` and something reads one of its extra outputs, else `check_op`'s
        answer."""
        if aten_overload(node.target) in self.multi_output:
            used = only_first_output_used(node)
            if not used:
                return Verdict.no(f"{used.reason}: the kernel computes {self.multi_output_computes}")
        return self.check_op(node, ctx)

    @abstractmethod
    def check_op(self, node: Node, ctx: PartitionContext) -> Verdict:
        """The family's own check of ``node`` (one of ``targets``; a multi-output op's extra outputs unread)."""

    def companions(self, node: Node) -> list[Node]:
        """Nodes that join the partition with ``node`` when it is taken: a multi-output op's ``getitem`` readers
        (none by default)."""
        return first_output_readers(node) if aten_overload(node.target) in self.multi_output else []


# ---- the multi-output ops' first output -----------------------------------------------------------------------
def only_first_output_used(node: Node) -> Verdict:
    """A multi-output op read only through ``getitem(node, 0)`` (e.g. a max pool's indices unused)."""
    for user in node.users:
        if user.op != "call_function" or user.target is not operator.getitem or user.args[1] != 0:
            return Verdict.no(
                f"its output {user.args[1] if len(user.args) > 1 else '?'} is used by '{user.name}'"
            )
    return Verdict.yes()


def first_output_readers(node: Node) -> list[Node]:
    return [u for u in node.users if u.op == "call_function" and u.target is operator.getitem]


def first_output(node: Node, multi_output: Collection[torch._ops.OpOverload]) -> Node:
    """The node that holds ``node``'s result: the one ``getitem(.., 0)`` of an op in ``multi_output``, else the
    node itself. ValueError when such an op's result is read by more or fewer than one getitem."""
    if aten_overload(node.target) not in multi_output:
        return node
    readers = [u for u in first_output_readers(node) if u.args[1] == 0]
    if len(readers) != 1:
        raise ValueError(f"its output is read by {len(readers)} getitem nodes (one is supported)")
    return readers[0]


__all__ = [
    "OpConfig",
    "PartitionContext",
    "Verdict",
    "first_output",
    "first_output_readers",
    "only_first_output_used",
]
