"""The kernel calls of the normalisation ops: `launches(spec, schedule)` -> [KernelLaunch] (kernels.py).

Tensor roles: "in0" (the input), "out", "weight" and "bias" (when given), "mean" and "var" (batch norm's running
statistics). Sizes and strides are runtime scalars over the merged dims, so one compiled kernel serves every
shape with the same op, dtypes and stride pattern.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from ...kernel.launch import TRITON_PTR_DTYPE, KernelLaunch, ScalarArg, Schedule, TensorArg, cdiv
from ..elementwise.kernels import heuristic_schedule as elementwise_schedule
from ..elementwise.kernels import schedules as elementwise_schedules
from ..indexing import pad_dims, stride_pattern
from ..tensor_meta import TensorMeta, max_offset, needs_int64
from .kernels import (
    CHUNK_STATS,
    NORMALIZE_CHUNK,
    WHOLE_ROWS,
    batch_norm_kernel,
    row_norm_kernel,
    row_schedule,
    row_schedules,
    softmax_kernel,
    split_chunk,
    split_scratch,
)
from .spec import (
    BatchNormSpec,
    GroupNormSpec,
    LayerNormSpec,
    NormSpec,
    RowView,
    SoftmaxSpec,
    batch_norm_dims,
    supports,
    view_of,
)

if TYPE_CHECKING:
    from ...kernel.launch import ScratchTensor


def _ptr(role: str, t: TensorMeta) -> TensorArg:
    return TensorArg(role, TRITON_PTR_DTYPE[t.dtype])


def _ints(prefix: str, values, itype: str, first: int = 0) -> list[ScalarArg]:
    return [ScalarArg(f"{prefix}{d}", itype, v) for d, v in enumerate(values) if d >= first]


def row_run(view: RowView) -> int:
    """How rows interleave in memory (`row_schedule`): 1 when consecutive rows are consecutive elements while a
    row's own elements are not; R when a row's last dim is not contiguous but an in-row dim of R contiguous
    elements is, and the next row starts right after it (R channels per group over a channels-last map); else 0.
    """
    if not view.x_kept or (view.x_red and view.x_red[-1] == 1):
        return 0
    step = view.x_kept[-1]
    if step == 1:
        return 1
    runs = [size for size, stride in zip(view.red, view.x_red, strict=True) if stride == 1]
    return step if runs and runs[0] == step else 0


def default_schedule(spec: NormSpec) -> Schedule:
    if isinstance(spec, BatchNormSpec):
        return elementwise_schedule(spec.out.numel)
    view = view_of(spec)
    return row_schedule(view.m, view.length, row_run(view), not isinstance(spec, SoftmaxSpec))


def schedules(spec: NormSpec) -> list[Schedule]:
    """The tuning space of ``spec``'s kernel, the default schedule first."""
    if isinstance(spec, BatchNormSpec):
        return elementwise_schedules(spec.out.numel)
    view = view_of(spec)
    return row_schedules(view.m, view.length, row_run(view), not isinstance(spec, SoftmaxSpec))


def _split(spec: NormSpec, schedule: Schedule) -> int:
    """The ways a layer or group norm schedule splits each row (1 for batch norm and softmax)."""
    return 1 if isinstance(spec, (BatchNormSpec, SoftmaxSpec)) else schedule["SPLIT"]


def scratch(spec: NormSpec, schedule: Schedule) -> list[ScratchTensor]:
    """A split row schedule's scratch tensors (`kernels.split_scratch`); none for other schedules."""
    if _split(spec, schedule) == 1:
        return []
    view = view_of(spec)
    return split_scratch(view.m, view.length, schedule)


def launches(spec: NormSpec, schedule: Schedule | None = None) -> list[KernelLaunch]:
    """The one launch computing ``spec`` (none for an empty output). Raises ValueError when not supported."""
    support = supports(spec)
    if not support:
        raise ValueError(support.reason)
    if spec.out.numel == 0:
        return []
    schedule = schedule or default_schedule(spec)
    if isinstance(spec, BatchNormSpec):
        return [_batch_norm_launch(spec, schedule)]
    return _row_launches(spec, schedule)


def _batch_norm_launch(spec: BatchNormSpec, schedule: Schedule) -> KernelLaunch:
    numel, block = spec.out.numel, schedule["BLOCK"]
    merged, (out_s, x_s, c_s) = batch_norm_dims(spec)
    sizes, (out_s, x_s, c_s) = pad_dims(merged, [out_s, x_s, c_s])
    int64 = needs_int64(numel + block, max_offset(spec.x.sizes, spec.x.strides), max_offset(sizes, out_s))
    itype = "i64" if int64 else "i32"
    args = [_ptr("out", spec.out), _ptr("in0", spec.x), _ptr("mean", spec.mean), _ptr("var", spec.var)]
    args += [_ptr("weight", spec.weight) if spec.weight else _ptr("mean", spec.mean)]
    args += [_ptr("bias", spec.bias) if spec.bias else _ptr("mean", spec.mean)]
    args += [ScalarArg("numel", itype, numel)] + _ints("size", sizes, itype, 1)
    args += _ints("out_s", out_s, itype) + _ints("x_s", x_s, itype) + [ScalarArg("eps", "fp32", spec.eps)]
    constexprs = (
        ("RANK", len(merged)),
        ("OUT_KINDS", stride_pattern(0, out_s)),
        ("X_KINDS", stride_pattern(0, x_s)),
        ("C_KINDS", stride_pattern(0, c_s)),
        ("HAS_WEIGHT", spec.weight is not None),
        ("HAS_BIAS", spec.bias is not None),
        ("EPILOGUE", spec.epilogue),
        ("BLOCK", block),
        ("INDEX_64", int64),
    )
    grid = (cdiv(numel, block), 1, 1)
    return KernelLaunch(
        batch_norm_kernel, tuple(args), constexprs, grid, schedule.num_warps, schedule.num_stages
    )


def _row_launches(
    spec: LayerNormSpec | GroupNormSpec | SoftmaxSpec, schedule: Schedule
) -> list[KernelLaunch]:
    view = view_of(spec)
    m, length = view.m, view.length
    block_k, block_r = schedule["BLOCK_K"], schedule["BLOCK_R"]
    split = _split(spec, schedule)
    k_sizes, (x_k, out_k) = pad_dims(view.kept, [view.x_kept, view.out_kept])
    r_sizes, (x_r, out_r) = pad_dims(view.red, [view.x_red, view.out_red])
    int64 = needs_int64(
        m + block_k, length + block_r, max_offset(spec.x.sizes, spec.x.strides), spec.out.numel
    )
    itype = "i64" if int64 else "i32"
    args: list[TensorArg | ScalarArg] = [_ptr("in0", spec.x), _ptr("out", spec.out)]
    chunk, chunks = split_chunk(length, schedule) if split > 1 else (length, 1)
    if not isinstance(spec, SoftmaxSpec):
        args += [_ptr("weight", spec.weight) if spec.weight else _ptr("in0", spec.x)]
        args += [_ptr("bias", spec.bias) if spec.bias else _ptr("in0", spec.x)]
        args += [TensorArg("partials", "fp32") if split > 1 else _ptr("in0", spec.x)]
        args += [ScalarArg("chunk", itype, chunk), ScalarArg("chunks", itype, chunks)]
    args += [ScalarArg("M", itype, m), ScalarArg("L", itype, length)]
    args += _ints("ksize", k_sizes, itype, 1) + _ints("x_k", x_k, itype) + _ints("out_k", out_k, itype)
    args += _ints("rsize", r_sizes, itype, 1) + _ints("x_r", x_r, itype) + _ints("out_r", out_r, itype)
    constexprs: list[tuple[str, object]] = [
        ("K_RANK", len(view.kept)),
        ("R_RANK", len(view.red)),
        ("X_K_KINDS", stride_pattern(0, x_k)),
        ("OUT_K_KINDS", stride_pattern(0, out_k)),
        ("X_R_KINDS", stride_pattern(0, x_r)),
        ("OUT_R_KINDS", stride_pattern(0, out_r)),
    ]
    if isinstance(spec, SoftmaxSpec):
        fn = softmax_kernel
        constexprs.append(("LOG", spec.log))
    else:
        fn = row_norm_kernel
        per_group = isinstance(spec, GroupNormSpec)
        groups = spec.groups if per_group else 1
        channels = spec.x.sizes[1] // groups if per_group else 1
        spatial = math.prod(spec.x.sizes[2:]) if per_group else 1
        args += [ScalarArg("groups", itype, groups), ScalarArg("group_channels", itype, channels),
                 ScalarArg("channel_stride", itype, spatial)]  # fmt: skip
        args += [ScalarArg("divisor", "fp32", float(max(length, 1))), ScalarArg("eps", "fp32", spec.eps)]
        constexprs += [("HAS_WEIGHT", spec.weight is not None), ("HAS_BIAS", spec.bias is not None),
                       ("PER_GROUP", per_group), ("EPILOGUE", spec.epilogue)]  # fmt: skip
    tiles = (("BLOCK_K", block_k), ("BLOCK_R", block_r), ("INDEX_64", int64))
    warps, stages = schedule.num_warps, schedule.num_stages
    if split > 1:
        return [
            KernelLaunch(
                fn,
                tuple(args),
                (*constexprs, ("PHASE", phase), ("ONE_TILE", False), *tiles),
                (cdiv(m, block_k), chunks, 1),
                warps,
                stages,
            )  # fmt: skip
            for phase in (CHUNK_STATS.value, NORMALIZE_CHUNK.value)
        ]
    if not isinstance(spec, SoftmaxSpec):
        constexprs.append(("PHASE", WHOLE_ROWS.value))
    constexprs += [("ONE_TILE", bool(schedule["ONE_TILE"])), *tiles]
    return [KernelLaunch(fn, tuple(args), tuple(constexprs), (cdiv(m, block_k), 1, 1), warps, stages)]
