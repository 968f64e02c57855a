"""`draft_program`: a delegated program's graph, walked in order, as a `Draft` (one op per convolution)."""

from __future__ import annotations

from torch.export import ExportedProgram
from torch.fx import Node

from .._passes.batch_norm_fold import is_batch_norm_node
from .._passes.pad_fold import is_pad_node
from ..conv.binding import is_conv_node
from ..conv.compile_pool import CompileJob
from ..partition.options import CudaTritonOptions
from ..utils.graph import constant_names
from .conv import draft_conv
from .draft import CudaTritonPreprocessError, Draft, describe, value_record
from .schedule import TuningLookup


def draft_program(ep: ExportedProgram, options: CudaTritonOptions, jobs: dict[str, CompileJob]) -> Draft:
    draft = Draft(options)
    tuning = TuningLookup(options)
    gm = ep.graph_module
    consts = constant_names(ep)
    value_of: dict[Node, int] = {}
    bn_folded: set[Node] = set()  # batch norms (and their getitems) a convolution folded

    output_node = gm.graph.output_node()
    outs = output_node.args[0]
    outs = list(outs) if isinstance(outs, (list, tuple)) else [outs]
    out_index: dict[Node, int] = {}
    for j, n in enumerate(outs):
        if not isinstance(n, Node):
            raise CudaTritonPreprocessError(f"delegate output {j} is {n!r}, not a tensor node")
        if n in out_index:
            raise CudaTritonPreprocessError(f"node '{n.name}' is delegate output {out_index[n]} and {j}")
        out_index[n] = j
    draft.num_outputs = len(outs)

    for node in gm.graph.nodes:
        if node.op == "placeholder":
            if node.name in consts:
                continue
            if node in out_index:
                raise CudaTritonPreprocessError(f"delegate input '{node.name}' is also a delegate output")
            value_of[node] = len(draft.values)
            draft.values.append(value_record("input", draft.num_inputs, node))
            draft.num_inputs += 1
        elif node.op == "output":
            continue
        elif is_pad_node(node):
            if not node.users or not all(is_conv_node(u) for u in node.users):
                raise CudaTritonPreprocessError(
                    f"{describe(node)}: a pad in the delegate must feed only convolutions that fold it"
                )
            if node in out_index:
                raise CudaTritonPreprocessError(f"{describe(node)}: a folded pad cannot be a delegate output")
        elif is_conv_node(node):
            fold = draft_conv(node, ep, draft, value_of, out_index, tuning, jobs)
            if fold is not None:
                bn_folded.update((fold.bn, fold.output))
        elif node in bn_folded:
            continue  # computed by the convolution that folded it
        elif is_batch_norm_node(node):
            raise CudaTritonPreprocessError(
                f"{describe(node)}: a batch norm in the delegate must follow a convolution that folds it"
            )
        else:
            raise CudaTritonPreprocessError(
                f"{describe(node)} is in the delegated subgraph, but the delegate runs only convolutions "
                "(and the zero pads and inference batch norms it folds into them)"
            )
    for n in out_index:
        if n not in value_of:
            raise CudaTritonPreprocessError(f"delegate output '{n.name}' is not computed by a convolution")
    return draft


__all__ = ["draft_program"]
