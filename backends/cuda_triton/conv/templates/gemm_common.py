"""Host-side rules the GEMM-shaped forward templates share (gemm, implicit_gemm, implicit_gemm_tma,
implicit_gemm_box): what they support (`GemmShapedTemplate`), the ``tl.dot`` precision and the prepared weight's
order."""

from __future__ import annotations

from abc import abstractmethod

from ...kernel.launch import Schedule, Support
from ...ops.elementwise.math import OPS
from ..problem import ConvProblem
from ._tf32 import tf32_rounding
from .base import ConvTemplate
from .geometry import INT32_MAX, Geometry, is_dense

# Dtypes the GEMM-shaped kernels accept (fp64 has no tensor-core path worth having).
GEMM_DTYPES = ("float16", "bfloat16", "float32")
# Row tiles per group of the kernels' program order (`gemm_jit.grouped_tile_ids`): weight tiles stay in L2.
GROUP_M = 8
# Shortest reduction (taps x C_in) for which the gemm and implicit GEMM kernels decline a prologue: the chain is
# applied to every A tile on its way to the MMA, once per column tile and (implicit GEMM) per tap that reads the
# element, so on a long reduction it costs more than one elementwise kernel. Measured on the H100, fp16:
# squeeze-excitation's x * s before a 1x1 (scripts/bench_conv_epilogue.py, docs/bench/h100-conv-epilogue.md),
# fused against the elementwise kernel plus the plain conv, K = 16-120 1.03-1.77x, but K = 320 0.85-0.92x and
# K = 672 0.82x at batch 1 (1.00x at 32); wav2vec2's GELU before its second convolution (K = 1536) took 87.8 us
# profiled in the program against 27.5 us for the next, half-length layer without it.
PROLOGUE_MAX_K = 320
# Ops a prologue applies in an instruction or two an element: a chain of these alone, reading no tensor operand
# (a ReLU before a UNet's 3x3 convolution), costs less than a kernel of its own on any reduction.
_CHEAP_PROLOGUE_OPS = frozenset(
    OPS[name].code
    for name in ("copy", "relu", "clamp", "clamp_min", "clamp_max", "leaky_relu", "neg", "add", "sub", "mul")
)


def common_support_problems(problem: ConvProblem) -> str | None:
    """The reasons shared by every GEMM-shaped forward template, or None when the problem passes them."""
    if problem.transposed:
        return "transposed convolutions are not handled by this template"
    if problem.dtype not in GEMM_DTYPES:
        return f"dtype {problem.dtype} is not supported (only float16, bfloat16, float32)"
    if not 1 <= problem.spatial_dims <= 3:
        return f"{problem.spatial_dims}-D convolutions are not supported"
    if problem.batch == 0 or problem.in_channels == 0 or problem.out_channels == 0:
        return "empty tensors are not supported"
    if any(s <= 0 for s in problem.out_spatial):
        return "the output is empty"
    if not is_dense(problem.input_size, problem.input_stride):
        return "the input is neither dense contiguous nor dense channels-last"
    if not is_dense(problem.output_size, problem.output_stride):
        return "the output layout is neither dense contiguous nor dense channels-last"
    if any(v > INT32_MAX for v in (*problem.input_size, *problem.output_size)):
        return "a single dimension exceeds 2^31"
    return None


class GemmShapedTemplate(ConvTemplate):
    """A GEMM-shaped forward template: it supports a problem that passes the reasons every such template shares
    (`common_support_problems`) and its family's own (`family_support`)."""

    def supports(self, problem: ConvProblem) -> Support:
        reason = common_support_problems(problem)
        if reason:
            return Support.no(reason)
        return self.family_support(problem)

    @staticmethod
    def prologue_pays(problem: ConvProblem) -> bool:
        """Whether the kernel applies ``problem.prologue`` on its A tiles rather than leaving the chain to a kernel
        of its own: on reductions shorter than `PROLOGUE_MAX_K`, and on longer ones for a cheap chain."""
        prologue = problem.prologue
        g = Geometry.of(problem)
        if prologue is None or g.taps * g.cin < PROLOGUE_MAX_K:
            return True
        return not prologue.operands and all(ins[0] in _CHEAP_PROLOGUE_OPS for ins in prologue.program)

    @abstractmethod
    def family_support(self, problem: ConvProblem) -> Support:
        """Whether the family computes ``problem``, which passes the shared reasons."""


def tma_tap_problems(problem: ConvProblem, strided: bool = False) -> str | None:
    """The reasons shared by the TMA-fed templates (implicit_gemm_tma, implicit_gemm_box), or None: with stride 1,
    one group and no negative padding every tap's A tile is one rectangle of the input, and a TMA row is a
    whole number of 16-byte units. ``strided``: the caller reads strided taps itself (the box template's view)."""
    p = problem.params
    if not strided and any(s != 1 for s in p.stride):
        return "only stride 1 (a tap's input pixels must be one TMA rectangle)"
    if p.groups != 1:
        return "only groups == 1"
    if any(v < 0 for v in (*p.padding_before, *p.padding_after)):
        return "negative padding"
    if problem.in_channels * problem.element_size % 16:
        return "a TMA row must be a multiple of 16 bytes (input channels)"
    return None


def dot_precision(problem: ConvProblem) -> str:
    """``tl.dot`` input precision: TF32 for fp32 when allowed (PyTorch's conv default), else exact fp32."""
    if problem.dtype == "float32" and not problem.allow_tf32:
        return "ieee"
    return "tf32"


def dot_constexprs(problem: ConvProblem, f16_mma: bool = False) -> tuple[tuple[str, str | int], ...]:
    """The kernels' ``PRECISION`` and ``ROUND_TF32`` constexprs: `dot_precision` and the TF32 rounding mode, or
    exact products of unrounded operands on the fp16 tensor cores (``f16_mma``, _f16_mma.py)."""
    if f16_mma:
        return (("PRECISION", "ieee"), ("ROUND_TF32", 0))
    return (("PRECISION", dot_precision(problem)), ("ROUND_TF32", tf32_rounding(problem)))


def tile_constexprs(schedule: Schedule) -> tuple[tuple[str, int], ...]:
    """The kernels' tile constexprs, in their parameter order: ``BLOCK_M``, ``BLOCK_N``, ``BLOCK_K``, ``GROUP_M``."""
    return tuple((name, schedule[name]) for name in ("BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M"))


def weight_k_major(problem: ConvProblem) -> bool:
    """Whether the prepared weight matrix is stored K-major ([C_out, K]) instead of [K, C_out].

    Hopper's TF32 wgmma reads both operands K-major from shared memory; an N-major weight tile makes Triton
    transpose it through shared memory (or fall back to mma.sync) on every K step, which ran fp32 convs at a
    fifth of cuDNN's speed on the H200. 16-bit wgmma takes either order; those paths keep [K, C_out], the
    layout the fp16/bf16 heuristics were measured with.
    """
    return problem.dtype == "float32"
