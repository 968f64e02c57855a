"""Whole models in one delegate: torchvision's classifiers and the in-tree zoo, every op on the GPU.

For each model, through both lowering APIs and in fp32, fp16 and bf16 (the AOT compile replaced by the emulator's
fake compile, so no cubins are built): the lowered program holds exactly one delegate call and no other op.
For each model in one dtype (`EMULATED`: every dtype is covered, and each model once, because one emulation of
a torchvision network takes minutes in the Triton interpreter), the delegate blob run on the CPU
(`cuda_triton.tools.emulate_pte`) matches eager PyTorch on fresh random inputs. Inputs are small: the networks
are the same at any resolution.
"""

from __future__ import annotations

import operator

import pytest
import torch
from cuda_triton.models import torchvision_models
from cuda_triton.models.zoo import ZOO, build
from cuda_triton.tools import emulate_pte as E
from torchvision_support import torchvision_or_skip

DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
TORCHVISION = [torchvision_models.PREFIX + m for m in torchvision_models.MODELS]
# The zoo at small inputs (the interpreter is slow): name -> input shape.
ZOO_SHAPES = {
    "resnet18": (1, 3, 32, 32),
    "resnet50": (1, 3, 32, 32),
    "mobilenetv2": (1, 3, 32, 32),
    "unet": (1, 3, 32, 32),
    "wav2vec2": (1, 1, 800),
    "wavenet": (1, 1, 256),
    "video": (1, 3, 4, 16, 16),
    "demo": None,
}
TOL = {"fp32": 2e-3, "fp16": 2e-2, "bf16": 5e-2}


# (model, dtype) pairs run through the emulator.
EMULATED = [
    ("tv:resnet18", "fp16"),
    ("tv:resnet50", "bf16"),
    ("tv:mobilenet_v2", "bf16"),
    ("tv:mobilenet_v3_large", "fp16"),
    ("tv:efficientnet_b0", "fp32"),
    ("tv:convnext_tiny", "fp32"),
    ("unet", "bf16"),
    ("wavenet", "fp32"),
    ("video", "fp16"),
    ("resnet18", "fp16"),
    ("wav2vec2", "bf16"),
    ("demo", "fp32"),
]


def _model(name: str, dtype: str) -> tuple[torch.nn.Module, tuple[torch.Tensor, ...]]:
    if name.startswith(torchvision_models.PREFIX):
        torchvision_or_skip()
        return build(name, DTYPES[dtype], (1, 3, 32, 32))
    return build(name, DTYPES[dtype], ZOO_SHAPES[name])


def _ops_outside_delegates(ep) -> list[str]:
    return [
        f"{n.name} ({n.target})"
        for n in ep.graph_module.graph.nodes
        if n.op == "call_function"
        and n.target is not operator.getitem
        and "executorch_call_delegate" not in str(n.target)
    ]


def _delegate_calls(ep) -> int:
    return sum("executorch_call_delegate" in str(n.target) for n in ep.graph_module.graph.nodes)


def test_the_zoo_table_covers_the_zoo():
    assert set(ZOO_SHAPES) == set(ZOO)


@pytest.mark.timeout(900)
@pytest.mark.parametrize("api", ["transform_and_lower", "to_backend"])
@pytest.mark.parametrize("dtype", sorted(DTYPES))
@pytest.mark.parametrize("name", TORCHVISION + sorted(ZOO_SHAPES))
def test_one_delegate_and_no_cpu_op(name: str, dtype: str, api: str):
    model, example = _model(name, dtype)
    ep = E.lower(model, example, api)
    assert _ops_outside_delegates(ep) == []
    assert _delegate_calls(ep) == 1


def test_every_model_and_dtype_is_emulated():
    assert {m for m, _ in EMULATED} >= set(TORCHVISION) and {d for _, d in EMULATED} == set(DTYPES)


@pytest.mark.timeout(1800)
@pytest.mark.parametrize(("name", "dtype"), EMULATED)
def test_emulated_blob_matches_eager(name: str, dtype: str):
    model, example = _model(name, dtype)
    err, run = E.check_model(model, example, verbose=False)
    assert len(run.delegates) == 1
    bad = [(what, e, tol) for what, e, tol in run.op_errors if not e <= tol]
    assert bad == []
    assert err <= TOL[dtype] * 5, f"program output: max |err| / max |ref| = {err:.2e}"
