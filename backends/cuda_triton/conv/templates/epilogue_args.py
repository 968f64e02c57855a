"""The launch arguments and constexprs of fused chains (conv/epilogue.py), for the kernels that take them.

Every kernel that takes an epilogue declares its three operand slots, used or not: ``e<k>_ptr`` (tensor role
``epilogue<k>``), ``e<k>_sn`` and ``e<k>_sc`` (int32 batch and channel strides of a `PER_NC` operand), then the
constexprs ``PROGRAM`` (the chain; empty: no epilogue) and ``E_KINDS`` (each slot's `EpilogueOperand.kind`, 0 when
absent). A kernel that takes a prologue declares the same with ``p<k>`` (role ``prologue<k>``), ``PROLOGUE`` and
``P_KINDS``.
"""

from __future__ import annotations

from typing import Any

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


def epilogue_args(problem: ConvProblem, active: bool = True) -> tuple[TensorArg | ScalarArg, ...]:
    """The three operand slots; with ``active`` False (a launch of the op that does not apply the epilogue,
    e.g. a split-K share) all absent."""
    chain = problem.epilogue if active else None
    return _chain_args(chain, EPILOGUE_ROLES, "e", TRITON_PTR_DTYPE[problem.dtype])


def epilogue_constexprs(problem: ConvProblem, active: bool = True) -> tuple[tuple[str, Any], ...]:
    return _chain_constexprs(problem.epilogue if active else None, "PROGRAM", "E_KINDS")


def prologue_args(problem: ConvProblem) -> tuple[TensorArg | ScalarArg, ...]:
    """The prologue's three operand slots (absent without a prologue)."""
    return _chain_args(problem.prologue, PROLOGUE_ROLES, "p", TRITON_PTR_DTYPE[problem.dtype])


def prologue_constexprs(problem: ConvProblem) -> tuple[tuple[str, Any], ...]:
    return _chain_constexprs(problem.prologue, "PROLOGUE", "P_KINDS")


__all__ = [
    "EPILOGUE_ROLES",
    "PROLOGUE_ROLES",
    "epilogue_args",
    "epilogue_constexprs",
    "prologue_args",
    "prologue_constexprs",
]
