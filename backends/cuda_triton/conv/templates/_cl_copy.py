"""A channels-last copy of a contiguous input, for the implicit GEMM (schedules with CL_COPY=1).

An NCHW input feeds the implicit GEMM badly when the reduction is long: an A tile is BLOCK_K channel rows of a
few pixels each, far apart in memory. cuDNN converts such inputs to NHWC first; so does a CL_COPY schedule: a
first launch transposes the input [N, C, P] (P = D*H*W) into the scratch tensor "input_cl" [N, P, C], and the
conv kernel then reads that as a channels-last input. It costs one read and one write of the input, which a
compute-heavy layer repays many times; the tuner decides where.

With F16_MMA=2 (fp32 on fp16 tensor cores, _f16_mma.py) the same pass also scales and rounds the input to fp16:
it writes the scratch "input_f16" instead, in channels-last order (SCALE_F16).

``to_channels_last_kernel`` arguments (PTX order): x, y, amax pointers (amax: the input's partial maxima when
SCALE_F16, else an unused pointer), int32 P; constexprs C, SCALE_F16, BLOCK_P, BLOCK_C.
Grid: (cdiv(P, BLOCK_P), cdiv(C, BLOCK_C), N).
"""

from __future__ import annotations

import math

import triton
import triton.language as tl

from ...kernel.launch import KernelLaunch, ScalarArg, ScratchTensor, TensorArg, cdiv
from ..problem import ConvProblem
from ._f16_mma import input_scales

_BLOCK_P, _BLOCK_C, _WARPS = 64, 64, 4


@triton.jit
def to_channels_last_kernel(
    x_ptr, y_ptr, amax_ptr, P,
    C: tl.constexpr, SCALE_F16: tl.constexpr, BLOCK_P: tl.constexpr, BLOCK_C: tl.constexpr,
):  # fmt: skip
    """[N, C, P] -> [N, P, C]: loads run along P, stores along C (Triton stages the transpose in shared memory)."""
    offs_p = tl.program_id(0) * BLOCK_P + tl.arange(0, BLOCK_P)
    offs_c = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)
    n = tl.program_id(2)
    ok = (offs_c[:, None] < C) & (offs_p[None, :] < P)
    x = tl.load(x_ptr + n * C * P + offs_c[:, None] * P + offs_p[None, :], mask=ok)
    if SCALE_F16:
        scale, _ = input_scales(amax_ptr)
        x = (x * scale).to(tl.float16)
    tl.store(y_ptr + n * P * C + offs_p[None, :] * C + offs_c[:, None], x, mask=ok)


def can_copy(problem: ConvProblem, int64: bool) -> bool:
    """Whether a CL_COPY schedule may be offered: a batched-dense contiguous input, 32-bit offsets, a grid z of
    at most 65535 images."""
    return not int64 and problem.batch <= 65535


def input_cl(problem: ConvProblem) -> ScratchTensor:
    p = math.prod(problem.in_spatial)
    return ScratchTensor("input_cl", problem.dtype, (problem.batch, p, problem.in_channels))


def copy_launch(problem: ConvProblem, scale_f16: bool = False) -> KernelLaunch:
    """The copy into "input_cl", or with ``scale_f16`` into "input_f16" (after `_f16_mma.amax_launch`)."""
    dt = problem.ptr_dtype
    p = math.prod(problem.in_spatial)
    args = (
        TensorArg("input", dt),
        TensorArg("input_f16", "fp16") if scale_f16 else TensorArg("input_cl", dt),
        TensorArg("amax", "fp32") if scale_f16 else TensorArg("input", dt),
        ScalarArg("P", "i32", p),
    )
    constexprs = (
        ("C", problem.in_channels),
        ("SCALE_F16", scale_f16),
        ("BLOCK_P", _BLOCK_P),
        ("BLOCK_C", _BLOCK_C),
    )
    grid = (cdiv(p, _BLOCK_P), cdiv(problem.in_channels, _BLOCK_C), problem.batch)
    return KernelLaunch(to_channels_last_kernel, args, constexprs, grid, _WARPS, 1)
