"""`CudaTritonPartitioner`: which ops of an edge program the CUDA Triton delegate takes.

Usable with both lowering APIs::

    to_edge_transform_and_lower(ep, partitioner=[CudaTritonPartitioner()])
    to_edge(ep).to_backend(CudaTritonPartitioner())

Each op node is asked of its family's partition config (`cuda_triton.partition.config`: convolution,
elementwise, pooling, GEMM, data movement, ...), among the families the preprocess drafts
(`cuda_triton.preprocess.families`). A convolution is taken when the routing planner
(`cuda_triton.conv.routing.plan`, planning for a CUDA target) finds a template for it and its weight and bias are
constants of the program (the delegate owns them; `tag_constant_data` tags them).

* ``ops_to_not_decompose`` keeps the overloads the families ask for (the convolution overloads that carry what
  the core decomposition loses: string padding, the transposed overloads, unbatched forms), with a filter (the
  check_op_support form) that answers True only for nodes this partitioner will really delegate, so a preserved
  op is never left undelegated (lowering would raise). When every such node will be delegated the filter is
  omitted, which selects ExecuTorch's cheaper decomposition path with the same outcome.
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
  Inference batch norms that do not fold are the normalisation family's (a norm op of the delegate).
* Ops computed from constants join when all their users are delegated (the preprocess folds them into
  constants); one with a CPU user stays on the CPU even when its family takes it.
* Connected delegated nodes form one partition (`CapabilityBasedPartitioner`), so intermediates stay on the
  GPU; it also merges independent ones where no cycle results.
* ``strict`` (the default) fails the export with `DeclinedOpsError` when a family declines one of its ops
  (naming each node, its source and why); ``strict=False`` leaves such ops on the CPU. Ops that no family takes
  stay on the CPU either way. `last_report` lists every op's verdict, per family, and why each CPU op stays.
"""

from __future__ import annotations

import logging
import operator
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

import torch
from executorch.exir.backend.compile_spec_schema import CompileSpec
from executorch.exir.backend.partitioner import DelegationSpec, Partitioner, PartitionResult
from executorch.exir.backend.utils import tag_constant_data
from torch.export import ExportedProgram
from torch.fx import Node
from torch.fx.passes.infra.partitioner import CapabilityBasedPartitioner
from torch.fx.passes.operator_support import OperatorSupportBase

from .. import backend  # noqa: F401  (ExecuTorch finds CudaTritonBackend among loaded BackendDetails classes)
from .._passes.batch_norm_fold import BatchNormFold, batch_norm_fold, batch_norm_follows
from .._passes.constant_fold import foldable_nodes
from .._passes.fold_batch_norms_in_program import fold_batch_norms_in_program, folded_batch_norm_of
from .._passes.pad_fold import PadFold, is_pad_node, pad_fold, pad_users_ok
from ..conv.binding import aten_overload, is_conv_node
from ..conv.node_source import describe_node, module_path
from ..conv.routing import RoutingPlan
from ..preprocess.families import DRAFTED_FAMILIES
from ..preprocess.layout_plan import planned_conv_problem
from ..utils.conv import conv_problem
from ..utils.graph import constant_names, tensor_val
from .config import ConfigTable, ConvConfig, OpConfig, PartitionContext, configs_for
from .config.conv import PRESERVED_OVERLOADS
from .options import CudaTritonOptions
from .report import ConvDecision, OpDecision, PartitionReport

logger = logging.getLogger("cuda_triton.partition")

BACKEND_ID = "CudaTritonBackend"  # the BackendDetails subclass name = the runtime's registration name


class DeclinedOpsError(RuntimeError):
    """Strict partitioning met ops that a family of the delegate takes but declined (each named, with why)."""

    def __init__(self, declined: list[tuple[Node, str]]) -> None:
        self.declined = declined
        lines = [f"  {describe_node(n)}: {why}" for n, why in declined]
        super().__init__(
            f"CudaTritonPartitioner (strict): {len(declined)} op(s) the delegate cannot run would stay on the "
            "CPU:\n" + "\n".join(lines) + "\nPass strict=False to leave them on the CPU."
        )


class _Supported(OperatorSupportBase):
    def __init__(self, nodes: set[Node]) -> None:
        self.nodes = nodes

    def is_node_supported(self, submodules: Mapping[str, torch.nn.Module], node: Node) -> bool:
        return node in self.nodes


class CudaTritonPartitioner(Partitioner):
    """Delegates the ops of an edge program to ``CudaTritonBackend`` (AOT-compiled Triton kernels on NVIDIA GPUs).

    Args:
        options: a `CudaTritonOptions` (archs, strict, TF32, tuning table, external weights tag, target device);
            or give the same fields as keyword arguments.
        compile_specs: raw compile specs instead (decoded with `CudaTritonOptions.from_compile_specs`).
        configs: the op families' partition configs to use (default: one per family the preprocess drafts).
    """

    def __init__(
        self,
        options: CudaTritonOptions | None = None,
        *,
        compile_specs: list[CompileSpec] | None = None,
        configs: Sequence[OpConfig] | None = None,
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
        self.table = ConfigTable(configs if configs is not None else configs_for(DRAFTED_FAMILIES))
        conv = self.table.family("conv")
        self.conv_config = conv if isinstance(conv, ConvConfig) else None
        self.reports: list[PartitionReport] = []
        self._prefetched: set = set()  # ConvProblems whose kernels were submitted for compilation

    @property
    def last_report(self) -> PartitionReport | None:
        return self.reports[-1] if self.reports else None

    # -- verdicts -----------------------------------------------------------------------------------------
    def _context(self, ep: ExportedProgram) -> PartitionContext:
        return PartitionContext(ep, frozenset(constant_names(ep)), self.options)

    def _conv_verdict(self, node: Node, ctx: PartitionContext) -> tuple[bool, RoutingPlan, str]:
        """(delegate?, the plan, the reason to report) for a convolution."""
        assert self.conv_config is not None
        verdict, p = self.conv_config.plan(node, ctx)
        return verdict.ok, p, verdict.reason

    def _will_delegate_conv(self, node: Node, ctx: PartitionContext) -> bool:
        return self.conv_config is not None and self._conv_verdict(node, ctx)[0]

    # -- ExecuTorch hooks ---------------------------------------------------------------------------------
    def transform_for_pre_decomposition(self, exported_program: ExportedProgram) -> ExportedProgram:
        """Fold the inference batch norms after convolutions this partitioner delegates (a new program)."""
        if not self.options.fold_batch_norm or self.conv_config is None:
            return exported_program
        ctx = self._context(exported_program)
        ep, folded = fold_batch_norms_in_program(
            exported_program, lambda conv, _args: self._will_delegate_conv(conv, ctx)
        )
        if folded:
            logger.info("CudaTritonPartitioner: %d batch norms folded before decomposition", len(folded))
        return ep

    def ops_to_not_decompose(
        self, ep: ExportedProgram
    ) -> tuple[list[torch._ops.OpOverload], Callable[[Node], bool] | None]:
        """The overloads the families keep, and the check that keeps only nodes this partitioner delegates.

        When every node of ``ep`` with a preserved overload will be delegated, the check would answer True for
        each of them, so it is left out (None): ExecuTorch then takes its cheaper path (one decomposition pass
        instead of three, with the same result). Otherwise the check filters node by node.
        """
        ctx = self._context(ep)
        preserved = set(self.table.preserved)

        def will_delegate(node: Node) -> bool:
            if node.op != "call_function" or aten_overload(node.target) not in preserved:
                return False
            if is_conv_node(node):
                return self._will_delegate_conv(node, ctx)
            config = self.table.config_for(node)
            return config is not None and config.check(node, ctx).ok

        problems = []
        all_delegated = True
        for node in ep.graph_module.graph.nodes:
            if node.op != "call_function":
                continue
            target = aten_overload(node.target)
            if is_conv_node(node) and self.conv_config is not None:
                ok, p, _ = self._conv_verdict(node, ctx)
                if ok and p.problem is not None:
                    problem = p.problem
                    if self._folds_batch_norms(p) and batch_norm_follows(node):
                        problem = replace(problem, has_bias=True)  # what the fold will compile
                    x = node.args[0] if isinstance(node.args[0], Node) else None
                    problems.append(self._planned(problem, node, x, node))
                if target in preserved and not ok:
                    all_delegated = False
            elif target in preserved and not will_delegate(node):
                all_delegated = False
        self._prefetch_problems(problems)
        return list(preserved), (None if all_delegated else will_delegate)

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
        ctx = self._context(ep)
        constants = set(ctx.constants)
        report = PartitionReport()

        delegated: dict[Node, RoutingPlan] = {}
        decisions: dict[Node, ConvDecision] = {}
        op_decisions: dict[Node, OpDecision] = {}
        taken: set[Node] = set()  # non-convolution ops a family takes, with their companions
        declined: list[tuple[Node, str]] = []
        for node in gm.graph.nodes:
            if node.op != "call_function" or node.target is operator.getitem:
                continue
            config = self.table.config_for(node)
            if is_conv_node(node) and self.conv_config is not None:
                ok, p, reason = self._conv_verdict(node, ctx)
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
                family: str | None = "conv"
            elif config is not None:
                verdict = config.check(node, ctx)
                ok, reason, family = verdict.ok, verdict.reason, config.family
                if ok:
                    taken.add(node)
                    taken.update(config.companions(node))
            else:
                ok, family = False, None
                reason = f"no op family of the delegate takes {aten_overload(node.target)}"
            op_decisions[node] = OpDecision(
                node.name, str(aten_overload(node.target)), family, ok, reason, module_path(node)
            )
            if family is not None and not ok:
                declined.append((node, reason))

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

        # Constant computations join when every user is delegated (the preprocess folds them into constants);
        # one with a CPU user stays on the CPU even when its family takes it (a delegate cannot output a constant).
        computed = foldable_nodes(gm.graph, constants)
        for node in reversed(computed):
            d = op_decisions[node]
            if node.users and all(u in taken for u in node.users):
                taken.add(node)
                d.delegated, d.family, d.reason = True, "constant", "computed from constants at export"
            elif node in taken:
                taken.discard(node)
                d.delegated, d.family = False, None
                d.reason = "computed from constants for an op on the CPU, which computes it"

        def bn_nodes() -> set[Node]:
            return {n for f in bn_folds.values() for n in (f.bn, f.output)}

        supported = set(delegated) | taken | pads | bn_nodes()
        partitions = self._propose(gm, supported)
        # A folded pad must share its partition with all its users, a folded batch norm (and its getitem) with
        # its convolution; otherwise keep them on the CPU and retry.
        while True:
            where = {n: i for i, part in enumerate(partitions) for n in part}
            split = {pad for pad in pads - taken if any(where.get(u) != where.get(pad) for u in pad.users)}
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
            supported = set(delegated) | taken | pads | bn_nodes()
            partitions = self._propose(gm, supported)

        folded = pads | bn_nodes()
        for node in folded:
            if node in op_decisions:
                d = op_decisions[node]
                d.delegated, d.family, d.reason = True, "conv", "folded into the convolution next to it"
        # A constant computation its family declines (an int64 cast of a lifted number) is no op the delegate
        # fails to run: it joins as a constant or stays with its CPU users.
        settled = folded | set(computed)
        declined = [(n, why) for n, why in declined if not op_decisions[n].delegated and n not in settled]
        if self.options.strict and declined:
            raise DeclinedOpsError(declined)

        for i, part in enumerate(partitions):
            tag = f"cuda_triton_{i}"
            for n in part:
                n.meta["delegation_tag"] = tag
                if n in decisions:
                    decisions[n].tag = tag
                if n in op_decisions:
                    op_decisions[n].tag = tag
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
        report.ops = list(op_decisions.values())
        tag_constant_data(ep)
        self._prefetch(delegated, folds, pads, bn_folds)

        self.reports.append(report)
        self._log(report, {d.node: n for n, d in op_decisions.items()})
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
            source = node.args[0] if isinstance(node.args[0], Node) else None
            if fold is not None and fold.pad in pads:
                assert p.args is not None
                x, w = tensor_val(fold.source), tensor_val(p.args.weight)
                problem = conv_problem(x, w, has_bias, fold.params, self.options.allow_tf32)
                source = fold.source
            elif p.problem is not None:
                problem = replace(p.problem, has_bias=has_bias)
            else:
                continue
            result = bn_folds[node].output if node in bn_folds else node
            problems.append(self._planned(problem, node, source, result))
        self._prefetch_problems(problems)

    def _planned(self, problem: Any, conv: Node, source: Node | None, result: Node) -> Any:
        """``problem`` as the preprocess's layout plan will draft it (`planned_conv_problem`)."""
        if not self.options.channels_last:
            return problem
        inside = _inside(source, conv)
        return planned_conv_problem(problem, inside, inside or _stays_inside(result, conv))

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


def _inside(x: Node | None, conv: Node) -> bool:
    """Whether ``x`` is computed in ``conv``'s delegate (not one of its inputs); before the partition is tagged,
    whether it is computed at all (every op is expected to be delegated)."""
    if x is None or x.op != "call_function":
        return False
    tag = conv.meta.get("delegation_tag")
    return tag is None or x.meta.get("delegation_tag") == tag


def _stays_inside(x: Node, conv: Node) -> bool:
    """Whether ``x`` is read only inside ``conv``'s delegate (so it is not a delegate output)."""
    return all(_inside(u, conv) and u.op != "output" for u in x.users)


__all__ = [
    "BACKEND_ID",
    "PRESERVED_OVERLOADS",
    "ConvDecision",
    "CudaTritonPartitioner",
    "DeclinedOpsError",
    "OpDecision",
    "PartitionReport",
    "is_pad_node",
]
