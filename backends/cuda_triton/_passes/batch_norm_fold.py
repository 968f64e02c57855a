"""Folding an inference batch norm into the weight and bias of the forward convolution before it.

`batch_norm_fold` decides whether a batch norm after a convolution can be folded (the partitioner and the
preprocess both ask it, so they agree); `fold_batch_norm` computes the folded weight and bias; `conv_constants`
gives the weight and bias the delegate runs for a convolution, fold applied.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass

import torch
from torch.export import ExportedProgram
from torch.fx import Node

from ..conv.binding import ConvArgs, aten_overload
from ..utils.graph import constant_tensor, same_layout, tensor_val

aten = torch.ops.aten
# An eval-mode BatchNorm{1,2,3}d in an edge graph: (x, weight?, bias?, running_mean, running_var, momentum, eps)
# -> (out, save_mean, save_invstd), read through operator.getitem(bn, 0).
BATCH_NORM_OVERLOADS = (aten._native_batch_norm_legit_no_training.default,)

# The same op before the core decomposition (what ops_to_not_decompose sees): batch_norm(x, weight, bias,
# running_mean, running_var, training, momentum, eps, cudnn_enabled).
PRE_DECOMPOSITION_BATCH_NORM = (aten.batch_norm.default,)


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


__all__ = [
    "BATCH_NORM_OVERLOADS",
    "BatchNormFold",
    "PRE_DECOMPOSITION_BATCH_NORM",
    "batch_norm_fold",
    "batch_norm_follows",
    "conv_constants",
    "fold_batch_norm",
    "is_batch_norm_node",
]
