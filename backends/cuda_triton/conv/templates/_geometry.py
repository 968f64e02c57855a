"""Shared helpers of the GEMM-shaped templates: 1-D/2-D/3-D problems seen as one 3-D geometry.

A 1-D convolution is a 3-D one with depth and height 1, a 2-D one has depth 1. Kernels read dense tensors in
one of two layouts, channels-last (N, D, H, W, C storage) or contiguous (N, C, D, H, W storage), chosen by a
constexpr, so the unit stride is known at compile time and loads vectorise; every other stride is derived from
the sizes inside the kernel.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..problem import ConvProblem

INT32_LIMIT = 2**31 - 1
# Dtypes the GEMM-shaped kernels accept (fp64 has no tensor-core path worth having).
GEMM_DTYPES = ("float16", "bfloat16", "float32")
# Streaming multiprocessors of the GPU the heuristics are tuned for (H200 / H100 SXM: 132).
NUM_SMS = 132


def pad3(values: tuple[int, ...], fill: int) -> tuple[int, int, int]:
    """Left-pad a per-spatial-dim tuple to 3 entries (depth, height, width)."""
    v = (fill,) * (3 - len(values)) + tuple(values)
    return (v[0], v[1], v[2])


def dense_layout(sizes: tuple[int, ...], strides: tuple[int, ...]) -> str | None:
    """'channels_last' or 'contiguous' when the tensor is dense in that order, else None.

    Dims of size 1 may carry any stride (their stride is never used), so a tensor can be both; channels-last
    wins then (it is the layout kernels read best).
    """
    rank = len(sizes)
    orders = {
        "channels_last": [0, *range(2, rank), 1],
        "contiguous": list(range(rank)),
    }
    for name, order in orders.items():
        expected = 1
        ok = True
        for d in reversed(order):
            if sizes[d] != 1 and strides[d] != expected:
                ok = False
                break
            expected *= sizes[d]
        if ok:
            return name
    return None


def next_pow2(x: int) -> int:
    return 1 if x <= 1 else 1 << (x - 1).bit_length()


def fit_block(block: int, extent: int) -> int:
    """Shrink a block to the extent it tiles (power of two, at least 16 for tl.dot)."""
    return max(16, min(block, next_pow2(extent)))


@dataclass(frozen=True)
class Geometry:
    """The problem as the 3-D kernels see it (sizes left-padded with 1, padding-before only)."""

    batch: int
    cin: int
    cout: int
    groups: int
    spatial: tuple[int, int, int]
    out_spatial: tuple[int, int, int]
    kernel: tuple[int, int, int]
    stride: tuple[int, int, int]
    pad: tuple[int, int, int]
    dilation: tuple[int, int, int]
    in_cl: bool
    out_cl: bool
    int64: bool

    @property
    def taps(self) -> int:
        return math.prod(self.kernel)

    @property
    def cin_g(self) -> int:
        return self.cin // self.groups

    @property
    def cout_g(self) -> int:
        return self.cout // self.groups

    @property
    def m(self) -> int:
        return self.batch * math.prod(self.out_spatial)

    @staticmethod
    def of(problem: ConvProblem) -> Geometry:
        p = problem.params
        return Geometry(
            batch=problem.batch,
            cin=problem.in_channels,
            cout=problem.out_channels,
            groups=p.groups,
            spatial=pad3(problem.in_spatial, 1),
            out_spatial=pad3(problem.out_spatial, 1),
            kernel=pad3(problem.kernel, 1),
            stride=pad3(p.stride, 1),
            pad=pad3(p.padding_before, 0),
            dilation=pad3(p.dilation, 1),
            in_cl=dense_layout(problem.input_size, problem.input_stride) == "channels_last",
            out_cl=dense_layout(problem.output_size, problem.output_stride) == "channels_last",
            int64=needs_int64(problem),
        )


def needs_int64(problem: ConvProblem) -> bool:
    """Whether any tensor's element offsets can exceed int32 (then kernels index in 64 bits)."""
    sizes = (problem.input_size, problem.weight_size, problem.output_size)
    return any(math.prod(s) > INT32_LIMIT for s in sizes)


def common_support_problems(problem: ConvProblem) -> str | None:
    """The reasons shared by every GEMM-shaped forward template, or None when the problem passes them."""
    if problem.transposed:
        return "transposed convolutions are not handled by this template"
    if problem.dtype not in GEMM_DTYPES:
        return f"dtype {problem.dtype} is not supported (only float16, bfloat16, float32)"
    if not 1 <= problem.spatial_dims <= 3:
        return f"{problem.spatial_dims}-D convolutions are not supported"
    if problem.batch == 0 or problem.in_channels == 0 or problem.out_channels == 0:
        return "empty tensors are not supported"
    if any(s <= 0 for s in problem.out_spatial):
        return "the output is empty"
    if dense_layout(problem.input_size, problem.input_stride) is None:
        return "the input is neither dense contiguous nor dense channels-last"
    if dense_layout(problem.output_size, problem.output_stride) is None:
        return "the output layout is neither dense contiguous nor dense channels-last"
    if any(v > INT32_LIMIT for v in (*problem.input_size, *problem.output_size)):
        return "a single dimension exceeds 2^31"
    return None


def tma_tap_problems(problem: ConvProblem, strided: bool = False) -> str | None:
    """The reasons shared by the TMA-fed templates (implicit_gemm_tma, implicit_gemm_box), or None: with stride 1,
    one group and no negative padding every tap's A tile is one rectangle of the input, and a TMA row is a
    whole number of 16-byte units. ``strided``: the caller reads strided taps itself (the box template's view)."""
    p = problem.params
    if not strided and any(s != 1 for s in p.stride):
        return "only stride 1 (a tap's input pixels must be one TMA rectangle)"
    if p.groups != 1:
        return "only groups == 1"
    if any(v < 0 for v in (*p.padding_before, *p.padding_after)):
        return "negative padding"
    if problem.in_channels * problem.element_size % 16:
        return "a TMA row must be a multiple of 16 bytes (input channels)"
    return None


def dot_precision(problem: ConvProblem) -> str:
    """``tl.dot`` input precision: TF32 for fp32 when allowed (PyTorch's conv default), else exact fp32."""
    if problem.dtype == "float32" and not problem.allow_tf32:
        return "ieee"
    return "tf32"


def weight_k_major(problem: ConvProblem) -> bool:
    """Whether the prepared weight matrix is stored K-major ([C_out, K]) instead of [K, C_out].

    Hopper's TF32 wgmma reads both operands K-major from shared memory; an N-major weight tile makes Triton
    transpose it through shared memory (or fall back to mma.sync) on every K step, which ran fp32 convs at a
    fifth of cuDNN's speed on the H200. 16-bit wgmma takes either order; those paths keep [K, C_out], the
    layout the fp16/bf16 heuristics were measured with.
    """
    return problem.dtype == "float32"


def dtype_bytes(problem: ConvProblem) -> int:
    return problem.element_size
