"""Inference BatchNorm folded into the delegated convolution before it (partitioner + preprocess).

The partitioner puts an eval-mode batch norm (``_native_batch_norm_legit_no_training`` and its ``getitem(bn, 0)``)
whose input is a delegated forward convolution with no other user into that convolution's partition; the
preprocess folds it into the weight and bias. Checked through both lowering APIs, 1-D/2-D/3-D, with and without
a conv bias, affine and non-affine, fp32 and fp16: no batch norm is left in the CPU graph and the lowered program,
run with the delegate blobs emulated on the CPU exactly as the runtime runs them (cuda_triton.tools.emulate_pte,
Triton interpreter), matches the eager module. Inference batch norms that cannot fold (the conv has other users,
is transposed or on the CPU, the statistics are computed, the option is off) run as norm ops of the delegate
instead (a `NormRecord`); the batch-statistics forms stay on the CPU.
"""

from __future__ import annotations

import copy
import os

os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from cuda_triton import CudaTritonOptions, CudaTritonPartitioner  # noqa: E402
from cuda_triton._passes.batch_norm_fold import fold_batch_norm, is_batch_norm_node  # noqa: E402
from cuda_triton.conv.binding import is_conv_node  # noqa: E402
from cuda_triton.models.zoo import build  # noqa: E402
from cuda_triton.preprocess import kernels  # noqa: E402
from cuda_triton.serialization import ConvRecord, NormRecord  # noqa: E402
from cuda_triton.serialization.blob import deserialize  # noqa: E402
from executorch.exir import EdgeCompileConfig, to_edge, to_edge_transform_and_lower  # noqa: E402
from executorch.exir.lowered_backend_module import LoweredBackendModule  # noqa: E402
from torch import nn  # noqa: E402

if os.environ.get("TRITON_INTERPRET") != "1":  # a GPU machine: the emulator needs the interpreter
    pytest.skip("needs TRITON_INTERPRET=1", allow_module_level=True)

from cuda_triton.tools import emulate_pte as E  # noqa: E402

APIS = ["transform_and_lower", "to_backend"]
CONV = {1: nn.Conv1d, 2: nn.Conv2d, 3: nn.Conv3d}
CONV_T = {1: nn.ConvTranspose1d, 2: nn.ConvTranspose2d, 3: nn.ConvTranspose3d}
BN = {1: nn.BatchNorm1d, 2: nn.BatchNorm2d, 3: nn.BatchNorm3d}
SPATIAL = {1: (9,), 2: (6, 5), 3: (4, 3, 5)}


def _randomize(bn: nn.Module) -> None:
    """Non-trivial statistics and affine parameters (fresh modules have mean 0, var 1, gamma 1, beta 0)."""
    assert isinstance(bn, nn.modules.batchnorm._BatchNorm)
    with torch.no_grad():
        if bn.running_mean is not None:
            bn.running_mean.normal_()
            bn.running_var.uniform_(0.25, 3.0)
        if bn.affine:
            bn.weight.normal_()
            bn.bias.normal_()


class ConvBN(nn.Module):
    def __init__(self, dims: int, conv_bias: bool, affine: bool, transposed: bool = False) -> None:
        super().__init__()
        conv = CONV_T[dims] if transposed else CONV[dims]
        self.conv = conv(3, 6, 3, padding=1, bias=conv_bias)
        self.bn = BN[dims](6, affine=affine, eps=1e-3)
        _randomize(self.bn)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.bn(self.conv(x))


class ConvBNChain(nn.Module):
    """conv-bn-relu-conv-bn plus a residual add: two folds in one program, one feeding the next delegate."""

    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Conv2d(3, 8, 3, padding=1, bias=False)
        self.bn_a = nn.BatchNorm2d(8)
        self.b = nn.Conv2d(8, 8, 1, bias=False)
        self.bn_b = nn.BatchNorm2d(8)
        _randomize(self.bn_a)
        _randomize(self.bn_b)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.bn_a(self.a(x)))
        return torch.relu(self.bn_b(self.b(y)) + y)


def _lower(model: nn.Module, example: tuple[torch.Tensor, ...], api: str, config=None, **options):
    """Export and lower with fake AOT compiles; (edge program manager, partition report)."""
    part = CudaTritonPartitioner(CudaTritonOptions(allow_tf32=False, **options))
    with E.fake_compile():
        ep = torch.export.export(model.eval(), example)
        if api == "transform_and_lower":
            edge = to_edge_transform_and_lower(ep, partitioner=[part], compile_config=config)
        else:
            edge = to_edge(ep, compile_config=config).to_backend(part)
    return edge, part.last_report


def _cpu_ops(edge) -> list[str]:
    return [str(n.target) for n in edge.exported_program().graph.nodes if n.op == "call_function"]


def _has_cpu_batch_norm(edge) -> bool:
    return any("batch_norm" in t for t in _cpu_ops(edge))


def _blobs(edge) -> list:
    gm = edge.exported_program().graph_module
    return [
        deserialize(m.processed_bytes) for _, m in gm.named_children() if isinstance(m, LoweredBackendModule)
    ]


def _rel(out: torch.Tensor, ref: torch.Tensor) -> float:
    return float((out.float() - ref.float()).abs().max() / ref.float().abs().max().clamp_min(1e-12))


def _check_matches_eager(
    model: nn.Module, edge, example: tuple[torch.Tensor, ...], tol: float, convs_checked: bool = True
) -> None:
    fresh = tuple(torch.randn_like(x) for x in example)
    ref_model = copy.deepcopy(model).float()  # fp16 models: compare with the fp32 computation
    with torch.no_grad():
        ref = ref_model(*(x.float() for x in fresh))
    run = E.run_program(edge.exported_program(), fresh)
    assert run.delegates, "nothing was delegated"
    assert run.op_errors or not convs_checked, "no op was checked"
    for what, err, op_tol in run.op_errors:
        assert err <= op_tol, f"op {what}: rel err {err:.2e} > {op_tol:.0e}"
    outs, refs = (run.output, ref) if isinstance(ref, tuple) else ((run.output,), (ref,))
    for out, r in zip(outs, refs, strict=True):
        assert out.dtype == fresh[0].dtype
        err = _rel(out, r)
        assert err <= tol, f"program output rel err {err:.2e} > {tol:.0e}"


def _norm_ops(edge) -> list[NormRecord]:
    return [op for blob in _blobs(edge) for op in blob.ops if isinstance(op, NormRecord)]


# ---- folds ------------------------------------------------------------------------------------------------------
VARIANTS = [
    pytest.param(torch.float32, False, True, id="fp32-nobias-affine"),
    pytest.param(torch.float32, True, False, id="fp32-bias-nonaffine"),
    pytest.param(torch.float16, True, True, id="fp16-bias-affine"),
    pytest.param(torch.float16, False, False, id="fp16-nobias-nonaffine"),
]


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("dims", [1, 2, 3])
@pytest.mark.parametrize(("dtype", "conv_bias", "affine"), VARIANTS)
def test_conv_bn_is_folded_and_matches_eager(api, dims, dtype, conv_bias, affine):
    torch.manual_seed(dims)
    model = ConvBN(dims, conv_bias, affine).eval().to(dtype)
    example = (torch.randn(2, 3, *SPATIAL[dims]).to(dtype),)
    edge, report = _lower(model, example, api)
    (d,) = report.decisions
    assert d.delegated and d.folded_batch_norm is not None, report.format()
    assert "1 batch norms folded" in report.summary()
    assert not _has_cpu_batch_norm(edge), _cpu_ops(edge)
    # The BN's parameters and buffers are the delegate's constants, not program inputs any more (only the
    # unused num_batches_tracked counter stays behind).
    sig = edge.exported_program().graph_signature
    assert not sig.inputs_to_parameters
    assert all(fqn.endswith("num_batches_tracked") for fqn in sig.inputs_to_buffers.values())
    (blob,) = _blobs(edge)
    (op,) = blob.ops
    assert op.bias is not None  # the folded convolution always has a bias
    assert blob.num_outputs == 1 and blob.values[op.output].kind == "output"
    _check_matches_eager(model, edge, example, 1e-4 if dtype == torch.float32 else 1e-2)


@pytest.mark.parametrize("api", APIS)
def test_chain_with_two_folds_matches_eager(api):
    torch.manual_seed(0)
    model = ConvBNChain().eval()
    example = (torch.randn(2, 3, 7, 7),)
    edge, report = _lower(model, example, api)
    assert [d.folded_batch_norm is not None for d in report.decisions] == [True, True], report.format()
    assert not _has_cpu_batch_norm(edge)
    _check_matches_eager(model, edge, example, 1e-4)


def test_channels_last_input_is_folded():
    torch.manual_seed(1)
    model = ConvBN(2, True, True).eval()
    example = (torch.randn(2, 3, 6, 5).to(memory_format=torch.channels_last),)
    edge, report = _lower(model, example, "to_backend")
    assert report.decisions[0].folded_batch_norm is not None, report.format()
    (blob,) = _blobs(edge)
    out = blob.values[blob.ops[0].output]
    assert out.strides == [180, 1, 30, 6]  # the conv's channels-last output layout, now the BN's
    _check_matches_eager(model, edge, example, 1e-4)


def test_fold_arithmetic_against_eager_modules():
    """fold_batch_norm alone: conv with the folded constants == bn(conv(x)), grouped conv included."""
    torch.manual_seed(2)
    conv = nn.Conv2d(4, 6, 3, groups=2, bias=True)
    bn = nn.BatchNorm2d(6, eps=1e-2)
    _randomize(bn)
    bn.eval()
    x = torch.randn(2, 4, 7, 7)
    w, b = fold_batch_norm(
        conv.weight, conv.bias, bn.weight, bn.bias, bn.running_mean, bn.running_var, bn.eps
    )
    assert w.dtype == conv.weight.dtype and w.shape == conv.weight.shape and b.shape == (6,)
    with torch.no_grad():
        ref = bn(conv(x))
        got = F.conv2d(x, w, b, groups=2)
    assert _rel(got, ref) < 1e-5
    # fp16 constants: computed in float64, rounded once at the end.
    w16, b16 = fold_batch_norm(conv.weight.half(), None, None, None, bn.running_mean.half(),
                               bn.running_var.half(), bn.eps)  # fmt: skip
    assert w16.dtype == b16.dtype == torch.float16
    scale = torch.rsqrt(bn.running_var.half().double() + bn.eps)
    assert torch.equal(b16, (-bn.running_mean.half().double() * scale).half())


# ---- batch norms that do not fold: norm ops of the delegate, or the CPU's ---------------------------------------
class TwoUsers(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)
        self.bn = nn.BatchNorm2d(4)

    def forward(self, x):
        y = self.conv(x)
        return self.bn(y), y


class NotDelegated(nn.Module):
    """The conv's weight is computed in the graph, so the conv (and its batch norm) stay on the CPU."""

    def __init__(self) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.randn(4, 3, 3, 3))
        self.bn = nn.BatchNorm2d(4)

    def forward(self, x):
        return self.bn(F.conv2d(x, self.w * 2))


class ComputedStats(nn.Module):
    """Running statistics computed in the graph are not constants: nothing to fold."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)
        self.register_buffer("mean", torch.randn(4))
        self.register_buffer("var", torch.rand(4) + 0.5)

    def forward(self, x):
        return F.batch_norm(self.conv(x), self.mean * 2, self.var, training=False)


@pytest.mark.parametrize("api", APIS)
def test_conv_with_two_users_keeps_its_batch_norm_unfolded(api):
    torch.manual_seed(5)
    model = TwoUsers().eval()
    _randomize(model.bn)
    example = (torch.randn(1, 3, 8, 8),)
    edge, report = _lower(model, example, api)
    (d,) = report.decisions
    assert d.delegated and d.folded_batch_norm is None
    assert not _has_cpu_batch_norm(edge)
    (blob,) = _blobs(edge)
    assert [type(op) for op in blob.ops] == [ConvRecord, NormRecord]
    assert blob.ops[0].bias is not None and blob.ops[1].input == blob.ops[0].output
    assert blob.num_outputs == 2  # the conv's output and the batch norm's
    _check_matches_eager(model, edge, example, 1e-4)


@pytest.mark.parametrize("api", APIS)
def test_batch_norm_after_a_cpu_conv_is_a_norm_op(api):
    edge, report = _lower(NotDelegated(), (torch.randn(1, 3, 8, 8),), api, strict=False)
    (d,) = report.decisions
    assert not d.delegated and d.folded_batch_norm is None
    assert any("convolution" in t or "conv2d" in t for t in _cpu_ops(edge))
    assert not _has_cpu_batch_norm(edge)
    (blob,) = _blobs(edge)  # the weight's "* 2" feeds the CPU conv, so the CPU computes it
    assert [op.op for op in blob.ops] == ["batch_norm"] and blob.values[blob.ops[0].input].kind == "input"


@pytest.mark.parametrize("api", APIS)
def test_option_off_drafts_the_batch_norm_as_a_norm_op(api):
    torch.manual_seed(3)
    model = ConvBN(2, False, True).eval()
    example = (torch.randn(2, 3, 6, 5),)
    edge, report = _lower(model, example, api, fold_batch_norm=False)
    (d,) = report.decisions
    assert d.delegated and d.folded_batch_norm is None and "batch norms folded" not in report.summary()
    assert not _has_cpu_batch_norm(edge)
    (blob,) = _blobs(edge)
    assert [type(op) for op in blob.ops] == [ConvRecord, NormRecord]
    assert blob.ops[0].bias is None  # the conv as written
    assert blob.values[blob.ops[0].output].kind == "intermediate"
    _check_matches_eager(model, edge, example, 1e-4)


def test_training_mode_batch_norm_stays_on_cpu():
    """A training-mode BN exports as _native_batch_norm_legit_functional (batch statistics): not foldable."""
    model = ConvBN(2, True, True)
    config = EdgeCompileConfig(_check_ir_validity=False)  # the functional training op is not core ATen
    ep = torch.export.export(model.train(), (torch.randn(2, 3, 6, 5),))
    # Not strict: the elementwise family declines the int64 num_batches_tracked += 1.
    part = CudaTritonPartitioner(CudaTritonOptions(allow_tf32=False, strict=False))
    with E.fake_compile():
        edge = to_edge(ep, compile_config=config).to_backend(part)
    (d,) = part.last_report.decisions
    assert d.delegated and d.folded_batch_norm is None
    assert any("_native_batch_norm_legit_functional" in t for t in _cpu_ops(edge))


@pytest.mark.parametrize("api", APIS)
def test_batch_statistics_stay_on_cpu_and_computed_stats_do_not_fold(api):
    # track_running_stats=False: eval mode still normalizes with batch statistics (_native_batch_norm_legit).
    model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4, track_running_stats=False))
    edge, report = _lower(model, (torch.randn(2, 3, 8, 8),), api)
    (d,) = report.decisions
    assert d.delegated and d.folded_batch_norm is None
    assert _has_cpu_batch_norm(edge)
    # Computed running statistics are not constants: no fold, the batch norm runs as a norm op.
    model = ComputedStats().eval()
    example = (torch.randn(2, 3, 8, 8),)
    edge, report = _lower(model, example, api)
    (d,) = report.decisions
    assert d.delegated and d.folded_batch_norm is None and "not a constant" in d.bn_note
    assert not _has_cpu_batch_norm(edge)
    assert [op.op for op in _norm_ops(edge)] == ["batch_norm"]
    _check_matches_eager(model, edge, example, 1e-4)


def test_transposed_conv_keeps_its_batch_norm_unfolded():
    torch.manual_seed(6)
    model = ConvBN(2, True, True, transposed=True).eval()
    example = (torch.randn(1, 3, 5, 5),)
    edge, report = _lower(model, example, "to_backend")
    (d,) = report.decisions
    assert d.delegated and d.folded_batch_norm is None and "transposed" in d.bn_note
    assert not _has_cpu_batch_norm(edge)
    assert [op.op for op in _norm_ops(edge)] == ["batch_norm"]
    _check_matches_eager(model, edge, example, 1e-4)


# ---- options, prefetch, zoo ----------------------------------------------------------------------------------
def test_option_round_trips_through_compile_specs():
    for value in (True, False):
        opts = CudaTritonOptions(fold_batch_norm=value)
        specs = opts.compile_specs()
        assert dict((s.key, bytes(s.value)) for s in specs)["fold_batch_norm"] == (b"1" if value else b"0")
        assert CudaTritonOptions.from_compile_specs(specs) == opts
    assert CudaTritonOptions().fold_batch_norm


@pytest.mark.parametrize("api", APIS)
def test_prefetch_compiles_the_folded_problem(api, monkeypatch):
    """The partitioner's prefetch asks for the convolution with a bias, as the preprocess compiles it (with
    to_edge_transform_and_lower, ops_to_not_decompose guesses the fold before the decomposition)."""
    prefetched: list = []
    monkeypatch.setattr(kernels, "prefetch", lambda problems, options: prefetched.extend(problems) or 0)
    compiled: list = []
    model = ConvBN(2, False, True).eval()
    part = CudaTritonPartitioner(CudaTritonOptions(allow_tf32=False))
    with E.fake_compile():  # restores compile_all and prefetch_enabled on exit
        fake = kernels.compile_all

        def record(jobs):
            compiled.extend(j.problem for j in jobs.values())
            return fake(jobs)

        kernels.compile_all = record  # type: ignore[assignment]
        kernels.prefetch_enabled = lambda: True  # type: ignore[assignment]
        ep = torch.export.export(model, (torch.randn(2, 3, 6, 5),))
        if api == "transform_and_lower":
            to_edge_transform_and_lower(ep, partitioner=[part])
        else:
            to_edge(ep).to_backend(part)
    assert compiled and all(p.has_bias for p in compiled)
    assert prefetched and all(p.has_bias for p in prefetched)
    assert set(compiled) <= set(prefetched)


def test_resnet18_folds_every_batch_norm():
    """partition() on resnet18's edge graph: each of its 20 BNs follows its own conv and joins its partition."""
    model, example = build("resnet18")
    ep = to_edge(torch.export.export(model, example)).exported_program()
    bns = [n for n in ep.graph.nodes if is_batch_norm_node(n)]
    part = CudaTritonPartitioner()
    part.partition(ep)
    report = part.last_report
    assert report.num_delegated == report.num_convs == 20
    assert sum(d.folded_batch_norm is not None for d in report.decisions) == len(bns) == 20
    for bn in bns:
        (conv,) = [a for a in bn.args[:1] if is_conv_node(a)]
        assert bn.meta.get("delegation_tag") == conv.meta["delegation_tag"]
        for const in bn.args[1:5]:
            assert const.meta.get("delegation_tag") == conv.meta["delegation_tag"]
        (out,) = bn.users
        assert out.meta.get("delegation_tag") == conv.meta["delegation_tag"]


def test_pre_decomposition_fold_leaves_the_users_program_alone():
    """to_edge_transform_and_lower folds on the ATen program (a new one): the user's program keeps its batch
    norm and parameters, the lowered one has neither the batch norm nor its now unused constants."""
    torch.manual_seed(4)
    model = ConvBN(2, False, True).eval()
    example = (torch.randn(2, 3, 6, 5),)
    ep = torch.export.export(model, example)
    before = {k: v.clone() for k, v in ep.state_dict.items()}
    part = CudaTritonPartitioner(CudaTritonOptions(allow_tf32=False))
    new = part.transform_for_pre_decomposition(ep)
    assert new is not ep
    assert any("batch_norm" in str(n.target) for n in ep.graph.nodes)
    assert not any("batch_norm" in str(n.target) for n in new.graph.nodes)
    assert ep.state_dict.keys() == before.keys()
    assert all(torch.equal(ep.state_dict[k], v) for k, v in before.items())
    assert set(new.state_dict) == {"conv.weight", "bn.running_mean", "bn.num_batches_tracked"}
    with torch.no_grad():
        assert _rel(new.module()(*example), model(*example)) < 1e-5
    off = CudaTritonPartitioner(CudaTritonOptions(fold_batch_norm=False))
    assert off.transform_for_pre_decomposition(ep) is ep


def test_tuning_lookup_uses_the_bias_free_entry_of_a_folded_conv():
    """A folded conv has a bias its tuned entry (measured bias-free) lacks: the exact entry still applies."""
    from cuda_triton.conv import tuning
    from cuda_triton.conv.params import ConvParams
    from cuda_triton.conv.templates import select_candidate
    from cuda_triton.utils.conv import conv_problem

    params = ConvParams((1, 1), (1, 1), (1, 1), (1, 1), False, (0, 0), 1)
    x, w = torch.randn(1, 16, 8, 8), torch.randn(32, 16, 3, 3)
    plain = conv_problem(x, w, False, params, True)
    folded = conv_problem(x, w, True, params, True)
    template = select_candidate(plain).template
    schedules = list(template.schedules(plain))
    bias_free = tuning.TuningEntry.from_problem(plain, 90, template.name, schedules[-1], 10.0, 12.0, 11.0)
    table = tuning.TuningTable([bias_free])
    m = tuning.lookup_match(folded, 90, table)
    assert m is not None and m.exact and m.schedule == schedules[-1]
    # An exact entry for the problem itself wins over the other bias setting's.
    own = tuning.TuningEntry.from_problem(folded, 90, template.name, schedules[0], 10.0, 12.0, 11.0)
    assert tuning.lookup(folded, 90, tuning.TuningTable([bias_free, own])) == (template.name, schedules[0])
