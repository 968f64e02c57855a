"""Graph facts the partitioner and the preprocess must agree on: pad and batch-norm folds, owned constants.

Both sides call these functions, so a pad or an inference batch norm the partitioner put into a partition is
exactly one the preprocess folds, and a weight the partitioner relied on being a constant is one the preprocess
finds in the state dict. Nothing here imports executorch (the ExportedProgram type comes from torch).
"""

from __future__ import annotations

import copy
import operator
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import torch
from torch.export import ExportedProgram
from torch.export.graph_signature import ExportGraphSignature
from torch.fx import Node

from ..conv.binding import ConvArgs, aten_overload
from ..conv.layout import out_shape_and_stride
from ..conv.params import ConvParams
from ..conv.problem import ConvProblem

aten = torch.ops.aten
PAD_OVERLOADS = (aten.constant_pad_nd.default,)
# An eval-mode BatchNorm{1,2,3}d in an edge graph: (x, weight?, bias?, running_mean, running_var, momentum, eps)
# -> (out, save_mean, save_invstd), read through operator.getitem(bn, 0).
BATCH_NORM_OVERLOADS = (aten._native_batch_norm_legit_no_training.default,)
# The same op before the core decomposition (what ops_to_not_decompose sees): batch_norm(x, weight, bias,
# running_mean, running_var, training, momentum, eps, cudnn_enabled).
PRE_DECOMPOSITION_BATCH_NORM = (aten.batch_norm.default,)


def is_pad_node(node: object) -> bool:
    return (
        isinstance(node, Node) and node.op == "call_function" and aten_overload(node.target) in PAD_OVERLOADS
    )


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


@dataclass(frozen=True)
class PadFold:
    """A zero ``constant_pad_nd`` folded into a convolution: the tensor before the pad and the new padding."""

    pad: Node
    source: Node
    params: ConvParams


def spatial_pad_amounts(pad: Node, spatial_dims: int) -> tuple[tuple[int, ...], tuple[int, ...]] | None:
    """(before, after) per spatial dim when ``pad`` is a zero, non-negative pad of the last ``spatial_dims``
    dims only; None otherwise. ``constant_pad_nd``'s list names the last dim first: [last_lo, last_hi, ...]."""
    if not is_pad_node(pad):
        return None
    args = list(pad.args) + [None] * 3
    amounts = args[1] if args[1] is not None else pad.kwargs.get("pad")
    value = args[2] if args[2] is not None else pad.kwargs.get("value", 0)
    if value is None:
        value = 0
    try:
        if float(value) != 0.0:
            return None
    except Exception:
        return None
    amounts = static_ints(amounts or [])
    if amounts is None or len(amounts) % 2 or any(a < 0 for a in amounts):
        return None
    if any(a != 0 for a in amounts[2 * spatial_dims :]):
        return None  # pads a channel or batch dim
    before = [0] * spatial_dims
    after = [0] * spatial_dims
    for j in range(min(len(amounts) // 2, spatial_dims)):
        dim = spatial_dims - 1 - j  # j-th pair pads the j-th dim from the end
        before[dim] = amounts[2 * j]
        after[dim] = amounts[2 * j + 1]
    return tuple(before), tuple(after)


def conv_problem(
    input_val: torch.Tensor,
    weight_val: torch.Tensor,
    has_bias: bool,
    params: ConvParams,
    allow_tf32: bool,
) -> ConvProblem:
    return ConvProblem.from_shapes(
        tuple(int(s) for s in input_val.shape),
        tuple(int(s) for s in input_val.stride()),
        tuple(int(s) for s in weight_val.shape),
        tuple(int(s) for s in weight_val.stride()),
        has_bias,
        params,
        input_val.dtype,
        allow_tf32,
    )


def rule_layout(
    input_val: torch.Tensor, weight_val: torch.Tensor, p: ConvParams
) -> tuple[list[int], list[int]]:
    """Output sizes and strides of the layout rule for these (possibly unbatched) tensors."""
    return out_shape_and_stride(
        [int(s) for s in input_val.shape],
        [int(s) for s in input_val.stride()],
        [int(s) for s in weight_val.shape],
        [int(s) for s in weight_val.stride()],
        list(p.stride),
        list(p.padding_before),
        list(p.padding_after),
        list(p.dilation),
        p.transposed,
        list(p.output_padding),
        p.groups,
        input_val.dtype == torch.float64,
    )


def same_layout(a_sizes, a_strides, b_sizes, b_strides) -> bool:
    """Equal sizes, and equal strides on every dim of size > 1 (the stride of a size-1 dim is never used)."""
    if list(a_sizes) != list(b_sizes):
        return False
    return all(int(s) == 1 or int(x) == int(y) for s, x, y in zip(a_sizes, a_strides, b_strides, strict=True))


def pad_fold(conv: Node, args: ConvArgs, allow_tf32: bool = True) -> tuple[PadFold | None, str]:
    """Whether ``conv``'s input is a zero spatial pad that can be folded into padding_before/after.

    Returns (fold, "") when it can; (None, why not) otherwise ("" when the input is no pad at all). The fold
    must keep the node's recorded output layout (the layout rule on the un-padded input) and be supported by a
    registered template. Whether the pad may be removed also needs all its users to fold it: see `pad_users_ok`.
    """
    pad = args.input
    if not is_pad_node(pad):
        return None, ""
    if args.transposed:
        return None, "padding before a transposed convolution is not a crop, so it is not folded"
    amounts = spatial_pad_amounts(pad, args.spatial_dims)
    if amounts is None:
        return None, "the pad is not a zero, non-negative pad of spatial dims only"
    source = pad.args[0]
    if not isinstance(source, Node):
        return None, "the pad's input is not a graph node"
    before, after = amounts
    p = args.params
    params = ConvParams(
        p.stride,
        tuple(a + b for a, b in zip(p.padding_before, before, strict=True)),
        tuple(a + b for a, b in zip(p.padding_after, after, strict=True)),
        p.dilation,
        p.transposed,
        p.output_padding,
        p.groups,
    )
    try:
        x = tensor_val(source)
        w = tensor_val(args.weight)
        out = tensor_val(conv)
    except ValueError as e:
        return None, str(e)
    if static_ints(x.shape) is None or static_ints(x.stride()) is None:
        return None, "the pad's input has symbolic shapes"
    sizes, strides = rule_layout(x, w, params)
    if not same_layout(sizes, strides, out.shape, out.stride()):
        return None, (
            f"folding the pad changes the output layout (rule gives sizes {sizes} strides {strides}, the node "
            f"records sizes {list(out.shape)} strides {list(out.stride())})"
        )
    from ..conv.templates import support_report

    problem = conv_problem(x, w, args.bias is not None, params, allow_tf32)
    verdicts = support_report(problem)
    if not any(v for _, v in verdicts):
        why = "; ".join(f"{t.name}: {v.reason}" for t, v in verdicts)
        return None, f"no template supports the folded convolution ({why})"
    return PadFold(pad, source, params), ""


def pad_users_ok(pad: Node, folds: dict[Node, PadFold]) -> bool:
    """A pad can leave the CPU only if every user is a delegated convolution that folds it."""
    return all(u in folds and folds[u].pad is pad for u in pad.users)


# ---- batch norm -----------------------------------------------------------------------------------------------
def is_batch_norm_node(node: object) -> bool:
    return (
        isinstance(node, Node)
        and node.op == "call_function"
        and aten_overload(node.target) in BATCH_NORM_OVERLOADS
    )


@dataclass(frozen=True)
class BatchNormFold:
    """An inference batch norm folded into the convolution before it.

    ``output`` (the ``getitem(bn, 0)`` node) is what the folded convolution computes; ``weight``/``bias`` are
    None for a non-affine batch norm.
    """

    bn: Node
    output: Node
    weight: Node | None
    bias: Node | None
    mean: Node
    var: Node
    eps: float


def batch_norm_fold(conv: Node, args: ConvArgs, constants: set[str]) -> tuple[BatchNormFold | None, str]:
    """Whether ``conv``'s only user is an inference batch norm that can be folded into its weight and bias.

    Returns (fold, "") when it can; (None, why not) otherwise ("" when no batch norm follows at all). Foldable:
    a forward (not transposed), batched convolution whose single user is
    ``_native_batch_norm_legit_no_training`` with this conv as input, read only through one ``getitem(bn, 0)``
    (in an edge graph), or ``aten.batch_norm`` with ``training=False`` (before the core decomposition: then
    ``output`` is the batch norm node itself); the batch norm's weight/bias (or None), running mean and variance are float constants of the program
    (``constants``: placeholder names) with one value per output channel; eps is a number; and the batch norm's
    output has the convolution output's layout (the delegate writes the folded result where the conv would).
    """
    users = list(conv.users)
    if len(users) != 1:
        return None, ""
    bn = users[0]
    pre_decomposition = _is_aten_batch_norm(bn)
    if not pre_decomposition and not is_batch_norm_node(bn):
        return None, ""
    bargs = list(bn.args) + [None] * 9
    if pre_decomposition:
        training = bargs[5] if len(bn.args) > 5 else bn.kwargs.get("training")
        if training is not False:
            return None, "the batch norm normalizes with batch statistics (training=True)"
        bargs[5:8] = [bargs[6], bargs[7], None]  # (momentum, eps) where the no_training op has them
        if bargs[6] is None:
            bargs[6] = bn.kwargs.get("eps")
    if bargs[0] is not conv:
        return None, "the convolution is not the batch norm's input"
    if args.transposed:
        return None, "a batch norm after a transposed convolution is not folded (its channel axis differs)"
    try:
        out = tensor_val(conv)
    except ValueError as e:
        return None, str(e)
    if out.dim() != args.spatial_dims + 2:
        return None, "the convolution is unbatched, so the batch norm's channel dim is not the conv's"
    if not out.dtype.is_floating_point:
        return None, f"the convolution's output dtype {out.dtype} is not a float type"
    bn_users = list(bn.users)
    if pre_decomposition:
        pass  # batch_norm returns the normalized tensor itself
    elif (
        len(bn_users) != 1
        or bn_users[0].op != "call_function"
        or bn_users[0].target is not operator.getitem
        or tuple(bn_users[0].args[1:]) != (0,)
    ):
        return None, "the batch norm's saved statistics are used (only getitem 0, its output, may be)"
    output = bn if pre_decomposition else bn_users[0]
    weight = bargs[1] if bargs[1] is not None else bn.kwargs.get("weight")
    bias = bargs[2] if bargs[2] is not None else bn.kwargs.get("bias")
    mean = bargs[3] if bargs[3] is not None else bn.kwargs.get("running_mean")
    var = bargs[4] if bargs[4] is not None else bn.kwargs.get("running_var")
    eps = bargs[6] if bargs[6] is not None else bn.kwargs.get("eps")
    channels = int(out.shape[1])
    for what, n, optional in (
        ("weight", weight, True),
        ("bias", bias, True),
        ("running mean", mean, False),
        ("running variance", var, False),
    ):
        if n is None and optional:
            continue
        if not isinstance(n, Node) or n.op != "placeholder" or n.name not in constants:
            return None, f"the batch norm's {what} is not a constant of the program"
        try:
            v = tensor_val(n)
        except ValueError as e:
            return None, str(e)
        if not v.dtype.is_floating_point:
            return None, f"the batch norm's {what} has dtype {v.dtype}, not a float type"
        if tuple(v.shape) != (channels,):
            return None, f"the batch norm's {what} has shape {tuple(v.shape)}, not ({channels},)"
    if isinstance(eps, bool) or not isinstance(eps, (int, float)):
        return None, f"the batch norm's eps is {eps!r}, not a number"
    try:
        res = tensor_val(output)
    except ValueError as e:
        return None, str(e)
    if res.dtype != out.dtype or not same_layout(res.shape, res.stride(), out.shape, out.stride()):
        return None, (
            f"the batch norm's output ({res.dtype}, sizes {list(res.shape)} strides {list(res.stride())}) differs "
            f"from the convolution's ({out.dtype}, sizes {list(out.shape)} strides {list(out.stride())})"
        )
    assert isinstance(mean, Node) and isinstance(var, Node)
    return BatchNormFold(bn, output, weight, bias, mean, var, float(eps)), ""


def _is_aten_batch_norm(node: Node) -> bool:
    return node.op == "call_function" and aten_overload(node.target) in PRE_DECOMPOSITION_BATCH_NORM


def batch_norm_follows(conv: Node) -> bool:
    """A cheap guess, before the core decomposition, that ``conv`` will fold an inference batch norm.

    The prefetch uses it to compile the convolution with a bias (what a fold gives); a wrong guess only costs
    one speculative compile.
    """
    users = list(conv.users)
    if len(users) != 1 or users[0].op != "call_function":
        return False
    target = aten_overload(users[0].target)
    if target in BATCH_NORM_OVERLOADS:
        return True
    if target in PRE_DECOMPOSITION_BATCH_NORM:
        training = users[0].args[5] if len(users[0].args) > 5 else users[0].kwargs.get("training")
        return training is False
    return False


def fold_batch_norm(
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    gamma: torch.Tensor | None,
    beta: torch.Tensor | None,
    mean: torch.Tensor,
    var: torch.Tensor,
    eps: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The weight and bias of ``batch_norm(conv(x, weight, bias))`` as one forward convolution.

    With s = gamma / sqrt(var + eps) per output channel (gamma = 1, beta = 0 when not affine; bias = 0 when
    absent): w' = w * s along the output-channel axis (dim 0 of a forward convolution's weight, groups
    included), b' = (b - mean) * s + beta. s and b' are computed in float64 from the stored constants; the
    per-element product w * s in float32 (float64 for a float64 weight): one float32 rounding of s and of the
    product, far below the TF32/fp16 precision the kernels run at, and ~10x cheaper than float64 on a
    ResNet-50's 25M weights (this runs in every export). Results are cast to the weight's dtype.
    """
    out_channels = int(weight.shape[0])
    mean64 = mean.detach().to(torch.float64)
    scale = torch.rsqrt(var.detach().to(torch.float64) + float(eps))
    if gamma is not None:
        scale = scale * gamma.detach().to(torch.float64)
    shift = -mean64 if bias is None else bias.detach().to(torch.float64) - mean64
    b64 = shift * scale
    if beta is not None:
        b64 = b64 + beta.detach().to(torch.float64)
    compute = torch.promote_types(weight.dtype, torch.float32)
    scaled = weight.detach().to(compute) * scale.to(compute).reshape(
        out_channels, *([1] * (weight.dim() - 1))
    )
    # Keep the weight's strides (a channels-last weight stays channels-last: the recorded weight layout);
    # elementwise ops usually keep them already, which saves a copy.
    if scaled.dtype == weight.dtype and scaled.stride() == weight.stride():
        folded = scaled
    else:
        folded = torch.empty_like(weight.detach(), memory_format=torch.preserve_format)
        folded.copy_(scaled)
    return folded, b64.to(weight.dtype)


def conv_constants(
    ep: ExportedProgram, args: ConvArgs, fold: BatchNormFold | None
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """The weight and bias the delegate runs for this convolution: the program's, or with ``fold`` folded."""
    weight = constant_tensor(ep, args.weight)
    bias = constant_tensor(ep, args.bias) if args.bias is not None else None
    if fold is None:
        return weight, bias
    gamma = constant_tensor(ep, fold.weight) if fold.weight is not None else None
    beta = constant_tensor(ep, fold.bias) if fold.bias is not None else None
    mean, var = constant_tensor(ep, fold.mean), constant_tensor(ep, fold.var)
    return fold_batch_norm(weight, bias, gamma, beta, mean, var, fold.eps)


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
    from ..conv.binding import bind_conv, is_conv_node

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


# ---- constants ----------------------------------------------------------------------------------------------
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


__all__ = [
    "BATCH_NORM_OVERLOADS",
    "BatchNormFold",
    "PAD_OVERLOADS",
    "PadFold",
    "batch_norm_fold",
    "batch_norm_follows",
    "constant_names",
    "constant_tensor",
    "conv_constants",
    "fold_batch_norms_in_program",
    "folded_batch_norm_of",
    "conv_problem",
    "fold_batch_norm",
    "is_batch_norm_node",
    "is_pad_node",
    "pad_fold",
    "pad_users_ok",
    "rule_layout",
    "same_layout",
    "spatial_pad_amounts",
    "static_ints",
    "tensor_val",
]
