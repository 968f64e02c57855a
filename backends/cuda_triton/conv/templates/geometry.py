"""Sizes, strides and the 3-D view of a convolution that every template computes with.

A 1-D convolution is a 3-D one with depth and height 1, a 2-D one has depth 1 (`pad3`, `Geometry`). Kernels read
dense tensors in one of two layouts, channels-last (N, D, H, W, C storage) or contiguous (N, C, D, H, W storage),
chosen by a constexpr, so the unit stride is known at compile time and loads vectorise; every other stride is
derived from the sizes inside the kernel (`dense_layout`, `dense_strides`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..problem import ConvProblem

# Largest int32: element offsets, grid sizes and loop bounds up to it fit 32-bit kernel arithmetic.
INT32_MAX = 2**31 - 1
# Streaming multiprocessors of the GPU the heuristics are tuned for (H200 / H100 SXM: 132).
NUM_SMS = 132

CHANNELS_LAST = "channels_last"
CONTIGUOUS = "contiguous"


def pad3(values: tuple[int, ...], fill: int) -> tuple[int, int, int]:
    """A per-spatial-dim tuple of 1-3 entries as (depth, height, width): missing leading dims get ``fill``."""
    v = (fill,) * (3 - len(values)) + tuple(values)
    return (v[0], v[1], v[2])


def next_pow2(x: int) -> int:
    """The smallest power of two >= x (1 for x <= 1)."""
    return 1 if x <= 1 else 1 << (x - 1).bit_length()


def fit_block(block: int, extent: int) -> int:
    """Shrink a block to the extent it tiles (power of two, at least 16 for tl.dot)."""
    return max(16, min(block, next_pow2(extent)))


def dense_strides(sizes: tuple[int, ...], channels_last: bool) -> tuple[int, ...]:
    """Element strides of a dense batched (N, C, *spatial) tensor, channels-last (C fastest, then the spatial
    dims from last to first, then N) or contiguous (row-major)."""
    rank = len(sizes)
    order = (
        [1, *range(rank - 1, 1, -1), 0] if channels_last else list(range(rank - 1, -1, -1))
    )  # fastest first
    strides = [0] * rank
    running = 1
    for d in order:
        strides[d] = running
        running *= sizes[d]
    return tuple(strides)


def _dense_in(sizes: tuple[int, ...], strides: tuple[int, ...], layout: str) -> bool:
    """Whether the tensor is dense in ``layout``; a size-1 dim's stride is never used, so it may be anything."""
    want = dense_strides(sizes, layout == CHANNELS_LAST)
    return all(s == w or n == 1 for s, w, n in zip(strides, want, sizes, strict=True))


def is_dense(sizes: tuple[int, ...], strides: tuple[int, ...]) -> bool:
    """Whether the tensor is dense channels-last or dense contiguous (what every template reads and writes)."""
    return _dense_in(sizes, strides, CHANNELS_LAST) or _dense_in(sizes, strides, CONTIGUOUS)


def dense_layout(sizes: tuple[int, ...], strides: tuple[int, ...], *, prefer: str) -> str | None:
    """CHANNELS_LAST or CONTIGUOUS when the tensor is dense in that layout, else None.

    A tensor with one channel or one pixel is dense in both layouts (the strides of its size-1 dims are never
    used); then the answer is ``prefer``. Either reading is correct there, but it picks the kernel variant and the
    prepared-weight layout, so each template family passes the one it has always taken.
    """
    if prefer not in (CHANNELS_LAST, CONTIGUOUS):
        raise ValueError(f"prefer must be {CHANNELS_LAST!r} or {CONTIGUOUS!r}, not {prefer!r}")
    other = CONTIGUOUS if prefer == CHANNELS_LAST else CHANNELS_LAST
    for layout in (prefer, other):
        if _dense_in(sizes, strides, layout):
            return layout
    return None


def dense_sample_problems(problem: ConvProblem) -> str | None:
    """Why the direct kernels (depthwise, transposed) cannot address ``problem``'s tensors, or None: both must be
    dense in one of the two layouts, and a sample's offsets must fit 32 bits."""
    if not is_dense(problem.input_size, problem.input_stride):
        return "the input is neither dense channels-last nor dense contiguous"
    if not is_dense(problem.output_size, problem.output_stride):
        return "the output layout is neither dense channels-last nor dense contiguous"
    if math.prod(problem.input_size[1:]) > INT32_MAX or math.prod(problem.output_size[1:]) > INT32_MAX:
        return "a sample has 2^31 elements or more (32-bit in-sample offsets)"
    return None


def needs_int64(problem: ConvProblem) -> bool:
    """Whether any tensor's element offsets can exceed int32 (then kernels index in 64 bits)."""
    sizes = (problem.input_size, problem.weight_size, problem.output_size)
    return any(math.prod(s) > INT32_MAX for s in sizes)


@dataclass(frozen=True)
class Geometry:
    """The problem as the GEMM-shaped 3-D kernels see it (sizes left-padded with 1, padding-before only).

    A tensor dense in both layouts counts as channels-last here (`dense_layout`): the layout these kernels read
    best.
    """

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
            in_cl=dense_layout(problem.input_size, problem.input_stride, prefer=CHANNELS_LAST)
            == CHANNELS_LAST,
            out_cl=dense_layout(problem.output_size, problem.output_stride, prefer=CHANNELS_LAST)
            == CHANNELS_LAST,
            int64=needs_int64(problem),
        )
