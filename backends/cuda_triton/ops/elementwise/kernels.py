"""The standalone elementwise kernel: one fused chain (program.py) over any strided, broadcast operands.

Each program computes BLOCK consecutive elements of the output in the output's memory order. The output's shape
has been reordered to that order and its dims merged wherever every operand steps through them alike
(spec.merged_dims), leaving RANK <= 5 dims: a per-channel bias on a channels-last tensor is [N*H*W, C], a
squeeze-excitation scale on a contiguous one [N*C, H*W]. The linear index is split into those dims once, and
each operand's offset is its own strides dotted with the indices.

Strides and sizes are runtime arguments, so one compiled kernel serves every shape of a chain and layout
pattern. Each operand's stride pattern is a constexpr, ``(offset kind, dim 0 kind, ..., dim 4 kind)`` with kind 0
(zero: broadcast, or no offset), 1 (unit stride: the compiler sees contiguous addresses and vectorizes) or 2
(any other stride, read from its argument). The chain is a constexpr too, so the ops compile to straight-line
code with their constants folded in.

``elementwise_kernel`` arguments (PTX order): out pointer, out offset, out strides 0-4, numel, sizes 1-4, then per
input present (in0 always, in1-in3 while the chain has them) its pointer, offset and strides 0-4. An absent
input's group is given as constexprs (None pointer, zeros). Constexprs: PROGRAM, RANK, the five stride
patterns, BLOCK, INDEX_64 (64-bit indices when offsets reach 2^31). Grid: (cdiv(numel, BLOCK), 1, 1).
"""

from __future__ import annotations

import triton
import triton.language as tl

from ...kernel.launch import Schedule
from .math import apply_chain

ZERO, UNIT, ANY = 0, 1, 2  # stride kinds of an operand's stride pattern


@triton.jit
def _unravel(lin, size1, size2, size3, size4, RANK: tl.constexpr):
    """The index along each of RANK dims (last fastest) of linear index ``lin``; dims past RANK get 0."""
    rest = lin
    i1 = 0
    i2 = 0
    i3 = 0
    i4 = 0
    if RANK > 4:
        i4 = rest % size4
        rest = rest // size4
    if RANK > 3:
        i3 = rest % size3
        rest = rest // size3
    if RANK > 2:
        i2 = rest % size2
        rest = rest // size2
    if RANK > 1:
        i1 = rest % size1
        rest = rest // size1
    return rest, i1, i2, i3, i4


@triton.jit
def _term(index, stride, KIND: tl.constexpr):
    if KIND == 0:
        return 0
    elif KIND == 1:
        return index
    else:
        return index * stride


@triton.jit
def _offset(off, i0, i1, i2, i3, i4, s0, s1, s2, s3, s4, KINDS: tl.constexpr):
    """An operand's element offsets ``off + sum(i_d * s_d)`` (a tensor like ``i0`` even when every stride is 0),
    with its stride pattern KINDS folded in."""
    o = tl.zeros_like(i0)
    if KINDS[0] != 0:
        o += off
    return (
        o
        + _term(i0, s0, KINDS[1])
        + _term(i1, s1, KINDS[2])
        + _term(i2, s2, KINDS[3])
        + _term(i3, s3, KINDS[4])
        + _term(i4, s4, KINDS[5])
    )


@triton.jit
def elementwise_kernel(
    out_ptr, out_off, out_s0, out_s1, out_s2, out_s3, out_s4,
    numel, size1, size2, size3, size4,
    in0_ptr, in0_off, in0_s0, in0_s1, in0_s2, in0_s3, in0_s4,
    in1_ptr, in1_off, in1_s0, in1_s1, in1_s2, in1_s3, in1_s4,
    in2_ptr, in2_off, in2_s0, in2_s1, in2_s2, in2_s3, in2_s4,
    in3_ptr, in3_off, in3_s0, in3_s1, in3_s2, in3_s3, in3_s4,
    PROGRAM: tl.constexpr, RANK: tl.constexpr,
    OUT_KINDS: tl.constexpr, IN0_KINDS: tl.constexpr, IN1_KINDS: tl.constexpr, IN2_KINDS: tl.constexpr,
    IN3_KINDS: tl.constexpr, BLOCK: tl.constexpr, INDEX_64: tl.constexpr,
):  # fmt: skip
    pid = tl.program_id(0)
    if INDEX_64:
        pid = pid.to(tl.int64)
    lin = pid * BLOCK + tl.arange(0, BLOCK)
    mask = lin < numel
    i0, i1, i2, i3, i4 = _unravel(lin, size1, size2, size3, size4, RANK)
    x0 = tl.load(in0_ptr + _offset(in0_off, i0, i1, i2, i3, i4, in0_s0, in0_s1, in0_s2, in0_s3, in0_s4, IN0_KINDS),
                 mask=mask).to(tl.float32)  # fmt: skip
    x1 = None
    if in1_ptr is not None:
        x1 = tl.load(in1_ptr + _offset(in1_off, i0, i1, i2, i3, i4, in1_s0, in1_s1, in1_s2, in1_s3, in1_s4, IN1_KINDS),
                     mask=mask).to(tl.float32)  # fmt: skip
    x2 = None
    if in2_ptr is not None:
        x2 = tl.load(in2_ptr + _offset(in2_off, i0, i1, i2, i3, i4, in2_s0, in2_s1, in2_s2, in2_s3, in2_s4, IN2_KINDS),
                     mask=mask).to(tl.float32)  # fmt: skip
    x3 = None
    if in3_ptr is not None:
        x3 = tl.load(in3_ptr + _offset(in3_off, i0, i1, i2, i3, i4, in3_s0, in3_s1, in3_s2, in3_s3, in3_s4, IN3_KINDS),
                     mask=mask).to(tl.float32)  # fmt: skip
    y = apply_chain(x0, x1, x2, x3, PROGRAM)
    out = out_ptr + _offset(out_off, i0, i1, i2, i3, i4, out_s0, out_s1, out_s2, out_s3, out_s4, OUT_KINDS)
    tl.store(out, y.to(out_ptr.dtype.element_ty), mask=mask)


def heuristic_schedule(numel: int) -> Schedule:
    """BLOCK elements per program: 1024 (8 per thread of 4 warps: 16-byte accesses in 16-bit), fewer for small
    tensors so that no program is mostly masked."""
    block = max(128, min(1024, triton.next_power_of_2(max(numel, 1))))
    return Schedule.make(num_warps=max(1, block // 256), num_stages=1, BLOCK=block)


def schedules(numel: int) -> list[Schedule]:
    """The tuning space: the heuristic's and a few other block sizes."""
    out = [heuristic_schedule(numel)]
    for block, warps in ((512, 4), (1024, 4), (2048, 8), (4096, 8)):
        s = Schedule.make(num_warps=warps, num_stages=1, BLOCK=block)
        if s not in out and block <= max(128, triton.next_power_of_2(max(numel, 1))):
            out.append(s)
    return out
