"""Reductions against ATen: sum/mean/amax/amin over random dim sets, keepdim, every dtype and layout, global
average pooling on channels-last and contiguous inputs, the layout rule against fake tensors, AOT compiles."""

from __future__ import annotations

import random
import zlib
from concurrent.futures import ThreadPoolExecutor

import pytest
import torch
from cuda_triton.conv.templates.geometry import NUM_SMS
from cuda_triton.kernel.aot import check_entry, compile_launches
from cuda_triton.kernel.launch import Schedule, allocate_scratch
from cuda_triton.ops.reduction import (
    REDUCTIONS,
    ReductionSpec,
    heuristic_schedule,
    launches,
    out_shape_and_stride,
    reduction_spec,
    reference,
    scratch,
    supports,
)
from cuda_triton.ops.reduction.schedules import split_of
from cuda_triton.ops.tensor_meta import TensorMeta
from op_tensors import assert_left_zero
from ops_helpers import DEVICE, DTYPES, LAYOUTS, cpu, make_tensor, meta, poisoned, random_shape, tolerance

A = torch.ops.aten


def rng_for(*key) -> tuple[random.Random, torch.Generator]:
    seed = zlib.crc32(repr(key).encode())
    return random.Random(seed), torch.Generator().manual_seed(seed)


def run(spec: ReductionSpec, x: torch.Tensor, schedule: Schedule | None = None) -> torch.Tensor:
    """``spec``'s launches with ``schedule`` (None: the heuristic's) on ``x``, with their scratch tensors (the
    workspace NaN-poisoned); the zeroed ones must be left zero."""
    assert supports(spec), supports(spec).reason
    out = poisoned(spec.out.sizes, spec.out.strides, spec.out.dtype)
    scratch_tensors = scratch(spec, schedule or heuristic_schedule(spec))
    tensors = {"in0": x, "out": out, **allocate_scratch(scratch_tensors, x.device, poison=True)}
    for launch in launches(spec, schedule):
        launch.run(tensors)
    assert_left_zero(scratch_tensors, tensors)
    return out


def check(spec: ReductionSpec, x: torch.Tensor, schedule: Schedule | None = None) -> torch.Tensor:
    out = run(spec, x, schedule)
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


@pytest.mark.timeout(300)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", REDUCTIONS)
def test_split_reduction(op: str, dtype: str) -> None:
    """SPLIT programs share each row block's reduction (a share count that does not divide the chunks, rows
    spanning two images, channels-last and contiguous inputs); the last share combines the partials."""
    rng, gen = rng_for("split", op, dtype)
    for layout, shape, dims in (("channels_last", (3, 12, 9, 7), [2, 3]), ("contiguous", (5, 3, 70), [2])):
        x = make_tensor(shape, dtype, layout, gen, rng)
        spec = reduction_spec(op, meta(x), dims, keepdim=rng.random() < 0.5)
        for split in (2, 3, 4):  # 8 or 9 chunks: uneven shares, and with 4 over 9 one share of none
            schedule = Schedule.make(2, 1, BLOCK_K=8, BLOCK_R=8, SPLIT=split)
            (launch,) = launches(spec, schedule)
            assert launch.grid[2] == split and len(scratch(spec, schedule)) == 2
            check(spec, x, schedule)
    if op in ("amax", "amin", "sum"):  # a NaN in one share reaches the combined result
        x = make_tensor((4, 70), dtype, "contiguous", gen, rng)
        x[1, 50] = float("nan")
        out = run(reduction_spec(op, meta(x), [1]), x, Schedule.make(1, 1, BLOCK_K=2, BLOCK_R=8, SPLIT=3))
        assert out[1].isnan() and not out[[0, 2, 3]].isnan().any()


def test_heuristic_splits_long_reductions_of_few_rows() -> None:
    """Large channels-last global average pooling spans up to 64 adjacent channels a tile and, with few row blocks,
    splits the positions across programs towards four per SM; many rows do not split, and small inputs (a
    batch-1 mean) take one-row tiles and no split."""
    se_mean = reduction_spec("mean", TensorMeta.channels_last((32, 32, 112, 112), "float16"), [2, 3], True)
    s = heuristic_schedule(se_mean)
    assert s["BLOCK_K"] == 32 and s["BLOCK_K"] * s["BLOCK_R"] <= 4096
    programs = launches(se_mean)[0].grid
    assert split_of(s) > 1 and 2 * NUM_SMS <= programs[0] * programs[2] <= 5 * NUM_SMS
    wide = reduction_spec("mean", TensorMeta.channels_last((32, 672, 14, 14), "float16"), [2, 3], True)
    assert heuristic_schedule(wide)["BLOCK_K"] == 64 and split_of(heuristic_schedule(wide)) == 1
    for small in ((1, 960, 7, 7), (1, 32, 112, 112), (32, 480, 14, 14)):  # below WIDE_TILES_MIN_ELEMENTS
        spec = reduction_spec("mean", TensorMeta.channels_last(small, "float16"), [2, 3], True)
        s = heuristic_schedule(spec)
        assert split_of(s) == 1 and launches(spec)[0].grid[0] >= min(small[1], 2 * NUM_SMS)
    rows = reduction_spec("sum", TensorMeta.contiguous((4, 100000), "float32"), [1])
    assert heuristic_schedule(rows)["BLOCK_R"] == 1024 and split_of(heuristic_schedule(rows)) > 1
    for empty in ((0, 3), (0, 32, 7, 7)):  # no output: no split, no scratch, no launch
        spec = reduction_spec("mean", TensorMeta.contiguous(empty, "float32"), [1])
        assert split_of(heuristic_schedule(spec)) == 1 and scratch(spec, heuristic_schedule(spec)) == []
        assert launches(spec) == []


def test_mean_of_nothing_is_nan() -> None:
    """A mean over a dim of size 0 is 0 / 0 (ATen's NaN); the sum is 0."""
    x = torch.randn(3, 0, 4, device=DEVICE)
    assert run(reduction_spec("mean", meta(x), [1]), x).isnan().all()
    assert (run(reduction_spec("sum", meta(x), [1]), x) == 0).all()


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
        reduction_spec("mean", TensorMeta.channels_last((32, 32, 112, 112), "float16"), [2, 3], True),
        reduction_spec("amax", TensorMeta.contiguous((4, 100000), "bfloat16"), [1]),
    ]
    assert sum(split_of(heuristic_schedule(spec)) > 1 for spec in specs) >= 2
    items = [launch for spec in specs for launch in launches(spec)]
    with ThreadPoolExecutor(2) as pool:
        by_arch = dict(
            zip((80, 90), pool.map(lambda arch: compile_launches(items, arch), (80, 90)), strict=True)
        )
    for arch, compiled in by_arch.items():
        for launch, ck in zip(items, compiled, strict=True):
            assert ck.arch == arch and ck.cubin and ck.num_warps == launch.num_warps
            check_entry(launch, ck.ptx, ck.param_types)
