"""The routing planner: one decision per convolution node, for every overload of either lowering API.

``plan(node, ...)`` answers, for one convolution node of an exported (ATen or edge dialect) graph, whether the
delegate runs it and with which template. docs/routing.md is the contract; in short:

* **REFUSED** - a gate failed: the call cannot be bound, has symbolic shapes, does not target a CUDA device,
  targets ROCm, records an output layout other than the one the delegate writes, has a dtype the delegate does
  not handle, or no registered template supports it. ``reason`` says which gate and why.
* **DECLINED** - a template supports it but (per its ``worth_routing``) would not beat the platform convolution.
* **ROUTED** - a template supports it and expects to win.
* **REQUIRED** - Inductor's Triton conv templates cannot compile it (`inductor_cannot_compile`), so the delegate is
  its only GPU path; routed whenever a template supports it, whatever ``worth_routing`` says.

A REQUIRED call that a gate refuses fails the plan: ``strict=True`` raises `ConvRoutingError` (naming the node,
its module path and source line, and the reason), ``strict=False`` returns REFUSED with that reason.

The planner is pure (no kernel is compiled or run), deterministic, and fast: the concrete gates and the template
verdicts are cached process-wide per concrete call, so a graph of hundreds of convolutions plans in a fraction
of a second (the remaining cost is `bind_conv`).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.fx import Graph, GraphModule, Node

from . import routing_gates as gates
from .binding import ConvArgs, ConvBindingError, bind_conv, is_conv_node
from .inductor import inductor_cannot_compile
from .node_source import describe_node
from .problem import DTYPE_NAMES, ConvProblem
from .routing_verdicts import Stage, VerdictCache
from .templates import Schedule


class Decision(enum.Enum):
    """What the planner decided for one convolution node."""

    REFUSED = "refused"  # a gate failed; the node stays outside the delegate (or strict planning raises)
    DECLINED = "declined"  # supported, but the platform convolution is expected to be faster
    ROUTED = "routed"  # supported and expected to win: delegated
    REQUIRED = "required"  # Inductor cannot compile it: delegated because there is no other GPU path

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True)
class RoutingPlan:
    """The planner's answer for one convolution node.

    ``args`` is None when binding failed; ``problem`` is None when no concrete `ConvProblem` could be built
    (binding failed, symbolic shapes, a refused device or layout, an unsupported dtype). ``template`` names the
    chosen template (the one `templates.select_candidate` takes without a tuning table,
    `templates.heuristic_template`) for DECLINED/ROUTED/REQUIRED, and None for REFUSED. ``schedules`` are that
    template's candidate schedules, its heuristic choice first. ``required_because`` is `inductor_cannot_compile`'s answer: set
    whenever the call is one Inductor cannot compile, including when it was refused.
    """

    decision: Decision
    reason: str
    node_name: str = ""
    args: ConvArgs | None = None
    problem: ConvProblem | None = None
    template: str | None = None
    schedules: tuple[Schedule, ...] = ()
    required_because: str | None = None
    unsupported: tuple[tuple[str, str], ...] = field(default=())  # (template, why not) for each declining one

    @property
    def delegated(self) -> bool:
        """True when the delegate runs this node (ROUTED or REQUIRED)."""
        return self.decision in (Decision.ROUTED, Decision.REQUIRED)

    @property
    def heuristic_schedule(self) -> Schedule | None:
        return self.schedules[0] if self.schedules else None

    @property
    def failed(self) -> bool:
        """A REQUIRED call that could not be routed (what strict planning raises for)."""
        return self.decision is Decision.REFUSED and self.required_because is not None


class ConvRoutingError(RuntimeError):
    """Strict planning met convolutions that must be delegated (Inductor cannot compile them) but cannot be.

    ``failures`` lists ``(node, plan)`` pairs; the message names each node, the module path and source line it
    came from, and the reason.
    """

    def __init__(self, failures: list[tuple[Node, RoutingPlan]]):
        self.failures = failures
        lines = [f"{describe_node(n)}: {p.reason}" for n, p in failures]
        if len(lines) == 1:
            msg = "convolution cannot be routed to the CUDA Triton delegate, and nothing else can run it on the GPU: "
            msg += lines[0]
        else:
            msg = (
                f"{len(lines)} convolutions cannot be routed to the CUDA Triton delegate, and nothing else can run "
                "them on the GPU:\n  " + "\n  ".join(lines)
            )
        super().__init__(msg)

    @property
    def node(self) -> Node:
        return self.failures[0][0]

    @property
    def plan(self) -> RoutingPlan:
        return self.failures[0][1]


# The concrete gates' outcomes, one process-wide cache for every `plan` call (see `VerdictCache`).
_CACHE = VerdictCache()


def clear_cache() -> None:
    """Forget every cached verdict (needed only after changing a registered template in place)."""
    _CACHE.clear()


# ---- the planner -------------------------------------------------------------------------------------------------
def plan(
    node: Node,
    *,
    target_device: str | bytes | torch.device | None = None,
    rocm: bool | None = None,
    strict: bool = False,
    allow_tf32: bool | None = None,
) -> RoutingPlan:
    """Decide whether the delegate runs convolution ``node`` (docs/routing.md is the contract).

    Keyword arguments:

    * ``target_device``: the device the program will run on - ``"cuda"``, ``"cuda:0"``, ``b"cuda:0"`` (the
      ``target_device`` compile-spec spelling), a ``torch.device``, ``"cpu"``, or ``"rocm"``/``"hip"``. It overrides
      the recorded device, so an export traced with CPU example inputs plans for CUDA with ``target_device="cuda"``.
      ``None`` (default): the device of the input's recorded example value (``node.meta["val"]``).
    * ``rocm``: whether the target is ROCm. ``None`` (default): yes when this torch is a HIP build
      (``torch.version.hip``) or ``target_device`` names hip/rocm; ``False`` plans for NVIDIA even on a ROCm
      build; ``True`` refuses everything as ROCm.
    * ``strict``: raise `ConvRoutingError` for a REQUIRED call that cannot be routed, instead of returning REFUSED.
    * ``allow_tf32``: whether fp32 convolutions may use TF32 (becomes ``ConvProblem.allow_tf32``); ``None``:
      ``torch.backends.cudnn.allow_tf32``.
    """
    target = gates.Target(gates.parse_target_device(target_device), rocm)  # type: ignore[arg-type]
    _CACHE.check_registry()
    result = _plan(node, target, allow_tf32, _CACHE)
    if strict and result.failed:
        raise ConvRoutingError([(node, result)])
    return result


def plan_graph(
    graph: GraphModule | Graph | Any,
    *,
    target_device: str | bytes | torch.device | None = None,
    rocm: bool | None = None,
    strict: bool = False,
    allow_tf32: bool | None = None,
) -> dict[Node, RoutingPlan]:
    """`plan` for every convolution node of ``graph`` (a GraphModule, a Graph or an ExportedProgram), in order.

    Template verdicts are cached per concrete problem, so repeated layers cost one evaluation. With ``strict``,
    every REQUIRED call that cannot be routed is collected and one `ConvRoutingError` names them all.
    """
    if hasattr(graph, "graph_module"):  # ExportedProgram
        graph = graph.graph_module
    g: Graph = graph.graph if isinstance(graph, GraphModule) else graph
    target = gates.Target(gates.parse_target_device(target_device), rocm)  # type: ignore[arg-type]
    _CACHE.check_registry()
    plans: dict[Node, RoutingPlan] = {}
    for node in g.nodes:
        if is_conv_node(node):
            plans[node] = _plan(node, target, allow_tf32, _CACHE)
    if strict:
        failures = [(n, p) for n, p in plans.items() if p.failed]
        if failures:
            raise ConvRoutingError(failures)
    return plans


def _concrete_gates(
    args: ConvArgs,
    x: torch.Tensor,
    w: torch.Tensor,
    b: torch.Tensor | None,
    out: torch.Tensor,
    allow_tf32: bool,
    cache: VerdictCache,
) -> Stage:
    """Gates 4 (recorded output layout) and 5 (dtype, a supporting template) for a call with static shapes."""
    layout_reason = gates.layout_reason(args, x, w, out)
    if layout_reason is not None:
        return Stage(layout_reason, None, None)
    dtypes = {x.dtype, w.dtype} | ({b.dtype} if b is not None else set())
    if len(dtypes) != 1:
        return Stage(
            f"its tensors have different dtypes ({', '.join(sorted(str(d) for d in dtypes))}); the convolution "
            "templates need input, weight and bias of one dtype",
            None,
            None,
        )
    if x.dtype not in DTYPE_NAMES:
        return Stage(
            f"its dtype is {x.dtype}; the convolution templates handle only "
            + ", ".join(str(d) for d in DTYPE_NAMES),
            None,
            None,
        )
    problem = ConvProblem.from_shapes(
        tuple(int(s) for s in x.shape),
        tuple(int(s) for s in x.stride()),
        tuple(int(s) for s in w.shape),
        tuple(int(s) for s in w.stride()),
        b is not None,
        args.params,
        x.dtype,
        allow_tf32,
    )
    verdict = cache.verdict(problem)
    if verdict.error is not None:
        return Stage(verdict.error, problem, verdict)
    if verdict.template is None:
        why = "; ".join(f"'{name}': {reason}" for name, reason in verdict.unsupported) or "none is registered"
        return Stage(f"no registered convolution template supports it ({why})", problem, verdict)
    return Stage(None, problem, verdict)


def _refuse(node: Node, reason: str, args: ConvArgs | None = None, **kw: Any) -> RoutingPlan:
    return RoutingPlan(Decision.REFUSED, reason, node.name, args, **kw)


def _plan(node: Node, target: gates.Target, allow_tf32: bool | None, cache: VerdictCache) -> RoutingPlan:
    try:
        args = bind_conv(node)
    except ConvBindingError as e:
        return _refuse(node, f"its arguments cannot be bound: {e}")
    required = inductor_cannot_compile(args)

    def refuse(reason: str, problem: ConvProblem | None = None, **kw: Any) -> RoutingPlan:
        if required is not None:
            reason = f"it must be routed because {required}, but {reason}"
        return _refuse(node, reason, args, problem=problem, required_because=required, **kw)

    x = args.input.meta["val"]
    w = args.weight.meta["val"]
    b = args.bias.meta["val"] if args.bias is not None else None
    out = node.meta.get("val")

    # Gate 1: symbolic shapes.
    symbolic = [
        f"{what} sizes {gates.fmt_list(t.shape)} strides {gates.fmt_list(t.stride())}"
        for what, t in (("input", x), ("weight", w), ("bias", b), ("output", out))
        if isinstance(t, torch.Tensor) and gates.is_symbolic(t)
    ]
    if symbolic:
        return refuse(
            "its shapes are symbolic ("
            + "; ".join(symbolic)
            + "); the delegate compiles kernels for static shapes"
        )
    if not isinstance(out, torch.Tensor):
        return refuse("the node has no recorded output tensor (meta['val']), so its output layout is unknown")

    # Gate 2: a CUDA target; gate 3: not ROCm.
    device_reason, rocm_device = gates.device_gate(x, target)
    if device_reason is not None:
        return refuse(device_reason)
    rocm_reason = gates.rocm_reason(rocm_device, target.rocm)
    if rocm_reason is not None:
        return refuse(rocm_reason)

    # Gates 4 and 5 depend only on the concrete call: cached per layouts, dtypes and params.
    if allow_tf32 is None:
        allow_tf32 = bool(torch.backends.cudnn.allow_tf32)
    key = (
        args.params,
        tuple(x.shape),
        x.stride(),
        tuple(w.shape),
        w.stride(),
        tuple(out.shape),
        out.stride(),
        x.dtype,
        w.dtype,
        None if b is None else b.dtype,
        allow_tf32,
    )
    stage = cache.stage(key)
    if stage is None:
        stage = cache.store(key, _concrete_gates(args, x, w, b, out, allow_tf32, cache))
    if stage.refusal is not None:
        unsupported = stage.verdict.unsupported if stage.verdict is not None else ()
        return refuse(stage.refusal, stage.problem, unsupported=unsupported)
    problem, verdict = stage.problem, stage.verdict
    assert problem is not None and verdict is not None and verdict.template is not None

    common = dict(
        node_name=node.name,
        args=args,
        problem=problem,
        template=verdict.template,
        schedules=verdict.schedules,
        required_because=required,
        unsupported=verdict.unsupported,
    )
    if required is not None:
        return RoutingPlan(
            Decision.REQUIRED,
            f"{required}, so the delegate is its only GPU path: template '{verdict.template}' runs it",
            **common,  # type: ignore[arg-type]
        )
    if verdict.worth:
        return RoutingPlan(
            Decision.ROUTED,
            f"template '{verdict.template}' supports it and expects to beat the platform convolution",
            **common,  # type: ignore[arg-type]
        )
    return RoutingPlan(
        Decision.DECLINED,
        f"template '{verdict.template}' supports it but does not expect to beat the platform convolution "
        "(cuDNN or Inductor), so it stays outside the delegate",
        **common,  # type: ignore[arg-type]
    )


__all__ = [
    "ConvRoutingError",
    "Decision",
    "RoutingPlan",
    "clear_cache",
    "plan",
    "plan_graph",
]
