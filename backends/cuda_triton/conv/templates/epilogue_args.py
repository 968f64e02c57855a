"""The launch arguments and constexprs of fused chains (conv/epilogue.py), for the kernels that take them.

Every kernel that takes an epilogue declares its three operand slots, used or not: ``e<k>_ptr`` (tensor role
``epilogue<k>``), ``e<k>_sn`` and ``e<k>_sc`` (int32 batch and channel strides of a `PER_NC` operand), then the
constexprs ``PROGRAM`` (the chain; empty: no epilogue) and ``E_KINDS`` (each slot's `EpilogueOperand.kind`, 0 when
absent). A kernel that takes a prologue declares the same with ``p<k>`` (role ``prologue<k>``), ``PROLOGUE`` and
``P_KINDS``, and ``P_IMAGES``: how many consecutive images one tile's rows can span (`prologue_images`).
"""

from __future__ import annotations

import math
from typing import Any, Protocol

from ...kernel.launch import TRITON_PTR_DTYPE, ScalarArg, TensorArg
from ..epilogue import MAX_OPERANDS, ConvEpilogue
from ..problem import ConvProblem

EPILOGUE_ROLES = tuple(f"epilogue{k + 1}" for k in range(MAX_OPERANDS))
PROLOGUE_ROLES = tuple(f"prologue{k + 1}" for k in range(MAX_OPERANDS))


def _chain_args(
    chain: ConvEpilogue | None, roles: tuple[str, ...], prefix: str, dtype: str
) -> tuple[TensorArg | ScalarArg, ...]:
    operands = chain.operands if chain is not None else ()
    out: list[TensorArg | ScalarArg] = []
    for k, role in enumerate(roles):
        op = operands[k] if k < len(operands) else None
        out += [
            TensorArg(role, op.dtype if op is not None else dtype, optional=True),
            ScalarArg(f"{prefix}{k + 1}_sn", "i32", op.s_n if op is not None else 0),
            ScalarArg(f"{prefix}{k + 1}_sc", "i32", op.s_c if op is not None else 0),
        ]
    return tuple(out)


def _chain_constexprs(chain: ConvEpilogue | None, program: str, kinds: str) -> tuple[tuple[str, Any], ...]:
    if chain is None:
        return ((program, ()), (kinds, (0,) * MAX_OPERANDS))
    return ((program, chain.program), (kinds, chain.kinds))


class TakesEpilogue(Protocol):
    """What the epilogue's arguments need of an op: a `ConvProblem` or a `GemmSpec` (ops/gemm/spec.py)."""

    @property
    def dtype(self) -> str: ...

    @property
    def epilogue(self) -> ConvEpilogue | None: ...


def epilogue_args(problem: TakesEpilogue) -> tuple[TensorArg | ScalarArg, ...]:
    """The three operand slots (absent without an epilogue)."""
    return _chain_args(problem.epilogue, EPILOGUE_ROLES, "e", TRITON_PTR_DTYPE[problem.dtype])


def epilogue_constexprs(problem: TakesEpilogue) -> tuple[tuple[str, Any], ...]:
    return _chain_constexprs(problem.epilogue, "PROGRAM", "E_KINDS")


def prologue_args(problem: ConvProblem) -> tuple[TensorArg | ScalarArg, ...]:
    """The prologue's three operand slots (absent without a prologue)."""
    return _chain_args(problem.prologue, PROLOGUE_ROLES, "p", TRITON_PTR_DTYPE[problem.dtype])


# A prologue operand is read per (image, input channel). When a tile's rows lie in at most this many images, the
# kernel loads one channel vector per image and selects per row (epilogue_jit.prologue_operand_tile); beyond it,
# a gather per element.
MAX_PROLOGUE_IMAGES = 4


def prologue_images(problem: ConvProblem, block_m: int, rows_in_one_image: bool = False) -> int:
    """How many consecutive images a tile of ``block_m`` consecutive output pixels can span (one where the
    schedule's tiles never cross an image, ``rows_in_one_image``); 0 (gather) above `MAX_PROLOGUE_IMAGES` and
    without a prologue."""
    if problem.prologue is None:
        return 0
    out_pixels = math.prod(problem.out_spatial)
    span = 1 if rows_in_one_image else min(problem.batch, -(-(block_m - 1) // out_pixels) + 1)
    return span if span <= MAX_PROLOGUE_IMAGES else 0


def prologue_constexprs(problem: ConvProblem, images: int) -> tuple[tuple[str, Any], ...]:
    """``PROLOGUE``, ``P_KINDS`` and ``P_IMAGES`` (``images``: `prologue_images` of the launch's tiles)."""
    return (*_chain_constexprs(problem.prologue, "PROLOGUE", "P_KINDS"), ("P_IMAGES", images))


__all__ = [
    "EPILOGUE_ROLES",
    "MAX_PROLOGUE_IMAGES",
    "PROLOGUE_ROLES",
    "epilogue_args",
    "epilogue_constexprs",
    "prologue_args",
    "prologue_constexprs",
    "prologue_images",
]
