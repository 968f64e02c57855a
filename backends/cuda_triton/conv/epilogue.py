"""A convolution's (or a GEMM's) fused epilogue: an elementwise chain applied to its result in registers, before
the store.

The chain is the elementwise family's (`ops.elementwise.program`): value 0 is the convolution's result (bias
added), values 1-3 are the epilogue's operands, each read in one of two ways that every output tile can address
from the (image, output pixel, channel) it already knows:

* `LIKE_OUTPUT`: a tensor of the output's sizes stored in the output's layout (a residual the delegate keeps in
  the same layout), read at the output element's own offset;
* `PER_NC`: a tensor that broadcasts to the output with every spatial dim of size 1 (a squeeze-excitation scale
  ``[N, C, 1, 1]``, a per-channel vector ``[C, 1, 1]``), read at ``n * s_n + c * s_c`` (a stride 0 where it
  broadcasts).

The kernels that take an epilogue (`ConvTemplate.takes_epilogue`) load the operands as fp32 and call the
family's `apply_chain`, so each op's math is the one the standalone elementwise kernel and the CPU reference use.
A fused *prologue* is the same kind of chain applied to the convolution's input as its kernel loads it, before
the multiply: value 0 is the input element, values 1-3 are `PER_NC` operands indexed by the input's (image,
input channel). Squeeze-excitation's ``x * sigmoid(s)`` read by the next 1x1 convolution is one: the scaled map is
never stored. The chain's result is rounded to the input's dtype before the multiply, as the standalone kernel
would have stored it.

A GEMM (`ops.gemm`) takes the same epilogue on its [B, M, N] result (`gemm_epilogue_operand`): `LIKE_OUTPUT`
operands, and per-column ones (a layer scale ``gamma`` [N]) as `PER_NC` with ``s_n`` 0, the column standing for
the channel.

Torch-free, like the layout rule: the GPU machine imports it without executorch.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial

from ..ops.elementwise.program import MAX_INPUTS, Program

LIKE_OUTPUT = 1
PER_NC = 2
# Epilogue operands (chain inputs 1-3): the chain's input 0 is the convolution's result.
MAX_OPERANDS = MAX_INPUTS - 1
_INT32_LIMIT = 2**31


@dataclass(frozen=True)
class EpilogueOperand:
    """How the epilogue reads one operand: `LIKE_OUTPUT`, or `PER_NC` with its batch and channel strides
    (elements); ``dtype`` is its Triton pointer dtype name (``fp16``, ``bf16``, ``fp32``)."""

    kind: int
    dtype: str
    s_n: int = 0
    s_c: int = 0


@dataclass(frozen=True)
class ConvEpilogue:
    """The chain (value 0: the convolution's result) and how to read each of its other inputs, in order."""

    program: Program
    operands: tuple[EpilogueOperand, ...]

    @property
    def kinds(self) -> tuple[int, ...]:
        """The operand kinds padded with 0 (absent) to `MAX_OPERANDS`: the kernels' ``E_KINDS`` constexpr."""
        return tuple(o.kind for o in self.operands) + (0,) * (MAX_OPERANDS - len(self.operands))


@dataclass(frozen=True)
class ConvPrologue(ConvEpilogue):
    """A chain on the convolution's input (value 0: the input element); every operand is `PER_NC`."""


def prologue_operand(
    sizes: Sequence[int], strides: Sequence[int], dtype: str, in_sizes: Sequence[int]
) -> EpilogueOperand | None:
    """How a prologue reads a tensor of ``sizes``/``strides`` against a convolution input of ``in_sizes``
    (batched): `PER_NC` only; None for anything else (a second map, a spatial broadcast)."""
    if not _addressable(sizes, strides, len(in_sizes)):
        return None
    return _per_nc_operand(sizes, strides, dtype, in_sizes)


def epilogue_operand(
    sizes: Sequence[int],
    strides: Sequence[int],
    dtype: str,
    out_sizes: Sequence[int],
    out_strides: Sequence[int],
    per_column: bool = False,
) -> EpilogueOperand | None:
    """How an epilogue reads a tensor of ``sizes``/``strides`` against a convolution output of ``out_sizes``/
    ``out_strides`` (batched, ``[N, C, *spatial]``): `LIKE_OUTPUT` or `PER_NC`. With ``per_column``, against a
    GEMM's output (``[..., M, N]``): `LIKE_OUTPUT`, or one value per output column (every dim but the last of size
    1, right-aligned) as `PER_NC` with no image stride. None when neither way reads it right (for a GEMM, a
    per-row or per-batch operand)."""
    if not out_sizes or not _addressable(sizes, strides, len(out_sizes)):
        return None
    broadcast = _per_column_operand if per_column else _per_nc_operand
    return _like_output(sizes, strides, dtype, out_sizes, out_strides) or broadcast(
        sizes, strides, dtype, out_sizes
    )


# The GEMM family's epilogue operands (ops.gemm): `epilogue_operand` against a [..., M, N] output.
gemm_epilogue_operand = partial(epilogue_operand, per_column=True)


def _per_column_operand(
    sizes: Sequence[int], strides: Sequence[int], dtype: str, out_sizes: Sequence[int]
) -> EpilogueOperand | None:
    """One value per output column of a GEMM: `PER_NC` with no image stride."""
    if not sizes or any(s != 1 for s in sizes[:-1]) or sizes[-1] not in (1, out_sizes[-1]):
        return None
    return EpilogueOperand(PER_NC, dtype, 0, strides[-1] if sizes[-1] > 1 else 0)


def _like_output(
    sizes: Sequence[int],
    strides: Sequence[int],
    dtype: str,
    out_sizes: Sequence[int],
    out_strides: Sequence[int],
) -> EpilogueOperand | None:
    """`LIKE_OUTPUT` for a tensor of the output's sizes and of its element offsets wherever a dim has more than
    one element; None otherwise."""
    like = list(sizes) == list(out_sizes) and all(
        s == 1 or a == b for s, a, b in zip(sizes, strides, out_strides, strict=True)
    )
    return EpilogueOperand(LIKE_OUTPUT, dtype) if like else None


def _addressable(sizes: Sequence[int], strides: Sequence[int], rank: int) -> bool:
    """At most ``rank`` dims, no negative stride, every offset within int32 (the kernels' stride arguments)."""
    if len(sizes) > rank or any(s < 0 for s in strides):
        return False
    return sum((s - 1) * abs(st) for s, st in zip(sizes, strides, strict=True) if s > 0) < _INT32_LIMIT


def _per_nc_operand(
    sizes: Sequence[int], strides: Sequence[int], dtype: str, target: Sequence[int]
) -> EpilogueOperand | None:
    """`PER_NC` against ``target`` [N, C, *spatial] when ``sizes`` (right-aligned, NumPy broadcasting) is one
    value per image and channel (the blob's rule, `per_image_and_channel`); None otherwise."""
    # The rule the blob readers check; imported here because the serialization package imports this one.
    from ..serialization.checks.elementwise import per_image_and_channel

    if not per_image_and_channel(list(sizes), list(target)):
        return None
    pad = len(target) - len(sizes)
    full = [1] * pad + list(sizes)
    full_strides = [0] * pad + list(strides)
    s_n = full_strides[0] if full[0] > 1 else 0
    s_c = full_strides[1] if full[1] > 1 else 0
    return EpilogueOperand(PER_NC, dtype, s_n, s_c)


__all__ = [
    "LIKE_OUTPUT",
    "MAX_OPERANDS",
    "PER_NC",
    "ConvEpilogue",
    "ConvPrologue",
    "EpilogueOperand",
    "epilogue_operand",
    "gemm_epilogue_operand",
    "prologue_operand",
]
