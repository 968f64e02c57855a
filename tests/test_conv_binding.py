"""`bind_conv` on every convolution overload of both lowering APIs, checked numerically against eager modules.

For each bank of modules (many convs in one module, so each export pays once) and each flow
(`to_edge` and `to_edge_transform_and_lower` with a partitioner that preserves the non-core overloads), every
convolution node of the edge graph is bound with `bind_conv`; `torch.ops.triton.convolution` then runs on the real
tensors (weights taken from the module) in place of the node, and:

* its sizes equal ATen's result for the node and the node's recorded ``meta["val"]``;
* its strides equal `out_shape_and_stride` (the CUDA rule) for the real input and weight;
* its values equal ATen's result for the node, and the graph's outputs (computed from the triton results) equal
  the module's eager outputs.

The second half builds nodes by hand (torch.fx with meta-tensor ``meta["val"]``; export would reject them) and
checks one `ConvBindingError` per validation rule.

fp16/bf16: ATen's results (the node's and the module's) are computed in fp32 and rounded once to the dtype, never by
ATen's 16-bit CPU convolution (`cuda_triton.conv.op.reference_convolution` says why; conftest.py refuses it).
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import math
import random
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import cuda_triton  # noqa: F401  (registers torch.ops.triton.convolution)
import pytest
import torch
from cuda_triton.conv import ConvArgs, ConvBindingError, bind_conv, out_shape_and_stride
from cuda_triton.conv.binding import CONV_OVERLOADS, aten_overload, is_conv_node
from torch import nn
from torch.export.graph_signature import InputKind
from torch.fx import Graph, Interpreter, Node

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
from cuda_triton.tools.emulate_pte import convolution_in_fp32, eager_reference  # noqa: E402

aten = torch.ops.aten

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


# ---------------------------------------------------------------------------------------------------------
# The module matrix
# ---------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Case:
    name: str
    make: Callable[[], nn.Module]
    in_shape: tuple[int, ...]
    preserved_as: torch._ops.OpOverload  # the overload the lowering flow keeps
    memory_format: torch.memory_format | None = None
    # Inside partition() the program's state holds fake tensors; the index constants that padding_mode='reflect'
    # lifts exist nowhere else, so such convs are checked in the to_edge flow only.
    to_edge_only: bool = False
    dtype: torch.dtype = torch.float32


def C(name, make, in_shape, preserved_as, memory_format=None, to_edge_only=False) -> Case:
    return Case(name, make, tuple(in_shape), preserved_as, memory_format, to_edge_only)


c1, c2, c3 = aten.conv1d, aten.conv2d, aten.conv3d
t1, t2, t3 = aten.conv_transpose1d.default, aten.conv_transpose2d.input, aten.conv_transpose3d.input

BANKS: dict[str, list[Case]] = {
    "fp32_forward": [
        C("c1_plain", lambda: nn.Conv1d(4, 6, 3), (2, 4, 11), c1.default),
        C("c1_s2_d2_g2_nobias", lambda: nn.Conv1d(4, 6, 4, 2, 1, 2, 2, bias=False), (2, 4, 13), c1.default),
        C("c1_depthwise", lambda: nn.Conv1d(4, 4, 3, groups=4), (2, 4, 9), c1.default),
        C("c1_same_even_k", lambda: nn.Conv1d(3, 5, 4, padding="same"), (2, 3, 10), c1.padding),
        C("c1_same_odd_k_d2", lambda: nn.Conv1d(3, 5, 3, padding="same", dilation=2), (2, 3, 10), c1.padding),
        C(
            "c1_same_even_k_d3",
            lambda: nn.Conv1d(3, 5, 4, padding="same", dilation=3),
            (2, 3, 12),
            c1.padding,
        ),
        C(
            "c1_same_even_k_d2",
            lambda: nn.Conv1d(3, 5, 4, padding="same", dilation=2),
            (2, 3, 12),
            c1.padding,
        ),
        C("c1_valid", lambda: nn.Conv1d(3, 5, 3, padding="valid", bias=False), (2, 3, 10), c1.padding),
        C("c1_unbatched", lambda: nn.Conv1d(3, 5, 3, padding=1), (3, 10), c1.default),
        C("c1_unbatched_same", lambda: nn.Conv1d(3, 5, 2, padding="same"), (3, 10), c1.padding),
        C("c2_s2_p1", lambda: nn.Conv2d(4, 8, 3, stride=2, padding=1), (2, 4, 9, 9), c2.default),
        C(
            "c2_rect_dil_g2",
            lambda: nn.Conv2d(4, 6, (3, 5), stride=(1, 2), padding=(2, 1), dilation=(2, 1), groups=2),
            (2, 4, 10, 11),
            c2.default,
        ),
        C(
            "c2_dw_nobias",
            lambda: nn.Conv2d(8, 8, 3, padding=1, groups=8, bias=False),
            (2, 8, 7, 7),
            c2.default,
        ),
        C("c2_dw_mult2", lambda: nn.Conv2d(4, 8, 3, groups=4), (1, 4, 7, 6), c2.default),
        C(
            "c2_same_even_k_d",
            lambda: nn.Conv2d(4, 6, (2, 4), padding="same", dilation=(1, 3)),
            (2, 4, 8, 9),
            c2.padding,
        ),
        C("c2_same_odd_k", lambda: nn.Conv2d(4, 6, 3, padding="same", groups=2), (2, 4, 6, 7), c2.padding),
        C("c2_valid", lambda: nn.Conv2d(4, 6, 3, padding="valid"), (2, 4, 6, 7), c2.padding),
        C("c2_unbatched", lambda: nn.Conv2d(4, 6, 3, stride=2), (4, 9, 9), c2.default),
        C("c2_unbatched_same", lambda: nn.Conv2d(4, 6, (2, 3), padding="same"), (4, 8, 8), c2.padding),
        C("c2_1x1", lambda: nn.Conv2d(4, 6, 1), (3, 4, 5, 5), c2.default),
        C("c2_patchify", lambda: nn.Conv2d(3, 8, 4, stride=4, bias=False), (1, 3, 16, 12), c2.default),
        C(
            "c2_reflect",
            lambda: nn.Conv2d(4, 6, 3, padding=1, padding_mode="reflect"),
            (2, 4, 8, 8),
            c2.default,
            to_edge_only=True,
        ),
        C(
            "c2_channels_last",
            lambda: nn.Conv2d(4, 6, 3, padding=1),
            (2, 4, 6, 6),
            c2.default,
            torch.channels_last,
        ),
    ],
    "fp32_3d_transposed": [
        C("c3_p1", lambda: nn.Conv3d(4, 6, 3, padding=1), (2, 4, 5, 6, 7), c3.default),
        C(
            "c3_rect_s_d_g2_nobias",
            lambda: nn.Conv3d(4, 6, (2, 3, 2), stride=(1, 2, 2), dilation=(2, 1, 1), groups=2, bias=False),
            (2, 4, 7, 8, 6),
            c3.default,
        ),
        C("c3_dw_same", lambda: nn.Conv3d(4, 4, 3, padding="same", groups=4), (1, 4, 5, 5, 5), c3.padding),
        C("c3_same_even_k", lambda: nn.Conv3d(4, 6, (2, 2, 3), padding="same"), (1, 4, 4, 5, 6), c3.padding),
        C("c3_valid", lambda: nn.Conv3d(2, 3, 2, padding="valid"), (1, 2, 4, 4, 4), c3.padding),
        C("c3_unbatched", lambda: nn.Conv3d(4, 6, 3), (4, 5, 5, 5), c3.default),
        C(
            "c3_channels_last_3d",
            lambda: nn.Conv3d(4, 6, 3, padding=1),
            (1, 4, 4, 5, 6),
            c3.default,
            torch.channels_last_3d,
        ),
        C(
            "t1_s2_op1",
            lambda: nn.ConvTranspose1d(4, 6, 3, stride=2, padding=1, output_padding=1),
            (2, 4, 7),
            t1,
        ),
        C(
            "t1_op_ge_stride_lt_dil",
            lambda: nn.ConvTranspose1d(4, 6, 3, stride=1, dilation=3, output_padding=2),
            (2, 4, 7),
            t1,
        ),
        C("t1_dw_nobias", lambda: nn.ConvTranspose1d(4, 4, 3, groups=4, bias=False), (2, 4, 6), t1),
        C("t1_unbatched", lambda: nn.ConvTranspose1d(4, 6, 3, stride=2), (4, 7), t1),
        C(
            "t2_s2_p1_op1",
            lambda: nn.ConvTranspose2d(4, 6, 3, stride=2, padding=1, output_padding=1),
            (2, 4, 5, 6),
            t2,
        ),
        C(
            "t2_rect_g2_d",
            lambda: nn.ConvTranspose2d(
                4, 6, (3, 4), stride=(2, 3), padding=(1, 2), output_padding=(0, 2), groups=2, dilation=(1, 2)
            ),
            (2, 4, 5, 5),
            t2,
        ),
        C(
            "t2_op_ge_stride_lt_dil",
            lambda: nn.ConvTranspose2d(4, 6, 3, stride=1, dilation=2, output_padding=1),
            (1, 4, 5, 6),
            t2,
        ),
        C("t2_dw_s2", lambda: nn.ConvTranspose2d(6, 6, 3, stride=2, groups=6), (1, 6, 4, 4), t2),
        C("t2_unbatched", lambda: nn.ConvTranspose2d(4, 6, 3, stride=2, padding=1), (4, 5, 5), t2),
        C(
            "t2_channels_last",
            lambda: nn.ConvTranspose2d(4, 6, 2, stride=2),
            (2, 4, 4, 5),
            t2,
            torch.channels_last,
        ),
        C(
            "t3_s2_op1",
            lambda: nn.ConvTranspose3d(4, 6, 3, stride=2, padding=1, output_padding=1),
            (2, 4, 3, 4, 5),
            t3,
        ),
        C(
            "t3_rect_g2_d_op",
            lambda: nn.ConvTranspose3d(
                4,
                6,
                (2, 3, 3),
                stride=(1, 2, 1),
                dilation=(2, 1, 3),
                output_padding=(1, 1, 2),
                groups=2,
                bias=False,
            ),
            (1, 4, 3, 4, 3),
            t3,
        ),
        C("t3_unbatched", lambda: nn.ConvTranspose3d(4, 6, 3), (4, 3, 3, 3), t3),
    ],
}
_HALF = [
    C("c1_g2", lambda: nn.Conv1d(4, 6, 3, padding=1, groups=2), (2, 4, 9), c1.default),
    C("c1_same_even", lambda: nn.Conv1d(4, 6, 2, padding="same"), (2, 4, 9), c1.padding),
    C("c2_s2_d2", lambda: nn.Conv2d(4, 6, 3, stride=2, dilation=2, padding=2), (2, 4, 9, 9), c2.default),
    C("c2_dw", lambda: nn.Conv2d(8, 8, 3, padding=1, groups=8), (2, 8, 6, 6), c2.default),
    C("c2_unbatched_same", lambda: nn.Conv2d(4, 6, (3, 2), padding="same"), (4, 6, 6), c2.padding),
    C("c3", lambda: nn.Conv3d(4, 6, 3, padding=1, bias=False), (1, 4, 4, 4, 4), c3.default),
    C("c3_valid", lambda: nn.Conv3d(4, 6, 2, padding="valid"), (1, 4, 4, 4, 4), c3.padding),
    C("t1", lambda: nn.ConvTranspose1d(4, 6, 3, stride=2, output_padding=1), (2, 4, 5), t1),
    C("t2_g2", lambda: nn.ConvTranspose2d(4, 6, 3, stride=2, padding=1, groups=2), (2, 4, 5, 5), t2),
    C(
        "t3_d2_op1",
        lambda: nn.ConvTranspose3d(4, 6, 2, stride=1, dilation=2, output_padding=1),
        (1, 4, 3, 3, 3),
        t3,
    ),
]
# One bank holds the fp16 and the bf16 convs (each conv and its input in its own dtype): one export for both.
BANKS["fp16_bf16"] = [dataclasses.replace(c, name=f"fp16_{c.name}", dtype=torch.float16) for c in _HALF] + [
    dataclasses.replace(c, name=f"bf16_{c.name}", dtype=torch.bfloat16) for c in _HALF
]


class Bank(nn.Module):
    """Applies conv i to input i and returns every result, so each conv is compared on its own."""

    def __init__(self, convs: Sequence[nn.Module]) -> None:
        super().__init__()
        self.convs = nn.ModuleList(convs)

    def forward(self, *xs: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return tuple(conv(x) for conv, x in zip(self.convs, xs, strict=True))


def make_bank(tag: str, flow: str) -> tuple[Bank, tuple[torch.Tensor, ...], list[Case]]:
    cases = [c for c in BANKS[tag] if flow == "to_edge" or not c.to_edge_only]
    torch.manual_seed(1234)
    model = Bank([c.make().to(c.dtype) for c in cases]).eval()
    with torch.no_grad():  # fresh random weights and biases, well away from zero
        for p in model.parameters():
            p.copy_(torch.randn_like(p) * 0.5 + 0.1)
    xs = []
    for c in cases:
        x = torch.randn(c.in_shape, dtype=c.dtype)
        if c.memory_format is not None:
            x = x.to(memory_format=c.memory_format)
        xs.append(x)
    return model, tuple(xs), cases


# ---------------------------------------------------------------------------------------------------------
# Checking a program: interpret its graph on real tensors, convs replaced by torch.ops.triton.convolution
# ---------------------------------------------------------------------------------------------------------
TOL = {torch.float32: 1e-5, torch.float16: 1e-2, torch.bfloat16: 2e-2, torch.float64: 1e-10}


def assert_close(actual: torch.Tensor, expected: torch.Tensor, reduction: int, what: str) -> None:
    assert actual.shape == expected.shape, f"{what}: shape {tuple(actual.shape)} != {tuple(expected.shape)}"
    assert actual.dtype == expected.dtype, f"{what}: dtype {actual.dtype} != {expected.dtype}"
    assert torch.isfinite(actual).all(), f"{what}: non-finite values (an element was not written?)"
    tol = TOL[expected.dtype]
    a, e = actual.double(), expected.double()
    scale = max(1.0, math.sqrt(reduction))
    torch.testing.assert_close(a, e, rtol=tol, atol=tol * scale, msg=lambda m: f"{what}: {m}")


def rule_layout(args: ConvArgs, x: torch.Tensor, w: torch.Tensor) -> tuple[list[int], list[int]]:
    return out_shape_and_stride(
        list(x.shape),
        list(x.stride()),
        list(w.shape),
        list(w.stride()),
        list(args.stride),
        list(args.padding_before),
        list(args.padding_after),
        list(args.dilation),
        args.transposed,
        list(args.output_padding),
        args.groups,
        x.dtype == torch.float64,
    )


@dataclass
class Bound:
    node: str
    overload: object
    args: ConvArgs
    weight_fqn: str


def real_inputs(ep, model: nn.Module, xs: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    """Real tensors for the program's placeholders (its state_dict holds fake tensors inside partition())."""
    sd = model.state_dict()
    user = iter(xs)
    out = []
    for spec in ep.graph_signature.input_specs:
        if spec.kind == InputKind.USER_INPUT:
            out.append(next(user))
        elif spec.kind in (InputKind.PARAMETER, InputKind.BUFFER, InputKind.CONSTANT_TENSOR):
            # the module's own tensors, else constants lifted by decompositions (real after to_edge)
            v = sd.get(spec.target)
            if v is None:
                v = ep.state_dict.get(spec.target, ep.constants.get(spec.target))
            assert isinstance(v, torch.Tensor) and not isinstance(v, torch._subclasses.FakeTensor), (
                spec.target
            )
            out.append(v)
        else:  # pragma: no cover
            raise AssertionError(f"unexpected input kind {spec.kind}")
    return out


class TritonConvInterpreter(Interpreter):
    """Runs the graph; every convolution node is bound and computed by torch.ops.triton.convolution."""

    def __init__(self, ep) -> None:
        super().__init__(ep.graph_module)
        self.weight_fqn = {s.arg.name: s.target for s in ep.graph_signature.input_specs if s.target}
        self.bound: list[Bound] = []

    def run_node(self, n: Node):
        if not is_conv_node(n):
            return super().run_node(n)
        result = self.aten_result(n)
        args = bind_conv(n)
        x, w = self.env[args.input], self.env[args.weight]
        b = self.env[args.bias] if args.bias is not None else None
        out = torch.ops.triton.convolution(x, w, b, *args.op_args())
        what = f"{n.name} ({aten_overload(n.target)})"
        # sizes: ATen's result for the node, and what export recorded
        assert tuple(out.shape) == tuple(result.shape), f"{what}: sizes {out.shape} != ATen {result.shape}"
        assert tuple(out.shape) == tuple(n.meta["val"].shape), f"{what}: sizes differ from meta['val']"
        # strides: the CUDA rule on the real tensors
        sizes, strides = rule_layout(args, x, w)
        assert list(out.shape) == sizes and list(out.stride()) == strides, (
            f"{what}: layout {list(out.shape)}/{list(out.stride())} != rule {sizes}/{strides}"
        )
        reduction = int(w.shape[0 if args.transposed else 1]) * math.prod(w.shape[2:])
        assert_close(out, result, reduction, what)
        self.bound.append(Bound(n.name, aten_overload(n.target), args, self.weight_fqn[args.weight.name]))
        return out

    def aten_result(self, n: Node) -> torch.Tensor:
        """ATen's result for a convolution node; a 16-bit one computed in fp32 and rounded once."""
        return convolution_in_fp32(n.target, *self.fetch_args_kwargs_from_env(n))


def check_program(ep, model: Bank, xs, cases: list[Case], flow: str) -> list[Bound]:
    interp = TritonConvInterpreter(ep)
    outs = interp.run(*real_inputs(ep, model, xs))
    eager = tuple(eager_reference(conv, (x,)) for conv, x in zip(model.convs, xs, strict=True))
    assert len(outs) == len(eager) == len(cases)
    assert len(interp.bound) == len(cases), f"{len(interp.bound)} conv nodes bound for {len(cases)} convs"
    for case, conv, got, want in zip(cases, model.convs, outs, eager, strict=True):
        w = conv.weight
        reduction = int(w.shape[0 if isinstance(conv, nn.modules.conv._ConvTransposeNd) else 1]) * math.prod(
            w.shape[2:]
        )
        assert_close(got, want, reduction, f"{flow}/{case.name}: graph output vs eager module")
    by_case = {int(b.weight_fqn.split(".")[1]): b for b in interp.bound}
    assert sorted(by_case) == list(range(len(cases)))
    for i, case in enumerate(cases):
        b = by_case[i]
        conv = model.convs[i]
        a = b.args
        assert a.transposed == isinstance(conv, nn.modules.conv._ConvTransposeNd), case.name
        assert a.groups == conv.groups, case.name
        assert a.stride == tuple(conv.stride), case.name
        assert a.dilation == tuple(conv.dilation), case.name
        assert (a.bias is None) == (conv.bias is None), case.name
        if a.transposed:
            assert a.output_padding == tuple(conv.output_padding), case.name
        if flow == "lower":
            assert b.overload == case.preserved_as, f"{case.name}: preserved as {b.overload}"
            assert a.unbatched == (len(case.in_shape) == conv.weight.dim() - 1), case.name
            if isinstance(conv.padding, str):
                assert a.padding_before == tuple(
                    d * (k - 1) // 2 if conv.padding == "same" else 0
                    for d, k in zip(conv.dilation, conv.kernel_size, strict=True)
                ), case.name
        else:
            assert b.overload == aten.convolution.default, f"{case.name}: {b.overload}"
            assert not a.unbatched, case.name
    return interp.bound


# ---------------------------------------------------------------------------------------------------------
# The two flows
# ---------------------------------------------------------------------------------------------------------
@functools.cache
def _lowering_classes():
    """Defined once (ExecuTorch finds a backend by its class name), and only when a lowering test runs."""
    from executorch.exir.backend.backend_details import BackendDetails, PreprocessResult
    from executorch.exir.backend.partitioner import DelegationSpec, Partitioner, PartitionResult

    class NullConvTestBackend(BackendDetails):
        """Test-only backend: accepts every tagged convolution, emits an empty blob."""

        @staticmethod
        def preprocess(edge_program, compile_specs):
            return PreprocessResult(processed_bytes=b"")

    class PreserveConvsTestPartitioner(Partitioner):
        """Keeps the non-core convolution overloads, checks them in partition(), delegates each conv alone."""

        def __init__(self, check: Callable) -> None:
            super().__init__()
            self.check = check
            self.delegation = DelegationSpec(NullConvTestBackend.__name__, [])

        def ops_to_not_decompose(self, ep):
            return list(PRESERVED), None

        def partition(self, ep):
            self.check(ep)
            tags = {}
            for i, n in enumerate([n for n in ep.graph_module.graph.nodes if is_conv_node(n)]):
                tag = f"conv_{i}"
                n.meta["delegation_tag"] = tag
                tags[tag] = self.delegation
            return PartitionResult(tagged_exported_program=ep, partition_tags=tags)

    return NullConvTestBackend, PreserveConvsTestPartitioner


@pytest.mark.parametrize("bank", list(BANKS))
def test_to_edge(bank: str) -> None:
    from executorch.exir import to_edge

    model, xs, cases = make_bank(bank, "to_edge")
    edge = to_edge(torch.export.export(model, xs)).exported_program()
    check_program(edge, model, xs, cases, "to_edge")


@pytest.mark.parametrize("bank", list(BANKS))
def test_to_edge_transform_and_lower(bank: str) -> None:
    from executorch.exir import to_edge_transform_and_lower

    model, xs, cases = make_bank(bank, "lower")
    checked: list[list[Bound]] = []
    _, partitioner_cls = _lowering_classes()
    partitioner = partitioner_cls(lambda ep: checked.append(check_program(ep, model, xs, cases, "lower")))
    lowered = to_edge_transform_and_lower(torch.export.export(model, xs), partitioner=[partitioner])
    assert len(checked) == 1
    # every preserved conv was delegated: no convolution is left in the lowered graph
    assert not [n for n in lowered.exported_program().graph.nodes if is_conv_node(n)]


def test_matrix_covers_every_preserved_overload() -> None:
    seen = {c.preserved_as for cases in BANKS.values() for c in cases}
    assert seen == set(PRESERVED)
    assert {c.dtype for cases in BANKS.values() for c in cases} == {
        torch.float32,
        torch.float16,
        torch.bfloat16,
    }
    for tag, cases in BANKS.items():
        kinds = {(c.preserved_as, len(c.in_shape)) for c in cases}
        assert len(kinds) > 3, tag


def test_underscore_convolution_via_exception_list() -> None:
    from executorch.exir import EdgeCompileConfig, to_edge

    class M(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.w1 = nn.Parameter(torch.randn(6, 2, 3, 3))
            self.b1 = nn.Parameter(torch.randn(6))
            self.w2 = nn.Parameter(torch.randn(4, 3, 3, 2))

        def forward(self, x: torch.Tensor, y: torch.Tensor):
            a = aten._convolution(x, self.w1, self.b1, [2], [1], [1], False, [0], 2, False, False, True, True)
            b = aten._convolution(
                y, self.w2, None, [2, 1], [1, 0], [1, 2], True, [1, 0], 1, False, False, True, True
            )
            return a, b

    model = M().eval()
    xs = (torch.randn(2, 4, 7, 8), torch.randn(1, 4, 5, 5))
    ep = torch.export.export(model, xs)
    edge = to_edge(
        ep, compile_config=EdgeCompileConfig(_core_aten_ops_exception_list=[aten._convolution.default])
    )
    gm = edge.exported_program().graph_module
    convs = [n for n in gm.graph.nodes if is_conv_node(n)]
    assert [aten_overload(n.target) for n in convs] == [aten._convolution.default] * 2
    a, b = bind_conv(convs[0]), bind_conv(convs[1])
    assert (a.stride, a.padding_before, a.padding_after, a.dilation, a.groups, a.transposed) == (
        (2, 2),
        (1, 1),
        (1, 1),
        (1, 1),
        2,
        False,
    )
    assert (b.stride, b.padding_before, b.dilation, b.output_padding, b.transposed) == (
        (2, 1),
        (1, 0),
        (1, 2),
        (1, 0),
        True,
    )
    interp = TritonConvInterpreter(edge.exported_program())
    outs = interp.run(*real_inputs(edge.exported_program(), model, xs))
    for got, want in zip(outs, model(*xs), strict=True):
        assert_close(got, want.detach(), 54, "_convolution")


def test_dynamic_batch_binds_without_shape_checks() -> None:
    from executorch.exir import to_edge

    model = nn.Conv2d(4, 6, 3, padding=1, groups=2).eval()
    x = torch.randn(3, 4, 6, 6)
    batch = torch.export.Dim("batch", min=2, max=16)
    ep = torch.export.export(model, (x,), dynamic_shapes=({0: batch},))
    edge = to_edge(ep).exported_program()
    (node,) = [n for n in edge.graph.nodes if is_conv_node(n)]
    a = bind_conv(node)
    assert (a.stride, a.padding_before, a.padding_after, a.groups) == ((1, 1), (1, 1), (1, 1), 2)
    for n in (2, 5):
        x = torch.randn(n, 4, 6, 6)
        out = torch.ops.triton.convolution(x, model.weight.detach(), model.bias.detach(), *a.op_args())
        assert_close(out, model(x).detach(), 18, "dynamic batch")


# ---------------------------------------------------------------------------------------------------------
# Hand-built nodes: canonicalisation details and one error per validation rule
# ---------------------------------------------------------------------------------------------------------
def build(target, *args, **kwargs) -> Node:
    """A call_function node; tensor arguments are given as shapes (tuples) and become meta placeholders."""
    g = Graph()
    names = iter(["input", "weight", "bias", "extra"])

    def conv(a):
        if isinstance(a, Shape):
            n = g.placeholder(next(names))
            n.meta["val"] = torch.empty(tuple(a), device="meta")
            return n
        return a

    node = g.call_function(target, tuple(conv(a) for a in args), {k: conv(v) for k, v in kwargs.items()})
    node.name = "conv_under_test"
    return node


class Shape(tuple):
    pass


def S(*dims: int) -> Shape:
    return Shape(dims)


def expect_error(node: Node, *fragments: str) -> str:
    with pytest.raises(ConvBindingError) as info:
        bind_conv(node)
    msg = str(info.value)
    assert isinstance(info.value, ValueError)
    assert "conv_under_test" in msg or "not a" in msg, msg
    for f in fragments:
        assert f in msg, f"{f!r} not in {msg!r}"
    return msg


CONV = aten.convolution.default


def test_convolution_default_broadcasts_length_one_lists() -> None:
    a = bind_conv(build(CONV, S(2, 4, 9, 10), S(6, 2, 3, 3), None, [2], [1], [1], False, [0], 2))
    assert (a.stride, a.padding_before, a.padding_after, a.dilation, a.output_padding) == (
        (2, 2),
        (1, 1),
        (1, 1),
        (1, 1),
        (0, 0),
    )
    assert a.groups == 2 and not a.transposed and not a.unbatched and a.bias is None
    assert a.spatial_dims == 2 and a.params.symmetric_padding


def test_conv_padding_overload_defaults_to_valid() -> None:
    a = bind_conv(build(aten.conv2d.padding, S(2, 4, 9, 10), S(6, 4, 3, 3), S(6)))
    assert a.padding_before == a.padding_after == (0, 0)
    assert a.stride == a.dilation == (1, 1) and a.groups == 1 and a.bias is not None


def test_same_padding_puts_the_odd_element_after() -> None:
    a = bind_conv(build(aten.conv3d.padding, S(4, 9, 9, 9), S(6, 4, 2, 3, 4), None, [1], "same", [3, 2, 1]))
    # totals d*(k-1) = 3, 4, 3
    assert a.padding_before == (1, 2, 1) and a.padding_after == (2, 2, 2) and a.unbatched


def test_transposed_overload_groups_before_dilation() -> None:
    a = bind_conv(
        build(
            aten.conv_transpose2d.input, S(1, 4, 5, 5), S(4, 3, 3, 3), None, [2, 3], [1, 0], [1, 2], 2, [1, 3]
        )
    )
    assert a.transposed and a.groups == 2 and a.dilation == (1, 3) and a.output_padding == (1, 2)


def test_empty_input_channels_and_batch_bind() -> None:
    a = bind_conv(build(CONV, S(2, 0, 6, 6), S(4, 0, 3, 3), None, [1, 1], [0, 0], [1, 1], False, [0, 0], 1))
    assert a.groups == 1
    bind_conv(build(CONV, S(0, 4, 6, 6), S(4, 4, 3, 3), None, [1, 1], [0, 0], [1, 1], False, [0, 0], 1))


def test_edge_op_targets_are_recognised() -> None:
    from executorch.exir.dialects._ops import ops as exir_ops

    for op in CONV_OVERLOADS:
        packet = getattr(exir_ops.edge.aten, op._schema.name.split("::")[1])
        edge_op = getattr(packet, op._overloadname)
        assert aten_overload(edge_op) is op
    node = build(
        exir_ops.edge.aten.convolution.default, S(2, 4, 6), S(4, 6, 3), S(6), [1], [1], [1], True, [0], 1
    )
    a = bind_conv(node)
    assert a.transposed and a.bias is not None


# ---- one test per validation error ----------------------------------------------------------------------
def test_error_not_a_convolution() -> None:
    expect_error(build(aten.add.Tensor, S(2, 3), S(2, 3)), "not a convolution")
    g = Graph()
    expect_error(g.placeholder("x"), "not a call_function")


def test_error_weight_rank() -> None:
    expect_error(build(CONV, S(2, 4, 8), S(6, 4), None, [1], [0], [1], False, [0], 1), "'weight'", "rank 2")
    expect_error(build(aten.conv2d.default, S(2, 4, 8, 8, 8), S(6, 4, 3, 3, 3)), "'weight'", "2-D")


def test_error_input_rank() -> None:
    expect_error(build(aten.conv2d.default, S(2, 1, 4, 8, 8), S(6, 4, 3, 3)), "'input'", "rank 5")
    expect_error(build(aten.conv1d.default, S(8), S(6, 1, 3)), "'input'", "rank 1")


def test_error_unbatched_convolution_default() -> None:
    expect_error(
        build(CONV, S(4, 8, 8), S(6, 4, 3, 3), None, [1], [0], [1], False, [0], 1), "'input'", "unbatched"
    )


def test_error_channels_vs_groups() -> None:
    # C_out not divisible by groups
    expect_error(build(aten.conv2d.default, S(2, 4, 8, 8), S(6, 1, 3, 3), None, 1, 0, 1, 4), "'groups'")
    # C_in not divisible by groups
    expect_error(build(aten.conv2d.default, S(2, 5, 8, 8), S(6, 2, 3, 3), None, 1, 0, 1, 2), "'groups'")
    # transposed: C_in not divisible by groups
    expect_error(
        build(aten.conv_transpose2d.input, S(2, 3, 8, 8), S(3, 2, 3, 3), None, 1, 0, 0, 2), "'groups'"
    )
    # fewer output channels than groups (ATen: weight dim 0 must be >= groups)
    expect_error(build(CONV, S(2, 0, 8, 8), S(0, 0, 3, 3), None, [1], [0], [1], False, [0], 1), "'weight'")


def test_error_groups_non_positive() -> None:
    expect_error(build(aten.conv2d.default, S(2, 4, 8, 8), S(6, 4, 3, 3), None, 1, 0, 1, 0), "'groups'")


def test_error_weight_vs_input_channels() -> None:
    expect_error(build(aten.conv2d.default, S(2, 4, 8, 8), S(6, 3, 3, 3)), "'weight'", "input channels")
    expect_error(build(aten.conv2d.default, S(2, 4, 8, 8), S(6, 1, 3, 3), None, 1, 0, 1, 2), "'weight'")
    expect_error(
        build(aten.conv_transpose3d.input, S(2, 4, 4, 4, 4), S(6, 3, 2, 2, 2)),
        "'weight'",
        "(C_in, C_out/groups",
    )


def test_error_bias_length() -> None:
    expect_error(build(aten.conv2d.default, S(2, 4, 8, 8), S(6, 4, 3, 3), S(4)), "'bias'", "[6]")
    expect_error(build(aten.conv2d.default, S(2, 4, 8, 8), S(6, 4, 3, 3), S(1, 6)), "'bias'")
    # transposed: C_out = weight[1] * groups
    expect_error(
        build(aten.conv_transpose2d.input, S(2, 4, 8, 8), S(4, 3, 3, 3), S(3), 1, 0, 0, 2), "'bias'", "[6]"
    )


def test_error_stride_non_positive() -> None:
    expect_error(build(aten.conv2d.default, S(2, 4, 8, 8), S(6, 4, 3, 3), None, [1, 0]), "'stride'")
    expect_error(build(aten.conv_transpose1d.default, S(2, 4, 8), S(4, 6, 3), None, [-1]), "'stride'")


def test_error_dilation_non_positive() -> None:
    expect_error(build(aten.conv2d.default, S(2, 4, 8, 8), S(6, 4, 3, 3), None, 1, 0, [0, 1]), "'dilation'")
    expect_error(build(CONV, S(2, 4, 8), S(4, 6, 3), None, [1], [0], [-2], True, [0], 1), "'dilation'")


def test_error_negative_padding() -> None:
    expect_error(build(aten.conv2d.default, S(2, 4, 8, 8), S(6, 4, 3, 3), None, 1, [1, -1]), "'padding'")
    expect_error(build(aten.conv_transpose2d.input, S(2, 4, 8, 8), S(4, 6, 3, 3), None, 1, -1), "'padding'")


def test_error_negative_output_padding() -> None:
    expect_error(build(CONV, S(2, 4, 8), S(4, 6, 3), None, [2], [0], [1], True, [-1], 1), "'output_padding'")
    expect_error(build(CONV, S(2, 4, 8), S(6, 4, 3), None, [2], [0], [1], False, [-1], 1), "'output_padding'")


def test_error_output_padding_not_below_stride_or_dilation() -> None:
    expect_error(
        build(aten.conv_transpose2d.input, S(2, 4, 8, 8), S(4, 6, 3, 3), None, 2, 0, [1, 2]),
        "'output_padding'",
        "max(stride, dilation)",
    )
    # allowed when smaller than the dilation (and the stride is smaller):
    # see test_output_padding_below_dilation_is_valid
    expect_error(
        build(CONV, S(2, 4, 8, 8), S(4, 6, 3, 3), None, [1], [0], [2], True, [2], 1), "'output_padding'"
    )


def test_output_padding_below_dilation_is_valid() -> None:
    a = bind_conv(build(CONV, S(2, 4, 8), S(4, 6, 3), None, [1], [0], [3], True, [2], 1))
    assert a.output_padding == (2,)


def test_error_same_with_stride() -> None:
    expect_error(
        build(aten.conv2d.padding, S(2, 4, 8, 8), S(6, 4, 3, 3), None, [1, 2], "same"), "'padding'", "strided"
    )


def test_error_unknown_string_padding() -> None:
    expect_error(build(aten.conv1d.padding, S(2, 4, 8), S(6, 4, 3), None, 1, "full"), "'padding'", "'full'")


def test_error_string_padding_on_transposed_conv() -> None:
    expect_error(
        build(aten.conv_transpose2d.input, S(2, 4, 8, 8), S(4, 6, 3, 3), None, 1, "same"), "'padding'"
    )
    expect_error(build(aten.conv_transpose1d.default, S(2, 4, 8), S(4, 6, 3), None, 1, "valid"), "'padding'")


def test_error_list_length() -> None:
    expect_error(
        build(aten.conv2d.default, S(2, 4, 8, 8), S(6, 4, 3, 3), None, [1, 1, 1]), "'stride'", "3 entries"
    )


def test_error_kernel_larger_than_padded_input() -> None:
    expect_error(
        build(aten.conv2d.default, S(2, 4, 4, 8), S(6, 4, 3, 3), None, 1, 0, [2, 1]),
        "'input'",
        "dilated kernel",
    )


def test_error_transposed_output_empty() -> None:
    expect_error(
        build(aten.conv_transpose1d.default, S(2, 4, 2), S(4, 6, 3), None, 1, 3), "'padding'", "empty"
    )
    expect_error(
        build(aten.conv_transpose1d.default, S(2, 4, 2), S(4, 6, 3), None, 1, 2), "'padding'", "size 0"
    )
    bind_conv(build(aten.conv_transpose1d.default, S(2, 4, 2), S(4, 6, 3), None, 1, 1))


def test_error_input_without_meta_val() -> None:
    g = Graph()
    x, w = g.placeholder("x"), g.placeholder("w")
    w.meta["val"] = torch.empty(6, 4, 3, device="meta")
    node = g.call_function(aten.conv1d.default, (x, w))
    node.name = "conv_under_test"
    expect_error(node, "'x'", "meta['val']")


# ---------------------------------------------------------------------------------------------------------
# The canonical op's semantics (docs/convolution.md) against a direct implementation of the definitions
# ---------------------------------------------------------------------------------------------------------
def _direct(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None, p) -> torch.Tensor:
    """docs/convolution.md's formulas, written out with slices (batched input)."""
    n, g = p.spatial_dims, p.groups
    nb, c_in, spatial = x.shape[0], x.shape[1], x.shape[2:]
    k = w.shape[2:]
    offsets = list(itertools.product(*[range(kk) for kk in k]))
    if not p.transposed:
        c_out = w.shape[0]
        xp = torch.zeros(
            nb,
            c_in,
            *[L + a + z for L, a, z in zip(spatial, p.padding_before, p.padding_after, strict=True)],
            dtype=x.dtype,
        )
        xp[
            (
                slice(None),
                slice(None),
                *[slice(a, a + L) for a, L in zip(p.padding_before, spatial, strict=True)],
            )
        ] = x
        out_len = [
            (L + a + z - (d * (kk - 1) + 1)) // s + 1
            for L, a, z, d, kk, s in zip(
                spatial, p.padding_before, p.padding_after, p.dilation, k, p.stride, strict=True
            )
        ]
        out = torch.zeros(nb, c_out, *out_len, dtype=x.dtype)
        for j in range(g):
            oc, ic = slice(j * c_out // g, (j + 1) * c_out // g), slice(j * c_in // g, (j + 1) * c_in // g)
            for t in offsets:
                window = tuple(
                    slice(ti * d, ti * d + s * (o - 1) + 1, s)
                    for ti, d, s, o in zip(t, p.dilation, p.stride, out_len, strict=True)
                )
                out[:, oc] += torch.einsum(
                    "oc,nc...->no...", w[(oc, slice(None), *t)], xp[(slice(None), ic, *window)]
                )
    else:
        c_out = w.shape[1] * g
        full_len = [
            (L - 1) * s + d * (kk - 1) + 1
            for L, s, d, kk in zip(spatial, p.stride, p.dilation, k, strict=True)
        ]
        full = torch.zeros(nb, c_out, *full_len, dtype=x.dtype)
        for j in range(g):
            oc, ic = slice(j * c_out // g, (j + 1) * c_out // g), slice(j * c_in // g, (j + 1) * c_in // g)
            for t in offsets:
                window = tuple(
                    slice(ti * d, ti * d + s * (L - 1) + 1, s)
                    for ti, d, s, L in zip(t, p.dilation, p.stride, spatial, strict=True)
                )
                full[(slice(None), oc, *window)] += torch.einsum(
                    "co,nc...->no...", w[(ic, slice(None), *t)], x[:, ic]
                )
        ext = torch.zeros(
            nb, c_out, *[f + o for f, o in zip(full_len, p.output_padding, strict=True)], dtype=x.dtype
        )
        ext[(slice(None), slice(None), *[slice(0, f) for f in full_len])] = full
        out_len = [
            f + o - a - z
            for f, o, a, z in zip(full_len, p.output_padding, p.padding_before, p.padding_after, strict=True)
        ]
        out = ext[
            (
                slice(None),
                slice(None),
                *[slice(a, a + o) for a, o in zip(p.padding_before, out_len, strict=True)],
            )
        ]
    if b is not None:
        out = out + b.reshape(1, -1, *([1] * n))
    return out


def test_canonical_op_matches_the_documented_definition() -> None:
    from cuda_triton.conv import ConvParams

    rng = random.Random(5)
    gen = torch.Generator().manual_seed(5)
    for _ in range(120):
        n = rng.choice([1, 2, 3])
        transposed = rng.random() < 0.5
        g = rng.choice([1, 2])
        cin, cout = g * rng.choice([1, 2]), g * rng.choice([1, 2])
        k = [rng.choice([1, 2, 3]) for _ in range(n)]
        s = [rng.choice([1, 2, 3]) for _ in range(n)]
        d = [rng.choice([1, 2]) for _ in range(n)]
        pb = [rng.randrange(3) for _ in range(n)]
        pa = [rng.randrange(3) for _ in range(n)]
        if transposed:
            op = [rng.randrange(max(si, di)) for si, di in zip(s, d, strict=True)]
            L = [rng.choice([1, 2, 4]) for _ in range(n)]
            if any(
                (ln - 1) * si + di * (ki - 1) + 1 + o - a - z < 1
                for ln, si, di, ki, o, a, z in zip(L, s, d, k, op, pb, pa, strict=True)
            ):
                pb = pa = [0] * n
            w = torch.randn(cin, cout // g, *k, generator=gen, dtype=torch.float64)
        else:
            op = [0] * n
            L = [di * (ki - 1) + 1 + rng.randrange(4) for di, ki in zip(d, k, strict=True)]
            w = torch.randn(cout, cin // g, *k, generator=gen, dtype=torch.float64)
        p = ConvParams(tuple(s), tuple(pb), tuple(pa), tuple(d), transposed, tuple(op), g)
        unbatched = rng.random() < 0.2
        x = torch.randn(*([] if unbatched else [2]), cin, *L, generator=gen, dtype=torch.float64)
        b = torch.randn(cout, generator=gen, dtype=torch.float64) if rng.random() < 0.5 else None
        got = torch.ops.triton.convolution(x, w, b, *p.as_op_args())
        want = _direct(x.unsqueeze(0) if unbatched else x, w, b, p)
        want = want.squeeze(0) if unbatched else want
        torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12, msg=lambda m, p=p: f"{p}: {m}")


def test_get_attr_and_shape_prop_graphs_bind() -> None:
    """Unlifted graphs (weights as get_attr) and ShapeProp's tensor_meta are read as well as meta['val']."""
    from torch.fx import GraphModule
    from torch.fx.passes.shape_prop import ShapeProp

    root = nn.Module()
    root.weight = nn.Parameter(torch.randn(6, 2, 3, 3))
    g = Graph()
    x = g.placeholder("x")
    w = g.get_attr("weight")
    conv = g.call_function(aten.conv2d.default, (x, w, None, [2, 1], [1, 1], [1, 1], 2))
    g.output(conv)
    gm = GraphModule(root, g)
    ShapeProp(gm).propagate(torch.randn(1, 4, 7, 7).to(memory_format=torch.channels_last))
    for n in gm.graph.nodes:
        n.meta.pop("val", None)
    a = bind_conv(conv)
    assert (a.stride, a.groups, a.padding_before) == ((2, 1), 2, (1, 1))


def test_underscore_convolution_deprecated_overload() -> None:
    node = build(
        aten._convolution.deprecated,
        S(2, 4, 9),
        S(4, 3, 3),
        S(3),
        [2],
        [1],
        [1],
        True,
        [1],
        1,
        False,
        False,
        True,
    )
    a = bind_conv(node)
    assert a.transposed and a.output_padding == (1,) and a.padding_before == (1,) and a.stride == (2,)
