"""Reductions against ATen: sum/mean/amax/amin over random dim sets, keepdim, every dtype and layout, global
average pooling on channels-last and contiguous inputs, the layout rule against fake tensors, AOT compiles."""

from __future__ import annotations

import random
import zlib
from concurrent.futures import ThreadPoolExecutor

import pytest
import torch
from cuda_triton.kernel.aot import check_entry, compile_launches
from cuda_triton.ops.reduction import (
    REDUCTIONS,
    ReductionSpec,
    launches,
    out_shape_and_stride,
    reduction_spec,
    reference,
    supports,
)
from cuda_triton.ops.tensor_meta import TensorMeta
from ops_helpers import DEVICE, DTYPES, LAYOUTS, cpu, make_tensor, meta, poisoned, random_shape, tolerance

A = torch.ops.aten


def rng_for(*key) -> tuple[random.Random, torch.Generator]:
    seed = zlib.crc32(repr(key).encode())
    return random.Random(seed), torch.Generator().manual_seed(seed)


def run(spec: ReductionSpec, x: torch.Tensor) -> torch.Tensor:
    assert supports(spec), supports(spec).reason
    out = poisoned(spec.out.sizes, spec.out.strides, spec.out.dtype)
    for launch in launches(spec):
        launch.run({"in0": x, "out": out})
    return out


def check(spec: ReductionSpec, x: torch.Tensor) -> torch.Tensor:
    out = run(spec, x)
    ref = reference(spec, cpu({"in0": x}))
    assert out.shape == ref.shape and out.stride() == ref.stride()
    torch.testing.assert_close(out.cpu(), ref, **tolerance(spec.out.dtype, spec.length))
    return out


def eager(op: str, x: torch.Tensor, dims, keepdim: bool) -> torch.Tensor:
    if op == "sum":
        return A.sum.dim_IntList(x, dims, keepdim)
    if op == "mean":
        return A.mean.dim(x, dims, keepdim)
    return getattr(A, op)(x, dims, keepdim)


@pytest.mark.timeout(300)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", REDUCTIONS)
def test_random_dims(op: str, dtype: str) -> None:
    rng, gen = rng_for("random", op, dtype)
    for _ in range(10):
        rank = rng.randint(1, 5)
        shape = random_shape(rng, rank, 1, 6)
        dims = sorted(rng.sample(range(rank), rng.randint(1, rank))) if rng.random() < 0.85 else []
        dims = [d - rank if rng.random() < 0.3 else d for d in dims]  # negative dims too
        keepdim = rng.random() < 0.5
        x = make_tensor(shape, dtype, rng.choice(LAYOUTS), gen, rng)
        spec = reduction_spec(op, meta(x), dims, keepdim)
        check(spec, x)
        expected = eager(op, x.cpu().float(), dims, keepdim)
        assert spec.out.sizes == tuple(expected.shape)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", ["channels_last", "contiguous"])
def test_global_average_pooling(dtype: str, layout: str) -> None:
    """mean over H, W (and D, H, W) of N, C, ... inputs, as torchvision's classifiers end."""
    rng, gen = rng_for("gap", dtype, layout)
    for shape in ((2, 12, 7, 7), (1, 20, 5, 9), (2, 6, 3, 4, 5)):
        x = make_tensor(shape, dtype, layout, gen, rng)
        dims = list(range(2, len(shape)))
        for keepdim in (True, False):
            spec = reduction_spec("mean", meta(x), dims, keepdim)
            check(spec, x)
            torch.testing.assert_close(
                run(spec, x).cpu().float(),
                x.cpu().float().mean(dims, keepdim),
                **tolerance(dtype, spec.length),
            )


def test_long_reduction_and_sum_dtype() -> None:
    """A reduction longer than one BLOCK_R (the loop), and sum of fp16 into fp32 (sum's dtype argument)."""
    rng, gen = rng_for("long")
    x = make_tensor((3, 2500), "float16", "contiguous", gen, rng)
    spec = reduction_spec("sum", meta(x), [1], dtype="float32")
    assert spec.out.dtype == "float32"
    check(spec, x)
    x = make_tensor((2100, 3), "float32", "permuted", gen, rng)
    check(reduction_spec("mean", meta(x), [0], keepdim=True), x)
    check(reduction_spec("amax", meta(x), []), x)


def test_nan_propagates_through_amax_and_amin() -> None:
    x = torch.randn(4, 6, device=DEVICE)
    x[1, 2] = float("nan")
    for op in ("amax", "amin", "sum"):
        out = run(reduction_spec(op, meta(x), [1]), x)
        assert out[1].isnan() and not out[[0, 2, 3]].isnan().any(), op


def test_layout_rule_matches_fake_tensors() -> None:
    from torch._subclasses.fake_tensor import FakeTensorMode

    rng, gen = rng_for("rule")
    for _ in range(100):
        rank = rng.randint(1, 5)
        x = make_tensor(random_shape(rng, rank, 1, 4), "float32", rng.choice(LAYOUTS), gen, rng)
        dims = sorted(rng.sample(range(rank), rng.randint(0, rank)))
        keepdim = rng.random() < 0.5
        with FakeTensorMode(allow_non_fake_inputs=True) as mode:
            y = A.mean.dim(mode.from_tensor(x), dims, keepdim)
        sizes, strides = out_shape_and_stride(x.shape, dims, keepdim)
        assert (sizes, strides) == (tuple(y.shape), y.stride()), (x.shape, x.stride(), dims, keepdim)


def test_declines_and_bad_arguments() -> None:
    x = TensorMeta.contiguous((2, 3, 4), "float32")
    assert "int64" in supports(reduction_spec("sum", TensorMeta.contiguous((2, 3), "int64"), [1])).reason
    assert (
        "size 0" in supports(reduction_spec("amax", TensorMeta.contiguous((2, 0, 3), "float32"), [1])).reason
    )
    with pytest.raises(ValueError, match="out of range"):
        reduction_spec("sum", x, [3])
    with pytest.raises(ValueError, match="twice"):
        reduction_spec("sum", x, [1, -2])
    with pytest.raises(ValueError, match="unknown reduction"):
        reduction_spec("prod", x, [1])
    empty = reduction_spec("sum", TensorMeta.contiguous((0, 3), "float32"), [1])
    assert supports(empty) and launches(empty) == []


def test_big_inputs_index_in_64_bits() -> None:
    spec = reduction_spec("mean", TensorMeta.channels_last((64, 256, 512, 512), "float16"), [2, 3], True)
    (launch,) = launches(spec)
    assert dict(launch.constexprs)["INDEX_64"] is True


@pytest.mark.timeout(600)
def test_every_kernel_compiles_for_sm80_and_sm90() -> None:
    specs = [
        reduction_spec("mean", TensorMeta.channels_last((8, 960, 7, 7), "float16"), [2, 3], True),
        reduction_spec("mean", TensorMeta.contiguous((8, 960, 7, 7), "bfloat16"), [-1, -2], False),
        reduction_spec("sum", TensorMeta.contiguous((64, 4096), "float32"), [1]),
        reduction_spec("amax", TensorMeta.contiguous((16, 128, 50), "float16"), [1], True),
        reduction_spec("amin", TensorMeta.channels_last((2, 32, 8, 8, 8), "float32"), [0, 2]),
        reduction_spec("mean", TensorMeta.channels_last((64, 256, 512, 512), "float16"), [2, 3], True),
    ]
    items = [launch for spec in specs for launch in launches(spec)]
    with ThreadPoolExecutor(2) as pool:
        by_arch = dict(
            zip((80, 90), pool.map(lambda arch: compile_launches(items, arch), (80, 90)), strict=True)
        )
    for arch, compiled in by_arch.items():
        for launch, ck in zip(items, compiled, strict=True):
            assert ck.arch == arch and ck.cubin and ck.num_warps == launch.num_warps
            check_entry(launch, ck.ptx, ck.param_types)
