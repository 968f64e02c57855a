"""Pooling kernels against ATen (Triton's interpreter on CPU machines): max, avg and adaptive avg pools over 1-3
spatial dims, fp32/fp16/bf16, contiguous, channels-last and strided inputs, unbatched inputs, ceil_mode,
count_include_pad, divisor_override, dilation; the layout rule against ATen's meta functions; AOT compiles."""

from __future__ import annotations

import random
from concurrent.futures import ThreadPoolExecutor

import pytest
import torch
from cuda_triton.kernel.aot import CompiledKernel, compile_cache_key, compile_launches
from cuda_triton.ops.pooling import (
    ADAPTIVE_AVG_POOL,
    AVG_POOL,
    MAX_POOL,
    PoolSpec,
    heuristic_schedule,
    launches,
    reference_pool,
    schedules,
)
from cuda_triton.ops.tensor_meta import TensorMeta
from op_tensors import DTYPES, LAYOUTS, assert_matches, poisoned, random_input, run

pytestmark = pytest.mark.timeout(300)


def _random_case(rng: random.Random, kind: int, spatial: int) -> dict:
    """Random pool arguments with a non-empty output (kernels up to 3, odd sizes)."""
    while True:
        kernel = tuple(rng.randint(1, 3) for _ in range(spatial))
        stride = tuple(rng.randint(1, 3) for _ in range(spatial))
        padding = tuple(rng.randint(0, k // 2) for k in kernel)
        dilation = tuple(rng.randint(1, 2) for _ in range(spatial)) if kind == MAX_POOL else (1,) * spatial
        size = tuple(rng.randint(3, 9 if spatial < 3 else 6) for _ in range(spatial))
        spec_args = {"kernel": kernel, "stride": stride, "padding": padding, "dilation": dilation}
        spec_args["ceil_mode"] = rng.random() < 0.5
        spec_args["count_include_pad"] = rng.random() < 0.5
        spec_args["divisor_override"] = rng.choice([None, None, 3])
        spec_args["size"] = size
        spec_args["output_size"] = tuple(rng.randint(1, s + 1) for s in size)
        if all(
            (s + 2 * p - d * (k - 1) - 1) >= 0
            for s, p, d, k in zip(size, padding, dilation, kernel, strict=True)
        ):
            return spec_args


def _spec(kind: int, x: torch.Tensor, a: dict) -> PoolSpec:
    meta = TensorMeta.of(x)
    spatial = len(a["size"])
    if kind == MAX_POOL:
        return PoolSpec.max_pool(
            meta, spatial, a["kernel"], a["stride"], a["padding"], a["dilation"], a["ceil_mode"]
        )
    if kind == AVG_POOL:
        return PoolSpec.avg_pool(
            meta, spatial, a["kernel"], a["stride"], a["padding"], a["ceil_mode"], a["count_include_pad"],
            a["divisor_override"],
        )  # fmt: skip
    return PoolSpec.adaptive_avg_pool(meta, a["output_size"])


def _check(spec: PoolSpec, x: torch.Tensor) -> None:
    assert spec.supports(), spec.supports().reason
    y = poisoned(spec.output())
    run(launches(spec, heuristic_schedule(spec)), {"in0": x, "out": y})
    assert_matches(y, reference_pool(spec, x), exact=spec.kind == MAX_POOL)


KINDS = {"max": MAX_POOL, "avg": AVG_POOL, "adaptive": ADAPTIVE_AVG_POOL}


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("spatial", [1, 2, 3])
@pytest.mark.parametrize("kind", list(KINDS))
def test_pool_matches_aten(kind: str, spatial: int, dtype: torch.dtype) -> None:
    rng = random.Random(f"{kind}{spatial}{dtype}")
    gen = torch.Generator().manual_seed(rng.randrange(2**31))
    for layout in LAYOUTS * 2:
        a = _random_case(rng, KINDS[kind], spatial)
        n, c = rng.randint(1, 2), rng.randint(1, 5)
        x = random_input((n, c, *a["size"]), dtype, layout, gen)
        _check(_spec(KINDS[kind], x, a), x)


@pytest.mark.parametrize("kind", list(KINDS))
def test_unbatched_input(kind: str) -> None:
    rng = random.Random(kind)
    gen = torch.Generator().manual_seed(7)
    for spatial in (2, 3):
        a = _random_case(rng, KINDS[kind], spatial)
        x = random_input((3, *a["size"]), torch.float32, "strided", gen)
        _check(_spec(KINDS[kind], x, a), x)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_torchvision_pools(dtype: torch.dtype) -> None:
    """ResNet's 3x3/2 max pool with padding 1, GoogLeNet's ceil-mode max pool, DenseNet's 2x2 avg pool, a
    global (7x7 -> 1x1) and an uneven adaptive avg pool, channels-last with many channels."""
    gen = torch.Generator().manual_seed(0)
    x = random_input((2, 80, 12, 11), dtype, "channels_last", gen)
    meta = TensorMeta.of(x)
    for spec in (
        PoolSpec.max_pool(meta, 2, [3, 3], [2, 2], [1, 1]),
        PoolSpec.max_pool(meta, 2, [3], [2], [0], [1], True),
        PoolSpec.avg_pool(meta, 2, [2, 2], [2, 2]),
        PoolSpec.adaptive_avg_pool(meta, [1, 1]),
        PoolSpec.adaptive_avg_pool(meta, [5, 3]),
    ):
        _check(spec, x)


@pytest.mark.parametrize("ceil_mode", [False, True])
@pytest.mark.parametrize("count_include_pad", [False, True])
def test_avg_pool_divisors(ceil_mode: bool, count_include_pad: bool) -> None:
    """Windows overhanging the padded input (ceil_mode) and the padding on both sides, each divisor rule."""
    gen = torch.Generator().manual_seed(4)
    for size in ((6, 7), (7, 8)):
        x = random_input((1, 3, *size), torch.float32, "contiguous", gen)
        for kernel, stride, padding in (([3, 3], [2, 2], [1, 1]), ([4, 2], [3, 2], [2, 1])):
            for divisor in (None, 5):
                spec = PoolSpec.avg_pool(
                    TensorMeta.of(x), 2, kernel, stride, padding, ceil_mode, count_include_pad, divisor
                )
                _check(spec, x)


def test_max_pool_propagates_nan_and_inf() -> None:
    x = torch.randn(1, 3, 6, 6, generator=torch.Generator().manual_seed(1))
    x[0, 0, 1, 1] = float("nan")
    x[0, 1, 2, 3] = float("inf")
    x[0, 2] = float("-inf")
    spec = PoolSpec.max_pool(TensorMeta.of(x), 2, [2], [2])
    y = poisoned(spec.output())
    run(launches(spec, heuristic_schedule(spec)), {"in0": x, "out": y})
    expected = reference_pool(spec, x)
    assert torch.isnan(y[0, 0, 0, 0]) and torch.isnan(y).sum() == 1
    torch.testing.assert_close(y, expected, rtol=0, atol=0, equal_nan=True)


def test_every_schedule_runs() -> None:
    gen = torch.Generator().manual_seed(2)
    x = random_input((1, 6, 7, 9), torch.float16, "channels_last", gen)
    spec = PoolSpec.avg_pool(TensorMeta.of(x), 2, [3, 3], [2, 2], [1, 1], True, False)
    expected = reference_pool(spec, x)
    for schedule in schedules(spec):
        y = poisoned(spec.output())
        run(launches(spec, schedule), {"in0": x, "out": y})
        assert_matches(y, expected)


def test_any_output_layout() -> None:
    """The kernel writes the strides it is given (a planner may keep channels-last where ATen would not)."""
    gen = torch.Generator().manual_seed(3)
    x = random_input((2, 4, 5, 6, 7), torch.float32, "channels_last", gen)
    base = PoolSpec.avg_pool(TensorMeta.of(x), 3, [2, 2, 2], [1, 2, 2], [1, 0, 1])
    assert base.output().strides == tuple(reference_pool(base, x).stride())  # contiguous: ATen's avg_pool3d
    out = base.output()
    cl = (out.sizes[1] * out.sizes[2] * out.sizes[3] * out.sizes[4], 1) + tuple(
        out.sizes[1] * s for s in (out.sizes[3] * out.sizes[4], out.sizes[4], 1)
    )
    spec = PoolSpec(**{**base.__dict__, "out_strides": cl})
    y = poisoned(spec.output())
    run(launches(spec, heuristic_schedule(spec)), {"in0": x, "out": y})
    assert y.stride() == cl
    assert_matches(y, reference_pool(base, x))


# ---- the layout rule against ATen's meta functions ----------------------------------------------------------
def _meta_output(spec: PoolSpec) -> torch.Tensor:
    """ATen's output on a meta tensor (a 1-D pool: the 2-D pool of the unsqueezed input, squeezed)."""
    return reference_pool(spec, torch.empty_strided(spec.input.sizes, spec.input.strides, device="meta"))


@pytest.mark.parametrize("kind", list(KINDS))
def test_layout_rule_matches_aten_meta(kind: str) -> None:
    rng = random.Random(f"layout{kind}")
    for _ in range(60):
        spatial = rng.randint(1, 3)
        a = _random_case(rng, KINDS[kind], spatial)
        batched = rng.random() < 0.8
        sizes = ((rng.randint(1, 3),) if batched else ()) + (rng.randint(1, 4), *a["size"])
        layout = rng.choice(LAYOUTS if batched and spatial > 1 else ("contiguous", "strided"))
        x = random_input(sizes, torch.float32, layout, torch.Generator().manual_seed(0))
        spec = _spec(KINDS[kind], x, a)
        if not spec.supports():
            continue
        expected = _meta_output(spec)
        out = spec.output()
        assert out.sizes == tuple(expected.shape), (spec, expected.shape)
        if spatial > 1:
            assert out.strides == tuple(expected.stride()), (spec, expected.stride())
        else:
            assert out.strides == TensorMeta.contiguous(out.sizes, "float32").strides


# ---- declines ----------------------------------------------------------------------------------------------
def test_declines_with_reasons() -> None:
    x = TensorMeta.contiguous((1, 2, 4, 4), "float32")
    cases = [
        (PoolSpec.max_pool(x, 2, [3], [1], [2]), "padding"),
        (PoolSpec.avg_pool(x, 2, [2], [1], [0], False, True, 0), "divisor_override"),
        (PoolSpec.max_pool(x, 2, [5], [1]), "empty"),
        (PoolSpec.max_pool(TensorMeta.contiguous((1, 2, 4, 4), "int64"), 2, [2]), "int64"),
        (PoolSpec.max_pool(TensorMeta.contiguous((2, 4, 4), "float32"), 3, [2]), "dims"),
        (PoolSpec.adaptive_avg_pool(x, [0, 2]), "output_size"),
        (PoolSpec.max_pool(TensorMeta.contiguous((0, 2, 4, 4), "float32"), 2, [2]), "empty"),
    ]
    for spec, word in cases:
        support = spec.supports()
        assert not support and word in support.reason and spec.name in support.reason, support.reason
    with pytest.raises(ValueError, match="stride"):
        PoolSpec.max_pool(x, 2, [2], [1, 1, 1])
    with pytest.raises(ValueError, match="padding"):
        launches(cases[0][0], heuristic_schedule(cases[0][0]))


# ---- AOT ---------------------------------------------------------------------------------------------------
def _aot_specs() -> list[PoolSpec]:
    cl = (2 * 64 * 56 * 56, 1, 56 * 64, 64)
    x16 = TensorMeta((2, 64, 56, 56), cl, "float16")
    x32 = TensorMeta.contiguous((2, 64, 56, 56), "float32")
    x3 = TensorMeta.contiguous((1, 8, 8, 16, 16), "bfloat16")
    big = TensorMeta.contiguous((64, 256, 384, 384), "float16")  # > 2^31 elements: 64-bit offsets
    return [
        PoolSpec.max_pool(x16, 2, [3], [2], [1]),
        PoolSpec.avg_pool(x32, 2, [3], [2], [1], True, False),
        PoolSpec.avg_pool(x16, 2, [2], [2], [0], False, True, 4),
        PoolSpec.adaptive_avg_pool(TensorMeta(x16.sizes, x16.strides, "bfloat16"), [7, 7]),
        PoolSpec.max_pool(x3, 3, [3], [2], [1], [1], True),
        PoolSpec.adaptive_avg_pool(x3, [2, 3, 4]),
        PoolSpec.max_pool(big, 2, [2]),
    ]


@pytest.mark.timeout(600)
def test_kernels_compile_for_sm80_and_sm90() -> None:
    unique = {}
    for spec in _aot_specs():
        assert spec.supports(), spec.supports().reason
        for launch in launches(spec, heuristic_schedule(spec)):
            unique.setdefault(compile_cache_key(launch, 90), launch)
    todo = list(unique.values())
    assert any(dict(la.constexprs)["INT64"] for la in todo)
    with ThreadPoolExecutor(2) as pool:
        results = dict(
            zip((80, 90), pool.map(lambda arch: compile_launches(todo, arch), (80, 90)), strict=True)
        )
    for arch, compiled in results.items():
        for launch, ck in zip(todo, compiled, strict=True):
            assert isinstance(ck, CompiledKernel) and ck.arch == arch and ck.cubin
            assert ck.num_warps == launch.num_warps
