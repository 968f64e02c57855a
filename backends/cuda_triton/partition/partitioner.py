"""`CudaTritonPartitioner`: which convolutions of an edge program the CUDA Triton delegate takes.

Usable with both lowering APIs::

    to_edge_transform_and_lower(ep, partitioner=[CudaTritonPartitioner()])
    to_edge(ep).to_backend(CudaTritonPartitioner())

For every convolution node it asks the routing planner (`cuda_triton.conv.routing.plan`, planning for a CUDA
target: example inputs live on the CPU at export) and delegates what is ROUTED or REQUIRED, provided the
weight and bias are constants of the program (the delegate owns them; `tag_constant_data` tags them).

* ``ops_to_not_decompose`` keeps the convolution overloads that carry what the core decomposition loses (string
  padding, the transposed overloads, unbatched forms), with a filter (the check_op_support form) that answers
  True only for nodes this partitioner will really delegate, so a preserved op is never left undelegated
  (lowering would raise). When every such node will be delegated the filter is omitted, which selects
  ExecuTorch's cheaper decomposition path with the same outcome.
* A zero ``constant_pad_nd`` that pads only spatial dims and whose every user is a delegated convolution that
  can fold it (how plain ``to_edge`` spells asymmetric 'same' and causal padding) joins the partition; the
  preprocess folds it into padding_before/after (`cuda_triton._passes.pad_fold`, shared by both).
* An eval-mode batch norm (``_native_batch_norm_legit_no_training`` read through ``getitem(bn, 0)``) whose input
  is a delegated forward convolution with no other user, and whose weight, bias, running mean and variance are
  program constants, joins the convolution's partition (its constants tagged with the weights); the preprocess
  folds it into the convolution's weight and bias (`cuda_triton._passes.batch_norm_fold`, shared by
  both), so no CPU batch norm (and no host copy) sits between delegates. With ``to_edge_transform_and_lower``
  the same fold is already made on the ATen program (``transform_for_pre_decomposition``,
  `cuda_triton._passes.fold_batch_norms_in_program`), so the batch norms never reach ExecuTorch's
  decomposition and lowering (~3 s of a warm ResNet-50 export). ``fold_batch_norm=False`` turns both off.
* Connected delegated nodes form one partition (`CapabilityBasedPartitioner`), so intermediates stay on the
  GPU; it also merges independent ones where no cycle results.
* Every convolution left on the CPU is logged with the planner's reason; `last_report` keeps the full table.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import torch
from executorch.exir.backend.compile_spec_schema import CompileSpec
from executorch.exir.backend.partitioner import DelegationSpec, Partitioner, PartitionResult
from executorch.exir.backend.utils import tag_constant_data
from torch.export import ExportedProgram
from torch.fx import Node
from torch.fx.passes.infra.partitioner import CapabilityBasedPartitioner
from torch.fx.passes.operator_support import OperatorSupportBase

from .._passes.batch_norm_fold import BatchNormFold, batch_norm_fold, batch_norm_follows
from .._passes.fold_batch_norms_in_program import fold_batch_norms_in_program, folded_batch_norm_of
from .._passes.pad_fold import PadFold, is_pad_node, pad_fold, pad_users_ok
from ..conv.binding import aten_overload, is_conv_node
from ..conv.node_source import describe_node, module_path
from ..conv.routing import ConvRoutingError, Decision, RoutingPlan, plan
from ..utils.conv import conv_problem
from ..utils.graph import constant_names, tensor_val
from .options import CudaTritonOptions

logger = logging.getLogger("cuda_triton.partition")

BACKEND_ID = "CudaTritonBackend"  # the BackendDetails subclass name = the runtime's registration name
aten = torch.ops.aten

# Overloads kept from decomposition (with the filter below). convolution.default is not in the default
# decomposition table (listing it would be a no-op) and _convolution/conv_tbc never appear by default.
PRESERVED_OVERLOADS: tuple[torch._ops.OpOverload, ...] = (
    aten.conv1d.default,
    aten.conv2d.default,
    aten.conv3d.default,
    aten.conv1d.padding,
    aten.conv2d.padding,
    aten.conv3d.padding,
    aten.conv_transpose1d.default,
    aten.conv_transpose2d.input,
    aten.conv_transpose3d.input,
)


@dataclass
class ConvDecision:
    """The partitioner's verdict on one convolution node."""

    node: str
    target: str
    decision: str  # ROUTED / REQUIRED / DECLINED / REFUSED
    delegated: bool
    reason: str
    template: str | None = None
    module: str | None = None
    folded_pad: str | None = None  # name of the constant_pad_nd folded into this conv
    pad_note: str = ""  # why an input pad was not folded
    folded_batch_norm: str | None = None  # name of the batch norm folded into this conv
    bn_note: str = ""  # why the batch norm after it was not folded
    tag: str | None = None


@dataclass
class PartitionReport:
    """What one `partition()` call did: a decision per convolution and the partitions it formed."""

    decisions: list[ConvDecision] = field(default_factory=list)
    partitions: dict[str, list[str]] = field(default_factory=dict)  # tag -> node names

    @property
    def num_convs(self) -> int:
        return len(self.decisions)

    @property
    def num_delegated(self) -> int:
        return sum(d.delegated for d in self.decisions)

    @property
    def left_on_cpu(self) -> list[ConvDecision]:
        return [d for d in self.decisions if not d.delegated]

    def counts(self) -> dict[str, int]:
        """Convolutions per outcome: ROUTED/REQUIRED (delegated), DECLINED/REFUSED, KEPT (routable, not owned)."""
        out: dict[str, int] = {}
        for d in self.decisions:
            key = d.decision if d.delegated or d.decision in ("DECLINED", "REFUSED") else "KEPT"
            out[key] = out.get(key, 0) + 1
        return out

    def summary(self) -> str:
        c = self.counts()
        parts = ", ".join(f"{k.lower()} {v}" for k, v in sorted(c.items()))
        pads = sum(d.folded_pad is not None for d in self.decisions)
        bns = sum(d.folded_batch_norm is not None for d in self.decisions)
        return (
            f"{self.num_delegated}/{self.num_convs} convolutions delegated in {len(self.partitions)} partition(s)"
            f" ({parts}{f', {pads} pads folded' if pads else ''}"
            f"{f', {bns} batch norms folded' if bns else ''})"
        )

    def format(self, verbose: bool = False) -> str:
        lines = [self.summary()]
        for d in self.decisions:
            if d.delegated and not verbose:
                continue
            where = f" [{d.module}]" if d.module else ""
            status = f"-> {d.tag}" if d.delegated else "stays on CPU"
            folded = [n for n in (d.folded_pad, d.folded_batch_norm) if n]
            extra = f" (folds {', '.join(folded)})" if folded else ""
            lines.append(f"  {d.node:<24} {d.decision:<9} {status}{extra}{where}: {d.reason}")
        return "\n".join(lines)


class _Supported(OperatorSupportBase):
    def __init__(self, nodes: set[Node]) -> None:
        self.nodes = nodes

    def is_node_supported(self, submodules: Mapping[str, torch.nn.Module], node: Node) -> bool:
        return node in self.nodes


class CudaTritonPartitioner(Partitioner):
    """Delegates convolutions to ``CudaTritonBackend`` (AOT-compiled Triton kernels on NVIDIA GPUs).

    Args:
        options: a `CudaTritonOptions` (archs, strict planning, TF32, tuning table, external weights tag,
            target device); or give the same fields as keyword arguments.
        compile_specs: raw compile specs instead (decoded with `CudaTritonOptions.from_compile_specs`).
    """

    def __init__(
        self,
        options: CudaTritonOptions | None = None,
        *,
        compile_specs: list[CompileSpec] | None = None,
        **option_fields: Any,
    ) -> None:
        super().__init__()
        if compile_specs is not None:
            if options is not None or option_fields:
                raise ValueError("give either options/option fields or compile_specs, not both")
            options = CudaTritonOptions.from_compile_specs(compile_specs)
        elif options is None:
            options = CudaTritonOptions(**option_fields)
        elif option_fields:
            raise ValueError("give either a CudaTritonOptions or its fields as keyword arguments, not both")
        self.options = options
        self.delegation_spec = DelegationSpec(BACKEND_ID, options.compile_specs())
        self.reports: list[PartitionReport] = []
        self._prefetched: set = set()  # ConvProblems whose kernels were submitted for compilation

    @property
    def last_report(self) -> PartitionReport | None:
        return self.reports[-1] if self.reports else None

    # -- planning -----------------------------------------------------------------------------------------
    def _plan(self, node: Node) -> RoutingPlan:
        return plan(
            node,
            target_device=self.options.target_device or "cuda",
            strict=self.options.strict,
            allow_tf32=self.options.allow_tf32,
        )

    def _verdict(self, node: Node, constants: set[str]) -> tuple[bool, RoutingPlan, str]:
        """(delegate?, the plan, the reason to report)."""
        p = self._plan(node)
        if not p.delegated:
            return False, p, p.reason
        assert p.args is not None
        x = p.args.input
        if x.op == "placeholder" and x.name in constants:
            why = (
                f"its input is a constant of the program ('{x.name}'); the delegate reads its inputs from the "
                "program's tensors, so the convolution stays on the CPU"
            )
            if self.options.strict and p.decision is Decision.REQUIRED:
                raise ConvRoutingError([(node, _with_reason(p, why))])
            return False, p, why
        for what, arg in (("weight", p.args.weight), ("bias", p.args.bias)):
            if arg is None:
                continue
            if arg.op != "placeholder" or arg.name not in constants:
                why = (
                    f"its {what} is computed in the graph (node '{arg.name}'), but the delegate owns only constant "
                    "weights (parameters, buffers or lifted constants)"
                )
                if self.options.strict and p.decision is Decision.REQUIRED:
                    raise ConvRoutingError([(node, _with_reason(p, why))])
                return False, p, why
        return True, p, p.reason

    # -- ExecuTorch hooks ---------------------------------------------------------------------------------
    def transform_for_pre_decomposition(self, exported_program: ExportedProgram) -> ExportedProgram:
        """Fold the inference batch norms after convolutions this partitioner delegates (a new program)."""
        if not self.options.fold_batch_norm:
            return exported_program
        constants = constant_names(exported_program)
        ep, folded = fold_batch_norms_in_program(
            exported_program, lambda conv, _args: self._verdict(conv, constants)[0]
        )
        if folded:
            logger.info("CudaTritonPartitioner: %d batch norms folded before decomposition", len(folded))
        return ep

    def ops_to_not_decompose(
        self, ep: ExportedProgram
    ) -> tuple[list[torch._ops.OpOverload], Callable[[Node], bool] | None]:
        """The convolution overloads to keep, and the check that keeps only nodes this partitioner delegates.

        When every convolution of ``ep`` with a preserved overload will be delegated, the check would answer
        True for each of them, so it is left out (None): ExecuTorch then takes its cheaper path (one
        decomposition pass instead of three, with the same result). Otherwise the check filters node by node.
        """
        constants = constant_names(ep)
        preserved = set(PRESERVED_OVERLOADS)

        def will_delegate(node: Node) -> bool:
            if node.op != "call_function" or aten_overload(node.target) not in preserved:
                return False
            return self._verdict(node, constants)[0]

        problems = []
        all_delegated = True
        for node in ep.graph_module.graph.nodes:
            if not is_conv_node(node):
                continue
            ok, p, _ = self._verdict(node, constants)  # strict planning raises here
            if ok and p.problem is not None:
                problem = p.problem
                if self._folds_batch_norms(p) and batch_norm_follows(node):
                    problem = replace(problem, has_bias=True)  # what the fold will compile
                problems.append(problem)
            if aten_overload(node.target) in preserved and not ok:
                all_delegated = False
        self._prefetch_problems(problems)
        return list(PRESERVED_OVERLOADS), (None if all_delegated else will_delegate)

    def _folds_batch_norms(self, p: RoutingPlan) -> bool:
        return self.options.fold_batch_norm and p.args is not None and not p.args.transposed

    def _prefetch_problems(self, problems: list) -> None:
        """Start compiling kernels in the background (each convolution once per partitioner)."""
        from ..preprocess import kernels

        if not kernels.prefetch_enabled():
            return
        fresh = [p for p in problems if p not in self._prefetched]
        self._prefetched.update(fresh)
        if fresh:
            kernels.prefetch(fresh, self.options)

    def partition(self, exported_program: ExportedProgram) -> PartitionResult:
        ep = exported_program
        gm = ep.graph_module
        constants = constant_names(ep)
        report = PartitionReport()

        delegated: dict[Node, RoutingPlan] = {}
        decisions: dict[Node, ConvDecision] = {}
        for node in gm.graph.nodes:
            if not is_conv_node(node):
                continue
            ok, p, reason = self._verdict(node, constants)
            d = ConvDecision(
                node=node.name,
                target=str(aten_overload(node.target)),
                decision=p.decision.name,
                delegated=ok,
                reason=reason,
                template=p.template,
                module=module_path(node),
                folded_batch_norm=folded_batch_norm_of(node) if ok else None,
            )
            decisions[node] = d
            report.decisions.append(d)
            if ok:
                delegated[node] = p

        # Pads that every user folds join the partition.
        folds: dict[Node, PadFold] = {}
        for node, p in delegated.items():
            assert p.args is not None
            fold, why = pad_fold(node, p.args, self.options.allow_tf32)
            if fold is not None and fold.source.op == "placeholder" and fold.source.name in constants:
                fold, why = None, "the pad's input is a constant of the program"
            if fold is not None:
                folds[node] = fold
            elif why:
                decisions[node].pad_note = why
        pads = {f.pad for f in folds.values() if pad_users_ok(f.pad, folds)}

        # Inference batch norms right after a delegated convolution join its partition.
        bn_folds: dict[Node, BatchNormFold] = {}
        if self.options.fold_batch_norm:
            for node, p in delegated.items():
                assert p.args is not None
                bn_fold, why = batch_norm_fold(node, p.args, constants)
                if bn_fold is not None:
                    bn_folds[node] = bn_fold
                elif why:
                    decisions[node].bn_note = why

        def bn_nodes() -> set[Node]:
            return {n for f in bn_folds.values() for n in (f.bn, f.output)}

        supported = set(delegated) | pads | bn_nodes()
        partitions = self._propose(gm, supported)
        # A folded pad must share its partition with all its users, a folded batch norm (and its getitem) with
        # its convolution; otherwise keep them on the CPU and retry.
        while True:
            where = {n: i for i, part in enumerate(partitions) for n in part}
            split = {pad for pad in pads if any(where.get(u) != where.get(pad) for u in pad.users)}
            split_bn = {
                conv
                for conv, f in bn_folds.items()
                if where.get(f.bn) != where.get(conv) or where.get(f.output) != where.get(conv)
            }
            if not split and not split_bn:
                break
            pads -= split
            for conv in split_bn:
                decisions[conv].bn_note = "the batch norm could not share the convolution's partition"
                del bn_folds[conv]
            supported = set(delegated) | pads | bn_nodes()
            partitions = self._propose(gm, supported)

        for i, part in enumerate(partitions):
            tag = f"cuda_triton_{i}"
            for n in part:
                n.meta["delegation_tag"] = tag
                if n in decisions:
                    decisions[n].tag = tag
            report.partitions[tag] = [n.name for n in part]
        for node, fold in folds.items():
            if fold.pad in pads:
                decisions[node].folded_pad = fold.pad.name
            elif not decisions[node].pad_note:
                decisions[
                    node
                ].pad_note = "its input pad has users outside the delegate, so it runs on the CPU"
        for node, bn_fold in bn_folds.items():
            decisions[node].folded_batch_norm = bn_fold.bn.name
        tag_constant_data(ep)
        self._prefetch(delegated, folds, pads, bn_folds)

        self.reports.append(report)
        self._log(report, {d.node: n for n, d in decisions.items()})
        return PartitionResult(
            tagged_exported_program=ep,
            partition_tags={tag: self.delegation_spec for tag in report.partitions},
        )

    def _prefetch(
        self,
        delegated: dict[Node, RoutingPlan],
        folds: dict[Node, PadFold],
        pads: set[Node],
        bn_folds: dict[Node, BatchNormFold],
    ) -> None:
        problems = []
        for node, p in delegated.items():
            fold = folds.get(node)
            has_bias = p.args is not None and (p.args.bias is not None or node in bn_folds)
            if fold is not None and fold.pad in pads:
                assert p.args is not None
                x, w = tensor_val(fold.source), tensor_val(p.args.weight)
                problems.append(conv_problem(x, w, has_bias, fold.params, self.options.allow_tf32))
            elif p.problem is not None:
                problems.append(replace(p.problem, has_bias=has_bias))
        self._prefetch_problems(problems)

    @staticmethod
    def _propose(gm: torch.fx.GraphModule, supported: set[Node]) -> list[list[Node]]:
        if not supported:
            return []
        proposer = CapabilityBasedPartitioner(gm, _Supported(supported), allows_single_node_partition=True)
        parts = proposer.propose_partitions()
        order = {n: i for i, n in enumerate(gm.graph.nodes)}
        out = [sorted(p.nodes, key=order.__getitem__) for p in parts]
        out.sort(key=lambda nodes: order[nodes[0]])
        return out

    def _log(self, report: PartitionReport, nodes: dict[str, Node]) -> None:
        logger.info("CudaTritonPartitioner: %s", report.summary())
        for d in report.left_on_cpu:
            level = logging.WARNING if d.decision in ("REFUSED", "REQUIRED") else logging.INFO
            logger.log(level, "convolution left on the CPU: %s: %s", describe_node(nodes[d.node]), d.reason)
        for d in report.decisions:
            if d.delegated and d.pad_note:
                logger.info("%s: input pad not folded: %s", d.node, d.pad_note)
            if d.folded_batch_norm:
                logger.info("%s: folds batch norm %s into its weight and bias", d.node, d.folded_batch_norm)
            elif d.delegated and d.bn_note:
                logger.info("%s: batch norm after it not folded: %s", d.node, d.bn_note)


def _with_reason(p: RoutingPlan, reason: str) -> RoutingPlan:
    return replace(p, decision=Decision.REFUSED, reason=reason)


__all__ = [
    "BACKEND_ID",
    "ConvDecision",
    "CudaTritonPartitioner",
    "PRESERVED_OVERLOADS",
    "PartitionReport",
    "is_pad_node",
]
