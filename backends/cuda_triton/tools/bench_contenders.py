"""What scripts/bench_conv.py times: our op, cuDNN and Inductor, each as a no-argument call on a case's tensors.

* ours: ``torch.ops.triton.convolution`` (the tuning table's schedule, or the heuristic's);
* cuDNN: PyTorch eager (``aten.convolution``; the caller sets ``cudnn.benchmark`` and TF32);
* Inductor: ``torch.compile(mode="max-autotune-no-cudagraphs")`` with conv backends = TRITON only.

Depends on torch and cuda_triton.conv only.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from . import conv_cases as nc


def ours_call(case: nc.Case, x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None) -> Callable[[], Any]:
    args = nc.params_of(case).as_op_args()
    return lambda: torch.ops.triton.convolution(x, w, b, *args)


def cudnn_call(case: nc.Case, x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None) -> Callable[[], Any]:
    from cuda_triton.conv.op import reference_convolution

    p = nc.params_of(case)
    return lambda: reference_convolution(x, w, b, p)


def inductor_call(
    case: nc.Case, x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None
) -> Callable[[], Any]:
    import torch._inductor.config as icfg

    from cuda_triton.conv.op import reference_convolution

    icfg.max_autotune_conv_backends = "TRITON"
    # Every case compiles the same lambda's code object: without a reset, Dynamo's recompile limit (8) makes
    # the 9th and later cases silently run eagerly (i.e. on cuDNN).
    torch._dynamo.reset()
    p = nc.params_of(case)
    compiled = torch.compile(lambda t: reference_convolution(t, w, b, p), mode="max-autotune-no-cudagraphs")
    return lambda: compiled(x)


def inductor_conv_path(fn: Callable[[], Any]) -> str:
    """Compile ``fn`` (its first call) and say how Inductor ran the convolution: 'triton' when its Triton conv
    template generated the kernel, 'aten' when it emitted an extern call to ATen's convolution (cuDNN) because
    the template cannot compile the case; max-autotune with TRITON-only conv backends still falls back."""
    from torch._inductor.utils import run_and_get_code

    _, codes = run_and_get_code(fn)
    code = "\n".join(codes)
    # Only the call counts: the output code's comments name aten.convolution for template kernels too.
    if "extern_kernels.convolution(" in code:
        return "aten"
    return "triton"


def inductor_cannot_compile(problem: Any) -> str | None:
    """The planner's reason why Inductor's Triton conv template cannot take ``problem`` (None: it can)."""
    from cuda_triton.conv.routing import inductor_cannot_compile as reason

    return reason(problem)
