"""Test configuration: CPU machines run Triton kernels in the interpreter; `cuda` tests need a GPU; no test runs
ATen's CPU convolution on fp16/bf16 tensors."""

from __future__ import annotations

import os

# Must happen before any module defining @triton.jit kernels is imported.
try:
    import torch

    _HAS_GPU = torch.cuda.is_available()
except Exception:  # pragma: no cover
    _HAS_GPU = False
if not _HAS_GPU:
    os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest  # noqa: E402

if os.environ.get("TRITON_INTERPRET") == "1":
    # The interpreter computes bf16 dots and arithmetic on raw bits otherwise, and spends a third of its time on
    # overflow checks whose result it discards (conv/templates/_interpreter.py).
    from cuda_triton.conv.templates._interpreter import patch_interpreter

    patch_interpreter()


def pytest_collection_modifyitems(config, items):
    if _HAS_GPU:
        return
    skip = pytest.mark.skip(reason="needs an NVIDIA GPU")
    for item in items:
        if "cuda" in item.keywords:
            item.add_marker(skip)


# ---- no 16-bit ATen convolution on the CPU ----------------------------------------------------------------------
# On CPUs with AVX512-FP16, torch 2.13's oneDNN never finishes building some fp16 CPU convolutions (the comment at
# cuda_triton.conv.op.reference_convolution says which), so a test that runs one hangs there and passes elsewhere.
# References compute 16-bit convolutions in fp32 and round once instead. This guard makes every 16-bit CPU
# convolution fail the test on any CPU: for the whole session, aten::convolution (which F.conv*, nn.Conv*,
# torch.convolution and the graphs' aten.conv* ops all reach) gets a CPU kernel that refuses fp16/bf16 tensors
# and hands everything else to aten::_convolution, as ATen's own kernel does. Fake, meta and CUDA tensors never
# reach a CPU kernel.
class HalfCpuConvolutionError(RuntimeError):
    """A test ran ATen's CPU convolution on fp16/bf16 tensors."""


def _guarded_cpu_convolution(
    input, weight, bias, stride, padding, dilation, transposed, output_padding, groups
):
    half = [
        t.dtype for t in (input, weight, bias) if t is not None and t.dtype in (torch.float16, torch.bfloat16)
    ]
    if half:
        raise HalfCpuConvolutionError(
            f"aten::convolution on {half[0]} CPU tensors: compute CPU references of fp16/bf16 convolutions in"
            " fp32 and round once (cuda_triton.conv.op.reference_convolution does)"
        )
    cudnn = torch.backends.cudnn
    deterministic = cudnn.deterministic or torch.are_deterministic_algorithms_enabled()
    return torch.ops.aten._convolution.default(
        input, weight, bias, stride, padding, dilation, transposed, output_padding, groups,
        cudnn.benchmark, deterministic, cudnn.enabled, cudnn.allow_tf32,
    )  # fmt: skip


_guard_library: torch.library.Library | None = None


def pytest_configure(config):
    global _guard_library
    _guard_library = torch.library.Library("aten", "IMPL")
    _guard_library.impl("convolution", _guarded_cpu_convolution, "CPU")


def pytest_unconfigure(config):
    global _guard_library
    if _guard_library is not None:
        _guard_library._destroy()
        _guard_library = None


# ---- a fresh Triton cache for the modules that compile kernels for real ----------------------------------------
@pytest.fixture(scope="module")
def fresh_triton_cache(tmp_path_factory):
    """A cold Triton cache for one module (each distinct kernel compiles once), restored afterwards."""
    from cuda_triton.conv import compile_pool

    old = os.environ.get("TRITON_CACHE_DIR")
    os.environ["TRITON_CACHE_DIR"] = str(tmp_path_factory.mktemp("triton_cache"))
    compile_pool.shutdown()  # compile workers fork with the new environment
    yield
    compile_pool.shutdown()
    if old is None:
        os.environ.pop("TRITON_CACHE_DIR", None)
    else:
        os.environ["TRITON_CACHE_DIR"] = old
