"""Fused convolution epilogues (`cuda_triton.conv.epilogue`): an elementwise chain run on a convolution's result.

Checks how an epilogue reads its operands, that a chain survives the blob's steps both ways, the GEMM template's
kernel with a chain (activation, residual, per-(N, C) scale) against ATen in the interpreter in every dtype, its
AOT compile for sm_80 and sm_90, and whole small networks: which chains the delegate fuses (and which it must
not), with the emulated blob matching eager PyTorch with fusion on and off.
"""

from __future__ import annotations

import os
from dataclasses import replace

os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from cuda_triton.conv import ConvParams, ConvProblem  # noqa: E402
from cuda_triton.conv.epilogue import LIKE_OUTPUT, PER_NC, ConvEpilogue, EpilogueOperand, epilogue_operand  # noqa: E402
from cuda_triton.conv.op import output_layout, reference_convolution  # noqa: E402
from cuda_triton.conv.templates import get_template  # noqa: E402
from cuda_triton.conv.templates._interpreter import patch_interpreter_bf16_dot  # noqa: E402
from cuda_triton.conv.templates._splitk import split_k_of  # noqa: E402
from cuda_triton.ops.elementwise.program import instruction  # noqa: E402
from cuda_triton.ops.elementwise.reference import run_program  # noqa: E402
from ops_helpers import assert_one_delegate_matches_eager  # noqa: E402
from torch import nn  # noqa: E402

DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
PTR = {"fp32": "fp32", "fp16": "fp16", "bf16": "bf16"}
TOL = {"fp32": 1e-4, "fp16": 1e-2, "bf16": 3e-2}


def test_epilogue_operand_kinds() -> None:
    out, cl = (2, 8, 4, 4), (128, 1, 32, 8)
    assert epilogue_operand(out, cl, "fp16", out, cl) == EpilogueOperand(LIKE_OUTPUT, "fp16")
    assert epilogue_operand((2, 8, 1, 1), (8, 1, 8, 8), "fp16", out, cl) == EpilogueOperand(
        PER_NC, "fp16", 8, 1
    )
    assert epilogue_operand((8, 1, 1), (1, 1, 1), "fp32", out, cl) == EpilogueOperand(PER_NC, "fp32", 0, 1)
    assert epilogue_operand((1, 8, 1, 1), (8, 1, 1, 1), "fp32", out, cl) == EpilogueOperand(
        PER_NC, "fp32", 0, 1
    )
    assert epilogue_operand(out, (128, 16, 4, 1), "fp16", out, cl) is None  # same sizes, another layout
    assert epilogue_operand((2, 8, 4, 1), (32, 4, 1, 1), "fp16", out, cl) is None  # varies over space
    assert epilogue_operand((3, 2, 8, 1, 1), (16, 8, 1, 1, 1), "fp16", out, cl) is None  # more dims


PROGRAMS = [
    (instruction("relu", 0),),
    (instruction("hardswish", 0), instruction("add", 4, 1), instruction("mul", 5, 2)),
    (instruction("clamp", 0, c0=0.0, c1=6.0), instruction("sub", -1, 4, c0=1.5)),
    (instruction("sigmoid", 1), instruction("mul", 0, 4), instruction("leaky_relu", 5, c0=0.2)),
]


@pytest.mark.parametrize("program", PROGRAMS)
def test_steps_round_trip(program) -> None:
    from cuda_triton.preprocess.elementwise import program_steps, steps_program

    steps = program_steps(program, first_is_result=True)
    assert steps_program(steps, first_is_result=True) == program
    assert steps_program(program_steps(program)) == program


def _problem(
    dtype: str, epilogue: ConvEpilogue | None, kernel: int = 1, groups: int = 1
) -> tuple[ConvProblem, torch.Tensor, torch.Tensor]:
    x = torch.randn(2, 16, 5, 6, dtype=DTYPES[dtype]).to(memory_format=torch.channels_last)
    cout = 24 if groups == 1 else 16
    w = torch.randn(cout, 16 // groups, kernel, kernel, dtype=DTYPES[dtype]).to(
        memory_format=torch.channels_last
    )
    w = w * 0.25
    pad = kernel // 2
    p = ConvParams((1, 1), (pad, pad), (pad, pad), (1, 1), False, (0, 0), groups)
    problem = ConvProblem.from_tensors(x, w, torch.empty(cout), p, allow_tf32=False)
    return (problem if epilogue is None else replace(problem, epilogue=epilogue)), x, w


# The 3x3 depthwise takes the direct channels-last kernel, the 5x5 the taps kernel (several taps per load). The
# box template runs 16-bit only here (fp32 needs TF32, which the exact reference would not match): its portable
# twin in the interpreter, the same epilogue code as the Gluon kernel's.
TAKERS = [("gemm", 1, 1), ("implicit_gemm", 3, 1), ("depthwise", 3, 16), ("depthwise", 5, 16)]
TAKER_CASES = [(d, *t) for t in TAKERS for d in DTYPES] + [
    (d, "implicit_gemm_box", 3, 1) for d in ("fp16", "bf16")
]


@pytest.mark.timeout(600)
@pytest.mark.parametrize(("dtype", "template_name", "kernel", "groups"), TAKER_CASES)
def test_kernel_applies_the_chain(dtype: str, template_name: str, kernel: int, groups: int) -> None:
    """hardswish(conv + bias) + residual, times a per-(N, C) scale, in one launch, NaN-poisoned output."""
    torch.manual_seed(0)
    patch_interpreter_bf16_dot()
    probe, x, w = _problem(dtype, None, kernel, groups)
    sizes, strides = output_layout(x, w, probe.params)
    residual = torch.empty_strided(sizes, strides, dtype=x.dtype).normal_()
    scale = torch.rand(2, probe.out_channels, 1, 1, dtype=x.dtype) + 0.5
    operands = (
        epilogue_operand(list(residual.shape), list(residual.stride()), PTR[dtype], sizes, strides),
        epilogue_operand(list(scale.shape), list(scale.stride()), PTR[dtype], sizes, strides),
    )
    assert all(o is not None for o in operands)
    epilogue = ConvEpilogue(PROGRAMS[1], operands)  # type: ignore[arg-type]
    problem = replace(probe, epilogue=epilogue)
    bias = torch.randn(probe.out_channels, dtype=x.dtype)
    template = get_template(template_name)
    schedule = template.heuristic_schedule(problem)
    assert template.supports(problem) and template.takes_epilogue(problem, schedule)
    if template_name == "depthwise":
        assert ("TAP_ROWS" in dict(schedule.params)) == (kernel == 5)
    out = torch.empty_strided(sizes, strides, dtype=x.dtype).fill_(float("nan"))
    tensors = {
        "input": x, "weight": template.prepare_weight(w, problem, schedule), "bias": bias, "output": out,
        "epilogue1": residual, "epilogue2": scale,
    }  # fmt: skip
    for role, t in template.allocate_scratch(problem, schedule, "cpu").items():
        tensors[role] = t
    for launch in template.launches(problem, schedule):
        launch.run(tensors)
    conv = reference_convolution(x.double(), w.double(), bias.double(), problem.params)
    ref = run_program(PROGRAMS[1], [conv, residual, scale]).double()
    assert not out.isnan().any()
    err = (out.double() - ref).abs().max() / ref.abs().max()
    assert err <= TOL[dtype], err


def test_templates_without_an_epilogue_decline_it() -> None:
    dw_problem, _, _ = _problem("fp16", None, 3, 16)
    depthwise = get_template("depthwise")
    bands = [s for s in depthwise.schedules(dw_problem) if "SEG" in dict(s.params)]
    assert not any(depthwise.takes_epilogue(dw_problem, s) for s in bands)


@pytest.mark.timeout(600)
@pytest.mark.parametrize("template_name", ["gemm", "implicit_gemm"])
def test_split_k_reduction_applies_the_chain(template_name: str) -> None:
    """A split-K schedule: the shares store partial sums; the last share of each tile adds them up, the bias and
    runs the chain, in the one launch."""
    torch.manual_seed(0)
    kernel = 1 if template_name == "gemm" else 3
    cl = torch.channels_last
    x = torch.randn(1, 256, 4, 4).to(memory_format=cl)
    w = (torch.randn(32, 256, kernel, kernel) / 16).to(memory_format=cl)
    pad = kernel // 2
    p = ConvParams((1, 1), (pad, pad), (pad, pad), (1, 1), False, (0, 0), 1)
    sizes, strides = output_layout(x, w, p)
    residual = torch.empty_strided(sizes, strides).normal_()
    operand = epilogue_operand(list(residual.shape), list(residual.stride()), "fp32", sizes, strides)
    assert operand is not None
    base = ConvProblem.from_tensors(x, w, torch.empty(32), p, allow_tf32=False)
    problem = replace(base, epilogue=ConvEpilogue(PROGRAMS[1][:2], (operand,)))  # hardswish(conv) + residual
    template = get_template(template_name)
    split = [s for s in template.schedules(base) if split_k_of(s) > 1]
    assert split and template.takes_epilogue(problem, split[0])
    bias = torch.randn(32)
    out = torch.empty_strided(sizes, strides).fill_(float("nan"))
    tensors = {
        "input": x, "weight": template.prepare_weight(w, problem, split[0]), "bias": bias, "output": out,
        "epilogue1": residual, **template.allocate_scratch(problem, split[0], "cpu"),
    }  # fmt: skip
    launches = template.launches(problem, split[0])
    assert [dict(launch.constexprs)["PROGRAM"] != () for launch in launches][-1:] == [True]
    for launch in launches:
        launch.run(tensors)
    conv = reference_convolution(x.double(), w.double(), bias.double(), p)
    ref = run_program(PROGRAMS[1][:2], [conv, residual]).double()
    assert not out.isnan().any() and (out.double() - ref).abs().max() / ref.abs().max() <= 1e-4


@pytest.mark.timeout(600)
def test_epilogue_kernel_compiles_for_every_arch() -> None:
    from cuda_triton.kernel.aot import compile_launch

    for name, kernel, groups in [*TAKERS, ("implicit_gemm_box", 3, 1)]:  # box: the Gluon kernel on sm_90
        base, _, _ = _problem("fp16", None, kernel, groups)
        operands = (
            EpilogueOperand(LIKE_OUTPUT, "fp16"),
            EpilogueOperand(PER_NC, "fp16", base.out_channels, 1),
        )
        problem = replace(base, epilogue=ConvEpilogue(PROGRAMS[1], operands))
        template = get_template(name)
        launch = template.launches(problem, template.heuristic_schedule(problem))[-1]
        for arch in (80, 90):
            assert compile_launch(launch, arch).cubin
    # a split-K schedule: the last share of each tile runs the chain in the same launch
    cl = torch.channels_last
    x = torch.empty(1, 256, 4, 4, dtype=torch.float16).to(memory_format=cl)
    w = torch.empty(32, 256, 3, 3, dtype=torch.float16).to(memory_format=cl)
    p = ConvParams((1, 1), (1, 1), (1, 1), (1, 1), False, (0, 0), 1)
    base = ConvProblem.from_tensors(x, w, torch.empty(32, dtype=torch.float16), p)
    chain = ConvEpilogue(PROGRAMS[1][:2], (EpilogueOperand(LIKE_OUTPUT, "fp16"),))
    problem = replace(base, epilogue=chain)
    template = get_template("implicit_gemm")
    split = next(s for s in template.schedules(base) if split_k_of(s) > 1)
    (launch,) = template.launches(problem, split)
    assert dict(launch.constexprs)["PROGRAM"] == chain.program
    for arch in (80, 90):
        assert compile_launch(launch, arch).cubin


# ---- whole networks ------------------------------------------------------------------------------------------
class Block(nn.Module):
    """A 3x3 stem + relu (fused), then an inverted-residual-like block: 1x1 + BN + hardswish (fused), depthwise +
    relu (fused), a squeeze-excitation scale, 1x1 projection + BN + residual add (fused: both channels-last), then a
    1x1 whose result two ops read (not fused)."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, 8, 3, padding=1)
        self.expand = nn.Conv2d(8, 16, 1)
        self.bn1 = nn.BatchNorm2d(16)
        self.dw = nn.Conv2d(16, 16, 3, padding=1, groups=16)
        self.se = nn.Conv2d(16, 16, 1)
        self.project = nn.Conv2d(16, 8, 1)
        self.bn2 = nn.BatchNorm2d(8)
        self.head = nn.Conv2d(8, 4, 1)

    def forward(self, x):
        s = torch.relu(self.stem(x))
        y = F.hardswish(self.bn1(self.expand(s)))
        z = torch.relu(self.dw(y))
        z = z * torch.sigmoid(self.se(z.mean((2, 3), keepdim=True)))
        out = self.bn2(self.project(z)) + s
        h = self.head(out)
        return torch.relu(h), h.mean((2, 3))


def _model(dtype: str) -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    torch.manual_seed(0)
    model = Block().eval().to(DTYPES[dtype])
    with torch.no_grad():
        for bn in (model.bn1, model.bn2):
            bn.running_mean.uniform_(-0.5, 0.5)
            bn.running_var.uniform_(0.5, 2.0)
    return model, (torch.randn(2, 3, 8, 8, dtype=DTYPES[dtype]),)


@pytest.mark.timeout(600)
def test_which_chains_are_fused() -> None:
    from cuda_triton import CudaTritonOptions
    from cuda_triton.serialization import ConvRecord
    from cuda_triton.serialization.blob import deserialize
    from cuda_triton.tools import emulate_pte as E
    from executorch.exir.lowered_backend_module import LoweredBackendModule

    model, example = _model("fp32")
    for fuse in (True, False):
        ep = E.lower(model, example, options=CudaTritonOptions(fuse_epilogues=fuse))
        (lowered,) = [m for _, m in ep.graph_module.named_modules() if isinstance(m, LoweredBackendModule)]
        blob = deserialize(lowered.processed_bytes)
        convs = {op.name.split(":")[0]: op for op in blob.ops if isinstance(op, ConvRecord)}
        fused = {name: [s.op for s in op.epilogue] for name, op in convs.items() if op.epilogue}
        if not fuse:
            assert fused == {}
            continue
        # stem (an implicit GEMM) and dw (depthwise): their relus; expand: hardswish; se: its sigmoid (the
        # [N, C, 1, 1] scale is stored, not computed per element of the multiply by z); project: the residual add
        # with the stem's channels-last output. Not the head (two ops read its result).
        templates = {name: op.template for name, op in convs.items()}
        assert {templates[n] for n in fused} == {"gemm", "implicit_gemm", "depthwise"}
        assert sorted(fused.values()) == [["add"], ["hardswish"], ["relu"], ["relu"], ["sigmoid"]], fused
        (project,) = [op for op in convs.values() if [s.op for s in op.epilogue] == ["add"]]
        assert len(project.epilogue_inputs) == 1


@pytest.mark.timeout(900)
@pytest.mark.parametrize("fuse", [True, False])
@pytest.mark.parametrize("dtype", list(DTYPES))
def test_emulated_blob_matches_eager(dtype: str, fuse: bool) -> None:
    from cuda_triton import CudaTritonOptions

    model, example = _model(dtype)
    options = CudaTritonOptions(allow_tf32=False, fuse_epilogues=fuse)
    assert_one_delegate_matches_eager(
        model, example, options, {"fp32": 1e-4, "fp16": 2e-2, "bf16": 5e-2}[dtype] * 5
    )


@pytest.mark.timeout(600)
def test_benchmark_script_checks_its_cases() -> None:
    """scripts/bench_conv_epilogue.py --check: its fused contender agrees with ATen on every case (fp16)."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parent.parent / "scripts" / "bench_conv_epilogue.py"
    spec = importlib.util.spec_from_file_location("bench_conv_epilogue", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.main(["--check", "--dtypes", "fp16"]) == 0
