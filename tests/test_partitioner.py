"""CudaTritonPartitioner on CPU, without compiling kernels (the preprocess's compile step is faked here).

Covers: partition counts for every zoo model through both lowering APIs; preserved-but-declined convolution
overloads never break lowering; zero spatial pads folded into padding_before/after (and the cases that must not
fold); connected convolutions share a partition; weights are owned by the delegate; strict planning; options.
tests/test_preprocess.py compiles real kernels.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from cuda_triton import CudaTritonOptions, CudaTritonPartitioner
from cuda_triton.conv.binding import aten_overload, is_conv_node
from cuda_triton.conv.templates import get_template
from cuda_triton.kernel.aot import CompiledKernel, abi_types
from cuda_triton.models.zoo import ZOO, build
from cuda_triton.ops.registry import OpCompileJob
from cuda_triton.partition.config import configs_for
from cuda_triton.partition.partitioner import DeclinedOpsError
from cuda_triton.preprocess import kernels
from cuda_triton.serialization import PadRecord
from cuda_triton.serialization.blob import ConvRecord, deserialize
from executorch.exir import to_edge, to_edge_transform_and_lower
from executorch.exir.lowered_backend_module import LoweredBackendModule
from torch import nn

# (delegated convolutions = every convolution in the graph, partitions, pads folded) per API. With every op
# family drafted (elementwise, pooling, reductions, GEMMs, norms, data movement) each model is one partition.
EXPECTED = {
    "resnet50": (53, 1, 0, 0),
    "resnet18": (20, 1, 0, 0),
    "mobilenetv2": (52, 1, 0, 0),
    "unet": (23, 1, 0, 0),
    "wav2vec2": (7, 1, 0, 0),
    "wavenet": (62, 1, 21, 21),  # the last residual 1x1 conv is dead code
    "video": (17, 1, 0, 0),
    # to_edge spells the even 1-D 'same' as pad + conv; the other API keeps conv1d.padding
    "demo": (5, 1, 1, 0),
}
HEAVY = {
    "resnet50",
    "mobilenetv2",
    "wavenet",
}  # transform_and_lower of these takes a minute or more on 2 cores


def _fake_compile(jobs):
    out = {}
    for key, job in jobs.items():
        if isinstance(job, OpCompileJob):  # a kernel of another op family (elementwise, pooling, ...)
            launch = job.launch().for_arch(job.arch)
        else:
            launch = get_template(job.template).launches(job.problem, job.schedule)[job.launch_index]
        out[key] = CompiledKernel(
            launch.name, job.arch, b"\x7fELF" + key.encode(), "", launch.num_warps, 1, 0, 0, 1, 0, 1,
            False, False, abi_types(launch), "fake",
        )  # fmt: skip
    return out


@pytest.fixture
def fake_compile(monkeypatch):
    """Blobs get placeholder cubins: the partitioner and the blob layout are tested without Triton compiles."""
    monkeypatch.setattr(kernels, "compile_all", _fake_compile)
    monkeypatch.setenv("CUDA_TRITON_PREFETCH", "0")


def _lowered_modules(edge) -> list[LoweredBackendModule]:
    gm = edge.exported_program().graph_module
    return [m for _, m in gm.named_children() if isinstance(m, LoweredBackendModule)]


def _remaining_convs(edge) -> list[str]:
    return [n.name for n in edge.exported_program().graph.nodes if is_conv_node(n)]


def _lower(model, example, api, **options):
    ep = torch.export.export(model.eval(), example)
    partitioner = CudaTritonPartitioner(**options)
    if api == "transform_and_lower":
        edge = to_edge_transform_and_lower(ep, partitioner=[partitioner])
    else:
        edge = to_edge(ep).to_backend(partitioner)
    return edge, partitioner.last_report


# ---- zoo partition counts ----------------------------------------------------------------------------------
@pytest.mark.parametrize("name", list(ZOO))
def test_zoo_partition_counts_to_backend(name, monkeypatch):
    """Plain to_edge: every convolution is aten.convolution.default; partition() alone (no lowering)."""
    monkeypatch.setenv("CUDA_TRITON_PREFETCH", "0")
    model, example = build(name)
    edge = to_edge(torch.export.export(model, example))
    ep = edge.exported_program()
    convs = [n for n in ep.graph.nodes if is_conv_node(n)]
    partitioner = CudaTritonPartitioner()
    result = partitioner.partition(ep)
    report = partitioner.last_report
    delegated, partitions, pads, _ = EXPECTED[name]
    assert report.num_convs == len(convs) == delegated
    assert report.num_delegated == delegated, report.format()
    assert len(report.partitions) == len(result.partition_tags) == partitions
    assert sum(d.folded_pad is not None for d in report.decisions) == pads
    tags = {n.meta.get("delegation_tag") for n in convs}
    assert None not in tags and tags == set(result.partition_tags)
    # Weights and biases belong to the partition of the conv that reads them.
    for n in convs:
        for arg in n.args[1:3]:
            if isinstance(arg, torch.fx.Node):
                assert arg.meta.get("delegation_tag") == n.meta["delegation_tag"]


@pytest.mark.parametrize(
    "name", [pytest.param(n, marks=pytest.mark.slow) if n in HEAVY else n for n in ZOO]
)  # fmt: skip
def test_zoo_partition_counts_transform_and_lower(name, fake_compile):
    """to_edge_transform_and_lower with preserved overloads: full lowering, every convolution delegated."""
    model, example = build(name)
    edge, report = _lower(model, example, "transform_and_lower")
    delegated, partitions, _, pads = EXPECTED[name]
    assert report.num_delegated == report.num_convs == delegated, report.format()
    assert len(report.partitions) == partitions
    assert sum(d.folded_pad is not None for d in report.decisions) == pads
    assert _remaining_convs(edge) == []
    lowered = _lowered_modules(edge)
    assert len(lowered) == partitions
    assert all(m.backend_id == "CudaTritonBackend" for m in lowered)
    convs = sum(isinstance(op, ConvRecord) for m in lowered for op in deserialize(m.processed_bytes).ops)
    assert convs == delegated


def test_demo_to_executorch_serializes(fake_compile):
    model, example = build("demo")
    edge, _ = _lower(model, example, "to_backend")
    buf = edge.to_executorch().buffer
    assert len(buf) > 0


# ---- preserved overloads that are not delegated ---------------------------------------------------------------
class ComputedWeight(nn.Module):
    """A transposed conv (REQUIRED: Inductor cannot compile it) whose weight is computed in the graph."""

    def __init__(self) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.randn(4, 4, 3, 3))
        self.c = nn.Conv2d(4, 4, 3, padding="same")

    def forward(self, x):
        return self.c(F.conv_transpose2d(x, self.w * 2, stride=2, padding=1))


class Float64Same(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.c = nn.Conv1d(3, 4, 4, padding="same", dilation=1)
        self.t = nn.ConvTranspose1d(4, 2, 3, stride=2)

    def forward(self, x):
        return self.t(self.c(x))


def test_declined_preserved_ops_do_not_break_lowering(fake_compile):
    # Computed weight: the planner says REQUIRED, the partitioner keeps it on the CPU (it owns only constants).
    edge, report = _lower(ComputedWeight(), (torch.randn(1, 4, 8, 8),), "transform_and_lower", strict=False)
    by_decision = {d.node: d for d in report.decisions}
    assert report.num_convs == 2 and report.num_delegated == 1, report.format()
    kept = [d for d in by_decision.values() if not d.delegated]
    assert "computed in the graph" in kept[0].reason
    remaining = _remaining_convs(edge)
    assert len(remaining) == 1
    node = next(n for n in edge.exported_program().graph.nodes if n.name == remaining[0])
    assert aten_overload(node.target) == torch.ops.aten.convolution.default  # decomposed, not preserved

    # float64: no template handles it; the preserved conv1d.padding / conv_transpose1d decompose instead.
    model = Float64Same().double()
    edge, report = _lower(
        model, (torch.randn(1, 3, 16, dtype=torch.float64),), "transform_and_lower", strict=False
    )
    assert report.num_delegated == 0 and report.num_convs == 2
    assert all(d.decision == "REFUSED" for d in report.decisions)
    assert len(_remaining_convs(edge)) == 2
    assert edge.to_executorch().buffer


def test_a_conv_not_worth_routing_is_still_delegated(fake_compile, monkeypatch):
    """DECLINED (a platform convolution would be faster) still runs in the delegate: in an ExecuTorch program
    the alternative is the CPU."""
    template = get_template("implicit_gemm")
    monkeypatch.setattr(type(template), "worth_routing", lambda self, problem: False)
    model = nn.Sequential(
        nn.Conv2d(3, 8, 3, padding="same"), nn.ReLU(), nn.Conv2d(8, 8, 3, dilation=2, padding=2)
    )
    edge, report = _lower(model, (torch.randn(1, 3, 12, 12),), "transform_and_lower")
    decisions = [d.decision for d in report.decisions]
    assert decisions == ["DECLINED", "REQUIRED"], report.format()
    assert report.num_delegated == 2
    assert _remaining_convs(edge) == []
    assert edge.to_executorch().buffer


@pytest.mark.parametrize("api", ["to_backend", "transform_and_lower"])
def test_strict_by_default_fails_on_ops_the_delegate_declines(fake_compile, api):
    """strict is on by default: a convolution the conv family declines fails the export, naming it and why."""
    with pytest.raises(DeclinedOpsError, match="computed in the graph") as info:
        _lower(ComputedWeight(), (torch.randn(1, 4, 8, 8),), api)
    assert len(info.value.declined) == 1 and "strict=False" in str(info.value)
    with pytest.raises(DeclinedOpsError, match="float64"):
        _lower(Float64Same().double(), (torch.randn(1, 3, 16, dtype=torch.float64),), api)


# ---- pad folding ---------------------------------------------------------------------------------------------
class CausalConv(nn.Module):
    def __init__(self, pad_value: float = 0.0, expose_pad: bool = False) -> None:
        super().__init__()
        self.c = nn.Conv1d(4, 6, 3, dilation=2)
        self.pad_value = pad_value
        self.expose_pad = expose_pad

    def forward(self, x):
        p = F.pad(x, (4, 1), value=self.pad_value)
        y = self.c(p)
        return (y, p) if self.expose_pad else y


class SameEven2d(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.c = nn.Conv2d(3, 5, (2, 4), padding="same", bias=False)

    def forward(self, x):
        return self.c(x)


@pytest.mark.parametrize("api", ["to_backend", "transform_and_lower"])
def test_causal_pad_is_folded(api, fake_compile):
    edge, report = _lower(CausalConv(), (torch.randn(2, 4, 20),), api)
    (d,) = report.decisions
    assert d.delegated and d.folded_pad is not None, report.format()
    graph = edge.exported_program().graph
    assert not any("pad" in str(n.target) for n in graph.nodes if n.op == "call_function")
    (lowered,) = _lowered_modules(edge)
    blob = deserialize(lowered.processed_bytes)
    (op,) = blob.ops
    assert op.padding_before == [4] and op.padding_after == [1] and op.dilation == [2]
    x = blob.values[op.input]
    assert x.kind == "input" and x.sizes == [2, 4, 20]  # the un-padded tensor is the delegate input
    assert blob.values[op.output].sizes == [2, 6, 21]


def test_asymmetric_same_is_folded_by_to_edge(fake_compile):
    edge, report = _lower(SameEven2d(), (torch.randn(1, 3, 9, 10),), "to_backend")
    (d,) = report.decisions
    assert d.folded_pad is not None, report.format()
    (lowered,) = _lowered_modules(edge)
    (op,) = deserialize(lowered.processed_bytes).ops
    # 'same': total d*(k-1) per dim, the extra element on the high side.
    assert op.padding_before == [0, 1] and op.padding_after == [1, 2]
    assert op.bias is None


def test_pads_that_must_not_fold(fake_compile):
    """A pad the convolution cannot fold runs in the delegate as a pad kernel (data movement) the conv reads."""

    def pad_then_conv(edge) -> tuple[PadRecord, ConvRecord]:
        (lowered,) = _lowered_modules(edge)
        pad, conv = deserialize(lowered.processed_bytes).ops
        assert isinstance(pad, PadRecord) and isinstance(conv, ConvRecord)
        assert conv.input == pad.output and conv.padding_before == [0] and conv.padding_after == [0]
        return pad, conv

    # Non-zero value.
    edge, report = _lower(CausalConv(pad_value=1.0), (torch.randn(1, 4, 20),), "to_backend")
    (d,) = report.decisions
    assert d.delegated and d.folded_pad is None
    pad, _ = pad_then_conv(edge)
    assert pad.pad == [4, 1] and pad.value == 1.0
    # The padded tensor is also a program output: the pad has a reader besides the conv, so it is not folded.
    edge, report = _lower(CausalConv(expose_pad=True), (torch.randn(1, 4, 20),), "to_backend")
    (d,) = report.decisions
    assert d.delegated and d.folded_pad is None
    assert not any("constant_pad_nd" in str(n.target) for n in edge.exported_program().graph.nodes)
    pad_then_conv(edge)


# ---- grouping and I/O --------------------------------------------------------------------------------------------
class Chain(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Conv2d(3, 8, 3, padding=1)
        self.b = nn.Conv2d(8, 8, 3, padding=1)
        self.c = nn.Conv2d(8, 8, 1)
        self.d = nn.Conv2d(8, 8, 3, padding=1)

    def forward(self, x):
        y = self.a(x)
        z = self.c(self.b(y))  # a -> b -> c connected
        return y + z, self.d(torch.relu(z))  # d after a relu


def test_connected_convs_share_a_partition(fake_compile):
    # With only the convolution config the add and relu run on the CPU: a delegated value they read is an output.
    configs = configs_for(["conv"])
    edge, report = _lower(Chain(), (torch.randn(1, 3, 10, 10),), "to_backend", configs=configs)
    assert len(report.partitions) == 2
    tags = {d.node: d.tag for d in report.decisions}
    assert len({tags[n] for n in list(tags)[:3]}) == 1
    lowered = _lowered_modules(edge)
    blobs = sorted((deserialize(m.processed_bytes) for m in lowered), key=lambda b: -len(b.ops))
    big = blobs[0]
    # b's result stays inside, channels-last, so c (reading it) writes channels-last and a copy moves that into the
    # contiguous delegate output.
    assert len(big.ops) == 4 and big.num_inputs == 1
    a, b, c, copy = big.ops
    assert b.input == a.output and c.input == b.output and copy.inputs[0].value == c.output
    # y (a's output) is read by the CPU add and by b: a delegate output and an op input.
    assert big.values[a.output].kind == "output"
    assert big.values[b.output].kind == "intermediate"
    assert big.values[copy.output].kind == "output"
    assert big.num_outputs == 2
    # Weights are constants of the delegate: none is a placeholder of the top-level program any more.
    top = edge.exported_program()
    assert not top.graph_signature.inputs_to_parameters


def test_blob_values_match_the_recorded_layout(fake_compile):
    x = torch.randn(2, 3, 9, 9)
    edge, _ = _lower(nn.Conv2d(3, 4, 3, stride=2), (x,), "to_backend")
    (lowered,) = _lowered_modules(edge)
    blob = deserialize(lowered.processed_bytes)
    (op,) = blob.ops
    assert blob.values[op.input].sizes == [2, 3, 9, 9] and blob.values[op.input].strides == [243, 81, 9, 1]
    assert blob.values[op.output].sizes == [2, 4, 4, 4] and blob.values[op.output].strides == [64, 16, 4, 1]
    assert op.weight_sizes == [4, 3, 3, 3]
    assert blob.archs == [80, 90]
    for launch in op.launches:
        assert sorted(launch.kernels) == [80, 90]


# ---- options ------------------------------------------------------------------------------------------------
def test_options_round_trip_through_compile_specs():
    opts = CudaTritonOptions(
        archs="sm_90a, 80", strict=True, allow_tf32=False, tuning_table="/t.json", external_tag="w",
        target_device="cuda",
    )  # fmt: skip
    specs = opts.compile_specs()
    keys = [s.key for s in specs]
    assert "target_device" in keys and dict((s.key, s.value) for s in specs)["target_device"] == b"cuda:0"
    back = CudaTritonOptions.from_compile_specs(specs)
    assert back == opts and back.archs == (80, 90)
    assert CudaTritonOptions().archs == (80, 90) and not CudaTritonOptions().target_device
    with pytest.raises(ValueError, match="not supported"):
        CudaTritonOptions(archs=(75,))
    with pytest.raises(ValueError, match="cuda"):
        CudaTritonOptions(target_device="cpu")
    p = CudaTritonPartitioner(compile_specs=specs)
    assert p.options == opts and p.delegation_spec.backend_id == "CudaTritonBackend"


# ---- unusual graphs ---------------------------------------------------------------------------------------------
class ConstantInput(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("b", torch.randn(1, 3, 8, 8))
        self.c = nn.Conv2d(3, 4, 3)

    def forward(self, x):
        return self.c(self.b) + x


class Unbatched(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.c = nn.Conv1d(3, 4, 3, padding="same")
        self.d = nn.Conv2d(1, 4, 3)

    def forward(self, x):
        y = self.c(x)  # (3, L) -> (4, L): unbatched 1-D
        return self.d(y.unsqueeze(0)), y, y  # unbatched 2-D (C=1); y returned twice


@pytest.mark.parametrize("api", ["to_backend", "transform_and_lower"])
def test_unusual_graphs_lower(api, fake_compile):
    edge, report = _lower(ConstantInput(), (torch.randn(1, 4, 6, 6),), api, strict=False)
    (d,) = report.decisions
    assert not d.delegated and "constant of the program" in d.reason
    assert edge.to_executorch().buffer

    edge, report = _lower(Unbatched(), (torch.randn(3, 10),), api)
    assert report.num_delegated == 2
    # The (un)squeezes between the convolutions are data movement the delegate runs too: one delegate.
    (lowered,) = _lowered_modules(edge)
    blob = deserialize(lowered.processed_bytes)
    sizes = sorted(blob.values[op.input].sizes for op in blob.ops if isinstance(op, ConvRecord))
    if api == "transform_and_lower":  # preserved conv1d.padding / conv2d.default keep the unbatched forms
        assert sizes == [[1, 4, 10], [3, 10]]
    else:  # the core decomposition unsqueezes to a batch of one
        assert sizes == [[1, 1, 4, 10], [1, 3, 10]]
    assert edge.to_executorch().buffer
