"""The program rewrite that folds inference batch norms into delegated convolutions before decomposition.

`CudaTritonPartitioner.transform_for_pre_decomposition` runs it on the ATen program, so the folded batch norms
never reach ExecuTorch's decomposition, partitioning and lowering. It makes the same fold as the partition-level
one (`batch_norm_fold`, `fold_batch_norm`), and marks each convolution with the batch norm it absorbed.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import torch
from torch.export import ExportedProgram
from torch.export.graph_signature import ExportGraphSignature
from torch.fx import Node

from ..conv.binding import ConvArgs, bind_conv, is_conv_node
from ..utils.graph import constant_names
from .batch_norm_fold import batch_norm_fold, fold_batch_norm

FOLDED_BN_META = "cuda_triton_folded_batch_norm"  # node.meta["custom"] key: the batch norm a conv absorbed


def folded_batch_norm_of(conv: Node) -> str | None:
    """The name of the batch norm `fold_batch_norms_in_program` folded into ``conv`` (kept through the
    decompositions: torch keeps ``meta["custom"]``)."""
    custom = conv.meta.get("custom")
    return custom.get(FOLDED_BN_META) if isinstance(custom, dict) else None


def fold_batch_norms_in_program(
    ep: ExportedProgram, will_delegate: Callable[[Node, ConvArgs], bool]
) -> tuple[ExportedProgram, list[str]]:
    """Fold inference batch norms into the delegated convolutions before the core decomposition.

    The same fold the preprocess makes (`batch_norm_fold`, `fold_batch_norm`), done on the ATen program so that
    the batch norms never reach ExecuTorch's decomposition, partitioning and lowering (on ResNet-50 that is
    ~3 s of a warm export). Returns a new program and the folded batch norms' names; ``ep`` is not modified
    (the new program has its own graph and state dict; unchanged tensors are shared).

    A batch norm is folded here only when, besides `batch_norm_fold`'s conditions, ``will_delegate(conv)``;
    the conv's weight has no other user; and the folded bias has a slot: the conv's own bias constant (no other
    user) or else the batch norm's running-mean constant (the same dtype as the weight), which then holds the
    folded bias. The folded weight and bias replace those constants' values; the batch norm's other constants
    are dropped when nothing else reads them. The rest is left to the partition-level fold.
    """
    graph = copy.deepcopy(ep.graph)
    # The copy may rename nodes (a placeholder named like a builtin gets a suffix): map the signature's names.
    new_name = {a.name: b.name for a, b in zip(ep.graph.nodes, graph.nodes, strict=True)}
    constants = {new_name[n] for n in constant_names(ep)}
    state_dict = dict(ep.state_dict)
    consts = dict(ep.constants)
    sig = ep.graph_signature
    fqn_of = {
        new_name[k]: v
        for k, v in {
            **sig.inputs_to_parameters,
            **sig.inputs_to_buffers,
            **sig.inputs_to_lifted_tensor_constants,
        }.items()
    }
    folded: list[str] = []

    def tensor_of(node: Node) -> torch.Tensor:
        fqn = fqn_of[node.name]
        return state_dict[fqn] if fqn in state_dict else consts[fqn]

    def store(node: Node, value: torch.Tensor) -> None:
        fqn = fqn_of[node.name]
        old = tensor_of(node)
        if isinstance(old, torch.nn.Parameter):
            value = torch.nn.Parameter(value, requires_grad=old.requires_grad)
        if fqn in state_dict:
            state_dict[fqn] = value
        else:
            consts[fqn] = value

    for conv in list(graph.nodes):
        if not is_conv_node(conv):
            continue
        try:
            args = bind_conv(conv)
        except ValueError:
            continue
        fold, _ = batch_norm_fold(conv, args, constants)
        if fold is None or fold.output is not fold.bn:
            continue
        if (
            args.weight.op != "placeholder"
            or args.weight.name not in constants
            or len(args.weight.users) != 1
        ):
            continue
        if args.bias is not None:
            slot = args.bias
            if len(slot.users) != 1 or slot.op != "placeholder" or slot.name not in constants:
                continue
        else:
            slot = fold.mean
        weight = tensor_of(args.weight)
        if tensor_of(slot).dtype != weight.dtype or not will_delegate(conv, args):
            continue
        gamma = tensor_of(fold.weight) if fold.weight is not None else None
        beta = tensor_of(fold.bias) if fold.bias is not None else None
        bias = tensor_of(args.bias) if args.bias is not None else None
        w, b = fold_batch_norm(weight, bias, gamma, beta, tensor_of(fold.mean), tensor_of(fold.var), fold.eps)
        store(args.weight, w)
        store(slot, b)
        if args.bias is None:  # bias is argument 2 of every forward convolution overload
            if "bias" in conv.kwargs:
                conv.kwargs = {**conv.kwargs, "bias": slot}
            else:
                conv.args = (*conv.args[:2], slot, *conv.args[3:])
        fold.bn.replace_all_uses_with(conv)
        graph.erase_node(fold.bn)
        new_name = {k: (conv.name if v == fold.bn.name else v) for k, v in new_name.items()}
        conv.meta["custom"] = {**(conv.meta.get("custom") or {}), FOLDED_BN_META: fold.bn.name}
        folded.append(fold.bn.name)
    if not folded:
        return ep, []

    # The batch norms' constants nothing reads any more leave the program.
    unused_before = {new_name[n.name] for n in ep.graph.nodes if n.op == "placeholder" and not n.users}
    dropped = {
        n.name for n in graph.nodes if n.op == "placeholder" and n.name in constants and not n.users
    } - unused_before  # what was unused before (num_batches_tracked) stays as it was
    for n in [n for n in graph.nodes if n.name in dropped]:
        graph.erase_node(n)

    def renamed(spec: Any) -> Any:
        name = getattr(spec.arg, "name", None)
        return spec if name is None else replace(spec, arg=replace(spec.arg, name=new_name[name]))

    input_specs = []
    for spec in sig.input_specs:
        name = getattr(spec.arg, "name", None)
        if name is not None and new_name[name] in dropped:
            if spec.target is not None:
                state_dict.pop(spec.target, None)
                consts.pop(spec.target, None)
            continue
        input_specs.append(renamed(spec))
    output_specs = [renamed(spec) for spec in sig.output_specs]
    gm = torch.fx.GraphModule(ep.graph_module, graph)
    new = ExportedProgram(
        root=gm,
        graph=gm.graph,
        graph_signature=ExportGraphSignature(input_specs=input_specs, output_specs=output_specs),
        state_dict=state_dict,
        range_constraints=ep.range_constraints,
        module_call_graph=ep.module_call_graph,
        example_inputs=ep.example_inputs,
        constants=consts,
        verifiers=ep.verifiers,
    )
    return new, folded


__all__ = ["FOLDED_BN_META", "fold_batch_norms_in_program", "folded_batch_norm_of"]
