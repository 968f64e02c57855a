"""Tensors for the op-family tests: random inputs in a chosen layout, NaN-poisoned outputs, dtype tolerances."""

from __future__ import annotations

import numpy as np
import torch
from cuda_triton.conv.templates._interpreter import patch_interpreter_bf16_dot
from cuda_triton.ops.tensor_meta import TensorMeta

DTYPES = (torch.float32, torch.float16, torch.bfloat16)
LAYOUTS = ("contiguous", "channels_last", "strided")


def patch_interpreter_bf16_rounding() -> None:
    """Make the interpreter round fp32 -> bf16 casts to nearest even, as the GPU's ``cvt.rn.bf16.f32`` does (it
    truncates: every other bf16 result of a kernel would be one unit low). Idempotent; CPU test runs only."""
    import triton.language as tl
    from triton.runtime import interpreter

    builder = getattr(interpreter, "interpreter_builder", None)
    if builder is None:
        return
    builder_cls = type(builder)
    original = builder_cls.cast_impl
    if getattr(original, "_bf16_rounded", False):
        return

    def cast_impl(self, src, dst_type):
        if src.dtype.scalar == tl.float32 and dst_type.scalar == tl.bfloat16:
            values = torch.from_numpy(np.ascontiguousarray(src.data, dtype=np.float32))
            bits = values.to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16)
            return interpreter.TensorHandle(bits, dst_type.scalar)
        return original(self, src, dst_type)

    cast_impl._bf16_rounded = True
    builder_cls.cast_impl = cast_impl


patch_interpreter_bf16_dot()  # the interpreter's bf16 tl.dot reads raw bits otherwise
patch_interpreter_bf16_rounding()


def device() -> str:
    return "cuda" if torch.cuda.is_available() else "cpu"


def random_input(
    sizes: tuple[int, ...], dtype: torch.dtype, layout: str, gen: torch.Generator
) -> torch.Tensor:
    """Normal random values in ``layout``: "contiguous", "channels_last" (channels fastest: dim 1 of a batched
    tensor goes last in memory, any rank >= 3) or "strided" (every other element of a larger tensor along the
    last dim, with the first two dims swapped in memory: neither layout)."""
    if layout == "contiguous":
        t = torch.randn(sizes, generator=gen)
    elif layout == "channels_last":
        order = (0, *range(2, len(sizes)), 1)
        t = torch.randn([sizes[i] for i in order], generator=gen).permute(*_inverse(order))
    elif layout == "strided":
        big = list(sizes)
        big[-1] = 2 * big[-1]
        swap = (1, 0, *range(2, len(sizes))) if len(sizes) >= 2 else (0,)
        t = torch.randn([big[i] for i in swap], generator=gen).permute(*_inverse(swap))[..., ::2]
    else:
        raise ValueError(layout)
    assert tuple(t.shape) == tuple(sizes)
    return t.to(dtype).to(device())


def _inverse(order: tuple[int, ...]) -> tuple[int, ...]:
    inv = [0] * len(order)
    for i, d in enumerate(order):
        inv[d] = i
    return tuple(inv)


def poisoned(meta: TensorMeta, dtype: torch.dtype | None = None) -> torch.Tensor:
    """An output tensor with ``meta``'s sizes and strides, every element NaN."""
    dt = dtype or getattr(torch, meta.dtype)
    t = torch.empty_strided(meta.sizes, meta.strides, dtype=dt, device=device())
    return t.fill_(float("nan"))


def assert_left_zero(scratch, tensors: dict[str, torch.Tensor]) -> None:
    for t in scratch:
        if t.zeroed:
            assert not tensors[t.role].any(), (
                f"{t.role}: the launches must leave a zeroed scratch tensor zero"
            )


def run(launches, tensors: dict[str, torch.Tensor]) -> None:
    for launch in launches:
        launch.run(tensors)


def tolerances(dtype: torch.dtype, reduction: int = 1) -> dict[str, float]:
    """rtol/atol by dtype; 16-bit results are rounded once from fp32, so they may differ by one unit."""
    if dtype == torch.float32:
        return {"rtol": 1e-5 * max(1.0, reduction**0.5), "atol": 1e-5}
    if dtype == torch.float16:
        return {"rtol": 1e-3, "atol": 1e-3}
    return {"rtol": 8e-3, "atol": 8e-3}


def assert_matches(
    actual: torch.Tensor, expected: torch.Tensor, reduction: int = 1, exact: bool = False
) -> None:
    """Every element compared (a NaN left by the poisoning fails), sizes and dtype equal too."""
    assert actual.shape == expected.shape and actual.dtype == expected.dtype
    tol = {"rtol": 0.0, "atol": 0.0} if exact else tolerances(expected.dtype, reduction)
    torch.testing.assert_close(actual.cpu(), expected.cpu(), **tol)


def same_layout(sizes, strides_a, strides_b) -> bool:
    """Equal strides on every dim of size > 1 (a size-1 dim's stride never addresses anything, and ATen's eager
    kernels and meta functions disagree on it: (N, 1, H, W) channels-last or contiguous)."""
    return all(s == 1 or a == b for s, a, b in zip(sizes, strides_a, strides_b, strict=True))


def distinct_kernels(launches) -> list:
    """One launch per distinct compiled kernel (equal AOT cache keys give identical cubins)."""
    from cuda_triton.kernel.aot import compile_cache_key

    unique = {}
    for launch in launches:
        unique.setdefault(compile_cache_key(launch, 90), launch)
    return list(unique.values())


def assert_compiles_for_sm80_and_sm90(launches) -> None:
    """Every launch compiles ahead of time for both archs (one compile process per arch, side by side), with the
    launch's warps and at most the H100/H200's shared memory per block."""
    from concurrent.futures import ThreadPoolExecutor

    from cuda_triton.kernel.aot import CompiledKernel, compile_launches

    archs = (80, 90)
    with ThreadPoolExecutor(len(archs)) as pool:
        results = dict(
            zip(archs, pool.map(lambda arch: compile_launches(launches, arch), archs), strict=True)
        )
    for arch, compiled in results.items():
        for launch, ck in zip(launches, compiled, strict=True):
            assert isinstance(ck, CompiledKernel) and ck.arch == arch and ck.cubin, launch.name
            assert ck.num_warps == launch.num_warps and ck.shared <= 232448, launch.name
