"""Drafting one delegated convolution: folds, schedule, prepared weight, op record, launches and compile jobs."""

from __future__ import annotations

from typing import Any

from torch.export import ExportedProgram
from torch.fx import Node

from .._passes.batch_norm_fold import BatchNormFold, batch_norm_fold, conv_constants
from .._passes.pad_fold import is_pad_node, pad_fold
from ..conv.binding import ConvArgs, bind_conv
from ..conv.compile_pool import CompileJob
from ..conv.params import ConvParams
from ..kernel.launch import TRITON_PTR_DTYPE, ScalarArg, TensorArg
from ..serialization import ConstantRef, ConvRecord, NullPtr, Scalar, ValueRecord, ValueRef
from ..utils.conv import conv_problem
from ..utils.graph import constant_names, tensor_val
from . import kernels
from .draft import (
    CudaTritonPreprocessError,
    Draft,
    DraftLaunch,
    DraftOp,
    add_constant,
    contiguous_strides,
    describe,
    profiling_name,
    value_record,
)
from .schedule import TuningLookup, choose_schedule


def draft_conv(
    node: Node,
    ep: ExportedProgram,
    draft: Draft,
    value_of: dict[Node, int],
    out_index: dict[Node, int],
    tuning: TuningLookup,
    jobs: dict[str, CompileJob],
) -> BatchNormFold | None:
    """Add one convolution to the draft; returns the batch-norm fold it made (None when none)."""
    options = draft.options
    try:
        args: ConvArgs = bind_conv(node)
    except ValueError as e:
        raise CudaTritonPreprocessError(str(e)) from e
    params: ConvParams = args.params
    source = args.input
    if is_pad_node(source) and source not in value_of:  # a pad not every reader folds is a kernel of its own
        fold, why = pad_fold(node, args, options.allow_tf32)
        if fold is None:
            raise CudaTritonPreprocessError(f"{describe(node)}: its input pad cannot be folded: {why}")
        source, params = fold.source, fold.params
    if source not in value_of:
        raise CudaTritonPreprocessError(
            f"{describe(node)}: its input '{source.name}' is neither a delegate input nor a convolution output"
        )
    consts = constant_names(ep)
    for what, n in (("weight", args.weight), ("bias", args.bias)):
        if n is not None and (n.op != "placeholder" or n.name not in consts):
            raise CudaTritonPreprocessError(
                f"{describe(node)}: its {what} '{n.name}' is not a constant owned by the delegate (the "
                "partitioner tags weights with tag_constant_data)"
            )
    # A batch norm right after this convolution: fold it (the conv then always has a bias), as the partitioner
    # does with the same option. One that cannot fold is drafted as a norm op of its own (`preprocess.norm`).
    bn_fold = batch_norm_fold(node, args, consts)[0] if options.fold_batch_norm else None
    result = node if bn_fold is None else bn_fold.output  # the node whose value this op writes

    x, w = tensor_val(source), tensor_val(args.weight)
    has_bias = args.bias is not None or bn_fold is not None
    problem = conv_problem(x, w, has_bias, params, options.allow_tf32)
    template, schedule, tuned = choose_schedule(problem, tuning)
    draft.tuned_ops += tuned
    draft.templates[template.name] = draft.templates.get(template.name, 0) + 1

    weight, bias = conv_constants(ep, args, bn_fold)
    if tuple(weight.shape) != tuple(w.shape):
        raise CudaTritonPreprocessError(
            f"{describe(node)}: weight shape {tuple(weight.shape)} != {tuple(w.shape)}"
        )
    prepared = template.prepare_weight(weight.detach(), problem, schedule)
    w_index = add_constant(draft, prepared, f"weight of '{node.name}'")
    b_index = None
    if bias is not None:
        b_index = add_constant(draft, bias, f"bias of '{node.name}'")

    if result in out_index:
        record = value_record("output", out_index[result], result)
    else:
        record = value_record("intermediate", 0, result)
    value_of[result] = len(draft.values)
    draft.values.append(record)
    in_value, out_value = value_of[source], value_of[result]

    pad = args.input if source is not args.input else None  # the folded pad
    op = ConvRecord(
        name=profiling_name(node, [pad, node, None if bn_fold is None else bn_fold.bn]),
        stride=list(params.stride),
        padding_before=list(params.padding_before),
        padding_after=list(params.padding_after),
        dilation=list(params.dilation),
        transposed=params.transposed,
        output_padding=list(params.output_padding),
        groups=params.groups,
        input=in_value,
        weight=w_index,
        bias=b_index,
        output=out_value,
        weight_sizes=[int(s) for s in w.shape],
        weight_strides=[int(s) for s in w.stride()],
        template=template.name,
        schedule=schedule.key(),
    )
    # Scratch tensors (split-K partial sums, a channels-last input copy): intermediates the runtime allocates once.
    scratch_value: dict[str, int] = {}
    for t in template.scratch(problem, schedule):
        scratch_value[t.role] = len(draft.values)
        dtype = TRITON_PTR_DTYPE[t.dtype]  # the blob's dtype names are Triton's pointer types
        draft.values.append(ValueRecord("intermediate", 0, dtype, list(t.sizes), contiguous_strides(t.sizes)))
    launches: list[DraftLaunch] = []
    for li, launch in enumerate(template.launches(problem, schedule)):
        largs: list[Any] = []
        for a in launch.args:
            if isinstance(a, TensorArg):
                if a.role == "input":
                    largs.append(ValueRef(in_value))
                elif a.role == "output":
                    largs.append(ValueRef(out_value))
                elif a.role == "weight":
                    largs.append(ConstantRef(w_index))
                elif a.role == "bias":
                    largs.append(NullPtr() if b_index is None else ConstantRef(b_index))
                elif a.role in scratch_value:
                    largs.append(ValueRef(scratch_value[a.role]))
                else:
                    raise CudaTritonPreprocessError(f"{launch.name}: unknown tensor role {a.role!r}")
            elif isinstance(a, ScalarArg):
                largs.append(Scalar(a.type, a.value))
            else:
                raise CudaTritonPreprocessError(f"{launch.name}: unknown argument {a!r}")
        keys: dict[int, str] = {}
        for arch in options.archs:
            key = kernels.launch_key(template.name, problem, schedule, li, launch, arch)
            keys[arch] = key
            jobs.setdefault(key, CompileJob(template.name, problem, schedule, li, arch))
        launches.append(DraftLaunch(launch, keys, largs))
    draft.ops.append(DraftOp(op, launches))
    return bn_fold


__all__ = ["draft_conv"]
