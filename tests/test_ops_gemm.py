"""GEMM kernels against ATen (Triton's interpreter on CPU machines): addmm with every bias broadcast, alpha and
beta, mm and bmm over transposed, strided and expanded operands, linear over batched inputs; fp32 exact and TF32,
fp16, bf16; every schedule (split-K too); output layouts; declines; AOT compiles for sm_80 and sm_90."""

from __future__ import annotations

import dataclasses
import random

import pytest
import torch
from cuda_triton.conv.epilogue import ConvEpilogue
from cuda_triton.kernel.launch import allocate_scratch  # noqa: E402
from cuda_triton.ops.elementwise.program import instruction
from cuda_triton.ops.gemm import (
    COLSUM_ROLE,
    GemmSpec,
    column_sums,
    heuristic_schedule,
    launches,
    reference_gemm,
    schedules,
    scratch,
)
from cuda_triton.ops.tensor_meta import TensorMeta
from op_tensors import (
    DTYPES,
    assert_compiles_for_sm80_and_sm90,
    assert_left_zero,
    device,
    distinct_kernels,
    poisoned,
    run,
)

pytestmark = pytest.mark.timeout(300)
meta = TensorMeta.of


def _randn(gen: torch.Generator, *sizes: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    return torch.randn(*sizes, generator=gen).to(dtype).to(device())


def _run(spec: GemmSpec, tensors: dict[str, torch.Tensor], schedule=None) -> torch.Tensor:
    assert spec.supports(), spec.supports().reason
    schedule = schedule or heuristic_schedule(spec)
    out = poisoned(spec.output())
    all_tensors = {**tensors, "out": out}
    if spec.row_norm_eps is not None:  # the constant the export makes from the weight
        w = tensors[spec.w.role]
        w_kn = w.as_strided(spec.w.sizes, spec.w.strides, w.storage_offset())[0]
        all_tensors[COLSUM_ROLE] = column_sums(w_kn.cpu()).to(device())
    all_tensors.update(allocate_scratch(scratch(spec, schedule), device(), poison=True))
    run(launches(spec, schedule), all_tensors)
    assert_left_zero(scratch(spec, schedule), all_tensors)
    return out


def _check(spec: GemmSpec, tensors: dict[str, torch.Tensor], schedule=None) -> None:
    out = _run(spec, tensors, schedule)
    tf32 = spec.dtype == "float32" and spec.allow_tf32
    expected = reference_gemm(spec, tensors, tf32=tf32)
    assert out.shape == expected.shape and out.dtype == expected.dtype
    # fp32: the kernel sums K products in fp32 (the reference in fp64); 16-bit: one rounding of that sum.
    scale = expected.float().abs().max().item()
    if spec.dtype == "float32" and tf32 and spec.row_norm_eps is not None:
        # the kernel rounds each row minus its first element to TF32 (the reference normalises exactly): up to
        # 4 standard deviations times 2^-11 per element, summed over K products of unit weights
        tol = {"rtol": 2e-3, "atol": 2.5e-3 * spec.k**0.5}
    elif spec.dtype == "float32" and tf32 and device() == "cuda":  # tensor cores sum in their own order
        tol = {"rtol": 1e-4, "atol": 1e-5 * spec.k**0.5 * max(scale, 1.0)}
    elif spec.dtype == "float32":  # the interpreter's dot is plain fp32: the rounding must match exactly
        tol = {"rtol": 1e-5, "atol": 1e-6 * spec.k**0.5 * max(scale, 1.0)}
    else:
        tol = {"rtol": 1e-2 if spec.dtype == "bfloat16" else 2e-3, "atol": 1e-3}
    torch.testing.assert_close(out.float().cpu(), expected.float().cpu(), **tol)


def _dtype_cases():
    return [(torch.float32, False), (torch.float32, True), (torch.float16, True), (torch.bfloat16, True)]


CASE_IDS = ["fp32", "tf32", "fp16", "bf16"]


@pytest.mark.parametrize("dtype,tf32", _dtype_cases(), ids=CASE_IDS)
def test_addmm_matches_aten(dtype: torch.dtype, tf32: bool) -> None:
    """Random sizes, every bias broadcast of addmm, random alpha/beta, the weight read transposed (nn.Linear's
    edge graph: addmm(bias, x, permute_copy(weight)))."""
    rng = random.Random(f"addmm{dtype}{tf32}")
    gen = torch.Generator().manual_seed(rng.randrange(2**31))
    for _ in range(6):
        m, n, k = rng.randint(1, 40), rng.randint(1, 70), rng.randint(1, 90)
        x, w = _randn(gen, m, k, dtype=dtype), _randn(gen, n, k, dtype=dtype).t()
        bias = _randn(gen, *rng.choice([(n,), (1, n), (m, 1), (m, n), (1,)]), dtype=dtype)
        alpha, beta = rng.choice([(1.0, 1.0), (0.5, 2.0), (-1.0, 0.25)])
        spec = GemmSpec.addmm(meta(bias), meta(x), meta(w), beta, alpha, allow_tf32=tf32)
        _check(spec, {"in0": bias, "in1": x, "in2": w})


@pytest.mark.parametrize("dtype,tf32", _dtype_cases(), ids=CASE_IDS)
def test_mm_and_bmm_over_strided_operands(dtype: torch.dtype, tf32: bool) -> None:
    rng = random.Random(f"mm{dtype}{tf32}")
    gen = torch.Generator().manual_seed(rng.randrange(2**31))
    for _ in range(4):
        m, n, k = rng.randint(1, 40), rng.randint(1, 40), rng.randint(1, 70)
        a = rng.choice([_randn(gen, m, k, dtype=dtype), _randn(gen, k, m, dtype=dtype).t(),
                        _randn(gen, m, 2 * k, dtype=dtype)[:, ::2]])  # fmt: skip
        w = rng.choice([_randn(gen, k, n, dtype=dtype), _randn(gen, n, k, dtype=dtype).t(),
                        _randn(gen, 3 * k, n, dtype=dtype)[::3]])  # fmt: skip
        _check(GemmSpec.mm(meta(a), meta(w), allow_tf32=tf32), {"in0": a, "in1": w})
        b = rng.randint(1, 3)
        a3 = rng.choice(
            [_randn(gen, b, m, k, dtype=dtype), _randn(gen, b, k, m, dtype=dtype).transpose(1, 2)]
        )
        w3 = rng.choice(
            [_randn(gen, b, k, n, dtype=dtype), _randn(gen, 1, k, n, dtype=dtype).expand(b, k, n)]
        )
        _check(GemmSpec.bmm(meta(a3), meta(w3), allow_tf32=tf32), {"in0": a3, "in1": w3})


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_linear(dtype: torch.dtype) -> None:
    gen = torch.Generator().manual_seed(3)
    x = _randn(gen, 2, 3, 24, dtype=dtype)
    w, bias = _randn(gen, 10, 24, dtype=dtype), _randn(gen, 10, dtype=dtype)
    spec = GemmSpec.linear(meta(x), meta(w), meta(bias))
    assert spec.output().sizes == (2, 3, 10)
    _check(spec, {"in0": x, "in1": w, "in2": bias})
    _check(GemmSpec.linear(meta(x[0]), meta(w)), {"in0": x[0], "in1": w})
    nonmergeable = x.transpose(0, 1)
    support = GemmSpec.linear(meta(nonmergeable), meta(w)).supports()
    assert not support and "without a copy" in support.reason


def test_a_prerounded_weight_is_not_rounded_again() -> None:
    """TF32 with ``w_rounded`` (a constant rounded at export): the kernel rounds only ``a`` (ROUND_W off) and gives
    what the plain TF32 kernel gives on the unrounded weight; exact fp32 and 16-bit kernels never round."""
    from cuda_triton.conv.tf32 import round_to_tf32

    gen = torch.Generator().manual_seed(11)
    x, w, bias = _randn(gen, 33, 40), _randn(gen, 40, 24), _randn(gen, 24)
    plain = GemmSpec.addmm(meta(bias), meta(x), meta(w), allow_tf32=True)
    rounded = plain.with_rounded_w()
    flags = [(dict(la.constexprs)["ROUND_TF32"] != 0, dict(la.constexprs)["ROUND_W"] != 0)
             for spec in (plain, rounded) for la in launches(spec, heuristic_schedule(spec))[:1]]  # fmt: skip
    assert flags == [(True, True), (True, False)]
    w_rounded = round_to_tf32(w.cpu()).to(device())
    expected = _run(plain, {"in0": bias, "in1": x, "in2": w})
    torch.testing.assert_close(
        _run(rounded, {"in0": bias, "in1": x, "in2": w_rounded}), expected, rtol=0, atol=0
    )
    _check(rounded, {"in0": bias, "in1": x, "in2": w_rounded})
    for spec in (
        GemmSpec.addmm(meta(bias), meta(x), meta(w)),
        GemmSpec.addmm(meta(bias.half()), meta(x.half()), meta(w.half()), allow_tf32=True),
    ):
        launch = launches(spec, heuristic_schedule(spec))[0]
        assert dict(launch.constexprs)["ROUND_W"] == 0 and dict(launch.constexprs)["ROUND_TF32"] == 0


def test_beta_zero_ignores_the_bias() -> None:
    """ATen: with beta = 0 the bias is not read, so its NaNs do not propagate."""
    gen = torch.Generator().manual_seed(4)
    x, w = _randn(gen, 5, 7), _randn(gen, 7, 3)
    bias = torch.full((3,), float("nan"), device=device())
    spec = GemmSpec.addmm(meta(bias), meta(x), meta(w), beta=0.0)
    assert spec.bias is None
    out = _run(spec, {"in0": bias, "in1": x, "in2": w})
    torch.testing.assert_close(out, torch.addmm(bias, x, w, beta=0.0), rtol=1e-5, atol=1e-5)


def test_every_schedule_runs() -> None:
    """Every schedule of the space, split-K ones included, on one fp16 and one bf16 problem."""
    gen = torch.Generator().manual_seed(5)
    for dtype in (torch.float16, torch.bfloat16):
        x, w, bias = (
            _randn(gen, 3, 640, dtype=dtype),
            _randn(gen, 200, 640, dtype=dtype).t(),
            _randn(gen, 200, dtype=dtype),
        )
        spec = GemmSpec.addmm(meta(bias), meta(x), meta(w))
        space = schedules(spec)
        assert space[0] == heuristic_schedule(spec)
        assert any(dict(s.params).get("SPLIT_K", 1) > 1 for s in space)
        for schedule in space:
            _check(spec, {"in0": bias, "in1": x, "in2": w}, schedule)


def test_small_batches_split_k() -> None:
    """A batch-1 classifier head (mobilenet_v3's 1280 -> 1000) leaves most SMs idle without a split along K."""
    x = TensorMeta.contiguous((1, 1280), "float16")
    w = TensorMeta((1280, 1000), (1, 1280), "float16")
    spec = GemmSpec.addmm(TensorMeta.contiguous((1000,), "float16"), x, w)
    schedule = heuristic_schedule(spec)
    assert dict(schedule.params).get("SPLIT_K", 1) > 1 and schedule["BLOCK_M"] == 16
    ws, counters = scratch(spec, schedule)
    assert ws.sizes == (schedule["SPLIT_K"], 1, 1, 1000)
    (launch,) = launches(spec, schedule)  # the last share of each tile sums the shares: no reduction kernel
    assert launch.name == "gemm_kernel" and launch.grid[2] == schedule["SPLIT_K"]
    assert counters.zeroed and counters.sizes == (launch.grid[0] * launch.grid[1],)


@pytest.mark.timeout(60)
def test_heuristic_follows_the_measured_rules() -> None:
    """The rules kernels.heuristic_schedule_for states, on ConvNeXt-T's and the classifiers' linear layers."""

    def pick(m: int, k: int, n: int, dtype: str = "float16") -> dict[str, int]:
        x = TensorMeta.contiguous((m, k), dtype)
        w = TensorMeta((k, n), (1, k), dtype)
        spec = GemmSpec.addmm(TensorMeta.contiguous((n,), dtype), x, w, allow_tf32=True)
        s = heuristic_schedule(spec)
        return {**dict(s.params), "num_warps": s.num_warps}

    # many tiles: 64 x 128 on 4 warps; BLOCK_K 32 where the output is wider than the reduction
    assert pick(100352, 96, 384) == {
        "BLOCK_M": 64,
        "BLOCK_N": 128,
        "BLOCK_K": 32,
        "GROUP_M": 8,
        "num_warps": 4,
    }
    assert pick(100352, 384, 96)["BLOCK_K"] == 64
    # an expanding layer with a fused chain and at least 16 waves of 64 x 128 tiles: 64 x 64
    gelu = ConvEpilogue((instruction("gelu", 0),), ())

    def pick_chained(m: int, k: int, n: int) -> tuple[int, int]:
        x, w = TensorMeta.contiguous((m, k), "float16"), TensorMeta((k, n), (1, k), "float16")
        spec = GemmSpec.addmm(TensorMeta.contiguous((n,), "float16"), x, w).with_epilogue(gelu)
        s = heuristic_schedule(spec)
        assert s in schedules(spec, 90) and s == schedules(spec, 90)[0]
        return s["BLOCK_N"], s["BLOCK_K"]

    assert [pick_chained(m, k, n) for m, k, n in ((100352, 96, 384), (25088, 192, 768))] == [(64, 32)] * 2
    assert [pick_chained(m, k, n) for m, k, n in ((6272, 384, 1536), (100352, 384, 96))] == [
        (128, 32),
        (128, 64),
    ]
    # few tiles: split K only for at most 16 tiles with K >= 1024, at most 4 ways
    assert "SPLIT_K" not in pick(784, 768, 192)  # 39 tiles
    assert "SPLIT_K" not in pick(1, 768, 1000)  # K too short
    assert pick(49, 3072, 768)["SPLIT_K"] == 4
    assert pick(1, 1280, 1000)["SPLIT_K"] == 4 and pick(1, 1280, 1000)["BLOCK_M"] == 16
    assert pick(32, 1280, 1000)["BLOCK_M"] == 16 and "SPLIT_K" not in pick(32, 1280, 1000)  # 32 tiles
    # fp32 (BLOCK_K halved, both tiles rounded in registers) splits up to 32 tiles, and clamps a wider split
    # the space offers to SPLIT_MAX rather than dropping it
    assert pick(49, 3072, 768, "float32")["SPLIT_K"] == 4
    assert pick(196, 1536, 384, "float32")["SPLIT_K"] == 4 and "SPLIT_K" not in pick(196, 1536, 384)
    # fp32 with fewer 64 x 64 tiles than SMs takes 16-row tiles, but a split of more than 64 rows keeps 64
    assert [pick(m, k, n, "float32")["BLOCK_M"] for m, k, n in ((784, 768, 192), (49, 768, 3072))] == [16, 16]
    assert (
        pick(49, 3072, 768, "float32")["BLOCK_M"] == 16 and pick(196, 1536, 384, "float32")["BLOCK_M"] == 64
    )
    assert (
        pick(784, 768, 192)["BLOCK_M"] == 64 and pick(784, 192, 768, "float32")["BLOCK_M"] == 64
    )  # 156 tiles


def test_any_output_layout() -> None:
    gen = torch.Generator().manual_seed(6)
    a, w = _randn(gen, 2, 9, 13), _randn(gen, 2, 13, 11)
    spec = GemmSpec.bmm(meta(a), meta(w)).with_out_strides((99, 1, 9))
    out = _run(spec, {"in0": a, "in1": w})
    assert out.stride() == (99, 1, 9)
    torch.testing.assert_close(out, torch.bmm(a, w), rtol=1e-5, atol=1e-5)


def test_big_problems_index_in_64_bits() -> None:
    x = TensorMeta.contiguous((2**20, 4096), "float16")  # 2^32 elements: shapes only
    w = TensorMeta((4096, 256), (1, 4096), "float16")
    spec = GemmSpec.mm(x, w)
    assert all(dict(la.constexprs)["INT64"] for la in launches(spec, heuristic_schedule(spec)))
    small = GemmSpec.mm(TensorMeta.contiguous((8, 8), "float16"), TensorMeta.contiguous((8, 8), "float16"))
    assert not dict(launches(small, heuristic_schedule(small))[0].constexprs)["INT64"]


def test_declines_and_errors() -> None:
    f32, f16 = (
        (lambda *s: TensorMeta.contiguous(s, "float32")),
        (lambda *s: TensorMeta.contiguous(s, "float16")),
    )
    declined = [
        (GemmSpec.mm(f32(3, 4), f16(4, 5)), "different dtypes"),
        (GemmSpec.mm(f32(3, 4), f32(5, 5)), "cannot be multiplied"),
        (
            GemmSpec.mm(TensorMeta.contiguous((3, 4), "int64"), TensorMeta.contiguous((4, 5), "int64")),
            "int64",
        ),
        (GemmSpec.addmm(f32(3, 2), f32(3, 4), f32(4, 5)), "broadcast"),
        (GemmSpec.mm(f32(0, 4), f32(4, 5)), "empty"),
        (GemmSpec.bmm(f32(70000, 2, 2), f32(70000, 2, 2)), "batches"),
        (GemmSpec.bmm(f32(2, 3, 4), f32(3, 4, 5)), "cannot be multiplied"),
    ]
    for spec, words in declined:
        support = spec.supports()
        assert not support and words in support.reason and spec.op in support.reason, support.reason
        with pytest.raises(ValueError, match=words):
            launches(spec, heuristic_schedule(dataclasses.replace(spec, problem="")))
    with pytest.raises(ValueError, match="matrix"):
        GemmSpec.mm(f32(2, 3, 4, 5), f32(5, 2))
    with pytest.raises(ValueError, match="linear"):
        GemmSpec.linear(f32(3, 4), f32(4))


# ---- AOT ---------------------------------------------------------------------------------------------------
def _aot_launches() -> list:
    def cl(*s):  # a row-major matrix
        return TensorMeta.contiguous(s, "float16")

    wt = TensorMeta((1280, 1000), (1, 1280), "float16")  # nn.Linear's weight, read transposed
    f32 = TensorMeta.contiguous((512, 768), "float32")
    f32w = TensorMeta((768, 768), (1, 768), "float32")
    specs = [
        GemmSpec.addmm(cl(1000), cl(1, 1280), wt),  # split-K
        GemmSpec.addmm(cl(1000), cl(512, 1280), wt),
        GemmSpec.addmm(TensorMeta.contiguous((768,), "float32"), f32, f32w, allow_tf32=True),
        GemmSpec.addmm(TensorMeta.contiguous((768,), "float32"), f32, f32w, allow_tf32=False),
        GemmSpec.bmm(
            TensorMeta.contiguous((8, 197, 64), "bfloat16"),
            TensorMeta((8, 64, 197), (12608, 1, 64), "bfloat16"),
        ),
        GemmSpec.mm(
            TensorMeta.contiguous((2**20, 4096), "float16"), TensorMeta((4096, 256), (1, 4096), "float16")
        ),
        # a layer norm folded in: 16-bit, and TF32 (rows shifted before rounding)
        GemmSpec.addmm(cl(384), cl(3136, 96), TensorMeta.contiguous((96, 384), "float16")).with_row_norm(
            1e-6
        ),
        GemmSpec.addmm(TensorMeta.contiguous((768,), "float32"), f32, f32w, allow_tf32=True).with_row_norm(
            1e-6
        ),
    ]
    out = []
    for spec in specs:
        for launch in launches(spec, heuristic_schedule(spec)):
            constexprs = dict(launch.constexprs)
            if constexprs.get("ROUND_TF32") == 1:  # the interpreter's choice; GPUs get the cvt rounding (2)
                constexprs["ROUND_TF32"] = 2
                launch = dataclasses.replace(launch, constexprs=tuple(constexprs.items()))
            out.append(launch)
    return out


@pytest.mark.timeout(900)
def test_kernels_compile_for_sm80_and_sm90() -> None:
    todo = distinct_kernels(_aot_launches())
    assert {la.name for la in todo} == {"gemm_kernel"}
    assert any(dict(la.constexprs)["SPLIT_K"] > 1 for la in todo)
    assert_compiles_for_sm80_and_sm90(todo)


@pytest.mark.parametrize("dtype,tf32", _dtype_cases(), ids=CASE_IDS)
def test_row_norm_normalises_a_before_the_product(dtype: torch.dtype, tf32: bool) -> None:
    """``row_norm_eps``: each row of a normalised over K (a layer norm without weight and bias), the statistics
    taken in the K loop. Rows with a mean far from zero (the shifted sums keep their variance), odd K tails."""
    rng = random.Random(f"rownorm{dtype}{tf32}")
    gen = torch.Generator().manual_seed(rng.randrange(2**31))
    for _ in range(4):
        m, n, k = rng.randint(1, 40), rng.randint(1, 70), rng.randint(2, 90)
        offset = rng.choice([0.0, 3.0, -20.0])
        x = (torch.randn(m, k, generator=gen) * rng.uniform(0.5, 2.0) + offset).to(dtype).to(device())
        w, bias = _randn(gen, n, k, dtype=dtype).t(), _randn(gen, n, dtype=dtype)
        spec = GemmSpec.addmm(meta(bias), meta(x), meta(w), allow_tf32=tf32).with_row_norm(1e-5)
        _check(spec, {"in0": bias, "in1": x, "in2": w})


def test_row_norm_keeps_k_in_one_program() -> None:
    """No split-K and no TMA schedule for a row norm, even where the plain GEMM splits (a batch-1 head)."""
    x = TensorMeta.contiguous((1, 1280), "float16")
    w = TensorMeta((1280, 1000), (1, 1280), "float16")
    plain = GemmSpec.addmm(TensorMeta.contiguous((1000,), "float16"), x, w)
    normed = plain.with_row_norm(1e-6)
    assert dict(heuristic_schedule(plain).params).get("SPLIT_K", 1) > 1
    assert "SPLIT_K" not in dict(heuristic_schedule(normed).params)
    space = schedules(normed, arch=90)
    assert space and all("SPLIT_K" not in dict(s.params) and "TMA1" not in s.key() for s in space)
    with pytest.raises(ValueError, match="whole K"):
        launches(normed, heuristic_schedule(plain))
    (launch,) = launches(normed, heuristic_schedule(normed))
    assert dict(launch.constexprs)["ROW_NORM"] and dict(launch.constexprs)["NORM_EPS"] == 1e-6
    assert (
        not GemmSpec.addmm(TensorMeta.contiguous((1000,), "float16"), x, w)
        .with_row_norm(float("nan"))
        .supports()
    )
