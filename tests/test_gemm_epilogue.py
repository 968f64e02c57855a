"""Fused GEMM epilogues (`ops.gemm` with a `ConvEpilogue`): an elementwise chain run on a GEMM's result.

Checks how a GEMM's epilogue reads its operands (like the output, per column), the GEMM kernel and the split-K
reduction with a chain (gelu, layer scale, residual add) against ATen in the interpreter in every dtype, their
AOT compile for sm_80 and sm_90, and a small convnext-like network: its GEMMs take the chains (one delegate,
fewer launches), with the emulated blob matching eager PyTorch with fusion on and off.
"""

from __future__ import annotations

import os

os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest  # noqa: E402
import torch  # noqa: E402
from cuda_triton.conv.epilogue import (
    LIKE_OUTPUT,
    PER_NC,
    ConvEpilogue,
    EpilogueOperand,
    gemm_epilogue_operand,
)  # noqa: E402
from cuda_triton.conv.templates._interpreter import patch_interpreter_bf16_dot  # noqa: E402
from cuda_triton.conv.templates._splitk import split_k_of  # noqa: E402
from cuda_triton.kernel.launch import allocate_scratch  # noqa: E402
from cuda_triton.ops.elementwise.program import instruction  # noqa: E402
from cuda_triton.ops.elementwise.reference import run_program  # noqa: E402
from cuda_triton.ops.gemm import GemmSpec, heuristic_schedule, launches, scratch  # noqa: E402
from cuda_triton.ops.tensor_meta import TensorMeta  # noqa: E402
from op_tensors import assert_left_zero  # noqa: E402
from ops_helpers import assert_one_delegate_matches_eager  # noqa: E402
from torch import nn  # noqa: E402

DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
TOL = {"fp32": 1e-5, "fp16": 2e-3, "bf16": 1e-2}

# Chains on value 0 (the GEMM's result) and the named operands (values 1, 2, ...): the residual (like the output),
# the layer scale gamma (per column).
PROGRAMS = {
    "gelu": ((instruction("gelu", 0),), ()),
    "scale": ((instruction("mul", 1, 0),), ("gamma",)),
    "residual": ((instruction("add", 1, 0),), ("residual",)),
    "gelu_scale_residual": (
        (instruction("gelu", 0), instruction("mul", 2, 4), instruction("add", 1, 5)),
        ("residual", "gamma"),
    ),
}


@pytest.mark.timeout(60)
def test_gemm_epilogue_operand_kinds() -> None:
    out, rm = (64, 32), (32, 1)
    assert gemm_epilogue_operand(out, rm, "fp16", out, rm) == EpilogueOperand(LIKE_OUTPUT, "fp16")
    assert gemm_epilogue_operand((32,), (1,), "fp32", out, rm) == EpilogueOperand(PER_NC, "fp32", 0, 1)
    assert gemm_epilogue_operand((1, 32), (64, 2), "fp16", out, rm) == EpilogueOperand(PER_NC, "fp16", 0, 2)
    assert gemm_epilogue_operand((1,), (1,), "fp16", out, rm) == EpilogueOperand(PER_NC, "fp16", 0, 0)
    out3, rm3 = (4, 16, 32), (512, 32, 1)
    assert gemm_epilogue_operand((1, 1, 32), (32, 32, 1), "bf16", out3, rm3) == EpilogueOperand(
        PER_NC, "bf16", 0, 1
    )
    assert gemm_epilogue_operand(out, (1, 64), "fp16", out, rm) is None  # same sizes, another layout
    assert gemm_epilogue_operand((64, 1), (1, 1), "fp16", out, rm) is None  # per row
    assert gemm_epilogue_operand((4, 1, 32), (32, 32, 1), "fp16", out3, rm3) is None  # per batch and column
    assert gemm_epilogue_operand((2, 64, 32), (2048, 32, 1), "fp16", out, rm) is None  # more dims


def _case(
    dtype: str, chain: str, batch: int, m: int, k: int, n: int
) -> tuple[GemmSpec, dict[str, torch.Tensor]]:
    """A GEMM (addmm with a [N] bias, or a bmm) with the chain ``chain`` and its operands by role."""
    dt = DTYPES[dtype]
    gen = torch.Generator().manual_seed(0)
    name = {torch.float32: "float32", torch.float16: "float16", torch.bfloat16: "bfloat16"}[dt]
    if batch == 1:
        a = torch.randn(m, k, generator=gen).to(dt)
        w = (torch.randn(n, k, generator=gen) / k**0.5).to(dt).t()  # an nn.Linear's weight, read transposed
        bias = torch.randn(n, generator=gen).to(dt)
        spec = GemmSpec.addmm(TensorMeta.of(bias), TensorMeta.of(a), TensorMeta.of(w))
        tensors = {"in0": bias, "in1": a, "in2": w}
    else:
        a = torch.randn(batch, m, k, generator=gen).to(dt)
        w = (torch.randn(batch, k, n, generator=gen) / k**0.5).to(dt)
        spec = GemmSpec.bmm(TensorMeta.of(a), TensorMeta.of(w))
        tensors = {"in0": a, "in1": w}
    out_sizes, out_strides = spec.out_sizes, spec.out_strides
    extras = {
        "residual": torch.randn(out_sizes, generator=gen).to(dt),
        "gamma": (torch.rand((1,) * (len(out_sizes) - 1) + (n,), generator=gen) + 0.5).to(dt),
    }
    program, names = PROGRAMS[chain]
    operands, roles = [], {}
    for k, role in enumerate(names):
        t = extras[role]
        op = gemm_epilogue_operand(list(t.shape), list(t.stride()), dtype, out_sizes, out_strides)
        assert op is not None, role
        operands.append(op)
        roles[f"epilogue{k + 1}"] = t
    spec = spec.with_epilogue(ConvEpilogue(program, tuple(operands)))
    assert spec.supports() and spec.dtype == name
    return spec, {**tensors, **roles}


def _reference(spec: GemmSpec, tensors: dict[str, torch.Tensor]) -> torch.Tensor:
    """The fp32 result of alpha * a @ w + beta * bias (products summed in fp64), through the chain, rounded once."""

    def operand(op) -> torch.Tensor:
        t = tensors[op.role]
        return t.as_strided(op.sizes, op.strides, t.storage_offset()).double()

    acc = torch.matmul(operand(spec.a), operand(spec.w)) * spec.alpha
    if spec.bias is not None:
        acc = acc + spec.beta * operand(spec.bias)
    acc = acc.float().reshape(spec.out_sizes)
    assert spec.epilogue is not None
    extras = [tensors[f"epilogue{k + 1}"] for k in range(len(spec.epilogue.operands))]
    return run_program(spec.epilogue.program, [acc, *extras]).to(getattr(torch, spec.dtype))


def _run(spec: GemmSpec, tensors: dict[str, torch.Tensor], schedule=None) -> torch.Tensor:
    schedule = schedule or heuristic_schedule(spec)
    out = torch.empty_strided(spec.out_sizes, spec.out_strides, dtype=getattr(torch, spec.dtype))
    all_tensors = {**tensors, "out": out.fill_(float("nan"))}
    all_tensors.update(allocate_scratch(scratch(spec, schedule), "cpu", poison=True))
    for launch in launches(spec, schedule):
        launch.run(all_tensors)
    assert_left_zero(scratch(spec, schedule), all_tensors)
    return out


# (batch, M, K, N): a batch-1 linear (split-K: few tiles, a long K), a token-sized one, a bmm.
SHAPES = {"split_k": (1, 4, 1024, 48), "tiles": (1, 80, 96, 72), "bmm": (3, 20, 40, 24)}


@pytest.mark.timeout(600)
@pytest.mark.parametrize("shape", list(SHAPES))
@pytest.mark.parametrize("chain", list(PROGRAMS))
@pytest.mark.parametrize("dtype", list(DTYPES))
def test_kernel_applies_the_chain(dtype: str, chain: str, shape: str) -> None:
    """The chain after the bias, before the one rounding, in the GEMM kernel or the split-K reduction; every
    element written (NaN-poisoned output and workspace)."""
    patch_interpreter_bf16_dot()
    spec, tensors = _case(dtype, chain, *SHAPES[shape])
    schedule = heuristic_schedule(spec)
    assert (split_k_of(schedule) > 1) == (shape == "split_k")
    out = _run(spec, tensors, schedule)
    assert not out.isnan().any()
    ref = _reference(spec, tensors)
    torch.testing.assert_close(out.float(), ref.float(), rtol=TOL[dtype] * 4, atol=TOL[dtype] * 4)


@pytest.mark.timeout(60)
def test_a_split_k_launch_carries_the_chain() -> None:
    """Split-K is one launch whose last share per tile stores the result: it takes the chain and its operands."""
    spec, _ = _case("fp16", "gelu_scale_residual", *SHAPES["split_k"])
    (launch,) = launches(spec, heuristic_schedule(spec))
    assert dict(launch.constexprs)["SPLIT_K"] > 1
    assert dict(launch.constexprs)["PROGRAM"] == spec.epilogue.program
    assert dict(launch.constexprs)["E_KINDS"] == (LIKE_OUTPUT, PER_NC, 0)
    assert [a.role for a in launch.args if getattr(a, "role", "").startswith("epilogue")] == [
        "epilogue1", "epilogue2", "epilogue3",
    ]  # fmt: skip


@pytest.mark.timeout(900)
def test_epilogue_kernels_compile_for_sm80_and_sm90() -> None:
    from op_tensors import assert_compiles_for_sm80_and_sm90, distinct_kernels

    todo = []
    for shape in ("split_k", "tiles"):
        spec, _ = _case("fp16", "gelu_scale_residual", *SHAPES[shape])
        todo += launches(spec, heuristic_schedule(spec))
    spec, _ = _case("bf16", "gelu", *SHAPES["bmm"])
    todo += launches(spec, heuristic_schedule(spec))
    kernels = distinct_kernels(todo)
    assert {la.name for la in kernels} == {"gemm_kernel"}
    assert any(dict(la.constexprs)["SPLIT_K"] > 1 for la in kernels)
    assert_compiles_for_sm80_and_sm90(kernels)


# ---- a convnext-like network -----------------------------------------------------------------------------------
class ConvNeXtBlock(nn.Module):
    """torchvision's CNBlock: depthwise 7x7, channels-last LayerNorm, Linear -> GELU -> Linear, layer scale
    (gamma [C, 1, 1]) and the residual add."""

    def __init__(self, c: int) -> None:
        super().__init__()
        self.dw = nn.Conv2d(c, c, 7, padding=3, groups=c)
        self.norm = nn.LayerNorm(c)
        self.fc1 = nn.Linear(c, 4 * c)
        self.fc2 = nn.Linear(4 * c, c)
        self.gamma = nn.Parameter(torch.rand(c, 1, 1) + 0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.norm(self.dw(x).permute(0, 2, 3, 1))
        y = self.fc2(nn.functional.gelu(self.fc1(y))).permute(0, 3, 1, 2)
        return x + self.gamma * y


class TinyConvNeXt(nn.Module):
    def __init__(self, c: int = 16) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, c, 2, stride=2)
        self.blocks = nn.Sequential(ConvNeXtBlock(c), ConvNeXtBlock(c))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.blocks(self.stem(x)).mean((2, 3))


def _model(dtype: str) -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    torch.manual_seed(0)
    return TinyConvNeXt().eval().to(DTYPES[dtype]), (torch.randn(1, 3, 12, 12, dtype=DTYPES[dtype]),)


@pytest.mark.timeout(600)
def test_convnext_block_chains_run_in_the_gemms() -> None:
    from cuda_triton import CudaTritonOptions
    from cuda_triton.serialization import GemmRecord
    from cuda_triton.serialization.blob import deserialize
    from cuda_triton.tools import emulate_pte as E
    from executorch.exir.lowered_backend_module import LoweredBackendModule

    model, example = _model("fp32")
    counts = {}
    for fuse in (True, False):
        ep = E.lower(model, example, options=CudaTritonOptions(fuse_epilogues=fuse))
        (lowered,) = [m for _, m in ep.graph_module.named_modules() if isinstance(m, LoweredBackendModule)]
        blob = deserialize(lowered.processed_bytes)
        counts[fuse] = sum(len(op.launches) for op in blob.ops)
        gemms = [op for op in blob.ops if isinstance(op, GemmRecord)]
        chains = [[s.op for s in op.epilogue] for op in gemms]
        if not fuse:
            assert all(c == [] for c in chains) and len(gemms) == 4
            continue
        # fc1: its gelu; fc2: the layer scale and the residual add (both blocks: the residual is channels-last,
        # as the stem's and the blocks' results are stored).
        assert chains == [["gelu"], ["mul", "add"]] * 2, chains
        scale_adds = [op for op in gemms if op.epilogue_inputs]
        assert all(len(op.epilogue_inputs) == 2 for op in scale_adds)
    assert counts[True] == counts[False] - 4, counts


@pytest.mark.timeout(600)
def test_tf32_gemm_weights_are_rounded_at_export() -> None:
    """fp32 with TF32: each linear's weight is stored rounded to TF32 (its kernel then rounds only the activations,
    test_ops_gemm); with TF32 off the weights are stored as they are. The emulated blob still matches eager."""
    from cuda_triton import CudaTritonOptions
    from cuda_triton.conv.tf32 import is_tf32
    from cuda_triton.serialization import ConstantRef, GemmRecord
    from cuda_triton.serialization.blob import deserialize
    from cuda_triton.tools import emulate_pte as E
    from executorch.exir.lowered_backend_module import LoweredBackendModule

    model, example = _model("fp32")
    for tf32 in (True, False):
        ep = E.lower(model, example, options=CudaTritonOptions(allow_tf32=tf32))
        (lowered,) = [m for _, m in ep.graph_module.named_modules() if isinstance(m, LoweredBackendModule)]
        blob, data = deserialize(lowered.processed_bytes), E.named_data_of(lowered)
        gemms = [op for op in blob.ops if isinstance(op, GemmRecord)]
        assert len(gemms) == 4 and all(isinstance(op.b, ConstantRef) for op in gemms)
        weights = [torch.frombuffer(bytearray(data[blob.constants[op.b.constant].key]), dtype=torch.float32)
                   for op in gemms]  # fmt: skip
        assert [is_tf32(w) for w in weights] == [tf32] * 4
    assert_one_delegate_matches_eager(model, example, CudaTritonOptions(allow_tf32=True), 5e-3)


@pytest.mark.timeout(900)
@pytest.mark.parametrize("fuse", [True, False])
@pytest.mark.parametrize("dtype", list(DTYPES))
def test_emulated_convnext_matches_eager(dtype: str, fuse: bool) -> None:
    from cuda_triton import CudaTritonOptions

    model, example = _model(dtype)
    options = CudaTritonOptions(allow_tf32=False, fuse_epilogues=fuse)
    assert_one_delegate_matches_eager(
        model, example, options, {"fp32": 1e-4, "fp16": 2e-2, "bf16": 5e-2}[dtype] * 5
    )


@pytest.mark.timeout(600)
def test_a_chain_the_epilogue_cannot_read_is_a_kernel_of_its_own() -> None:
    """A lone block: its residual is the delegate's input (contiguous, the GEMM's chain layout is channels-last)
    and its result a delegate output, so fc2's chain stays an elementwise kernel, drafted after the views the GEMM
    waited with; the emulated blob still matches eager."""
    from cuda_triton import CudaTritonOptions
    from cuda_triton.serialization import GemmRecord
    from cuda_triton.serialization.blob import deserialize
    from cuda_triton.tools import emulate_pte as E
    from executorch.exir.lowered_backend_module import LoweredBackendModule

    torch.manual_seed(0)
    model, example = ConvNeXtBlock(16).eval(), (torch.randn(1, 16, 6, 6),)
    options = CudaTritonOptions(allow_tf32=False)
    ep = E.lower(model, example, options=options)
    (lowered,) = [m for _, m in ep.graph_module.named_modules() if isinstance(m, LoweredBackendModule)]
    blob = deserialize(lowered.processed_bytes)
    chains = [[s.op for s in op.epilogue] for op in blob.ops if isinstance(op, GemmRecord)]
    assert chains == [["gelu"], []], chains
    assert [op.KIND_NAME for op in blob.ops][-1] == "elementwise"
    assert_one_delegate_matches_eager(model, example, options, 5e-4)
