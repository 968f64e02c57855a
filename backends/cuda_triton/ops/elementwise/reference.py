"""CPU reference of an elementwise chain: the same program, each op by its ATen definition (math.OPS), in fp32.

The inputs are widened to fp32 and the result rounded once to the output dtype, as the kernel does (eager
PyTorch rounds 16-bit results after every op; a chain's reference is the chain computed exactly, then rounded).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from .math import OPS_BY_CODE, SCALAR_OPERAND
from .program import MAX_INPUTS, Program
from .spec import ElementwiseSpec


def chain_input(tensor: torch.Tensor, sizes, strides, offset: int) -> torch.Tensor:
    """The view a `ChainInput` names, of the op's tensor ``tensor``."""
    return torch.as_strided(tensor, sizes, strides, tensor.storage_offset() + offset)


def run_program(program: Program, inputs: Sequence[torch.Tensor]) -> torch.Tensor:
    """A chain program on fp32 tensors (value i = ``inputs[i]``, broadcast as ATen broadcasts), each op by its
    ATen definition; the fp32 result."""
    values: list[torch.Tensor | None] = [x.float() for x in inputs]
    values += [None] * (MAX_INPUTS - len(values))
    for code, a, b, c0, c1 in program:
        op = OPS_BY_CODE[code]
        if op.arity == 2:
            args = [c0 if x == SCALAR_OPERAND else values[x] for x in (a, b)]
        else:
            args = [values[a], *(c0, c1)[: len(op.params)]]
        values.append(op.reference(*args))
    result = values[-1]
    assert result is not None
    return result


def reference(spec: ElementwiseSpec, tensors: dict[str, torch.Tensor]) -> torch.Tensor:
    """``spec``'s output for the op's tensors by role, in the spec's output dtype and strides."""
    inputs = [chain_input(tensors[i.role], i.view.sizes, i.view.strides, i.offset) for i in spec.inputs]
    result = run_program(spec.program, inputs)
    out = torch.empty_strided(spec.out.sizes, spec.out.strides, dtype=getattr(torch, spec.out.dtype))
    out.copy_(result.expand(spec.out.sizes))
    return out
