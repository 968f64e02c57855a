"""Shared helpers of the op-family tests: random strided tensors, NaN-poisoned outputs, tolerances by dtype."""

from __future__ import annotations

import random

import torch
from cuda_triton.kernel.launch import interpreting
from cuda_triton.ops.tensor_meta import TensorMeta

# Kernels run on CPU tensors in Triton's interpreter, on the GPU otherwise; references always run on the CPU.
DEVICE = "cpu" if interpreting() else "cuda"

DTYPES = ("float32", "float16", "bfloat16")
LAYOUTS = ("contiguous", "channels_last", "permuted", "strided", "offset")


def tolerance(dtype: str, length: int = 1) -> dict[str, float]:
    """assert_close tolerances: fp32 ~1e-5 relative (growing with a reduction's length), 16-bit one rounding."""
    if dtype == "float32":
        tol = 1e-5 * max(1.0, length**0.5 / 4)
        return {"rtol": tol, "atol": tol}
    if dtype == "float16":
        return {"rtol": 2e-3, "atol": 2e-3}
    return {"rtol": 1e-2, "atol": 1e-2}


def meta(t: torch.Tensor) -> TensorMeta:
    return TensorMeta.of(t)


def make_tensor(shape, dtype: str, layout: str, gen: torch.Generator, rng: random.Random) -> torch.Tensor:
    """Fresh random values (never zeros) in ``layout``: contiguous, channels_last (4-D/5-D, else contiguous),
    permuted (a random dim order), strided (every other element of the last dim), offset (a view that starts
    inside its storage)."""
    shape = tuple(shape)
    torch_dtype = getattr(torch, dtype)

    def randn(s) -> torch.Tensor:
        return torch.randn(s, generator=gen).to(device=DEVICE, dtype=torch_dtype)

    nd = len(shape)
    if layout == "channels_last" and nd in (4, 5):
        fmt = torch.channels_last if nd == 4 else torch.channels_last_3d
        return randn(shape).contiguous(memory_format=fmt)
    if layout == "permuted" and nd > 1:
        perm = list(range(nd))
        rng.shuffle(perm)
        base = randn([shape[p] for p in perm])
        return base.permute(*[perm.index(d) for d in range(nd)])
    if layout == "strided" and nd > 0:
        base = randn((*shape[:-1], 2 * shape[-1]))
        return base[..., ::2]
    if layout == "offset":
        flat = randn(7 + max(1, torch.Size(shape).numel()))
        return flat[7:].view(shape) if nd else flat[7]
    return randn(shape)


def poisoned(sizes, strides, dtype: str) -> torch.Tensor:
    """An output tensor filled with NaN (so an element the kernel never writes fails the comparison)."""
    return torch.empty_strided(sizes, strides, dtype=getattr(torch, dtype), device=DEVICE).fill_(float("nan"))


def to_cpu(t: torch.Tensor) -> torch.Tensor:
    """``t`` on the CPU with its whole storage, sizes, strides and storage offset (views stay views)."""
    if t.device.type == "cpu":
        return t
    count = t.untyped_storage().nbytes() // t.element_size()
    flat = torch.empty(0, dtype=t.dtype, device=t.device).set_(t.untyped_storage(), 0, (count,), (1,))
    return torch.as_strided(flat.cpu(), t.shape, t.stride(), t.storage_offset())


def cpu(tensors: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The tensors on the CPU as `to_cpu` copies them (references run there)."""
    return {k: to_cpu(v) for k, v in tensors.items()}


def random_shape(rng: random.Random, ndim: int, low: int = 1, high: int = 7) -> tuple[int, ...]:
    return tuple(rng.randint(low, high) for _ in range(ndim))


def assert_one_delegate_matches_eager(model, example, options, program_tol: float) -> None:  # noqa: ANN001
    """The model lowers to one delegate whose emulated blob matches eager PyTorch: every convolution against ATen
    within its dtype's tolerance, the program's output within ``program_tol`` of max |ref|."""
    from cuda_triton.tools import emulate_pte as E

    err, run = E.check_model(model, example, verbose=False, options=options)
    assert len(run.delegates) == 1
    assert [(what, e, tol) for what, e, tol in run.op_errors if not e <= tol] == []
    assert err <= program_tol, f"program output: max |err| / max |ref| = {err:.2e}"
