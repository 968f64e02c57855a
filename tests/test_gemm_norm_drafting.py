"""GEMM and normalisation ops drafted into the delegate blob, run in the CPU emulator.

Each model is lowered with the default CudaTritonPartitioner (fake AOT compile) through both lowering APIs, its
delegate blobs run in the Triton interpreter (`cuda_triton.tools.emulate_pte`) and the program output is compared
with eager PyTorch (fp32 2e-3, fp16 2e-2, bf16 5e-2 of max|ref|; TF32 off). Checked: the blob holds the expected
`GemmRecord`s / `NormRecord`s; no op of a family the preprocess drafts is left on the CPU; a model whose ops are
all in drafted families is ONE delegate. Cases: a classifier head (conv -> mean -> linear), linear without bias,
linear on a [N, L, C] input, linear with a weight that is a program input (a transposed view of it in the blob),
mm / bmm of two inputs, mm with a constant second matrix, standalone batch norm and batch norm after a ReLU,
layer norm (also between NHWC permutes), group norm after a conv, softmax / log_softmax over the last dim and dim
1. A batch norm right after a convolution still folds into it (no norm record). The norm config's declines
say why.
"""

from __future__ import annotations

import operator
import os

os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402

if os.environ.get("TRITON_INTERPRET") != "1":  # a GPU machine: the emulator needs the interpreter
    pytest.skip("needs TRITON_INTERPRET=1", allow_module_level=True)

from cuda_triton import CudaTritonOptions, CudaTritonPartitioner  # noqa: E402
from cuda_triton.conv.binding import aten_overload  # noqa: E402
from cuda_triton.partition.config import (  # noqa: E402
    ALL_CONFIGS,
    ConfigTable,
    GemmConfig,
    NormConfig,
    PartitionContext,
    configs_for,
)
from cuda_triton.preprocess.families import DRAFTED_FAMILIES  # noqa: E402
from cuda_triton.serialization import ConstantRef, ConvRecord, GemmRecord, NormRecord, deserialize  # noqa: E402
from cuda_triton.tools import emulate_pte as E  # noqa: E402
from cuda_triton.utils.graph import constant_names  # noqa: E402
from executorch.exir import to_edge  # noqa: E402
from executorch.exir.lowered_backend_module import LoweredBackendModule  # noqa: E402

pytestmark = [pytest.mark.timeout(120), pytest.mark.usefixtures("no_prefetch")]

APIS = ["transform_and_lower", "to_backend"]
TOL = {torch.float32: 2e-3, torch.float16: 2e-2, torch.bfloat16: 5e-2}
DTYPES = [
    pytest.param(torch.float32, id="fp32"),
    pytest.param(torch.float16, id="fp16"),
    pytest.param(torch.bfloat16, id="bf16"),
]
_ALL = ConfigTable(configs_for([c.family for c in ALL_CONFIGS]))


@pytest.fixture
def no_prefetch(monkeypatch):
    monkeypatch.setenv("CUDA_TRITON_PREFETCH", "0")


# ---- helpers ----------------------------------------------------------------------------------------------------
def _blobs(ep) -> list:
    return [
        deserialize(m.processed_bytes)
        for _, m in ep.graph_module.named_children()
        if isinstance(m, LoweredBackendModule)
    ]


def _cpu_nodes(ep) -> list[torch.fx.Node]:
    return [
        n
        for n in ep.graph.nodes
        if n.op == "call_function"
        and n.target is not operator.getitem
        and "executorch_call_delegate" not in str(n.target)
    ]


def _record_counts(ep) -> dict[str, int]:
    counts: dict[str, int] = {}
    for blob in _blobs(ep):
        for op in blob.ops:
            counts[type(op).__name__] = counts.get(type(op).__name__, 0) + 1
    return counts


def _check(
    model: nn.Module,
    example: tuple[torch.Tensor, ...],
    api: str,
    dtype: torch.dtype,
    options: CudaTritonOptions | None = None,
    **records: int,
):
    """Lower and emulate ``model`` in ``dtype``; assert the records, the delegation and the match with eager."""
    torch.manual_seed(0)
    model = model.eval().to(dtype)
    example = tuple(x.to(dtype) for x in example)
    ep = E.lower(model, example, api, options=options)
    counts = _record_counts(ep)
    for kind, n in records.items():
        assert counts.get(kind, 0) == n, f"{kind}: {counts}"
    # Ops left on the CPU may only be of families the preprocess does not draft yet.
    cpu = _cpu_nodes(ep)
    drafted = [n for n in cpu if (c := _ALL.config_for(n)) is not None and c.family in DRAFTED_FAMILIES]
    assert drafted == [], [str(n.target) for n in drafted]
    delegates = sum(1 for n in ep.graph.nodes if "executorch_call_delegate" in str(n.target))
    if not cpu:
        assert delegates == 1, f"{delegates} delegates for a model whose ops are all delegated"
    fresh = tuple(torch.randn_like(x) for x in example)
    ref = E.eager_reference(model, fresh)
    run = E.run_program(ep, fresh)
    assert run.delegates, "nothing was delegated"
    for what, e, t in run.op_errors:
        assert e <= t, f"op {what}: rel err {e:.2e} > {t:.0e}"
    out = run.output
    assert out.dtype == ref.dtype and out.shape == ref.shape
    err = float((out.double() - ref.double()).abs().max() / ref.double().abs().max().clamp_min(1e-30))
    assert err <= TOL[dtype], f"rel err {err:.2e} > {TOL[dtype]:.0e}"
    return ep, cpu


def _randomize_bn(bn: nn.BatchNorm2d) -> nn.BatchNorm2d:
    with torch.no_grad():
        bn.running_mean.normal_()
        bn.running_var.uniform_(0.25, 3.0)
        bn.weight.normal_()
        bn.bias.normal_()
    return bn


# ---- models -----------------------------------------------------------------------------------------------------
class ClassifierHead(nn.Module):
    """conv -> relu -> global average pool (mean over H, W) -> linear with bias."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 16, 3, padding=1)
        self.fc = nn.Linear(16, 10)

    def forward(self, x):
        return self.fc(torch.relu(self.conv(x)).mean((2, 3)))


class LinearOnInput(nn.Module):
    def __init__(self, bias: bool) -> None:
        super().__init__()
        self.fc = nn.Linear(24, 12, bias=bias)

    def forward(self, x):
        return self.fc(x)


class LinearWithInputWeight(nn.Module):
    def forward(self, x, w):
        return F.linear(x, w)


class MatMul(nn.Module):
    def __init__(self, batched: bool) -> None:
        super().__init__()
        self.batched = batched

    def forward(self, a, b):
        return torch.bmm(a, b) if self.batched else torch.mm(a, b)


class MatMulConstant(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("w", torch.randn(20, 9))

    def forward(self, a):
        return torch.mm(torch.relu(a), self.w)


class AddMM(nn.Module):
    def __init__(self, beta: float, alpha: float) -> None:
        super().__init__()
        self.beta, self.alpha = beta, alpha

    def forward(self, c, a, b):
        return torch.addmm(c, a, b, beta=self.beta, alpha=self.alpha)


class BatchNormOnInput(nn.Module):
    def __init__(self, after_relu: bool) -> None:
        super().__init__()
        self.bn = _randomize_bn(nn.BatchNorm2d(6))
        self.after_relu = after_relu

    def forward(self, x):
        return self.bn(torch.relu(x) if self.after_relu else x)


class LayerNormLastDim(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.ln = nn.LayerNorm(32)
        with torch.no_grad():
            self.ln.weight.normal_()
            self.ln.bias.normal_()

    def forward(self, x):
        return self.ln(x)


class ConvNeXtNorm(nn.Module):
    """ConvNeXt's channel LayerNorm: NCHW -> NHWC, LayerNorm(C), back to NCHW."""

    def __init__(self) -> None:
        super().__init__()
        self.ln = nn.LayerNorm(16, eps=1e-6)

    def forward(self, x):
        return self.ln(x.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)


class ConvGroupNorm(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 12, 3, padding=1)
        self.gn = nn.GroupNorm(4, 12)
        with torch.no_grad():
            self.gn.weight.normal_()
            self.gn.bias.normal_()

    def forward(self, x):
        return self.gn(self.conv(x))


class Softmaxes(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, x):
        return F.softmax(x, self.dim) - F.log_softmax(x, self.dim)


class ConvBNReLU(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1, bias=False)
        self.bn = _randomize_bn(nn.BatchNorm2d(8))

    def forward(self, x):
        return torch.relu(self.bn(self.conv(x)))


# ---- GEMM -------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("api", APIS)
def test_classifier_head(api, dtype):
    _check(ClassifierHead(), (torch.randn(2, 3, 8, 8),), api, dtype, ConvRecord=1, GemmRecord=1)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("api", APIS)
def test_linear_without_bias(api, dtype):
    ep, cpu = _check(LinearOnInput(False), (torch.randn(5, 24),), api, dtype, GemmRecord=1)
    assert cpu == []
    (blob,) = _blobs(ep)
    (op,) = blob.ops
    assert op.bias is None and op.b_sizes == [24, 12]


@pytest.mark.parametrize("api", APIS)
def test_linear_with_bias_on_a_sequence(api):
    """[N, L, C] input: transform_and_lower keeps aten.linear (a 3-D GEMM record); to_backend gives view_copy +
    addmm + view_copy (the views are the data movement family's)."""
    ep, _ = _check(LinearOnInput(True), (torch.randn(2, 7, 24),), api, torch.float32, GemmRecord=1)
    (op,) = [op for b in _blobs(ep) for op in b.ops if isinstance(op, GemmRecord)]
    assert op.bias is not None and op.b_sizes == [24, 12]


def test_linear_weight_that_is_a_tensor_is_read_through_a_transposed_view():
    ep, cpu = _check(
        LinearWithInputWeight(), (torch.randn(6, 10), torch.randn(4, 10)), "transform_and_lower",
        torch.float32, GemmRecord=1,
    )  # fmt: skip
    assert cpu == []
    (blob,) = _blobs(ep)
    (op,) = blob.ops
    b = blob.values[op.b.value]
    assert b.kind == "view" and b.sizes == [10, 4] and b.strides == [1, 10]
    assert blob.values[b.index].kind == "input"


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("batched", [False, True], ids=["mm", "bmm"])
@pytest.mark.parametrize("api", APIS)
def test_mm_and_bmm_of_two_inputs(api, batched, dtype):
    shapes = ((3, 17, 20), (3, 20, 9)) if batched else ((17, 20), (20, 9))
    ep, cpu = _check(MatMul(batched), tuple(torch.randn(s) for s in shapes), api, dtype, GemmRecord=1)
    assert cpu == []
    (blob,) = _blobs(ep)
    assert blob.ops[0].b_sizes == list(shapes[1])


def test_mm_with_a_constant_second_matrix():
    ep, cpu = _check(MatMulConstant(), (torch.randn(7, 20),), "to_backend", torch.float32, GemmRecord=1)
    assert cpu == []
    (blob,) = _blobs(ep)
    gemm = next(op for op in blob.ops if isinstance(op, GemmRecord))
    assert isinstance(gemm.b, ConstantRef) and gemm.b_sizes == [20, 9]


@pytest.mark.parametrize(("beta", "alpha"), [(0.5, 2.0), (0.0, 1.0)])
def test_addmm_scales_and_a_dropped_bias(beta, alpha):
    xs = (torch.randn(1, 9), torch.randn(6, 20), torch.randn(20, 9))
    ep, cpu = _check(AddMM(beta, alpha), xs, "to_backend", torch.float32, GemmRecord=1)
    assert cpu == []
    (op,) = _blobs(ep)[0].ops
    assert (op.alpha, op.beta) == (alpha, beta) and (op.bias is None) == (beta == 0.0)


# ---- normalisation ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("after_relu", [False, True], ids=["on-input", "after-relu"])
@pytest.mark.parametrize("api", APIS)
def test_batch_norm_not_after_a_conv(api, after_relu, dtype):
    ep, cpu = _check(BatchNormOnInput(after_relu), (torch.randn(2, 6, 5, 7),), api, dtype, NormRecord=1)
    assert cpu == []
    (blob,) = _blobs(ep)
    (norm,) = [op for op in blob.ops if isinstance(op, NormRecord)]
    assert norm.op == "batch_norm" and norm.dim == 1
    assert all(p is not None for p in (norm.weight, norm.bias, norm.mean, norm.var))


@pytest.mark.parametrize("api", APIS)
def test_batch_norm_after_a_conv_still_folds(api):
    ep, cpu = _check(ConvBNReLU(), (torch.randn(2, 3, 6, 6),), api, torch.float32, ConvRecord=1, NormRecord=0)
    assert cpu == []
    (blob,) = _blobs(ep)
    (conv,) = [op for op in blob.ops if isinstance(op, ConvRecord)]
    assert conv.bias is not None  # the fold's bias


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("api", APIS)
def test_layer_norm_over_the_last_dim(api, dtype):
    ep, cpu = _check(LayerNormLastDim(), (torch.randn(2, 9, 32),), api, dtype, NormRecord=1)
    assert cpu == []
    (norm,) = _blobs(ep)[0].ops
    assert norm.op == "layer_norm" and norm.dim == 2 and norm.eps == pytest.approx(1e-5)


@pytest.mark.parametrize("api", APIS)
def test_convnext_layer_norm_between_permutes(api):
    """Once permute_copy is drafted (data movement family) the whole block is one delegate; until then the
    permutes stay on the CPU around the delegated layer norm."""
    ep, cpu = _check(ConvNeXtNorm(), (torch.randn(2, 16, 5, 6),), api, torch.float32, NormRecord=1)
    assert {str(aten_overload(n.target)) for n in cpu} <= {"aten.permute_copy.default"}
    assert len(cpu) == (0 if "data_movement" in DRAFTED_FAMILIES else 2)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("api", APIS)
def test_group_norm_after_a_conv(api, dtype):
    ep, cpu = _check(ConvGroupNorm(), (torch.randn(2, 3, 6, 5),), api, dtype, ConvRecord=1, NormRecord=1)
    assert cpu == []
    (norm,) = [op for op in _blobs(ep)[0].ops if isinstance(op, NormRecord)]
    assert norm.op == "group_norm" and norm.groups == 4 and norm.dim == 1


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("dim", [-1, 1])
@pytest.mark.parametrize("api", APIS)
def test_softmax_and_log_softmax(api, dim, dtype):
    ep, cpu = _check(Softmaxes(dim), (torch.randn(2, 6, 11),), api, dtype, NormRecord=2)
    assert cpu == []
    norms = [op for op in _blobs(ep)[0].ops if isinstance(op, NormRecord)]
    assert sorted(op.op for op in norms) == ["log_softmax", "softmax"]
    assert {op.dim for op in norms} == {dim % 3}


class ThroughViews(nn.Module):
    """Operands that data movement ops produce (copies or views, as that family drafts them)."""

    def forward(self, a, b, x):
        y = torch.mm(torch.relu(a), b.t())
        return y + F.softmax(x.transpose(0, 1), -1)


@pytest.mark.parametrize("api", APIS)
def test_operands_from_data_movement_ops(api):
    xs = (torch.randn(6, 8), torch.randn(5, 8), torch.randn(5, 6))
    _check(ThroughViews(), xs, api, torch.float32, GemmRecord=1, NormRecord=1)


# ---- partition configs: what is declined, and why ---------------------------------------------------------------
def _edge(model: nn.Module, *example: torch.Tensor):
    return to_edge(torch.export.export(model.eval(), example)).exported_program()


def _context(ep) -> PartitionContext:
    return PartitionContext(ep, frozenset(constant_names(ep)), CudaTritonOptions())


def _verdicts(config, ep) -> dict[str, str]:
    ctx = _context(ep)
    return {
        str(aten_overload(n.target)): config.check(n, ctx).reason for n in ep.graph.nodes if config.takes(n)
    }


class LayerNormStats(nn.Module):
    def forward(self, x):
        out, mean, rstd = torch.native_layer_norm(x, (8,), None, None, 1e-5)
        return out, mean


class DoubleNorms(nn.Module):
    def forward(self, x):
        return F.layer_norm(x, (8,)), F.softmax(x, -1)


class SoftmaxHalfToFloat(nn.Module):
    def forward(self, x):
        return torch.ops.aten._softmax(x, -1, True)


def test_norm_config_declines_saved_statistics_float64_and_half_to_float():
    reasons = _verdicts(NormConfig(), _edge(LayerNormStats(), torch.randn(2, 8)))
    assert "output 1 is used" in reasons["aten.native_layer_norm.default"]
    assert "normalized output only" in reasons["aten.native_layer_norm.default"]
    reasons = _verdicts(NormConfig(), _edge(DoubleNorms(), torch.randn(2, 8, dtype=torch.float64)))
    assert all("float64" in r for r in reasons.values()) and len(reasons) == 2, reasons
    ep = torch.export.export(SoftmaxHalfToFloat(), (torch.randn(2, 8).half(),))
    (node,) = [n for n in ep.graph.nodes if n.op == "call_function"]
    verdict = NormConfig().check(node, _context(ep))
    assert not verdict and "half_to_float" in verdict.reason


class StandaloneAndFolded(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)
        self.bn1 = nn.BatchNorm2d(4)
        self.bn2 = nn.BatchNorm2d(4)

    def forward(self, x):
        return self.bn2(torch.relu(self.bn1(self.conv(x))))


def test_partitioner_folds_the_batch_norm_after_a_conv_and_takes_the_other_as_a_norm():
    ep = _edge(StandaloneAndFolded(), torch.randn(1, 3, 8, 8))
    part = CudaTritonPartitioner()
    part.partition(ep)
    report = part.last_report
    bns = {d.node: d for d in report.ops if "batch_norm" in d.target}
    assert len(bns) == 2 and all(d.delegated for d in bns.values())
    assert sorted(d.family for d in bns.values()) == ["conv", "norm"], report.format(verbose=True)
    (conv,) = report.decisions
    assert conv.folded_batch_norm in bns and bns[conv.folded_batch_norm].family == "conv"
    assert len(report.partitions) == 1


class ConstantFirstMatrix(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("a", torch.randn(4, 6))

    def forward(self, x):
        return torch.mm(self.a, x)


class Linear4d(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(6, 3)

    def forward(self, x):
        return self.fc(x)


def test_gemm_config_declines_a_constant_first_matrix_and_a_4d_linear():
    reasons = _verdicts(GemmConfig(), _edge(ConstantFirstMatrix(), torch.randn(6, 5)))
    assert "first matrix is a constant" in reasons["aten.mm.default"]
    ep = torch.export.export(
        Linear4d().eval(), (torch.randn(2, 3, 4, 6),)
    )  # ATen: linear before decomposition
    reasons = _verdicts(GemmConfig(), ep)
    assert "4 dims" in reasons["aten.linear.default"]


# ---- layer norms folded into the GEMM that reads them -------------------------------------------------------
class ConvNeXtBlock(nn.Module):
    """torchvision's CNBlock at a small width: depthwise 7x7, NHWC, LayerNorm, Linear, GELU, Linear, NCHW, layer
    scale and residual. Its norm's input is offset from zero (the shifted row sums keep the variance)."""

    def __init__(self, c: int = 24, affine: bool = True, bias: bool = True) -> None:
        super().__init__()
        self.dw = nn.Conv2d(c, c, 7, padding=3, groups=c)
        self.ln = nn.LayerNorm(c, eps=1e-6, elementwise_affine=affine)
        self.fc1, self.fc2 = nn.Linear(c, 4 * c, bias=bias), nn.Linear(4 * c, c)
        self.scale = nn.Parameter(torch.rand(c, 1, 1) + 0.5)
        with torch.no_grad():
            self.dw.bias.add_(2.0)
            if affine:
                self.ln.weight.normal_()
                self.ln.bias.normal_()

    def forward(self, x):
        y = self.ln(self.dw(x).permute(0, 2, 3, 1))
        y = self.fc2(F.gelu(self.fc1(y))).permute(0, 3, 1, 2)
        return x + self.scale * y


FOLD = CudaTritonOptions(allow_tf32=False, fold_layer_norms=True)


def _gemms(ep) -> list[GemmRecord]:
    return [op for blob in _blobs(ep) for op in blob.ops if isinstance(op, GemmRecord)]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("api", APIS)
def test_layer_norm_folds_into_the_linear_after_it(api, dtype):
    """No norm record: the first linear reads the depthwise convolution's output and normalises its rows."""
    ep, cpu = _check(
        ConvNeXtBlock(), (torch.randn(2, 24, 6, 5),), api, dtype, FOLD, NormRecord=0, GemmRecord=2
    )
    assert cpu == []
    first, second = _gemms(ep)
    assert first.row_norm and first.norm_eps == pytest.approx(1e-6) and not second.row_norm
    assert "native_layer_norm" in first.name


@pytest.mark.parametrize(
    "affine,bias", [pytest.param(False, True, id="plain-norm"), pytest.param(True, False, id="no-bias")]
)
def test_layer_norm_fold_without_affine_or_bias(affine, bias):
    ep, _ = _check(
        ConvNeXtBlock(16, affine, bias), (torch.randn(1, 16, 5, 5),), "transform_and_lower", torch.float16, FOLD,
        NormRecord=0,
    )  # fmt: skip
    assert _gemms(ep)[0].row_norm and _gemms(ep)[0].bias is not None


class NormReadTwice(nn.Module):
    """The norm's output read by two linears, and a norm over two dims: neither folds."""

    def __init__(self) -> None:
        super().__init__()
        self.ln, self.ln2 = nn.LayerNorm(16), nn.LayerNorm((4, 16))
        self.a, self.b = nn.Linear(16, 8), nn.Linear(16, 8)

    def forward(self, x):
        y = self.ln(x)
        return self.a(y) + self.b(y) + self.a(self.ln2(x))


def test_layer_norm_stays_a_kernel_where_it_cannot_fold():
    ep, _ = _check(
        NormReadTwice(), (torch.randn(2, 4, 16),), "transform_and_lower", torch.float32, NormRecord=2
    )
    assert not any(g.row_norm for g in _gemms(ep))


def test_layer_norm_fold_follows_its_option():
    """Off by default (not yet timed on a GPU), and off when asked."""
    model = ConvNeXtBlock().eval()
    x = (torch.randn(1, 24, 6, 5),)
    assert CudaTritonOptions().fold_layer_norms is False
    off = E.lower(model, x, "transform_and_lower", options=CudaTritonOptions(fold_layer_norms=False))
    assert _record_counts(off).get("NormRecord") == 1 and not any(g.row_norm for g in _gemms(off))


class ConvNeXtHead(nn.Module):
    """torchvision ConvNeXt's classifier: pooled [N, C, 1, 1], LayerNorm2d (NHWC permutes around a layer norm),
    flatten, linear. The permutes move size-1 dims only, so the norm still folds."""

    def __init__(self, c: int = 32) -> None:
        super().__init__()
        self.ln, self.fc = nn.LayerNorm(c, eps=1e-6), nn.Linear(c, 10)
        with torch.no_grad():
            self.ln.weight.normal_()
            self.ln.bias.normal_()

    def forward(self, x):
        y = x.mean((2, 3), keepdim=True)
        y = self.ln(y.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)
        return self.fc(torch.flatten(y, 1))


@pytest.mark.parametrize("api", APIS)
def test_layer_norm_folds_through_permutes_of_size_one_dims(api):
    ep, cpu = _check(
        ConvNeXtHead(), (torch.randn(2, 32, 3, 4) + 1.0,), api, torch.float16, FOLD, NormRecord=0
    )
    assert cpu == [] and _gemms(ep)[0].row_norm


def test_fold_layer_norms_round_trips_through_compile_specs():
    for value in (True, False):
        specs = CudaTritonOptions(fold_layer_norms=value).compile_specs()
        assert {s.key: bytes(s.value) for s in specs}["fold_layer_norms"] == (b"1" if value else b"0")
        assert CudaTritonOptions.from_compile_specs(specs).fold_layer_norms is value
