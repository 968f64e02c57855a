"""What every family's drafter uses: the program being drafted, its values and constants, and `add_op`.

A drafter (one module per op family in this package) reads one edge node, builds its family's spec (the same
spec the partition config checked), and calls `ProgramDraft.add_op` with the op record and the tensors its
launch roles bind. `add_op` derives the launches from the spec (`cuda_triton.ops.registry`), records their
arguments and compile keys, and queues one compile job per distinct kernel and arch.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch
from torch.export import ExportedProgram
from torch.fx import Node

from .._passes.constant_fold import evaluate
from ..conv.compile_pool import CompileJob
from ..kernel.launch import ScalarArg, Schedule, TensorArg
from ..kernel.pdl import uses_pdl
from ..ops.registry import OpCompileJob, kernel_family
from ..ops.tensor_meta import TensorMeta
from ..serialization import ConstantRef, NullPtr, OpRecord, Scalar, ValueRecord, ValueRef
from ..utils.graph import constant_tensor, tensor_val
from . import kernels
from .draft import (
    BLOB_DTYPE_NAMES,
    CudaTritonPreprocessError,
    Draft,
    DraftLaunch,
    DraftOp,
    add_constant,
    blob_dtype,
    contiguous_strides,
    describe,
    node_errors,
    profiling_name,
    scratch_value,
)
from .schedule import TuningLookup

if TYPE_CHECKING:
    from .elementwise import FusedPrologue
    from .gemm_norm import NormPrologue

Arg = ValueRef | ConstantRef | NullPtr


@dataclass
class ProgramDraft:
    """One delegated program while it is drafted: node -> value index, constants, the compile jobs."""

    ep: ExportedProgram
    draft: Draft
    tuning: TuningLookup
    jobs: dict[str, CompileJob | OpCompileJob]
    constants: set[str]  # placeholder names of the program's constants
    foldable: set[Node]  # ops computed from constants at export (`_passes.constant_fold`)
    value_of: dict[Node, int] = field(default_factory=dict)
    out_index: dict[Node, int] = field(default_factory=dict)
    folded: dict[Node, torch.Tensor] = field(default_factory=dict)
    # convolution -> the chain before it that it computes as it loads its input (`preprocess.conv`)
    prologues: dict[Node, FusedPrologue] = field(default_factory=dict)
    # GEMM -> the layer norm it folds (`preprocess.gemm_norm`)
    norm_prologues: dict[Node, NormPrologue] = field(default_factory=dict)

    # -- operands ---------------------------------------------------------------------------------------------
    def is_constant(self, node: object) -> bool:
        return isinstance(node, Node) and (
            (node.op == "placeholder" and node.name in self.constants) or node in self.foldable
        )

    def constant(self, node: Node) -> torch.Tensor:
        """The real tensor of a constant placeholder or of an op computed from constants (folded once)."""
        if node.op == "placeholder":
            return constant_tensor(self.ep, node)
        hit = self.folded.get(node)
        if hit is None:
            if node not in self.foldable:
                raise CudaTritonPreprocessError(f"{describe(node)} is not computed from constants")
            hit = self.folded[node] = evaluate(node, self.constant)
        return hit

    def value(self, node: object, owner: Node, what: str = "input") -> int:
        """The value index of a tensor the delegate computes or receives."""
        if not isinstance(node, Node) or node not in self.value_of:
            name = node.name if isinstance(node, Node) else repr(node)
            raise CudaTritonPreprocessError(
                f"{describe(owner)}: its {what} '{name}' is neither a delegate input nor computed in the delegate"
            )
        return self.value_of[node]

    def operand(
        self,
        node: object,
        owner: Node,
        what: str = "input",
        prepare: Callable[[torch.Tensor], torch.Tensor] | None = None,
    ) -> ValueRef | ConstantRef:
        """A value of the delegate, or a constant (stored in the blob's constants, once per content; ``prepare``
        turns a constant's tensor into what the op reads, e.g. weights rounded to TF32)."""
        if isinstance(node, Node) and node not in self.value_of and self.is_constant(node):
            t = self.constant(node)
            if prepare is not None:
                t = prepare(t)
            return ConstantRef(add_constant(self.draft, t, f"{what} of '{owner.name}'"))
        return ValueRef(self.value(node, owner, what))

    def meta(self, arg: ValueRef | ConstantRef) -> TensorMeta:
        """Sizes, strides and dtype of an operand as the delegate stores it."""
        if isinstance(arg, ValueRef):
            v = self.draft.values[arg.value]
            return TensorMeta(tuple(v.sizes), tuple(v.strides), _torch_name(v.dtype))
        c = self.draft.constants[arg.constant]
        return TensorMeta(tuple(c.sizes), tuple(contiguous_strides(tuple(c.sizes))), _torch_name(c.dtype))

    # -- results ----------------------------------------------------------------------------------------------
    def planned_strides(self, node: Node, preferred: Sequence[int] | None) -> list[int]:
        """The strides ``node``'s value is stored with: ``preferred`` (a layout the layout plan chose,
        `layout_plan`) for an intermediate, the recorded ones for a delegate output, with no preference, or with
        the ``channels_last`` option off."""
        if preferred is None or node in self.out_index or not self.draft.options.channels_last:
            return [int(s) for s in tensor_val(node).stride()]
        return [int(s) for s in preferred]

    def result(self, node: Node, sizes: list[int] | None = None, strides: list[int] | None = None) -> int:
        """A new value for ``node``'s tensor: the delegate output it is, else an intermediate in the arena.

        ``sizes``/``strides`` default to what the node records (what ExecuTorch plans for a delegate output; an
        intermediate may take another layout, e.g. the one its consumer reads best).
        """
        v = tensor_val(node)
        sizes = [int(s) for s in v.shape] if sizes is None else list(sizes)
        strides = [int(s) for s in v.stride()] if strides is None else list(strides)
        dtype = blob_dtype(v, f"node '{node.name}'")
        if node in self.out_index:
            recorded = ([int(s) for s in v.shape], [int(s) for s in v.stride()])
            if (sizes, strides) != recorded:
                raise CudaTritonPreprocessError(
                    f"{describe(node)} is a delegate output, so it takes the layout the program plans"
                )
            record = ValueRecord("output", self.out_index[node], dtype, sizes, strides)
        else:
            record = ValueRecord("intermediate", 0, dtype, sizes, strides)
        self.value_of[node] = len(self.draft.values)
        self.draft.values.append(record)
        return self.value_of[node]

    def intermediate(self, meta: TensorMeta) -> int:
        """A new intermediate value (in the arena) of ``meta``'s sizes, strides and dtype, for no node."""
        dtype = BLOB_DTYPE_NAMES[meta.dtype]
        self.draft.values.append(ValueRecord("intermediate", 0, dtype, list(meta.sizes), list(meta.strides)))
        return len(self.draft.values) - 1

    def alias(
        self, node: Node, base: int, sizes: list[int], strides: list[int], offset_bytes: int = 0
    ) -> int:
        """``node``'s tensor as a view of value ``base`` (no kernel); the caller checks it is not an output."""
        assert node not in self.out_index, "a delegate output owns its buffer; copy into it instead"
        self.value_of[node] = self.view(base, sizes, strides, offset_bytes)
        return self.value_of[node]

    def view(self, base: int, sizes: list[int], strides: list[int], offset_bytes: int = 0) -> int:
        """A new value viewing value ``base``'s bytes (an op's operand or result described in another shape)."""
        root = self.draft.values[base]
        if root.kind == "view":  # views name their root, with the offsets added
            offset_bytes += root.offset
            base = root.index
        self.draft.values.append(ValueRecord.view(base, root.dtype, sizes, strides, offset_bytes))
        return len(self.draft.values) - 1

    # -- ops --------------------------------------------------------------------------------------------------
    def add_op(
        self,
        node: Node,
        covered: list[Node | None],
        record: OpRecord,
        family: str,
        spec: Any,
        roles: Mapping[str, Arg],
        schedule: Schedule | None = None,
    ) -> None:
        """Add ``record`` computed by ``family``'s launches for ``spec``, binding each tensor role to ``roles``."""
        fam = kernel_family(family)
        schedule = schedule or fam.heuristic(spec)
        record.name = profiling_name(node, covered)
        bound: dict[str, Arg] = dict(roles)
        for t in fam.scratch_tensors(spec, schedule):  # zeroed ones are state values (`scratch_value`)
            bound[t.role] = ValueRef(len(self.draft.values))
            self.draft.values.append(scratch_value(t))
        with node_errors(node):
            launch_list = fam.launches(spec, schedule)
        launches: list[DraftLaunch] = []
        for li, launch in enumerate(launch_list):
            args: list[Any] = []
            for a in launch.args:
                if isinstance(a, TensorArg):
                    if a.role not in bound:
                        raise CudaTritonPreprocessError(
                            f"{describe(node)}: {launch.name} reads tensor role {a.role!r}, which the drafter "
                            f"does not bind (it binds {sorted(bound)})"
                        )
                    args.append(bound[a.role])
                elif isinstance(a, ScalarArg):
                    args.append(Scalar(a.type, a.value))
                else:
                    raise CudaTritonPreprocessError(f"{launch.name}: unknown argument {a!r}")
            keys: dict[int, str] = {}
            for arch in self.draft.options.archs:
                pdl = uses_pdl(self.draft.options.programmatic_launch, arch)
                key = kernels.launch_key(family, spec, schedule, li, launch, arch, pdl)
                keys[arch] = key
                self.jobs.setdefault(
                    key, OpCompileJob(family, spec, schedule=schedule, launch_index=li, arch=arch, pdl=pdl)
                )
            launches.append(DraftLaunch(launch, keys, args))
        self.draft.ops.append(DraftOp(record, launches))
        self.draft.templates[family] = self.draft.templates.get(family, 0) + 1


def stored_input(node: Node, recorded: TensorMeta, stored: TensorMeta) -> TensorMeta:
    """The input layout a kernel reads: the delegate's (a view may store other strides than the node records),
    which must have the recorded sizes and dtype."""
    if stored.sizes != recorded.sizes or stored.dtype != recorded.dtype:
        raise CudaTritonPreprocessError(
            f"{describe(node)}: the delegate stores its input as {list(stored.sizes)} {stored.dtype}, the node "
            f"records {list(recorded.sizes)} {recorded.dtype}"
        )
    return stored


_TORCH_NAMES = {"fp16": "float16", "bf16": "bfloat16", "fp32": "float32", "fp64": "float64"}


def _torch_name(blob_dtype_name: str) -> str:
    return _TORCH_NAMES.get(blob_dtype_name, blob_dtype_name)


__all__ = ["Arg", "ProgramDraft", "stored_input"]
