"""Convolution core: binding, the canonical op, the layout rule, templates and the planner.

Depends on torch and triton only (never on executorch), so it imports on the GPU machine.
Importing it registers ``torch.ops.triton.convolution``.
"""

from . import op as _op  # noqa: F401  (registers torch.ops.triton.convolution)
from .binding import ConvArgs, ConvBindingError, bind_conv
from .layout import out_shape_and_stride
from .op import reference_convolution, triton_convolution
from .params import ConvParams
from .problem import ConvProblem

__all__ = [
    "ConvArgs",
    "ConvBindingError",
    "ConvParams",
    "ConvProblem",
    "bind_conv",
    "out_shape_and_stride",
    "reference_convolution",
    "triton_convolution",
]
