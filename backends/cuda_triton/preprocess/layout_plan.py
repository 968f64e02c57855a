"""Where the delegate stores its intermediates: channels-last through a CNN.

The graph records every tensor in the layout eager PyTorch gives it for the program's own inputs (contiguous
throughout, for a contiguous image). Inside the delegate the layout of an intermediate is ours to choose, and the
convolution kernels read and write channels-last fastest (a 1x1 convolution is then one GEMM over
``[N * H * W, C]``, a depthwise one reads whole channel vectors). With the ``channels_last`` option (on by
default):

* a convolution whose result stays inside the delegate writes it channels-last ((N, L, C) for a 1-D one). Its
  record declares the weight channels-last, which makes the convolution layout rule's output channels-last
  whatever the input's layout; the prepared weight the kernels read is the same either way
  (`ConvTemplate.prepare_weight`). A 2-D or 3-D convolution reading a channels-last input declares it so too
  (its result is channels-last by the rule anyway); a 1-D one, whose result layout follows its weight alone,
  keeps the recorded weight when it (or its fused chain) writes a delegate output, which it then writes directly;
* an op that keeps the layout of its input (elementwise by its family's rule, pooling, batch and group norm,
  pad, upsample, cat) writes channels-last when its image inputs are channels-last (`channels_last_like`);
* a view is a view of the stored bytes where one exists, else a copy (`preprocess.data_movement`);
* a delegate output keeps the layout the program records (ExecuTorch plans its buffer,
  `ProgramDraft.planned_strides`); a convolution whose rule gives another layout there writes an intermediate
  and a copy kernel moves it into the output.

Off, every value takes the layout its node records.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..conv.problem import ConvProblem
from ..ops.tensor_meta import Shape, channels_last_strides, is_channels_last_ordered, is_contiguous


def channels_last_like(
    sizes: Sequence[int], inputs: Sequence[tuple[Sequence[int], Sequence[int]]]
) -> Shape | None:
    """Dense channels-last strides for an output of ``sizes`` that keeps its inputs' layout: when it is 3-D (a 1-D
    map stored (N, L, C)), 4-D or 5-D and every input of its rank is channels-last ordered (dense, or a slice of
    such as ``chunk`` along channels gives), at least one of them not contiguous (a tensor whose size-1 dims make
    it both contiguous and channels-last decides nothing). None otherwise (the caller keeps the recorded
    layout)."""
    rank = len(sizes)
    if rank not in (3, 4, 5):
        return None
    images = [(s, st) for s, st in inputs if len(s) == rank]
    if not images or not all(is_channels_last_ordered(s, st) for s, st in images):
        return None
    if all(is_contiguous(s, st) for s, st in images):
        return None
    return channels_last_strides(sizes)


def planned_conv_problem(problem: ConvProblem, input_inside: bool, output_inside: bool) -> ConvProblem:
    """The problem the drafter will make of a convolution, predicted from the partitioned graph (the prefetch
    compiles its kernels early): a convolution reading a tensor computed in the delegate reads it channels-last,
    and one whose result stays inside declares its weight channels-last (dense channels-last strides, which make
    the layout rule's result channels-last: (N, L, C) for a 1-D one). A tensor computed in the
    delegate from its inputs by layout-keeping ops alone stays contiguous; a wrong guess costs only an early compile
    nobody uses. ``output_inside``: the result stays in the delegate, or the input is channels-last (the result is
    then channels-last whatever the weight, and the drafter declares the weight alike)."""
    x_strides = channels_last_strides(problem.input_size) if input_inside else problem.input_stride
    w_strides = channels_last_strides(problem.weight_size) if output_inside else problem.weight_stride
    return ConvProblem.from_shapes(
        problem.input_size, tuple(x_strides), problem.weight_size, tuple(w_strides), problem.has_bias,
        problem.params, problem.dtype, problem.allow_tf32,
    )  # fmt: skip


def same_addresses(sizes: Sequence[int], a: Sequence[int], b: Sequence[int]) -> bool:
    """Whether strides ``a`` and ``b`` address the same elements of ``sizes`` (they may differ on dims of size 1,
    which the runtime's layout checks ignore too)."""
    return len(a) == len(b) == len(sizes) and all(
        s == 1 or x == y for s, x, y in zip(sizes, a, b, strict=True)
    )


__all__ = ["channels_last_like", "planned_conv_problem", "same_addresses"]
