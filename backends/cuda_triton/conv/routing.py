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
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.fx import Graph, GraphModule, Node

from .binding import ConvArgs, ConvBindingError, bind_conv, is_conv_node
from .inductor import concrete_int, inductor_cannot_compile
from .layout import out_shape_and_stride
from .node_source import describe_node
from .problem import DTYPE_NAMES, ConvProblem, layout_name
from .templates import ConvTemplate, Schedule, heuristic_template, registered_templates, support_report


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


# ---- gates ------------------------------------------------------------------------------------------------------


def _symbolic(t: torch.Tensor) -> bool:
    return not all(concrete_int(s) for s in t.shape) or not all(concrete_int(s) for s in t.stride())


def _fmt(xs: Iterable[Any]) -> str:
    return "[" + ", ".join(str(x) for x in xs) + "]"


@dataclass(frozen=True)
class _Target:
    """The platform the caller plans for (see `plan`'s ``target_device`` and ``rocm``)."""

    device: torch.device | str | None  # None: each node's input device; "rocm" for a ROCm target
    rocm: bool | None  # None: ROCm when torch is a HIP build or the device names hip/rocm


def _parse_target_device(target_device: str | bytes | torch.device | None) -> torch.device | str | None:
    if target_device is None:
        return None
    if isinstance(target_device, bytes):  # the CompileSpec spelling, b"cuda:0"
        target_device = target_device.decode()
    if isinstance(target_device, str) and target_device.split(":")[0].lower() == "rocm":
        return "rocm"
    return torch.device(target_device)


def _device_gate(x: torch.Tensor, target: _Target) -> tuple[str | None, bool]:
    """(refusal reason or None, whether the stated device is a ROCm device)."""
    if target.device is None:
        dev = x.device
        stated = f"the input is on '{dev}' (its recorded example value)"
        hint = (
            "; an export whose example inputs live on the CPU plans for CUDA with target_device='cuda' "
            "(or CudaTritonPartitioner's target device)"
        )
    else:
        dev = target.device
        stated = f"the target device is '{dev}'"
        hint = ""
    if isinstance(dev, str) or dev.type == "hip":  # "rocm" / "hip": a ROCm target
        return None, True
    if dev.type != "cuda":
        return f"{stated}, not a CUDA device: the delegate runs only on NVIDIA GPUs{hint}", False
    return None, False


def _rocm_reason(is_rocm_device: bool, rocm: bool | None) -> str | None:
    if is_rocm_device:
        return "the target is a ROCm (HIP) device: the delegate ships NVIDIA cubins only"
    if rocm is True:
        return "planning for ROCm (rocm=True): the delegate ships NVIDIA cubins only"
    if rocm is None and getattr(torch.version, "hip", None):
        return (
            f"this torch is a ROCm (HIP {torch.version.hip}) build, so 'cuda' means an AMD GPU; the delegate ships "
            "NVIDIA cubins only (pass rocm=False when exporting on a ROCm machine for an NVIDIA target)"
        )
    return None


def _layout_reason(
    args: ConvArgs, x: torch.Tensor, w: torch.Tensor, out: torch.Tensor, is_float64: bool
) -> str | None:
    sizes, strides = out_shape_and_stride(
        [int(s) for s in x.shape],
        [int(s) for s in x.stride()],
        [int(s) for s in w.shape],
        [int(s) for s in w.stride()],
        list(args.stride),
        list(args.padding_before),
        list(args.padding_after),
        list(args.dilation),
        args.transposed,
        list(args.output_padding),
        args.groups,
        is_float64,
    )
    rec_sizes = [int(s) for s in out.shape]
    rec_strides = [int(s) for s in out.stride()]
    same = rec_sizes == sizes and all(
        size <= 1 or a == b for size, a, b in zip(sizes, rec_strides, strides, strict=True)
    )
    if same:
        return None

    def name(sz: list[int], st: list[int]) -> str:
        if len(sz) == args.spatial_dims + 1:  # unbatched
            sz, st = [1, *sz], [sz[0] * st[0], *st]
        return layout_name(tuple(sz), tuple(st))

    return (
        f"the node records an output of sizes {_fmt(rec_sizes)} strides {_fmt(rec_strides)} "
        f"({name(rec_sizes, rec_strides)}), but the delegate writes the layout ATen's CUDA convolution returns, "
        f"sizes {_fmt(sizes)} strides {_fmt(strides)} ({name(sizes, strides)}), and ExecuTorch would read it "
        "with the recorded layout"
    )


# ---- template choice (cached per problem) ----------------------------------------------------------------------
@dataclass(frozen=True)
class _Verdict:
    template: str | None
    worth: bool
    schedules: tuple[Schedule, ...]
    unsupported: tuple[tuple[str, str], ...]
    error: str | None = None


def _evaluate(problem: ConvProblem) -> _Verdict:
    try:
        report = [(t, v) for t, v in support_report(problem)]
    except Exception:  # a template raised: judge them one by one so one bug does not hide the others
        report = []
        for t in registered_templates():
            try:
                report.append((t, t.supports(problem)))
            except Exception as e:
                report.append((t, _No(f"supports() raised {type(e).__name__}: {e}")))
    unsupported = tuple((t.name, v.reason) for t, v in report if not v)
    supporting = [t for t, v in report if v]
    try:  # the template the op runs without a table entry: a claiming one first (`heuristic_template`)
        chosen = heuristic_template(supporting, problem)
    except Exception as e:
        return _Verdict(None, False, (), unsupported, f"choosing a template failed while planning: {e!r}")
    if chosen is None:
        return _Verdict(None, False, (), unsupported)
    try:
        heuristic = chosen.heuristic_schedule(problem)
        rest = [s for s in chosen.schedules(problem) if s != heuristic]
        worth = bool(chosen.worth_routing(problem))
    except Exception as e:
        return _Verdict(
            chosen.name, False, (), unsupported, f"template '{chosen.name}' failed while planning: {e!r}"
        )
    return _Verdict(chosen.name, worth, (heuristic, *rest), unsupported)


@dataclass(frozen=True)
class _No:
    reason: str

    def __bool__(self) -> bool:
        return False


@dataclass(frozen=True)
class _Stage:
    """Outcome of the layout, dtype and template gates for one concrete call (what `_Cache` stores)."""

    refusal: str | None
    problem: ConvProblem | None
    verdict: _Verdict | None


class _Cache:
    """Gate outcomes per concrete call (layouts, dtypes, params), valid for one template registry.

    Templates are stateless and `ConvProblem` holds everything their verdicts depend on, so one process-wide
    cache serves every `plan` call (the partitioner plans node by node). It is dropped when the registry
    changes (tests swap it) and when it grows past ``limit`` entries; `clear_cache` drops it by hand.
    """

    def __init__(self, limit: int = 4096) -> None:
        self.limit = limit
        self.registry: tuple[ConvTemplate, ...] = ()
        self.stages: dict[tuple, _Stage] = {}
        self.verdicts: dict[ConvProblem, _Verdict] = {}

    def check_registry(self) -> None:
        registry = tuple(registered_templates())
        if len(registry) != len(self.registry) or any(
            a is not b for a, b in zip(registry, self.registry, strict=True)
        ):
            self.registry = registry
            self.clear()

    def clear(self) -> None:
        self.stages = {}
        self.verdicts = {}

    def stage(self, key: tuple) -> _Stage | None:
        return self.stages.get(key)

    def store(self, key: tuple, stage: _Stage) -> _Stage:
        if len(self.stages) >= self.limit:
            self.clear()
        self.stages[key] = stage
        return stage

    def verdict(self, problem: ConvProblem) -> _Verdict:
        hit = self.verdicts.get(problem)
        if hit is None:
            hit = self.verdicts[problem] = _evaluate(problem)
        return hit


_CACHE = _Cache()


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
    target = _Target(_parse_target_device(target_device), rocm)  # type: ignore[arg-type]
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
    target = _Target(_parse_target_device(target_device), rocm)  # type: ignore[arg-type]
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
    cache: _Cache,
) -> _Stage:
    """Gates 4 (recorded output layout) and 5 (dtype, a supporting template) for a call with static shapes."""
    layout_reason = _layout_reason(args, x, w, out, x.dtype == torch.float64)
    if layout_reason is not None:
        return _Stage(layout_reason, None, None)
    dtypes = {x.dtype, w.dtype} | ({b.dtype} if b is not None else set())
    if len(dtypes) != 1:
        return _Stage(
            f"its tensors have different dtypes ({', '.join(sorted(str(d) for d in dtypes))}); the convolution "
            "templates need input, weight and bias of one dtype",
            None,
            None,
        )
    if x.dtype not in DTYPE_NAMES:
        return _Stage(
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
        return _Stage(verdict.error, problem, verdict)
    if verdict.template is None:
        why = "; ".join(f"'{name}': {reason}" for name, reason in verdict.unsupported) or "none is registered"
        return _Stage(f"no registered convolution template supports it ({why})", problem, verdict)
    return _Stage(None, problem, verdict)


def _refuse(node: Node, reason: str, args: ConvArgs | None = None, **kw: Any) -> RoutingPlan:
    return RoutingPlan(Decision.REFUSED, reason, node.name, args, **kw)


def _plan(node: Node, target: _Target, allow_tf32: bool | None, cache: _Cache) -> RoutingPlan:
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
        f"{what} sizes {_fmt(t.shape)} strides {_fmt(t.stride())}"
        for what, t in (("input", x), ("weight", w), ("bias", b), ("output", out))
        if isinstance(t, torch.Tensor) and _symbolic(t)
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
    device_reason, rocm_device = _device_gate(x, target)
    if device_reason is not None:
        return refuse(device_reason)
    rocm_reason = _rocm_reason(rocm_device, target.rocm)
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
