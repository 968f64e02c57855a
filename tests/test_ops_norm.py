"""Normalisation ops against ATen: inference batch norm (1-D/2-D/3-D, channels-last and contiguous), layer norm,
group norm, softmax and log_softmax over any dim, every dtype, strided inputs, the layout rules against fake
tensors, what is declined, and AOT compiles."""

from __future__ import annotations

import random
import zlib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

import pytest
import torch
from cuda_triton.kernel.aot import check_entry, compile_launches
from cuda_triton.kernel.launch import Schedule
from cuda_triton.ops.elementwise.program import MAX_INPUTS, instruction
from cuda_triton.ops.norm import (
    batch_norm_out,
    batch_norm_spec,
    group_norm_out,
    group_norm_spec,
    launches,
    layer_norm_out,
    layer_norm_spec,
    reference,
    schedules,
    scratch,
    softmax_out,
    softmax_spec,
    supports,
)
from cuda_triton.ops.norm.kernels import INTERLEAVED_TILE, row_schedule
from cuda_triton.ops.norm.launches import default_schedule, row_run
from cuda_triton.ops.norm.spec import GroupNormSpec, NormSpec, view_of
from cuda_triton.ops.tensor_meta import TensorMeta, contiguous_strides
from ops_helpers import DEVICE, DTYPES, LAYOUTS, cpu, make_tensor, meta, poisoned, random_shape, tolerance

A = torch.ops.aten


def rng_for(*key) -> tuple[random.Random, torch.Generator]:
    seed = zlib.crc32(repr(key).encode())
    return random.Random(seed), torch.Generator().manual_seed(seed)


def run(spec: NormSpec, tensors: dict[str, torch.Tensor], schedule: Schedule | None = None) -> torch.Tensor:
    """``spec``'s launches on ``tensors`` with ``schedule`` (default: the heuristic's), into a NaN-poisoned output;
    scratch tensors are poisoned too (the kernels must write what they read)."""
    assert supports(spec), supports(spec).reason
    schedule = schedule or default_schedule(spec)
    out = poisoned(spec.out.sizes, spec.out.strides, spec.out.dtype)
    bound = {**tensors, "out": out}
    for t in scratch(spec, schedule):
        bound[t.role] = poisoned(t.sizes, contiguous_strides(t.sizes), t.dtype)
    for launch in launches(spec, schedule):
        launch.run(bound)
    return out


def check(spec: NormSpec, tensors: dict[str, torch.Tensor], length: int = 1) -> torch.Tensor:
    out = run(spec, tensors)
    ref = reference(spec, cpu(tensors))
    assert out.shape == ref.shape and out.stride() == ref.stride()
    torch.testing.assert_close(out.cpu(), ref, **tolerance(spec.out.dtype, length))
    return out


def params(c, dtype: str, gen: torch.Generator, positive: bool = False) -> torch.Tensor:
    t = torch.randn(c, generator=gen)
    t = t.abs() + 0.5 if positive else t
    return t.to(device=DEVICE, dtype=getattr(torch, dtype))


# ---- batch norm ------------------------------------------------------------------------------------------------
@pytest.mark.timeout(300)
@pytest.mark.parametrize("dtype", DTYPES)
def test_batch_norm(dtype: str) -> None:
    rng, gen = rng_for("bn", dtype)
    for rank in (2, 3, 4, 5):
        for layout in ("contiguous", "channels_last", "permuted", "strided"):
            shape = random_shape(rng, rank, 2, 6)
            x = make_tensor(shape, dtype, layout, gen, rng) * 2 + 0.5
            c = shape[1]
            affine = rng.choice([(True, True), (False, False), (True, False), (False, True)])
            tensors = {"in0": x, "mean": params(c, dtype, gen), "var": params(c, dtype, gen, positive=True)}
            metas = {}
            for role, present in zip(("weight", "bias"), affine, strict=True):
                if present:
                    tensors[role] = params(c, dtype, gen)
                metas[role] = meta(tensors[role]) if present else None
            spec = batch_norm_spec(meta(x), metas["weight"], metas["bias"], meta(tensors["mean"]),
                                   meta(tensors["var"]), 1e-3)  # fmt: skip
            check(spec, tensors)


def test_batch_norm_fp32_statistics_on_16_bit_input() -> None:
    rng, gen = rng_for("bn-mixed")
    x = make_tensor((2, 8, 5, 5), "float16", "channels_last", gen, rng)
    t = {"in0": x, "weight": params(8, "float32", gen), "bias": params(8, "float32", gen),
         "mean": params(8, "float32", gen), "var": params(8, "float32", gen, positive=True)}  # fmt: skip
    spec = batch_norm_spec(*(meta(t[k]) for k in ("in0", "weight", "bias", "mean", "var")), 1e-5)
    check(spec, t)


# ---- layer norm ------------------------------------------------------------------------------------------------
@pytest.mark.timeout(300)
@pytest.mark.parametrize("dtype", DTYPES)
def test_layer_norm(dtype: str) -> None:
    rng, gen = rng_for("ln", dtype)
    for _ in range(6):
        rank = rng.randint(1, 4)
        shape = random_shape(rng, rank, 1, 7)
        k = rng.randint(1, rank)
        x = make_tensor(shape, dtype, rng.choice(LAYOUTS), gen, rng)
        normalized = shape[rank - k :]
        tensors = {"in0": x}
        w = b = None
        if rng.random() < 0.7:
            tensors["weight"] = make_tensor(normalized, dtype, "contiguous", gen, rng)
            w = meta(tensors["weight"])
        if rng.random() < 0.7:
            tensors["bias"] = make_tensor(normalized, dtype, "contiguous", gen, rng)
            b = meta(tensors["bias"])
        spec = layer_norm_spec(meta(x), normalized, w, b, 1e-5)
        check(spec, tensors, view_of(spec).length)


def test_layer_norm_long_rows_and_channels_last_convnext() -> None:
    """Rows longer than one tile (the three-pass sweep), and convnext's LayerNorm over C of an N, H, W, C view."""
    rng, gen = rng_for("ln-long")
    x = make_tensor((3, 5000), "float32", "contiguous", gen, rng)
    t = {"in0": x, "weight": make_tensor((5000,), "float32", "contiguous", gen, rng)}
    spec = layer_norm_spec(meta(x), (5000,), meta(t["weight"]), None, 1e-6)
    assert view_of(spec).length > 4096
    check(spec, t, 5000)
    nchw = make_tensor((2, 24, 4, 3), "bfloat16", "channels_last", gen, rng)
    nhwc = nchw.permute(0, 2, 3, 1)  # contiguous N, H, W, C memory
    t = {"in0": nhwc, "weight": make_tensor((24,), "bfloat16", "contiguous", gen, rng),
         "bias": make_tensor((24,), "bfloat16", "contiguous", gen, rng)}  # fmt: skip
    check(layer_norm_spec(meta(nhwc), (24,), meta(t["weight"]), meta(t["bias"]), 1e-6), t)


# ---- group norm ------------------------------------------------------------------------------------------------
@pytest.mark.timeout(300)
@pytest.mark.parametrize("dtype", DTYPES)
def test_group_norm(dtype: str) -> None:
    rng, gen = rng_for("gn", dtype)
    for rank, layout in ((3, "contiguous"), (4, "channels_last"), (4, "contiguous"), (5, "channels_last"),
                         (3, "strided"), (2, "contiguous")):  # fmt: skip
        groups = rng.choice([1, 2, 3])
        shape = (rng.randint(1, 3), groups * rng.randint(1, 3), *random_shape(rng, rank - 2, 1, 5))
        x = make_tensor(shape, dtype, layout, gen, rng)
        n, c = shape[0], shape[1]
        hxw = x.numel() // (n * c)
        tensors = {"in0": x}
        w = b = None
        if rng.random() < 0.7:
            tensors["weight"], tensors["bias"] = params(c, dtype, gen), params(c, dtype, gen)
            w, b = meta(tensors["weight"]), meta(tensors["bias"])
        spec = group_norm_spec(meta(x), w, b, n, c, hxw, groups, 1e-5)
        check(spec, tensors, view_of(spec).length)


def test_group_norm_long_groups() -> None:
    rng, gen = rng_for("gn-long")
    x = make_tensor((1, 4, 40, 60), "float16", "contiguous", gen, rng)  # 2 groups of 4800 elements
    spec = group_norm_spec(meta(x), None, None, 1, 4, 2400, 2, 1e-5)
    assert view_of(spec).length > 4096
    check(spec, {"in0": x}, 4800)


@pytest.mark.timeout(300)
@pytest.mark.parametrize("length", [30, 700])
def test_group_norm_one_channel_groups_nlc(length: int) -> None:
    """One channel a group over a map stored (N, L, C): rows are adjacent in memory, so the default schedule
    tiles 16 of them (a row in one tile at length 30, swept at 700), and every schedule of the space agrees."""
    rng, gen = rng_for("gn-nlc", length)
    x = (
        make_tensor((2, 20, length), "float16", "contiguous", gen, rng)
        .transpose(1, 2)
        .contiguous()
        .transpose(1, 2)
    )
    tensors = {"in0": x, "weight": params(20, "float16", gen), "bias": params(20, "float16", gen)}
    spec = group_norm_spec(meta(x), meta(tensors["weight"]), meta(tensors["bias"]), 2, 20, length, 20, 1e-5)
    schedule = default_schedule(spec)
    assert schedule["BLOCK_K"] == 16 and schedule["ONE_TILE"] == int(length <= schedule["BLOCK_R"])
    assert schedule["ONE_TILE"] == (length == 30)
    ref = reference(spec, cpu(tensors))
    for s in schedules(spec)[:: 7 if length > 100 else 1][:6]:
        torch.testing.assert_close(run(spec, tensors, s).cpu(), ref, **tolerance("float16", length))


@pytest.mark.timeout(300)
def test_group_norm_channel_runs_nlc() -> None:
    """Groups of 4 channels over a map stored (N, L, C): each row's 4 contiguous channels continue in the next
    row's, so the default schedule tiles 64 / 4 = 16 rows (64 contiguous channels a tile row) and splits the
    long rows; its result matches the reference, as does a one-row schedule."""
    rng, gen = rng_for("gn-runs")
    x = (
        make_tensor((2, 64, 900), "float16", "contiguous", gen, rng)
        .transpose(1, 2)
        .contiguous()
        .transpose(1, 2)
    )
    tensors = {"in0": x, "weight": params(64, "float16", gen), "bias": params(64, "float16", gen)}
    spec = group_norm_spec(meta(x), meta(tensors["weight"]), meta(tensors["bias"]), 2, 64, 900, 16, 1e-5)
    assert row_run(view_of(spec)) == 4
    schedule = default_schedule(spec)
    assert schedule["BLOCK_K"] == 16 and schedule["BLOCK_R"] <= INTERLEAVED_TILE // 16, schedule
    ref = reference(spec, cpu(tensors))
    for s in (schedule, row_schedule(view_of(spec).m, view_of(spec).length)):
        torch.testing.assert_close(run(spec, tensors, s).cpu(), ref, **tolerance("float16", 4 * 900))


@pytest.mark.timeout(300)
@pytest.mark.parametrize("dtype", DTYPES)
def test_split_rows(dtype: str) -> None:
    """Few long rows: the heuristic splits each row into chunks (statistics per chunk, combined), for layer norm
    and group norm, contiguous and one channel a group over (N, L, C); a non-zero mean tests the combination."""
    rng, gen = rng_for("split", dtype)
    x = make_tensor((2, 3, 4500), dtype, "contiguous", gen, rng) + 3.0
    nlc = (
        make_tensor((1, 20, 2100), dtype, "contiguous", gen, rng).transpose(1, 2).contiguous().transpose(1, 2)
    )
    w, b = params(4500, dtype, gen), params(4500, dtype, gen)
    specs = [
        (layer_norm_spec(meta(x), (4500,), meta(w), meta(b), 1e-5), {"in0": x, "weight": w, "bias": b}, 4500),
        (group_norm_spec(meta(x), None, None, 2, 3, 4500, 1, 1e-5), {"in0": x}, 13500),
        (group_norm_spec(meta(nlc), None, None, 1, 20, 2100, 20, 1e-5), {"in0": nlc + 3.0}, 2100),
    ]
    for spec, tensors, length in specs:
        schedule = default_schedule(spec)
        assert schedule["SPLIT"] > 1, schedule
        assert len(launches(spec, schedule)) == 2 and scratch(spec, schedule)
        ref = reference(spec, cpu(tensors))
        torch.testing.assert_close(run(spec, tensors).cpu(), ref, **tolerance(dtype, length))
        odd = Schedule.make(num_warps=4, num_stages=1, BLOCK_K=4, BLOCK_R=128, ONE_TILE=0, SPLIT=3)
        torch.testing.assert_close(run(spec, tensors, odd).cpu(), ref, **tolerance(dtype, length))


@pytest.mark.timeout(300)
@pytest.mark.parametrize("dtype", DTYPES)
def test_fused_epilogue(dtype: str) -> None:
    """A chain on the normalized value (GELU; relu then scale) in every row-kernel path and in batch norm: one
    tile, swept, split, and the elementwise batch norm kernel."""
    rng, gen = rng_for("epilogue", dtype)
    gelu = (instruction("gelu", 0),)
    relu_scale = (instruction("relu", 0), instruction("mul", MAX_INPUTS, c0=0.5))
    cases = []
    x = make_tensor((2, 6, 5, 7), dtype, "channels_last", gen, rng)
    c = [params(6, dtype, gen, positive=k == 3) for k in range(4)]
    bn = batch_norm_spec(meta(x), *(meta(t) for t in c), 1e-5)
    cases.append((bn, {"in0": x, **dict(zip(("weight", "bias", "mean", "var"), c, strict=True))}, 1))
    seq = make_tensor((3, 40), dtype, "contiguous", gen, rng)
    cases.append((layer_norm_spec(meta(seq), (40,), None, None, 1e-5), {"in0": seq}, 40))
    long = make_tensor((1, 2, 4500), dtype, "contiguous", gen, rng)  # swept: 4500 > ONE_TILE_MAX, then split
    cases.append((group_norm_spec(meta(long), None, None, 1, 2, 4500, 2, 1e-5), {"in0": long}, 4500))
    for spec, tensors, length in cases:
        for program in (gelu, relu_scale):
            fused = replace(spec, epilogue=program)
            assert supports(fused)
            ref = reference(fused, cpu(tensors))
            plain = reference(spec, cpu(tensors))
            assert not torch.equal(ref, plain)
            schedules_to_run = [default_schedule(fused)]
            if isinstance(spec, GroupNormSpec):  # the unsplit sweep too
                schedules_to_run.append(
                    Schedule.make(num_warps=4, num_stages=1, BLOCK_K=1, BLOCK_R=1024, ONE_TILE=0, SPLIT=1)
                )
            for schedule in schedules_to_run:
                out = run(fused, tensors, schedule)
                torch.testing.assert_close(out.cpu(), ref, **tolerance(dtype, length))
    bad = replace(
        bn, epilogue=(instruction("add", 0, 1),)
    )  # reads a second tensor: no operand to read it from
    assert not supports(bad) and "epilogue" in supports(bad).reason


# ---- softmax ---------------------------------------------------------------------------------------------------
@pytest.mark.timeout(300)
@pytest.mark.parametrize("log", [False, True])
@pytest.mark.parametrize("dtype", DTYPES)
def test_softmax_any_dim(dtype: str, log: bool) -> None:
    rng, gen = rng_for("softmax", dtype, log)
    for layout in LAYOUTS:
        rank = rng.randint(1, 5)
        shape = random_shape(rng, rank, 1, 5 if rank < 5 else 3)
        x = make_tensor(shape, dtype, layout, gen, rng) * 3
        dim = rng.randrange(-rank, rank)
        spec = softmax_spec(meta(x), dim, log=log)
        check(spec, {"in0": x})


def test_softmax_long_rows_and_infinities() -> None:
    rng, gen = rng_for("softmax-long")
    x = make_tensor((3, 6000), "float32", "contiguous", gen, rng) * 4
    x[1, :5000] = float("-inf")  # a row that is -inf for more than a whole step, then finite
    x[2, 17] = float("inf")
    for log in (False, True):
        spec = softmax_spec(meta(x), 1, log=log)
        out = run(spec, {"in0": x})
        expected = (torch.log_softmax if log else torch.softmax)(x.cpu(), 1)
        torch.testing.assert_close(out.cpu(), expected, equal_nan=True, rtol=1e-5, atol=1e-5)
    y = make_tensor((4, 9), "float16", "permuted", gen, rng)
    y[0] = float("-inf")  # all -inf: NaN like ATen
    y[1, 3] = float("nan")
    out = run(softmax_spec(meta(y), 1), {"in0": y})
    torch.testing.assert_close(
        out.cpu(), torch.softmax(y.cpu().float(), 1).half(), equal_nan=True, **tolerance("float16")
    )


# ---- layout rules ----------------------------------------------------------------------------------------------
def test_layout_rules_match_fake_tensors() -> None:
    from torch._subclasses.fake_tensor import FakeTensorMode

    rng, gen = rng_for("rules")
    for _ in range(60):
        rank = rng.randint(2, 5)
        layout = rng.choice(LAYOUTS)
        x = make_tensor(random_shape(rng, rank, 1, 4), "float32", layout, gen, rng)
        c = x.shape[1]
        with FakeTensorMode(allow_non_fake_inputs=True) as mode:
            fx = mode.from_tensor(x)
            stats = mode.from_tensor(torch.ones(c))
            bn = A._native_batch_norm_legit_no_training(fx, None, None, stats, stats, 0.1, 1e-5)[0]
            gn = A.native_group_norm(fx, None, None, x.shape[0], c, x.numel() // (x.shape[0] * c), 1, 1e-5)[0]
            ln = A.native_layer_norm(fx, list(x.shape[-1:]), None, None, 1e-5)[0]
            sm = A._softmax(fx, 1, False)
        cases = [(batch_norm_out(x.shape, x.stride(), False, False), bn), (layer_norm_out(x.shape), ln),
                 (softmax_out(x.shape), sm)]  # fmt: skip
        if layout in ("contiguous", "channels_last"):  # group norm: the layouts the rule mirrors (layout.py)
            cases.append((group_norm_out(x.shape, x.stride()), gn))
        for rule, y in cases:
            key = [s if n > 1 else None for n, s in zip(y.shape, y.stride(), strict=True)]
            assert [s if n > 1 else None for n, s in zip(rule[0], rule[1], strict=True)] == key, (
                x.stride(),
                rule,
            )


def test_output_strides_override() -> None:
    """A consumer's layout instead of the rule's: channels-last outputs of contiguous inputs."""
    rng, gen = rng_for("override")
    x = make_tensor((2, 6, 3, 5), "float16", "contiguous", gen, rng)
    cl = TensorMeta.channels_last(tuple(x.shape), "float16").strides
    t = {"in0": x, "mean": params(6, "float16", gen), "var": params(6, "float16", gen, positive=True)}
    check(batch_norm_spec(meta(x), None, None, meta(t["mean"]), meta(t["var"]), 1e-5, out_strides=cl), t)
    check(softmax_spec(meta(x), 1, out_strides=cl), {"in0": x})
    check(group_norm_spec(meta(x), None, None, 2, 6, 15, 3, 1e-5, out_strides=cl), {"in0": x}, 45)
    assert "dense" in supports(softmax_spec(meta(x), 1, out_strides=(0, 0, 0, 0))).reason


# ---- declines --------------------------------------------------------------------------------------------------
def test_declines_and_bad_arguments() -> None:
    x = TensorMeta.contiguous((2, 4, 3), "float32")
    c = TensorMeta.contiguous((4,), "float32")
    assert "int64" in supports(softmax_spec(TensorMeta.contiguous((2, 3), "int64"), 1)).reason
    wrong = batch_norm_spec(x, TensorMeta.contiguous((5,), "float32"), None, c, c, 1e-5)
    assert "weight has sizes (5,)" in supports(wrong).reason
    strided_w = TensorMeta((4,), (2,), "float32")
    assert "contiguous" in supports(batch_norm_spec(x, strided_w, None, c, c, 1e-5)).reason
    with pytest.raises(ValueError, match="half_to_float"):
        softmax_spec(TensorMeta.contiguous((2, 3), "float16"), 1, half_to_float=True)
    with pytest.raises(ValueError, match="trailing sizes"):
        layer_norm_spec(x, (4,), None, None, 1e-5)
    with pytest.raises(ValueError, match="groups"):
        group_norm_spec(x, None, None, 2, 4, 3, 3, 1e-5)
    with pytest.raises(ValueError, match="channel dim"):
        batch_norm_spec(TensorMeta.contiguous((4,), "float32"), None, None, c, c, 1e-5)
    with pytest.raises(ValueError, match="out of range"):
        softmax_spec(x, 3)


def test_big_inputs_index_in_64_bits() -> None:
    x = TensorMeta.channels_last((64, 256, 512, 512), "float16")
    c = TensorMeta.contiguous((256,), "float16")
    for spec in (batch_norm_spec(x, c, c, c, c, 1e-5), softmax_spec(x, 1)):
        (launch,) = launches(spec)
        assert dict(launch.constexprs)["INDEX_64"] is True


# ---- ahead-of-time compiles ------------------------------------------------------------------------------------
@pytest.mark.timeout(600)
def test_every_kernel_compiles_for_sm80_and_sm90() -> None:
    cl = TensorMeta.channels_last((8, 64, 28, 28), "float16")
    c16 = TensorMeta.contiguous((64,), "float16")
    c32 = TensorMeta.contiguous((64,), "float32")
    seq = TensorMeta.contiguous((8, 197, 768), "bfloat16")
    w768 = TensorMeta.contiguous((768,), "bfloat16")
    specs = [
        batch_norm_spec(cl, c16, c16, c16, c16, 1e-5),
        batch_norm_spec(TensorMeta.contiguous((8, 64, 100), "float32"), None, None, c32, c32, 1e-5),
        layer_norm_spec(seq, (768,), w768, w768, 1e-6),
        layer_norm_spec(TensorMeta.contiguous((4, 10000), "float32"), (10000,), None, None, 1e-5),
        group_norm_spec(TensorMeta.contiguous((4, 64, 1000), "float16"), c16, c16, 4, 64, 1000, 8, 1e-5),
        replace(  # wav2vec2's first norm, with the GELU after it
            group_norm_spec(
                TensorMeta.channels_last((1, 512, 3199), "float16"), None, None, 1, 512, 3199, 512, 1e-5
            ),
            epilogue=(instruction("gelu", 0),),
        ),
        softmax_spec(seq, -1),
        softmax_spec(TensorMeta.contiguous((4, 12, 20000), "float16"), 2, log=True),
        softmax_spec(cl, 1),
    ]
    items = [launch for spec in specs for launch in launches(spec)]
    with ThreadPoolExecutor(2) as pool:
        by_arch = dict(
            zip((80, 90), pool.map(lambda arch: compile_launches(items, arch), (80, 90)), strict=True)
        )
    for arch, compiled in by_arch.items():
        for launch, ck in zip(items, compiled, strict=True):
            assert ck.arch == arch and ck.cubin and ck.num_warps == launch.num_warps, launch.name
            check_entry(launch, ck.ptx, ck.param_types)
