"""A zero-padded channels-last copy of the input, for the TMA implicit GEMM (implicit_gemm_tma.py).

The TMA kernel reads its A tiles as rectangles of a 2-D matrix [N * DP * HP * WP, C]: the input padded by the
convolution's padding on every side, channels-last. A stride-1 convolution's tap (kd, kh, kw) is then one fixed
row offset in that matrix, so each A tile is a single TMA box and padding needs no mask. This launch builds the
matrix from an input in either layout: one read of the input and one write of the (slightly larger) copy.

``to_padded_channels_last_kernel`` arguments (PTX order): x, y pointers, int32 D, H, W, DP, HP, WP; constexprs
C, PD, PH, PW, IN_CL, BLOCK_P, BLOCK_C. Grid: (cdiv(DP * HP * WP, BLOCK_P), cdiv(C, BLOCK_C), N).
"""

from __future__ import annotations

import triton
import triton.language as tl

from ...kernel.launch import KernelLaunch, ScalarArg, ScratchTensor, TensorArg, cdiv
from ..problem import ConvProblem
from .geometry import Geometry

_BLOCK_P, _BLOCK_C, _WARPS = 64, 64, 4


@triton.jit
def to_padded_channels_last_kernel(
    x_ptr, y_ptr, D, H, W, DP, HP, WP,
    C: tl.constexpr, PD: tl.constexpr, PH: tl.constexpr, PW: tl.constexpr, IN_CL: tl.constexpr,
    BLOCK_P: tl.constexpr, BLOCK_C: tl.constexpr,
):  # fmt: skip
    """[N, C, D, H, W] (either layout) -> [N, DP, HP, WP, C] with zeros where a padded pixel has no source."""
    offs_p = tl.program_id(0) * BLOCK_P + tl.arange(0, BLOCK_P)  # padded pixels
    offs_c = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)
    n = tl.program_id(2)
    wi = offs_p % WP - PW
    hi = (offs_p // WP) % HP - PH
    di = offs_p // (WP * HP) - PD
    inside = (offs_p < DP * HP * WP) & (di >= 0) & (di < D) & (hi >= 0) & (hi < H) & (wi >= 0) & (wi < W)
    c_ok = offs_c < C
    src = (di * H + hi) * W + wi
    if IN_CL:
        x_ptrs = x_ptr + (n * D * H * W + src)[:, None] * C + offs_c[None, :]
    else:
        x_ptrs = x_ptr + n * C * D * H * W + offs_c[None, :] * (D * H * W) + src[:, None]
    x = tl.load(x_ptrs, mask=inside[:, None] & c_ok[None, :], other=0.0)
    y_ptrs = y_ptr + (n * DP * HP * WP + offs_p)[:, None] * C + offs_c[None, :]
    tl.store(y_ptrs, x, mask=(offs_p < DP * HP * WP)[:, None] & c_ok[None, :])


def padded_extent(g: Geometry) -> tuple[int, int, int]:
    """(DP, HP, WP): the input's spatial sizes with the convolution's padding before and after."""
    ext = []
    for size, out, k, dil, before in zip(g.spatial, g.out_spatial, g.kernel, g.dilation, g.pad, strict=True):
        # Stride 1: the last output reads padded position out - 1 + dil * (k - 1); keep every source pixel too.
        ext.append(max(before + size, out + dil * (k - 1)))
    return (ext[0], ext[1], ext[2])


def input_pad(problem: ConvProblem) -> ScratchTensor:
    g = Geometry.of(problem)
    dp, hp, wp = padded_extent(g)
    return ScratchTensor("input_pad", problem.dtype, (g.batch, dp * hp * wp, g.cin))


def pad_copy_launch(problem: ConvProblem) -> KernelLaunch:
    g = Geometry.of(problem)
    dp, hp, wp = padded_extent(g)
    dt = problem.ptr_dtype
    d, h, w = g.spatial
    args = (
        TensorArg("input", dt),
        TensorArg("input_pad", dt),
        *(
            ScalarArg(nm, "i32", v)
            for nm, v in (("D", d), ("H", h), ("W", w), ("DP", dp), ("HP", hp), ("WP", wp))
        ),
    )
    constexprs = (
        ("C", g.cin),
        ("PD", g.pad[0]),
        ("PH", g.pad[1]),
        ("PW", g.pad[2]),
        ("IN_CL", g.in_cl),
        ("BLOCK_P", _BLOCK_P),
        ("BLOCK_C", _BLOCK_C),
    )
    grid = (cdiv(dp * hp * wp, _BLOCK_P), cdiv(g.cin, _BLOCK_C), g.batch)
    return KernelLaunch(to_padded_channels_last_kernel, args, constexprs, grid, _WARPS, 1)
