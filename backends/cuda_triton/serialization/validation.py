"""Every check the C++ reader (runtime/blob/validation.cpp and the record kinds' checks) makes, in one place:
`validate` raises `BlobError` with the first problem. The writer runs it before writing, the Python reader after
reading, so a bad plan fails at export and both readers accept exactly the same blobs."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from .checks.elementwise import broadcasts_to
from .encoding import (
    DTYPES,
    ELEMENT_SIZE,
    MAX_ARCHS,
    MAX_ARENA_ALIGNMENT,
    MAX_COUNT,
    MAX_NAME,
    MAX_OPERANDS,
    MAX_PARAMS,
    MAX_SPAN,
    MIN_ARENA_ALIGNMENT,
    PARAM_TYPES,
    VIEW_ALIGNMENT,
    ascii_ok,
    check,
    check_dims,
    is_pow2,
    span_bytes,
    u32_ok,
)
from .records import ConstantRef, LaunchRecord, OpRecord, RecordContext, Scalar, ValueRef
from .records.base import NullPtr, check_steps
from .sections import MAX_CUBIN, VALUE_KINDS, is_cubin_key

if TYPE_CHECKING:
    from .blob import DelegateBlob

SCRATCH_LIMIT = 1 << 40  # bytes of Triton scratch one launch may ask for


def value_roots(blob: DelegateBlob) -> list[int]:
    """For each value, the input / output / intermediate / state value its bytes belong to (itself unless it is a
    view)."""
    roots: list[int] = []
    for v, vr in enumerate(blob.values):
        roots.append(roots[vr.index] if vr.kind == "view" else v)
    return roots


def op_uses(op: OpRecord) -> list[int]:
    """The values an op uses: its value inputs, its outputs and its launches' value arguments."""
    used = [x.value for x in op.operands() if isinstance(x, ValueRef)] + list(op.results())
    used += [a.value for lr in op.launches for a in lr.args if isinstance(a, ValueRef)]
    return used


def live_ranges(blob: DelegateBlob) -> dict[int, tuple[int, int]]:
    """Intermediate root -> (first op that uses it, last op that uses it); roots no op uses are absent."""
    roots = value_roots(blob)
    ranges: dict[int, tuple[int, int]] = {}
    for o, op in enumerate(blob.ops):
        for v in op_uses(op):
            r = roots[v]
            if blob.values[r].kind == "intermediate":
                first, _ = ranges.get(r, (o, o))
                ranges[r] = (first, o)
    return ranges


def overlaps_itself(sizes: list[int], strides: list[int]) -> bool:
    """Whether two elements share an address: sorted by stride, each dim of size > 1 must step past everything the
    smaller dims reach."""
    if any(s == 0 for s in sizes):
        return False
    reach = 0
    for stride, size in sorted((st, sz) for sz, st in zip(sizes, strides, strict=True) if sz > 1):
        if stride <= reach:
            return True
        reach += stride * (size - 1)
    return False


def validate(blob: DelegateBlob) -> None:
    """Raises `BlobError` with the first problem; see docs/blob_format.md for every rule."""
    _check_header(blob)
    _check_kernels(blob)
    _check_values(blob)
    _check_constants(blob)
    _check_ops(blob)
    _check_arena(blob)
    _check_state(blob)


def _check_header(blob: DelegateBlob) -> None:
    check(blob.flags == 0, "flags must be 0")
    check(ascii_ok(blob.triton_version), "triton_version must be printable ASCII")
    check(0 < len(blob.archs) <= MAX_ARCHS, "no target archs")
    check(len(set(blob.archs)) == len(blob.archs), f"duplicate archs {blob.archs}")
    check(all(u32_ok(a) for a in blob.archs), f"bad archs {blob.archs}")
    check(0 <= blob.num_inputs <= MAX_COUNT and 0 <= blob.num_outputs <= MAX_COUNT, "bad input/output counts")
    for name, table in (("kernels", blob.kernels), ("values", blob.values), ("constants", blob.constants),
                        ("ops", blob.ops)):  # fmt: skip
        check(len(table) <= MAX_COUNT, f"too many {name}")
    check(
        is_pow2(blob.arena_alignment) and MIN_ARENA_ALIGNMENT <= blob.arena_alignment <= MAX_ARENA_ALIGNMENT,
        f"arena alignment {blob.arena_alignment} is not a power of two in [16, 256]",
    )
    check(
        isinstance(blob.arena_size, int) and 0 <= blob.arena_size < MAX_SPAN, f"arena size {blob.arena_size}"
    )
    check(
        isinstance(blob.state_size, int) and 0 <= blob.state_size < MAX_SPAN,
        f"state buffer size {blob.state_size}",
    )


def _check_kernels(blob: DelegateBlob) -> None:
    for k, kr in enumerate(blob.kernels):
        w = f"kernel {k} ({kr.name})"
        check(ascii_ok(kr.name, allow_empty=False), f"{w}: name must be non-empty printable ASCII")
        check(kr.arch in blob.archs, f"{w}: arch {kr.arch} not among the blob's archs {blob.archs}")
        check(
            ascii_ok(kr.cubin_key) and is_cubin_key(kr.cubin_key, kr.arch),
            f"{w}: cubin key {kr.cubin_key!r} is not the content address cuda_triton/cubin/sm{kr.arch}/<40 hex>",
        )
        check(
            isinstance(kr.cubin_size, int) and 0 < kr.cubin_size < MAX_CUBIN,
            f"{w}: cubin size {kr.cubin_size}",
        )
        check(
            kr.cubin is None or len(kr.cubin) == kr.cubin_size,
            f"{w}: cubin has {0 if kr.cubin is None else len(kr.cubin)} bytes, the record says {kr.cubin_size}",
        )
        check(1 <= kr.num_warps <= 32, f"{w}: num_warps {kr.num_warps}")
        check(1 <= kr.num_ctas <= 16, f"{w}: num_ctas {kr.num_ctas}")
        for attr in ("shared", "global_scratch_size", "profile_scratch_size"):
            check(u32_ok(getattr(kr, attr)), f"{w}: bad {attr}")
        for attr in ("global_scratch_align", "profile_scratch_align"):
            v = getattr(kr, attr)
            check(u32_ok(v) and is_pow2(v), f"{w}: {attr} {v} not a power of two")
        check(len(kr.param_types) <= MAX_PARAMS, f"{w}: too many params")
        check(all(t in PARAM_TYPES for t in kr.param_types), f"{w}: bad param types {kr.param_types}")


def _check_values(blob: DelegateBlob) -> None:
    io_seen: set[tuple[str, int]] = set()
    spans: list[int] = []
    for v, vr in enumerate(blob.values):
        w = f"value {v}"
        check(vr.kind in VALUE_KINDS, f"{w}: bad kind {vr.kind!r}")
        check(vr.dtype in DTYPES, f"{w}: bad dtype {vr.dtype!r}")
        check_dims(w, vr.sizes, vr.strides)
        span = span_bytes(vr.dtype, vr.sizes, vr.strides)
        check(span < MAX_SPAN, f"{w}: span of {span} bytes is too large")
        spans.append(span)
        check(isinstance(vr.offset, int) and 0 <= vr.offset < (1 << 64), f"{w}: bad offset {vr.offset}")
        if vr.kind == "input":
            check(0 <= vr.index < blob.num_inputs, f"{w}: input index {vr.index} out of range")
        elif vr.kind == "output":
            check(0 <= vr.index < blob.num_outputs, f"{w}: output index {vr.index} out of range")
        elif vr.kind == "intermediate":
            check(vr.index == 0, f"{w}: intermediates have index 0")
            check(vr.offset % blob.arena_alignment == 0, f"{w}: arena offset {vr.offset} is not aligned")
            check(
                vr.offset + span <= blob.arena_size,
                f"{w}: bytes [{vr.offset}, {vr.offset + span}) outside the {blob.arena_size}-byte arena",
            )
        elif vr.kind == "state":
            check(vr.index == 0, f"{w}: state values have index 0")
            check(
                not overlaps_itself(vr.sizes, vr.strides)
                and span == math.prod(vr.sizes) * ELEMENT_SIZE[vr.dtype],
                f"{w}: a state value must be dense (sizes {vr.sizes}, strides {vr.strides})",
            )
            check(vr.offset % blob.arena_alignment == 0, f"{w}: state offset {vr.offset} is not aligned")
            check(
                vr.offset + span <= blob.state_size,
                f"{w}: bytes [{vr.offset}, {vr.offset + span}) outside the {blob.state_size}-byte state buffer",
            )
        else:
            check(0 <= vr.index < v, f"{w}: a view's base must be an earlier value, not {vr.index}")
            base = blob.values[vr.index]
            check(base.kind != "state", f"{w}: a view of state value {vr.index}")
            check(base.dtype == vr.dtype, f"{w}: a {vr.dtype} view of a {base.dtype} value")
            check(vr.offset % VIEW_ALIGNMENT == 0, f"{w}: view offset {vr.offset} is not a multiple of 16")
            check(
                vr.offset + span <= spans[vr.index],
                f"{w}: view bytes [{vr.offset}, {vr.offset + span}) outside its base's {spans[vr.index]}",
            )
        if vr.kind in ("input", "output"):
            check(vr.offset == 0, f"{w}: delegate inputs and outputs have offset 0")
            check((vr.kind, vr.index) not in io_seen, f"{w}: {vr.kind} {vr.index} described twice")
            io_seen.add((vr.kind, vr.index))
    for i in range(blob.num_outputs):
        check(("output", i) in io_seen, f"delegate output {i} has no value record")


def _check_constants(blob: DelegateBlob) -> None:
    for c, cr in enumerate(blob.constants):
        w = f"constant {c} ({cr.key})"
        check(ascii_ok(cr.key, allow_empty=False), f"{w}: key must be non-empty printable ASCII")
        check(cr.dtype in DTYPES, f"{w}: bad dtype {cr.dtype!r}")
        check_dims(w, cr.sizes, None)
        check(
            cr.nbytes == math.prod(cr.sizes) * ELEMENT_SIZE[cr.dtype],
            f"{w}: nbytes {cr.nbytes} != prod(sizes {cr.sizes}) * {ELEMENT_SIZE[cr.dtype]}",
        )
        check(isinstance(cr.sha256, bytes) and len(cr.sha256) == 32, f"{w}: sha256 must be 32 bytes")


def _check_ops(blob: DelegateBlob) -> None:
    roots = value_roots(blob)
    ctx = RecordContext(blob.values, blob.constants)
    produced = [vr.kind == "input" for vr in blob.values]  # by root
    for o, op in enumerate(blob.ops):
        check(isinstance(op, OpRecord), f"op {o}: {op!r} is not an op record")
        w = f"op {o} ({op.KIND_NAME}{' ' + op.name if op.name else ''})"
        check(ascii_ok(op.name, MAX_NAME), f"{w}: the name must be printable ASCII, at most {MAX_NAME} bytes")
        check(
            ascii_ok(op.template) and ascii_ok(op.schedule),
            f"{w}: template and schedule must be printable ASCII",
        )
        inputs, outputs, steps = op.operands(), op.results(), op.fused_steps()
        check(len(inputs) <= MAX_OPERANDS, f"{w}: too many inputs")
        check(1 <= len(outputs) <= MAX_OPERANDS, f"{w}: {len(outputs)} outputs")
        for x in inputs:
            if isinstance(x, ValueRef):
                check(0 <= x.value < len(blob.values), f"{w}: input value {x.value} out of range")
            elif isinstance(x, ConstantRef):
                check(0 <= x.constant < len(blob.constants), f"{w}: input constant {x.constant} out of range")
        check(all(u32_ok(v) and v < len(blob.values) for v in outputs), f"{w}: output value out of range")
        check(len(set(outputs)) == len(outputs), f"{w}: writes a value twice")
        _check_steps(w, op, steps)
        extras = op.extra_inputs()
        if steps or extras:
            check(len(outputs) == 1, f"{w}: fused steps need exactly one output")
        if op.FIXED_INPUTS:
            out_sizes = list(blob.values[outputs[0]].sizes)
            for x in extras:
                assert x is not None
                check(
                    broadcasts_to(ctx.sizes(x), out_sizes),
                    f"{w}: an epilogue input does not broadcast to {out_sizes}",
                )
        for x in inputs:
            if isinstance(x, ValueRef):
                check(blob.values[x.value].kind != "state", f"{w}: state value {x.value} as a record input")
                check(produced[roots[x.value]], f"{w}: reads value {x.value} before any op produces it")
        for v in outputs:
            vr = blob.values[v]
            check(vr.kind != "state", f"{w}: state value {v} as a record output")
            check(blob.values[roots[v]].kind != "input", f"{w}: writes (a view of) a delegate input")
            check(
                not overlaps_itself(vr.sizes, vr.strides), f"{w}: output value {v} has overlapping elements"
            )
        op.check(ctx, w)
        for li, lr in enumerate(op.launches):
            _check_launch(f"{w} launch {li}", lr, blob)
        for v in outputs:
            produced[roots[v]] = True
    for v, vr in enumerate(blob.values):
        check(vr.kind != "output" or produced[v], f"delegate output {vr.index} is never written")


def _check_steps(w: str, op: OpRecord, steps: list) -> None:
    check_steps(w, steps, len(op.extra_inputs()), op.HAS_RESULT)


def _check_launch(lw: str, lr: LaunchRecord, blob: DelegateBlob) -> None:
    check(
        sorted(lr.kernels) == sorted(blob.archs),
        f"{lw}: kernels for archs {sorted(lr.kernels)}, blob targets {sorted(blob.archs)}",
    )
    check(len(lr.grid) == 3 and all(u32_ok(g) and g >= 1 for g in lr.grid), f"{lw}: bad grid {lr.grid}")
    check(lr.grid[1] <= 65535 and lr.grid[2] <= 65535, f"{lw}: grid y/z above 65535: {lr.grid}")
    check(len(lr.args) <= MAX_PARAMS, f"{lw}: too many args")
    for arch, ki in lr.kernels.items():
        check(u32_ok(ki) and ki < len(blob.kernels), f"{lw}: kernel {ki} out of range")
        kr = blob.kernels[ki]
        check(kr.arch == arch, f"{lw}: kernel {ki} is for arch {kr.arch}, listed under {arch}")
        check(
            len(kr.param_types) == len(lr.args),
            f"{lw}: {len(lr.args)} args for kernel {kr.name} with {len(kr.param_types)} params",
        )
        check(lr.grid[0] * kr.num_ctas <= 0x7FFFFFFF, f"{lw}: grid x * num_ctas too large")
        ctas = lr.grid[0] * kr.num_ctas * lr.grid[1] * lr.grid[2]
        per_cta = max(kr.global_scratch_size, kr.profile_scratch_size)
        check(ctas * per_cta <= SCRATCH_LIMIT, f"{lw}: scratch of {per_cta} bytes for each of {ctas} CTAs")
        for ai, (t, a) in enumerate(zip(kr.param_types, lr.args, strict=True)):
            _check_arg(f"{lw} arg {ai}", t, a, blob)


def _check_arg(w: str, t: str, a: object, blob: DelegateBlob) -> None:
    if t == "ptr":
        check(isinstance(a, ValueRef | ConstantRef | NullPtr), f"{w}: pointer parameter given {a!r}")
        if isinstance(a, ValueRef):
            check(0 <= a.value < len(blob.values), f"{w}: value {a.value} out of range")
        if isinstance(a, ConstantRef):
            check(0 <= a.constant < len(blob.constants), f"{w}: constant {a.constant} out of range")
        return
    check(isinstance(a, Scalar) and a.type == t, f"{w}: {t} parameter given {a!r}")
    assert isinstance(a, Scalar)
    if t == "i32":
        check(isinstance(a.value, int) and -(1 << 31) <= a.value < (1 << 31), f"{w}: i32 out of range")
    elif t == "i64":
        check(isinstance(a.value, int) and -(1 << 63) <= a.value < (1 << 63), f"{w}: i64 out of range")
    else:
        check(isinstance(a.value, int | float), f"{w}: fp32 value {a.value!r}")


def _check_arena(blob: DelegateBlob) -> None:
    """Intermediates live at the same time never share arena bytes."""
    spans = {v: span_bytes(vr.dtype, vr.sizes, vr.strides) for v, vr in enumerate(blob.values)}
    live = sorted((first, last, v) for v, (first, last) in live_ranges(blob).items() if spans[v] > 0)
    for i, (_first, last, v) in enumerate(live):
        lo, hi = blob.values[v].offset, blob.values[v].offset + spans[v]
        for first2, _last2, u in live[i + 1 :]:
            if first2 > last:
                break
            lo2, hi2 = blob.values[u].offset, blob.values[u].offset + spans[u]
            check(
                hi <= lo2 or hi2 <= lo,
                f"intermediates {v} and {u} are live at once (ops {first2}..{last}) but share arena bytes "
                f"[{max(lo, lo2)}, {min(hi, hi2)})",
            )


def _check_state(blob: DelegateBlob) -> None:
    """State values are live for the whole program: no two share a byte of the state buffer, and each is a launch
    argument of some op (a record's inputs and outputs never name one, `_check_ops`)."""
    used = {a.value for op in blob.ops for lr in op.launches for a in lr.args if isinstance(a, ValueRef)}
    placed: list[tuple[int, int, int]] = []  # (offset, end, value)
    for v, vr in enumerate(blob.values):
        if vr.kind != "state":
            continue
        check(v in used, f"state value {v} is not a launch argument of any op")
        span = span_bytes(vr.dtype, vr.sizes, vr.strides)
        if span > 0:
            placed.append((vr.offset, vr.offset + span, v))
    placed.sort()
    for (_lo, hi, v), (lo2, hi2, u) in zip(placed, placed[1:], strict=False):
        check(hi <= lo2, f"state values {v} and {u} share state bytes [{lo2}, {min(hi, hi2)})")
