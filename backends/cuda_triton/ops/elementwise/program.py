"""The chain encoding: a DAG of elementwise ops flattened into a short straight-line program.

A chain has up to `MAX_INPUTS` tensor inputs and one output over one shape. Its values are numbered: 0 to
``MAX_INPUTS - 1`` are the inputs (the standalone kernel loads them; an epilogue passes its accumulator as value 0
and loads the others itself), and instruction k's result is value ``MAX_INPUTS + k``. An instruction is a
tuple of plain numbers, ``(code, a, b, c0, c1)``:

- ``code``: the op (`math.OPS`);
- ``a``, ``b``: the value indices of its operands; a unary op has ``b = SCALAR``; either operand of a binary op
  may be ``SCALAR``, meaning the constant ``c0`` (``x + 3`` is ``(ADD, 0, SCALAR, 3.0, 0.0)``);
- ``c0``, ``c1``: the op's float parameters (clamp bounds, leaky slope) or the scalar operand.

The last instruction's value is the chain's result. The program is a constexpr of the kernel, so each distinct
chain compiles to its own straight-line code with the constants folded in, and ``y = clamp(x + 3, 0, 6) / 6 * x``
(hardswish as the edge graph decomposes it) is::

    ((ADD, 0, SCALAR, 3.0, 0.0), (CLAMP, 4, SCALAR, 0.0, 6.0), (DIV, 5, SCALAR, 6.0, 0.0), (MUL, 6, 0, 0.0, 0.0))
"""

from __future__ import annotations

from .math import OPS, OPS_BY_CODE, SCALAR_OPERAND

MAX_INPUTS = 4
Instruction = tuple[int, int, int, float, float]
Program = tuple[Instruction, ...]


def instruction(name: str, a: int, b: int = SCALAR_OPERAND, c0: float = 0.0, c1: float = 0.0) -> Instruction:
    return (OPS[name].code, int(a), int(b), float(c0), float(c1))


def program_error(program: Program, num_inputs: int) -> str | None:
    """Why ``program`` is not a valid chain over ``num_inputs`` inputs, or None."""
    if not program:
        return "an elementwise chain needs at least one instruction"
    for k, ins in enumerate(program):
        if len(ins) != 5:
            return f"instruction {k} has {len(ins)} fields, not 5 (code, a, b, c0, c1)"
        code, a, b = ins[0], ins[1], ins[2]
        op = OPS_BY_CODE.get(code)
        if op is None:
            return f"instruction {k} has an unknown op code {code}"
        defined = list(range(num_inputs)) + [MAX_INPUTS + j for j in range(k)]
        operands = (a,) if op.arity == 1 else (a, b)
        if op.arity == 1 and b != SCALAR_OPERAND:
            return f"instruction {k} ({op.name}) is unary but names a second operand"
        if all(x == SCALAR_OPERAND for x in operands):
            return f"instruction {k} ({op.name}) has no tensor operand"
        for x in operands:
            if x != SCALAR_OPERAND and x not in defined:
                return f"instruction {k} ({op.name}) reads value {x}, which is not defined before it"
    return None


def describe(program: Program) -> str:
    """A readable form, e.g. ``v4 = add(v0, 3.0); v5 = clamp(v4, 0.0, 6.0)``."""

    def operand(x: int, c0: float) -> str:
        return repr(c0) if x == SCALAR_OPERAND else f"v{x}"

    parts = []
    for k, (code, a, b, c0, c1) in enumerate(program):
        op = OPS_BY_CODE[code]
        if op.arity == 2:
            args = [operand(a, c0), operand(b, c0)]
        else:
            args = [f"v{a}", *(repr(c) for c in (c0, c1)[: len(op.params)])]
        parts.append(f"v{MAX_INPUTS + k} = {op.name}({', '.join(args)})")
    return "; ".join(parts)
