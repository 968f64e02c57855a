"""Elementwise ops: unary, binary with broadcasting and scalars, glu, and fused chains of them.

- spec.py: `ElementwiseSpec` (a chain's inputs, program and output), `ChainBuilder`, `unary_spec`,
  `binary_spec`, `glu_spec`, `supports`.
- layout.py: `out_shape_and_stride`, the output layout rule of one op.
- math.py: each op's math, once: ``@triton.jit`` functions, `apply_chain` (what epilogues call), ATen references.
- program.py: the chain encoding.
- kernels.py / launches.py: the standalone chain kernel, its schedules and `launches(spec, schedule)`.
- reference.py: the CPU reference.
"""

from .launches import launches
from .layout import out_shape_and_stride
from .math import OPS, apply_chain, apply_op
from .program import MAX_INPUTS, describe
from .reference import reference
from .spec import ChainBuilder, ChainInput, ElementwiseSpec, binary_spec, glu_spec, supports, unary_spec

__all__ = [
    "MAX_INPUTS",
    "OPS",
    "ChainBuilder",
    "ChainInput",
    "ElementwiseSpec",
    "apply_chain",
    "apply_op",
    "binary_spec",
    "describe",
    "glu_spec",
    "launches",
    "out_shape_and_stride",
    "reference",
    "supports",
    "unary_spec",
]
