"""`launches(spec, schedule)`: the pooling kernel call for one `PoolSpec`.

Tensor roles: "in0" (the input) and "out". Runtime arguments (PTX order): x, y pointers, then M, C, D, H, W, OD,
OH, OW and the input and output strides (N, C, D, H, W), int32 (int64 when an offset needs it). Missing leading
spatial dims are size 1; an unbatched input is a batch of one. Everything else is a constexpr.
"""

from __future__ import annotations

from ...kernel.launch import TRITON_PTR_DTYPE, KernelLaunch, ScalarArg, Schedule, TensorArg, cdiv
from ..tensor_meta import max_offset, needs_int64
from ..tiling import ncdhw
from .kernels import channels_unit, pool_kernel
from .shape import ADAPTIVE_AVG_POOL
from .spec import PoolSpec


def _pad3(values: tuple[int, ...], fill: int) -> tuple[int, ...]:
    return (fill,) * (3 - len(values)) + tuple(values)


def launches(spec: PoolSpec, schedule: Schedule) -> list[KernelLaunch]:
    support = spec.supports()
    if not support:
        raise ValueError(support.reason)
    out = spec.output()
    x_sizes, x_strides = ncdhw(spec.input.sizes, spec.input.strides, spec.spatial)
    y_sizes, y_strides = ncdhw(out.sizes, out.strides, spec.spatial)
    n, c = x_sizes[0], x_sizes[1]
    m = n * y_sizes[2] * y_sizes[3] * y_sizes[4]
    int64 = needs_int64(
        m * c,
        max_offset(spec.input.sizes, spec.input.strides) + 1,
        max_offset(out.sizes, out.strides) + 1,
    )
    index = "i64" if int64 else "i32"
    scalars = [("M", m), ("C", c)]
    scalars += list(zip(("D", "H", "W"), x_sizes[2:], strict=True))
    scalars += list(zip(("OD", "OH", "OW"), y_sizes[2:], strict=True))
    scalars += list(zip(("XSN", "XSC", "XSD", "XSH", "XSW"), x_strides, strict=True))
    scalars += list(zip(("YSN", "YSC", "YSD", "YSH", "YSW"), y_strides, strict=True))
    dt = TRITON_PTR_DTYPE[spec.dtype]
    args = (TensorArg("in0", dt), TensorArg("out", dt), *(ScalarArg(k, index, v) for k, v in scalars))

    adaptive = spec.kind == ADAPTIVE_AVG_POOL
    kernel = _pad3(spec.adaptive_windows() if adaptive else spec.kernel, 1)
    stride, padding, dilation = _pad3(spec.stride, 1), _pad3(spec.padding, 0), _pad3(spec.dilation, 1)
    block_p, block_c = schedule["BLOCK_P"], schedule["BLOCK_C"]
    constexprs = (
        ("KIND", spec.kind),
        *zip(("KD", "KH", "KW"), kernel, strict=True),
        *zip(("SD", "SH", "SW"), stride, strict=True),
        *zip(("PD", "PH", "PW"), padding, strict=True),
        *zip(("DD", "DH", "DW"), dilation, strict=True),
        ("COUNT_INCLUDE_PAD", spec.count_include_pad),
        ("DIVISOR", spec.divisor_override or 0),
        ("C_UNIT", channels_unit(spec)),
        ("INT64", int64),
        ("BLOCK_P", block_p),
        ("BLOCK_C", block_c),
    )
    grid = (cdiv(m, block_p), cdiv(c, block_c), 1)
    return [KernelLaunch(pool_kernel, args, constexprs, grid, schedule.num_warps, schedule.num_stages)]
