"""Convolution cases for the GPU numerics and benchmark scripts: random generators, tensors, tolerances.

A case is a plain dict (JSON-friendly): dims-long tuples ``spatial``, ``kernel``, ``stride``, ``pad_before``,
``pad_after``, ``dilation``, ``output_padding``, and ``N``, ``C`` (input channels), ``K`` (output channels),
``groups``, ``transposed``, ``channels_last``, ``bias``, ``dtype`` ("float16"/"bfloat16"/"float32").

``CASE_GENERATORS`` maps a template family to ``fn(rng: random.Random) -> case``. Depends on torch and
cuda_triton.conv only (imported on the GPU machine, which has no executorch).
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from typing import Any

import torch

from cuda_triton.conv import ConvParams
from cuda_triton.conv.layout import conv_out_size

Case = dict[str, Any]
DTYPES = ("float16", "bfloat16", "float32")


def out_spatial(case: Case) -> tuple[int, ...]:
    return tuple(
        conv_out_size(
            case["spatial"][i],
            case["kernel"][i],
            case["stride"][i],
            case["pad_before"][i],
            case["pad_after"][i],
            case["dilation"][i],
            case["transposed"],
            case["output_padding"][i],
        )
        for i in range(len(case["spatial"]))
    )


def params_of(case: Case) -> ConvParams:
    return ConvParams(
        tuple(case["stride"]),
        tuple(case["pad_before"]),
        tuple(case["pad_after"]),
        tuple(case["dilation"]),
        bool(case["transposed"]),
        tuple(case["output_padding"]),
        int(case["groups"]),
    )


def case_from_suite(c: Any, dtype: str, bias: bool = False) -> Case:
    """A public-suite `Case` (bench/public_suite.py) as a case dict."""
    dims = len(c.spatial)
    return {
        "name": c.name,
        "N": c.N,
        "C": c.C,
        "K": c.K,
        "spatial": tuple(c.spatial),
        "kernel": tuple(c.kernel),
        "stride": tuple(c.stride),
        "pad_before": tuple(c.pad_before),
        "pad_after": tuple(c.pad_after),
        "dilation": tuple(c.dilation),
        "groups": c.groups,
        "transposed": bool(c.transposed),
        "output_padding": tuple(c.output_padding) if c.output_padding else (0,) * dims,
        "channels_last": bool(c.channels_last),
        "bias": bias,
        "dtype": dtype,
    }


def make_tensors(
    case: Case, device: str, seed: int = 0
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """Fresh random input, weight (and bias) in the case's dtype and memory format."""
    gen = torch.Generator(device="cpu").manual_seed(seed)
    dt = getattr(torch, case["dtype"])
    g = case["groups"]
    if case["transposed"]:
        wshape = (case["C"], case["K"] // g, *case["kernel"])
    else:
        wshape = (case["K"], case["C"] // g, *case["kernel"])
    x = torch.randn((case["N"], case["C"], *case["spatial"]), generator=gen) * case.get("x_scale", 1.0)
    x = x.to(device=device, dtype=dt)
    w = (
        torch.randn(wshape, generator=gen)
        / math.sqrt(max(1, math.prod(wshape[1:])))
        * case.get("w_scale", 1.0)
    )
    w = w.to(device=device, dtype=dt)
    b = torch.randn((case["K"],), generator=gen).to(device=device, dtype=dt) if case["bias"] else None
    if case["channels_last"] and len(case["spatial"]) in (2, 3):
        fmt = torch.channels_last if len(case["spatial"]) == 2 else torch.channels_last_3d
        x = x.contiguous(memory_format=fmt)
        w = w.contiguous(memory_format=fmt)
    return x, w, b


def reduction_length(case: Case) -> int:
    """Terms summed into one output element: C_in/groups times the taps (an upper bound for transposed
    convs, whose output elements each receive C_in/groups * (taps of their phase) terms)."""
    k = math.prod(case["kernel"])
    return (case["C"] // case["groups"]) * k


def tolerance(
    case: Case,
    ref: torch.Tensor,
    x: torch.Tensor,
    w: torch.Tensor,
    allow_tf32: bool = True,
    half_sum: int = 0,
) -> torch.Tensor:
    """Per-element bound on |ours - ref| for a reference computed in fp32 without TF32 from the same inputs.

    Three terms: the output's rounding to its dtype (relative to |ref|); with TF32 (fp32 convs by default) the
    operands cut to 10 mantissa bits - Hopper's tensor cores truncate rather than round, so each operand is off
    by < 2^-10 and each product by < 2^-9 - so at most 2^-9 times the convolution of |x| with |w| (computed
    exactly like the reference, elementwise; the H200 showed errors up to 1.75 x 2^-10 of it); and fp32
    accumulation-order differences (ours vs cuDNN's algorithm), a random walk of sqrt(reduction length) terms
    of size rms(x) * rms(w). ``half_sum``: the candidate sums chains of that many products in the 16-bit type
    (`ConvTemplate.half_sum_length`), each addition rounding by up to one unit roundoff of the partial sum, so
    a fourth term of ``half_sum`` unit roundoffs times the convolution of |x| with |w|.
    """
    dtype = case["dtype"]
    out_eps = {"float16": 2.0**-10, "bfloat16": 2.0**-7, "float32": 2.0**-21}[dtype]
    k = reduction_length(case)
    walk = math.sqrt(k) * float(x.float().pow(2).mean().sqrt()) * float(w.float().pow(2).mean().sqrt())
    tol = out_eps * ref.float().abs() + 32.0 * 2.0**-24 * math.sqrt(k) * walk + 1e-7
    if dtype == "float32" and allow_tf32:
        tol = tol + 2.0**-9 * reference(case, x.abs(), w.abs(), None)
    if half_sum and dtype != "float32":
        tol = tol + half_sum * (out_eps / 2) * reference(case, x.abs(), w.abs(), None)
    return tol


def problem_of(case: Case, x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None):
    """The `ConvProblem` of this case on these tensors."""
    from cuda_triton.conv import ConvProblem

    return ConvProblem.from_tensors(x, w, b, params_of(case))


def half_sum_length(case: Case, x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None) -> int:
    """`ConvTemplate.half_sum_length` of the candidate the op picks for this case (the forced one inside
    ``force_conv_candidate``); 0 when no template runs it."""
    from cuda_triton.conv.dispatch import tuning_lookup
    from cuda_triton.conv.templates import NoTemplateError, select_candidate

    problem = problem_of(case, x, w, b)
    try:
        cand = select_candidate(problem, tuning_lookup)
    except NoTemplateError:
        return 0
    return cand.template.half_sum_length(problem, cand.schedule)


def reference(case: Case, x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None) -> torch.Tensor:
    """ATen in fp32 with TF32 off, from the same (rounded) inputs."""
    from cuda_triton.conv.op import reference_convolution

    prev = torch.backends.cudnn.allow_tf32
    torch.backends.cudnn.allow_tf32 = False
    try:
        return reference_convolution(
            x.float(), w.float(), None if b is None else b.float(), params_of(case)
        ).float()
    finally:
        torch.backends.cudnn.allow_tf32 = prev


def compare(
    case: Case,
    out: torch.Tensor,
    ref: torch.Tensor,
    x: torch.Tensor,
    w: torch.Tensor,
    allow_tf32: bool = True,
    half_sum: int = 0,
) -> dict[str, Any]:
    """Every element checked (NaN fails); returns {ok, max_err, max_ratio, bad}. ``half_sum``: see `tolerance`."""
    o = out.float()
    if o.shape != ref.shape:
        return {"ok": False, "error": f"shape {tuple(o.shape)} != {tuple(ref.shape)}"}
    err = (o - ref).abs()
    tol = tolerance(case, ref, x, w, allow_tf32, half_sum)
    bad = ~(err <= tol)  # NaN counts as bad
    ratio = float((err / tol).nan_to_num(float("inf")).max()) if err.numel() else 0.0
    return {
        "ok": not bool(bad.any()),
        "max_err": float(err.nan_to_num(float("inf")).max()) if err.numel() else 0.0,
        "max_ratio": ratio,
        "bad": int(bad.sum()),
    }


def run_poisoned(
    case: Case,
    x: torch.Tensor,
    w: torch.Tensor,
    b: torch.Tensor | None,
    template: str | None = None,
    schedule: Any = None,
) -> tuple[torch.Tensor, str, Any]:
    """Run the chosen (or given) template/schedule on x, w, b into a NaN-filled output in the layout rule's
    strides, exactly as the op's CUDA body does; returns (output, template name, schedule)."""
    from cuda_triton.conv import ConvProblem
    from cuda_triton.conv.dispatch import tuning_lookup
    from cuda_triton.conv.op import output_layout
    from cuda_triton.conv.templates import Candidate, get_template, select_candidate

    p = params_of(case)
    problem = ConvProblem.from_tensors(x, w, b, p)
    if template is None:
        cand = select_candidate(problem, tuning_lookup)
    else:
        t = get_template(template)
        cand = Candidate(t, schedule if schedule is not None else t.heuristic_schedule(problem))
    sizes, strides = output_layout(x, w, p)
    out = torch.empty_strided(sizes, strides, dtype=x.dtype, device=x.device).fill_(float("nan"))
    tensors = {
        "input": x,
        "weight": cand.template.prepare_weight(w, problem, cand.schedule),
        "bias": b,
        "output": out,
        **cand.allocate_scratch(problem, out.device),
    }
    for launch in cand.launches(problem):
        launch.run(tensors)
    return out, cand.template.name, cand.schedule


# ---- random generators ----------------------------------------------------------------------------------
def _geometry(
    kernel: tuple[int, ...],
    stride: tuple[int, ...],
    dilation: tuple[int, ...],
    pad_before: tuple[int, ...],
    pad_after: tuple[int, ...],
) -> dict[str, tuple[int, ...]]:
    """A case's window fields."""
    return {
        "kernel": kernel,
        "stride": stride,
        "dilation": dilation,
        "pad_before": pad_before,
        "pad_after": pad_after,
    }


def _pick_geometry(rng: random.Random, dims: int, max_k: int = 5) -> dict[str, tuple[int, ...]]:
    kernel = tuple(rng.randint(1, max_k) for _ in range(dims))
    stride = tuple(rng.choice((1, 1, 2, 3)) for _ in range(dims))
    dilation = tuple(rng.choice((1, 1, 2, 3)) for _ in range(dims))
    pad_before = tuple(rng.randint(0, (dilation[i] * (kernel[i] - 1) + 1) // 2 + 1) for i in range(dims))
    pad_after = tuple(rng.choice((pad_before[i], rng.randint(0, pad_before[i] + 1))) for i in range(dims))
    return _geometry(kernel, stride, dilation, pad_before, pad_after)


def _spatial_for(
    rng: random.Random, dims: int, geo: dict[str, tuple[int, ...]], size_range: tuple[int, int] | None = None
) -> tuple[int, ...]:
    size_range = size_range or {1: (8, 3000), 2: (4, 70), 3: (3, 20)}[dims]
    out = []
    for i in range(dims):
        span = geo["dilation"][i] * (geo["kernel"][i] - 1) + 1
        lo = max(size_range[0], span - geo["pad_before"][i] - geo["pad_after"][i])
        out.append(rng.randint(lo, max(lo, size_range[1])))
    return tuple(out)


def _base(rng: random.Random, dims: int) -> Case:
    return {
        "transposed": False,
        "output_padding": (0,) * dims,
        "bias": rng.random() < 0.5,
        "dtype": rng.choice(DTYPES),
        "channels_last": rng.random() < 0.6,
    }


def gen_implicit_gemm(rng: random.Random) -> Case:
    """Forward convs: 1-D/2-D/3-D, stride, dilation, asymmetric padding, groups, both layouts."""
    dims = rng.choice((1, 2, 2, 2, 3))
    geo = _pick_geometry(rng, dims)
    groups = rng.choice((1, 1, 1, 2, 4, 8))
    cin_g = rng.choice((1, 3, 4, 8, 16, 24, 32, 64, 96))
    cout_g = rng.choice((1, 4, 8, 16, 32, 48, 64, 128))
    if groups * cin_g > 512:
        groups = 1
    case = _base(rng, dims)
    case.update(geo)
    case.update(N=rng.choice((1, 1, 2, 3, 4)), C=groups * cin_g, K=groups * cout_g, groups=groups)
    case["spatial"] = _spatial_for(rng, dims, geo)
    return case


def gen_gemm(rng: random.Random) -> Case:
    """1x1 (any stride) and patchify (kernel == stride) convs without padding."""
    dims = rng.choice((1, 2, 2, 3))
    if rng.random() < 0.5:
        kernel = (1,) * dims
        stride = tuple(rng.choice((1, 1, 2)) for _ in range(dims))
    else:
        kernel = tuple(rng.choice((2, 4, 8, 16) if dims < 3 else (2, 4)) for _ in range(dims))
        stride = kernel
    geo = _geometry(kernel, stride, (1,) * dims, (0,) * dims, (0,) * dims)
    case = _base(rng, dims)
    case.update(geo)
    case.update(
        N=rng.choice((1, 2, 4)),
        C=rng.choice((3, 8, 16, 64, 96, 256)),
        K=rng.choice((8, 24, 64, 128, 384)),
        groups=1,
    )
    case["spatial"] = tuple(
        max(kernel[i], rng.randint(1, {1: 4000, 2: 64, 3: 16}[dims] // max(1, kernel[i])) * kernel[i])
        for i in range(dims)
    )
    return case


def gen_depthwise(rng: random.Random) -> Case:
    """Depthwise convs (groups == C_in, channel multiplier 1-3): 1-D/2-D/3-D, stride, dilation, asymmetric
    padding, both layouts, odd channel counts."""
    dims = rng.choice((1, 2, 2, 2, 3))
    geo = _pick_geometry(rng, dims, max_k={1: 15, 2: 7, 3: 3}[dims])
    c = rng.choice((2, 3, 8, 17, 32, 64, 96, 130, 240))
    mult = rng.choice((1, 1, 1, 2, 3))
    case = _base(rng, dims)
    case.update(geo)
    case.update(N=rng.choice((1, 2, 3, 4)), C=c, K=c * mult, groups=c)
    case["spatial"] = _spatial_for(rng, dims, geo)
    return case


def gen_transposed(rng: random.Random) -> Case:
    """Transposed convs: 1-D/2-D/3-D, stride 1-4, dilation, asymmetric crop, output_padding, groups."""
    dims = rng.choice((1, 2, 2, 2, 3))
    kernel = tuple(rng.choice((1, 2, 2, 3, 4, 5, 8) if dims == 1 else (1, 2, 2, 3, 4)) for _ in range(dims))
    stride = tuple(rng.choice((1, 2, 2, 3, 4)) for _ in range(dims))
    dilation = tuple(rng.choice((1, 1, 1, 2, 3)) for _ in range(dims))
    output_padding = tuple(rng.randint(0, max(stride[i], dilation[i]) - 1) for i in range(dims))
    pad_before = tuple(rng.randint(0, dilation[i] * (kernel[i] - 1)) for i in range(dims))
    pad_after = tuple(
        rng.choice((pad_before[i], rng.randint(0, dilation[i] * (kernel[i] - 1)))) for i in range(dims)
    )
    groups = rng.choice((1, 1, 1, 2, 4))
    cin_g = rng.choice((1, 3, 8, 16, 32, 64, 128))
    cout_g = rng.choice((1, 4, 8, 16, 32, 64, 96))
    size_range = {1: (2, 1500), 2: (2, 40), 3: (2, 12)}[dims]
    spatial = []
    for i in range(dims):
        lo = size_range[0]
        # the output length (L-1)*s - pb - pa + d*(k-1) + 1 + op must be at least 1
        extent = dilation[i] * (kernel[i] - 1) + 1 + output_padding[i] - pad_before[i] - pad_after[i]
        while (lo - 1) * stride[i] + extent < 1:
            lo += 1
        spatial.append(rng.randint(lo, max(lo, size_range[1])))
    case = _base(rng, dims)
    case.update(_geometry(kernel, stride, dilation, pad_before, pad_after))
    case.update(
        output_padding=output_padding,
        transposed=True,
        N=rng.choice((1, 2, 4)),
        C=groups * cin_g,
        K=groups * cout_g,
        groups=groups,
        spatial=tuple(spatial),
    )
    return case


def gen_transposed_fold(rng: random.Random) -> Case:
    """Transposed convs the W_FOLD schedules take (transposed.w_phases_fold): kernel == stride (2 or 4) along W,
    dilation 1 and no padding there; the other dims as `gen_transposed` draws them (UNet's 2x2 s2, 3-D decoders)."""
    case = gen_transposed(rng)
    s = rng.choice((2, 2, 4))
    last = len(case["kernel"]) - 1

    def with_last(key: str, value: int) -> tuple[int, ...]:
        return tuple(value if i == last else v for i, v in enumerate(case[key]))

    case.update(
        kernel=with_last("kernel", s),
        stride=with_last("stride", s),
        dilation=with_last("dilation", 1),
        pad_before=with_last("pad_before", 0),
        pad_after=with_last("pad_after", 0),
        output_padding=with_last("output_padding", 0),
    )
    # other dims: the output must stay non-empty after gen_transposed's crops
    spatial = list(case["spatial"])
    for i in range(last):
        extent = case["dilation"][i] * (case["kernel"][i] - 1) + 1 + case["output_padding"][i]
        while (spatial[i] - 1) * case["stride"][i] + extent - case["pad_before"][i] - case["pad_after"][
            i
        ] < 1:
            spatial[i] += 1
    case["spatial"] = tuple(spatial)
    return case


def gen_few_tiles_long_k(rng: random.Random) -> Case:
    """Small output maps with many input channels (the split-K regime), often contiguous (the CL_COPY regime):
    1-D/2-D/3-D, 1x1 or 3-wide kernels, any stride/dilation/padding geometry of those."""
    dims = rng.choice((1, 2, 2, 3))
    geo = _pick_geometry(rng, dims, max_k=3)
    if rng.random() < 0.3:  # 1x1: the GEMM template's split-K too
        geo.update(kernel=(1,) * dims, dilation=(1,) * dims, pad_before=(0,) * dims, pad_after=(0,) * dims)
    case = _base(rng, dims)
    case.update(geo)
    groups = rng.choice((1, 1, 1, 2))
    case.update(N=rng.choice((1, 1, 2)), C=rng.choice((128, 256, 512, 1024)), K=rng.choice((16, 48, 64, 256)))
    case.update(groups=groups, channels_last=rng.random() < 0.4)
    case["spatial"] = _spatial_for(rng, dims, geo, {1: (8, 60), 2: (3, 9), 3: (2, 5)}[dims])
    return case


def gen_implicit_gemm_tma(rng: random.Random) -> Case:
    """Stride-1 dense convs (the TMA template's domain): 1-D/2-D/3-D, dilation, asymmetric padding, both
    layouts, channel counts whose rows are whole 16-byte TMA units, odd output sizes (border rows)."""
    dims = rng.choice((1, 2, 2, 2, 3))
    geo = _pick_geometry(rng, dims)
    geo["stride"] = (1,) * dims
    case = _base(rng, dims)
    case.update(geo)
    case.update(
        N=rng.choice((1, 2, 3)), C=rng.choice((8, 16, 24, 64, 136, 256)), K=rng.choice((8, 40, 64, 128, 200))
    )
    case["groups"] = 1
    case["spatial"] = _spatial_for(rng, dims, geo)
    return case


def gen_implicit_gemm_box(rng: random.Random) -> Case:
    """Dense 1-D/2-D convs of the Gluon box template's domain (fp32 through its scaled fp16 copy): dilation,
    asymmetric padding (boxes that leave the input on every side), both layouts, channel counts that leave a
    part-filled channel block, batches and maps the boxes do not tile exactly; a third strided (2 or 3 per dim,
    read through the strided view: sizes divisible by the stride, C_in % 16 == 0)."""
    dims = rng.choice((1, 2, 2, 2))
    geo = _pick_geometry(rng, dims)
    strided = rng.random() < 1 / 3
    geo["stride"] = tuple(rng.choice((2, 2, 3)) for _ in range(dims)) if strided else (1,) * dims
    case = _base(rng, dims)
    case.update(geo)
    case.update(
        N=rng.choice((1, 2, 3, 5)),
        C=rng.choice((16, 32, 48, 64, 144, 256) if strided else (8, 16, 24, 64, 136, 256)),
        K=rng.choice((8, 40, 64, 128, 200)),
    )
    case.update(groups=1, dtype=rng.choice(("float16", "bfloat16", "float32")))
    if case["dtype"] == "float32":
        # fp32 runs on the scaled fp16 copy (F16_MMA=2): magnitudes outside fp16's range
        case.update(x_scale=10.0 ** rng.uniform(-4, 7), w_scale=10.0 ** rng.uniform(-4, 4))
    spatial = _spatial_for(rng, dims, geo)
    case["spatial"] = tuple(-(-size // s) * s for size, s in zip(spatial, geo["stride"], strict=True))
    return case


def gen_tail_waves(rng: random.Random) -> Case:
    """1-D convs whose 128-row tiles fill whole waves of 132 SMs plus a few rows (the tail-split regime):
    M = 132 * 128 * waves + a remainder, dilation and asymmetric padding, both layouts."""
    dims = 1
    geo = _pick_geometry(rng, dims, max_k=5)
    geo["stride"] = (1,)
    case = _base(rng, dims)
    case.update(geo)
    case.update(N=1, C=rng.choice((64, 128, 256)), K=rng.choice((64, 128, 256)), groups=1)
    length = 132 * 128 * rng.choice((1, 2)) + rng.randint(1, 300)
    span = geo["dilation"][0] * (geo["kernel"][0] - 1)
    case["spatial"] = (length + span - geo["pad_before"][0] - geo["pad_after"][0],)
    return case


def gen_f16_mma(rng: random.Random, family: str = "implicit_gemm") -> Case:
    """fp32 convs of a family for the F16_MMA schedules (fp32 at TF32 precision on fp16 tensor cores): inputs
    and weights scaled by random powers of ten far outside fp16's range (1e-4 .. 1e7), a long enough reduction."""
    case = CASE_GENERATORS[family](rng)
    while case["C"] // case["groups"] * math.prod(case["kernel"]) < 32:
        case = CASE_GENERATORS[family](rng)
    case.update(dtype="float32", x_scale=10.0 ** rng.uniform(-4, 7), w_scale=10.0 ** rng.uniform(-4, 4))
    return case


CASE_GENERATORS: dict[str, Callable[[random.Random], Case]] = {
    "gemm": gen_gemm,
    "implicit_gemm": gen_implicit_gemm,
    "implicit_gemm_tma": gen_implicit_gemm_tma,
    "implicit_gemm_box": gen_implicit_gemm_box,
    "depthwise": gen_depthwise,
    "transposed": gen_transposed,
}


def case_label(case: Case) -> str:
    if "name" in case:
        return f"{case['name']}:{case['dtype']}"
    p = [
        f"n{case['N']}c{case['C']}k{case['K']}",
        "x".join(map(str, case["spatial"])),
        "w" + "x".join(map(str, case["kernel"])),
        "s" + "x".join(map(str, case["stride"])),
        "p" + "x".join(map(str, case["pad_before"])) + "/" + "x".join(map(str, case["pad_after"])),
        "d" + "x".join(map(str, case["dilation"])),
        f"g{case['groups']}",
        "cl" if case["channels_last"] else "nc",
        "b" if case["bias"] else "nb",
        case["dtype"],
    ]
    if case["transposed"]:
        p.insert(6, "t" + "x".join(map(str, case["output_padding"])))
    return "_".join(p)
