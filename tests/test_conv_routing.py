"""The routing planner (`cuda_triton.conv.routing`): every gate, every decision and the failure contract.

Graphs come from both lowering APIs: plain ``to_edge`` (every conv is ``aten.convolution.default``) and
``to_edge_transform_and_lower`` with a partitioner that preserves the conv overloads (the graph is taken at the
moment the partitioner sees it). The real template registry decides the real-graph cases; a small fake template
covers the decisions the real ones never produce (DECLINED, an unsupported non-REQUIRED call).
"""

from __future__ import annotations

import os

os.environ.setdefault("TRITON_INTERPRET", "1")  # before any template module (triton kernels) is imported

import time

import pytest
import torch
from cuda_triton.conv import templates
from cuda_triton.conv.binding import aten_overload, is_conv_node
from cuda_triton.conv.inductor import INDUCTOR_TORCH_VERSION, inductor_cannot_compile
from cuda_triton.conv.params import ConvParams
from cuda_triton.conv.problem import ConvProblem
from cuda_triton.conv.routing import (
    ConvRoutingError,
    Decision,
    RoutingPlan,
    plan,
    plan_graph,
)
from cuda_triton.conv.templates.base import ConvTemplate
from cuda_triton.kernel.launch import Schedule, Support
from executorch.exir import to_edge, to_edge_transform_and_lower
from executorch.exir.backend.partitioner import Partitioner, PartitionResult
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.export import Dim

aten = torch.ops.aten
CUDA = {"target_device": "cuda"}

PRESERVED = [
    aten.conv1d.default,
    aten.conv2d.default,
    aten.conv3d.default,
    aten.conv1d.padding,
    aten.conv2d.padding,
    aten.conv3d.padding,
    aten.conv_transpose1d.default,
    aten.conv_transpose2d.input,
    aten.conv_transpose3d.input,
]


# ---- graphs from both lowering APIs -------------------------------------------------------------------------------
class _Captured(Exception):
    def __init__(self, ep):
        super().__init__("graph captured")
        self.ep = ep


class _PreservingPartitioner(Partitioner):
    """Keeps every conv overload out of the decomposition and hands back the graph it is asked to partition.

    Preserved non-core ops must be delegated or lowering raises, so instead of tagging nothing and letting the
    lowering fail, ``partition`` stops it with the exact graph a real partitioner sees.
    """

    def __init__(self) -> None:
        super().__init__()
        self.delegation_spec = None

    def ops_to_not_decompose(self, ep):
        return PRESERVED, None

    def partition(self, exported_program) -> PartitionResult:
        raise _Captured(exported_program)


def exported(model: torch.nn.Module, *inputs: torch.Tensor, dynamic_shapes=None):
    return torch.export.export(model.eval(), inputs, dynamic_shapes=dynamic_shapes)


def edge_graph(model: torch.nn.Module, *inputs: torch.Tensor, dynamic_shapes=None):
    """Plain ``to_edge``: the core decomposition, every conv is ``aten.convolution.default``."""
    return to_edge(exported(model, *inputs, dynamic_shapes=dynamic_shapes)).exported_program()


def preserved_graph(model: torch.nn.Module, *inputs: torch.Tensor, dynamic_shapes=None):
    """``to_edge_transform_and_lower`` with the conv overloads preserved, as the partitioner receives it."""
    try:
        to_edge_transform_and_lower(
            exported(model, *inputs, dynamic_shapes=dynamic_shapes), partitioner=[_PreservingPartitioner()]
        )
    except _Captured as c:
        return c.ep
    raise AssertionError("the partitioner was never asked to partition")


def conv_nodes(ep) -> list[torch.fx.Node]:
    return [n for n in ep.graph_module.graph.nodes if is_conv_node(n)]


def plans_of(ep, **kw) -> list[RoutingPlan]:
    return list(plan_graph(ep, **kw).values())


def overloads(ep) -> list:
    return [aten_overload(n.target) for n in conv_nodes(ep)]


# ---- models --------------------------------------------------------------------------------------------------------
class Mixed(torch.nn.Module):
    """One conv per decision the real templates make: ROUTED and REQUIRED (dilated, transposed, 1-D)."""

    def __init__(self) -> None:
        super().__init__()
        self.plain = torch.nn.Conv2d(8, 16, 3, padding=1)  # ROUTED
        self.dilated = torch.nn.Conv2d(16, 16, 3, padding="same", dilation=2)  # REQUIRED (conv2d.padding)
        self.up = torch.nn.ConvTranspose2d(16, 8, 4, stride=2, padding=1)  # REQUIRED (conv_transpose2d.input)
        self.seq = torch.nn.Conv1d(8, 8, 3, padding=1)  # REQUIRED (1-D, not depthwise)
        self.seq_dw = torch.nn.Conv1d(8, 8, 5, padding=2, groups=8)  # ROUTED (Inductor has depthwise 1-D)
        self.seq_up = torch.nn.ConvTranspose1d(8, 4, 3, stride=2)  # REQUIRED (conv_transpose1d.default)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.up(self.dilated(self.plain(x)))  # (N, 8, 16, 16)
        s = y.flatten(2)  # (N, 8, 256)
        return self.seq_up(self.seq_dw(self.seq(s)))


MIXED_EXPECTED = [
    ("plain", Decision.ROUTED, None),
    ("dilated", Decision.REQUIRED, "dilat"),
    ("up", Decision.REQUIRED, "transposed"),
    ("seq", Decision.REQUIRED, "1-D"),
    ("seq_dw", Decision.ROUTED, None),
    ("seq_up", Decision.REQUIRED, "transposed"),
]


def mixed_input() -> torch.Tensor:
    return torch.randn(2, 8, 8, 8)


class Single(torch.nn.Module):
    def __init__(self, conv: torch.nn.Module) -> None:
        super().__init__()
        self.conv = conv

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


def module_of(node: torch.fx.Node) -> str:
    return list(node.meta["nn_module_stack"].values())[-1][0].split(".")[-1]


# ---- a fake template for the decisions the real ones never make -------------------------------------------------
class FakeTemplate(ConvTemplate):
    """Supports everything but grouped convs; worth routing only for kernels larger than 1."""

    def __init__(self, name: str = "fake", worth: bool | None = None) -> None:
        self.name = name
        self.worth = worth

    def supports(self, problem: ConvProblem) -> Support:
        if problem.groups > 1:
            return Support.no("grouped convolutions are not implemented")
        return Support.yes()

    def worth_routing(self, problem: ConvProblem) -> bool:
        return self.worth if self.worth is not None else max(problem.kernel) > 1

    def schedules(self, problem: ConvProblem) -> list[Schedule]:
        return [Schedule.make(BLOCK=32), Schedule.make(BLOCK=64), Schedule.make(BLOCK=128)]

    def heuristic_schedule(self, problem: ConvProblem) -> Schedule:
        return Schedule.make(BLOCK=64)

    def launches(self, problem, schedule):  # pragma: no cover - the planner never launches
        raise AssertionError("the planner must not build launches")


@pytest.fixture
def fake_registry(monkeypatch):
    fake = FakeTemplate()
    monkeypatch.setattr(templates, "_registry", [fake])
    return fake


@pytest.fixture(scope="module")
def mixed_graphs():
    return {
        "to_edge": edge_graph(Mixed(), mixed_input()),
        "preserved": preserved_graph(Mixed(), mixed_input()),
    }


# ---- both lowering APIs, real templates ------------------------------------------------------------------------
def test_real_registry_is_present():
    names = [t.name for t in templates.registered_templates()]
    assert names, "no convolution template is registered"
    for expected in ("implicit_gemm", "transposed"):
        assert expected in names


@pytest.mark.parametrize("api", ["to_edge", "preserved"])
def test_decisions_on_both_lowering_apis(mixed_graphs, api):
    ep = mixed_graphs[api]
    ops = overloads(ep)
    if api == "to_edge":
        assert set(ops) == {aten.convolution.default}
    else:
        assert {
            aten.conv2d.default,
            aten.conv2d.padding,
            aten.conv_transpose2d.input,
            aten.conv1d.default,
            aten.conv_transpose1d.default,
        } <= set(ops)
    plans = plan_graph(ep, **CUDA)
    assert len(plans) == len(MIXED_EXPECTED)
    for (node, p), (name, decision, why) in zip(plans.items(), MIXED_EXPECTED, strict=True):
        assert module_of(node) == name
        assert p.decision is decision, (name, p.reason)
        assert p.delegated
        assert p.node_name == node.name
        assert p.args is not None and p.problem is not None
        assert p.template is not None and p.template in [t.name for t in templates.registered_templates()]
        t = templates.get_template(p.template)
        assert t.supports(p.problem)
        assert p.schedules and p.schedules[0] == t.heuristic_schedule(p.problem)
        assert set(p.schedules) == set(t.schedules(p.problem)) | {p.schedules[0]}
        assert p.template in p.reason
        if why is None:
            assert p.required_because is None
        else:
            assert why in p.required_because and why in p.reason
            assert INDUCTOR_TORCH_VERSION in p.reason


def test_both_apis_plan_the_same_problems(mixed_graphs):
    a = plans_of(mixed_graphs["to_edge"], **CUDA)
    b = plans_of(mixed_graphs["preserved"], **CUDA)
    for pa, pb in zip(a, b, strict=True):
        assert (pa.decision, pa.template, pa.schedules) == (pb.decision, pb.template, pb.schedules)
        assert pa.problem == pb.problem


def test_transposed_and_one_d_stay_required_with_string_padding_and_unbatched_input():
    # conv1d.padding 'same' with an even kernel (asymmetric), on an unbatched input (legal for conv1d).
    model = Single(torch.nn.Conv1d(6, 6, 4, padding="same"))
    ep = preserved_graph(model, torch.randn(6, 20))
    assert overloads(ep) == [aten.conv1d.padding]
    (p,) = plans_of(ep, **CUDA)
    assert p.decision is Decision.REQUIRED, p.reason
    assert p.args.unbatched and p.args.padding_before != p.args.padding_after
    assert p.problem.batch == 1


# ---- gate: symbolic shapes -------------------------------------------------------------------------------------
@pytest.mark.parametrize("api", ["to_edge", "preserved", "export"])
def test_symbolic_shapes_are_refused(api):
    batch = Dim("batch", min=2, max=64)
    make = {"to_edge": edge_graph, "preserved": preserved_graph, "export": exported}[api]
    ep = make(Mixed(), mixed_input(), dynamic_shapes={"x": {0: batch}})
    plans = plans_of(ep, **CUDA)
    assert len(plans) == len(MIXED_EXPECTED)
    for p, (_, _, why) in zip(plans, MIXED_EXPECTED, strict=True):
        assert p.decision is Decision.REFUSED
        assert "symbolic" in p.reason and "static shapes" in p.reason
        assert p.args is not None and p.problem is None and p.template is None
        # REQUIRED-ness survives the refusal, so strict planning can fail on it.
        assert (p.required_because is not None) == (why is not None)
    with pytest.raises(ConvRoutingError) as e:
        plan_graph(ep, strict=True, **CUDA)
    assert len(e.value.failures) == sum(why is not None for _, _, why in MIXED_EXPECTED)


def test_symbolic_spatial_size_is_refused():
    ep = edge_graph(
        Single(torch.nn.Conv2d(3, 4, 3)),
        torch.randn(1, 3, 16, 16),
        dynamic_shapes={"x": {2: Dim("h", min=4, max=64)}},
    )
    (p,) = plans_of(ep, **CUDA)
    assert p.decision is Decision.REFUSED and "symbolic" in p.reason and "input sizes" in p.reason


# ---- gate: CUDA target -------------------------------------------------------------------------------------------
def test_cpu_example_inputs_are_refused_unless_the_target_is_stated():
    ep = edge_graph(Single(torch.nn.Conv2d(4, 8, 3)), torch.randn(1, 4, 10, 10))
    (p,) = plans_of(ep)  # default: the input's recorded device, here the CPU
    assert p.decision is Decision.REFUSED
    assert "'cpu'" in p.reason and "target_device='cuda'" in p.reason
    for target in ("cuda", "cuda:0", b"cuda:0", torch.device("cuda", 1)):
        (p,) = plans_of(ep, target_device=target)
        assert p.decision is Decision.ROUTED, (target, p.reason)
    for target in ("cpu", torch.device("meta")):
        (p,) = plans_of(ep, target_device=target)
        assert p.decision is Decision.REFUSED and "not a CUDA device" in p.reason


def test_recorded_cuda_device_routes_without_a_stated_target():
    ep = edge_graph(Single(torch.nn.Conv2d(4, 8, 3)), torch.randn(1, 4, 10, 10))
    (node,) = conv_nodes(ep)
    x = node.args[0]
    val = x.meta["val"]
    with FakeTensorMode(allow_non_fake_inputs=True):
        x.meta["val"] = torch.empty_strided(val.shape, val.stride(), dtype=val.dtype, device="cuda")
    assert plan(node).decision is Decision.ROUTED
    assert plan(node, target_device="cpu").decision is Decision.REFUSED  # the stated target wins


# ---- gate: ROCm ---------------------------------------------------------------------------------------------------
def test_rocm_is_refused(monkeypatch):
    ep = edge_graph(Single(torch.nn.Conv2d(4, 8, 3, dilation=2)), torch.randn(1, 4, 10, 10))
    (node,) = conv_nodes(ep)
    for target in ("rocm", "hip", "hip:0"):
        p = plan(node, target_device=target)
        assert p.decision is Decision.REFUSED and "ROCm" in p.reason
    p = plan(node, rocm=True, **CUDA)
    assert p.decision is Decision.REFUSED and "ROCm" in p.reason

    monkeypatch.setattr(torch.version, "hip", "6.2.41133")
    p = plan(node, **CUDA)
    assert p.decision is Decision.REFUSED and "ROCm" in p.reason and "6.2" in p.reason
    with pytest.raises(ConvRoutingError, match="ROCm"):  # dilated: REQUIRED, so strict planning fails
        plan(node, strict=True, **CUDA)
    # Exporting on a ROCm machine for an NVIDIA target.
    assert plan(node, rocm=False, **CUDA).decision is Decision.REQUIRED


# ---- gate: recorded output layout ---------------------------------------------------------------------------------
def test_plain_contiguous_and_channels_last_2d_models_pass_the_layout_gate():
    model = Single(torch.nn.Conv2d(8, 16, 3))
    for x in (torch.randn(2, 8, 12, 12), torch.randn(2, 8, 12, 12).to(memory_format=torch.channels_last)):
        for make in (edge_graph, preserved_graph):
            (p,) = plans_of(make(model, x), **CUDA)
            assert p.decision is Decision.ROUTED, p.reason
    # A channels-last weight: the CPU export records channels-last output, as the CUDA rule does.
    cl = Single(torch.nn.Conv2d(8, 16, 3).to(memory_format=torch.channels_last))
    (p,) = plans_of(edge_graph(cl, torch.randn(2, 8, 12, 12)), **CUDA)
    assert p.decision is Decision.ROUTED, p.reason
    assert p.problem.output_layout == "channels_last"


def test_recorded_layout_that_differs_from_the_cuda_rule_is_refused():
    # A channels_last_3d input: the CPU export records a contiguous output, ATen's CUDA conv a channels-last one.
    x = torch.randn(1, 4, 6, 6, 6).to(memory_format=torch.channels_last_3d)
    for make in (edge_graph, preserved_graph):
        (p,) = plans_of(make(Single(torch.nn.Conv3d(4, 8, 3)), x), **CUDA)
        assert p.decision is Decision.REFUSED
        assert "records an output" in p.reason
        assert "strides [512, 64, 16, 4, 1] (contiguous)" in p.reason
        assert "strides [512, 1, 128, 32, 8] (channels_last)" in p.reason


def test_layout_gate_compares_strides_only_where_size_exceeds_one():
    ep = edge_graph(Single(torch.nn.Conv2d(8, 16, 3)), torch.randn(2, 8, 12, 12))
    (node,) = conv_nodes(ep)
    val = node.meta["val"]
    with FakeTensorMode(allow_non_fake_inputs=True):
        node.meta["val"] = val.to(memory_format=torch.channels_last)
    p = plan(node, **CUDA)
    assert p.decision is Decision.REFUSED and "(channels_last)" in p.reason and "(contiguous)" in p.reason

    # 1x1 output: strides of size-1 dims do not count.
    ep = edge_graph(Single(torch.nn.Conv2d(8, 16, 3)), torch.randn(1, 8, 3, 3))
    (node,) = conv_nodes(ep)
    val = node.meta["val"]
    with FakeTensorMode(allow_non_fake_inputs=True):
        node.meta["val"] = torch.empty_strided(val.shape, (16, 1, 999, 7), dtype=val.dtype)
    assert plan(node, **CUDA).decision is Decision.ROUTED


# ---- gate: no template supports it ---------------------------------------------------------------------------------
def test_float64_is_required_but_unsupported():
    ep = edge_graph(Single(torch.nn.Conv2d(4, 8, 3).double()), torch.randn(1, 4, 10, 10, dtype=torch.float64))
    (node,) = conv_nodes(ep)
    p = plan(node, **CUDA)
    assert p.decision is Decision.REFUSED and p.failed
    assert "float64" in p.required_because
    assert "no registered convolution template supports it" in p.reason
    for t in templates.registered_templates():  # each template's reason is listed
        assert f"'{t.name}':" in p.reason
    assert [name for name, _ in p.unsupported] == [t.name for t in templates.registered_templates()]
    with pytest.raises(ConvRoutingError) as e:
        plan(node, strict=True, **CUDA)
    assert e.value.plan.reason == p.reason


def test_unsupported_call_that_is_not_required_is_refused_without_raising(fake_registry):
    ep = edge_graph(Single(torch.nn.Conv2d(8, 8, 3, groups=2)), torch.randn(1, 8, 10, 10))
    (p,) = plans_of(ep, strict=True, **CUDA)  # not REQUIRED: no error even when strict
    assert p.decision is Decision.REFUSED and not p.failed
    assert "'fake': grouped convolutions are not implemented" in p.reason
    assert p.problem is not None and p.template is None and p.schedules == ()


def test_a_template_that_raises_does_not_crash_planning(monkeypatch):
    class Broken(FakeTemplate):
        def supports(self, problem):
            raise RuntimeError("boom")

    monkeypatch.setattr(templates, "_registry", [Broken("broken"), FakeTemplate()])
    (p,) = plans_of(edge_graph(Single(torch.nn.Conv2d(4, 8, 3)), torch.randn(1, 4, 8, 8)), **CUDA)
    assert p.decision is Decision.ROUTED and p.template == "fake"
    assert p.unsupported[0][0] == "broken" and "boom" in p.unsupported[0][1]


# ---- decisions from worth_routing ----------------------------------------------------------------------------------
def test_declined_and_routed_follow_worth_routing(fake_registry):
    class TwoConvs(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.a = torch.nn.Conv2d(4, 8, 3)
            self.b = torch.nn.Conv2d(8, 8, 1)

        def forward(self, x):
            return self.b(self.a(x))

    a, b = plans_of(edge_graph(TwoConvs(), torch.randn(1, 4, 8, 8)), **CUDA)
    assert a.decision is Decision.ROUTED and a.delegated
    assert b.decision is Decision.DECLINED and not b.delegated
    for p in (a, b):
        assert p.template == "fake"
        assert p.schedules[0] == Schedule.make(BLOCK=64) and len(p.schedules) == 3
    assert "does not expect to beat" in b.reason


def test_required_ignores_worth_routing(monkeypatch):
    monkeypatch.setattr(templates, "_registry", [FakeTemplate(worth=False)])
    ep = preserved_graph(Single(torch.nn.Conv2d(4, 8, 3, dilation=3)), torch.randn(1, 4, 12, 12))
    (p,) = plans_of(ep, **CUDA)
    assert p.decision is Decision.REQUIRED and p.delegated and p.template == "fake"


# ---- binding errors --------------------------------------------------------------------------------------------------
def test_binding_errors_become_refusals():
    ep = edge_graph(Single(torch.nn.Conv2d(4, 8, 3)), torch.randn(1, 4, 8, 8))
    (node,) = conv_nodes(ep)
    args = list(node.args)
    args[-1] = 3  # groups = 3 does not divide 4 input channels
    node.args = tuple(args)
    p = plan(node, strict=True, **CUDA)  # unbindable calls are refused, never raised
    assert p.decision is Decision.REFUSED and p.args is None and p.problem is None
    assert "cannot be bound" in p.reason and "groups" in p.reason

    relu = next(n for n in ep.graph_module.graph.nodes if n.op == "placeholder")
    assert plan(relu, **CUDA).decision is Decision.REFUSED


# ---- the failure contract ---------------------------------------------------------------------------------------------
class Deep(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = torch.nn.Sequential(torch.nn.Conv1d(4, 4, 3, dilation=2), torch.nn.ReLU())
        self.head = torch.nn.Conv1d(4, 4, 1)

    def forward(self, x):
        return self.head(self.body(x))  # SOURCE-LINE-MARKER


def test_strict_failure_names_node_module_and_source_line():
    for make in (edge_graph, preserved_graph):
        ep = make(Deep(), torch.randn(1, 4, 16))
        # Non-strict: REFUSED, with the REQUIRED reason and the gate's reason.
        plans = plans_of(ep)
        assert [p.decision for p in plans] == [Decision.REFUSED, Decision.REFUSED]
        assert all(p.failed for p in plans)
        assert plans[0].reason.startswith("it must be routed because it is dilated")
        assert "not a CUDA device" in plans[0].reason
        # Strict: one error naming every failing node.
        with pytest.raises(ConvRoutingError) as e:
            plan_graph(ep, strict=True)
        msg = str(e.value)
        nodes = conv_nodes(ep)
        assert len(e.value.failures) == 2
        for n in nodes:
            assert f"node '{n.name}'" in msg
        assert "'body.0' (torch.nn.modules.conv.Conv1d)" in msg
        assert "'head' (torch.nn.modules.conv.Conv1d)" in msg
        assert "test_conv_routing.py:" in msg and "SOURCE-LINE-MARKER" in msg
        assert "it must be routed because it is dilated" in msg
        # plan() raises for one node, with the same reason.
        with pytest.raises(ConvRoutingError) as one:
            plan(nodes[0], strict=True)
        assert one.value.node is nodes[0] and one.value.plan.reason == plans[0].reason


def test_strict_planning_does_not_raise_for_routable_or_optional_calls(fake_registry):
    ep = edge_graph(Mixed(), mixed_input())
    plans = plans_of(ep, strict=True, **CUDA)  # the fake template supports every ungrouped conv
    assert [p.decision for p in plans][:4] == [
        Decision.ROUTED,
        Decision.REQUIRED,
        Decision.REQUIRED,
        Decision.REQUIRED,
    ]
    # The depthwise 1-D conv is grouped: unsupported by the fake template, but not REQUIRED.
    assert plans[4].decision is Decision.REFUSED and not plans[4].failed


# ---- the REQUIRED predicate ----------------------------------------------------------------------------------------
def _problem(
    x, w, *, stride=None, dilation=None, groups=1, transposed=False, output_padding=None, dtype=torch.float32
):
    n = len(w) - 2
    params = ConvParams(
        tuple(stride or (1,) * n),
        (0,) * n,
        (0,) * n,
        tuple(dilation or (1,) * n),
        transposed,
        tuple(output_padding or (0,) * n),
        groups,
    )
    xs = torch.empty(x).stride()
    ws = torch.empty(w).stride()
    return ConvProblem.from_shapes(x, xs, w, ws, False, params, dtype)


@pytest.mark.parametrize(
    "problem, why",
    [
        (_problem((1, 8, 16, 16), (16, 8, 3, 3)), None),
        (_problem((1, 8, 16, 16), (16, 4, 3, 3), groups=2, stride=(2, 2)), None),
        (_problem((1, 8, 16, 16), (8, 1, 3, 3), groups=8), None),
        (_problem((1, 8, 6, 6, 6), (16, 8, 3, 3, 3)), None),
        (_problem((1, 8, 16, 16), (16, 8, 3, 3), dtype=torch.float16), None),
        (_problem((1, 8, 16), (8, 1, 3), groups=8), None),  # depthwise 1-D, multiplier 1
        (_problem((1, 8, 16), (16, 1, 3), groups=8), "1-D"),  # depthwise 1-D, multiplier 2
        (_problem((1, 8, 16), (16, 8, 3)), "1-D"),
        (_problem((1, 8, 16), (16, 8, 1)), "1-D"),
        (_problem((1, 8, 16, 16), (16, 8, 3, 3), dilation=(1, 2)), "dilated"),
        (_problem((1, 8, 16, 16), (8, 1, 3, 3), groups=8, dilation=(2, 2)), "dilated"),
        (_problem((1, 8, 16), (8, 1, 3), groups=8, dilation=(2,)), "dilated"),
        (_problem((1, 8, 16, 16), (8, 4, 3, 3), transposed=True), "transposed"),
        (_problem((1, 8, 6, 6, 6), (8, 4, 3, 3, 3), transposed=True, stride=(2, 2, 2)), "transposed"),
        (_problem((1, 8, 16, 16), (16, 8, 3, 3), dtype=torch.float64), "float64"),
        (_problem((1, 8, 16, 16), (16, 8, 3, 3), stride=(2, 2), output_padding=(1, 1)), "output_padding"),
    ],
)
def test_inductor_cannot_compile(problem, why):
    got = inductor_cannot_compile(problem)
    if why is None:
        assert got is None
    else:
        assert why in got and f"torch {INDUCTOR_TORCH_VERSION}" in got


def test_predicate_agrees_on_args_and_problems(mixed_graphs):
    for node, p in plan_graph(mixed_graphs["preserved"], **CUDA).items():
        assert inductor_cannot_compile(p.args) == inductor_cannot_compile(p.problem) == p.required_because, (
            node
        )


# ---- a large graph ------------------------------------------------------------------------------------------------------
class Tower(torch.nn.Module):
    def __init__(self, blocks: int) -> None:
        super().__init__()
        self.convs = torch.nn.ModuleList()
        for _ in range(blocks):
            self.convs.append(torch.nn.Conv2d(8, 8, 3, padding=1))
            self.convs.append(torch.nn.Conv2d(8, 8, 3, padding=2, dilation=2))
            self.convs.append(torch.nn.Conv2d(8, 8, 1))

    def forward(self, x):
        for c in self.convs:
            x = c(x)
        return x


def test_hundreds_of_convs_plan_in_well_under_a_second():
    ep = exported(Tower(100), torch.randn(1, 8, 8, 8))
    assert len(conv_nodes(ep)) == 300
    templates.registered_templates()  # template modules are imported once, outside the bound
    start = time.perf_counter()
    plans = plan_graph(ep, **CUDA)
    elapsed = time.perf_counter() - start
    assert len(plans) == 300
    assert [p.decision for p in plans.values()] == [Decision.ROUTED, Decision.REQUIRED, Decision.ROUTED] * 100
    assert elapsed < 1.0, f"planning 300 convolutions took {elapsed:.3f} s"
