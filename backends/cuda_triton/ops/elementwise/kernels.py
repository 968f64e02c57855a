"""The standalone elementwise kernel: one fused chain (program.py) over any strided, broadcast operands.

Each program computes BLOCK consecutive elements of the output in the output's memory order. The output's shape
has been reordered to that order and its dims merged wherever every operand steps through them alike
(spec.merged_dims), leaving RANK <= 5 dims: a per-channel bias on a channels-last tensor is [N*H*W, C], a
squeeze-excitation scale on a contiguous one [N*C, H*W]. The linear index is split into those dims once, and
each operand's offset is its own strides dotted with the indices.

Strides and sizes are runtime arguments, so one compiled kernel serves every shape of a chain and layout
pattern; each operand's stride pattern (indexing.py) is a constexpr. The chain is a constexpr too, so the ops
compile to straight-line code with their constants folded in.

``elementwise_kernel`` arguments (PTX order): out pointer, out offset, out strides 0-4, numel, sizes 1-4, then per
input present (in0 always, in1-in3 while the chain has them) its pointer, offset and strides 0-4. An absent
input's group is given as constexprs (None pointer, zeros). Constexprs: PROGRAM, RANK, the five stride
patterns, BLOCK, INDEX_64 (64-bit indices when offsets reach 2^31). Grid: (cdiv(numel, BLOCK), 1, 1).
"""

from __future__ import annotations

import triton
import triton.language as tl

from ...kernel.launch import Schedule
from ..indexing import load_fp32, strided_offset, unravel
from .math import apply_chain


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
    idx = unravel(lin, (size1, size2, size3, size4), RANK)
    x0 = load_fp32(in0_ptr, in0_off, (in0_s0, in0_s1, in0_s2, in0_s3, in0_s4), idx, IN0_KINDS, mask)
    x1 = None
    if in1_ptr is not None:
        x1 = load_fp32(in1_ptr, in1_off, (in1_s0, in1_s1, in1_s2, in1_s3, in1_s4), idx, IN1_KINDS, mask)
    x2 = None
    if in2_ptr is not None:
        x2 = load_fp32(in2_ptr, in2_off, (in2_s0, in2_s1, in2_s2, in2_s3, in2_s4), idx, IN2_KINDS, mask)
    x3 = None
    if in3_ptr is not None:
        x3 = load_fp32(in3_ptr, in3_off, (in3_s0, in3_s1, in3_s2, in3_s3, in3_s4), idx, IN3_KINDS, mask)
    y = apply_chain(x0, x1, x2, x3, PROGRAM)
    out = out_ptr + strided_offset(out_off, (out_s0, out_s1, out_s2, out_s3, out_s4), idx, OUT_KINDS)
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
