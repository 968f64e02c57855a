"""Round-to-nearest TF32 operands on the fp32-with-TF32 path (issue 7).

The torch conversion (conv/tf32.py) and the kernels' Triton helper (templates/_tf32.py) are checked bit for bit
against an independent fp64 reference (specials, ties, negatives, subnormals, overflow); the prepared fp32
weights must be TF32 values exactly when TF32 is on and the untouched weight otherwise; and each GEMM-shaped
template, run in Triton's interpreter (whose tl.dot is plain fp32) on an identity convolution, must output the
rounded input with TF32 on and the input itself with exact fp32, so the in-kernel A rounding is really applied
(and only there). The kernels must also still compile for sm_80 and sm_90 with the rounding in.
"""

from __future__ import annotations

import os

os.environ.setdefault("TRITON_INTERPRET", "1")  # before any kernel module is imported (conftest does too)

import math  # noqa: E402

import pytest  # noqa: E402
import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402
from cuda_triton.conv.params import ConvParams  # noqa: E402
from cuda_triton.conv.problem import ConvProblem  # noqa: E402
from cuda_triton.conv.templates import (  # noqa: E402
    _tf32,  # noqa: E402
    force_conv_candidate,
    get_template,
    select_candidate,
)
from cuda_triton.conv.tf32 import is_tf32, round_to_tf32, truncate_to_tf32  # noqa: E402
from cuda_triton.kernel import aot  # noqa: E402

INTERPRET = os.environ.get("TRITON_INTERPRET") == "1"
DEVICE = "cpu" if INTERPRET else "cuda"


def _f(bits: list[int]) -> torch.Tensor:
    return torch.tensor([b - (1 << 32) if b >= 1 << 31 else b for b in bits], dtype=torch.int32).view(
        torch.float32
    )


def _bits(t: torch.Tensor) -> list[int]:
    return [b & 0xFFFFFFFF for b in t.contiguous().view(torch.int32).tolist()]


def reference_rna(x: torch.Tensor) -> torch.Tensor:
    """Nearest TF32 value, ties away from zero, by fp64 arithmetic (independent of the bit trick).

    TF32 has fp32's exponent range and 10 stored mantissa bits, so the spacing at |x| in [2^e, 2^(e+1)) is
    2^(max(e, -126) - 10) (subnormals share the spacing of the smallest binade). Results at 2^128 or above
    become infinity on the cast back, as the hardware conversion does; inf and NaN pass through.
    """
    out = []
    for v in x.double().tolist():
        if not math.isfinite(v) or v == 0.0:
            out.append(v)
            continue
        e = max(math.frexp(abs(v))[1] - 1, -126)  # |v| in [2^e, 2^(e+1)), or subnormal
        ulp = 2.0 ** (e - 10)
        q = abs(v) / ulp  # exact: a power-of-two scaling
        r = math.floor(q + 0.5)  # ties go up in magnitude: away from zero
        mag = r * ulp
        out.append(math.copysign(mag if mag < 2.0**128 else math.inf, v))
    return torch.tensor(out, dtype=torch.float64).to(torch.float32)


SPECIAL_BITS = [
    0x00000000, 0x80000000,  # +-0
    0x3F800000, 0xBF800000,  # +-1 (already TF32)
    0x3F801000, 0xBF801000,  # exact ties: away from zero
    0x3F803000, 0xBF803000,  # ties with an odd kept bit (away from zero either way)
    0x3F800FFF, 0x3F801001,  # just below / above a tie
    0x3FFFF000, 0x3FFFFFFF,  # carry into the exponent
    0x00000001, 0x00001000, 0x00000FFF, 0x807FFFFF, 0x007FF000,  # subnormals (incl. carry to the normal range)
    0x7F7FE000, 0x7F7FEFFF,  # largest TF32; below the tie above it
    0x7F7FF000, 0x7F7FFFFF, 0xFF7FFFFF,  # ties / beyond: overflow to +-inf
    0x7F800000, 0xFF800000,  # +-inf
    0x7FC00000, 0x7FFFFFFF, 0xFFFFFFFF, 0x7F800001, 0xFF800FFF, 0x7F801000,  # NaNs (CUDA's canonical 0x7FFFFFFF)
]  # fmt: skip


def _random_bits(n: int, seed: int) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    raw = torch.randint(-(2**31), 2**31 - 1, (n,), generator=gen, dtype=torch.int64).to(torch.int32)
    return raw.view(torch.float32)


def _same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    return torch.equal(a.contiguous().view(torch.int32), b.contiguous().view(torch.int32))


# ---- the torch conversion ---------------------------------------------------------------------------------------
def test_round_to_tf32_matches_fp64_reference_on_specials() -> None:
    x = _f(SPECIAL_BITS)
    got = round_to_tf32(x)
    ref = reference_rna(x)
    finite = torch.isfinite(x)
    assert _same_bits(got[finite], ref[finite]), [hex(b) for b in _bits(got[finite])]
    # inf / NaN: the very same bits (no NaN turned into inf or -0.0)
    assert _bits(got[~finite]) == _bits(x[~finite])
    # spot checks the reference could share a mistake with
    assert _bits(round_to_tf32(_f([0x3F801000, 0xBF801000, 0x7F7FF000, 0x7F7FEFFF, 0x3FFFF000]))) == [
        0x3F802000, 0xBF802000, 0x7F800000, 0x7F7FE000, 0x40000000,
    ]  # fmt: skip


def test_round_to_tf32_matches_fp64_reference_on_random_bits() -> None:
    x = _random_bits(20000, 0)
    x = x[torch.isfinite(x)]
    got = round_to_tf32(x)
    assert _same_bits(got, reference_rna(x))
    assert is_tf32(got)
    # never farther than half a TF32 unit, and at least as close as truncation
    assert ((got.double() - x.double()).abs() <= (truncate_to_tf32(x).double() - x.double()).abs()).all()


def test_truncate_and_is_tf32() -> None:
    x = _f([0x3F801FFF, 0xBF801FFF, 0x7FFFFFFF, 0x3F800000])
    assert _bits(truncate_to_tf32(x)) == [0x3F800000, 0xBF800000, 0x7FFFFFFF, 0x3F800000]
    assert is_tf32(_f([0x3F802000, 0x7FFFFFFF, 0xFF800000])) and not is_tf32(_f([0x3F800001]))
    with pytest.raises(TypeError):
        round_to_tf32(torch.zeros(2, dtype=torch.float16))


# ---- the Triton helper ------------------------------------------------------------------------------------------
@triton.jit
def _round_kernel(x_ptr, y_ptr, n, MODE: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    ok = offs < n
    tl.store(y_ptr + offs, _tf32.round_to_tf32(tl.load(x_ptr + offs, mask=ok), MODE), mask=ok)


# The interpreter cannot run inline PTX; on a GPU the hardware conversion is checked too.
ROUNDING_MODES = [_tf32.ROUND_BITS] if INTERPRET else [_tf32.ROUND_BITS, _tf32.ROUND_CVT]


@pytest.mark.parametrize("mode", ROUNDING_MODES)
def test_triton_helper_matches_torch_bit_for_bit(mode: int) -> None:
    x = torch.cat([_f(SPECIAL_BITS), _random_bits(4096, 1)]).to(DEVICE)
    y = torch.empty_like(x)
    _round_kernel[(triton.cdiv(x.numel(), 256),)](x, y, x.numel(), MODE=mode, BLOCK=256)
    got, want = y.cpu(), round_to_tf32(x.cpu())
    nan = torch.isnan(want)
    assert torch.equal(torch.isnan(got), nan)  # cvt may canonicalise a NaN's payload: NaN is all that matters
    assert _bits(got[~nan]) == _bits(want[~nan])


# ---- prepared weights -------------------------------------------------------------------------------------------
def _problem(
    transposed: bool, dtype: torch.dtype, allow_tf32: bool, kernel: int = 3, cin: int = 24, cout: int = 40
):
    gen = torch.Generator().manual_seed(3)
    x = torch.randn(1, cin, 9, 9, generator=gen).to(dtype)
    if transposed:
        w = torch.randn(cin, cout, kernel, kernel, generator=gen).to(dtype)
        p = ConvParams((2, 2), (1, 1), (1, 1), (1, 1), True, (1, 1), 1)
    else:
        w = torch.randn(cout, cin, kernel, kernel, generator=gen).to(dtype)
        pad = (kernel // 2,) * 2
        p = ConvParams((1, 1), pad, pad, (1, 1), False, (0, 0), 1)
    return x, w, p, ConvProblem.from_tensors(x, w, None, p, allow_tf32=allow_tf32)


@pytest.mark.parametrize(
    "template,transposed,kernel",
    [("implicit_gemm", False, 3), ("gemm", False, 1), ("transposed", True, 3)],
)
def test_prepared_fp32_weights_are_rounded_only_with_tf32(
    template: str, transposed: bool, kernel: int
) -> None:
    t = get_template(template)
    _, w, _, exact = _problem(transposed, torch.float32, False, kernel)
    _, _, _, tf32 = _problem(transposed, torch.float32, True, kernel)
    assert t.supports(exact) and t.supports(tf32)
    schedule = t.heuristic_schedule(tf32)
    assert schedule == t.heuristic_schedule(exact)
    plain = t.prepare_weight(w, exact, schedule)
    rounded = t.prepare_weight(w, tf32, schedule)
    assert not is_tf32(plain)  # exact fp32: the weight's own bits (random weights have low mantissa bits)
    assert sorted(plain.reshape(-1).tolist()) == sorted(
        w.reshape(-1).tolist() + [0.0] * (plain.numel() - w.numel())
    )
    assert is_tf32(rounded)
    assert _same_bits(rounded, round_to_tf32(plain))  # the same layout, each value rounded to nearest
    assert not _same_bits(rounded, truncate_to_tf32(plain))  # ... not truncated
    assert w.dtype == torch.float32 and not is_tf32(w)  # the caller's weight is left alone


@pytest.mark.parametrize("template,transposed,kernel", [("implicit_gemm", False, 3), ("transposed", True, 3)])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_weights_are_untouched(template: str, transposed: bool, kernel: int, dtype) -> None:
    t = get_template(template)
    _, w, _, problem = _problem(transposed, dtype, True, kernel)
    prepared = t.prepare_weight(w, problem, t.heuristic_schedule(problem))
    assert prepared.dtype == dtype
    assert sorted(prepared.float().reshape(-1).tolist()) == sorted(
        w.float().reshape(-1).tolist() + [0.0] * (prepared.numel() - w.numel())
    )


def test_rounds_only_fp32_with_tf32(monkeypatch: pytest.MonkeyPatch) -> None:
    assert _tf32.rounds_to_tf32(_problem(False, torch.float32, True)[3])
    monkeypatch.setenv(_tf32.ENV_SWITCH, "0")  # the timing switch: truncation as before
    assert not _tf32.rounds_to_tf32(_problem(False, torch.float32, True)[3])
    monkeypatch.setenv(_tf32.ENV_SWITCH, "bits")
    assert _tf32.tf32_rounding(_problem(False, torch.float32, True)[3]) == _tf32.ROUND_BITS
    monkeypatch.setenv(_tf32.ENV_SWITCH, "sideways")
    with pytest.raises(ValueError, match="expected one of"):
        _tf32.tf32_rounding(_problem(False, torch.float32, True)[3])
    monkeypatch.delenv(_tf32.ENV_SWITCH)
    # Under the interpreter the default (cvt, inline PTX) runs as the bit-identical integer rounding.
    assert _tf32.tf32_rounding(_problem(False, torch.float32, True)[3]) == _tf32.ROUND_BITS
    assert not _tf32.rounds_to_tf32(_problem(False, torch.float32, False)[3])
    assert not _tf32.rounds_to_tf32(_problem(False, torch.float16, True)[3])
    assert not _tf32.rounds_to_tf32(_problem(False, torch.bfloat16, True)[3])


# ---- the kernels round the A tile -------------------------------------------------------------------------------
def _identity_case(template: str):
    """(x, w, p): a convolution whose output is exactly its input (or, transposed, each input twice)."""
    c = 16
    gen = torch.Generator().manual_seed(5)
    x = torch.randn(2, c, 5, 7, generator=gen)
    eye = torch.eye(c)
    if template == "transposed":  # stride 2, kernel 2: output[2q + r] = sum_ci x[ci, q] w[ci, :, r]
        w = eye[:, :, None, None].expand(c, c, 2, 2).contiguous()
        return x, w, ConvParams((2, 2), (0, 0), (0, 0), (1, 1), True, (0, 0), 1)
    if template == "gemm":
        return (
            x,
            eye[:, :, None, None].contiguous(),
            ConvParams((1, 1), (0, 0), (0, 0), (1, 1), False, (0, 0), 1),
        )
    w = torch.zeros(c, c, 3, 3)
    w[:, :, 1, 1] = eye  # centre tap only; the other taps multiply zeros (padding or weights)
    return x, w, ConvParams((1, 1), (1, 1), (1, 1), (1, 1), False, (0, 0), 1)


def _run_forced(template: str, x, w, p: ConvParams, allow_tf32: bool) -> torch.Tensor:
    x, w = x.to(DEVICE), w.to(DEVICE)
    problem = ConvProblem.from_tensors(x, w, None, p, allow_tf32=allow_tf32)
    with force_conv_candidate(template):
        cand = select_candidate(problem)
    out = torch.empty_strided(problem.output_size, problem.output_stride, dtype=x.dtype, device=x.device)
    out.fill_(float("nan"))
    tensors = {"input": x, "weight": cand.template.prepare_weight(w, problem, cand.schedule), "bias": None}
    tensors["output"] = out
    for launch in cand.launches(problem):
        launch.run(tensors)
    return out.cpu()


@pytest.mark.skipif(not INTERPRET, reason="the GPU's tl.dot is TF32 itself; the interpreter's is plain fp32")
@pytest.mark.parametrize("template", ["implicit_gemm", "gemm", "transposed"])
def test_kernels_round_the_input_tile_only_with_tf32(template: str) -> None:
    x, w, p = _identity_case(template)
    assert not is_tf32(x)
    expected = {True: round_to_tf32(x), False: x}
    for allow_tf32, want in expected.items():
        out = _run_forced(template, x, w, p, allow_tf32)
        if template == "transposed":
            for r in range(2):
                for s in range(2):
                    assert _same_bits(out[:, :, r::2, s::2], want), (allow_tf32, r, s)
        else:
            assert _same_bits(out, want), allow_tf32


@pytest.mark.slow
@pytest.mark.parametrize("template", ["implicit_gemm", "gemm", "transposed"])
@pytest.mark.parametrize("mode", ["cvt", "bits"])
def test_rounding_kernels_compile_ahead_of_time(
    template: str, mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    x, w, p = _identity_case(template)
    problem = ConvProblem.from_tensors(x, w, None, p, allow_tf32=True)
    with force_conv_candidate(template):
        cand = select_candidate(problem)
    # What an export (no interpreter) compiles: the interpreter cannot run inline PTX, so it gets "bits".
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    monkeypatch.setenv(_tf32.ENV_SWITCH, mode)
    launches = cand.launches(problem)
    monkeypatch.undo()
    want = {"cvt": _tf32.ROUND_CVT, "bits": _tf32.ROUND_BITS}[mode]
    assert dict(launches[0].constexprs)["ROUND_TF32"] == want
    for arch in (80, 90):
        for k in aot.compile_launches(launches, arch):
            assert k.cubin
            assert ("cvt.rna.tf32.f32" in k.ptx) == (mode == "cvt")
