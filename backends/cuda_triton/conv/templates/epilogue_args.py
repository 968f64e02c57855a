"""The launch arguments and constexprs of a fused epilogue (conv/epilogue.py), for the kernels that take one.

Every such kernel declares the three operand slots, used or not: ``e<k>_ptr`` (tensor role ``epilogue<k>``),
``e<k>_sn`` and ``e<k>_sc`` (int32 batch and channel strides of a `PER_NC` operand), then the constexprs
``PROGRAM`` (the chain; empty: no epilogue) and ``E_KINDS`` (each slot's `EpilogueOperand.kind`, 0 when absent).
"""

from __future__ import annotations

from typing import Any

from ...kernel.launch import TRITON_PTR_DTYPE, ScalarArg, TensorArg
from ..epilogue import MAX_OPERANDS
from ..problem import ConvProblem

EPILOGUE_ROLES = tuple(f"epilogue{k + 1}" for k in range(MAX_OPERANDS))


def epilogue_args(problem: ConvProblem, active: bool = True) -> tuple[TensorArg | ScalarArg, ...]:
    """The three operand slots; with ``active`` False (a launch of the op that does not apply the epilogue,
    e.g. a split-K share) all absent."""
    operands = problem.epilogue.operands if problem.epilogue is not None and active else ()
    out: list[TensorArg | ScalarArg] = []
    for k, role in enumerate(EPILOGUE_ROLES):
        op = operands[k] if k < len(operands) else None
        dtype = op.dtype if op is not None else TRITON_PTR_DTYPE[problem.dtype]
        out += [
            TensorArg(role, dtype, optional=True),
            ScalarArg(f"e{k + 1}_sn", "i32", op.s_n if op is not None else 0),
            ScalarArg(f"e{k + 1}_sc", "i32", op.s_c if op is not None else 0),
        ]
    return tuple(out)


def epilogue_constexprs(problem: ConvProblem, active: bool = True) -> tuple[tuple[str, Any], ...]:
    ep = problem.epilogue
    if ep is None or not active:
        return (("PROGRAM", ()), ("E_KINDS", (0,) * MAX_OPERANDS))
    return (("PROGRAM", ep.program), ("E_KINDS", ep.kinds))


__all__ = ["EPILOGUE_ROLES", "epilogue_args", "epilogue_constexprs"]
