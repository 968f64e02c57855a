"""Elementwise chains against ATen: every op, every dtype, broadcasting, strided/channels-last inputs, fused
chains, glu, an epilogue-style use of apply_chain, the layout rule against fake tensors, and AOT compiles."""

from __future__ import annotations

import math
import random
import zlib
from concurrent.futures import ThreadPoolExecutor

import pytest
import torch
import torch.nn.functional as F
import triton
import triton.language as tl
from cuda_triton.kernel.aot import check_entry, compile_launches
from cuda_triton.ops.elementwise import (
    OPS,
    ChainBuilder,
    ElementwiseSpec,
    apply_chain,
    binary_spec,
    glu_spec,
    launches,
    out_shape_and_stride,
    reference,
    supports,
    unary_spec,
)
from cuda_triton.ops.elementwise.spec import ChainInput
from cuda_triton.ops.tensor_meta import TensorMeta
from ops_helpers import DEVICE, DTYPES, LAYOUTS, cpu, make_tensor, meta, poisoned, random_shape, tolerance

A = torch.ops.aten

# Edge op -> (ChainBuilder op name, parameters, eager ATen op on fp32 tensors).
UNARY = {
    "relu": ("relu", {}, A.relu.default),
    "hardtanh": ("hardtanh", {"min_val": -0.5, "max_val": 1.25}, lambda x: A.hardtanh(x, -0.5, 1.25)),
    "clamp": ("clamp", {"min": -0.25, "max": 0.75}, lambda x: A.clamp(x, -0.25, 0.75)),
    "clamp_min": ("clamp", {"min": 0.1, "max": None}, lambda x: A.clamp(x, 0.1, None)),
    "clamp_max": ("clamp", {"min": None, "max": -0.1}, lambda x: A.clamp(x, None, -0.1)),
    "sigmoid": ("sigmoid", {}, A.sigmoid.default),
    "tanh": ("tanh", {}, A.tanh.default),
    "gelu": ("gelu", {}, A.gelu.default),
    "gelu_tanh": ("gelu", {"approximate": "tanh"}, lambda x: A.gelu(x, approximate="tanh")),
    "leaky_relu": ("leaky_relu", {"negative_slope": 0.2}, lambda x: A.leaky_relu(x, 0.2)),
    "hardsigmoid": ("hardsigmoid", {}, A.hardsigmoid.default),
    "hardswish": ("hardswish", {}, A.hardswish.default),
    "silu": ("silu", {}, A.silu.default),
    "neg": ("neg", {}, A.neg.default),
}
BINARY = {
    "add": (A.add.Tensor, {"alpha": 1.0}),
    "add_alpha": (lambda a, b: A.add.Tensor(a, b, alpha=0.5), {"alpha": 0.5}),
    "sub": (A.sub.Tensor, {"alpha": 1.0}),
    "sub_alpha": (lambda a, b: A.sub.Tensor(a, b, alpha=2.0), {"alpha": 2.0}),
    "mul": (A.mul.Tensor, {}),
    "div": (A.div.Tensor, {}),
}


def test_every_op_is_tested() -> None:
    tested = set(UNARY) | {name.split("_")[0] for name in BINARY} | {"copy"}
    assert set(OPS) <= tested, set(OPS) - tested


def run(spec: ElementwiseSpec, tensors: dict[str, torch.Tensor]) -> torch.Tensor:
    """Allocate the output (poisoned), launch the spec's kernels, return the output."""
    assert supports(spec), supports(spec).reason
    out = poisoned(spec.out.sizes, spec.out.strides, spec.out.dtype)
    for launch in launches(spec):
        launch.run({**tensors, spec.out_role: out})
    return out


def check(spec: ElementwiseSpec, tensors: dict[str, torch.Tensor]) -> torch.Tensor:
    out = run(spec, tensors)
    ref = reference(spec, cpu(tensors))
    assert out.stride() == ref.stride()
    torch.testing.assert_close(out.cpu(), ref, **tolerance(spec.out.dtype))
    return out


def rng_for(*key) -> tuple[random.Random, torch.Generator]:
    seed = zlib.crc32(repr(key).encode())
    return random.Random(seed), torch.Generator().manual_seed(seed)


# ---- the layout rule -------------------------------------------------------------------------------------------
def _random_layout_tensor(rng: random.Random, shape: list[int]) -> torch.Tensor:
    gen = torch.Generator().manual_seed(rng.randrange(2**31))
    return make_tensor(shape, "float32", rng.choice(LAYOUTS), gen, rng)


def _layout_key(sizes, strides) -> tuple:
    """Sizes and the strides of dims longer than 1 (the strides of size-1 dims move no element, and ATen's paths
    disagree about them)."""
    return tuple(sizes), tuple(s if n > 1 else None for n, s in zip(sizes, strides, strict=True))


@pytest.mark.timeout(120)
def test_layout_rule_matches_fake_tensors() -> None:
    """The recorded output layout of unary/binary ops (fake tensors, what torch.export puts in node.meta)."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    rng = random.Random(0)
    checked = 0
    for _ in range(600):
        nd = rng.randint(1, 5)
        shape = [rng.choice([1, 1, 2, 3, 4]) for _ in range(nd)]
        operands = [_random_layout_tensor(rng, shape)]
        if rng.random() < 0.6:
            other = [1 if rng.random() < 0.3 else n for n in shape][
                rng.randint(0, nd) if rng.random() < 0.2 else 0 :
            ]
            operands.append(_random_layout_tensor(rng, other))
        with FakeTensorMode(allow_non_fake_inputs=True) as mode:
            fakes = [mode.from_tensor(t) for t in operands]
            y = A.relu(fakes[0]) if len(fakes) == 1 else A.mul.Tensor(*fakes)
        got = out_shape_and_stride([(tuple(t.shape), t.stride()) for t in operands])
        assert _layout_key(*got) == _layout_key(y.shape, y.stride()), [
            (t.shape, t.stride()) for t in operands
        ]
        checked += 1
    assert checked == 600


def test_layout_rule_cases() -> None:
    cl = TensorMeta.channels_last((2, 8, 4, 4), "float32")
    bias = TensorMeta.contiguous((8, 1, 1), "float32")
    assert out_shape_and_stride([(cl.sizes, cl.strides), (bias.sizes, bias.strides)]) == (
        cl.sizes,
        cl.strides,
    )
    se = TensorMeta.contiguous((2, 8, 1, 1), "float32")
    assert out_shape_and_stride([(cl.sizes, cl.strides), (se.sizes, se.strides)]) == (cl.sizes, cl.strides)
    with pytest.raises(ValueError, match="broadcast"):
        out_shape_and_stride([((2, 3), (3, 1)), ((4,), (1,))])


# ---- single ops ------------------------------------------------------------------------------------------------
@pytest.mark.timeout(300)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary(name: str, dtype: str) -> None:
    rng, gen = rng_for("unary", name, dtype)
    op_name, params, eager = UNARY[name]
    for layout in LAYOUTS:
        shape = random_shape(rng, rng.choice([1, 2, 4, 5]))
        x = make_tensor(shape, dtype, layout, gen, rng) * 3
        spec = unary_spec(op_name, meta(x), **params)
        out = check(spec, {"in0": x})
        # The reference is the edge op itself (in fp32), and the layout what eager gives.
        torch.testing.assert_close(
            reference(spec, cpu({"in0": x})).float(), eager(x.cpu().float()), **tolerance(dtype)
        )
        assert _layout_key(out.shape, out.stride()) == _layout_key(
            *out_shape_and_stride([(x.shape, x.stride())])
        )


@pytest.mark.timeout(300)
def test_gelu_keeps_relative_precision_over_its_range() -> None:
    """fp32 GELU against x * erfc(-x / sqrt(2)) / 2 in fp64 (fp64's own 0.5 * x * (1 + erf(...)) cancels for x < 0:
    at x = -8 it is 4% off): within 2e-6 relative for x >= -3 and 2e-5 down to -10, where the fp32 rounding of the
    exponential's argument (-x^2 / 2) is what is left."""
    x = torch.linspace(-10, 10, 40001, device=DEVICE)
    out = run(unary_spec("gelu", meta(x)), {"in0": x}).cpu().double()
    xd = x.cpu().double()
    ref = xd * 0.5 * torch.special.erfc(-xd / math.sqrt(2))
    rel = (out - ref).abs() / ref.abs()
    assert rel[xd >= -3].max() <= 2e-6 and rel.max() <= 2e-5, rel.max()


@pytest.mark.parametrize("name", ["relu", "clamp", "hardtanh", "sigmoid", "leaky_relu", "hardswish", "gelu"])
def test_nan_propagates(name: str) -> None:
    op_name, params, eager = UNARY[name]
    values = [float("nan"), -1.0, 0.5, float("inf"), -float("inf")]
    if name == "gelu":  # ATen's CPU gelu gives inf or NaN at +inf depending on the CPU's vector code path
        values = values[:3]
    x = torch.tensor(values, device=DEVICE)
    out = run(unary_spec(op_name, meta(x), **params), {"in0": x})
    torch.testing.assert_close(out.cpu(), eager(x.cpu()), equal_nan=True)


@pytest.mark.timeout(300)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_broadcasting(name: str, dtype: str) -> None:
    eager, params = BINARY[name]
    op = name.split("_")[0]
    rng, gen = rng_for("binary", name, dtype)
    n, c, h, w = 2, rng.randint(2, 9), rng.randint(1, 6), rng.randint(1, 6)
    cases = [
        ((n, c, h, w), "channels_last", (n, c, 1, 1), "contiguous"),  # squeeze-excitation scale
        ((n, c, h, w), "contiguous", (n, c, 1, 1), "offset"),
        ((n, c, h, w), "channels_last", (c, 1, 1), "contiguous"),  # per-channel
        ((n, c, h, w), "permuted", (n, c, h, w), "channels_last"),  # mixed layouts
        ((n, c, h, w), "strided", (1,), "contiguous"),
        ((n, 1, h, w), "contiguous", (1, c, 1, 1), "strided"),  # both broadcast
        ((c, h), "contiguous", (), "contiguous"),  # 0-dim tensor
        ((n, c, 3, h, w), "channels_last", (n, c, 1, 1, 1), "contiguous"),  # 3-D
        ((n, c, w), "permuted", (c, 1), "contiguous"),  # 1-D
    ]
    for a_shape, a_layout, b_shape, b_layout in cases:
        a = make_tensor(a_shape, dtype, a_layout, gen, rng)
        b = make_tensor(b_shape, dtype, b_layout, gen, rng)
        if op == "div":
            b = b.sign() * (b.abs() + 0.5)  # away from 0
        for lhs, rhs in ((a, b), (b, a)):
            spec = binary_spec(op, meta(lhs), meta(rhs), **params)
            check(spec, {"in0": lhs, "in1": rhs})
            torch.testing.assert_close(
                reference(spec, cpu({"in0": lhs, "in1": rhs})).float(),
                eager(lhs.cpu().float(), rhs.cpu().float()),
                **tolerance(dtype),
            )


@pytest.mark.parametrize("dtype", DTYPES)
def test_tensor_scalar(dtype: str) -> None:
    rng, gen = rng_for("scalar", dtype)
    x = make_tensor((2, 5, 3, 4), dtype, "channels_last", gen, rng)
    xf = x.cpu().float()
    cases = [
        (("add", x, 3.0), xf + 3.0),
        (("add", 2.5, x), 2.5 + xf),
        (("sub", x, 0.75), xf - 0.75),
        (("rsub", x, 1.0), 1.0 - xf),
        (("mul", x, -1.5), xf * -1.5),
        (("div", x, 6.0), xf / 6.0),
        (("div", 1.0, x), 1.0 / xf),
    ]
    for (op, lhs, rhs), expected in cases:
        spec = binary_spec(op, meta(lhs) if isinstance(lhs, torch.Tensor) else lhs,
                           meta(rhs) if isinstance(rhs, torch.Tensor) else rhs)  # fmt: skip
        out = check(spec, {"in0" if isinstance(lhs, torch.Tensor) else "in1": x})
        torch.testing.assert_close(
            out.cpu().float(), expected.to(x.dtype).float(), **tolerance(dtype), equal_nan=True
        )


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_mixed_dtypes_promote(dtype: str) -> None:
    rng, gen = rng_for("promote", dtype)
    a = make_tensor((3, 4, 5), "bfloat16", "contiguous", gen, rng)
    b = make_tensor((3, 4, 5), dtype, "permuted", gen, rng)
    spec = binary_spec("mul", meta(a), meta(b))
    assert spec.out.dtype == "float32"
    check(spec, {"in0": a, "in1": b})


# ---- chains ----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", ["contiguous", "channels_last", "permuted"])
def test_decomposed_hardswish_is_one_kernel(dtype: str, layout: str) -> None:
    """y = clamp(x + 3, 0, 6) / 6 * x, as the edge graph decomposes hardswish: one launch."""
    rng, gen = rng_for("hardswish-chain", dtype, layout)
    x = make_tensor(random_shape(rng, 4, 2, 6), dtype, layout, gen, rng) * 4
    b = ChainBuilder()
    v = b.input("in0", meta(x))
    t = b.op("clamp", b.op("add", v, 3), min=0, max=6)
    spec = b.build(b.op("mul", b.op("div", t, 6), v))
    assert len(launches(spec)) == 1
    out = check(spec, {"in0": x})
    torch.testing.assert_close(out.cpu().float(), F.hardswish(x.cpu().float()), **tolerance(dtype))


@pytest.mark.parametrize("dtype", DTYPES)
def test_four_input_dag(dtype: str) -> None:
    """A DAG with shared values and four inputs of different layouts and broadcasts: conv output, per-channel
    scale, squeeze-excitation gate, residual (y = relu(x * s + r) * sigmoid(g) + x)."""
    rng, gen = rng_for("dag", dtype)
    n, c, h, w = 2, 6, 3, 5
    x = make_tensor((n, c, h, w), dtype, "channels_last", gen, rng)
    s = make_tensor((c, 1, 1), dtype, "contiguous", gen, rng)
    g = make_tensor((n, c, 1, 1), dtype, "contiguous", gen, rng)
    r = make_tensor((n, c, h, w), dtype, "contiguous", gen, rng)
    b = ChainBuilder()
    vx, vs, vg, vr = (b.input(k, meta(t)) for k, t in (("x", x), ("s", s), ("g", g), ("r", r)))
    t = b.op("relu", b.op("add", b.op("mul", vx, vs), vr))
    spec = b.build(b.op("add", b.op("mul", t, b.op("sigmoid", vg)), vx))
    out = check(spec, {"x": x, "s": s, "g": g, "r": r})
    xf, sf, gf, rf = (t.cpu().float() for t in (x, s, g, r))
    expected = torch.relu(xf * sf + rf) * torch.sigmoid(gf) + xf
    torch.testing.assert_close(out.cpu().float(), expected, **tolerance(dtype))
    assert out.is_contiguous(memory_format=torch.channels_last)


def test_copy_chain_changes_dtype_and_layout() -> None:
    x = make_tensor((2, 3, 4, 5), "float32", "contiguous", *reversed(rng_for("copy")))
    b = ChainBuilder()
    spec = b.build(b.input("in0", meta(x)), out_dtype="float16", out_strides=(60, 1, 15, 3))
    out = check(spec, {"in0": x})
    torch.testing.assert_close(out.cpu(), x.cpu().half())


def test_output_into_a_slice_of_a_buffer() -> None:
    """A chain may write a view of a bigger tensor (e.g. its slice of a concatenation): offset and strides."""
    rng, gen = rng_for("slice-out")
    x = make_tensor((2, 3, 4, 5), "float32", "channels_last", gen, rng)
    buffer = torch.full((2, 7, 4, 5), float("nan"), device=DEVICE).contiguous(
        memory_format=torch.channels_last
    )
    b = ChainBuilder()
    spec = b.build(b.op("sigmoid", b.input("in0", meta(x))), out_strides=buffer.stride(), out_offset=2)
    for launch in launches(spec):
        launch.run({"in0": x, "out": buffer})
    torch.testing.assert_close(buffer[:, 2:5].cpu(), torch.sigmoid(x.cpu()))
    assert buffer[:, :2].isnan().all() and buffer[:, 5:].isnan().all()


# ---- glu -------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", DTYPES)
def test_glu(dtype: str) -> None:
    rng, gen = rng_for("glu", dtype)
    for shape, dim, layout in [((3, 8, 5), 1, "contiguous"), ((2, 6, 3, 4), 1, "channels_last"),
                               ((4, 6), -1, "strided"), ((2, 4, 3, 2), 3, "permuted")]:  # fmt: skip
        x = make_tensor(shape, dtype, layout, gen, rng)
        spec = glu_spec(meta(x), dim)
        out = check(spec, {"in0": x})
        torch.testing.assert_close(out.cpu().float(), F.glu(x.cpu().float(), dim), **tolerance(dtype))
    with pytest.raises(ValueError, match="odd size"):
        glu_spec(TensorMeta.contiguous((3, 5), "float32"), 1)


# ---- what is declined ------------------------------------------------------------------------------------------
def test_supports_gives_reasons() -> None:
    x = TensorMeta.contiguous((2, 3), "float32")
    assert (
        not (s := supports(unary_spec("relu", TensorMeta.contiguous((2, 3), "int32"))))
        and "int32" in s.reason
    )
    spec = unary_spec("relu", x)
    overlapping = ElementwiseSpec(spec.inputs, spec.program, TensorMeta((2, 3), (1, 1), "float32"))
    assert "overlap" in supports(overlapping).reason
    wrong = ElementwiseSpec(spec.inputs, spec.program, TensorMeta.contiguous((3, 3), "float32"))
    assert "broadcast shape" in supports(wrong).reason
    bad_program = ElementwiseSpec(spec.inputs, ((99, 0, -1, 0.0, 0.0),), spec.out)
    assert "unknown op code" in supports(bad_program).reason
    five = ElementwiseSpec(tuple(ChainInput(f"in{k}", x) for k in range(5)), spec.program, spec.out)
    assert "1 to 4" in supports(five).reason
    with pytest.raises(ValueError, match="at most 4"):
        b = ChainBuilder()
        for k in range(5):
            b.input(f"in{k}", TensorMeta.contiguous((k + 1,), "float32"))
    with pytest.raises(ValueError, match="approximate"):
        unary_spec("gelu", x, approximate="erf")
    with pytest.raises(ValueError, match="elementwise chain"):
        launches(overlapping)


def test_big_tensors_index_in_64_bits() -> None:
    x = TensorMeta.channels_last((64, 256, 512, 512), "float16")  # 2^32 elements: shapes only
    (launch,) = launches(binary_spec("add", x, TensorMeta.contiguous((256, 1, 1), "float16")))
    assert dict(launch.constexprs)["INDEX_64"] is True
    assert {a.type for a in launch.args if hasattr(a, "type")} == {"i64"}


# ---- the epilogue use of apply_chain ---------------------------------------------------------------------------
@triton.jit
def toy_epilogue_kernel(
    acc_ptr, bias_ptr, res_ptr, out_ptr, M, N,
    PROGRAM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
):  # fmt: skip
    """A GEMM-like tile loop's epilogue: ``acc`` stands for the accumulator tile [BLOCK_M, BLOCK_N] (rows =
    output pixels, cols = channels); the chain's value 0 is that tile, value 1 a per-channel vector loaded as
    [1, BLOCK_N], value 2 a residual tile in the output's layout."""
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    ok = (rows < M)[:, None] & (cols < N)[None, :]
    tile = rows[:, None] * N + cols[None, :]
    acc = tl.load(acc_ptr + tile, mask=ok).to(tl.float32)
    bias = tl.load(bias_ptr + cols, mask=cols < N).to(tl.float32)[None, :]
    res = tl.load(res_ptr + tile, mask=ok).to(tl.float32)
    y = apply_chain(acc, bias, res, None, PROGRAM)
    tl.store(out_ptr + tile, y.to(out_ptr.dtype.element_ty), mask=ok)


def _epilogue_chain(m: int, n: int, dtype: str) -> ElementwiseSpec:
    """hardswish(acc + bias) + residual over an [M, N] channels-last output (the producer's output is input 0)."""
    b = ChainBuilder()
    acc = b.input("acc", TensorMeta.contiguous((m, n), "float32"))
    bias = b.input("bias", TensorMeta.contiguous((n,), dtype))
    res = b.input("res", TensorMeta.contiguous((m, n), dtype))
    return b.build(b.op("add", b.op("hardswish", b.op("add", acc, bias)), res), out_dtype=dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_apply_chain_in_an_epilogue(dtype: str) -> None:
    rng, gen = rng_for("epilogue", dtype)
    m, n = 37, 24
    spec = _epilogue_chain(m, n, dtype)
    tensors = {
        "acc": make_tensor((m, n), "float32", "contiguous", gen, rng) * 3,
        "bias": make_tensor((n,), dtype, "contiguous", gen, rng),
        "res": make_tensor((m, n), dtype, "contiguous", gen, rng),
    }
    out = poisoned((m, n), (n, 1), dtype)
    toy_epilogue_kernel[(triton.cdiv(m, 16), triton.cdiv(n, 16))](
        tensors["acc"],
        tensors["bias"],
        tensors["res"],
        out,
        m,
        n,
        PROGRAM=spec.program,
        BLOCK_M=16,
        BLOCK_N=16,
    )
    torch.testing.assert_close(out.cpu(), reference(spec, cpu(tensors)), **tolerance(dtype))
    # The standalone kernel computes the same chain.
    check(spec, tensors)


# ---- ahead-of-time compiles ------------------------------------------------------------------------------------
def _aot_specs() -> list[tuple[str, ElementwiseSpec]]:
    cl = TensorMeta.channels_last((8, 96, 28, 28), "float16")
    cont = TensorMeta.contiguous((8, 96, 28, 28), "bfloat16")
    b = ChainBuilder()
    x = b.input("in0", cl)
    t = b.op("clamp", b.op("add", x, 3.0), min=0.0, max=6.0)
    hardswish = b.build(b.op("mul", b.op("div", t, 6.0), x))
    b = ChainBuilder()
    x, s, r = (
        b.input("x", cl),
        b.input("s", TensorMeta.contiguous((8, 96, 1, 1), "float16")),
        b.input("r", cl),
    )
    se = b.build(b.op("add", b.op("mul", x, b.op("sigmoid", s)), r))
    specs = [("hardswish chain fp16 CL", hardswish), ("SE gate + residual fp16", se)]
    for name, params in (
        ("gelu", {"approximate": "tanh"}),
        ("tanh", {}),
        ("leaky_relu", {"negative_slope": 0.1}),
    ):
        specs.append((f"{name} bf16", unary_spec(name, cont, **params)))
    specs += [
        ("per-channel bias fp32 contiguous", binary_spec("add", TensorMeta.contiguous((4, 64, 7, 7), "float32"),
                                                         TensorMeta.contiguous((64, 1, 1), "float32"))),
        ("glu fp32", glu_spec(TensorMeta.contiguous((4, 128, 50), "float32"), 1)),
        ("64-bit", binary_spec("mul", TensorMeta.channels_last((64, 256, 512, 512), "float16"), 0.5)),
    ]  # fmt: skip
    return specs


@pytest.mark.timeout(600)
def test_every_kernel_compiles_for_sm80_and_sm90() -> None:
    labelled = [(label, launch) for label, spec in _aot_specs() for launch in launches(spec)]
    labels = [label for label, _ in labelled]
    items = [launch for _, launch in labelled]
    with ThreadPoolExecutor(2) as pool:
        by_arch = dict(
            zip((80, 90), pool.map(lambda arch: compile_launches(items, arch), (80, 90)), strict=True)
        )
    for arch, compiled in by_arch.items():
        for label, launch, ck in zip(labels, items, compiled, strict=True):
            assert ck.arch == arch and ck.cubin, label
            assert ck.num_warps == launch.num_warps, label
            check_entry(launch, ck.ptx, ck.param_types)


def test_toy_epilogue_compiles() -> None:
    """apply_chain compiles inside a 2-D tile kernel (broadcast [1, N] operand) for both archs."""
    from cuda_triton.kernel.launch import KernelLaunch, ScalarArg, TensorArg

    spec = _epilogue_chain(4096, 256, "float16")
    args = (TensorArg("acc", "fp32"), TensorArg("bias", "fp16"), TensorArg("res", "fp16"), TensorArg("out", "fp16"),
            ScalarArg("M", "i32", 4096), ScalarArg("N", "i32", 256))  # fmt: skip
    launch = KernelLaunch(
        toy_epilogue_kernel,
        args,
        (("PROGRAM", spec.program), ("BLOCK_M", 64), ("BLOCK_N", 64)),
        (64, 4, 1),
        4,
        1,
    )
    for arch in (80, 90):
        (ck,) = compile_launches([launch], arch)
        assert ck.cubin
