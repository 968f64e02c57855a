"""The kernel call of an elementwise chain: `launches(spec, schedule)` -> [KernelLaunch] (kernels.py).

Tensor roles: the spec's output role ("out") and each input's role ("in0", "in1", ...; glu's two halves both
bind "in0" at different offsets). Runtime scalars: offsets, strides and sizes over the merged dims, so one
compiled kernel serves every shape with the same chain, dtypes and stride pattern.
"""

from __future__ import annotations

from ...kernel.launch import TRITON_PTR_DTYPE, KernelLaunch, ScalarArg, Schedule, TensorArg, cdiv
from ..indexing import MAX_DIMS, pad_dims, stride_pattern
from ..tensor_meta import max_offset, needs_int64
from .kernels import elementwise_kernel, heuristic_schedule
from .program import MAX_INPUTS
from .spec import ElementwiseSpec, merged_dims, supports


def launches(spec: ElementwiseSpec, schedule: Schedule | None = None) -> list[KernelLaunch]:
    """The one launch computing ``spec`` (none for an empty output). Raises ValueError when not supported."""
    support = supports(spec)
    if not support:
        raise ValueError(f"elementwise chain {spec.describe()}: {support.reason}")
    numel = spec.out.numel
    if numel == 0:
        return []
    schedule = schedule or heuristic_schedule(numel)
    block = schedule["BLOCK"]
    merged, merged_strides = merged_dims(spec)
    rank = len(merged)
    sizes, strides = pad_dims(merged, merged_strides)
    offsets = [spec.out_offset, *(i.offset for i in spec.inputs)]
    int64 = needs_int64(
        numel + block, *(max_offset(sizes, st, off) for off, st in zip(offsets, strides, strict=True))
    )
    itype = "i64" if int64 else "i32"

    def scalars(prefix: str, offset: int, st: tuple[int, ...]) -> list[ScalarArg]:
        return [ScalarArg(f"{prefix}_off", itype, offset)] + [
            ScalarArg(f"{prefix}_s{d}", itype, s) for d, s in enumerate(st)
        ]

    args: list[TensorArg | ScalarArg] = [TensorArg(spec.out_role, TRITON_PTR_DTYPE[spec.out.dtype])]
    args += scalars("out", offsets[0], strides[0])
    args += [ScalarArg("numel", itype, numel)] + [ScalarArg(f"size{d}", itype, sizes[d]) for d in range(1, 5)]
    kinds = {"OUT_KINDS": stride_pattern(offsets[0], strides[0])}
    constexprs: list[tuple[str, object]] = []
    for k in range(MAX_INPUTS):
        name = f"in{k}"
        if k < len(spec.inputs):
            chain_input = spec.inputs[k]
            args.append(TensorArg(chain_input.role, TRITON_PTR_DTYPE[chain_input.view.dtype]))
            args += scalars(name, offsets[k + 1], strides[k + 1])
            kinds[f"IN{k}_KINDS"] = stride_pattern(offsets[k + 1], strides[k + 1])
        else:  # absent: a trailing group of constexprs (a None pointer)
            constexprs += [(f"{name}_ptr", None), (f"{name}_off", 0)]
            constexprs += [(f"{name}_s{d}", 0) for d in range(MAX_DIMS)]
            kinds[f"IN{k}_KINDS"] = stride_pattern(0, ())
    constexprs += [("PROGRAM", spec.program), ("RANK", rank), *kinds.items()]
    constexprs += [("BLOCK", block), ("INDEX_64", int64)]
    grid = (cdiv(numel, block), 1, 1)
    return [
        KernelLaunch(
            elementwise_kernel, tuple(args), tuple(constexprs), grid, schedule.num_warps, schedule.num_stages
        )
    ]
