"""Output phases of a transposed convolution on the host: positions and taps of each phase, and when one program
may compute every phase along W (W_FOLD)."""

from __future__ import annotations

from ....kernel.launch import Schedule
from ...problem import ConvProblem


def phase_counts(out_size: int, stride: int, padding_before: int) -> list[int]:
    """Number of output positions of each phase r (0 <= r < stride) along one dim."""
    counts = []
    for r in range(stride):
        q_start = (padding_before - r + stride - 1) // stride
        q_end = (padding_before + out_size - r + stride - 1) // stride
        counts.append(max(0, q_end - q_start))
    return counts


def phase_taps(kernel: int, stride: int, dilation: int) -> list[list[int]]:
    """The taps t of each phase r: those with t*dilation = r (mod stride)."""
    return [[t for t in range(kernel) if (t * dilation) % stride == r] for r in range(stride)]


def w_phases_fold(problem: ConvProblem) -> bool:
    """Whether one program may compute every phase along W (W_FOLD=1 schedules): kernel == stride >= 2 along W,
    dilation 1 and no padding before, so W phase j has the single tap j and reads input x = q (the same pixels
    for every phase), and the output is a whole number of strides long (every phase has OW / SW positions, q
    from 0). The stride must be a power of two: the folded tile is SW * BLOCK_N columns wide (a tl.arange)."""
    p = problem.params
    kernel, stride, dilation = problem.kernel[-1], p.stride[-1], p.dilation[-1]
    return (
        kernel == stride >= 2
        and stride & (stride - 1) == 0
        and dilation == 1
        and p.padding_before[-1] == 0
        and problem.out_spatial[-1] % stride == 0
    )


def uses_w_fold(schedule: Schedule) -> int:
    """The schedule's W_FOLD (0 when absent: a schedule without the key computes one W phase a program)."""
    return int(dict(schedule.params).get("W_FOLD", 0))
