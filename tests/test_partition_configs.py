"""The partition side of the op families, on CPU and without compiling: configs, grouping, report, strict.

Runs `CudaTritonPartitioner.partition` on edge programs with every family's config (the preprocess drafts only
the families in `preprocess.families.DRAFTED_FAMILIES`, so lowering is not exercised here): connected supported
ops form one partition, the report lists ops per family and why each CPU op stays, a family that declines an op
fails a strict export, an op no family takes stays on the CPU.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from cuda_triton import CudaTritonPartitioner
from cuda_triton.partition.config import (
    ALL_CONFIGS,
    ConfigTable,
    ConvConfig,
    ElementwiseConfig,
    PoolingConfig,
    configs_for,
)
from cuda_triton.partition.config.elementwise import elementwise_spec
from cuda_triton.partition.partitioner import DeclinedOpsError
from executorch.exir import to_edge
from torch import nn

pytestmark = pytest.mark.timeout(300)

ALL_FAMILIES = [c.family for c in ALL_CONFIGS]


@pytest.fixture(autouse=True)
def no_prefetch(monkeypatch):
    monkeypatch.setenv("CUDA_TRITON_PREFETCH", "0")


class SmallCNN(nn.Module):
    """conv -> relu -> max pool -> residual conv + add -> hardtanh -> avg pool -> flatten -> linear."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, 8, 3, padding=1)
        self.pool = nn.MaxPool2d(2)
        self.body = nn.Conv2d(8, 8, 3, padding=1)
        self.head = nn.Linear(8, 5)

    def forward(self, x):
        y = self.pool(torch.relu(self.stem(x)))
        y = F.hardtanh(y + self.body(y) * 0.5, 0.0, 6.0)
        y = F.avg_pool2d(y, 8).flatten(1)
        return self.head(y)


def _edge(model: nn.Module, *example: torch.Tensor):
    return to_edge(torch.export.export(model.eval(), example)).exported_program()


def _partition(ep, **kw):
    partitioner = CudaTritonPartitioner(**kw)
    result = partitioner.partition(ep)
    return result, partitioner.last_report


def _compute_nodes(ep) -> list[torch.fx.Node]:
    import operator

    return [n for n in ep.graph.nodes if n.op == "call_function" and n.target is not operator.getitem]


def test_a_whole_cnn_is_one_partition_with_every_family():
    ep = _edge(SmallCNN(), torch.randn(2, 3, 16, 16))
    result, report = _partition(ep, configs=configs_for(ALL_FAMILIES))
    assert len(result.partition_tags) == 1, report.format()
    (tag,) = result.partition_tags
    assert all(n.meta.get("delegation_tag") == tag for n in _compute_nodes(ep)), report.format(verbose=True)
    assert report.ops_on_cpu == [] and report.declined == []
    families = report.family_counts()
    assert families["conv"] == 2 and families["pooling"] == 2 and families["gemm"] == 1
    assert families["elementwise"] >= 3 and families["data_movement"] >= 1, families
    # The weights, the linear's weight and bias included, belong to the partition.
    for n in ep.graph.nodes:
        if n.op == "placeholder" and n.users and n.name.startswith("p_"):
            assert n.meta.get("delegation_tag") == tag, n.name


def test_the_report_names_each_cpu_op_and_why():
    """Only the families the preprocess drafts: the other ops stay on the CPU, each with its reason."""
    ep = _edge(SmallCNN(), torch.randn(2, 3, 16, 16))
    result, report = _partition(ep, configs=configs_for(["conv"]))
    assert len(result.partition_tags) == 2  # the two convolutions are not connected through delegated ops
    cpu = report.cpu_counts()
    assert cpu["aten.relu.default"] == 1 and "aten.addmm.default" in cpu
    assert all("no op family of the delegate takes" in d.reason for d in report.ops_on_cpu)
    assert report.declined == []  # nothing a family takes was declined: strict passes
    text = report.format()
    assert "ops left on the CPU" in text and "aten.max_pool2d_with_indices.default x1" in text


class MaxPoolWithIndices(nn.Module):
    def forward(self, x):
        values, indices = F.max_pool2d(torch.relu(x), 2, return_indices=True)
        return values, indices


def test_strict_fails_on_an_op_a_family_declines_and_names_why():
    ep = _edge(MaxPoolWithIndices(), torch.randn(1, 4, 8, 8))
    with pytest.raises(DeclinedOpsError, match="indices") as info:
        _partition(ep, configs=configs_for(ALL_FAMILIES))
    ((node, _),) = info.value.declined
    assert "max_pool2d_with_indices" in str(node.target)


def test_without_strict_a_declined_op_stays_on_the_cpu_with_its_reason():
    ep = _edge(MaxPoolWithIndices(), torch.randn(1, 4, 8, 8))
    result, report = _partition(ep, configs=configs_for(ALL_FAMILIES), strict=False)
    (declined,) = report.declined
    assert declined.family == "pooling" and "indices" in declined.reason
    assert report.family_counts() == {"elementwise": 1}
    assert len(result.partition_tags) == 1


class LayerNormAndInt(nn.Module):
    def forward(self, x, i):
        return F.layer_norm(torch.relu(x), (8,)), i * 2


def test_ops_no_family_takes_stay_on_the_cpu_even_when_strict():
    class CumSum(nn.Module):
        def forward(self, x):
            return torch.cumsum(torch.relu(x), -1)

    _, report = _partition(_edge(CumSum(), torch.randn(2, 8)), configs=configs_for(ALL_FAMILIES))
    by_target = {d.target: d for d in report.ops}
    assert by_target["aten.relu.default"].delegated
    assert by_target["aten.cumsum.default"].family is None
    assert report.declined == []


def test_an_integer_elementwise_op_is_declined_with_its_dtype():
    ep = _edge(LayerNormAndInt(), torch.randn(2, 8), torch.arange(4))
    _, report = _partition(ep, configs=configs_for(ALL_FAMILIES), strict=False)
    (mul,) = report.declined
    assert mul.target == "aten.mul.Tensor" and mul.family == "elementwise" and "int64" in mul.reason


def test_elementwise_binding_broadcasts_and_keeps_scalars():
    class M(nn.Module):
        def forward(self, x, y):
            return (x + y) * 3.0 - 1.0

    ep = _edge(M(), torch.randn(2, 3, 4), torch.randn(3, 1))
    nodes = _compute_nodes(ep)
    spec, tensors = elementwise_spec(nodes[0])
    assert [t.name for t in tensors] == ["x", "y"] and spec.out.sizes == (2, 3, 4)
    config = ElementwiseConfig()
    assert all(config.takes(n) for n in nodes)


def test_a_target_belongs_to_one_family():
    class Twice(PoolingConfig):
        family = "pooling_again"

    with pytest.raises(ValueError, match="claimed by the pooling and pooling_again"):
        ConfigTable([PoolingConfig(), Twice()])
    with pytest.raises(ValueError, match="unknown op families"):
        configs_for(["conv", "nope"])
    assert isinstance(ConfigTable(configs_for(["conv"])).family("conv"), ConvConfig)


# ---- torchvision models --------------------------------------------------------------------------------------
# Edge ops whose families have no kernels yet: the only ops allowed on the CPU (none left: reductions and
# normalisation have families now).
NOT_YET_COVERED: set[str] = set()


@pytest.mark.timeout(900)
@pytest.mark.parametrize("name", ["resnet18", "mobilenet_v3_large"])
def test_torchvision_models_are_one_partition(name):
    from torchvision_support import classification_model

    ep = _edge(classification_model(name), torch.randn(1, 3, 64, 64))
    result, report = _partition(ep, configs=configs_for(ALL_FAMILIES))
    cpu = report.cpu_counts()
    assert set(cpu) <= NOT_YET_COVERED, report.format()
    assert report.declined == []
    if not cpu:
        assert len(result.partition_tags) == 1, report.format()
