"""The TMA GEMM (`gemm_tma_kernel`, ops/gemm/tma.py) against ATen (Triton's interpreter on CPU machines).

Random inputs, NaN-poisoned outputs, M, N and K tails of the tiles (the copy engine's zero fill, not masks), A
and W in either unit-stride order, batches, with and without bias, alpha/beta and a fused chain, fp16 and bf16,
a persistent grid;
the TMA schedules' whole space on one problem; where the tuning space offers them (sm_90, TMA-readable strides,
16-bit, 32-bit offsets) with the heuristic unchanged; the AOT compile for sm_90 (TMA copies from descriptors made
on the device) and sm_80 (ordinary loads).
"""

from __future__ import annotations

import os

os.environ.setdefault("TRITON_INTERPRET", "1")

import random  # noqa: E402

import pytest  # noqa: E402
import torch  # noqa: E402
from cuda_triton.kernel.launch import Schedule  # noqa: E402
from cuda_triton.ops.gemm import (  # noqa: E402
    GemmSpec,
    heuristic_schedule,
    is_persistent,
    is_tma,
    launches,
    schedules,
    tma_problem,
    tma_schedules,
)
from cuda_triton.ops.tensor_meta import TensorMeta  # noqa: E402
from test_gemm_epilogue import _case, _reference  # noqa: E402
from test_gemm_epilogue import _run as _run_epilogue  # noqa: E402
from test_ops_gemm import _check, _randn  # noqa: E402

pytestmark = pytest.mark.timeout(300)
meta = TensorMeta.of
DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16}


def _tma(bm: int, bn: int, bk: int, warps: int = 4, stages: int = 3) -> Schedule:
    """A TMA schedule of small tiles, so that small problems have several tiles and tails in every dim."""
    return Schedule.make(warps, stages, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=2, TMA=1)


def _check_tma(spec: GemmSpec, tensors: dict[str, torch.Tensor], schedule: Schedule) -> None:
    assert tma_problem(spec) is None, tma_problem(spec)
    assert [la.name for la in launches(spec, schedule)] == ["gemm_tma_kernel"]
    _check(spec, tensors, schedule)


@pytest.mark.parametrize("dtype", list(DTYPES))
def test_addmm_matches_aten(dtype: str) -> None:
    """nn.Linear's addmm (x [M, K], the weight [N, K] read transposed) at random odd M and N, K a multiple of 8
    (16-byte rows) with a tail of the K tile, every bias broadcast and none, random alpha and beta."""
    dt = DTYPES[dtype]
    rng = random.Random(f"tma-addmm-{dtype}")
    gen = torch.Generator().manual_seed(rng.randrange(2**31))
    for bias_shape in [None, "n", "1n", "m1", "mn", "1"]:
        m, n, k = rng.randrange(33, 90, 2), rng.randrange(17, 70, 2), 8 * rng.randint(5, 11)
        x, w = _randn(gen, m, k, dtype=dt), _randn(gen, n, k, dtype=dt).t()
        alpha, beta = rng.choice([(1.0, 1.0), (0.5, 2.0), (-1.0, 0.25)])
        if bias_shape is None:
            spec, tensors = GemmSpec.mm(meta(x), meta(w)), {"in0": x, "in1": w}
        else:
            sizes = {"n": (n,), "1n": (1, n), "m1": (m, 1), "mn": (m, n), "1": (1,)}[bias_shape]
            bias = _randn(gen, *sizes, dtype=dt)
            spec = GemmSpec.addmm(meta(bias), meta(x), meta(w), beta, alpha)
            tensors = {"in0": bias, "in1": x, "in2": w}
        _check_tma(spec, tensors, _tma(32, 32, 32))


@pytest.mark.parametrize("dtype", list(DTYPES))
def test_transposed_operands_and_batches(dtype: str) -> None:
    """A stored [K, M] (M the unit-stride dim) and W [K, N] with an odd K (tails of every K tile), and bmm over
    batches of either layout, an expanded (batch stride 0) weight included."""
    dt = DTYPES[dtype]
    rng = random.Random(f"tma-mm-{dtype}")
    gen = torch.Generator().manual_seed(rng.randrange(2**31))
    for _ in range(2):
        m, n, k = 8 * rng.randint(4, 9), 8 * rng.randint(3, 8), rng.randrange(21, 75, 2)
        a = _randn(gen, k, m, dtype=dt).t()
        w = _randn(gen, k, n, dtype=dt)
        _check_tma(GemmSpec.mm(meta(a), meta(w)), {"in0": a, "in1": w}, _tma(32, 16, 16))
    b, m, n, k = 3, 37, 24, 48
    a3 = _randn(gen, b, m, k, dtype=dt)
    w3 = _randn(gen, b, n, k, dtype=dt).transpose(1, 2)
    _check_tma(GemmSpec.bmm(meta(a3), meta(w3)), {"in0": a3, "in1": w3}, _tma(16, 16, 32))
    a3 = _randn(gen, b, k, 40, dtype=dt).transpose(1, 2)
    w3 = _randn(gen, 1, k, n, dtype=dt).expand(b, k, n)
    _check_tma(GemmSpec.bmm(meta(a3), meta(w3)), {"in0": a3, "in1": w3}, _tma(32, 16, 16))


def test_persistent_programs_step_through_tiles() -> None:
    """A PERSIST schedule launches PERSIST programs per SM (132), fewer than the tiles here, so programs compute
    several tiles each, in every batch."""
    gen = torch.Generator().manual_seed(11)
    persistent = Schedule.make(4, 3, **dict(_tma(16, 16, 32).params), PERSIST=1)
    x, w = _randn(gen, 2, 203, 40, dtype=torch.float16), _randn(gen, 2, 40, 184, dtype=torch.float16)
    spec = GemmSpec.bmm(meta(x), meta(w))
    (launch,) = launches(spec, persistent)
    assert launch.grid == (132, 2, 1) and 13 * 12 > 132
    assert launches(spec, _tma(16, 16, 32))[0].grid == (13 * 12, 2, 1)
    _check_tma(spec, {"in0": x, "in1": w}, persistent)


# (batch, M, K, N): an nn.Linear with tails of 64-wide tiles in M and N, a bmm.
EPILOGUE_SHAPES = {"linear": (1, 75, 96, 40), "bmm": (3, 20, 40, 24)}


@pytest.mark.timeout(600)
@pytest.mark.parametrize("shape", list(EPILOGUE_SHAPES))
@pytest.mark.parametrize("chain", ["gelu", "gelu_scale_residual"])
@pytest.mark.parametrize("dtype", list(DTYPES))
def test_epilogue_matches_aten(dtype: str, chain: str, shape: str) -> None:
    """The fused chain after the bias, before the one rounding (`_epilogue`, shared with gemm_kernel)."""
    spec, tensors = _case(dtype, chain, *EPILOGUE_SHAPES[shape])
    assert tma_problem(spec) is None, tma_problem(spec)
    out = _run_epilogue(spec, tensors, _tma(32, 16, 32))
    assert not out.isnan().any()
    tol = {"fp16": 2e-3, "bf16": 1e-2}[dtype] * 4
    torch.testing.assert_close(out.float(), _reference(spec, tensors).float(), rtol=tol, atol=tol)


@pytest.mark.timeout(600)
def test_every_tma_schedule_runs() -> None:
    """The TMA space on an fp16 linear layer whose extents are not whole tiles of any schedule."""
    gen = torch.Generator().manual_seed(7)
    x, w = _randn(gen, 45, 136, dtype=torch.float16), _randn(gen, 72, 136, dtype=torch.float16).t()
    bias = _randn(gen, 72, dtype=torch.float16)
    spec = GemmSpec.addmm(meta(bias), meta(x), meta(w))
    space = tma_schedules(spec)
    assert len(space) == len(set(space)) >= 3 and all(is_tma(s) for s in space)
    for schedule in space:
        _check_tma(spec, {"in0": bias, "in1": x, "in2": w}, schedule)


@pytest.mark.timeout(60)
def test_tma_schedules_only_where_tma_reads_the_operands() -> None:
    def linear(m: int, k: int, n: int, dtype: str = "float16") -> GemmSpec:
        x = TensorMeta.contiguous((m, k), dtype)
        w = TensorMeta((k, n), (1, k), dtype)
        return GemmSpec.addmm(TensorMeta.contiguous((n,), dtype), x, w)

    convnext = linear(100352, 384, 1536)
    heuristic = heuristic_schedule(convnext)
    assert not is_tma(heuristic)
    assert schedules(convnext) == schedules(convnext, 80)  # no arch, or one without TMA: the pointer kernel's
    assert not any(is_tma(s) for s in schedules(convnext, 80))
    hopper = schedules(convnext, 90)
    assert hopper[0] == heuristic and hopper[: len(schedules(convnext))] == schedules(convnext)
    tma = [s for s in hopper if is_tma(s)]
    assert tma == tma_schedules(convnext) and len(tma) >= 8
    assert all("_TMA1_" in s.key() and "SPLIT_K" not in dict(s.params) for s in tma)
    assert [la.name for la in launches(convnext, tma[0])] == ["gemm_tma_kernel"]

    refusals = {
        "fp16 and bf16": linear(4096, 384, 1536, "float32"),
        "16 bytes": linear(4096, 36, 96),  # 72-byte rows of x
        "unit-stride": GemmSpec.mm(
            TensorMeta((64, 64), (128, 2), "float16"), TensorMeta.contiguous((64, 64), "float16")
        ),
        "32 bits": GemmSpec.mm(
            TensorMeta.contiguous((2**20, 4096), "float16"), TensorMeta((4096, 256), (1, 4096), "float16")
        ),
    }
    for words, spec in refusals.items():
        reason = tma_problem(spec)
        assert reason is not None and words in reason, (words, reason)
        assert not any(is_tma(s) for s in schedules(spec, 90))
        with pytest.raises(ValueError, match=words):
            launches(spec, _tma(64, 64, 64))
    with pytest.raises(ValueError, match="split"):
        launches(convnext, Schedule.make(4, 3, **dict(_tma(64, 64, 64).params), SPLIT_K=2))


@pytest.mark.timeout(900)
def test_tma_kernel_compiles_for_sm90_and_sm80() -> None:
    """Both operand orders, bias and a chain, fp16 and bf16: every launch compiles for both archs. On sm_90 the
    tiles are TMA copies from two descriptors made on the device (global scratch, 128 bytes each); on sm_80 the
    same kernel loads them without TMA and needs no scratch."""
    from cuda_triton.kernel.aot import compile_launches
    from op_tensors import assert_compiles_for_sm80_and_sm90, distinct_kernels

    x, wt = TensorMeta.contiguous((100352, 384), "float16"), TensorMeta((384, 1536), (1, 384), "float16")
    linear = GemmSpec.addmm(TensorMeta.contiguous((1536,), "float16"), x, wt)
    transposed = GemmSpec.bmm(
        TensorMeta((4, 197, 64), (12800, 1, 200), "bfloat16"), TensorMeta.contiguous((4, 64, 96), "bfloat16")
    )
    chain, _ = _case("bf16", "gelu_scale_residual", *EPILOGUE_SHAPES["linear"])
    persistent = [s for s in tma_schedules(linear) if is_persistent(s)]
    todo = [launches(linear, s)[0] for s in tma_schedules(linear)[:3] + persistent[:2]]
    todo += [
        launches(transposed, tma_schedules(transposed)[0])[0],
        launches(chain, tma_schedules(chain)[0])[0],
    ]
    kernels = distinct_kernels(todo)
    assert len(kernels) == 7 and {la.name for la in kernels} == {"gemm_tma_kernel"}
    assert_compiles_for_sm80_and_sm90(kernels)
    for arch, compiled in ((90, compile_launches(kernels[:1], 90)), (80, compile_launches(kernels[:1], 80))):
        (ck,) = compiled
        if arch == 90:
            assert (
                ck.global_scratch_size == 2 * 128 and "cp.async.bulk.tensor" in ck.ptx and "wgmma" in ck.ptx
            )
        else:
            assert ck.global_scratch_size == 0 and "cp.async.bulk.tensor" not in ck.ptx
