"""Pooling and reduction ops drafted into the delegate blob, run by the CPU emulator (TRITON_INTERPRET=1).

Each model (mostly a convolution followed by a pool or a reduction, in fp32, fp16 and bf16, contiguous and
channels-last) is lowered with the default CudaTritonPartitioner under a fake AOT compile; the test checks that
it exports as ONE delegate with no op left on the CPU, and that the emulated blob matches eager PyTorch (relative
to max|ref|: fp32 2e-3, fp16 2e-2, bf16 5e-2). Models whose edge graph wraps the pool in view ops (1-D pools,
``flatten``) need the data-movement family drafted to be one delegate; until it is, they are checked for the
pool's delegation and the result only. The reduction partition config's declines say why.
"""

from __future__ import annotations

import os

os.environ.setdefault("TRITON_INTERPRET", "1")

from collections.abc import Callable  # noqa: E402

import pytest  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402

pytest.importorskip("executorch")
if os.environ.get("TRITON_INTERPRET") != "1":  # a GPU machine: the emulator needs the interpreter
    pytest.skip("needs TRITON_INTERPRET=1", allow_module_level=True)

from cuda_triton import CudaTritonPartitioner  # noqa: E402
from cuda_triton.partition.config import configs_for  # noqa: E402
from cuda_triton.preprocess.families import DRAFTED_FAMILIES  # noqa: E402
from cuda_triton.tools import emulate_pte as E  # noqa: E402
from executorch.exir import to_edge  # noqa: E402

pytestmark = pytest.mark.timeout(120)

TOL = {torch.float32: 2e-3, torch.float16: 2e-2, torch.bfloat16: 5e-2}
DTYPES = [
    pytest.param(torch.float32, id="fp32"),
    pytest.param(torch.float16, id="fp16"),
    pytest.param(torch.bfloat16, id="bf16"),
]
POOL_TARGETS = ("max_pool", "avg_pool", "adaptive_avg_pool", "mean.dim", "sum.dim", "amax", "amin")


class ConvThen(nn.Module):
    """A convolution (its output is what a real network pools), then ``f``."""

    def __init__(self, f: Callable[[torch.Tensor], torch.Tensor], dims: int = 2, cin: int = 3) -> None:
        super().__init__()
        conv = {1: nn.Conv1d, 2: nn.Conv2d, 3: nn.Conv3d}[dims]
        self.conv = conv(cin, 8, 3, padding=1)
        self.f = f

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.f(self.conv(x))


class Apply(nn.Module):
    """Just ``f`` of the inputs."""

    def __init__(self, f: Callable[..., torch.Tensor]) -> None:
        super().__init__()
        self.f = f

    def forward(self, *xs: torch.Tensor) -> torch.Tensor:
        return self.f(*xs)


def _cpu_ops(ep) -> list[str]:
    return [
        str(n.target)
        for n in ep.graph.nodes
        if n.op == "call_function"
        and "executorch_call_delegate" not in str(n.target)
        and "getitem" not in str(n.target)
    ]


def _delegates(ep) -> int:
    return sum("executorch_call_delegate" in str(n.target) for n in ep.graph.nodes)


def _rel_err(out: torch.Tensor, ref: torch.Tensor) -> float:
    out64, ref64 = out.detach().double(), ref.detach().double()
    assert out64.shape == ref64.shape, (out64.shape, ref64.shape)
    assert torch.isfinite(out64).all(), "the delegate wrote non-finite values"
    return float((out64 - ref64).abs().max() / ref64.abs().max().clamp_min(1e-30))


def _check(model: nn.Module, x: torch.Tensor, dtype: torch.dtype, needs_views: bool = False) -> E.ProgramRun:
    """Lower ``model`` (in ``dtype``) on ``x``, check the delegation and the emulated output against eager."""
    model = model.eval().to(dtype)
    x = x.to(dtype)
    ep = E.lower(model, (x,))
    cpu = _cpu_ops(ep)
    if needs_views and "data_movement" not in DRAFTED_FAMILIES:
        # The view ops around the pool stay on the CPU until their family is drafted; the pool must not.
        assert not [op for op in cpu if any(t in op for t in POOL_TARGETS)], cpu
        assert _delegates(ep) >= 1
    else:
        assert cpu == [], f"ops left on the CPU: {cpu}"
        assert _delegates(ep) == 1, ep.graph
    fresh = torch.randn_like(x)  # keeps x's memory format
    ref = E.eager_reference(model, (fresh,))
    run = E.run_program(ep, (fresh,))
    assert run.delegates, "nothing was delegated"
    for what, e, t in run.op_errors:
        assert e <= t, f"op {what}: rel err {e:.2e} > {t:.0e}"
    err = _rel_err(run.output, ref)
    assert err <= TOL[dtype], f"rel err {err:.2e} > {TOL[dtype]:.0e}"
    return run


def _nchw(*sizes: int, channels_last: bool = False) -> torch.Tensor:
    x = torch.randn(*sizes)
    if channels_last:
        x = x.to(memory_format=torch.channels_last if x.dim() == 4 else torch.channels_last_3d)
    return x


# ---- pooling ----------------------------------------------------------------------------------------------------
MAX_POOLS_2D = {
    "k2": lambda y: F.max_pool2d(y, 2),
    "k3s2p1": lambda y: F.max_pool2d(y, 3, 2, 1),
    "k3s2_ceil": lambda y: F.max_pool2d(y, 3, 2, ceil_mode=True),
    "k3s2p1_ceil_dil": lambda y: F.max_pool2d(y, 3, 2, 1, dilation=2, ceil_mode=True),
}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", sorted(MAX_POOLS_2D))
def test_conv_then_max_pool2d(case: str, dtype: torch.dtype) -> None:
    _check(ConvThen(MAX_POOLS_2D[case]), _nchw(2, 3, 9, 11), dtype)


AVG_POOLS_2D = {
    "k2": lambda y: F.avg_pool2d(y, 2),
    "k3s2p1_include_pad": lambda y: F.avg_pool2d(y, 3, 2, 1, count_include_pad=True),
    "k3s2p1_exclude_pad": lambda y: F.avg_pool2d(y, 3, 2, 1, count_include_pad=False),
    "k3s2p1_ceil_include_pad": lambda y: F.avg_pool2d(y, 3, 2, 1, ceil_mode=True, count_include_pad=True),
    "k3s2p1_ceil_exclude_pad": lambda y: F.avg_pool2d(y, 3, 2, 1, ceil_mode=True, count_include_pad=False),
    "k3_divisor": lambda y: F.avg_pool2d(y, 3, 1, 1, divisor_override=5),
}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", sorted(AVG_POOLS_2D))
def test_conv_then_avg_pool2d(case: str, dtype: torch.dtype) -> None:
    _check(ConvThen(AVG_POOLS_2D[case]), _nchw(2, 3, 9, 11), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("size", [(3, 5), (4, 4), (1, 1), (2, 7)], ids=str)
def test_conv_then_adaptive_avg_pool2d(size: tuple[int, int], dtype: torch.dtype) -> None:
    """Output sizes that do not divide the input (windows overlap, their lengths vary); (1, 1) is a mean."""
    _check(ConvThen(lambda y: F.adaptive_avg_pool2d(y, size)), _nchw(2, 3, 9, 11), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    "pool",
    [
        pytest.param(lambda y: F.max_pool2d(y, 3, 2, 1, ceil_mode=True), id="max"),
        pytest.param(lambda y: F.avg_pool2d(y, 3, 2, 1, count_include_pad=False), id="avg"),
        pytest.param(lambda y: F.adaptive_avg_pool2d(y, (3, 5)), id="adaptive"),
    ],
)
def test_channels_last_pools(pool: Callable, dtype: torch.dtype) -> None:
    """A channels-last input: the convolution writes channels-last and the pool keeps it."""
    _check(ConvThen(pool), _nchw(2, 3, 9, 11, channels_last=True), dtype)


POOLS_1D = {
    "max": lambda y: F.max_pool1d(y, 3, 2, 1),
    "max_ceil": lambda y: F.max_pool1d(y, 3, 2, ceil_mode=True),
    "avg_exclude_pad": lambda y: F.avg_pool1d(y, 3, 2, 1, count_include_pad=False),
    "avg_ceil": lambda y: F.avg_pool1d(y, 3, 2, 1, ceil_mode=True),
    "adaptive": lambda y: F.adaptive_avg_pool1d(y, 4),
}


@pytest.mark.parametrize("case", sorted(POOLS_1D))
def test_conv_then_1d_pool(case: str) -> None:
    """1-D pools reach the edge graph as 2-D pools between an unsqueeze and a squeeze."""
    _check(ConvThen(POOLS_1D[case], dims=1), torch.randn(2, 3, 13), torch.float32, needs_views=True)


POOLS_3D = {
    "max": lambda y: F.max_pool3d(y, 2),
    "max_ceil_pad": lambda y: F.max_pool3d(y, 3, 2, 1, ceil_mode=True),
    "avg_exclude_pad": lambda y: F.avg_pool3d(y, 3, 2, 1, count_include_pad=False),
    "adaptive": lambda y: F.adaptive_avg_pool3d(y, (2, 3, 2)),
}


@pytest.mark.parametrize("case", sorted(POOLS_3D))
def test_conv_then_3d_pool(case: str) -> None:
    _check(ConvThen(POOLS_3D[case], dims=3, cin=2), torch.randn(1, 2, 5, 6, 7), torch.float32)


@pytest.mark.parametrize("case", ["max", "avg_exclude_pad"])
def test_channels_last_3d_pool(case: str) -> None:
    """A channels_last_3d delegate input (no convolution: the conv family keeps 3-D convolutions contiguous);
    max_pool3d keeps the layout, avg_pool3d writes contiguous."""
    _check(Apply(POOLS_3D[case]), _nchw(1, 4, 5, 6, 7, channels_last=True), torch.float32)


def test_a_max_pool_record_binds_its_getitem() -> None:
    """The max pool's values (its getitem) are the delegate output; one pooling record computes them."""
    from cuda_triton.serialization import PoolingRecord, deserialize

    ep = E.lower(ConvThen(lambda y: torch.relu(F.max_pool2d(y, 2))).eval(), (torch.randn(1, 3, 8, 8),))
    (call,) = [n for n in ep.graph.nodes if "executorch_call_delegate" in str(n.target)]
    blob = deserialize(getattr(ep.graph_module, call.args[0].target).processed_bytes)
    (pool,) = [op for op in blob.ops if isinstance(op, PoolingRecord)]
    assert pool.op == "max" and pool.kernel == [2, 2] and pool.stride == [2, 2] and pool.dilation == [1, 1]
    assert not pool.count_include_pad and pool.divisor_override == 0
    assert blob.values[pool.output].sizes == [1, 8, 4, 4]


# ---- reductions -------------------------------------------------------------------------------------------------
REDUCTIONS = {
    "mean23": lambda y: y.mean((2, 3)),
    "mean23_keepdim": lambda y: y.mean((2, 3), keepdim=True),
    "adaptive_1": lambda y: F.adaptive_avg_pool2d(y, 1),  # a mean over (-1, -2), keepdim
    "flatten_adaptive_1": lambda y: torch.flatten(F.adaptive_avg_pool2d(y, 1), 1),
    "sum1": lambda y: y.sum(1),
    "sum13_keepdim": lambda y: y.sum((1, 3), keepdim=True),
    "amax_last": lambda y: y.amax(-1),
    "amax023": lambda y: y.amax((0, 2, 3)),
    "amin12": lambda y: y.amin((1, 2)),
    "mean_all": lambda y: y.mean((0, 1, 2, 3)),
}
# Views around the reduction: a flatten, and for a channels-last input the as_strided that ATen's
# adaptive_avg_pool2d adds to keep the (N, C, 1, 1) result channels-last.
NEEDS_VIEWS = {"flatten_adaptive_1", "adaptive_1"}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", sorted(REDUCTIONS))
def test_conv_then_reduction(case: str, dtype: torch.dtype) -> None:
    _check(ConvThen(REDUCTIONS[case]), _nchw(2, 3, 9, 11), dtype, needs_views=case in NEEDS_VIEWS)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    "case", ["mean23", "mean23_keepdim", "adaptive_1", "flatten_adaptive_1", "sum1", "amax023"]
)
def test_channels_last_reductions(case: str, dtype: torch.dtype) -> None:
    """Global average pooling of a channels-last activation reduces strided dims."""
    x = _nchw(2, 3, 9, 11, channels_last=True)
    _check(ConvThen(REDUCTIONS[case]), x, dtype, needs_views=case in NEEDS_VIEWS)


OF_VIEWS = {
    "sum_of_permute": lambda y: y.permute(0, 2, 3, 1).sum(-1),
    "max_pool_of_transpose": lambda y: F.max_pool2d(y.transpose(2, 3), 2),
    "amax_of_slice": lambda y: y[:, 2:6].amax((2, 3)),
}


@pytest.mark.parametrize("case", sorted(OF_VIEWS))
def test_pools_and_reductions_of_views(case: str) -> None:
    """The input is a view the delegate stores with its own strides (what `ProgramDraft.meta` gives the spec)."""
    _check(ConvThen(OF_VIEWS[case]), _nchw(2, 3, 8, 10), torch.float32, needs_views=True)


def test_mean_with_a_float32_dtype_argument_writes_float32() -> None:
    run = _check(ConvThen(lambda y: y.mean((2, 3), dtype=torch.float32)), _nchw(2, 3, 6, 6), torch.float16)
    assert run.output.dtype == torch.float32


def test_pool_then_reduction_is_one_delegate() -> None:
    """A torchvision-like head: conv, max pool, conv, global average pool."""

    class Head(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.a = nn.Conv2d(3, 8, 3, padding=1)
            self.b = nn.Conv2d(8, 8, 3, padding=1)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = F.max_pool2d(torch.relu(self.a(x)), 3, 2, 1)
            return torch.relu(self.b(y)).mean((2, 3))

    _check(Head(), _nchw(2, 3, 12, 12), torch.float32)


# ---- the reduction partition config's declines ---------------------------------------------------------------
def _declined(f: Callable[..., torch.Tensor], *example: torch.Tensor):
    ep = to_edge(torch.export.export(Apply(f).eval(), example)).exported_program()
    partitioner = CudaTritonPartitioner(configs=configs_for(["elementwise", "reduction"]), strict=False)
    partitioner.partition(ep)
    return {d.target: d for d in partitioner.last_report.declined}


@pytest.mark.parametrize(
    ("f", "example", "target", "reason"),
    [
        pytest.param(lambda i: i.sum(1), (torch.arange(6).reshape(2, 3),), "aten.sum.dim_IntList", "int64",
                     id="integer-input"),
        pytest.param(lambda x: x.amax(0), (torch.randint(0, 9, (4, 3), dtype=torch.int32),), "aten.amax.default",
                     "int32", id="integer-amax"),
        pytest.param(lambda x: x.sum(1, dtype=torch.float64), (torch.randn(2, 3),), "aten.sum.dim_IntList",
                     "dtype argument torch.float64", id="float64-dtype-argument"),
        pytest.param(lambda x: x.double().mean(1), (torch.randn(2, 3),), "aten.mean.dim", "float64",
                     id="float64-input"),
    ],
)  # fmt: skip
def test_a_declined_reduction_says_why(f: Callable, example: tuple, target: str, reason: str) -> None:
    declined = _declined(f, *example)
    assert target in declined, declined
    d = declined[target]
    assert d.family == "reduction" and reason in d.reason, d.reason


def test_a_float_reduction_is_taken() -> None:
    assert _declined(lambda x: x.amin((0, 1)) + 1.0, torch.randn(2, 3)) == {}
