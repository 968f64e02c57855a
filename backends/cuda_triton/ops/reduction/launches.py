"""The kernel call of a reduction: `launches(spec, schedule)` -> [KernelLaunch] (kernels.py).

Tensor roles: "in0" (the input) and "out", and with a split schedule the scratch tensors "workspace" and
"tile_counters" (schedules.scratch). Sizes and strides are runtime scalars over the merged kept and reduced dims,
so one compiled kernel serves every shape with the same op, dtypes, stride pattern and split.
"""

from __future__ import annotations

from ...kernel.launch import (
    TRITON_PTR_DTYPE,
    KernelLaunch,
    ScalarArg,
    Schedule,
    TensorArg,
    cdiv,
    split_k_args,
)
from ..indexing import pad_dims, stride_pattern
from ..tensor_meta import max_offset, needs_int64
from .kernels import OP_CODES, reduce_kernel
from .schedules import heuristic_schedule, split_of
from .spec import ReductionSpec, merged_dims, supports


def launches(spec: ReductionSpec, schedule: Schedule | None = None) -> list[KernelLaunch]:
    """The one launch computing ``spec`` (none for an empty output). Raises ValueError when not supported."""
    support = supports(spec)
    if not support:
        raise ValueError(support.reason)
    m, length = spec.out.numel, spec.length
    if m == 0:
        return []
    schedule = schedule or heuristic_schedule(spec)
    split = split_of(schedule)
    kept, kept_strides, red, red_strides = merged_dims(spec)
    k_sizes, (x_k, out_k) = pad_dims(kept, kept_strides)
    r_sizes, (x_r,) = pad_dims(red, [red_strides])
    int64 = needs_int64(
        m + schedule["BLOCK_K"],
        length + schedule["BLOCK_R"],
        max_offset(spec.x.sizes, spec.x.strides),
        split * m,  # the workspace's [SPLIT, M] offsets
    )
    itype = "i64" if int64 else "i32"

    def ints(prefix: str, values: tuple[int, ...], first: int = 0) -> list[ScalarArg]:
        return [ScalarArg(f"{prefix}{d}", itype, v) for d, v in enumerate(values) if d >= first]

    out_dtype = TRITON_PTR_DTYPE[spec.out.dtype]
    args = [
        TensorArg("in0", TRITON_PTR_DTYPE[spec.x.dtype]),
        TensorArg("out", out_dtype),
        *split_k_args(split, TensorArg("out", out_dtype)),
    ]
    args += [ScalarArg("M", itype, m), ScalarArg("L", itype, length)]
    args += ints("ksize", k_sizes, 1) + ints("x_k", x_k) + ints("out_k", out_k)
    args += (
        ints("rsize", r_sizes, 1)
        + ints("x_r", x_r)
        + [ScalarArg("divisor", "fp32", float(length))]  # a mean of nothing is 0 / 0: NaN, as ATen's
    )
    constexprs = (
        ("OP", OP_CODES[spec.op]),
        ("K_RANK", len(kept)),
        ("R_RANK", len(red)),
        ("X_K_KINDS", stride_pattern(0, x_k)),
        ("OUT_K_KINDS", stride_pattern(0, out_k)),
        ("X_R_KINDS", stride_pattern(0, x_r)),
        ("BLOCK_K", schedule["BLOCK_K"]),
        ("BLOCK_R", schedule["BLOCK_R"]),
        ("SPLIT", split),
        ("INDEX_64", int64),
    )
    grid = (cdiv(m, schedule["BLOCK_K"]), 1, split)
    return [
        KernelLaunch(reduce_kernel, tuple(args), constexprs, grid, schedule.num_warps, schedule.num_stages)
    ]
