"""The data-movement family's partition config: views and dim-order copies, cat, split, pad, upsample.

`data_movement_spec` binds a node to the family's spec on the layouts it records; the preprocess builds the same
spec with `spec_on` over its operands as the delegate stores them. A view whose result the next kernel can read in
place (`ops.data_movement.view_is_free`) costs no kernel in the delegate; the config takes it either way. What
the blob's records cannot describe is declined (`blob_limits`). Multi-output ops (``split_with_sizes_copy``) bring
their ``getitem`` readers along.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any, ClassVar

import executorch.exir.passes.dim_order_ops_registry  # noqa: F401  (registers the dim_order_ops namespace)
import torch
from torch.fx import Node

from ...conv.binding import aten_overload
from ...ops.data_movement import CatSpec, PadSpec, SplitSpec, StridedCopySpec, UpsampleSpec
from ...ops.tensor_meta import TensorMeta, dtype_name
from ...serialization.encoding import VIEW_ALIGNMENT
from .base import OpConfig, PartitionContext, Verdict, first_output_readers
from .nodes import FLOAT_DTYPES, bound_arguments, static_meta

aten = torch.ops.aten
dim_order_ops = torch.ops.dim_order_ops

# The views that keep the input's elements in row-major order under new sizes (a reshape record when copied).
RESHAPES = (
    aten.view_copy.default,
    aten.squeeze_copy.dims,
    aten.squeeze_copy.dim,
    aten.squeeze_copy.default,
    aten.unsqueeze_copy.default,
)
STRIDED_COPIES = (
    aten.permute_copy.default,
    aten.slice_copy.Tensor,
    aten.select_copy.int,
    aten.expand_copy.default,
    aten.as_strided_copy.default,
    *RESHAPES,
    dim_order_ops._clone_dim_order.default,
    dim_order_ops._to_dim_order_copy.default,
)
UPSAMPLES = {
    aten.upsample_nearest1d.vec: "nearest",
    aten.upsample_nearest2d.vec: "nearest",
    aten.upsample_nearest3d.vec: "nearest",
    aten._upsample_nearest_exact1d.vec: "nearest_exact",
    aten._upsample_nearest_exact2d.vec: "nearest_exact",
    aten._upsample_nearest_exact3d.vec: "nearest_exact",
    aten.upsample_bilinear2d.vec: "bilinear",
}
OTHERS = (aten.cat.default, aten.split_with_sizes_copy.default, aten.constant_pad_nd.default)

DataMovementSpec = StridedCopySpec | CatSpec | SplitSpec | PadSpec | UpsampleSpec


def data_movement_inputs(node: Node) -> list[Node]:
    """The tensor nodes behind the spec's roles "in0", "in1", ... (a cat's parts in order, else the input)."""
    args = bound_arguments(node)
    if aten_overload(node.target) is aten.cat.default:
        return list(args["tensors"])
    return [args["input"] if "input" in args else args["self"]]


def data_movement_outputs(node: Node) -> list[Node]:
    """The nodes holding the spec's outputs "out", "out1", ...: a split's getitem readers by index, else the node."""
    if aten_overload(node.target) is not aten.split_with_sizes_copy.default:
        return [node]
    readers = {u.args[1]: u for u in first_output_readers(node)}
    count = len(bound_arguments(node)["split_sizes"])
    if sorted(readers) != list(range(count)):
        raise ValueError(f"the split's outputs are not each read once through getitem ({sorted(readers)})")
    return [readers[i] for i in range(count)]


def data_movement_spec(node: Node) -> DataMovementSpec:
    """The node's spec with the output layouts it records; ValueError naming the argument if malformed."""
    cat = aten_overload(node.target) is aten.cat.default
    inputs = [
        static_meta(f"part {i}" if cat else "input", t) for i, t in enumerate(data_movement_inputs(node))
    ]
    return with_recorded_layout(spec_on(node, inputs), node)


def spec_on(node: Node, inputs: list[TensorMeta]) -> DataMovementSpec:
    """The node's spec reading ``inputs`` (the tensors behind `data_movement_inputs`, in their layouts: the
    recorded ones, or how a delegate stores them) and writing the layouts the family's rules give."""
    op = aten_overload(node.target)
    args = bound_arguments(node)
    if op is aten.cat.default:
        return CatSpec.of(list(inputs), args.get("dim", 0))
    x = inputs[0]
    if op is aten.split_with_sizes_copy.default:
        return SplitSpec.of(x, [int(s) for s in args["split_sizes"]], args.get("dim", 0))
    if op is aten.constant_pad_nd.default:
        return PadSpec.of(x, [int(p) for p in args["pad"]], args.get("value", 0.0))
    if op in UPSAMPLES:
        return UpsampleSpec.of(
            UPSAMPLES[op], x, args.get("output_size"), args.get("scale_factors"),
            bool(args.get("align_corners", False)),
        )  # fmt: skip
    if op in STRIDED_COPIES:
        return _strided_copy(op, x, args)
    raise ValueError(f"{op} is not a data-movement op of this family")


def _strided_copy(op: Any, x: TensorMeta, args: dict[str, Any]) -> StridedCopySpec:
    if op is aten.permute_copy.default:
        return StridedCopySpec.permute(x, list(args["dims"]))
    if op is aten.slice_copy.Tensor:
        return StridedCopySpec.slice(
            x, args.get("dim", 0), args.get("start"), args.get("end"), args.get("step", 1)
        )
    if op is aten.select_copy.int:
        return StridedCopySpec.select(x, args["dim"], args["index"])
    if op is aten.expand_copy.default:
        return StridedCopySpec.expand(x, list(args["size"]))
    if op is aten.as_strided_copy.default:
        return StridedCopySpec.as_strided(
            x, list(args["size"]), list(args["stride"]), args.get("storage_offset")
        )
    if op is aten.view_copy.default:
        return StridedCopySpec.view(x, list(args["size"]))
    if op in (aten.squeeze_copy.dims, aten.squeeze_copy.dim, aten.squeeze_copy.default):
        dims = args.get("dim")
        return StridedCopySpec.squeeze(
            x, None if dims is None else list(dims) if isinstance(dims, (list, tuple)) else [dims]
        )
    if op is aten.unsqueeze_copy.default:
        return StridedCopySpec.unsqueeze(x, args["dim"])
    dtype = args.get("dtype")
    if dtype is not None and dtype not in FLOAT_DTYPES:
        raise ValueError(f"a copy to {dtype}; the kernels take float32, float16 and bfloat16")
    name = "_to_dim_order_copy" if op is dim_order_ops._to_dim_order_copy.default else "_clone_dim_order"
    return StridedCopySpec.dim_order_copy(
        x, args.get("dim_order"), None if dtype is None else dtype_name(dtype), name
    )


def with_recorded_layout(spec: DataMovementSpec, node: Node) -> DataMovementSpec:
    """The spec writing the layouts the node records (what ExecuTorch plans), where the family lets a plan choose."""
    outs = [static_meta(f"output {i}", n) for i, n in enumerate(data_movement_outputs(node))]
    if isinstance(spec, StridedCopySpec):
        return spec.with_out_strides(outs[0].strides) if not spec.reshapes else spec
    if isinstance(spec, (CatSpec, PadSpec, UpsampleSpec)):
        return replace(spec, out_strides=outs[0].strides)
    return spec


def blob_limits(spec: DataMovementSpec) -> Verdict:
    """What the blob's data-movement records cannot say (docs/blob_format.md, kind 6), which the kernels could do:
    a pad value that is not finite, and an ``as_strided_copy`` reading from an offset that is not a multiple of the
    16 bytes a view of a value starts at (its record copies from such a view of the input)."""
    if isinstance(spec, PadSpec) and not math.isfinite(spec.value):
        return Verdict.no(
            f"constant_pad_nd: the pad value {spec.value} is not finite; the blob records finite ones"
        )
    if isinstance(spec, StridedCopySpec) and spec.op == "as_strided_copy":
        offset_bytes = spec.view_offset * getattr(torch, spec.input.dtype).itemsize
        if offset_bytes % VIEW_ALIGNMENT:
            return Verdict.no(
                f"as_strided_copy: it reads from element {spec.view_offset} of its input ({offset_bytes} bytes "
                f"in); the blob describes reads from multiples of {VIEW_ALIGNMENT} bytes only"
            )
    return Verdict.yes()


class DataMovementConfig(OpConfig):
    family = "data_movement"
    targets: ClassVar[tuple[Any, ...]] = (*STRIDED_COPIES, *UPSAMPLES, *OTHERS)

    def check_op(self, node: Node, ctx: PartitionContext) -> Verdict:
        try:
            spec = data_movement_spec(node)
        except ValueError as e:
            return Verdict.no(str(e))
        for out, recorded in zip(spec.outputs(), data_movement_outputs(node), strict=True):
            v = recorded.meta["val"]
            if list(out.sizes) != [int(s) for s in v.shape]:
                return Verdict.no(
                    f"the family's output sizes {list(out.sizes)} differ from the node's {list(v.shape)}"
                )
            if any(s > 1 and a != int(b) for s, a, b in zip(out.sizes, out.strides, v.stride(), strict=True)):
                return Verdict.no(
                    f"the family writes strides {list(out.strides)}, the node records {list(v.stride())}"
                )
        support = spec.supports()
        return blob_limits(spec) if support else Verdict.no(support.reason)

    def companions(self, node: Node) -> list[Node]:
        return first_output_readers(node)


__all__ = [
    "OTHERS",
    "RESHAPES",
    "STRIDED_COPIES",
    "UPSAMPLES",
    "DataMovementConfig",
    "blob_limits",
    "data_movement_inputs",
    "data_movement_outputs",
    "data_movement_spec",
    "spec_on",
    "with_recorded_layout",
]
