"""Data-movement kernels against ATen (Triton's interpreter on CPU machines): dim-order/clone copies with dtype
changes, permute, slice, select, expand, as_strided, views (free or copied), cat, split, constant_pad_nd,
upsample nearest/nearest-exact (1-3 D) and bilinear; the layout rules against ATen; AOT compiles."""

from __future__ import annotations

import random
from concurrent.futures import ThreadPoolExecutor

import pytest
import torch
from cuda_triton.kernel.aot import CompiledKernel, compile_cache_key, compile_launches
from cuda_triton.ops.data_movement import (
    CatSpec,
    CopyPiece,
    PadSpec,
    SplitSpec,
    StridedCopySpec,
    UpsampleSpec,
    heuristic_schedule,
    launches,
    output_role,
    reference_cat,
    reference_pad,
    reference_split,
    reference_strided_copy,
    reference_upsample,
    schedules,
    simplify,
    view_is_free,
    view_strides,
)
from cuda_triton.ops.data_movement.kernels import copy_schedule
from cuda_triton.ops.data_movement.shape import (
    dim_order_copy_strides,
    is_non_overlapping_and_dense,
    pad_out_shape_and_stride,
)
from cuda_triton.ops.tensor_meta import TensorMeta
from op_tensors import DTYPES, assert_matches, device, poisoned, run, same_layout, tolerances

pytestmark = pytest.mark.timeout(300)
INT64_MAX = 2**63 - 1


def _random_tensor(rng: random.Random, sizes: list[int], dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """Random values in a random layout: a permutation of dims, maybe every other element of a dim, maybe an
    expanded (stride 0) size-1 dim."""
    rank = len(sizes)
    perm = list(range(rank))
    rng.shuffle(perm)
    steps = [rng.choice([1, 1, 2]) for _ in range(rank)]
    storage = [sizes[perm[i]] * steps[perm[i]] for i in range(rank)]
    gen = torch.Generator().manual_seed(rng.randrange(2**31))
    t = torch.randn(storage, generator=gen).to(dtype)
    inverse = [perm.index(d) for d in range(rank)]
    t = t.permute(inverse)[tuple(slice(None, None, s) for s in steps)]
    assert list(t.shape) == sizes
    return t.to(device())


def _random_sizes(rng: random.Random, rank: int, high: int = 5) -> list[int]:
    return [rng.randint(1, high) for _ in range(rank)]


def _outputs(spec) -> list[torch.Tensor]:
    return [poisoned(o) for o in spec.outputs()]


def _run(spec, inputs: list[torch.Tensor], schedule=None) -> list[torch.Tensor]:
    assert spec.supports(), spec.supports().reason
    outs = _outputs(spec)
    tensors = {f"in{k}": x for k, x in enumerate(inputs)}
    tensors.update({output_role(k): y for k, y in enumerate(outs)})
    run(launches(spec, schedule or heuristic_schedule(spec)), tensors)
    return outs


def _exact(actual: torch.Tensor, expected: torch.Tensor) -> None:
    assert actual.stride() == expected.stride(), (actual.stride(), expected.stride())
    assert_matches(actual, expected, exact=True)


# ---- strided views, materialised -----------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_dim_order_copies_match_aten(dtype: torch.dtype) -> None:
    """_clone_dim_order / _to_dim_order_copy: every input layout, dim order given or not, dtype changes."""
    rng = random.Random(f"dim_order{dtype}")
    for _ in range(12):
        rank = rng.randint(1, 5)
        x = _random_tensor(rng, _random_sizes(rng, rank), dtype)
        order = list(range(rank))
        rng.shuffle(order)
        dim_order = rng.choice([None, order, list(range(rank))])
        out_dtype = rng.choice(DTYPES)
        spec = StridedCopySpec.dim_order_copy(
            TensorMeta.of(x), dim_order, str(out_dtype)[6:], "_to_dim_order_copy"
        )
        (y,) = _run(spec, [x])
        if dim_order is None:
            expected = torch.clone(x).to(out_dtype)  # preserve format (the layout rule checks strides itself)
            expected = torch.empty_strided(y.shape, spec.outputs()[0].strides, dtype=out_dtype).copy_(
                expected
            )
            assert spec.outputs()[0].strides == torch.clone(x).stride()
        else:
            expected = reference_strided_copy(spec, x)
        _exact(y, expected)


def test_view_copies_match_aten() -> None:
    """permute, slice (negative and open bounds, steps), select, expand, as_strided, squeeze, unsqueeze, views."""
    rng = random.Random("views")
    for _ in range(40):
        rank = rng.randint(1, 5)
        x = _random_tensor(rng, _random_sizes(rng, rank), rng.choice(DTYPES))
        meta = TensorMeta.of(x)
        kind = rng.choice(
            ["permute", "slice", "select", "expand", "as_strided", "squeeze", "unsqueeze", "view"]
        )
        dim = rng.randrange(-rank, rank)
        if kind == "permute":
            dims = list(range(rank))
            rng.shuffle(dims)
            spec, expected = StridedCopySpec.permute(meta, dims), torch.ops.aten.permute_copy(x, dims)
        elif kind == "slice":
            start = rng.choice([None, 0, 1, -2, -7])
            end = rng.choice([None, INT64_MAX, 3, -1, 10])
            step = rng.randint(1, 3)
            spec = StridedCopySpec.slice(meta, dim, start, end, step)
            expected = torch.ops.aten.slice_copy.Tensor(x, dim, start, end, step)
        elif kind == "select":
            index = rng.randrange(-x.shape[dim], x.shape[dim])
            spec, expected = (
                StridedCopySpec.select(meta, dim, index),
                torch.ops.aten.select_copy.int(x, dim, index),
            )
        elif kind == "expand":
            sizes = [rng.randint(2, 3) if s == 1 else rng.choice([s, -1]) for s in x.shape]
            sizes = [rng.randint(1, 3) for _ in range(rng.randint(0, 1))] + sizes
            spec, expected = StridedCopySpec.expand(meta, sizes), torch.ops.aten.expand_copy(x, sizes)
        elif kind == "as_strided":
            base = x.contiguous()
            size = _random_sizes(rng, rng.randint(1, 3), 3)
            stride = [rng.randint(0, 3) for _ in size]
            reach = sum((s - 1) * st for s, st in zip(size, stride, strict=True))
            offset = rng.randint(0, max(0, base.numel() - 1 - reach))
            if reach + offset >= base.numel():
                continue
            x, meta = base, TensorMeta.of(base)
            spec = StridedCopySpec.as_strided(meta, size, stride, offset)
            expected = torch.ops.aten.as_strided_copy(base, size, stride, offset)
        elif kind == "squeeze":
            dims = sorted({rng.randrange(rank) for _ in range(2)})
            spec, expected = StridedCopySpec.squeeze(meta, dims), torch.ops.aten.squeeze_copy.dims(x, dims)
        elif kind == "unsqueeze":
            d = rng.randrange(-rank - 1, rank + 1)
            spec, expected = StridedCopySpec.unsqueeze(meta, d), torch.ops.aten.unsqueeze_copy(x, d)
        else:
            new = _factor(rng, x.numel())
            if rng.random() < 0.3:
                new[rng.randrange(len(new))] = -1
            spec, expected = StridedCopySpec.view(meta, new), torch.ops.aten.view_copy(x.contiguous(), new)
        (y,) = _run(spec, [x])
        _exact(y, expected)


def _factor(rng: random.Random, numel: int) -> list[int]:
    """A random list of sizes with product ``numel``."""
    sizes, rest = [], numel
    for _ in range(rng.randint(0, 4)):
        d = rng.choice([d for d in range(1, rest + 1) if rest % d == 0])
        sizes.append(d)
        rest //= d
    sizes.append(rest)
    rng.shuffle(sizes)
    return sizes


def test_free_views_match_torch_view() -> None:
    """view_strides gives Tensor.view's strides exactly when a view exists, and says no when it does not."""
    rng = random.Random("free views")
    free = 0
    for _ in range(3000):
        x = _random_tensor(rng, _random_sizes(rng, rng.randint(0, 5), 4))
        if rng.random() < 0.2 and x.dim():
            x = x.expand(*[3 if s == 1 and rng.random() < 0.5 else s for s in x.shape])
        new = _factor(rng, x.numel())
        try:
            expected = list(x.view(new).stride())
        except RuntimeError:
            expected = None
        got = view_strides(list(x.shape), list(x.stride()), new)
        assert view_is_free(list(x.shape), list(x.stride()), new) == (expected is not None), (x.stride(), new)
        if expected is not None:
            assert got == expected, (list(x.shape), x.stride(), new, got, expected)
            free += 1
    assert 500 < free < 2900  # both outcomes were exercised


def test_layout_rules_match_aten() -> None:
    """Dense/overlap detection, the preserve-format rule of clones, dim orders and constant_pad_nd's layouts."""
    rng = random.Random("layout rules")
    for _ in range(2000):
        rank = rng.randint(1, 5)
        x = _random_tensor(rng, _random_sizes(rng, rank, 4))
        if rng.random() < 0.2:
            x = x.expand(*[3 if s == 1 and rng.random() < 0.5 else s for s in x.shape])
        sizes, strides = list(x.shape), list(x.stride())
        assert is_non_overlapping_and_dense(sizes, strides) == (
            torch._prims_common.is_non_overlapping_and_dense_or_false(x)
        )
        assert dim_order_copy_strides(sizes, strides, []) == list(torch.clone(x).stride()), (sizes, strides)
        order = list(range(rank))
        rng.shuffle(order)
        permuted = torch.empty([sizes[d] for d in order]).permute([order.index(d) for d in range(rank)])
        assert dim_order_copy_strides(sizes, strides, order) == list(permuted.stride())
        if rank == 4 and _has_dim_order_ops():  # ExecuTorch's own op takes the memory-format orders only
            for order in ([0, 1, 2, 3], [0, 2, 3, 1]):
                expected = torch.ops.dim_order_ops._clone_dim_order(x, dim_order=order)
                assert dim_order_copy_strides(sizes, strides, order) == list(expected.stride())
        pad = [rng.randint(-1, 2) for _ in range(2 * rng.randint(0, rank))]
        out = [s + pad[2 * i] + pad[2 * i + 1] for i, s in enumerate(reversed(sizes)) if 2 * i < len(pad)]
        if all(s >= 1 for s in out):
            p = torch.constant_pad_nd(x, pad, 0.0)
            assert pad_out_shape_and_stride(sizes, strides, pad) == (list(p.shape), list(p.stride()))


def _has_dim_order_ops() -> bool:
    try:
        import executorch.exir.passes.dim_order_ops_registry  # noqa: F401  (registers the ops)
    except ImportError:  # the GPU machine has no executorch
        return False
    return True


# ---- cat / split / pad ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_cat_matches_aten(dtype: torch.dtype) -> None:
    rng = random.Random(f"cat{dtype}")
    for _ in range(8):
        rank = rng.randint(1, 5)
        sizes = _random_sizes(rng, rank)
        dim = rng.randrange(-rank, rank)
        xs = []
        for _ in range(rng.randint(1, 4)):
            s = list(sizes)
            s[dim] = rng.randint(1, 4)
            xs.append(_random_tensor(rng, s, dtype))
        if rank == 4 and rng.random() < 0.5:  # all channels-last: the output is too
            xs = [t.contiguous(memory_format=torch.channels_last) for t in xs]
        spec = CatSpec.of([TensorMeta.of(t) for t in xs], dim)
        (y,) = _run(spec, xs)
        _exact(y, reference_cat(spec, xs))


def test_split_matches_aten() -> None:
    rng = random.Random("split")
    for _ in range(10):
        rank = rng.randint(1, 5)
        x = _random_tensor(rng, _random_sizes(rng, rank, 6), rng.choice(DTYPES))
        dim = rng.randrange(-rank, rank)
        cuts, left = [], x.shape[dim]
        while left:
            cuts.append(rng.randint(1, left))
            left -= cuts[-1]
        spec = SplitSpec.of(TensorMeta.of(x), cuts, dim)
        outs = _run(spec, [x])
        for y, e in zip(outs, reference_split(spec, x), strict=True):
            _exact(y, e)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_constant_pad_matches_aten(dtype: torch.dtype) -> None:
    """Any number of padded dims, negative amounts (cropping), any fill value (rounded to the dtype as ATen does)."""
    rng = random.Random(f"pad{dtype}")
    for _ in range(10):
        rank = rng.randint(1, 5)
        x = _random_tensor(rng, _random_sizes(rng, rank), dtype)
        if rank == 4 and rng.random() < 0.5:
            x = x.contiguous(memory_format=torch.channels_last)
        pad = [rng.randint(-1, 3) for _ in range(2 * rng.randint(1, rank))]
        if any(x.shape[-1 - i] + pad[2 * i] + pad[2 * i + 1] < 1 for i in range(len(pad) // 2)):
            continue
        value = rng.choice([0.0, -1.5, 0.1, float("-inf")])
        spec = PadSpec.of(TensorMeta.of(x), pad, value)
        (y,) = _run(spec, [x])
        _exact(y, reference_pad(spec, x))


# ---- upsampling ----------------------------------------------------------------------------------------------
def _upsample_case(
    rng: random.Random, mode: str, spatial: int
) -> tuple[list[int], list[int] | None, list | None]:
    size = [rng.randint(1, 6) for _ in range(spatial)]
    if rng.random() < 0.5:
        return size, [rng.randint(1, 13) for _ in range(spatial)], None
    return size, None, [rng.choice([2.0, 1.5, 0.5, 1.7, 3.0, 2.1, 1.0]) for _ in range(spatial)]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize(
    "mode,spatial", [("nearest", 1), ("nearest", 2), ("nearest", 3), ("nearest_exact", 2), ("bilinear", 2)]
)
def test_upsample_matches_aten(mode: str, spatial: int, dtype: torch.dtype) -> None:
    rng = random.Random(f"{mode}{spatial}{dtype}")
    for trial in range(8):
        size, out_size, scales = _upsample_case(rng, mode, spatial)
        if scales is not None and any(int(s * f) < 1 for s, f in zip(size, scales, strict=True)):
            continue
        layout = ("channels_last" if trial % 2 else "strided") if spatial > 1 else "strided"
        x = _random_tensor(rng, [rng.randint(1, 2), rng.choice([1, 3, 4, 9]), *size], dtype)
        if layout == "channels_last":
            x = x.contiguous(memory_format=torch.channels_last if spatial == 2 else torch.channels_last_3d)
        align = rng.random() < 0.5
        spec = UpsampleSpec.of(mode, TensorMeta.of(x), out_size, scales, align)
        (y,) = _run(spec, [x])
        expected = reference_upsample(spec, x)
        assert same_layout(y.shape, y.stride(), _meta_upsample(spec, x).stride())
        assert_matches(y, expected, exact=mode != "bilinear")


def _meta_upsample(spec: UpsampleSpec, x: torch.Tensor) -> torch.Tensor:
    """ATen's output on a meta tensor with ``x``'s sizes and strides (its layout)."""
    m = torch.empty_strided(x.shape, x.stride(), device="meta")
    size = None if spec.scales[0] is not None else list(spec.output_size)
    scales = None if size is not None else list(spec.scales)
    if spec.mode == "bilinear":
        return torch.ops.aten.upsample_bilinear2d.vec(m, size, spec.align_corners, scales)
    prefix = "_upsample_nearest_exact" if spec.mode == "nearest_exact" else "upsample_nearest"
    return getattr(torch.ops.aten, f"{prefix}{spec.spatial}d").vec(m, size, scales)


def test_upsample_sizes_follow_aten() -> None:
    """Output sizes from scale factors are floor(size * factor) in double precision, as ATen computes them."""
    for size, factor in ((7, 1.7), (10, 0.3), (3, 2.5), (5, 2.1), (224, 1 / 3)):
        x = torch.empty(1, 1, size, size, device="meta")
        spec = UpsampleSpec.of("nearest", TensorMeta.of(x), None, [factor, factor])
        expected = torch.ops.aten.upsample_nearest2d.vec(x, None, [factor, factor])
        assert spec.outputs()[0].sizes == tuple(expected.shape)


# ---- the kernels' plans ---------------------------------------------------------------------------------------
def test_layout_changes_are_tiled_transposes() -> None:
    """contiguous <-> channels-last (any dtype change too) runs the transpose kernel; odd sizes, every element."""
    gen = torch.Generator().manual_seed(5)
    x = torch.randn(3, 37, 5, 21, generator=gen)
    for src, order, dtype in (
        (x, [0, 2, 3, 1], "float16"),
        (x.contiguous(memory_format=torch.channels_last), [0, 1, 2, 3], "float32"),
    ):
        spec = StridedCopySpec.dim_order_copy(TensorMeta.of(src), order, dtype, "_to_dim_order_copy")
        (launch,) = launches(spec, heuristic_schedule(spec))
        assert launch.name == "transpose_copy_kernel"
        for schedule in schedules(spec):
            (y,) = _run(spec, [src], schedule)
            _exact(y, reference_strided_copy(spec, src))


def test_dims_merge() -> None:
    """A contiguous clone is one run; a channel slice of a channels-last tensor two dims; padding keeps its dims."""
    piece = CopyPiece("in0", "out", "float32", "float32", (2, 3, 4, 5), (60, 20, 5, 1), (60, 20, 5, 1))
    assert simplify(piece).sizes == (120,)
    cl = (120, 1, 30, 6)  # (2, 6, 4, 5) channels-last, channels 1..4 sliced out
    piece = CopyPiece("in0", "out", "float32", "float32", (2, 3, 4, 5), cl, (60, 1, 15, 3), src_offset=1)
    assert simplify(piece).sizes == (40, 3)
    piece = CopyPiece(
        "in0", "out", "float32", "float32", (2, 3, 6, 5), (60, 20, 5, 1), (90, 30, 5, 1),
        pad_before=(0, 0, 1, 0), src_sizes=(2, 3, 4, 5),
    )  # fmt: skip
    assert simplify(piece).sizes == (6, 30) and simplify(piece).pad_before == (0, 5)


def test_rank_six_copies() -> None:
    rng = random.Random("rank6")
    x = _random_tensor(rng, [2, 3, 2, 3, 2, 3])
    dims = [5, 3, 1, 4, 2, 0]
    spec = StridedCopySpec.permute(TensorMeta.of(x), dims)
    (y,) = _run(spec, [x])
    _exact(y, x.permute(*dims).contiguous())
    big = TensorMeta(
        (2,) * 7, tuple(2 ** (7 - i) for i in range(7)), "float32"
    )  # every other element: 7 dims
    assert not StridedCopySpec.permute(big, list(range(7))).supports()


def test_big_tensors_index_in_64_bits() -> None:
    """Shapes only: nothing is allocated."""
    x = TensorMeta.contiguous((64, 256, 384, 384), "float16")
    for spec in (
        StridedCopySpec.dim_order_copy(x, [0, 2, 3, 1]),
        CatSpec.of([x, x], 1),
        PadSpec.of(x, [1, 1, 1, 1]),
        UpsampleSpec.of("nearest", x, None, [2.0, 2.0]),
    ):
        for launch in launches(spec, heuristic_schedule(spec)):
            assert dict(launch.constexprs)["INT64"], launch.name
    small = StridedCopySpec.permute(TensorMeta.contiguous((4, 5), "float32"), [1, 0])
    assert not any(dict(la.constexprs)["INT64"] for la in launches(small, heuristic_schedule(small)))


def test_declines_and_errors() -> None:
    x = TensorMeta.contiguous((2, 3, 4), "float32")
    declined = [
        (StridedCopySpec.permute(TensorMeta.contiguous((2, 3), "int64"), [1, 0]), "int64"),
        (StridedCopySpec.slice(x, 1, 3, 3), "empty"),
        (StridedCopySpec.as_strided(x, [5, 5], [5, 1], 0), "past the end"),
        (StridedCopySpec.view(x, [4, 6]).with_out_strides((1, 4)), "contiguous"),
        (CatSpec.of([x, TensorMeta.contiguous((2, 3, 4), "float16")], 0), "dtypes"),
        (CatSpec.of([x, TensorMeta.contiguous((2, 4, 4), "float32")], 0), "differ"),
        (UpsampleSpec.of("bilinear", x, [5], None), "2-D"),
        (PadSpec.of(x, [-3, -2]), "negative"),
    ]
    for spec, words in declined:
        support = spec.supports()
        assert not support and words in support.reason, support.reason
        with pytest.raises(ValueError, match=words):
            launches(spec, copy_schedule())
    for bad, words in (
        (lambda: StridedCopySpec.permute(x, [0, 0, 1]), "permutation"),
        (lambda: StridedCopySpec.select(x, 1, 3), "out of range"),
        (lambda: StridedCopySpec.slice(x, 3), "dim 3"),
        (lambda: StridedCopySpec.expand(x, [2, 2, 4]), "cannot expand"),
        (lambda: StridedCopySpec.view(x, [5, -1]), "do not hold"),
        (lambda: SplitSpec.of(x, [1, 1], 1), "add up"),
        (lambda: PadSpec.of(x, [1]), "pairs"),
        (lambda: UpsampleSpec.of("nearest", x, [2], [2.0]), "exactly one"),
        (lambda: UpsampleSpec.of("cubic", x, [2], None), "unknown mode"),
    ):
        with pytest.raises(ValueError, match=words):
            bad()


# ---- AOT ---------------------------------------------------------------------------------------------------
def _aot_launches() -> list:
    x = TensorMeta.contiguous((2, 64, 56, 56), "float16")
    cl = TensorMeta((2, 64, 56, 56), (64 * 56 * 56, 1, 56 * 64, 64), "float16")
    x32 = TensorMeta.contiguous((2, 64, 56, 56), "float32")
    big = TensorMeta.contiguous((64, 256, 384, 384), "bfloat16")
    specs = [
        StridedCopySpec.dim_order_copy(x, [0, 2, 3, 1]),  # transpose
        StridedCopySpec.dim_order_copy(cl, [0, 1, 2, 3], "float32", "_to_dim_order_copy"),
        StridedCopySpec.permute(TensorMeta.contiguous((2, 3, 4, 5, 6, 7), "float32"), [5, 3, 1, 4, 2, 0]),
        StridedCopySpec.slice(cl, 1, 0, 32),
        StridedCopySpec.view(cl, [2, -1]),
        CatSpec.of([cl, cl], 1),
        SplitSpec.of(x32, [16, 48], 1),
        PadSpec.of(cl, [1, 1, 1, 1], -1.0),
        PadSpec.of(big, [1, 1]),
        UpsampleSpec.of("nearest", cl, None, [2.0, 2.0]),
        UpsampleSpec.of("nearest_exact", TensorMeta.contiguous((1, 8, 4, 6, 6), "float32"), [8, 9, 9], None),
        UpsampleSpec.of("bilinear", cl, [112, 112], None, False),
        UpsampleSpec.of(
            "bilinear", TensorMeta.contiguous((2, 21, 28, 28), "float32"), None, [8.0, 8.0], True
        ),
        StridedCopySpec.dim_order_copy(big, [0, 2, 3, 1]),
    ]
    return [launch for spec in specs for launch in launches(spec, heuristic_schedule(spec))]


@pytest.mark.timeout(900)
def test_kernels_compile_for_sm80_and_sm90() -> None:
    unique = {}
    for launch in _aot_launches():
        unique.setdefault(compile_cache_key(launch, 90), launch)
    todo = list(unique.values())
    names = {la.name for la in todo}
    assert names >= {
        "strided_copy_kernel", "pad_copy_kernel", "transpose_copy_kernel", "upsample_nearest_kernel",
        "upsample_bilinear_kernel",
    }  # fmt: skip
    with ThreadPoolExecutor(2) as pool:
        results = dict(
            zip((80, 90), pool.map(lambda arch: compile_launches(todo, arch), (80, 90)), strict=True)
        )
    for arch, compiled in results.items():
        for launch, ck in zip(todo, compiled, strict=True):
            assert isinstance(ck, CompiledKernel) and ck.arch == arch and ck.cubin, launch.name
            assert ck.num_warps == launch.num_warps


def test_tolerances_helper_is_strict_for_copies() -> None:
    assert tolerances(torch.float32)["rtol"] <= 1e-5
