"""`UpsampleSpec`: nearest (1-3 spatial dims), nearest-exact (1-3) and bilinear (2-D) upsampling.

Source indices follow ATen's CPU formulas, computed in fp32 as ATen computes them (docs/data_movement.md):

* the scale of a dim is ``1 / scale_factor`` when the op was given scale factors, else ``input / output``;
* nearest: ``min(floor(o * scale), in - 1)``; in 2-D (``upsample_nearest2d``) an output as long as the input
  copies it and one twice as long takes ``o // 2``, whatever the scale factor says (special cases ATen's CPU
  kernel has in 2-D; its CUDA kernel has none, so the two differ when a scale factor other than 1 or 2 gives
  such an output length). In 3-D ATen's CPU kernel is itself inconsistent: its vectorised channels-last path
  (4 or more channels) has the 2-D special cases, its other paths do not; the kernels here follow the latter,
  which agree with CUDA;
* nearest-exact: ``min(floor((o + 0.5) * scale), in - 1)``;
* bilinear: the source ``real = ratio * o`` with align_corners (ratio ``(in - 1) / (out - 1)``, 0 for one
  output), else ``max(ratio * (o + 0.5) - 0.5, 0)`` with ratio the scale; it blends input ``floor(real)``
  (clamped to the last index) and the next one (the same at the edge) with weight ``real - floor(real)``. An
  output as long as the input copies it.

The kernels take the per-dim scales as fp32 arguments, prepared here so that these special cases need no code.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from ...kernel.launch import Support
from ..tensor_meta import TensorMeta
from .shape import upsample_out_shape_and_stride
from .spec import _common_support

MODES = ("nearest", "nearest_exact", "bilinear")


def f32(x: float) -> float:
    """``x`` rounded to the nearest fp32 value."""
    return struct.unpack("f", struct.pack("f", x))[0]


def _scale(in_size: int, out_size: int, scale_factor: float | None) -> float:
    """ATen's ``compute_scales_value<float>``: 1 / scale_factor when one is given (and positive), else in / out."""
    if scale_factor is not None and scale_factor > 0:
        return f32(1.0 / scale_factor)
    return f32(f32(in_size) / f32(out_size))


@dataclass(frozen=True)
class UpsampleSpec:
    """``mode`` is one of MODES; ``scales`` holds each spatial dim's scale factor as the op got it (None: the op
    was given output sizes)."""

    mode: str
    input: TensorMeta
    output_size: tuple[int, ...]
    scales: tuple[float | None, ...]
    align_corners: bool = False
    out_strides: tuple[int, ...] | None = None

    @staticmethod
    def of(
        mode: str,
        x: TensorMeta,
        output_size: list[int] | None,
        scale_factors: list[float] | None,
        align_corners: bool = False,
    ) -> UpsampleSpec:
        """From an ``upsample_*.vec`` node: exactly one of output_size and scale_factors is given."""
        op = f"upsample_{mode}"
        if mode not in MODES:
            raise ValueError(f"{op}: unknown mode (expected one of {MODES})")
        spatial = x.rank - 2
        if (output_size is None) == (scale_factors is None):
            raise ValueError(f"{op}: give exactly one of output_size and scale_factors")
        if output_size is not None:
            if len(output_size) != spatial:
                raise ValueError(f"{op}: output_size {list(output_size)} must have {spatial} entries")
            return UpsampleSpec(
                mode, x, tuple(int(s) for s in output_size), (None,) * spatial, bool(align_corners)
            )
        if len(scale_factors) != spatial:
            raise ValueError(f"{op}: scale_factors {list(scale_factors)} must have {spatial} entries")
        # ATen: output = floor(input * scale_factor), in double precision.
        sizes = tuple(int(size * float(s)) for size, s in zip(x.sizes[2:], scale_factors, strict=True))
        return UpsampleSpec(mode, x, sizes, tuple(float(s) for s in scale_factors), bool(align_corners))

    @property
    def name(self) -> str:
        prefix = "_upsample_nearest_exact" if self.mode == "nearest_exact" else f"upsample_{self.mode}"
        return f"{prefix}{self.spatial}d"

    @property
    def spatial(self) -> int:
        return len(self.output_size)

    def outputs(self) -> list[TensorMeta]:
        sizes, strides = upsample_out_shape_and_stride(
            list(self.input.sizes), list(self.input.strides), list(self.output_size)
        )
        return [TensorMeta(tuple(sizes), tuple(self.out_strides or strides), self.input.dtype)]

    def kernel_scales(self) -> tuple[float, ...]:
        """The fp32 per-dim factor the kernel multiplies output indices by (module docstring)."""
        out = []
        for size, osize, factor in zip(self.input.sizes[2:], self.output_size, self.scales, strict=True):
            if self.mode == "nearest" and self.spatial == 2:
                if osize == size:
                    out.append(1.0)
                elif osize == 2 * size:
                    out.append(0.5)
                else:
                    out.append(_scale(size, osize, factor))
            elif self.mode in ("nearest", "nearest_exact"):
                out.append(_scale(size, osize, factor))
            elif osize == size:
                out.append(1.0)
            elif self.align_corners:
                out.append(f32(f32(size - 1) / f32(osize - 1)) if osize > 1 else 0.0)
            else:
                out.append(_scale(size, osize, factor))
        return tuple(out)

    def supports(self) -> Support:
        name = self.name
        if not 1 <= self.spatial <= 3 or self.input.rank != self.spatial + 2:
            return Support.no(f"{name}: the input must be (N, C, *spatial) with 1-3 spatial dims")
        if self.mode == "bilinear" and self.spatial != 2:
            return Support.no(f"{name}: linear interpolation is supported in 2-D only (upsample_bilinear2d)")
        if any(s < 1 for s in self.output_size):
            return Support.no(f"{name}: output_size {list(self.output_size)} must be positive")
        return _common_support(name, [self.input], self.outputs())
