"""`draft_program`: a delegated program's graph, walked in order, as a `Draft` (op records with their launches).

Each call node goes to the drafter of its op family (`families.DRAFTERS`, keyed like the partition configs).
Nodes that draft nothing: the zero pads and batch norms a convolution folds, ops computed from constants (they
become constants where they are read), the elementwise ops fused into a chain, and ``getitem``s (the drafter of
the multi-output op they read binds them). A chain that only a convolution reads may wait for it
(`plan_conv_prologue`): the convolution computes it in its input loads, or drafts it just before itself. A
convolution, GEMM or normalisation whose result only a chain reads waits for the chain's end, to compute it in
its epilogue (`plan_conv_epilogues`, `plan_gemm_epilogues`, `plan_norm_epilogues`). A layer norm that only a
GEMM reads is folded into it (`gemm_norm`), so that neither the norm nor its reshapes draft anything.
"""

from __future__ import annotations

import operator

from torch.export import ExportedProgram
from torch.fx import Node

from .._passes.batch_norm_fold import batch_norm_fold, is_batch_norm_node
from .._passes.constant_fold import foldable_nodes
from .._passes.pad_fold import folds_into_users
from ..conv.binding import aten_overload, bind_conv, is_conv_node
from ..conv.compile_pool import CompileJob
from ..ops.registry import OpCompileJob
from ..partition.config import ConfigTable, configs_for
from ..partition.config.elementwise import GLU
from ..partition.config.gemm import GEMM_OPS
from ..partition.config.norm import MULTI_OUTPUT, norm_output
from ..partition.options import CudaTritonOptions
from ..utils.graph import constant_names
from .conv import draft_conv
from .draft import CudaTritonPreprocessError, Draft, describe, value_record
from .elementwise import conv_prologue_chain, draft_elementwise, is_elementwise_node, plan_chains
from .families import DRAFTED_FAMILIES, DRAFTERS
from .gemm import draft_gemm, is_epilogue_view
from .gemm_norm import claim_norm, plan_norm_prologues
from .norm import draft_norm
from .op_draft import ProgramDraft
from .schedule import TuningLookup

_TABLE = ConfigTable(configs_for(DRAFTED_FAMILIES))


def _outputs(ep: ExportedProgram) -> dict[Node, int]:
    outs = ep.graph_module.graph.output_node().args[0]
    outs = list(outs) if isinstance(outs, (list, tuple)) else [outs]
    out_index: dict[Node, int] = {}
    for j, n in enumerate(outs):
        if not isinstance(n, Node):
            raise CudaTritonPreprocessError(f"delegate output {j} is {n!r}, not a tensor node")
        if n in out_index:
            raise CudaTritonPreprocessError(f"node '{n.name}' is delegate output {out_index[n]} and {j}")
        out_index[n] = j
    return out_index


def plan_conv_epilogues(
    calls: list[Node], fused_into: dict[Node, Node], pd: ProgramDraft, bn_folded: set[Node]
) -> dict[Node, Node]:
    """{chain end: convolution} for each convolution whose result (after the batch norm it folds) is no delegate
    output and is read by one elementwise node alone: the chain that node belongs to may run in the
    convolution's epilogue (`draft_conv` decides, by its kernel and the chain's operands). The batch norms those
    convolutions fold go into ``bn_folded`` now, as their convolutions are drafted after them."""
    out: dict[Node, Node] = {}
    consts = pd.constants
    for node in calls:
        if not is_conv_node(node) or node in pd.foldable:  # a folded convolution is a constant
            continue
        try:
            args = bind_conv(node)
        except ValueError:
            continue
        fold = batch_norm_fold(node, args, consts)[0] if pd.draft.options.fold_batch_norm else None
        end = _epilogue_chain_end(node if fold is None else fold.output, pd, fused_into)
        if end is None or end in out:
            continue  # one convolution per chain
        out[end] = node
        if fold is not None:
            bn_folded.update((fold.bn, fold.output))
    return out


def _epilogue_chain_end(result: Node, pd: ProgramDraft, fused_into: dict[Node, Node]) -> Node | None:
    """The end of the elementwise chain that alone reads ``result`` (no delegate output); None when none does."""
    if result in pd.out_index or len(result.users) != 1:
        return None
    (user,) = result.users
    if not is_elementwise_node(user) or aten_overload(user.target) is GLU:
        return None
    end = user
    while end in fused_into:
        end = fused_into[end]
    return end


def plan_gemm_epilogues(
    calls: list[Node], fused_into: dict[Node, Node], pd: ProgramDraft, taken: set[Node]
) -> dict[Node, tuple[Node, list[Node]]]:
    """{chain end: (GEMM, the views between them)} for each GEMM whose result, through reshapes and permutes that
    nothing else reads, only an elementwise chain reads: the chain may run in the GEMM's epilogue (`draft_gemm`
    decides, by the views and the chain's operands). ``taken``: chain ends a convolution already claims."""
    out: dict[Node, tuple[Node, list[Node]]] = {}
    for node in calls:
        if aten_overload(node.target) not in GEMM_OPS or node in pd.foldable:
            continue
        result, views = node, []
        while result not in pd.out_index and len(result.users) == 1:
            (user,) = result.users
            if not is_epilogue_view(user):
                break
            result = user
            views.append(user)
        end = _epilogue_chain_end(result, pd, fused_into)
        if end is None or end in out or end in taken:
            continue  # one producer per chain
        out[end] = (node, views)
    return out


def plan_norm_epilogues(
    calls: list[Node], fused_into: dict[Node, Node], pd: ProgramDraft, taken: set[Node]
) -> dict[Node, Node]:
    """{chain end: norm} for each batch, layer or group norm whose result only an elementwise chain reads: the
    chain may run in the norm's epilogue (`draft_norm` decides: it must read no other tensor). A batch norm of a
    convolution's result is left to the convolution, which folds it. ``taken``: chain ends a convolution or a
    GEMM already claims."""
    out: dict[Node, Node] = {}
    for node in calls:
        if aten_overload(node.target) not in MULTI_OUTPUT or node in pd.foldable:
            continue
        if is_batch_norm_node(node) and isinstance(node.args[0], Node) and is_conv_node(node.args[0]):
            continue
        try:
            result = norm_output(node)
        except ValueError:
            continue
        end = _epilogue_chain_end(result, pd, fused_into)
        if end is None or end in out or end in taken:
            continue
        out[end] = node
    return out


def _draft_by_family(node: Node, pd: ProgramDraft) -> None:
    config = _TABLE.config_for(node)
    drafter = DRAFTERS.get(config.family) if config is not None else None
    if drafter is None:
        what = "batch norm that no convolution folds" if is_batch_norm_node(node) else "op"
        raise CudaTritonPreprocessError(
            f"{describe(node)} is in the delegated subgraph, but the delegate has no drafter for this {what}"
        )
    drafter(node, pd)


def plan_conv_prologue(end: Node, pd: ProgramDraft, fused_into: dict[Node, Node]) -> bool:
    """Whether the chain ending at ``end`` waits for the convolution that alone reads it, which computes it as
    it loads its input when its kernel takes a prologue (`draft_conv` decides, and drafts the chain on its own
    when not): ``end`` is no delegate output, and the chain reads one feature map and per-(N, C) operands."""
    if end in pd.out_index or len(end.users) != 1:
        return False
    (conv,) = end.users
    if not is_conv_node(conv) or conv in pd.foldable:
        return False
    try:
        if bind_conv(conv).input is not end:
            return False
    except ValueError:
        return False
    prologue = conv_prologue_chain(end, pd, fused_into)
    if prologue is None:
        return False
    pd.prologues[conv] = prologue
    return True


def draft_program(
    ep: ExportedProgram, options: CudaTritonOptions, jobs: dict[str, CompileJob | OpCompileJob]
) -> Draft:
    draft = Draft(options)
    gm = ep.graph_module
    consts = constant_names(ep)
    pd = ProgramDraft(
        ep,
        draft,
        TuningLookup(options),
        jobs,
        consts,
        set(foldable_nodes(gm.graph, consts)),
        out_index=_outputs(ep),
    )
    draft.num_outputs = len(pd.out_index)
    calls = [n for n in gm.graph.nodes if n.op == "call_function"]
    fused_into = plan_chains(calls, set(pd.out_index))
    bn_folded: set[Node] = set()  # batch norms (and their getitems) a convolution folded
    # Convolutions whose result only an elementwise chain reads are drafted where the chain ends, so that the
    # chain's other operands exist when the convolution's epilogue reads them (`plan_conv_epilogues`).
    epilogue_of = plan_conv_epilogues(calls, fused_into, pd, bn_folded) if options.fuse_epilogues else {}
    gemm_epilogue_of = (
        plan_gemm_epilogues(calls, fused_into, pd, set(epilogue_of)) if options.fuse_epilogues else {}
    )
    norm_epilogue_of = (
        plan_norm_epilogues(calls, fused_into, pd, {*epilogue_of, *gemm_epilogue_of})
        if options.fuse_epilogues
        else {}
    )
    # Layer norms that only a GEMM reads: the GEMM folds them when it can read their input (`gemm_norm`).
    norm_prologue_of = plan_norm_prologues(calls, pd) if options.fold_layer_norms else {}
    claimed: set[Node] = set()  # the nodes of the norms claimed (each drafted by its GEMM)
    deferred = {*epilogue_of.values(), *norm_epilogue_of.values()}
    for gemm, views in gemm_epilogue_of.values():
        deferred.update((gemm, *views))

    for node in gm.graph.nodes:
        if node.op == "placeholder":
            if node.name in consts:
                continue
            if node in pd.out_index:
                raise CudaTritonPreprocessError(f"delegate input '{node.name}' is also a delegate output")
            pd.value_of[node] = len(draft.values)
            draft.values.append(value_record("input", draft.num_inputs, node))
            draft.num_inputs += 1
        elif node.op != "call_function" or node.target is operator.getitem:
            continue
        elif node in pd.foldable:
            if node in pd.out_index:
                raise CudaTritonPreprocessError(
                    f"{describe(node)}: a constant computation cannot be an output"
                )
        elif folds_into_users(node, options.allow_tf32):
            continue  # each convolution reading it folds it into its padding (any other pad is a pad kernel)
        elif node in deferred:
            continue  # drafted where its chain ends
        elif node in claimed:
            continue  # a reshape of a norm that a GEMM folds
        elif node in norm_prologue_of and claim_norm(norm_prologue_of[node], pd):
            claimed.update(norm_prologue_of[node].nodes)
        elif is_conv_node(node):
            fold, _ = draft_conv(node, pd)
            if fold is not None:
                bn_folded.update((fold.bn, fold.output))
        elif node in bn_folded:
            continue  # computed by the convolution that folded it
        elif is_elementwise_node(node):
            if node in fused_into:
                continue
            conv = epilogue_of.get(node)
            if conv is not None and draft_conv(conv, pd, node, fused_into)[1]:
                continue
            if node in gemm_epilogue_of:
                gemm, views = gemm_epilogue_of[node]
                if draft_gemm(gemm, pd, node, fused_into, views):
                    continue
                for view in views:  # the chain is a kernel of its own after all
                    _draft_by_family(view, pd)
            norm = norm_epilogue_of.get(node)
            if norm is not None and draft_norm(norm, pd, node, fused_into):
                continue  # else the norm was drafted alone, and the chain is a kernel of its own
            if not (options.fuse_prologues and plan_conv_prologue(node, pd, fused_into)):
                draft_elementwise(node, pd, fused_into)
        else:
            _draft_by_family(node, pd)
    for n in pd.out_index:
        if n not in pd.value_of:
            raise CudaTritonPreprocessError(f"delegate output '{n.name}' is not computed by the delegate")
    return draft


__all__ = ["draft_program"]
