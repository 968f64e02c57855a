"""Fused convolution prologues (`cuda_triton.conv.epilogue`): an elementwise chain on a convolution's input.

Checks how a prologue reads its operands, the GEMM template's kernel with a squeeze-excitation chain
(``x * sigmoid(s)`` per image and channel) against ATen in the interpreter in every dtype, with and without
split-K, its AOT compile for sm_80 and sm_90, and whole small networks: which chains the delegate fuses into the
next convolution, with the emulated blob matching eager PyTorch with fusion on and off.
"""

from __future__ import annotations

import os
from dataclasses import replace
from typing import Any

os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest  # noqa: E402
import torch  # noqa: E402
from cuda_triton.conv import ConvParams, ConvProblem  # noqa: E402
from cuda_triton.conv.epilogue import PER_NC, ConvPrologue, EpilogueOperand, prologue_operand  # noqa: E402
from cuda_triton.conv.op import output_layout, reference_convolution  # noqa: E402
from cuda_triton.conv.templates import get_template  # noqa: E402
from cuda_triton.conv.templates._interpreter import patch_interpreter_bf16_dot  # noqa: E402
from cuda_triton.conv.templates._splitk import split_k_of  # noqa: E402
from cuda_triton.conv.templates.epilogue_args import MAX_PROLOGUE_IMAGES, prologue_images  # noqa: E402
from cuda_triton.ops.elementwise.program import instruction  # noqa: E402
from cuda_triton.ops.elementwise.reference import run_program  # noqa: E402
from ops_helpers import assert_one_delegate_matches_eager  # noqa: E402
from torch import nn  # noqa: E402

DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
TOL = {"fp32": 1e-4, "fp16": 1e-2, "bf16": 3e-2}
# x * sigmoid(s): value 0 is the input element, value 1 the per-(N, C) scale
SE_CHAIN = (instruction("sigmoid", 1), instruction("mul", 0, 4))


def test_prologue_operand_kinds() -> None:
    x = (2, 16, 5, 6)
    assert prologue_operand((2, 16, 1, 1), (16, 1, 16, 16), "fp16", x) == EpilogueOperand(
        PER_NC, "fp16", 16, 1
    )
    assert prologue_operand((16, 1, 1), (1, 1, 1), "fp32", x) == EpilogueOperand(PER_NC, "fp32", 0, 1)
    assert prologue_operand((1, 16, 1, 1), (16, 1, 1, 1), "fp32", x) == EpilogueOperand(PER_NC, "fp32", 0, 1)
    assert prologue_operand(x, (480, 1, 96, 16), "fp16", x) is None  # a second map
    assert prologue_operand((2, 16, 5, 1), (80, 5, 1, 1), "fp16", x) is None  # varies over space
    assert prologue_operand((2, 8, 1, 1), (8, 1, 1, 1), "fp16", x) is None  # other channels


def _case(dtype: str, cin: int, hw: tuple[int, int], cout: int, batch: int = 2):
    x = torch.randn(batch, cin, *hw, dtype=DTYPES[dtype]).to(memory_format=torch.channels_last)
    w = (torch.randn(cout, cin, 1, 1, dtype=DTYPES[dtype]) / cin**0.5).to(memory_format=torch.channels_last)
    s = torch.randn(batch, cin, 1, 1, dtype=DTYPES[dtype]).to(memory_format=torch.channels_last)
    p = ConvParams((1, 1), (0, 0), (0, 0), (1, 1), False, (0, 0), 1)
    operand = prologue_operand(list(s.shape), list(s.stride()), "fp32" if dtype == "fp32" else dtype, x.shape)
    assert operand is not None
    base = ConvProblem.from_tensors(x, w, torch.empty(cout), p, allow_tf32=False)
    return base, replace(base, prologue=ConvPrologue(SE_CHAIN, (operand,))), x, w, s


def _run(template, problem, schedule, x, w, s, bias):
    sizes, strides = output_layout(x, w, problem.params)
    out = torch.empty_strided(sizes, strides, dtype=x.dtype).fill_(float("nan"))
    tensors = {
        "input": x, "weight": template.prepare_weight(w, problem, schedule), "bias": bias, "output": out,
        "prologue1": s, **template.allocate_scratch(problem, schedule, "cpu"),
    }  # fmt: skip
    for launch in template.launches(problem, schedule):
        launch.run(tensors)
    return out


def _reference(x, w, s, bias, params):
    scaled = run_program(SE_CHAIN, [x, s]).to(x.dtype)  # what the standalone kernel would store
    return reference_convolution(scaled.double(), w.double(), bias.double(), params)


@pytest.mark.timeout(600)
@pytest.mark.parametrize("dtype", list(DTYPES))
def test_gemm_kernel_applies_the_prologue(dtype: str) -> None:
    """conv1x1(x * sigmoid(s)) + bias in one launch; K and M not multiples of the tile (masked edges)."""
    torch.manual_seed(0)
    patch_interpreter_bf16_dot()
    _, problem, x, w, s = _case(dtype, 40, (5, 3), 24)
    bias = torch.randn(24, dtype=x.dtype)
    template = get_template("gemm")
    schedule = template.heuristic_schedule(problem)
    assert template.supports(problem) and template.takes_prologue(problem, schedule)
    out = _run(template, problem, schedule, x, w, s, bias)
    ref = _reference(x, w, s, bias, problem.params)
    assert not out.isnan().any()
    err = (out.double() - ref).abs().max() / ref.abs().max()
    assert err <= TOL[dtype], err


@pytest.mark.timeout(600)
def test_tiles_across_images_read_each_rows_own_scale() -> None:
    """Tiles whose rows span several images (a per-image channel vector each, selected per row) and more images
    than that path takes (a gather per element): every row is scaled by its own image's operand."""
    torch.manual_seed(0)
    _, problem, x, w, s = _case("fp32", 20, (4, 4), 16, batch=9)  # 16 pixels per image
    template = get_template("gemm")
    by_images: dict[int, Any] = {}
    for schedule in template.schedules(problem):
        if template.takes_prologue(problem, schedule) and split_k_of(schedule) == 1:
            by_images.setdefault(prologue_images(problem, schedule["BLOCK_M"]), schedule)
    spans = sorted(by_images)
    assert spans[0] == 0 and 1 < spans[-1] <= MAX_PROLOGUE_IMAGES, spans
    bias = torch.randn(16)
    ref = _reference(x, w, s, bias, problem.params)
    for images in (0, spans[-1]):
        out = _run(template, problem, by_images[images], x, w, s, bias)
        assert not out.isnan().any() and (out.double() - ref).abs().max() / ref.abs().max() <= 1e-4, images


@pytest.mark.timeout(600)
def test_split_k_shares_apply_the_prologue() -> None:
    torch.manual_seed(0)
    base, problem, x, w, s = _case("fp32", 256, (4, 4), 32, batch=1)
    template = get_template("gemm")
    split = [sc for sc in template.schedules(base) if split_k_of(sc) > 1]
    assert split and template.takes_prologue(problem, split[0])
    bias = torch.randn(32)
    out = _run(template, problem, split[0], x, w, s, bias)
    ref = _reference(x, w, s, bias, problem.params)
    assert not out.isnan().any() and (out.double() - ref).abs().max() / ref.abs().max() <= 1e-4


@pytest.mark.timeout(600)
@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("kernel", [1, 3])
def test_implicit_gemm_applies_the_prologue(dtype: str, kernel: int) -> None:
    """The implicit GEMM's channel-block and flat-K loops, with a chain that is not zero at zero (x * sigmoid(s)
    + 1): the 3x3's zero padding must stay zero, not become the chain's value."""
    torch.manual_seed(0)
    patch_interpreter_bf16_dot()
    chain = (*SE_CHAIN, instruction("add", 5, -1, c0=1.0))
    for cin in (35, 3):  # 3 channels: the flat-K loop; 35 x 9 taps stays under PROLOGUE_MAX_K
        x = torch.randn(2, cin, 5, 6, dtype=DTYPES[dtype]).to(memory_format=torch.channels_last)
        w = (torch.randn(24, cin, kernel, kernel, dtype=DTYPES[dtype]) / (cin * kernel * kernel) ** 0.5).to(
            memory_format=torch.channels_last
        )
        s = torch.randn(2, cin, 1, 1, dtype=DTYPES[dtype]).to(memory_format=torch.channels_last)
        pad = kernel // 2
        p = ConvParams((1, 1), (pad, pad), (pad, pad), (1, 1), False, (0, 0), 1)
        operand = prologue_operand(list(s.shape), list(s.stride()), dtype, x.shape)
        base = ConvProblem.from_tensors(x, w, torch.empty(24), p, allow_tf32=False)
        problem = replace(base, prologue=ConvPrologue(chain, (operand,)))  # type: ignore[arg-type]
        template = get_template("implicit_gemm")
        schedule = template.heuristic_schedule(problem)
        assert template.takes_prologue(problem, schedule)
        bias = torch.randn(24, dtype=x.dtype)
        out = _run(template, problem, schedule, x, w, s, bias)
        scaled = run_program(chain, [x, s]).to(x.dtype)
        ref = reference_convolution(scaled.double(), w.double(), bias.double(), p)
        assert not out.isnan().any()
        err = (out.double() - ref).abs().max() / ref.abs().max()
        assert err <= TOL[dtype], (cin, err)


def test_other_templates_decline_a_prologue() -> None:
    _, problem, _, _, _ = _case("fp16", 16, (4, 4), 8)
    for name in ("implicit_gemm_box", "depthwise", "transposed"):
        template = get_template(name)
        assert (
            not template.takes_prologue(problem, template.heuristic_schedule(problem))
            if template.supports(problem)
            else True
        )


@pytest.mark.parametrize("name", ["gemm", "implicit_gemm"])
@pytest.mark.parametrize(("cin", "takes"), [(120, True), (319, True), (320, False), (672, False)])
def test_gemm_kernels_decline_a_prologue_on_long_reductions(name: str, cin: int, takes: bool) -> None:
    """Reductions of `PROLOGUE_MAX_K` or more run the chain as its own kernel (measured faster)."""
    from cuda_triton.conv.templates.gemm_common import PROLOGUE_MAX_K

    assert PROLOGUE_MAX_K == 320
    _, problem, _, _, _ = _case("fp16", cin, (4, 4), 8)
    template = get_template(name)
    assert template.takes_prologue(problem, template.heuristic_schedule(problem)) == takes


@pytest.mark.parametrize("name", ["gemm", "implicit_gemm"])
def test_cheap_prologues_stay_fused_on_long_reductions(name: str) -> None:
    """A chain of cheap ops reading no tensor (ReLU, a clamp) costs an instruction or two an element: fused on any
    reduction; a transcendental one (GELU) is not on long reductions."""
    base, _, _, _, _ = _case("fp16", 672, (4, 4), 8)
    template = get_template(name)
    schedule = template.heuristic_schedule(base)
    for chain, takes in [
        ((instruction("relu", 0),), True),
        ((instruction("clamp", 0, c0=0.0, c1=6.0), instruction("mul", 4, -1, c0=0.5)), True),
        ((instruction("gelu", 0),), False),
    ]:
        problem = replace(base, prologue=ConvPrologue(chain, ()))
        assert template.takes_prologue(problem, schedule) == takes, chain


@pytest.mark.timeout(600)
def test_prologue_kernel_compiles_for_every_arch() -> None:
    from cuda_triton.kernel.aot import compile_launch

    _, problem, _, _, _ = _case("fp16", 40, (5, 3), 24)
    template = get_template("gemm")
    launch = template.launches(problem, template.heuristic_schedule(problem))[0]
    assert dict(launch.constexprs)["PROLOGUE"] == SE_CHAIN
    implicit = get_template("implicit_gemm")
    (main,) = implicit.launches(problem, implicit.heuristic_schedule(problem))
    for arch in (80, 90):
        assert compile_launch(launch, arch).cubin and compile_launch(main, arch).cubin


# ---- whole networks ------------------------------------------------------------------------------------------
class SqueezeExcite(nn.Module):
    """A depthwise block with squeeze-excitation, then a 1x1 projection (its prologue: ``z * sigmoid(s)``), a
    second excitation read by a grouped 3x3 convolution (the implicit GEMM takes no prologue with groups: the
    chain stays a kernel, drafted just before it) and one whose product is also an output (stored, not fused)."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, 16, 3, padding=1)
        self.dw = nn.Conv2d(16, 16, 3, padding=1, groups=16)
        self.fc1 = nn.Conv2d(16, 4, 1)
        self.fc2 = nn.Conv2d(4, 16, 1)
        self.project = nn.Conv2d(16, 8, 1)
        self.gate = nn.Conv2d(8, 8, 1)
        self.spatial = nn.Conv2d(8, 8, 3, padding=1, groups=2)
        self.head = nn.Conv2d(8, 4, 1)

    def forward(self, x):
        z = torch.relu(self.dw(torch.relu(self.stem(x))))
        s = self.fc2(torch.relu(self.fc1(z.mean((2, 3), keepdim=True))))
        p = self.project(z * torch.sigmoid(s))
        g = torch.sigmoid(self.gate(p.mean((2, 3), keepdim=True)))
        q = self.spatial(p * g)
        stored = q * g
        return self.head(stored), stored


def _network(dtype: str) -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    torch.manual_seed(0)
    return SqueezeExcite().eval().to(DTYPES[dtype]), (torch.randn(2, 3, 8, 8, dtype=DTYPES[dtype]),)


def _blob(model: nn.Module, example: tuple[torch.Tensor, ...], **options):
    from cuda_triton import CudaTritonOptions
    from cuda_triton.serialization.blob import deserialize
    from cuda_triton.tools import emulate_pte as E
    from executorch.exir.lowered_backend_module import LoweredBackendModule

    ep = E.lower(model, example, options=CudaTritonOptions(**options))
    (lowered,) = [m for _, m in ep.graph_module.named_modules() if isinstance(m, LoweredBackendModule)]
    return deserialize(lowered.processed_bytes)


@pytest.mark.timeout(600)
def test_which_chains_become_prologues() -> None:
    from cuda_triton.serialization import ConvRecord, ElementwiseRecord

    model, example = _network("fp32")
    blob = _blob(model, example)
    convs = {op.name.split(":")[0]: op for op in blob.ops if isinstance(op, ConvRecord)}
    with_prologue = [op for op in convs.values() if op.prologue]
    (project,) = with_prologue  # the 1x1 after the first excitation only
    assert project.template == "gemm" and [s.op for s in project.prologue] == ["mul"]
    assert len(project.prologue_inputs) == 1 and "aten.mul.Tensor" in project.name
    # the sigmoids are not computed per element of the maps: each runs once per (N, C) in fc2's and gate's
    # epilogues, which store the scales the multiplies read
    assert sorted(name for name, op in convs.items() if [s.op for s in op.epilogue] == ["sigmoid"]) == [
        "aten_conv2d_default_3",
        "aten_conv2d_default_5",
    ]
    # the grouped 3x3's chain and the stored product stay kernels of their own
    assert sum(isinstance(op, ElementwiseRecord) for op in blob.ops) == 2
    off = _blob(model, example, fuse_prologues=False)
    assert not any(isinstance(op, ConvRecord) and op.prologue for op in off.ops)
    assert sum(isinstance(op, ElementwiseRecord) for op in off.ops) == 3
    assert sum(len(op.launches) for op in off.ops) == sum(len(op.launches) for op in blob.ops) + 1


def test_prologue_record_round_trips_and_is_checked() -> None:
    from cuda_triton.serialization import ConvRecord
    from cuda_triton.serialization.blob import deserialize, serialize
    from cuda_triton.serialization.encoding import BlobError

    model, example = _network("fp16")
    blob = _blob(model, example)
    assert deserialize(serialize(blob)) == blob
    (i, project) = next(
        (i, op) for i, op in enumerate(blob.ops) if isinstance(op, ConvRecord) and op.prologue
    )
    # a prologue input that varies over space (the map itself) is refused
    bad = replace(project, prologue_inputs=[replace(project.prologue_inputs[0], value=project.input)])
    with pytest.raises(BlobError, match="per image and channel"):
        serialize(replace(blob, ops=[*blob.ops[:i], bad, *blob.ops[i + 1 :]]))
    # prologue inputs without steps, and a step reading a missing input
    for broken in (replace(project, prologue=[]), replace(project, prologue_inputs=[])):
        with pytest.raises(BlobError, match="prologue"):
            serialize(replace(blob, ops=[*blob.ops[:i], broken, *blob.ops[i + 1 :]]))


@pytest.mark.timeout(900)
@pytest.mark.parametrize("fuse", [True, False])
@pytest.mark.parametrize("dtype", list(DTYPES))
def test_emulated_blob_matches_eager(dtype: str, fuse: bool) -> None:
    from cuda_triton import CudaTritonOptions

    model, example = _network(dtype)
    options = CudaTritonOptions(allow_tf32=False, fuse_prologues=fuse)
    assert_one_delegate_matches_eager(
        model, example, options, {"fp32": 1e-4, "fp16": 2e-2, "bf16": 5e-2}[dtype] * 5
    )
