"""TF32-precision fp32 convolutions on fp16 tensor cores, with exact power-of-two scaling (F16_MMA schedules).

fp16 and TF32 carry the same significand (10 stored bits and the implicit one) and round the same way (to
nearest; TF32's ``cvt.rna`` breaks exact ties away from zero, fp16's ``cvt.rn`` to even). They differ only in
range: fp16 has 5 exponent bits (normal numbers 2^-14 .. 65504), TF32 fp32's 8. Hopper's fp16 MMA runs at twice
the TF32 rate and reads operands of half the size, so an fp32 convolution that is allowed TF32 (PyTorch's
default) runs on fp16 tensor cores at TF32's precision once each operand is scaled by a power of two that puts
its largest magnitude in [2^14, 2^15):

* the weight is scaled once, when prepared (`prepare_f16_weight`): fp16 values, then a trailer of
  `WEIGHT_TRAILER` fp16 elements whose first holds the shift (an integer, exact in fp16);
* the input is scaled per call: a first launch (`amax_partial_kernel`) writes the largest finite |x| of each of
  `AMAX_PARTS` slices of the input to the scratch tensor "amax"; whoever reads the input reduces those partial
  maxima (`input_scales`) and multiplies by 2^shift before rounding to fp16: with F16_MMA=1 the conv kernel, on
  each A tile (fp32 tiles through registers: no extra memory); with F16_MMA=2 a second launch
  (`scale_to_f16_kernel`) that writes the whole input once as fp16 to the scratch "input_f16" (same layout), so
  the conv kernel is the 16-bit kernel (A tiles straight from shared memory) at the cost of one more pass;
* the fp32 accumulator is multiplied by 2^-shift_x * 2^-shift_w before the epilogue (exact: powers of two).

Products accumulate in fp32 as in a TF32 MMA. What the scaling cannot keep is TF32's range *within* one
tensor: elements smaller than 2^-29 of the tensor's largest magnitude become fp16 subnormals (relative
precision drops, absolute error stays below 2^-25 of the largest element) and below 2^-39 of it they flush to
zero; their share of any sum is bounded by that absolute size. Non-finite inputs are left out of the maximum (one
inf must not zero the other elements) and propagate through the MMA as they would in TF32.
An export turns them off with the compile spec ``tf32_on_fp16=0`` (`f16_mma_policy`, set around the schedule
choice by the preprocess step); ``CUDA_TRITON_F16_MMA=0`` takes them out of every space in the process (true
TF32 only).

``amax_partial_kernel`` arguments (PTX order): x, amax pointers, NUMEL, CHUNK (i32, or i64 for inputs of 2^31
elements or more); constexpr BLOCK. Grid: (AMAX_PARTS, 1, 1); program p reduces elements [p * CHUNK,
(p + 1) * CHUNK), an empty slice writes 0.

``scale_to_f16_kernel`` arguments (PTX order): x, amax, y pointers, NUMEL (i32 or i64); constexpr BLOCK.
Grid: (cdiv(NUMEL, BLOCK), 1, 1).
"""

from __future__ import annotations

import contextlib
import math
import os
from collections.abc import Iterator
from contextvars import ContextVar

import torch
import triton
import triton.language as tl

from ...kernel.launch import KernelLaunch, ScalarArg, Schedule, ScratchTensor, TensorArg, cdiv
from ..problem import ConvProblem

ENV_SWITCH = "CUDA_TRITON_F16_MMA"
AMAX_PARTS = tl.constexpr(256)  # partial maxima; the conv kernel reduces them all, so every slot is written
WEIGHT_TRAILER = 8  # fp16 elements after the prepared weight (16 bytes: keeps later data aligned)
# Largest magnitudes are scaled into [2^TOP_EXP, 2^(TOP_EXP+1)): below fp16's 65504 after rounding, as high as
# possible so small elements stay normal.
TOP_EXP = tl.constexpr(14)
MAX_SHIFT = tl.constexpr(126)  # |shift| <= 126: 2^shift and 2^-shift are both normal fp32 numbers
FP32_MAX = tl.constexpr(3.4028234663852886e38)
_AMAX_BLOCK, _AMAX_WARPS = 2048, 8
_SCALE_BLOCK, _SCALE_WARPS = 2048, 8


# The export's choice (compile spec tf32_on_fp16); the op's eager body runs with the default, on.
_POLICY: ContextVar[bool] = ContextVar("cuda_triton_f16_mma", default=True)


@contextlib.contextmanager
def f16_mma_policy(allowed: bool) -> Iterator[None]:
    """Within this block, F16_MMA schedules are offered only if ``allowed`` (and the environment allows them)."""
    token = _POLICY.set(bool(allowed))
    try:
        yield
    finally:
        _POLICY.reset(token)


def f16_mma_enabled() -> bool:
    """Whether F16_MMA schedules may be offered at all here: `f16_mma_policy` and ``CUDA_TRITON_F16_MMA``."""
    value = os.environ.get(ENV_SWITCH, "1")
    if value not in ("0", "1"):
        raise ValueError(f"{ENV_SWITCH}={value!r}: expected 0 or 1")
    return value == "1" and _POLICY.get()


def f16_mma_allowed(problem: ConvProblem) -> bool:
    """Whether F16_MMA schedules may be offered for ``problem``: fp32 with TF32 allowed, and `f16_mma_enabled`."""
    if problem.dtype != "float32" or not problem.allow_tf32:
        return False
    return f16_mma_enabled()


# ---- device side ---------------------------------------------------------------------------------------------
@triton.jit
def amax_partial_kernel(x_ptr, amax_ptr, NUMEL, CHUNK, BLOCK: tl.constexpr):
    """amax[p] = the largest finite |x| of elements [p * CHUNK, (p + 1) * CHUNK), 0 for an empty slice."""
    start = tl.program_id(0).to(tl.int64) * CHUNK
    end = tl.minimum(start + CHUNK, NUMEL)
    best = tl.zeros((BLOCK,), dtype=tl.float32)
    for off in range(start, end, BLOCK):
        idx = off + tl.arange(0, BLOCK)
        v = tl.abs(tl.load(x_ptr + idx, mask=idx < end, other=0.0))
        best = tl.maximum(best, tl.where(v <= FP32_MAX, v, 0.0))  # inf and NaN compare false
    tl.store(amax_ptr + tl.program_id(0), tl.max(best, axis=0))


@triton.jit
def pow2(k):
    """2^k as fp32 for an int32 |k| <= 126, built from its exponent bits (exact, unlike exp2)."""
    return ((k + 127) << 23).to(tl.float32, bitcast=True)


@triton.jit
def input_scales(amax_ptr):
    """(2^shift, 2^-shift) for the input: 2^shift * max|x| lies in [2^14, 2^15)."""
    amax = tl.max(tl.load(amax_ptr + tl.arange(0, AMAX_PARTS)), axis=0)
    exponent = ((amax.to(tl.int32, bitcast=True) >> 23) & 0xFF) - 127  # floor(log2(amax)); -127 for 0
    shift = tl.minimum(tl.maximum(0 - (exponent - TOP_EXP), 0 - MAX_SHIFT), MAX_SHIFT)  # tensor ops first
    return pow2(shift), pow2(-shift)


@triton.jit
def scale_to_f16_kernel(x_ptr, amax_ptr, y_ptr, NUMEL, BLOCK: tl.constexpr):
    """y = fp16(x * 2^shift), element for element (any dense layout: the copy keeps it)."""
    scale, _ = input_scales(amax_ptr)
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    ok = offs < NUMEL
    x = tl.load(x_ptr + offs, mask=ok)
    tl.store(y_ptr + offs, (x * scale).to(tl.float16), mask=ok)


@triton.jit
def weight_unscale(w_ptr, W_NUMEL: tl.constexpr):
    """2^-shift of a weight prepared by `prepare_f16_weight` (its shift sits right after the W_NUMEL values)."""
    shift = tl.load(w_ptr + W_NUMEL).to(tl.int32)
    return pow2(-shift)


# ---- host side -----------------------------------------------------------------------------------------------
# When a template's heuristic uses F16_MMA=2 (measured on an H200 over the public suite in fp32, docs/performance.md):
# the two extra passes read every input element twice and write it once as fp16, so the conv must do enough
# multiply-adds in all and per input element. Implicit GEMM: r18.l2's stride-2 3x3 (1.9e9, 289 per element) and 3x3s at batch 1 (1e8) ran
# slower with it, vgg / r18.l3 / deeplab (>= 3.7e9, >= 2300 per element) 1.2-1.6x faster.
MIN_MACS_PER_INPUT = 512
# The least multiply-adds in all for F16_MMA=2, by the kind of convolution (the ``min_macs`` of `f16_mma_pays`).
# Forward convs (implicit GEMM), from the sweep above: 2^30, between the losers (1e8) and the winners (3.7e9).
MIN_MACS_FORWARD = 2**30
# Transposed convs count the multiply-adds their phase GEMMs issue. They upsample (an input element feeds
# C_out/g * taps outputs: 512-1024 per element in the public suite) and their fp32 kernels were further behind
# cuDNN (0.77-0.83x) than their fp16 ones (~1.0x), so their cut is one power of two lower, to include
# gan.3x3s2op1 (6.0e8, 576 per element) with fcn.up4x4s2 (2.1e9, 1024) and unet3d.up2 (2.1e9, 512). Both cuts are
# estimates between those measured points, not fitted by a sweep of the threshold.
MIN_MACS_TRANSPOSED = 2**29


def uses_f16_mma(schedule: Schedule) -> int:
    """How a schedule runs fp32 on fp16 tensor cores: 0 not, 1 scaled in the kernel, 2 from the scaled fp16 copy."""
    return int(dict(schedule.params).get("F16_MMA", 0))


def f16_mma_pays(macs: int, input_numel: int, min_macs: int) -> bool:
    """Whether a conv of ``macs`` multiply-adds over ``input_numel`` input elements is heavy enough for
    F16_MMA=2 (``min_macs`` in all, `MIN_MACS_PER_INPUT` per input element)."""
    return macs >= min_macs and macs >= MIN_MACS_PER_INPUT * input_numel


def f16_block_k(bk: int, bm: int, bn: int, stages: int, mode: int, smem_bytes: int) -> int:
    """BLOCK_K of an F16_MMA tile (A fp32 for mode 1, fp16 for mode 2; B fp16), halved from ``bk`` until the
    pipeline's stages fit in ``smem_bytes``."""
    a_bytes = 4 if mode == 1 else 2
    while bk > 16 and (bm * bk * a_bytes + bk * bn * 2) * stages > smem_bytes:
        bk //= 2
    return bk


def f16_scratch(problem: ConvProblem, mode: int) -> list[ScratchTensor]:
    """The scratch an F16_MMA schedule needs: the partial maxima, and for mode 2 the fp16 copy."""
    if not mode:
        return []
    return [amax_scratch(), *([input_f16(problem)] if mode == 2 else [])]


def f16_input_launches(problem: ConvProblem, mode: int, copy_elsewhere: bool = False) -> list[KernelLaunch]:
    """The launches before the conv: the maximum pass, then (mode 2) the scaled fp16 copy, unless
    ``copy_elsewhere`` (a channels-last copy that scales as it copies)."""
    if not mode:
        return []
    return [amax_launch(problem), *([scale_launch(problem)] if mode == 2 and not copy_elsewhere else [])]


def weight_shift(weight: torch.Tensor) -> int:
    """The power of two that puts the weight's largest finite magnitude in [2^14, 2^15) (0 for an all-zero one)."""
    finite = weight[torch.isfinite(weight)].abs()
    amax = float(finite.max()) if finite.numel() else 0.0
    if amax == 0.0:
        return 0
    exponent = math.frexp(amax)[1] - 1  # amax in [2^exponent, 2^(exponent+1))
    return max(-int(MAX_SHIFT), min(int(MAX_SHIFT), int(TOP_EXP) - exponent))


def prepare_f16_weight(matrix: torch.Tensor) -> torch.Tensor:
    """A prepared fp32 weight matrix (any shape) -> 1-D fp16: its values times 2^shift, then the trailer."""
    shift = weight_shift(matrix)
    scaled = (matrix.to(torch.float32) * 2.0**shift).to(torch.float16).reshape(-1)
    trailer = scaled.new_zeros(WEIGHT_TRAILER)
    trailer[0] = shift
    return torch.cat([scaled, trailer])


def amax_scratch() -> ScratchTensor:
    return ScratchTensor("amax", "float32", (int(AMAX_PARTS),))


def input_f16(problem: ConvProblem) -> ScratchTensor:
    return ScratchTensor("input_f16", "float16", (math.prod(problem.input_size),))


def _index_type(numel: int, extra: int = 0) -> str:
    return "i64" if numel + extra >= 2**31 else "i32"


def scale_launch(problem: ConvProblem) -> KernelLaunch:
    """The launch that writes the scaled fp16 copy of the input ("input_f16"), after `amax_launch`."""
    numel = math.prod(problem.input_size)
    args = (
        TensorArg("input", problem.ptr_dtype),
        TensorArg("amax", "fp32"),
        TensorArg("input_f16", "fp16"),
        ScalarArg("NUMEL", _index_type(numel, _SCALE_BLOCK), numel),
    )
    grid = (cdiv(numel, _SCALE_BLOCK), 1, 1)
    return KernelLaunch(scale_to_f16_kernel, args, (("BLOCK", _SCALE_BLOCK),), grid, _SCALE_WARPS, 1)


def amax_launch(problem: ConvProblem) -> KernelLaunch:
    """The launch that fills the "amax" scratch from the input (a dense tensor: any layout, every element once)."""
    numel = math.prod(problem.input_size)
    chunk = cdiv(cdiv(numel, int(AMAX_PARTS)), _AMAX_BLOCK) * _AMAX_BLOCK
    index = _index_type(numel, chunk)
    args = (
        TensorArg("input", problem.ptr_dtype),
        TensorArg("amax", "fp32"),
        ScalarArg("NUMEL", index, numel),
        ScalarArg("CHUNK", index, chunk),
    )
    return KernelLaunch(
        amax_partial_kernel, args, (("BLOCK", _AMAX_BLOCK),), (int(AMAX_PARTS), 1, 1), _AMAX_WARPS, 1
    )


__all__ = [
    "AMAX_PARTS",
    "ENV_SWITCH",
    "WEIGHT_TRAILER",
    "MIN_MACS_FORWARD",
    "MIN_MACS_PER_INPUT",
    "MIN_MACS_TRANSPOSED",
    "amax_launch",
    "amax_partial_kernel",
    "amax_scratch",
    "f16_block_k",
    "f16_input_launches",
    "f16_mma_allowed",
    "f16_mma_pays",
    "f16_scratch",
    "f16_mma_enabled",
    "f16_mma_policy",
    "input_f16",
    "input_scales",
    "prepare_f16_weight",
    "scale_launch",
    "scale_to_f16_kernel",
    "uses_f16_mma",
    "weight_shift",
    "weight_unscale",
]
