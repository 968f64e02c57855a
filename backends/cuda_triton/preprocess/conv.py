"""Drafting one delegated convolution: folds, schedule, prepared weight, op record, launches and compile jobs."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from torch.fx import Node

from .._passes.batch_norm_fold import BatchNormFold, batch_norm_fold, conv_constants
from .._passes.pad_fold import is_pad_node, pad_fold
from ..conv.binding import ConvArgs, bind_conv
from ..conv.compile_pool import CompileJob
from ..conv.params import ConvParams
from ..conv.problem import ConvProblem
from ..conv.templates.epilogue_args import EPILOGUE_ROLES, PROLOGUE_ROLES
from ..kernel.launch import ScalarArg, TensorArg
from ..kernel.pdl import uses_pdl
from ..ops.tensor_meta import TensorMeta, channels_last_strides, is_channels_last_contiguous
from ..serialization import ConstantRef, ConvRecord, NullPtr, Scalar, ValueRef
from ..utils.graph import constant_names, tensor_val
from . import kernels
from .draft import (
    CudaTritonPreprocessError,
    DraftLaunch,
    DraftOp,
    add_constant,
    describe,
    profiling_name,
    scratch_value,
)
from .elementwise import copy_value, draft_elementwise, epilogue_chain
from .layout_plan import same_addresses
from .op_draft import ProgramDraft
from .schedule import choose_schedule


def draft_conv(
    node: Node, pd: ProgramDraft, chain_end: Node | None = None, fused_into: dict[Node, Node] | None = None
) -> tuple[BatchNormFold | None, bool]:
    """Add one convolution to the draft; returns the batch-norm fold it made (None when none) and whether it
    computes the elementwise chain ending at ``chain_end`` in its epilogue (the chain's only tensor from this
    convolution is its result; ``fused_into`` is `plan_chains`'s). When not, the caller drafts the chain."""
    ep, draft, value_of, jobs = pd.ep, pd.draft, pd.value_of, pd.jobs
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
    prologue = pd.prologues.pop(node, None)
    if prologue is not None:  # the chain before it, computed as its kernel loads the map the chain reads
        in_ref = prologue.source
    elif source in value_of:
        in_ref = ValueRef(value_of[source])
    else:
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

    w = tensor_val(args.weight)
    has_bias = args.bias is not None or bn_fold is not None
    x = pd.meta(in_ref)  # the input as the delegate stores it
    recorded_x = tensor_val(source)
    if list(x.sizes) != [int(s) for s in recorded_x.shape]:
        raise CudaTritonPreprocessError(
            f"{describe(node)}: the delegate stores its input as {list(x.sizes)}, the node records "
            f"{list(recorded_x.shape)}"
        )
    w_sizes = [int(s) for s in w.shape]
    w_strides = [int(s) for s in w.stride()]
    batched = len(x.sizes) == len(w_sizes)
    # See layout_plan: a result that stays inside is written channels-last; so is one of a 2-D or 3-D
    # channels-last input (whatever the weight), and declaring the weight alike then keeps the problem that of its
    # siblings. A 1-D convolution's output layout follows its weight alone (conv/layout.py), so one that writes a
    # delegate output, itself or through its fused chain, keeps the recorded weight and writes the recorded layout
    # with no copy.
    image_cl_input = len(x.sizes) in (4, 5) and is_channels_last_contiguous(x.sizes, x.strides)
    writes_output = result in pd.out_index or (
        len(x.sizes) == 3 and chain_end is not None and chain_end in pd.out_index
    )
    if options.channels_last and batched and (not writes_output or image_cl_input):
        w_strides = list(channels_last_strides(w_sizes))
    problem = ConvProblem.from_shapes(
        x.sizes, x.strides, tuple(w_sizes), tuple(w_strides), has_bias, params, x.dtype, options.allow_tf32
    )
    template, schedule, tuned = choose_schedule(problem, pd.tuning)
    if prologue is not None:
        with_prologue = replace(problem, prologue=prologue.prologue)
        if not template.takes_prologue(with_prologue, schedule):  # the chain is a kernel of its own after all
            draft_elementwise(prologue.end, pd, prologue.fused_into)
            return draft_conv(node, pd, chain_end, fused_into)
        problem = with_prologue
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

    out_sizes, out_strides = list(problem.output_size), list(problem.output_stride)
    if not batched:  # the rule's unbatched result drops the batch of one
        out_sizes, out_strides = out_sizes[1:], out_strides[1:]
    in_value = in_ref.value
    fused = None
    if chain_end is not None and batched and template.takes_epilogue(problem, schedule):
        recorded_end = [int(s) for s in tensor_val(chain_end).stride()]
        if chain_end not in pd.out_index or same_addresses(out_sizes, out_strides, recorded_end):
            out_meta = TensorMeta(tuple(out_sizes), tuple(out_strides), x.dtype)
            fused = epilogue_chain(chain_end, pd, fused_into or {}, result, out_meta)
    if fused is not None:  # the convolution writes the chain's value (conv/epilogue.py)
        problem = replace(problem, epilogue=fused.epilogue)
        result = chain_end
    copy_to_output = result in pd.out_index and not same_addresses(
        out_sizes, out_strides, [int(s) for s in tensor_val(result).stride()]
    )
    if copy_to_output:  # a channels-last input gives a channels-last result; the output is planned otherwise
        out_value = pd.intermediate(TensorMeta(tuple(out_sizes), tuple(out_strides), x.dtype))
    else:
        out_value = pd.result(result, out_sizes, pd.planned_strides(result, out_strides))

    pad = args.input if source is not args.input else None  # the folded pad
    covered = [
        *(prologue.covered if prologue else []), pad, node, None if bn_fold is None else bn_fold.bn,
        *(fused.covered if fused else []),
    ]  # fmt: skip
    op = ConvRecord(
        name=profiling_name(node, covered),
        **params.as_dict(),
        input=in_value,
        weight=w_index,
        bias=b_index,
        output=out_value,
        weight_sizes=w_sizes,
        weight_strides=w_strides,
        template=template.name,
        schedule=schedule.key(),
        epilogue=fused.steps if fused else [],
        epilogue_inputs=list(fused.operands) if fused else [],
        prologue=prologue.steps if prologue else [],
        prologue_inputs=list(prologue.operands) if prologue else [],
    )
    chain_refs = {
        **dict(zip(EPILOGUE_ROLES, fused.operands if fused else [], strict=False)),
        **dict(zip(PROLOGUE_ROLES, prologue.operands if prologue else [], strict=False)),
    }
    # Scratch tensors (split-K partial sums, a channels-last input copy): intermediates in the arena; the ones the
    # launches need zero and leave zero (split-K tile counters) are state values, zeroed once at init.
    scratch_values: dict[str, int] = {}
    for t in template.scratch(problem, schedule):
        scratch_values[t.role] = len(draft.values)
        draft.values.append(scratch_value(t))
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
                elif a.role in scratch_values:
                    largs.append(ValueRef(scratch_values[a.role]))
                elif a.role in EPILOGUE_ROLES or a.role in PROLOGUE_ROLES:
                    largs.append(chain_refs.get(a.role, NullPtr()))
                else:
                    raise CudaTritonPreprocessError(f"{launch.name}: unknown tensor role {a.role!r}")
            elif isinstance(a, ScalarArg):
                largs.append(Scalar(a.type, a.value))
            else:
                raise CudaTritonPreprocessError(f"{launch.name}: unknown argument {a!r}")
        keys: dict[int, str] = {}
        for arch in options.archs:
            pdl = uses_pdl(options.programmatic_launch, arch)
            key = kernels.launch_key(template.name, problem, schedule, li, launch, arch, pdl)
            keys[arch] = key
            jobs.setdefault(
                key,
                CompileJob(template.name, problem, schedule=schedule, launch_index=li, arch=arch, pdl=pdl),
            )
        launches.append(DraftLaunch(launch, keys, largs))
    draft.ops.append(DraftOp(op, launches))
    if copy_to_output:
        copy_value(node, pd, ValueRef(out_value), pd.result(result))
    return bn_fold, fused is not None


__all__ = ["draft_conv"]
