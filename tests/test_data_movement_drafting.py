"""Data-movement ops drafted into the blob, run on the CPU emulator (`cuda_triton.tools.emulate_pte`).

Checks, in fp32, fp16 and bf16 with random small inputs, that models mixing convolutions with data movement
(flatten/view -> permute chains, cat of two convolution outputs, split + getitems, constant pads, nearest and
bilinear upsampling, a pad before a convolution that cannot fold it, dtype casts, channels-last inputs and
``.contiguous()``, select/slice/expand, a cat with a constant part) export as ONE delegate with nothing left
outside, and that the emulated blob matches eager PyTorch. Also: a view between two kernels is a view value and
costs no record or launch, a split's parts are views when their readers take them, the records each op becomes,
and an op the blob cannot describe fails a strict export naming the node and why (or stays on the CPU).
"""

from __future__ import annotations

import os

os.environ.setdefault("TRITON_INTERPRET", "1")

import operator  # noqa: E402

import pytest  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402

pytest.importorskip("executorch")
if os.environ.get("TRITON_INTERPRET") != "1":  # a GPU machine: the emulator needs the interpreter
    pytest.skip("needs TRITON_INTERPRET=1", allow_module_level=True)

from cuda_triton import CudaTritonPartitioner  # noqa: E402
from cuda_triton.conv.binding import aten_overload  # noqa: E402
from cuda_triton.partition.config import DataMovementConfig, Verdict  # noqa: E402
from cuda_triton.partition.partitioner import DeclinedOpsError  # noqa: E402
from cuda_triton.preprocess.draft import CudaTritonPreprocessError  # noqa: E402
from cuda_triton.serialization import (  # noqa: E402
    CatRecord,
    ConvRecord,
    CopyRecord,
    DataMovementRecord,
    ElementwiseRecord,
    PadRecord,
    PermuteRecord,
    ReshapeRecord,
    SplitRecord,
)
from cuda_triton.serialization.blob import deserialize  # noqa: E402
from cuda_triton.tools import emulate_pte as E  # noqa: E402
from cuda_triton.tools.emulate_blob import rel_err  # noqa: E402
from executorch.exir import to_edge_transform_and_lower  # noqa: E402
from executorch.exir.lowered_backend_module import LoweredBackendModule  # noqa: E402

pytestmark = pytest.mark.timeout(120)

DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
TOL = {"fp32": 2e-3, "fp16": 2e-2, "bf16": 5e-2}


@pytest.fixture(autouse=True)
def no_prefetch(monkeypatch):
    monkeypatch.setenv("CUDA_TRITON_PREFETCH", "0")


# ---- models ----------------------------------------------------------------------------------------------------
class FlattenPermute(nn.Module):
    """conv -> flatten -> permute -> relu (views the chain reads in place), and the permute as an output (a copy)."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)

    def forward(self, x):
        t = self.conv(x).flatten(2).permute(0, 2, 1)
        return torch.relu(t) * 2.0, t.reshape(-1, 8)


class CatConvs(nn.Module):
    """cat of two convolution outputs along channels, then a convolution and a cat along width as an output."""

    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Conv2d(3, 4, 3, padding=1)
        self.b = nn.Conv2d(3, 6, 1)
        self.c = nn.Conv2d(10, 5, 3, padding=1)

    def forward(self, x):
        a, b = self.a(x), self.b(x)
        return self.c(torch.cat([a, b], 1)), torch.cat([a, a], 3)


class SplitConvs(nn.Module):
    """split -> each part read by a convolution, an elementwise op and a delegate output."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, 12, 1)
        self.left = nn.Conv2d(4, 4, 3, padding=1)

    def forward(self, x):
        p, q, r = torch.split(self.stem(x), [4, 6, 2], 1)
        return self.left(p), torch.sigmoid(q), r


class PadUpsample(nn.Module):
    """constant pads (growing, cropping, a fill value), nearest (scale) and bilinear (size) upsampling."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 6, 3, padding=1)

    def forward(self, x):
        y = self.conv(x)
        padded = torch.relu(F.pad(y, (1, 2, 0, 1), value=0.5))
        cropped = F.pad(y, (-1, 1, 2, -2))
        near = F.interpolate(y, scale_factor=2, mode="nearest")
        bilinear = F.interpolate(y, size=(5, 11), mode="bilinear", align_corners=False)
        corners = F.interpolate(y, scale_factor=1.5, mode="bilinear", align_corners=True)
        return padded, cropped, near, bilinear, corners


class PadsBeforeConvs(nn.Module):
    """A zero causal pad (folded into the conv) and a pad with a fill value (a pad kernel the next conv reads)."""

    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Conv2d(3, 6, 3)
        self.b = nn.Conv2d(6, 4, 3)

    def forward(self, x):
        y = self.a(F.pad(x, (2, 0, 2, 0)))
        return self.b(F.pad(y, (1, 1, 1, 1), value=0.25))


class Casts(nn.Module):
    """dtype casts between ops: to the other float dtypes and back, as copies with a dtype change."""

    def __init__(self, other: torch.dtype) -> None:
        super().__init__()
        self.other = other
        self.a = nn.Conv2d(3, 8, 3, padding=1)
        self.b = nn.Conv2d(8, 4, 1)

    def forward(self, x):
        y = self.a(x)
        z = torch.relu(y.to(self.other)).to(y.dtype)
        return self.b(z), y.float()


class ChannelsLast(nn.Module):
    """A channels-last input: flatten (a copy: no view of channels-last bytes flattens NCHW), ``.contiguous()``,
    a cat, a pad and an upsample in channels-last layout."""

    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Conv2d(4, 8, 3, padding=1)
        self.b = nn.Conv2d(4, 8, 1)

    def forward(self, x):
        a, b = self.a(x), self.b(x)
        cat = torch.cat([a, b], 1)
        return (
            a.flatten(1),
            b.contiguous() + 1.0,
            F.pad(cat, (1, 1, 1, 1)),
            F.interpolate(cat, scale_factor=2, mode="nearest"),
        )


class SelectSliceExpand(nn.Module):
    """select, strided slices and expand, read by elementwise ops and written as outputs."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)

    def forward(self, x):
        y = self.conv(x)
        first = y[:, 1]  # select: an output, so a copy
        strided = y[:, 2:7:2, :, 1:]  # slice of a slice
        wide = y[:, :1].expand(-1, 8, -1, -1)
        return first, torch.relu(strided), wide * y, y.unsqueeze(2).squeeze(2) - 1.0


class ConstantPart(nn.Module):
    """A cat with a learned token (a constant of the program) next to a convolution output, as ViT's class token."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 6, 3, padding=1)
        self.token = nn.Parameter(torch.randn(1, 2, 5, 5))

    def forward(self, x):
        y = self.conv(x)
        return torch.cat([self.token.expand(y.shape[0], -1, -1, -1), y], 1)


def _models(dtype: torch.dtype) -> dict[str, tuple[nn.Module, tuple[torch.Tensor, ...]]]:
    other = torch.float16 if dtype != torch.float16 else torch.float32
    x = torch.randn(2, 3, 5, 5)
    cl = torch.randn(2, 4, 5, 5).to(memory_format=torch.channels_last)
    return {
        "flatten_permute": (FlattenPermute(), (x,)),
        "cat": (CatConvs(), (x,)),
        "split": (SplitConvs(), (x,)),
        "pad_upsample": (PadUpsample(), (x,)),
        "pads_before_convs": (PadsBeforeConvs(), (x,)),
        "casts": (Casts(other), (x,)),
        "channels_last": (ChannelsLast(), (cl,)),
        "select_slice_expand": (SelectSliceExpand(), (x,)),
        "constant_part": (ConstantPart(), (x,)),
    }


MODELS = list(_models(torch.float32))


# ---- helpers ---------------------------------------------------------------------------------------------------
def _build(name: str, dtype: str) -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    torch.manual_seed(0)
    model, example = _models(DTYPES[dtype])[name]
    model = model.eval().to(DTYPES[dtype])
    return model, tuple(x.to(DTYPES[dtype]) for x in example)


def _lowered(ep) -> list[LoweredBackendModule]:
    return [m for _, m in ep.graph_module.named_modules() if isinstance(m, LoweredBackendModule)]


def _outside(ep) -> list[str]:
    """The ops of the lowered program other than the delegate call and the getitems reading its outputs."""
    return [
        str(aten_overload(n.target))
        for n in ep.graph.nodes
        if n.op == "call_function"
        and n.target is not operator.getitem
        and "executorch_call_delegate" not in str(n.target)
    ]


def _blob(model: nn.Module, example: tuple[torch.Tensor, ...]):
    ep = E.lower(model, example)
    (lowered,) = _lowered(ep)
    return deserialize(lowered.processed_bytes)


# ---- whole models against eager --------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("name", MODELS)
def test_model_is_one_delegate_matching_eager(name: str, dtype: str) -> None:
    model, example = _build(name, dtype)
    ep = E.lower(model, example)
    assert len(_lowered(ep)) == 1, "expected one delegate"
    assert _outside(ep) == [], f"ops left outside the delegate: {_outside(ep)}"
    err, run = E.check_model(model, example, verbose=False)
    assert len(run.delegates) == 1
    for what, e, tol in run.op_errors:
        assert e <= tol, f"op {what}: rel err {e:.2e} > {tol:.0e}"
    assert err <= TOL[dtype], f"program output rel err {err:.2e} > {TOL[dtype]:.0e}"


# ---- what the blob holds ---------------------------------------------------------------------------------------
class ConvViewConv(nn.Module):
    """conv -> view (a reshape the bytes allow) -> relu -> view back -> conv: the views are view values."""

    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Conv2d(3, 8, 3, padding=1)
        self.b = nn.Conv2d(8, 4, 1)

    def forward(self, x):
        y = torch.relu(self.a(x).reshape(2, 8, 25))
        return self.b(y.view(2, 8, 5, 5))


def test_a_view_between_two_kernels_adds_no_record_or_launch() -> None:
    torch.manual_seed(0)
    model, example = ConvViewConv().eval(), (torch.randn(2, 3, 5, 5),)
    blob = _blob(model, example)
    kinds = [type(op).__name__ for op in blob.ops]
    # The views add nothing. The (2, 8, 25) view of the first convolution's channels-last result is stored
    # (N, L, C), the relu keeps that layout (layout_plan.channels_last_like), so the second convolution reads a
    # channels-last map and writes a channels-last result: one copy into the program's contiguous output.
    assert kinds == ["ConvRecord", "ElementwiseRecord", "ConvRecord", "ElementwiseRecord"], kinds
    assert sum(v.kind == "view" for v in blob.values) == 2
    err, run = E.check_model(model, example, verbose=False)
    assert err <= TOL["fp32"] and len(run.delegates) == 1


def test_a_permute_read_by_an_elementwise_op_is_a_view_and_as_an_output_a_copy() -> None:
    model, example = _build("flatten_permute", "fp32")
    blob = _blob(model, example)
    moves = [op for op in blob.ops if isinstance(op, DataMovementRecord)]
    # relu reads the flatten + permute views in place; the reshape of the permuted view cannot be a view
    # (the delegate output owns its bytes): one reshape copy, no permute copy.
    assert [type(op) for op in moves] == [ReshapeRecord], moves
    assert sum(isinstance(op, ElementwiseRecord) for op in blob.ops) == 1
    # The input of the reshape is the permuted view of the convolution's output (in whichever layout the
    # delegate stores that: flatten(2) merges H and W, whose inner stride is W's).
    source = blob.values[moves[0].input]
    (conv,) = [op for op in blob.ops if isinstance(op, ConvRecord)]
    s = blob.values[conv.output].strides
    assert source.kind == "view" and source.sizes == [2, 25, 8] and source.strides == [s[0], s[3], s[1]]


def test_split_parts_are_views_unless_their_readers_need_a_copy() -> None:
    model, example = _build("split", "fp32")
    blob = _blob(model, example)
    moves = [op for op in blob.ops if isinstance(op, DataMovementRecord)]
    # q (channels 4..9, read by sigmoid, which takes any strides) is a view; p is read by a convolution, which
    # takes only dense inputs (a channel slice of the stem's output is not), and r is a delegate output: each a
    # slice copy, and no split record.
    assert sorted((type(op).__name__, op.start, op.end) for op in moves) == [
        ("SliceRecord", 0, 4),
        ("SliceRecord", 10, 12),
    ]
    # The stem's output is stored channels-last (strides 300, 1, 60, 12), so q is 4 floats in, with its strides.
    views = [v for v in blob.values if v.kind == "view"]
    assert [(v.sizes, v.strides, v.offset) for v in views] == [([2, 6, 5, 5], [300, 1, 60, 12], 16)]


class SplitOutputs(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 6, 1)

    def forward(self, x):
        return torch.split(self.conv(x), [2, 4], 1)


def test_a_split_into_outputs_is_one_split_record() -> None:
    torch.manual_seed(0)
    model, example = SplitOutputs().eval(), (torch.randn(1, 3, 4, 4),)
    blob = _blob(model, example)
    (split,) = [op for op in blob.ops if isinstance(op, SplitRecord)]
    assert len(split.outputs) == 2 and len(split.launches) == 2
    err, _ = E.check_model(model, example, verbose=False)
    assert err <= TOL["fp32"]


def test_a_pad_the_conv_cannot_fold_is_a_pad_kernel_it_reads() -> None:
    model, example = _build("pads_before_convs", "fp32")
    blob = _blob(model, example)
    a, pad, b, copy = blob.ops
    assert isinstance(a, ConvRecord) and a.padding_before == [2, 2] and a.padding_after == [0, 0]
    assert isinstance(pad, PadRecord) and pad.value == 0.25 and pad.input == a.output
    assert isinstance(b, ConvRecord) and b.input == pad.output and b.padding_before == [0, 0]
    # b reads a channels-last intermediate, so it writes channels-last; the delegate output is contiguous.
    assert isinstance(copy, ElementwiseRecord) and copy.inputs[0].value == b.output
    assert blob.values[copy.output].kind == "output"


def test_records_of_cat_and_casts() -> None:
    model, example = _build("cat", "fp32")
    blob = _blob(model, example)
    cats = [op for op in blob.ops if isinstance(op, CatRecord)]
    assert sorted(op.dim for op in cats) == [1, 3] and all(len(op.launches) == 2 for op in cats)
    assert sum(isinstance(op, ConvRecord) for op in blob.ops) == 3
    model, example = _build("casts", "fp32")
    blob = _blob(model, example)
    copies = [op for op in blob.ops if isinstance(op, CopyRecord)]
    assert len(copies) == 2  # fp32 -> fp16 and back (y.float() of an fp32 tensor is y: no op)
    assert {blob.values[op.output].dtype for op in copies} == {"fp16", "fp32"}
    assert not any(isinstance(op, PermuteRecord) for op in blob.ops)


# ---- what the blob cannot describe -----------------------------------------------------------------------------
class UnalignedAsStrided(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 1)

    def forward(self, x):
        return self.conv(x).as_strided((2, 3), (4, 1), 5)


def test_an_as_strided_from_an_unaligned_offset_fails_a_strict_export_naming_why() -> None:
    model, example = UnalignedAsStrided().eval(), (torch.randn(1, 3, 4, 4),)
    with pytest.raises(
        DeclinedOpsError, match=r"as_strided_copy: it reads from element 5 of its input \(20 bytes"
    ):
        E.lower(model, example)


def test_without_strict_the_unaligned_as_strided_stays_on_the_cpu() -> None:
    torch.manual_seed(0)
    model, example = UnalignedAsStrided().eval(), (torch.randn(1, 3, 4, 4),)
    with E.fake_compile():
        ep = torch.export.export(model, example)
        edge = to_edge_transform_and_lower(ep, partitioner=[CudaTritonPartitioner(strict=False)])
    lowered = edge.exported_program()
    assert len(_lowered(lowered)) == 1 and _outside(lowered) == ["aten.as_strided_copy.default"]
    run = E.run_program(lowered, example)
    assert rel_err(run.output, model(*example).detach()) <= TOL["fp32"]


def test_the_drafter_refuses_what_the_blob_cannot_describe(monkeypatch) -> None:
    """Should a partition config take it anyway, the preprocess fails naming the node and why."""
    monkeypatch.setattr(DataMovementConfig, "check", lambda self, node, ctx: Verdict.yes())
    model, example = UnalignedAsStrided().eval(), (torch.randn(1, 3, 4, 4),)
    with pytest.raises(CudaTritonPreprocessError, match=r"'aten_as_strided_copy_default'.*20 bytes in"):
        E.lower(model, example)
