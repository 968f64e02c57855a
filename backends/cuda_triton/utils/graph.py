"""Facts about edge-graph nodes and the program's constants that every stage reads the same way."""

from __future__ import annotations

import torch
from torch.export import ExportedProgram
from torch.fx import Node


def tensor_val(node: Node) -> torch.Tensor:
    v = node.meta.get("val")
    if not isinstance(v, torch.Tensor):
        raise ValueError(f"node '{node.name}' has no tensor meta['val']")
    return v


def static_ints(xs: object) -> tuple[int, ...] | None:
    try:
        return tuple(int(x) for x in xs)  # type: ignore[union-attr]
    except Exception:  # symbolic
        return None


def same_layout(a_sizes, a_strides, b_sizes, b_strides) -> bool:
    """Equal sizes, and equal strides on every dim of size > 1 (the stride of a size-1 dim is never used)."""
    if list(a_sizes) != list(b_sizes):
        return False
    return all(int(s) == 1 or int(x) == int(y) for s, x, y in zip(a_sizes, a_strides, b_strides, strict=True))


def constant_names(ep: ExportedProgram) -> set[str]:
    """Placeholder names of the program's parameters, non-mutated buffers and lifted tensor constants."""
    sig = ep.graph_signature
    mutated = set(sig.buffers_to_mutate.values())
    names = set(sig.inputs_to_parameters)
    names |= {n for n, b in sig.inputs_to_buffers.items() if b not in mutated}
    names |= set(sig.inputs_to_lifted_tensor_constants)
    return names


def constant_tensor(ep: ExportedProgram, node: Node) -> torch.Tensor:
    """The real tensor behind a constant placeholder of ``ep`` (parameter, buffer or lifted constant)."""
    sig = ep.graph_signature
    if node.name in sig.inputs_to_parameters:
        fqn = sig.inputs_to_parameters[node.name]
        return ep.state_dict[fqn]
    if node.name in sig.inputs_to_buffers:
        fqn = sig.inputs_to_buffers[node.name]
        return ep.state_dict[fqn] if fqn in ep.state_dict else ep.constants[fqn]
    if node.name in sig.inputs_to_lifted_tensor_constants:
        return ep.constants[sig.inputs_to_lifted_tensor_constants[node.name]]
    raise KeyError(f"placeholder '{node.name}' is not a constant of the program")


__all__ = ["constant_names", "constant_tensor", "same_layout", "static_ints", "tensor_val"]
